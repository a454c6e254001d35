import Foundation
import TLSAuditProbe
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP/1.1 server on a loopback ephemeral port for tests and the bench: serves fixed
/// bodies by path (CRLs, OCSP responses answered to any POST), or holds every connection without
/// answering (a tarpit), streams a body without end at `/endless`, and counts the requests it
/// answered per path.
public final class LabHTTPServer: Sendable {
    public let port: Int
    private let listener: LabListener
    private let state: State

    private final class State: Sendable {
        let routes: Mutex<[String: (status: Int, body: [UInt8])]>
        let counts = Mutex<[String: Int]>([:])
        init(_ routes: [String: [UInt8]]) { self.routes = Mutex(routes.mapValues { (status: 200, body: $0) }) }
    }

    /// `routes`: path to body (status 200); an unknown path answers 404. `tarpit`: never answer.
    public init(routes: [String: [UInt8]] = [:], tarpit: Bool = false) throws {
        let state = State(routes)
        listener = try LabListener(address: "127.0.0.1") { fd in
            LabListener.setTimeouts(fd, seconds: 30)
            defer { close(fd) }
            if tarpit {
                var entry = pollfd(fd: fd, events: 0x2000 /* POLLRDHUP */, revents: 0)
                _ = poll(&entry, 1, 30_000)
                return
            }
            guard let path = LabWebhookReceiver.read(fd)?.path else { return }
            if path == "/endless" {
                // A body without Content-Length that never ends, until the client gives up.
                let head = Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8)
                guard write(fd, head, head.count) == head.count else { return }
                let chunk = [UInt8](repeating: 0x20, count: 65_536)
                while write(fd, chunk, chunk.count) > 0 {}
                return
            }
            let (status, body) = state.routes.withLock { $0[path] } ?? (404, Array("not found\n".utf8))
            state.counts.withLock { $0[path, default: 0] += 1 }
            Self.respond(fd, status: status, reason: status == 200 ? "OK" : "Not Found", body: body)
        }
        self.state = state
        port = listener.port
    }

    /// Writes a whole HTTP/1.1 answer (closing the connection after it) to `fd`, as far as the peer reads.
    static func respond(_ fd: Int32, status: Int, reason: String, headers: String = "", body: [UInt8]) {
        let bytes = Array("HTTP/1.1 \(status) \(reason)\r\n\(headers)Content-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8) + body
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            sent += written
        }
    }

    /// Replaces (or adds) the body served at `path`.
    public func serve(_ body: [UInt8], at path: String, status: Int = 200) {
        state.routes.withLock { $0[path] = (status, body) }
    }

    /// Requests answered at `path` so far.
    public func requests(to path: String) -> Int { state.counts.withLock { $0[path] ?? 0 } }

    /// `http://127.0.0.1:PORT/path`.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    public func stop() { listener.stop() }
}
