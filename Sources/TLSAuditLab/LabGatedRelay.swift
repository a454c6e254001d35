import Foundation
import TLSAuditProbe
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on loopback to another loopback port that can hold connections: while held, a
/// new connection waits (its client's bytes unread) until `release()`, then is relayed both ways.
/// Tests use it to keep a scan running across a moment they choose (a clock step, a restart).
public final class LabGatedRelay: Sendable {
    public let port: Int
    private let listener: LabListener
    private let gate = Gate()

    private final class Gate: Sendable {
        /// Whether new connections wait, and how many wait now.
        let state = Mutex<(holding: Bool, waiting: Int)>((false, 0))
        let condition = DispatchSemaphore(value: 0)
    }

    /// Relays to `127.0.0.1:upstreamPort`.
    public init(to upstreamPort: Int) throws {
        let gate = self.gate
        listener = try LabListener(address: "127.0.0.1") { client in
            defer { close(client) }
            if gate.state.withLock({ state in
                if state.holding { state.waiting += 1 }
                return state.holding
            }) {
                gate.condition.wait()
            }
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
    public func hold() { gate.state.withLock { $0.holding = true } }

    /// Connections waiting now.
    public var waiting: Int { gate.state.withLock { $0.waiting } }

    /// Lets every waiting connection through, and relays new ones at once.
    public func release() {
        let count = gate.state.withLock { state in
            defer { state = (false, 0) }
            return state.waiting
        }
        for _ in 0..<count { gate.condition.signal() }
    }

    public func stop() {
        release()
        listener.stop()
    }
}
