import Foundation
import Synchronization

/// A pool of long-lived worker threads pulling jobs from a queue. Jobs block (in poll), so
/// the thread count is the concurrency; it can grow on reload but never shrinks below it.
final class JobPool: Sendable {
    private let state = Mutex<(jobs: [@Sendable () -> Void], threads: Int)>(([], 0))
    private let available = DispatchSemaphore(value: 0)

    init(threads: Int) { grow(to: threads) }

    func grow(to count: Int) {
        let toStart = state.withLock { state -> Int in
            let missing = max(0, count - state.threads)
            state.threads += missing
            return missing
        }
        for _ in 0..<toStart {
            let thread = Thread { [self] in
                while true {
                    available.wait()
                    let job = state.withLock { $0.jobs.isEmpty ? nil : $0.jobs.removeFirst() }
                    job?()
                }
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        state.withLock { $0.jobs.append(job) }
        available.signal()
    }
}
