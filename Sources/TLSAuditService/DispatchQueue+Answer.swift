import Dispatch
import Synchronization

extension DispatchQueue {
    /// `body`'s value, run on this queue, when it comes within `timeout` seconds; nil when the
    /// queue is busy longer (a health check must not wait on a stuck queue).
    func answer<T: Sendable>(within timeout: Double, _ body: @escaping @Sendable () -> T) -> T? {
        let value = Mutex<T?>(nil)
        let answered = DispatchSemaphore(value: 0)
        async {
            value.withLock { $0 = body() }
            answered.signal()
        }
        guard answered.wait(timeout: .now() + timeout) == .success else { return nil }
        return value.withLock { $0 }
    }
}
