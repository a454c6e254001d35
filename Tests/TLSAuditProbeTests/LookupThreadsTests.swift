import Foundation
import Synchronization
import Testing
import TLSAuditCore
import TLSAuditProbe

/// The threads that run name lookups (`Resolver.resolve`): one that hangs holds up no other, and a
/// thread that finished is used again instead of a new one.
@Suite("Lookup threads")
struct LookupThreadsTests {
    /// The calling thread's identity as a number.
    static func threadID() -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(Unmanaged.passUnretained(Thread.current).toOpaque()))) }

    @Test("a lookup that blocks does not delay the next; a finished thread takes the next lookup")
    func noHeadOfLineBlockingAndReuse() throws {
        let threads = LookupThreads()
        let release = DispatchSemaphore(value: 0)
        let blockedStarted = DispatchSemaphore(value: 0)
        threads.run {
            blockedStarted.signal()
            release.wait() // a lookup that hangs until the test lets it go
        }
        #expect(blockedStarted.wait(timeout: .now() + 5) == .success)
        // While the first thread hangs, a second lookup runs and finishes.
        let second = DispatchSemaphore(value: 0)
        let secondThread = Mutex<UInt?>(nil)
        threads.run {
            secondThread.withLock { $0 = Self.threadID() }
            second.signal()
        }
        #expect(second.wait(timeout: .now() + 5) == .success, "the second lookup waited for the hanging one")
        let idleBy = Date().addingTimeInterval(5)
        while threads.idleCount == 0, Date() < idleBy { Thread.sleep(forTimeInterval: 0.001) }
        // The second lookup's thread is idle now: the next lookups run on it, one after the other.
        for _ in 0..<5 {
            let done = DispatchSemaphore(value: 0)
            let ranOn = Mutex<UInt?>(nil)
            threads.run {
                ranOn.withLock { $0 = Self.threadID() }
                done.signal()
            }
            #expect(done.wait(timeout: .now() + 5) == .success)
            #expect(ranOn.withLock { $0 } == secondThread.withLock { $0 }, "a new thread was started though one was idle")
            // Let it go idle again before the next (its job signals before the thread returns to the pool).
            let deadline = Date().addingTimeInterval(5)
            while threads.idleCount == 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.001) }
        }
        release.signal()
    }

    @Test("a name's addresses are asked for once within the answer lifetime, each caller getting its own port; an answer is forgotten after its lifetime; a failure is not kept")
    func recentAnswers() throws {
        let first = try Resolver.resolve(host: "localhost", port: 1443, timeout: 5)
        #expect(!first.isEmpty && first.allSatisfy { $0.port == 1443 })
        let kept = try #require(Resolver.RecentAnswers.shared.addresses(of: "LOCALHOST"))
        #expect(kept.map(\.host) == first.map(\.host))
        let second = try Resolver.resolve(host: "localhost", port: 8443, timeout: 5)
        #expect(second.map(\.host) == first.map(\.host) && second.allSatisfy { $0.port == 8443 })
        #expect(second.map(\.description).allSatisfy { $0.hasSuffix(":8443") })

        let answers = Resolver.RecentAnswers(lifetime: .milliseconds(50))
        answers.keep(first, for: "example.test")
        // Names fold as DNS folds them: ASCII only (U+212A KELVIN SIGN is no "k").
        #expect(answers.addresses(of: "EXAMPLE.test") == first)
        answers.keep(first, for: "kelvin.test")
        #expect(answers.addresses(of: "\u{212A}elvin.test") == nil)
        #expect(answers.addresses(of: "example.test") == first)
        Thread.sleep(forTimeInterval: 0.1)
        #expect(answers.addresses(of: "example.test") == nil)

        #expect(throws: ProbeFailure.self) { try Resolver.resolve(host: "no-such-name.invalid", port: 443, timeout: 5) }
        #expect(Resolver.RecentAnswers.shared.addresses(of: "no-such-name.invalid") == nil)
    }
}
