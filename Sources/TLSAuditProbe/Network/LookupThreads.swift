import Foundation
import TLSAuditSupport

/// Threads kept for name lookups. getaddrinfo(3) has no deadline, so `Resolver.resolve` runs it on
/// one of these and stops waiting when the timeout passes. A thread that finishes a lookup takes the
/// next one queued, or waits idle for up to `idleLifetime` and then ends; a lookup is handed to an
/// idle thread when there is one, else a thread is started, so a lookup that hangs never holds up
/// another. (A new thread per lookup cost a clone, a stack and often a malloc arena each: in a
/// 200-target scan, 200 threads.)
package final class LookupThreads: Sendable {
    package static let shared = LookupThreads()

    /// How long a thread with nothing to do waits for a lookup before it ends.
    static let idleLifetime: DispatchTimeInterval = .seconds(5)

    /// An idle thread: a lookup is handed to it in `job`, then it is woken by its own semaphore
    /// (no other thread can take its wake-up).
    private final class IdleThread: @unchecked Sendable {
        // @unchecked: `job` is written by a submitter under the pool's lock before `wakeup` is
        // signalled, and read by the thread after `wakeup.wait()` returns.
        let wakeup = DispatchSemaphore(value: 0)
        var job: (@Sendable () -> Void)?
    }

    private struct State {
        var queue: [@Sendable () -> Void] = []
        var idle: [IdleThread] = []
    }

    private let state = SleepingLock(State())

    package init() {}

    /// Threads waiting for a lookup (for tests).
    package var idleCount: Int { state.withLock { $0.idle.count } }

    /// Runs `job` on a lookup thread (an idle one, else a new one); returns at once.
    package func run(_ job: @escaping @Sendable () -> Void) {
        let handedTo: IdleThread? = state.withLock { state in
            guard let thread = state.idle.popLast() else {
                state.queue.append(job)
                return nil
            }
            thread.job = job
            return thread
        }
        if let handedTo {
            handedTo.wakeup.signal()
        } else {
            Thread { self.work() }.start()
        }
    }

    /// Takes queued lookups; with none, waits idle. A submitter that takes this thread off the idle
    /// list has handed it a lookup and signals it, so after a timeout the thread either removes
    /// itself from the list and ends, or finds itself taken and waits for that lookup.
    private func work() {
        let me = IdleThread()
        var next: (@Sendable () -> Void)? = nil
        while true {
            if let job = next {
                job()
                next = nil
            }
            let queued: (@Sendable () -> Void)? = state.withLock { state in
                if !state.queue.isEmpty { return state.queue.removeFirst() }
                state.idle.append(me)
                return nil
            }
            if let queued {
                next = queued
                continue
            }
            if me.wakeup.wait(timeout: .now() + Self.idleLifetime) == .timedOut {
                let ends = state.withLock { state in
                    guard let index = state.idle.firstIndex(where: { $0 === me }) else { return false }
                    state.idle.remove(at: index)
                    return true
                }
                if ends { return }
                me.wakeup.wait() // taken just as it timed out: its lookup's signal is on its way
            }
            next = state.withLock { _ in me.job }
            me.job = nil
        }
    }
}
