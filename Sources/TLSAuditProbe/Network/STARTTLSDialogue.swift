import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TLSAuditModel
import TLSAuditSupport

/// The plaintext dialogue that comes before the TLS handshake on a STARTTLS port: greeting,
/// capabilities, the upgrade command and its answer, as each protocol's RFC (or, for PostgreSQL
/// and MySQL, its wire protocol) says. Replies are read with size limits (`lineLimit` per line,
/// `totalLimit` in all): a banner of megabytes or a line without end ends the dialogue with
/// `starttls-unexpected-reply` and grows nothing. The whole dialogue is bounded by one deadline.
/// Nothing after the server's go-ahead is read: the next bytes belong to TLS.
struct STARTTLSDialogue {
    static let lineLimit = 8 * 1024
    static let totalLimit = 64 * 1024

    let socket: TCPSocket
    let proto: STARTTLSProtocol
    /// The domain named in the XMPP stream header (`to`).
    let domain: String
    let deadline: Deadline
    let timeout: Double

    /// Bytes received and not yet consumed.
    private var pending: [UInt8] = []
    private var received = 0
    /// The last complete line or message received, quoted in errors.
    private var lastReply = ""
    private var checkedFirstBytes = false
    /// The greeting said the server is too busy for now (421, NNTP 400): worth another try.
    private(set) var serverBusy = false

    init(socket: TCPSocket, protocol: STARTTLSProtocol, domain: String, deadline: Deadline, timeout: Double) {
        self.socket = socket
        self.proto = `protocol`
        self.domain = domain
        self.deadline = deadline
        self.timeout = timeout
    }

    /// Runs the dialogue up to the server's go-ahead; throws a `starttls-*` failure (or the
    /// connection's own) otherwise.
    mutating func run() throws(ProbeFailure) {
        switch proto {
        case .smtp: try smtp()
        case .imap: try imap()
        case .pop3: try pop3()
        case .ftp: try ftp()
        case .xmpp, .xmppServer: try xmpp(server: proto == .xmppServer)
        case .ldap: try ldap()
        case .postgres: try postgres()
        case .mysql: try mysql()
        case .sieve: try sieve()
        case .nntp: try nntp()
        }
    }

    // MARK: - Protocols

    /// RFC 5321 and 3207: 220 greeting, EHLO, STARTTLS in the extensions, STARTTLS answered 220.
    private mutating func smtp() throws(ProbeFailure) {
        let greeting = try numericReply(expecting: "an SMTP greeting (220)")
        guard greeting.code == 220 else {
            serverBusy = greeting.code == 421
            throw refused("the server refused the SMTP session: \(greeting.text)")
        }
        try send("EHLO \(socket.localAddressLiteral)\r\n")
        let ehlo = try numericReply(expecting: "an answer to EHLO")
        guard ehlo.code == 250 else {
            throw notOffered("EHLO was answered \(ehlo.text): without ESMTP there is no STARTTLS")
        }
        let keywords = ehlo.lines.dropFirst().map { $0.dropFirst(4).split(separator: " ").first.map { $0.uppercased() } ?? "" }
        guard keywords.contains("STARTTLS") else {
            throw notOffered("the EHLO answer lists no STARTTLS (it offers: \(keywords.joined(separator: ", ")))")
        }
        try send("STARTTLS\r\n")
        let answer = try numericReply(expecting: "an answer to STARTTLS")
        guard answer.code == 220 else { throw refused("STARTTLS was answered \(answer.text)") }
    }

    /// RFC 3501 (9051): greeting, CAPABILITY with STARTTLS, tagged OK to STARTTLS.
    private mutating func imap() throws(ProbeFailure) {
        let greeting = try line(expecting: "an IMAP greeting (* OK)")
        let upper = greeting.uppercased()
        if upper.hasPrefix("* BYE") { throw refused("the server refused the IMAP session: \(quoted(greeting))") }
        if upper.hasPrefix("* PREAUTH") {
            throw refused("the server greeted with PREAUTH: STARTTLS is only allowed before authentication (\(quoted(greeting)))")
        }
        guard upper.hasPrefix("* OK") else { throw unexpected("expected an IMAP greeting (* OK)", got: greeting) }
        try send("T1 CAPABILITY\r\n")
        var capabilities: [String] = []
        let capabilityAnswer = try imapTagged("T1") { untagged in
            let words = untagged.split(separator: " ").map { $0.uppercased() }
            if words.count > 1, words[1] == "CAPABILITY" { capabilities += words.dropFirst(2) }
        }
        if capabilityAnswer.uppercased().hasPrefix("T1 OK"), !capabilities.contains("STARTTLS") {
            throw notOffered("CAPABILITY lists no STARTTLS (\(capabilities.prefix(20).joined(separator: " ")))")
        }
        try send("T2 STARTTLS\r\n")
        let answer = try imapTagged("T2") { _ in }
        guard answer.uppercased().hasPrefix("T2 OK") else {
            throw capabilities.contains("STARTTLS") ? refused("STARTTLS was answered \(quoted(answer))")
                : notOffered("STARTTLS was answered \(quoted(answer)) and CAPABILITY did not list it")
        }
    }

    /// Reads untagged lines (handed to `untagged`) up to the line tagged `tag`, which it returns.
    private mutating func imapTagged(_ tag: String, untagged: (String) -> Void) throws(ProbeFailure) -> String {
        while true {
            let next = try line(expecting: "an IMAP answer tagged \(tag)")
            if next.hasPrefix(tag + " ") { return next }
            guard next.hasPrefix("* ") || next.hasPrefix("+ ") else { throw unexpected("expected an IMAP answer", got: next) }
            untagged(next)
        }
    }

    /// RFC 2595 and 2449: +OK greeting, CAPA with STLS (when the server knows CAPA), +OK to STLS.
    private mutating func pop3() throws(ProbeFailure) {
        let greeting = try line(expecting: "a POP3 greeting (+OK)")
        if greeting.hasPrefix("-ERR") { throw refused("the server refused the POP3 session: \(quoted(greeting))") }
        guard greeting.hasPrefix("+OK") else { throw unexpected("expected a POP3 greeting (+OK)", got: greeting) }
        try send("CAPA\r\n")
        let capa = try line(expecting: "an answer to CAPA")
        var capabilities: [String]?
        if capa.hasPrefix("+OK") {
            var listed: [String] = []
            while true {
                let next = try line(expecting: "the end of the CAPA list (.)")
                if next == "." { break }
                listed.append(next.split(separator: " ").first.map { $0.uppercased() } ?? "")
            }
            capabilities = listed
        } else if !capa.hasPrefix("-ERR") {
            throw unexpected("expected +OK or -ERR to CAPA", got: capa)
        }
        if let capabilities, !capabilities.contains("STLS") {
            throw notOffered("CAPA lists no STLS (\(capabilities.joined(separator: " ")))")
        }
        try send("STLS\r\n")
        let answer = try line(expecting: "an answer to STLS")
        guard answer.hasPrefix("+OK") else {
            guard answer.hasPrefix("-ERR") else { throw unexpected("expected +OK or -ERR to STLS", got: answer) }
            throw capabilities == nil ? notOffered("the server knows neither CAPA nor STLS: STLS was answered \(quoted(answer))")
                : refused("STLS was answered \(quoted(answer))")
        }
    }

    /// RFC 4217: 220 greeting (after any 120), AUTH TLS answered 234.
    private mutating func ftp() throws(ProbeFailure) {
        var greeting = try numericReply(expecting: "an FTP greeting (220)")
        if greeting.code == 120 { greeting = try numericReply(expecting: "an FTP greeting (220) after 120") }
        guard greeting.code == 220 else {
            serverBusy = greeting.code == 421
            throw refused("the server refused the FTP session: \(greeting.text)")
        }
        try send("AUTH TLS\r\n")
        let answer = try numericReply(expecting: "an answer to AUTH TLS")
        switch answer.code {
        case 234: return
        case 500, 502, 504: throw notOffered("AUTH TLS was answered \(answer.text): the server does not know it")
        default: throw refused("AUTH TLS was answered \(answer.text)")
        }
    }

    /// RFC 6120: the stream header (`to` the domain), features with starttls, `<proceed/>`.
    private mutating func xmpp(server: Bool) throws(ProbeFailure) {
        let namespace = server ? "jabber:server" : "jabber:client"
        try send("<?xml version='1.0'?><stream:stream xmlns='\(namespace)' xmlns:stream='http://etherx.jabber.org/streams'"
                 + " to='\(xmlEscaped(domain))' version='1.0'>")
        let features = try xml(until: ["</stream:features>", "<stream:features/>", "</stream:error>", "</stream:stream>"],
                               expecting: "an XMPP stream with its features")
        guard features.contains("<stream:stream") || features.contains("<stream ") else {
            throw unexpected("expected an XMPP stream header", got: features)
        }
        if let error = Self.element("stream:error", in: features) {
            throw refused("the server ended the stream with an error: \(quoted(error))")
        }
        guard let list = Self.element("stream:features", in: features) else {
            throw unexpected("expected XMPP stream features", got: features)
        }
        guard list.contains("urn:ietf:params:xml:ns:xmpp-tls") else {
            throw notOffered("the stream features offer no starttls: \(quoted(list))")
        }
        try send("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        let answer = try xml(until: ["<proceed", "<failure", "</stream:error>", "</stream:stream>"], expecting: "<proceed/> to starttls")
        if answer.hasSuffix("<proceed") {
            // The rest of the element (' xmlns=.../>') is not TLS: read up to its end.
            _ = try xml(until: [">"], expecting: "the end of <proceed/>")
            return
        }
        throw refused("starttls was answered \(quoted(answer))")
    }

    /// RFC 4511 / 4513: the StartTLS extended operation, answered with resultCode success.
    private mutating func ldap() throws(ProbeFailure) {
        let oid = Array("1.3.6.1.4.1.1466.20037".utf8)
        // SEQUENCE { messageID 1, [APPLICATION 23] ExtendedRequest { [0] requestName } }
        let request: [UInt8] = [0x30, UInt8(oid.count + 7), 0x02, 0x01, 0x01, 0x77, UInt8(oid.count + 2), 0x80, UInt8(oid.count)] + oid
        try send(request)
        let message = try berMessage()
        guard let response = LDAPExtendedResponse(message) else {
            throw unexpected("expected an LDAP ExtendedResponse", got: message)
        }
        lastReply = response.summary
        if response.messageID == 0 {
            throw refused("the server sent a notice of disconnection: \(response.summary)")
        }
        switch response.resultCode {
        case 0: return
        case 2: throw notOffered("the StartTLS operation was answered \(response.summary)")
        default:
            throw refused("the StartTLS operation was answered \(response.summary)")
        }
    }

    /// PostgreSQL's SSLRequest, answered 'S' (go ahead), 'N' (SSL off) or an error message.
    private mutating func postgres() throws(ProbeFailure) {
        try send([0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F])
        let first = try bytes(1, expecting: "S or N to the SSLRequest")[0]
        switch first {
        case UInt8(ascii: "S"):
            // Bytes sent after 'S' and before the handshake would be read as if protected by TLS (CVE-2021-23214).
            if !pending.isEmpty {
                throw unexpected("the server sent \(pending.count) more byte(s) after 'S', before the TLS handshake",
                                 got: pending)
            }
        case UInt8(ascii: "N"):
            throw notOffered("the server answered 'N' to the SSLRequest: it has SSL off (ssl = off)")
        case UInt8(ascii: "E"):
            let length = Int(try bytes(4, expecting: "the error message's length").reduce(0) { $0 << 8 | UInt32($1) })
            guard (4...Self.totalLimit).contains(length) else { throw unexpected("an error message of \(length) bytes", got: [first]) }
            let body = try bytes(length - 4, expecting: "the error message")
            throw refused("the server answered the SSLRequest with an error: \(Self.postgresError(body))")
        default:
            throw unexpected("expected S or N to the PostgreSQL SSLRequest", got: [first] + pending)
        }
    }

    /// MySQL / MariaDB: the server's handshake packet with CLIENT_SSL, then the client's SSLRequest packet.
    private mutating func mysql() throws(ProbeFailure) {
        let header = try bytes(4, expecting: "a MySQL handshake packet")
        let length = Int(header[0]) | Int(header[1]) << 8 | Int(header[2]) << 16
        guard length > 0, length <= Self.totalLimit else {
            throw unexpected("expected a MySQL handshake packet (a length of \(length) bytes is not one)", got: header + pending)
        }
        let payload = try bytes(length, expecting: "the MySQL handshake packet")
        if payload[0] == 0xFF, payload.count >= 3 {
            let code = Int(payload[1]) | Int(payload[2]) << 8
            var text = payload.dropFirst(3)
            if text.first == UInt8(ascii: "#") { text = text.dropFirst(6) }
            throw refused("the server refused the connection: error \(code): \(quoted(String(decoding: text, as: UTF8.self)))")
        }
        guard payload[0] == 10, let versionEnd = payload.dropFirst().firstIndex(of: 0), payload.count >= versionEnd + 1 + 4 + 8 + 1 + 2 else {
            throw unexpected("expected a MySQL protocol-10 handshake packet", got: header + payload)
        }
        let version = String(decoding: payload[1..<versionEnd], as: UTF8.self)
        lastReply = "server version \(version)"
        let capabilityOffset = versionEnd + 1 + 4 + 8 + 1
        let capabilities = Int(payload[capabilityOffset]) | Int(payload[capabilityOffset + 1]) << 8
        let clientSSL = 0x0800
        guard capabilities & clientSSL != 0 else {
            throw notOffered("the server (\(quoted(version))) does not offer SSL: its handshake lacks CLIENT_SSL")
        }
        // CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH
        let flags: UInt32 = 0x1 | 0x200 | 0x800 | 0x8000 | 0x80000
        var request: [UInt8] = [32, 0, 0, header[3] &+ 1]
        request += withUnsafeBytes(of: flags.littleEndian, Array.init)
        request += withUnsafeBytes(of: UInt32(16 * 1024 * 1024).littleEndian, Array.init)
        request += [45] + [UInt8](repeating: 0, count: 23) // utf8mb4_general_ci
        try send(request)
    }

    /// RFC 5804: capabilities with "STARTTLS", OK, then STARTTLS answered OK.
    private mutating func sieve() throws(ProbeFailure) {
        var capabilities: [String] = []
        while true {
            let next = try line(expecting: "ManageSieve capabilities ending in OK")
            let upper = next.uppercased()
            if upper.hasPrefix("OK") { break }
            if upper.hasPrefix("NO") || upper.hasPrefix("BYE") { throw refused("the server refused the session: \(quoted(next))") }
            guard next.hasPrefix("\"") else { throw unexpected("expected ManageSieve capabilities (quoted strings)", got: next) }
            capabilities.append(next.split(separator: "\"", omittingEmptySubsequences: true).first.map { $0.uppercased() } ?? "")
        }
        guard capabilities.contains("STARTTLS") else {
            throw notOffered("the capabilities list no STARTTLS (\(capabilities.joined(separator: " ")))")
        }
        try send("STARTTLS\r\n")
        let answer = try line(expecting: "an answer to STARTTLS")
        guard answer.uppercased().hasPrefix("OK") else { throw refused("STARTTLS was answered \(quoted(answer))") }
    }

    /// RFC 4642 and 3977: 200/201 greeting, CAPABILITIES with STARTTLS, STARTTLS answered 382.
    private mutating func nntp() throws(ProbeFailure) {
        let greeting = try numericReply(expecting: "an NNTP greeting (200 or 201)")
        guard greeting.code == 200 || greeting.code == 201 else {
            serverBusy = greeting.code == 400
            throw refused("the server refused the NNTP session: \(greeting.text)")
        }
        try send("CAPABILITIES\r\n")
        let answer = try numericReply(expecting: "an answer to CAPABILITIES")
        var capabilities: [String]?
        if answer.code == 101 {
            var listed: [String] = []
            while true {
                let next = try line(expecting: "the end of the capability list (.)")
                if next == "." { break }
                listed.append(next.split(separator: " ").first.map { $0.uppercased() } ?? "")
            }
            capabilities = listed
        }
        if let capabilities, !capabilities.contains("STARTTLS") {
            throw notOffered("CAPABILITIES lists no STARTTLS (\(capabilities.joined(separator: " ")))")
        }
        try send("STARTTLS\r\n")
        let upgrade = try numericReply(expecting: "an answer to STARTTLS")
        guard upgrade.code == 382 else {
            throw capabilities == nil && [500, 501].contains(upgrade.code)
                ? notOffered("the server does not know STARTTLS: \(upgrade.text)")
                : refused("STARTTLS was answered \(upgrade.text)")
        }
    }

    // MARK: - Reading and writing

    /// A reply of three digits (RFC 5321 and 959 multi-line form: `220-...` lines up to `220 ...`).
    private struct NumericReply {
        var code: Int
        var lines: [String]
        /// The reply as quoted in messages (its first and last lines).
        var text: String {
            let shown = lines.count > 2 ? [lines[0], lines[lines.count - 1]] : lines
            return "\"" + shown.map { String($0.prefix(200)) }.joined(separator: " ... ") + "\""
        }
    }

    private mutating func numericReply(expecting what: String) throws(ProbeFailure) -> NumericReply {
        let first = try line(expecting: what)
        guard let code = Self.replyCode(first) else { throw unexpected("expected \(what)", got: first) }
        var lines = [first]
        // Continuation lines: SMTP repeats the code with '-'; FTP may send any text before the final "CODE ".
        while !Self.isFinal(lines[lines.count - 1], code: code) {
            lines.append(try line(expecting: "the rest of the \(code) reply"))
        }
        return NumericReply(code: code, lines: lines)
    }

    private static func replyCode(_ line: String) -> Int? {
        let bytes = Array(line.utf8)
        guard bytes.count >= 3, bytes[0..<3].allSatisfy({ (0x30...0x39).contains($0) }),
              bytes.count == 3 || bytes[3] == UInt8(ascii: " ") || bytes[3] == UInt8(ascii: "-") else { return nil }
        return Int(String(decoding: bytes[0..<3], as: UTF8.self))
    }

    private static func isFinal(_ line: String, code: Int) -> Bool {
        let bytes = Array(line.utf8)
        return replyCode(line) == code && (bytes.count == 3 || bytes[3] == UInt8(ascii: " "))
    }

    /// One line without its CR LF; at most `lineLimit` bytes.
    private mutating func line(expecting what: String) throws(ProbeFailure) -> String {
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                var bytes = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                if bytes.last == 0x0D { bytes.removeLast() }
                let text = String(decoding: bytes, as: UTF8.self)
                lastReply = text
                return text
            }
            guard pending.count <= Self.lineLimit else {
                throw unexpected("expected \(what), but the server sent a line of over \(Self.lineLimit / 1024) KiB without an end",
                                 got: pending)
            }
            try receive(expecting: what)
        }
    }

    /// Reads until one of `markers` appears; returns everything read up to the end of that marker.
    private mutating func xml(until markers: [String], expecting what: String) throws(ProbeFailure) -> String {
        while true {
            let ends = markers.compactMap { marker in pending.firstOffset(of: Array(marker.utf8)).map { $0 + marker.utf8.count } }
            if let end = ends.min() {
                let consumed = String(decoding: pending[..<end], as: UTF8.self)
                pending.removeFirst(end)
                lastReply = consumed
                return consumed
            }
            try receive(expecting: what)
        }
    }

    /// Exactly `count` bytes.
    private mutating func bytes(_ count: Int, expecting what: String) throws(ProbeFailure) -> [UInt8] {
        while pending.count < count { try receive(expecting: what) }
        let taken = Array(pending[..<count])
        pending.removeFirst(count)
        return taken
    }

    /// One BER-encoded LDAP message (SEQUENCE, definite length).
    private mutating func berMessage() throws(ProbeFailure) -> [UInt8] {
        let head = try bytes(2, expecting: "an LDAP message")
        guard head[0] == 0x30 else {
            let seen = head + pending
            throw unexpected(Self.otherProtocol(seen) ?? "expected an LDAP message (a BER SEQUENCE)", got: seen)
        }
        var length = Int(head[1])
        var header = head
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count) else { throw unexpected("an LDAP message with a \(count)-byte length", got: head) }
            let lengthBytes = try bytes(count, expecting: "an LDAP message's length")
            header += lengthBytes
            length = lengthBytes.reduce(0) { $0 << 8 | Int($1) }
        }
        guard length <= Self.totalLimit else {
            throw unexpected("an LDAP message of \(length) bytes, over the \(Self.totalLimit / 1024) KiB limit", got: header)
        }
        return header + (try bytes(length, expecting: "the LDAP message"))
    }

    private mutating func receive(expecting what: String) throws(ProbeFailure) {
        guard received < Self.totalLimit else {
            throw unexpected("expected \(what), but the server sent over \(Self.totalLimit / 1024) KiB before the TLS handshake", got: pending)
        }
        switch socket.receiveSome(until: deadline, maximum: min(4096, Self.totalLimit - received)) {
        case .data(let data):
            pending += data
            received += data.count
            // Another protocol shows in the first bytes (a TLS record, an HTTP status line, an SSH banner).
            if !checkedFirstBytes, received >= 5 {
                checkedFirstBytes = true
                if let other = Self.otherProtocol(pending) { throw unexpected(other, got: pending) }
            }
        case .closed:
            throw closed(how: "closed", expecting: what)
        case .timedOut:
            let sofar = pending.isEmpty ? lastReply : String(decoding: pending, as: UTF8.self)
            let tail = received == 0
                ? " (the server sent nothing: an implicit-TLS or HTTP server waits silently for its client like this)"
                : "; it last sent \(quoted(sofar))"
            throw ProbeFailure(.starttlsTimeout, "\(proto.displayName) STARTTLS expected \(what) within \(formatSeconds(timeout))\(tail)")
        case .failed(let code) where code == ECONNRESET:
            throw closed(how: "reset", expecting: what)
        case .failed(let code):
            throw ProbeFailure(.closedDuringHandshake, "the connection failed during the \(proto.displayName) dialogue: \(errnoText(code))")
        }
    }

    /// The server ended the connection in the middle of the dialogue.
    private func closed(how: String, expecting what: String) -> ProbeFailure {
        var message = "the server \(how) the connection while \(proto.displayName) STARTTLS expected \(what)"
        if received == 0 {
            message += proto.clientSpeaksFirst
                ? " and sent nothing: a server speaking TLS from the first byte (implicit TLS) does this when the first bytes are not a ClientHello"
                : " and sent nothing"
        } else {
            message += "; it last sent \(quoted(pending.isEmpty ? lastReply : String(decoding: pending, as: UTF8.self)))"
        }
        return ProbeFailure(.starttlsUnexpectedReply, message)
    }

    private mutating func send(_ text: String) throws(ProbeFailure) { try send(Array(text.utf8)) }

    private mutating func send(_ bytes: [UInt8]) throws(ProbeFailure) {
        guard socket.send(bytes, until: deadline) else {
            if deadline.hasPassed {
                throw ProbeFailure(.starttlsTimeout, "\(proto.displayName) STARTTLS could not send within \(formatSeconds(timeout))")
            }
            throw ProbeFailure(.starttlsUnexpectedReply, "the server closed the connection during the \(proto.displayName) dialogue"
                               + (lastReply.isEmpty ? "" : " after \(quoted(lastReply))"))
        }
    }

    // MARK: - Messages

    /// What the first bytes say when they are another protocol than expected.
    private static func otherProtocol(_ bytes: [UInt8]) -> String? {
        guard bytes.count >= 2 else { return nil }
        if (0x14...0x17).contains(bytes[0]), bytes[1] == 3 {
            return "the server answered with a TLS record: this port speaks TLS from the first byte (implicit TLS); scan it without STARTTLS"
        }
        let text = String(decoding: bytes.prefix(8), as: UTF8.self)
        if text.hasPrefix("HTTP/") { return "the server answered like an HTTP server" }
        if text.hasPrefix("SSH-") { return "the server answered like an SSH server" }
        return nil
    }

    private func unexpected(_ what: String, got bytes: [UInt8]) -> ProbeFailure {
        ProbeFailure(.starttlsUnexpectedReply, "\(proto.displayName) STARTTLS: \(what); the server sent \(Self.quote(bytes))")
    }

    private func unexpected(_ what: String, got text: String) -> ProbeFailure { unexpected(what, got: Array(text.utf8)) }

    private func notOffered(_ what: String) -> ProbeFailure {
        ProbeFailure(.starttlsNotOffered, "the server does not offer \(proto.displayName) STARTTLS: \(what)")
    }

    private func refused(_ what: String) -> ProbeFailure {
        ProbeFailure(.starttlsRefused, "\(proto.displayName) STARTTLS refused: \(what)")
    }

    private func quoted(_ text: String) -> String { Self.quote(Array(text.utf8)) }

    /// Printable text in quotes (at most 200 characters, the rest elided), hex for binary data.
    static func quote(_ bytes: [UInt8]) -> String {
        let shown = bytes.prefix(200)
        let printable = shown.filter { (0x20..<0x7F).contains($0) || $0 == 0x0D || $0 == 0x0A || $0 == 0x09 }.count
        if shown.isEmpty { return "nothing" }
        if printable * 10 >= shown.count * 9 {
            let text = String(decoding: shown, as: UTF8.self)
                .replacingOccurrences(of: "\r", with: "").replacingOccurrences(of: "\n", with: " | ")
            return "\"" + text + (bytes.count > 200 ? "...\"" : "\"")
        }
        return shown.prefix(32).map { String(format: "%02x", $0) }.joined(separator: " ") + (bytes.count > 32 ? " ..." : "")
    }

    private func xmlEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "'", with: "&apos;")
            .replacingOccurrences(of: "<", with: "&lt;")
    }

    /// The element `name` (start tag to end tag, or self-closed) within `text`.
    static func element(_ name: String, in text: String) -> String? {
        guard let start = text.range(of: "<\(name)") else { return nil }
        let rest = text[start.lowerBound...]
        if let end = rest.range(of: "</\(name)>") { return String(rest[..<end.upperBound]) }
        if let close = rest.firstIndex(of: ">"), rest[..<close].hasSuffix("/") { return String(rest[...close]) }
        return String(rest)
    }

    /// The human text of a PostgreSQL ErrorResponse: severity, code and message fields.
    static func postgresError(_ body: [UInt8]) -> String {
        var fields: [UInt8: String] = [:]
        var index = 0
        while index < body.count, body[index] != 0 {
            let type = body[index]
            guard let end = body[(index + 1)...].firstIndex(of: 0) else { break }
            fields[type] = String(decoding: body[(index + 1)..<end], as: UTF8.self)
            index = end + 1
        }
        let parts = [fields[UInt8(ascii: "S")], fields[UInt8(ascii: "C")], fields[UInt8(ascii: "M")]].compactMap { $0 }
        return parts.isEmpty ? quote(body) : "\"" + parts.joined(separator: " ") + "\""
    }
}

/// An LDAPMessage holding an ExtendedResponse: its messageID, resultCode and diagnosticMessage.
struct LDAPExtendedResponse {
    var messageID: Int
    var resultCode: Int
    var diagnostic: String

    /// `52 (unavailable): "text"`.
    var summary: String {
        let names = [0: "success", 1: "operationsError", 2: "protocolError", 51: "busy", 52: "unavailable",
                     53: "unwillingToPerform", 80: "other"]
        return "resultCode \(resultCode)" + (names[resultCode].map { " (\($0))" } ?? "")
            + (diagnostic.isEmpty ? "" : ": \(STARTTLSDialogue.quote(Array(diagnostic.utf8)))")
    }

    init?(_ message: [UInt8]) {
        var reader = BERReader(message)
        guard let sequence = reader.element(tag: 0x30) else { return nil }
        var body = BERReader(sequence)
        guard let id = body.element(tag: 0x02), let response = body.element(tag: 0x78) else { return nil }
        var fields = BERReader(response)
        guard let code = fields.element(tag: 0x0A), let _ = fields.element(tag: 0x04), let diagnostic = fields.element(tag: 0x04) else { return nil }
        messageID = id.reduce(0) { $0 << 8 | Int($1) }
        resultCode = code.reduce(0) { $0 << 8 | Int($1) }
        self.diagnostic = String(decoding: diagnostic, as: UTF8.self)
    }
}

/// Reads definite-length BER elements one after another.
struct BERReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The contents of the next element when its tag is `tag`.
    mutating func element(tag: UInt8) -> [UInt8]? {
        guard index + 2 <= bytes.count, bytes[index] == tag else { return nil }
        var length = Int(bytes[index + 1])
        var start = index + 2
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count), start + count <= bytes.count else { return nil }
            length = bytes[start..<(start + count)].reduce(0) { $0 << 8 | Int($1) }
            start += count
        }
        guard start + length <= bytes.count else { return nil }
        index = start + length
        return Array(bytes[start..<(start + length)])
    }
}

extension TCPSocket {
    /// Connects to `address` within `deadline` and, for a STARTTLS target, runs its dialogue within
    /// one more `timeout`: the socket is then ready for the ClientHello.
    /// A server that greets with "too busy, try later" (SMTP and FTP 421, NNTP 400: mail servers cap
    /// concurrent sessions per host, and enumeration opens many) is asked again after 0.5, 1 and 2 s.
    static func open(to address: SocketAddress, target: ScanTarget, deadline: Deadline, timeout: Double) throws(ProbeFailure) -> TCPSocket {
        var pauses = [0.5, 1, 2]
        while true {
            let socket = try connect(to: address, deadline: deadline, timeout: timeout)
            guard let starttls = target.starttls else { return socket }
            var dialogue = STARTTLSDialogue(socket: socket, protocol: starttls.protocol, domain: target.sni ?? target.host,
                                            deadline: Deadline(after: timeout), timeout: timeout)
            do {
                try dialogue.run()
                return socket
            } catch where dialogue.serverBusy && !pauses.isEmpty {
                let pause = pauses.removeFirst()
                BlockingWait.around { Thread.sleep(forTimeInterval: pause) }
            }
        }
    }
}
