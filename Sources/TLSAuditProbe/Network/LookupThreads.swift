import Foundation
import TLSAuditSupport

/// Threads kept for name lookups. getaddrinfo(3) has no deadline, so `Resolver.resolve` runs it on
/// one of these and stops waiting when the timeout passes. A thread that finishes a lookup takes the
/// next one queued, or waits idle for up to `idleLifetime` and then ends; a thread is started only
/// when none is idle, so a lookup that hangs never holds up another. (A new thread per lookup cost a
/// clone, a stack and often a malloc arena each: in a 200-target scan, 200 threads.)
package final class LookupThreads: Sendable {
    package static let shared = LookupThreads()

    /// How long a thread with nothing to do waits for a lookup before it ends.
    static let idleLifetime: DispatchTimeInterval = .seconds(5)

    private struct State {
        var queue: [@Sendable () -> Void] = []
        /// Threads waiting on `wakeup` that no submitter has yet counted out.
        var idle = 0
    }

    private let state = SleepingLock(State())
    private let wakeup = DispatchSemaphore(value: 0)

    package init() {}

    /// Runs `job` on a lookup thread (an idle one, else a new one); returns at once.
    package func run(_ job: @escaping @Sendable () -> Void) {
        let wakesIdleThread = state.withLock { state in
            state.queue.append(job)
            guard state.idle > 0 else { return false }
            state.idle -= 1
            return true
        }
        if wakesIdleThread {
            wakeup.signal()
        } else {
            Thread { self.work() }.start()
        }
    }

    /// Every submission either wakes a counted-out idle thread or starts one, after its job is
    /// queued, so each queued job has a thread that looks at the queue after it was added.
    private func work() {
        while true {
            let job: (@Sendable () -> Void)? = state.withLock { state in
                if !state.queue.isEmpty { return state.queue.removeFirst() }
                state.idle += 1
                return nil
            }
            if let job {
                job()
                continue
            }
            if wakeup.wait(timeout: .now() + Self.idleLifetime) == .success { continue }
            // Timed out: end, unless a submitter has already counted this thread (or another idle
            // one; they are alike) out of `idle`, in which case its signal is owed to a waiter.
            let ends = state.withLock { state in
                guard state.idle > 0 else { return false }
                state.idle -= 1
                return true
            }
            if ends { return }
            wakeup.wait()
        }
    }
}
