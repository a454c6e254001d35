import COpenSSL
public import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TLSAuditModel
import TLSAuditSupport

/// Why an HTTP request did not get an answer (the reason, ready for a log line or a delivery row).
public struct HTTPRequestFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    /// The answer was larger than the caller allows (it was not read to its end).
    public var tooLarge = false
    /// The answer came but cannot be read as sent (a body that does not inflate, an encoding not read).
    public var malformed = false
    init(_ description: String, tooLarge: Bool = false, malformed: Bool = false) {
        self.description = description
        self.tooLarge = tooLarge
        self.malformed = malformed
    }
}

/// The HTTP proxies to use, as curl reads them from the environment: `http_proxy` for http URLs
/// (lower case only: a CGI server sets `HTTP_PROXY` from a request header), `https_proxy` or
/// `HTTPS_PROXY` for https URLs, `all_proxy` / `ALL_PROXY` for either, and `no_proxy` /
/// `NO_PROXY`: a comma-separated list of host names, domains (`example.com` and `.example.com`
/// both cover every subdomain), IP addresses and CIDR ranges (`10.0.0.0/8`, `fd00::/8`) reached
/// directly, or `*` for all of them.
public struct HTTPProxySettings: Sendable, Equatable {
    public var httpProxy: String?
    public var httpsProxy: String?
    public var noProxy: [String]

    public init(httpProxy: String? = nil, httpsProxy: String? = nil, noProxy: [String] = []) {
        self.httpProxy = httpProxy
        self.httpsProxy = httpsProxy
        self.noProxy = noProxy
    }

    /// The settings in `environment` (the process's by default).
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> HTTPProxySettings {
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        }
        let all = value("all_proxy", "ALL_PROXY")
        let bypass = value("no_proxy", "NO_PROXY") ?? ""
        return HTTPProxySettings(
            httpProxy: value("http_proxy") ?? all, httpsProxy: value("https_proxy", "HTTPS_PROXY") ?? all,
            noProxy: bypass.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty })
    }

    /// The proxy URL for a request to `host` over `scheme`, or nil to connect directly.
    func proxy(scheme: String, host: String) -> String? {
        guard let proxy = scheme == "https" ? httpsProxy : httpProxy else { return nil }
        let name = host.lowercased()
        let address = IPAddress.canonical(name)
        for entry in noProxy {
            if entry == "*" { return nil }
            if let address {
                // An IP address matches the same address or a range, never by suffix.
                let unbracketed = entry.replacingOccurrences(of: "[", with: "").replacingOccurrences(of: "]", with: "")
                let matches = unbracketed.contains("/" as Character)
                    ? IPAddress.ip(address, within: unbracketed)
                    : IPAddress.canonical(unbracketed) == address
                if matches { return nil }
                continue
            }
            let domain = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
            if name == domain || name.hasSuffix("." + domain) { return nil }
        }
        return proxy
    }
}

/// A small HTTP/1.1 client, the transport of everything tlsaudit sends or fetches over HTTP: the
/// webhook sinks' POSTs (what is sent, signed and retried is theirs: `AlertDispatcher` in the
/// service) and the probe's own fetches of OCSP responses, CRLs and caIssuers certificates. One
/// request per connection, over TCP or TLS, directly or through an HTTP proxy (CONNECT for https). TLS needs
/// 1.2 or later and a certificate chain that verifies against the system trust store (or
/// `caFile`) for the URL's host name or IP address. Redirects are not followed: the answer's
/// status is the result. Linux's URLSession would bring libcurl and some thirty libraries into
/// every tlsaudit process for this one POST.
public enum HTTPClient {
    /// Whether `url` is one this client fetches (http or https; certificates also name ldap:// and
    /// file locations, which are not fetched).
    static func fetches(_ url: String) -> Bool {
        let lowered = url.lowercased()
        return lowered.hasPrefix("http://") || lowered.hasPrefix("https://")
    }

    /// The status line of an answer.
    public struct Response: Sendable, Equatable {
        public var status: Int
        public var reason: String
        /// Retry-After in seconds (at most a day), when the answer gave it so (a 429 or 503 asking for a pause).
        public var retryAfter: Double? = nil
        /// Content-Encoding, lowercase, when the answer named one (`fetch` inflates `gzip`).
        public var contentEncoding: String? = nil
    }

    /// POSTs `body` to `url` (http or https) and returns the answer's status, everything done
    /// within `timeout` seconds.
    public static func post(_ url: URL, body: [UInt8], headers: [(name: String, value: String)], timeout: Double,
                            caFile: String? = nil,
                            proxies: HTTPProxySettings = .fromEnvironment()) throws(HTTPRequestFailure) -> Response {
        try exchange("POST", url, body: body, headers: headers, timeout: timeout, caFile: caFile, proxies: proxies,
                     maximumBody: nil).response
    }

    /// Sends a request and reads the whole answer, its body at most `maximumBody` bytes (longer
    /// is an error, not a truncation), everything within `timeout` seconds. For revocation data
    /// (OCSP responses, CRLs) and CT logs; the answer's status is the caller's to judge. A gzip
    /// answer (`Content-Encoding: gzip`, which static-ct-api logs may send unasked) is inflated,
    /// to at most `maximumBody` bytes too.
    static func fetch(_ method: String, _ url: URL, body: [UInt8] = [], headers: [(name: String, value: String)] = [],
                      timeout: Double, maximumBody: Int,
                      proxies: HTTPProxySettings = .fromEnvironment()) throws(HTTPRequestFailure) -> (response: Response, body: [UInt8]) {
        var answer = try exchange(method, url, body: body, headers: headers, timeout: timeout, caFile: nil, proxies: proxies,
                                  maximumBody: maximumBody)
        switch answer.response.contentEncoding {
        case nil:
            break
        case "gzip", "x-gzip":
            let inflated = Gzip.inflate(answer.body, maximum: maximumBody)
            guard let bytes = inflated.bytes else {
                throw inflated.tooLarge ? HTTPRequestFailure("\(url.absoluteString) inflates to more than \(maximumBody) bytes", tooLarge: true)
                    : HTTPRequestFailure("\(url.absoluteString) sent a gzip answer that does not inflate", malformed: true)
            }
            answer.body = bytes
            answer.response.contentEncoding = nil
        case let other?:
            throw HTTPRequestFailure("\(url.absoluteString) sent Content-Encoding: \(other), which tlsaudit does not read (it asks for gzip or identity)",
                                     malformed: true)
        }
        return answer
    }

    /// One request; the answer's body is read when `maximumBody` is given, else only its status line.
    private static func exchange(_ method: String, _ url: URL, body: [UInt8], headers: [(name: String, value: String)],
                                 timeout: Double, caFile: String?, proxies: HTTPProxySettings,
                                 maximumBody: Int?) throws(HTTPRequestFailure) -> (response: Response, body: [UInt8]) {
        let deadline = Deadline(after: timeout)
        let target = try Endpoint(url)
        let https = target.scheme == "https"
        let proxy = try proxies.proxy(scheme: target.scheme, host: target.host).map { text throws(HTTPRequestFailure) in
            try Endpoint(proxy: text)
        }
        let socket = try connect(proxy ?? target, deadline: deadline, timeout: timeout, role: proxy == nil ? nil : "the proxy")
        // https through a proxy: a tunnel first; plain http through a proxy: the absolute URL.
        if https, let proxy { try tunnel(through: socket, proxy: proxy, to: target, deadline: deadline) }
        let stream: any ByteStream = https
            ? try TLSStream(socket: socket, host: target.host, caFile: caFile, deadline: deadline, timeout: timeout)
            : socket
        var head = "\(method) \(proxy != nil && !https ? target.absoluteForm : target.requestTarget) HTTP/1.1\r\n"
        if !https, let authorization = proxy?.basicAuthorization { head += "Proxy-Authorization: \(authorization)\r\n" }
        head += "Host: \(target.hostHeader)\r\n\(method == "GET" ? "" : "Content-Length: \(body.count)\r\n")Connection: close\r\n"
        if let authorization = target.basicAuthorization { head += "Authorization: \(authorization)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        guard stream.send(Array(head.utf8) + body, until: deadline) else {
            if deadline.hasPassed {
                throw HTTPRequestFailure("the request to \(target.display) was not sent within \(formatSeconds(timeout))")
            }
            // A server may answer and close before reading the whole request (413 Payload Too
            // Large, 401): that answer, when it can still be read, says more than the failed write.
            // A success it cannot be: the server did not read all of what it would have accepted.
            if let early = try? readResponse(stream, from: target.display, deadline: deadline, timeout: timeout) {
                guard (200..<300).contains(early.status) else { return (early, []) }
                throw HTTPRequestFailure("\(target.display) answered HTTP \(early.status) before the whole request was sent")
            }
            throw HTTPRequestFailure("\(target.display) closed the connection before the request was sent")
        }
        guard let maximumBody else {
            return (try readResponse(stream, from: target.display, deadline: deadline, timeout: timeout), [])
        }
        return try readAnswer(stream, from: target.display, deadline: deadline, timeout: timeout, maximumBody: maximumBody)
    }

    /// The first address of `endpoint` that accepts a TCP connection.
    private static func connect(_ endpoint: Endpoint, deadline: Deadline, timeout: Double,
                                role: String?) throws(HTTPRequestFailure) -> TCPSocket {
        let what = role.map { "\($0) \(endpoint.display)" } ?? endpoint.display
        let addresses: [SocketAddress]
        do {
            addresses = try Resolver.resolve(host: endpoint.host, port: endpoint.port,
                                             timeout: Double(deadline.remainingMilliseconds) / 1000)
        } catch {
            throw HTTPRequestFailure("\(role.map { "\($0): " } ?? "")\(error.message)")
        }
        var last = "no address"
        for address in addresses {
            do {
                return try TCPSocket.connect(to: address, deadline: deadline, timeout: timeout)
            } catch {
                last = error.message
                if deadline.hasPassed { break }
            }
        }
        throw HTTPRequestFailure("cannot connect to \(what): \(last)")
    }

    /// Asks an HTTP proxy for a tunnel to `target` and reads its 2xx answer.
    private static func tunnel(through socket: TCPSocket, proxy: Endpoint, to target: Endpoint,
                               deadline: Deadline) throws(HTTPRequestFailure) {
        var request = "CONNECT \(target.authority) HTTP/1.1\r\nHost: \(target.authority)\r\n"
        if let authorization = proxy.basicAuthorization { request += "Proxy-Authorization: \(authorization)\r\n" }
        request += "\r\n"
        guard socket.send(Array(request.utf8), until: deadline) else {
            throw HTTPRequestFailure("the proxy \(proxy.display) closed the connection")
        }
        // Byte by byte up to the blank line, CRLF or bare LF as `headerBlockEnd` takes it: whatever
        // follows belongs to the TLS handshake.
        var header: [UInt8] = []
        while !(header.ends(with: [10, 10]) || header.ends(with: [10, 13, 10])) {
            let byte = socket.receive(atLeast: 1, until: deadline, maximum: 1)
            guard !byte.isEmpty, header.count < 16_384 else {
                throw HTTPRequestFailure("the proxy \(proxy.display) did not answer the CONNECT request")
            }
            header += byte
        }
        let response = try parseStatusLine(header, from: "the proxy \(proxy.display)")
        guard (200..<300).contains(response.status) else {
            throw HTTPRequestFailure("the proxy \(proxy.display) refused the tunnel to \(target.authority): HTTP \(response.status) \(response.reason)")
        }
    }

    /// Reads up to the end of the final answer's status line (the rest is not needed), skipping
    /// interim answers (1xx but 101: `100 Continue`, `102 Processing`, `103 Early Hints`) with
    /// their headers.
    private static func readResponse(_ stream: any ByteStream, from display: String, deadline: Deadline,
                                     timeout: Double) throws(HTTPRequestFailure) -> Response {
        var received: [UInt8] = []
        var total = 0
        while true {
            if received.contains(10) || received.count > 16_384 {
                let response = try parseStatusLine(received, from: display)
                // 101 is never asked for (no Upgrade header): as a final answer it is a failure.
                guard (100..<200).contains(response.status), response.status != 101 else { return response }
                if let end = headerBlockEnd(received) {
                    received.removeSubrange(..<end)
                    continue
                }
            }
            guard total < 65_536 else {
                throw HTTPRequestFailure("\(display) sent 64 KiB without a final answer")
            }
            let chunk = stream.receive(atLeast: 1, until: deadline, maximum: 4096)
            if chunk.isEmpty {
                throw HTTPRequestFailure(deadline.hasPassed
                    ? "no answer from \(display) within \(formatSeconds(timeout))"
                    : "\(display) closed the connection without an answer")
            }
            received += chunk
            total += chunk.count
        }
    }

    /// Reads a whole answer: the final header block (interim 1xx answers skipped), then a body
    /// framed by Content-Length, chunked transfer coding, or the end of the connection.
    private static func readAnswer(_ stream: any ByteStream, from display: String, deadline: Deadline, timeout: Double,
                                   maximumBody: Int) throws(HTTPRequestFailure) -> (response: Response, body: [UInt8]) {
        var received: [UInt8] = []
        var closed = false
        func more() throws(HTTPRequestFailure) {
            let chunk = stream.receive(atLeast: 1, until: deadline, maximum: 65_536)
            if chunk.isEmpty {
                if deadline.hasPassed { throw HTTPRequestFailure("no complete answer from \(display) within \(formatSeconds(timeout))") }
                closed = true
            }
            received += chunk
        }
        var response: Response
        var headerEnd: Int
        while true {
            while headerBlockEnd(received) == nil {
                guard received.count <= 65_536 else { throw HTTPRequestFailure("\(display) sent 64 KiB of headers") }
                try more()
                if closed { throw HTTPRequestFailure("\(display) closed the connection without a complete answer") }
            }
            headerEnd = headerBlockEnd(received)!
            response = try parseStatusLine(received, from: display)
            guard (100..<200).contains(response.status), response.status != 101 else { break }
            received.removeSubrange(..<headerEnd)
        }
        let fields = headerFields(received[..<headerEnd])
        func field(_ name: String) -> String? { fields.first { $0.name == name }?.value }
        // Seconds only (an HTTP date is ignored), finite, at most a day.
        response.retryAfter = field("retry-after").flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            .flatMap { $0.isFinite && $0 >= 0 ? min($0, 86_400) : nil }
        response.contentEncoding = field("content-encoding").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .flatMap { $0.isEmpty || $0 == "identity" ? nil : $0 }
        var body = Array(received[headerEnd...])
        func tooLarge() -> HTTPRequestFailure { HTTPRequestFailure("\(display) sent more than \(maximumBody) bytes", tooLarge: true) }
        if field("transfer-encoding")?.lowercased().contains("chunked") == true {
            var decoded: [UInt8] = []
            var cursor = 0
            while true {
                guard let lineEnd = body[cursor...].firstIndex(of: 10) else {
                    guard body.count - cursor < 1_024, !closed else { throw HTTPRequestFailure("\(display) sent a malformed chunk") }
                    received = body
                    try more()
                    body = received
                    continue
                }
                let sizeText = String(decoding: body[cursor..<lineEnd], as: UTF8.self).split(separator: ";")[0]
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                guard let size = Int(sizeText, radix: 16), size >= 0 else { throw HTTPRequestFailure("\(display) sent a malformed chunk") }
                if size == 0 { return (response, decoded) }
                guard decoded.count + size <= maximumBody else { throw tooLarge() }
                while body.count < lineEnd + 1 + size + 2 {
                    received = body
                    try more()
                    body = received
                    if closed { throw HTTPRequestFailure("\(display) closed the connection inside a chunk") }
                }
                decoded += body[(lineEnd + 1)..<(lineEnd + 1 + size)]
                cursor = lineEnd + 1 + size + 2
            }
        }
        let length = field("content-length").flatMap { Int($0) }
        if let length, length > maximumBody { throw tooLarge() }
        received = body
        while !closed, received.count < (length ?? Int.max) {
            guard received.count <= maximumBody else { throw tooLarge() }
            try more()
        }
        if let length {
            guard received.count >= length else { throw HTTPRequestFailure("\(display) closed the connection before the whole answer") }
            return (response, Array(received.prefix(length)))
        }
        guard received.count <= maximumBody else { throw tooLarge() }
        return (response, received)
    }

    /// Where the first header block ends: just after its first empty line, whether lines end in
    /// CRLF or a bare LF (mixed too); nil while that line has not arrived.
    static func headerBlockEnd(_ bytes: [UInt8]) -> Int? {
        var lineStart = 0
        for index in bytes.indices where bytes[index] == 10 {
            let length = index - lineStart
            if length == 0 || (length == 1 && bytes[lineStart] == 13) { return index + 1 }
            lineStart = index + 1
        }
        return nil
    }

    /// The fields of a header block (after its status line): names lowercased, values trimmed, in order.
    static func headerFields(_ block: ArraySlice<UInt8>) -> [(name: String, value: String)] {
        String(decoding: block, as: UTF8.self).split(whereSeparator: \.isNewline).dropFirst().compactMap { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            return (parts[0].trimmingCharacters(in: .whitespaces).lowercased(), parts[1].trimmingCharacters(in: .whitespaces))
        }
    }

    /// `HTTP/1.1 204 No Content` -> 204, "No Content".
    static func parseStatusLine(_ bytes: [UInt8], from display: String) throws(HTTPRequestFailure) -> Response {
        let line = String(decoding: bytes.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]) else {
            throw HTTPRequestFailure("\(display) did not answer with HTTP: \(line.prefix(80).debugDescription)")
        }
        return Response(status: status, reason: parts.count > 2 ? String(parts[2]) : "")
    }
}

/// Where a request goes: the parts of an http(s) URL a request needs.
private struct Endpoint {
    var scheme: String
    /// Without brackets for IPv6.
    var host: String
    var port: Int
    var requestTarget: String
    var basicAuthorization: String?

    var authority: String { HostText.withPort(host, port) }
    var hostHeader: String { port == (scheme == "https" ? 443 : 80) ? HostText.bracketed(host) : authority }
    var absoluteForm: String { "\(scheme)://\(hostHeader)\(requestTarget)" }
    var display: String { "\(scheme)://\(hostHeader)" }

    init(_ url: URL) throws(HTTPRequestFailure) {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPRequestFailure("\(url.absoluteString) is not an http:// or https:// URL")
        }
        try self.init(components, scheme: scheme, text: url.absoluteString)
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        requestTarget = path + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
    }

    /// A proxy from the environment: `host:port`, `http://host:port`, with optional `user:password@`.
    init(proxy text: String) throws(HTTPRequestFailure) {
        let full = text.contains("://") ? text : "http://\(text)"
        guard let components = URLComponents(string: full), let scheme = components.scheme?.lowercased() else {
            throw HTTPRequestFailure("the proxy setting \(text.debugDescription) is not a URL")
        }
        guard scheme == "http" else {
            throw HTTPRequestFailure("the proxy \(text.debugDescription) uses \(scheme)://; only http:// proxies are supported")
        }
        try self.init(components, scheme: scheme, text: text)
        if components.port == nil { port = 1080 } // curl's default proxy port
    }

    private init(_ components: URLComponents, scheme: String, text: String) throws(HTTPRequestFailure) {
        guard var host = components.percentEncodedHost, !host.isEmpty else { throw HTTPRequestFailure("\(text) has no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // Kept as written (never percent-decoded): it goes into request lines and headers.
        guard host.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || ".-_:".unicodeScalars.contains($0)) }) else {
            throw HTTPRequestFailure("\(text) has a host tlsaudit cannot use: \(host.debugDescription)")
        }
        self.scheme = scheme
        self.host = host
        port = components.port ?? (scheme == "https" ? 443 : 80)
        requestTarget = "/"
        if let user = components.user {
            let credentials = user + ":" + (components.password ?? "")
            basicAuthorization = "Basic " + Data(credentials.utf8).base64EncodedString()
        }
    }
}

/// A connection a request is written to and its answer read from.
private protocol ByteStream {
    func send(_ bytes: [UInt8], until deadline: Deadline) -> Bool
    func receive(atLeast count: Int, until deadline: Deadline, maximum: Int) -> [UInt8]
}

extension TCPSocket: ByteStream {}

/// TLS over a connected socket, verified as a browser would: a chain to the system trust store
/// (or `caFile`) and a certificate for the host name or IP address.
private final class TLSStream: ByteStream {
    private let socket: TCPSocket
    private let context: OpaquePointer
    private let ssl: OpaquePointer

    init(socket: TCPSocket, host: String, caFile: String?, deadline: Deadline, timeout: Double) throws(HTTPRequestFailure) {
        self.socket = socket
        ignoreSIGPIPE // SSL_write writes with write(2), not send(2) with MSG_NOSIGNAL
        OpenSSLErrors.clear()
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw HTTPRequestFailure("cannot create a TLS context") }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            throw HTTPRequestFailure("cannot create a TLS connection")
        }
        self.context = context
        self.ssl = ssl
        _ = tlsaudit_SSL_set_min_proto_version(ssl, TLS1_2_VERSION)
        SSL_set_verify(ssl, SSL_VERIFY_PEER, nil)
        if let caFile {
            // PEM or DER, as everywhere else in tlsaudit.
            let anchors: [X509Certificate]
            do { anchors = try CertificateFile.load(path: caFile) } catch {
                throw HTTPRequestFailure("cannot load the trust anchors \(caFile): \(error)")
            }
            guard let store = SSL_CTX_get_cert_store(context) else { throw HTTPRequestFailure("no certificate store") }
            for anchor in anchors { X509_STORE_add_cert(store, anchor.pointer) }
        } else if SSL_CTX_set_default_verify_paths(context) != 1 {
            throw HTTPRequestFailure(OpenSSLErrors.describeAndClear("cannot load the system's trust anchors"))
        }
        // The name as a browser checks it: subjectAltName only, no partial wildcards.
        SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT))
        let identity: Int32
        if IPAddress.canonical(host) != nil {
            identity = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            // RFC 6066: the server name without a trailing dot.
            _ = tlsaudit_SSL_set_tlsext_host_name(ssl, HostText.withoutTrailingDot(host))
            identity = SSL_set1_host(ssl, host)
        }
        guard identity == 1 else {
            throw HTTPRequestFailure(OpenSSLErrors.describeAndClear("cannot check certificates for \(host)"))
        }
        _ = SSL_set_fd(ssl, socket.descriptor)
        SSL_set_connect_state(ssl)
        while true {
            OpenSSLErrors.clear()
            let status = SSL_do_handshake(ssl)
            if status == 1 { return }
            if waitForSocket(SSL_get_error(ssl, status), until: deadline) { continue }
            let verification = SSL_get_verify_result(ssl)
            if verification != X509_V_OK {
                throw HTTPRequestFailure("the TLS certificate of \(host) did not verify: \(String(cString: X509_verify_cert_error_string(verification)))")
            }
            if deadline.hasPassed { throw HTTPRequestFailure("no TLS handshake with \(host) within \(formatSeconds(timeout))") }
            throw HTTPRequestFailure(OpenSSLErrors.describeAndClear("the TLS handshake with \(host) failed"))
        }
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    func send(_ bytes: [UInt8], until deadline: Deadline) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            if written > 0 { offset += Int(written); continue }
            guard wait(after: written, until: deadline) else { return false }
        }
        return true
    }

    func receive(atLeast count: Int, until deadline: Deadline, maximum: Int) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: max(maximum, 1))
        while received.count < count {
            let got = SSL_read(ssl, &buffer, Int32(buffer.count))
            if got > 0 { received += buffer[..<Int(got)]; continue }
            guard wait(after: got, until: deadline) else { break }
        }
        return received
    }

    /// After a failed SSL_read/SSL_write: waits when OpenSSL wants the socket, false otherwise.
    private func wait(after status: Int32, until deadline: Deadline) -> Bool {
        let error = SSL_get_error(ssl, status)
        OpenSSLErrors.clear()
        return waitForSocket(error, until: deadline)
    }

    /// For an `SSL_get_error` result: waits when OpenSSL wants to read or write the socket (true
    /// once it can), false for any other error or when the deadline passes.
    private func waitForSocket(_ error: Int32, until deadline: Deadline) -> Bool {
        guard error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE else { return false }
        return socket.wait(for: Int16(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), until: deadline) == .ready
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
