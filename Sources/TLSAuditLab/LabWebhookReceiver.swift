public import Foundation
import TLSAuditProbe
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP receiver on loopback that records POSTed bodies, for testing alert webhooks.
/// It can answer with an error status ("down" while listening) and be stopped and restarted
/// on the same port (really down: connections refused).
public final class LabWebhookReceiver: Sendable {
    /// One request as received.
    public struct Request: Sendable {
        public var path: String
        public var headers: [String: String]
        public var body: Data
    }

    public let port: Int
    private let state = State()
    private let listener = Mutex<LabListener?>(nil)

    /// How to answer, read once per connection.
    private struct Answer: Sendable {
        var status = 200
        /// Interim (1xx) answers sent before the final one, each in a write of its own (102 with
        /// bare LF line ends, as some servers write them).
        var interim: [Int] = []
        /// Answer as soon as the headers are in, and close without reading the body.
        var early = false
        /// Seconds to wait, once the request is in, before answering (a slow receiver).
        var delay: Double = 0
    }

    /// What the connection threads share.
    private final class State: Sendable {
        let requests = Mutex<[Request]>([])
        let attempts = Mutex<[Request]>([])
        let answer = Mutex(Answer())
    }

    /// Listens on `port` (0: an ephemeral one).
    public init(port: Int = 0) throws {
        let listener = try Self.listen(port: port, state: state)
        self.port = listener.port
        self.listener.withLock { $0 = listener }
    }

    private static func listen(port: Int, state: State) throws -> LabListener {
        try LabListener(address: "127.0.0.1", port: port) { fd in
            defer { close(fd) }
            LabListener.setTimeouts(fd, seconds: 5)
            let answer = state.answer.withLock { $0 }
            let code = answer.status
            if answer.early {
                guard Self.read(fd, body: false) != nil else { return }
                let reply = Array("HTTP/1.1 \(code) Early\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
                _ = write(fd, reply, reply.count)
                return
            }
            guard let request = Self.read(fd) else { return }
            state.attempts.withLock { $0.append(request) }
            if answer.delay > 0 { Thread.sleep(forTimeInterval: answer.delay) }
            if (200..<300).contains(code) { state.requests.withLock { $0.append(request) } }
            for interim in answer.interim {
                let head = switch interim {
                case 102: Array("HTTP/1.1 102 Processing\n\n".utf8)
                case 103: Array("HTTP/1.1 103 Early Hints\r\nLink: </hooks.css>; rel=preload\r\n\r\n".utf8)
                default: Array("HTTP/1.1 \(interim) Interim\r\n\r\n".utf8)
                }
                _ = write(fd, head, head.count)
            }
            let reply = Array("HTTP/1.1 \(code) \(code == 200 ? "OK" : "Unavailable")\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
            _ = write(fd, reply, reply.count)
        }
    }

    /// Every request read in full, whatever the answer, in arrival order.
    public var attempts: [Request] { state.attempts.withLock { $0 } }

    /// Requests accepted with a 2xx answer, in arrival order.
    public var received: [Request] { state.requests.withLock { $0 } }

    /// The status code to answer with from now on (e.g. 503 to play a failing receiver), after
    /// the interim (1xx) answers in `interim` (e.g. 100 Continue, 103 Early Hints with a Link header),
    /// each answer `delay` seconds after its request came in.
    public func respond(with code: Int, after interim: [Int] = [], delay: Double = 0) {
        state.answer.withLock { $0 = Answer(status: code, interim: interim, delay: delay) }
    }

    /// Answers `code` as soon as a request's headers are in and closes without reading its body
    /// (a receiver refusing a request early: 413, 401); such requests are not recorded.
    public func respondEarly(with code: Int) {
        state.answer.withLock { $0 = Answer(status: code, early: true) }
    }

    /// Stops listening: connections are refused until `start()`.
    public func stop() {
        let current = listener.withLock { listener -> LabListener? in
            defer { listener = nil }
            return listener
        }
        current?.stop()
    }

    /// Listens again on the same port.
    public func start() throws {
        guard listener.withLock({ $0 == nil }) else { return }
        let restarted = try Self.listen(port: port, state: state)
        listener.withLock { $0 = restarted }
    }

    /// Reads one HTTP/1.1 request (headers, and the body by Content-Length unless `readBody` is
    /// false); the lab's HTTP server reads its requests with it too.
    static func read(_ fd: Int32, body readBody: Bool = true) -> Request? {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var headerEnd: Int?
        while headerEnd == nil {
            let count = Glibc.read(fd, &buffer, buffer.count)
            guard count > 0 else { return nil }
            data += buffer[..<count]
            headerEnd = data.indices.dropLast(3).first { data[$0] == 13 && data[$0 + 1] == 10 && data[$0 + 2] == 13 && data[$0 + 3] == 10 }
        }
        guard let end = headerEnd else { return nil }
        let head = String(decoding: data[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = readBody ? Int(headers["content-length"] ?? "0") ?? 0 : 0
        var body = Array(data[(end + 4)...])
        while body.count < length {
            let count = Glibc.read(fd, &buffer, min(buffer.count, length - body.count))
            guard count > 0 else { return nil }
            body += buffer[..<count]
        }
        let path = head.first?.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
        return Request(path: path, headers: headers, body: Data(body))
    }
}
