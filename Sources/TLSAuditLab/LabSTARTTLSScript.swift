import Foundation
import Synchronization
import TLSAuditProbe
public import TLSAuditModel
#if canImport(Glibc)
import Glibc
#endif

/// A lab server's side of one plaintext connection: blocking reads and writes (the listener set
/// 5-second timeouts), one byte at a time so that nothing of the TLS handshake is read early.
public final class LabConnection {
    public let descriptor: Int32

    init(_ descriptor: Int32) { self.descriptor = descriptor }

    public func send(_ text: String) { send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Bytes up to and including `terminator` (or what came before the peer closed or went quiet).
    public func read(through terminator: [UInt8], limit: Int = 64 * 1024) -> [UInt8] {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < limit, Glibc.read(descriptor, &byte, 1) == 1 {
            bytes.append(byte)
            if bytes.count >= terminator.count, Array(bytes.suffix(terminator.count)) == terminator { break }
        }
        return bytes
    }

    /// What has arrived, left for the next reader (MSG_PEEK): up to `count` bytes, waiting until
    /// that many are there or the peer stops sending.
    public func peek(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        for _ in 0..<50 {
            got = recv(descriptor, &bytes, count, Int32(MSG_PEEK))
            if got >= count || got <= 0 { break }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return Array(bytes[..<max(got, 0)])
    }

    /// One line without its CR LF.
    public func line() -> String {
        String(decoding: read(through: [0x0A]), as: UTF8.self).trimmingCharacters(in: .newlines)
    }

    /// Exactly `count` bytes (fewer when the peer closed).
    public func bytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = bytes[got...].withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            got += n
        }
        return Array(bytes[..<got])
    }
}

/// Scripted STARTTLS servers, following each protocol's RFC (PostgreSQL's and MySQL's wire
/// protocols for those two), for protocols the tests have no real server for and for the failure
/// cases. Each returns a `LabServerConfiguration.plaintextDialogue`.
public enum LabSTARTTLSScript {
    public enum Behavior: Sendable, Equatable {
        /// Offers STARTTLS and goes ahead.
        case upgrade
        /// Lists capabilities without STARTTLS.
        case notOffered
        /// Lists STARTTLS, then refuses it with an error reply.
        case refused
        /// Greets (with capabilities), then never answers the upgrade command.
        case stallBeforeUpgrade
        /// A greeting of about a megabyte in continuation lines.
        case hugeBanner
        /// A greeting line of a megabyte without an end.
        case endlessLine
    }

    /// Counts connections in their dialogue, and the most at once, for the per-host limit.
    public final class Counter: Sendable {
        private let state = Mutex<(now: Int, peak: Int, total: Int)>((0, 0, 0))
        public init() {}
        func enter() { state.withLock { $0.now += 1; $0.total += 1; $0.peak = max($0.peak, $0.now) } }
        func leave() { state.withLock { $0.now -= 1 } }
        public var peak: Int { state.withLock { $0.peak } }
        public var total: Int { state.withLock { $0.total } }
    }

    /// The server side of `protocol`'s dialogue. `domain`: the XMPP domain the server serves (a
    /// stream header to another domain is refused with host-unknown, as servers do).
    public static func dialogue(_ protocol: STARTTLSProtocol, _ behavior: Behavior, domain: String = "lab.tlsaudit.test",
                                counter: Counter? = nil) -> @Sendable (LabConnection) -> Bool {
        { connection in
            counter?.enter()
            // Held a moment, so that concurrent dialogues overlap and the counter sees them.
            defer { counter?.leave() }
            if counter != nil { Thread.sleep(forTimeInterval: 0.05) }
            switch behavior {
            case .hugeBanner where [.smtp, .ftp, .nntp].contains(`protocol`):
                let line = "220-" + String(repeating: "x", count: 996) + "\r\n"
                for _ in 0..<1024 { connection.send(line) }
                return false
            case .endlessLine:
                let chunk = [UInt8](repeating: UInt8(ascii: "y"), count: 64 * 1024)
                for _ in 0..<16 { connection.send(chunk) }
                return false
            default:
                break
            }
            switch `protocol` {
            case .smtp: return smtp(connection, behavior)
            case .ftp: return ftp(connection, behavior)
            case .nntp: return nntp(connection, behavior)
            case .xmpp, .xmppServer: return xmpp(connection, behavior, server: `protocol` == .xmppServer, domain: domain)
            case .mysql: return mysql(connection, behavior)
            case .pop3: return pop3(connection, behavior)
            case .imap, .ldap, .postgres, .sieve: return false // real servers in the tests
            }
        }
    }

    /// RFC 5321 / 3207.
    private static func smtp(_ connection: LabConnection, _ behavior: Behavior) -> Bool {
        connection.send("220 mx.lab.tlsaudit.test ESMTP lab\r\n")
        guard connection.line().uppercased().hasPrefix("EHLO ") else { return false }
        connection.send("250-mx.lab.tlsaudit.test\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n"
                        + (behavior == .notOffered ? "" : "250-STARTTLS\r\n") + "250 8BITMIME\r\n")
        guard behavior != .notOffered, connection.line().uppercased() == "STARTTLS", behavior != .stallBeforeUpgrade else {
            if behavior == .stallBeforeUpgrade { Thread.sleep(forTimeInterval: 4) }
            return false
        }
        if behavior == .refused {
            connection.send("454 4.7.0 TLS not available due to local problem\r\n")
            return false
        }
        connection.send("220 2.0.0 Ready to start TLS\r\n")
        return true
    }

    /// RFC 959 multi-line greeting, RFC 4217 AUTH TLS.
    private static func ftp(_ connection: LabConnection, _ behavior: Behavior) -> Bool {
        connection.send("220-Welcome to the lab FTP server\r\n  (no anonymous access)\r\n220 ready\r\n")
        guard connection.line().uppercased() == "AUTH TLS" else { return false }
        switch behavior {
        case .notOffered: connection.send("502 Command not implemented\r\n"); return false
        case .refused: connection.send("534 Request denied for policy reasons\r\n"); return false
        case .stallBeforeUpgrade: Thread.sleep(forTimeInterval: 4); return false
        default: connection.send("234 AUTH TLS successful\r\n"); return true
        }
    }

    /// RFC 3977 CAPABILITIES, RFC 4642 STARTTLS.
    private static func nntp(_ connection: LabConnection, _ behavior: Behavior) -> Bool {
        connection.send("200 news.lab.tlsaudit.test service available, posting allowed\r\n")
        guard connection.line().uppercased() == "CAPABILITIES" else { return false }
        connection.send("101 Capability list:\r\nVERSION 2\r\nREADER\r\n" + (behavior == .notOffered ? "" : "STARTTLS\r\n") + "LIST ACTIVE NEWSGROUPS\r\n.\r\n")
        guard behavior != .notOffered, connection.line().uppercased() == "STARTTLS" else { return false }
        switch behavior {
        case .refused: connection.send("580 Can not initiate TLS negotiation\r\n"); return false
        case .stallBeforeUpgrade: Thread.sleep(forTimeInterval: 4); return false
        default: connection.send("382 Continue with TLS negotiation\r\n"); return true
        }
    }

    /// RFC 2449 CAPA, RFC 2595 STLS.
    private static func pop3(_ connection: LabConnection, _ behavior: Behavior) -> Bool {
        connection.send("+OK lab POP3 server ready\r\n")
        guard connection.line().uppercased() == "CAPA" else { return false }
        connection.send("+OK Capability list follows\r\nUSER\r\nTOP\r\n" + (behavior == .notOffered ? "" : "STLS\r\n") + ".\r\n")
        guard behavior != .notOffered, connection.line().uppercased() == "STLS" else { return false }
        switch behavior {
        case .refused: connection.send("-ERR TLS is not available now\r\n"); return false
        case .stallBeforeUpgrade: Thread.sleep(forTimeInterval: 4); return false
        default: connection.send("+OK Begin TLS negotiation\r\n"); return true
        }
    }

    /// RFC 6120: stream header, features, starttls, proceed.
    private static func xmpp(_ connection: LabConnection, _ behavior: Behavior, server: Bool, domain: String) -> Bool {
        let header = String(decoding: connection.read(through: Array("version='1.0'>".utf8)), as: UTF8.self)
        let namespace = server ? "jabber:server" : "jabber:client"
        connection.send("<?xml version='1.0'?><stream:stream xmlns='\(namespace)' xmlns:stream='http://etherx.jabber.org/streams' "
                        + "id='lab1' from='\(domain)' version='1.0'>")
        guard header.contains("to='\(domain)'"), header.contains("xmlns='\(namespace)'") else {
            connection.send("<stream:error><host-unknown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error></stream:stream>")
            return false
        }
        let tls = behavior == .notOffered ? "" : "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls>"
        connection.send("<stream:features>\(tls)<mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>")
        guard behavior != .notOffered else { return false }
        guard String(decoding: connection.read(through: Array("/>".utf8)), as: UTF8.self).contains("<starttls") else { return false }
        switch behavior {
        case .refused: connection.send("<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:stream>"); return false
        case .stallBeforeUpgrade: Thread.sleep(forTimeInterval: 4); return false
        default: connection.send("<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"); return true
        }
    }

    /// MySQL protocol 10: the server's handshake packet, the client's 32-byte SSLRequest.
    private static func mysql(_ connection: LabConnection, _ behavior: Behavior) -> Bool {
        if behavior == .refused {
            let message = Array("#HY000Host '127.0.0.1' is not allowed to connect to this MariaDB server".utf8)
            connection.send([UInt8(message.count + 3), 0, 0, 0, 0xFF, 0x6A, 0x04] + message) // error 1130
            return false
        }
        // CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION, and CLIENT_SSL when offered.
        let capabilities: UInt16 = 0x0001 | 0x0200 | 0x8000 | (behavior == .notOffered ? 0 : 0x0800)
        var payload: [UInt8] = [10] + Array("10.11.6-MariaDB-lab".utf8) + [0]
        payload += [7, 0, 0, 0] + Array("abcdefgh".utf8) + [0]
        payload += [UInt8(capabilities & 0xFF), UInt8(capabilities >> 8), 45, 2, 0, 0x08, 0x00, 21]
        payload += [UInt8](repeating: 0, count: 10) + Array("ijklmnopqrst".utf8) + [0] + Array("mysql_native_password".utf8) + [0]
        connection.send([UInt8(payload.count & 0xFF), UInt8(payload.count >> 8), 0, 0] + payload)
        guard behavior != .notOffered else { return false }
        let request = connection.bytes(36)
        guard request.count == 36, request[0] == 32, request[3] == 1, request[5] & 0x08 != 0 else { return false }
        if behavior == .stallBeforeUpgrade { Thread.sleep(forTimeInterval: 4); return false }
        return true
    }
}

/// A server that speaks a post-quantum hybrid group this libssl does not have: a TLS 1.3
/// ClientHello listing `group` in supported_groups without a key share for it is answered with a
/// HelloRetryRequest asking for `group` (RFC 8446, 4.1.4); any other hello goes on to the lab's
/// OpenSSL server untouched (it was only peeked at).
public enum LabHybridGroupServer {
    public static func dialogue(group: UInt16) -> @Sendable (LabConnection) -> Bool {
        { connection in
            let header = connection.peek(5)
            guard header.count == 5, header[0] == 0x16 else { return true }
            let length = Int(header[3]) << 8 | Int(header[4])
            let record = connection.peek(5 + length)
            guard record.count == 5 + length, let hello = ClientHelloSummary(Array(record[5...])),
                  hello.groups.contains(group), !hello.keyShareGroups.contains(group) else { return true }
            _ = connection.bytes(5 + length)
            var body: [UInt8] = [0x03, 0x03] + HandBuiltHello.helloRetryRandom + [UInt8(hello.sessionID.count)] + hello.sessionID + [0x13, 0x01, 0x00]
            let extensions: [UInt8] = [0x00, 0x2B, 0x00, 0x02, 0x03, 0x04, 0x00, 0x33, 0x00, 0x02, UInt8(group >> 8), UInt8(group & 0xFF)]
            body += [UInt8(extensions.count >> 8), UInt8(extensions.count & 0xFF)] + extensions
            let message: [UInt8] = [0x02, 0x00, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
            connection.send([0x16, 0x03, 0x03, UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message)
            _ = connection.peek(1) // the client's next move (it closes: it has no key for the group)
            return false
        }
    }

    /// The parts of a ClientHello handshake message the server needs.
    struct ClientHelloSummary {
        var sessionID: [UInt8]
        var groups: [UInt16] = []
        var keyShareGroups: [UInt16] = []

        init?(_ handshake: [UInt8]) {
            guard handshake.count > 4, handshake[0] == 1 else { return nil }
            var index = 4 + 2 + 32
            guard index < handshake.count else { return nil }
            let sessionLength = Int(handshake[index])
            guard index + 1 + sessionLength + 2 <= handshake.count else { return nil }
            sessionID = Array(handshake[(index + 1)..<(index + 1 + sessionLength)])
            index += 1 + sessionLength
            let suites = Int(handshake[index]) << 8 | Int(handshake[index + 1])
            index += 2 + suites
            guard index < handshake.count else { return nil }
            index += 1 + Int(handshake[index])
            guard index + 2 <= handshake.count else { return nil }
            for (type, data) in HandBuiltHello.extensions(handshake, at: index) where data.count >= 2 {
                func u16(_ at: Int) -> UInt16 { UInt16(data[at]) << 8 | UInt16(data[at + 1]) }
                if type == 0x000A { groups = stride(from: 2, to: data.count - 1, by: 2).map(u16) }
                if type == 0x0033 {
                    var at = 2
                    while at + 4 <= data.count {
                        keyShareGroups.append(u16(at))
                        at += 4 + Int(u16(at + 2))
                    }
                }
            }
        }
    }
}
