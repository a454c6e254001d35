#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a lock whose waiters sleep at once (a plain pthread mutex), for state that
/// the scanner's workers share on every target (caches of certificate summaries, built paths,
/// JSON keys). The standard library's `Mutex` spins about a thousand times before it sleeps: with
/// 64 workers on two cores the holder is often descheduled, and the spinning waiters burned 5% of
/// a scan's CPU (measured on 2,000 targets; docs/performance.md).
public final class SleepingLock<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched between pthread_mutex_lock and unlock.
    private var value: Value
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, the lock held.
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
