import COpenSSL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
public import TLSAuditModel

/// HTTP security headers (`checks: [headers]`): one bounded GET over HTTPS for
/// Strict-Transport-Security, one over plain HTTP on port 80 for the redirect to HTTPS.
extension Enumerator {
    /// Response heads are read up to this many bytes.
    static let headLimit = 64 * 1024

    public func headers(_ address: SocketAddress, target: ScanTarget) -> HTTPHeadersReport {
        let path = target.headersPath ?? "/"
        let timeout = target.timeout ?? scanner.options.timeout
        let probes = ProbeCounter()
        let name = target.sni ?? target.host
        let (head, failure) = httpsGET(address, target: target, probes: probes, path: path, timeout: timeout)
        var report = HTTPHeadersReport(path: path, status: head?.status, hsts: nil, detail: "", plainHTTP: .notTested(""), plainHTTPLocation: nil)
        if let head {
            if let header = head.first("strict-transport-security") {
                report.hsts = HSTSPolicy.parse(header)
                report.detail = report.hsts == nil ? "a Strict-Transport-Security header without a valid max-age (ignored by browsers): \"\(header.prefix(200))\""
                    : "Strict-Transport-Security on the \(head.status) answer to GET \(path)"
            } else {
                report.detail = "no Strict-Transport-Security header on the \(head.status) answer to GET \(path)"
            }
        } else {
            report.detail = "no HTTP answer over HTTPS: \(failure)"
        }
        (report.plainHTTP, report.plainHTTPLocation) = plainRedirect(address, name: name, path: path, timeout: timeout)
        return report
    }

    /// The headers check's GET (`getRequest`) over HTTPS: the response head, or why none came.
    func httpsGET(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, path: String,
                  timeout: Double) -> (head: HTTPResponseHead?, failure: String) {
        let name = target.sni ?? target.host
        let request = Self.getRequest(path: path, host: target.port == 443 ? name : "\(name):\(target.port)")
        var head: HTTPResponseHead?
        var failure: String?
        let attempt = handshake(address, target: target, probes: probes, override: ClientHelloOverride(alpn: ["http/1.1"])) { ssl in
            switch Self.exchange(ssl, request: request, deadline: Deadline(after: timeout)) {
            case .success(let received): head = received
            case .failure(let error): failure = error.reason
            }
        }
        return (head, failure ?? attempt.failure?.description ?? "the handshake failed")
    }

    /// GET on port 80 of the same address: a 3xx to an https:// Location is the redirect.
    private func plainRedirect(_ address: SocketAddress, name: String, path: String, timeout: Double) -> (InventoryAnswer, String?) {
        guard let plain = Resolver.numericAddress(address.host, port: 80) else { return (.notTested("no address for port 80"), nil) }
        let head: HTTPResponseHead
        switch plainGET(plain, host: name, path: path, timeout: timeout) {
        case .success(let answer): head = answer
        case .failure(let failure): return (.notTested("port 80 \(failure.reason)"), nil)
        }
        let location = head.first("location")
        if (300...399).contains(head.status), let location, location.lowercased().hasPrefix("https://") {
            return (.yes("port 80 answers \(head.status) with a redirect to \(location.prefix(200))"), String(location.prefix(512)))
        }
        return (.no("port 80 answers \(head.status)" + (location.map { " redirecting to \($0.prefix(200)), not to HTTPS" } ?? " without redirecting to HTTPS")),
                location.map { String($0.prefix(512)) })
    }

    /// The status a plain HTTP server at the target's own address and port gives to `GET /` (no
    /// TLS), or nil when no HTTP answer comes: what `tlsaudit ats` tells of a server that is not TLS.
    public func plainHTTPStatus(_ address: SocketAddress, target: ScanTarget) -> Int? {
        if case .status(let status) = plainHTTPAnswer(address, target: target) { return status }
        return nil
    }

    /// What `GET /` over plain TCP to the target's own address and port got: a status, or how it
    /// failed (what an app's plain `http://` load would log).
    public func plainHTTPAnswer(_ address: SocketAddress, target: ScanTarget) -> PlainHTTPAnswer {
        let name = target.sni ?? target.host
        let host = target.port == 80 ? name : "\(name):\(target.port)"
        switch plainGET(address, host: host, path: "/", timeout: target.timeout ?? scanner.options.timeout) {
        case .success(let head): return .status(head.status)
        case .failure(let failure): return failure.answer
        }
    }

    /// One GET over plain TCP (no TLS) to `address`: the response head, or why none came.
    private func plainGET(_ address: SocketAddress, host: String, path: String, timeout: Double) -> Result<HTTPResponseHead, ExchangeFailure> {
        let socket: TCPSocket
        do {
            socket = try TCPSocket.connect(to: address, deadline: Deadline(after: timeout), timeout: timeout)
        } catch {
            return .failure(ExchangeFailure(reason: "does not answer (\(error.category.rawValue))",
                                            answer: .noConnection(error.category, error.description)))
        }
        let deadline = Deadline(after: timeout)
        guard socket.send(Self.getRequest(path: path, host: host), until: deadline) else {
            return .failure(ExchangeFailure(reason: "closed the connection on the request", answer: .closed))
        }
        var received: [UInt8] = []
        var timedOut = false
        while HTTPResponseHead.end(of: received) == nil, received.count < Self.headLimit {
            let outcome = socket.receiveSome(until: deadline, maximum: Self.headLimit - received.count)
            guard case .data(let data) = outcome else {
                timedOut = outcome == .timedOut
                break
            }
            received += data
        }
        guard let head = HTTPResponseHead(received) else {
            let quoted = STARTTLSDialogue.quote(received)
            // What the app's load sees: no answer in time; the connection lost (nothing, or the start
            // of an HTTP response); or an answer that is not HTTP.
            let answer: PlainHTTPAnswer = if timedOut, received.isEmpty { .timedOut }
                else if received.isEmpty || received.starts(with: Array("HTTP/".utf8)) { .closed }
                else { .notHTTP(quoted) }
            return .failure(ExchangeFailure(reason: "answered without an HTTP response head: \(quoted)", answer: answer))
        }
        return .success(head)
    }

    /// `GET path` with the few header fields every probe sends; `Accept-Encoding: gzip,deflate` as
    /// a browser sends it, so that the same request tells whether the answer is compressed (BREACH).
    static func getRequest(path: String, host: String) -> [UInt8] {
        Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUser-Agent: tlsaudit\r\nAccept: */*\r\nAccept-Encoding: gzip,deflate\r\nConnection: close\r\n\r\n".utf8)
    }

    struct ExchangeFailure: Error {
        var reason: String
        /// The failure as a plain-HTTP load sees it (for `plainHTTPAnswer`).
        var answer: PlainHTTPAnswer = .closed
    }

    /// Writes `request` and reads the response head over an established TLS connection.
    static func exchange(_ ssl: OpaquePointer, request: [UInt8], deadline: Deadline) -> Result<HTTPResponseHead, ExchangeFailure> {
        func wait(_ error: Int32) -> Bool { HandshakeProbe.wait(ssl, for: error, until: deadline) }
        var written = 0
        while written < request.count {
            let status = request[written...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            if status > 0 { written += Int(status); continue }
            guard wait(SSL_get_error(ssl, status)) else { return .failure(ExchangeFailure(reason: "the server did not take the request")) }
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while HTTPResponseHead.end(of: received) == nil, received.count < headLimit {
            let status = SSL_read(ssl, &buffer, Int32(min(buffer.count, headLimit - received.count)))
            if status > 0 { received += buffer[..<Int(status)]; continue }
            guard wait(SSL_get_error(ssl, status)) else { break }
        }
        OpenSSLErrors.clear()
        guard let head = HTTPResponseHead(received) else {
            return .failure(ExchangeFailure(reason: received.isEmpty ? "no answer to GET" : "not an HTTP response: \(STARTTLSDialogue.quote(received))"))
        }
        return .success(head)
    }
}

/// A response's status and header fields, read with HTTPClient's parsing.
struct HTTPResponseHead {
    var status: Int
    var headers: [(name: String, value: String)]

    /// The first header called `name` (RFC 6797 8.1: only the first STS header counts).
    func first(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// Where the head ends (just after its empty line); nil while it has not arrived.
    static func end(of bytes: [UInt8]) -> Int? { HTTPClient.headerBlockEnd(bytes) }

    init?(_ bytes: [UInt8]) {
        guard let end = Self.end(of: bytes), let response = try? HTTPClient.parseStatusLine(bytes, from: "the server") else { return nil }
        status = response.status
        headers = HTTPClient.headerFields(bytes[..<end])
    }
}
