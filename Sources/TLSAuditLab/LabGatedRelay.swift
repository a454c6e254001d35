import Foundation
import TLSAuditProbe
#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on loopback to another loopback port that can hold connections: while held, a
/// new connection waits (its client's bytes unread) until `release()` (or 30 s), then is relayed both ways.
/// Tests use it to keep a scan running across a moment they choose (a clock step, a restart).
public final class LabGatedRelay: Sendable {
    public let port: Int
    private let listener: LabListener
    private let gate = Gate()

    /// Whether new connections wait, how many wait, and the release they wait for: a waiter
    /// goes on when the generation it noted has passed (a later hold cannot take its turn).
    private final class Gate: @unchecked Sendable {
        // @unchecked: every field is read and written with `condition` locked.
        private let condition = NSCondition()
        private var holding = false
        private var waitingCount = 0
        private var generation = 0

        /// Waits (up to 30 s) when holding, until the next `release()`.
        func pass() {
            condition.lock()
            defer { condition.unlock() }
            guard holding else { return }
            let noted = generation
            waitingCount += 1
            let deadline = Date().addingTimeInterval(30)
            while generation == noted, condition.wait(until: deadline) {}
            if generation == noted { waitingCount -= 1 } // timed out: no release counted it
        }

        func hold() {
            condition.lock()
            holding = true
            condition.unlock()
        }

        var waiting: Int {
            condition.lock()
            defer { condition.unlock() }
            return waitingCount
        }

        func release() {
            condition.lock()
            holding = false
            waitingCount = 0
            generation += 1
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Relays to `127.0.0.1:upstreamPort`.
    public init(to upstreamPort: Int) throws {
        let gate = self.gate
        listener = try LabListener(address: "127.0.0.1") { client in
            defer { close(client) }
            gate.pass()
            guard let address = Resolver.numericAddress("127.0.0.1", port: upstreamPort) else { return }
            let upstream = socket(address.socketFamily, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard upstream >= 0 else { return }
            defer { close(upstream) }
            guard address.withSockaddr({ connect(upstream, $0, $1) }) == 0 else { return }
            LabListener.relay(client, upstream)
        }
        port = listener.port
    }

    /// From now on, new connections wait for `release()`.
    public func hold() { gate.hold() }

    /// Connections waiting now.
    public var waiting: Int { gate.waiting }

    /// Lets every waiting connection through, and relays new ones at once.
    public func release() { gate.release() }

    public func stop() {
        release()
        listener.stop()
    }

    deinit { gate.release() }
}
