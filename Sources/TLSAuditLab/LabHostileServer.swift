import Foundation
import TLSAuditProbe
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Servers that misbehave in the ways a scanner must survive, on a loopback ephemeral port.
public final class LabHostileServer: Sendable {
    public enum Behavior: Sendable {
        /// Accepts and never answers (a tarpit).
        case tarpit
        /// Answers like a plain HTTP server.
        case plainHTTP
        /// Answers with random bytes.
        case garbage
        /// Reads the ClientHello and closes the connection.
        case closeAfterClientHello
        /// Reads the ClientHello and sends a fatal TLS alert with this description number.
        case alert(UInt8)
        /// Listens with a full backlog and never accepts: connection attempts time out.
        case blackhole
        /// Answers any ClientHello with an SSL 3.0 ServerHello (what a server that still speaks SSLv3 sends).
        case sslv3ServerHello
    }

    public let port: Int
    private let listener: LabListener
    private let connections = Connections()

    /// Counts connections being served, and the most ever at once. A connection counts as open
    /// until its peer has closed it: when a new one arrives, those whose peer already hung up are
    /// counted as closed first (the kernel knows at once; their handler thread may not have woken
    /// up yet), so the peak is what the client really held open, not a scheduling delay here.
    private final class Connections: Sendable {
        private let state = Mutex<(open: Set<Int32>, peak: Int, total: Int)>(([], 0, 0))

        func opened(_ fd: Int32) {
            state.withLock { state in
                for other in state.open where Self.peerClosed(other) { state.open.remove(other) }
                state.open.insert(fd)
                state.total += 1
                state.peak = max(state.peak, state.open.count)
            }
        }

        /// Called before `fd` is closed (so that its number cannot be reused meanwhile).
        func closed(_ fd: Int32) { state.withLock { _ = $0.open.remove(fd) } }
        var peak: Int { state.withLock { $0.peak } }
        var total: Int { state.withLock { $0.total } }

        private static func peerClosed(_ fd: Int32) -> Bool {
            var entry = pollfd(fd: fd, events: Int16(0x2000) /* POLLRDHUP */, revents: 0)
            return poll(&entry, 1, 0) > 0 && entry.revents & Int16(0x2000 | Int32(POLLHUP) | Int32(POLLERR)) != 0
        }
    }

    /// The most connections this server held open at the same time.
    public var peakConnections: Int { connections.peak }
    /// Connections accepted so far.
    public var totalConnections: Int { connections.total }
    /// Connections that fill the backlog of a blackhole listener.
    private let fillers: [Int32]

    public init(_ behavior: Behavior, bindAddress: String = "127.0.0.1") throws {
        if case .blackhole = behavior {
            listener = try LabListener(address: bindAddress, backlog: 0, accepting: false) { _ in }
            port = listener.port
            fillers = Self.fillBacklog(address: bindAddress, port: listener.port)
            return
        }
        let connections = self.connections
        listener = try LabListener(address: bindAddress) { fd in
            connections.opened(fd)
            Self.misbehave(behavior, fd: fd)
            connections.closed(fd)
            close(fd)
        }
        port = listener.port
        fillers = []
    }

    public func stop() {
        listener.stop()
        for fd in fillers { close(fd) }
    }

    deinit { for fd in fillers { close(fd) } }

    /// Serves `fd` badly; the caller closes it.
    private static func misbehave(_ behavior: Behavior, fd: Int32) {
        LabListener.setTimeouts(fd, seconds: 30)
        var buffer = [UInt8](repeating: 0, count: 16_384)
        switch behavior {
        case .tarpit:
            // Hold the connection open, reading nothing, until the client gives up.
            var entry = pollfd(fd: fd, events: 0x2000 /* POLLRDHUP */, revents: 0)
            _ = poll(&entry, 1, 30_000)
        case .plainHTTP:
            _ = read(fd, &buffer, buffer.count)
            let response = Array("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nThis is a plain HTTP server.\n".utf8)
            _ = write(fd, response, response.count)
        case .garbage:
            _ = read(fd, &buffer, buffer.count)
            let noise = (0..<512).map { _ in UInt8.random(in: 0...255) }
            // Never start like a TLS record, so the test is deterministic.
            _ = write(fd, [0x9f, 0x00] + noise, noise.count + 2)
        case .closeAfterClientHello:
            _ = read(fd, &buffer, buffer.count)
        case .alert(let description):
            _ = read(fd, &buffer, buffer.count)
            let record: [UInt8] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description]
            _ = write(fd, record, record.count)
            _ = read(fd, &buffer, buffer.count)
        case .sslv3ServerHello:
            _ = read(fd, &buffer, buffer.count)
            var body: [UInt8] = [0x03, 0x00] + (0..<32).map { _ in UInt8.random(in: 0...255) } + [0x00, 0x00, 0x0a, 0x00]
            body = [0x02, 0x00, 0x00, UInt8(body.count)] + body
            let record = [0x16, 0x03, 0x00, 0x00, UInt8(body.count)] + body
            _ = write(fd, record, record.count)
            _ = read(fd, &buffer, buffer.count)
        case .blackhole:
            break
        }
    }

    /// Opens connections until the kernel stops completing them: then the accept queue is full
    /// and further SYNs are dropped.
    private static func fillBacklog(address: String, port: Int) -> [Int32] {
        guard let target = Resolver.numericAddress(address, port: port) else { return [] }
        var fillers: [Int32] = []
        for _ in 0..<8 {
            let fd = socket(target.socketFamily, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { break }
            _ = target.withSockaddr { connect(fd, $0, $1) }
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&entry, 1, 200)
            fillers.append(fd)
            if ready == 0 { break } // This one hangs in SYN-SENT: the queue is full.
        }
        return fillers
    }
}
