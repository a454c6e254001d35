import Foundation
import TLSAuditModel
import TLSAuditProbe
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// A vulnerable behaviour reproduced at the protocol level, as the servers that had it behaved.
public enum LabVulnerability: Sendable, Equatable {
    /// Heartbleed: a heartbeat request is echoed with as many bytes as it claims, the missing ones
    /// taken from "memory" (a fixed lab pattern), even before the handshake ends.
    case heartbleed
    /// CVE-2014-0224: a ChangeCipherSpec before the key exchange is taken; the next record then
    /// fails its MAC (bad_record_mac), as with the empty-secret keys a vulnerable OpenSSL switched to.
    case ccsInjection
    /// ROBOT, strong oracle: a key exchange whose decrypted block does not start 00 02 gets the
    /// connection closed without an alert; any other goes on to the real server's answer.
    case robotStrongOracle
    /// ROBOT, weak oracle: any PKCS #1 v1.5 format error (first bytes, no separator, a secret not
    /// 48 bytes) gets alert handshake_failure; a well-formed block goes on to the real server.
    case robotWeakOracle
    /// DROWN: an SSLv2 CLIENT-HELLO is answered with a SERVER-HELLO carrying the certificate
    /// (offering DES-EDE3-CBC-MD5); the connection then ends.
    case sslv2
    /// POODLE: an SSLv3 ClientHello offering a CBC suite gets an SSLv3 ServerHello choosing it,
    /// the certificate and ServerHelloDone.
    case sslv3CBC
    /// FREAK: a ClientHello (TLS 1.0 or later) offering TLS_RSA_EXPORT_WITH_DES40_CBC_SHA gets it,
    /// with a 512-bit temporary RSA key in a ServerKeyExchange (its signature is not a signature:
    /// nobody goes further).
    case exportRSA
    /// LOGJAM: a ClientHello (TLS 1.0 or later) offering TLS_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA gets
    /// it, with a 512-bit group.
    case exportDH
    /// Ticketbleed: when the real server resumes a ticket offered with a session ID shorter than 32
    /// bytes, its ServerHello's session ID is stretched to 32 bytes with lab "memory".
    case ticketbleed
    /// A server that drops ClientHellos over `bytes` (the handshake message) or with GREASE values.
    case helloIntolerance(bytes: Int)
}

/// A TLS 1.2 server with one vulnerability: a relay in front of a real (fixed) OpenSSL server on
/// loopback that watches the records in clear and, where the vulnerable server would have
/// answered differently, answers itself. Everything else is the real server's: handshakes
/// complete, so scanners (tlsaudit, sslyze) see a normal server until they probe.
public final class LabVulnerableServer: Sendable {
    public let port: Int
    private let listener: LabListener
    private let keyFile: String

    /// `backendPort`: the real server on 127.0.0.1 (TLS 1.2 at most); `keyPEM`: its RSA key, which
    /// the ROBOT behaviours decrypt key exchanges with; `chainDER`: the certificates the relay's own
    /// answers (SSLv2, SSLv3, export) carry, leaf first.
    public init(_ vulnerability: LabVulnerability, backendPort: Int, keyPEM: String, chainDER: [[UInt8]] = []) throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("lab-vulnerable-\(UUID().uuidString).pem").path
        try keyPEM.write(toFile: keyFile, atomically: true, encoding: .utf8)
        self.keyFile = keyFile
        listener = try LabListener(address: "127.0.0.1") { client in
            defer { close(client) }
            guard let backend = Resolver.numericAddress("127.0.0.1", port: backendPort) else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard upstream >= 0 else { return }
            defer { close(upstream) }
            guard backend.withSockaddr({ connect(upstream, $0, $1) }) == 0 else { return }
            var relay = Relay(vulnerability: vulnerability, client: client, server: upstream, keyFile: keyFile, chain: chainDER)
            relay.run()
        }
        port = listener.port
    }

    public func stop() {
        listener.stop()
        try? FileManager.default.removeItem(atPath: keyFile)
    }

    /// One connection: records read whole from each side, inspected, passed on or answered.
    private struct Relay {
        let vulnerability: LabVulnerability
        let client: Int32
        let server: Int32
        let keyFile: String
        let chain: [[UInt8]]
        var fromClient: [UInt8] = []
        var clientHelloSeen = false
        /// Ticketbleed: the short session ID a ClientHello offered with a ticket.
        var shortSessionID: [UInt8]?
        var fromServer: [UInt8] = []
        /// The server's handshake bytes before its ChangeCipherSpec, walked for ServerHelloDone.
        var serverHandshake: [UInt8] = []
        var serverDone = false
        var serverChangedCipher = false
        var clientChangedCipher = false
        var keyExchangeSeen = false
        var earlyChangeCipherSpec = false
        /// Heartbeat answers held until the server's first flight has been passed on.
        var heldAnswers: [UInt8] = []

        /// Relays until a side closes, nothing moves for 5 s, or the behaviour ends the connection.
        mutating func run() {
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                var entries = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
                guard poll(&entries, 2, 5000) > 0 else { return }
                if entries[1].revents != 0 {
                    let count = recv(server, &buffer, buffer.count, 0)
                    guard count > 0 else { return }
                    fromServer += buffer[..<count]
                    guard passServerRecords() else { return }
                }
                if entries[0].revents != 0 {
                    let count = recv(client, &buffer, buffer.count, 0)
                    guard count > 0 else { return }
                    fromClient += buffer[..<count]
                    if case .sslv2 = vulnerability, !clientHelloSeen, let first = fromClient.first, first & 0x80 != 0 {
                        _ = send(client, Self.sslv2ServerHello(certificate: chain.first ?? []))
                        return
                    }
                    guard passClientRecords() else { return }
                }
            }
        }

        /// Whole records from `buffer`, removed from it.
        static func records(_ buffer: inout [UInt8]) -> [(type: UInt8, version: UInt16, fragment: [UInt8])] {
            var found: [(type: UInt8, version: UInt16, fragment: [UInt8])] = []
            while buffer.count >= 5 {
                let length = Int(buffer[3]) << 8 | Int(buffer[4])
                guard buffer.count >= 5 + length else { break }
                found.append((buffer[0], UInt16(buffer[1]) << 8 | UInt16(buffer[2]), Array(buffer[5..<(5 + length)])))
                buffer.removeFirst(5 + length)
            }
            return found
        }

        func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
            bytes.isEmpty || Glibc.send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count
        }

        mutating func passServerRecords() -> Bool {
            for record in Self.records(&fromServer) {
                var fragment = record.fragment
                if let sent = shortSessionID, record.type == 22, fragment.first == 2 {
                    fragment = Self.stretchedSessionID(fragment, sent: sent)
                    shortSessionID = nil
                }
                guard send(client, RecordConversation.record(record.type, version: record.version, fragment)) else { return false }
                if record.type == 20 { serverChangedCipher = true }
                guard record.type == 22, !serverChangedCipher, !serverDone else { continue }
                serverHandshake += record.fragment
                while let message = RecordConversation.takeHandshakeMessage(&serverHandshake) {
                    if message.type == 14 { serverDone = true }
                }
                if serverDone, !heldAnswers.isEmpty {
                    guard send(client, heldAnswers) else { return false }
                    heldAnswers = []
                }
            }
            return true
        }

        /// False when the behaviour ends the connection.
        mutating func passClientRecords() -> Bool {
            for record in Self.records(&fromClient) {
                if clientChangedCipher && !earlyChangeCipherSpec {
                    guard send(server, RecordConversation.record(record.type, version: record.version, record.fragment)) else { return false }
                    continue
                }
                if record.type == 22, record.fragment.first == 1, !clientHelloSeen {
                    clientHelloSeen = true
                    if let answer = answerClientHello(record.fragment, recordVersion: record.version) {
                        _ = send(client, answer)
                        return false
                    }
                    if case .helloIntolerance(let limit) = vulnerability, Self.intolerable(record.fragment, limit: limit) { return false }
                }
                switch (vulnerability, record.type) {
                case (.heartbleed, 24) where record.fragment.count >= 3 && record.fragment[0] == 1:
                    let answer = Self.heartbleedAnswer(record.fragment, version: record.version)
                    if serverDone {
                        guard send(client, answer) else { return false }
                    } else {
                        heldAnswers += answer
                    }
                    continue
                case (.ccsInjection, 20) where !keyExchangeSeen:
                    earlyChangeCipherSpec = true
                    clientChangedCipher = true
                    continue
                case (.ccsInjection, _) where earlyChangeCipherSpec:
                    _ = send(client, RecordConversation.record(21, version: record.version, [2, 20])) // fatal bad_record_mac
                    return false
                case (.robotStrongOracle, 22), (.robotWeakOracle, 22):
                    if record.fragment.first == 16, let block = decrypt(record.fragment) {
                        keyExchangeSeen = true
                        if vulnerability == .robotStrongOracle, !(block.count > 2 && block[0] == 0 && block[1] == 2) {
                            return false // closed without an alert
                        }
                        if vulnerability == .robotWeakOracle, !Self.wellFormed(block) {
                            _ = send(client, RecordConversation.record(21, version: record.version, [2, 40])) // fatal handshake_failure
                            return false
                        }
                    }
                default:
                    break
                }
                if record.type == 22, record.fragment.first == 16 { keyExchangeSeen = true }
                if record.type == 20 { clientChangedCipher = true }
                guard send(server, RecordConversation.record(record.type, version: record.version, record.fragment)) else { return false }
            }
            return true
        }

        /// A ClientHello's legacy version, session ID, suites and extension types, or nil when truncated.
        static func clientHello(_ message: [UInt8]) -> (version: UInt16, sessionID: [UInt8], suites: [UInt16],
                                                        extensions: [(type: UInt16, data: [UInt8])])? {
            var index = 4 + 2 + 32
            guard message.count > index else { return nil }
            let version = UInt16(message[4]) << 8 | UInt16(message[5])
            let sessionID = Array(message[(index + 1)..<min(message.count, index + 1 + Int(message[index]))])
            index += 1 + sessionID.count
            guard message.count >= index + 2 else { return nil }
            let suitesLength = Int(message[index]) << 8 | Int(message[index + 1])
            guard message.count >= index + 2 + suitesLength + 1 else { return nil }
            let suites = stride(from: index + 2, to: index + 2 + suitesLength - 1, by: 2).map { UInt16(message[$0]) << 8 | UInt16(message[$0 + 1]) }
            index += 2 + suitesLength
            index += 1 + Int(message[index])
            return (version, sessionID, suites, HandBuiltHello.extensions(message, at: index))
        }

        /// The relay's own first flight for the behaviours that answer the ClientHello themselves.
        mutating func answerClientHello(_ message: [UInt8], recordVersion: UInt16) -> [UInt8]? {
            guard let hello = Self.clientHello(message) else { return nil }
            let version = min(hello.version, 0x0303)
            func pick(_ include: (CipherSuiteInfo) -> Bool) -> CipherSuiteInfo? {
                hello.suites.lazy.compactMap(CipherSuiteRegistry.suite).first(where: include)
            }
            let random512 = [0xC3] + (0..<63).map { _ in UInt8.random(in: 0...255) }
            let signature = (version >= 0x0303 ? [UInt8]([4, 1]) : []) + vector16((0..<256).map { _ in UInt8.random(in: 0...255) })
            switch vulnerability {
            case .sslv3CBC where hello.version == 0x0300:
                guard let suite = pick({ $0.isCBC && !$0.isExport && !$0.isEllipticCurveDH && !$0.isFiniteFieldDH }) else { return nil }
                return flight(version: 0x0300, suite: suite.code, keyExchange: nil)
            // One export suite each (DES40: every export suite is also RC4 or a 64-bit block cipher), TLS 1.0 and up.
            case .exportRSA where hello.version >= 0x0301:
                guard let suite = pick({ $0.code == 0x0008 }) else { return nil }  // TLS_RSA_EXPORT_WITH_DES40_CBC_SHA
                return flight(version: version, suite: suite.code, keyExchange: vector16(random512) + vector16([1, 0, 1]) + signature)
            case .exportDH where hello.version >= 0x0301:
                guard let suite = pick({ $0.code == 0x0014 }) else { return nil }  // TLS_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA
                let share = vector16((0..<64).map { _ in UInt8.random(in: 1...255) })
                return flight(version: version, suite: suite.code, keyExchange: vector16(random512) + vector16([2]) + share + signature)
            case .ticketbleed:
                if hello.sessionID.count < 32, !hello.sessionID.isEmpty,
                   hello.extensions.contains(where: { $0.type == 0x0023 && !$0.data.isEmpty }) {
                    shortSessionID = hello.sessionID
                }
                return nil
            default:
                return nil
            }
        }

        /// ServerHello, Certificate, ServerKeyExchange (when given) and ServerHelloDone in one record.
        func flight(version: UInt16, suite: UInt16, keyExchange: [UInt8]?) -> [UInt8] {
            var messages = Self.handshake(2, [UInt8(version >> 8), UInt8(version & 0xFF)] + (0..<32).map { _ in UInt8.random(in: 0...255) }
                                              + [32] + (0..<32).map { _ in UInt8.random(in: 0...255) } + [UInt8(suite >> 8), UInt8(suite & 0xFF), 0])
            let certificates = chain.flatMap { Self.u24($0.count) + $0 }
            messages += Self.handshake(11, Self.u24(certificates.count) + certificates)
            if let keyExchange { messages += Self.handshake(12, keyExchange) }
            messages += Self.handshake(14, [])
            return RecordConversation.record(22, version: version, messages)
        }

        static func u24(_ value: Int) -> [UInt8] { [UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        func vector16(_ bytes: [UInt8]) -> [UInt8] { [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes }
        static func handshake(_ type: UInt8, _ body: [UInt8]) -> [UInt8] { [type] + u24(body.count) + body }

        /// SERVER-HELLO: no session hit, an X.509 certificate, SSL 2.0, DES-EDE3-CBC-MD5, a 16-byte connection id.
        static func sslv2ServerHello(certificate: [UInt8]) -> [UInt8] {
            let specs: [UInt8] = [0x07, 0x00, 0xC0]
            let body: [UInt8] = [4, 0, 1, 0x00, 0x02, UInt8(certificate.count >> 8), UInt8(certificate.count & 0xFF), 0, UInt8(specs.count), 0, 16]
                + certificate + specs + (0..<16).map { _ in UInt8.random(in: 0...255) }
            return [0x80 | UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
        }

        /// A ServerHello (first in `fragment`) whose session ID is `sent`, given 32 bytes: `sent`, then lab memory.
        static func stretchedSessionID(_ fragment: [UInt8], sent: [UInt8]) -> [UInt8] {
            let at = 4 + 2 + 32
            guard fragment.count > at, Int(fragment[at]) == sent.count, Array(fragment[(at + 1)..<min(fragment.count, at + 1 + sent.count)]) == sent else {
                return fragment
            }
            let memory = Array("LAB-MEMORY-NOT-A-SECRET ".utf8)
            let stretched = sent + (0..<(32 - sent.count)).map { memory[$0 % memory.count] }
            let length = Int(fragment[1]) << 16 | Int(fragment[2]) << 8 | Int(fragment[3])
            var body = Array(fragment[4..<(4 + length)])
            body.replaceSubrange((at - 4)..<(at - 4 + 1 + sent.count), with: [32] + stretched)
            return handshake(2, body) + Array(fragment[(4 + length)...])
        }

        /// Over `limit` bytes, or a GREASE value (0x?A?A) among the suites or extensions.
        static func intolerable(_ message: [UInt8], limit: Int) -> Bool {
            guard message.count <= limit else { return true }
            guard let hello = clientHello(message) else { return false }
            func isGrease(_ value: UInt16) -> Bool { value & 0x0F0F == 0x0A0A && value >> 8 == value & 0xFF }
            return hello.suites.contains(where: isGrease) || hello.extensions.contains { isGrease($0.type) }
        }

        /// Type 2, the claimed length, that many bytes (past the request's end: lab "memory"), 16 of padding.
        static func heartbleedAnswer(_ request: [UInt8], version: UInt16) -> [UInt8] {
            let claimed = Int(request[1]) << 8 | Int(request[2])
            let carried = Array(request[3...].prefix(claimed))
            let memory = Array("LAB-MEMORY-NOT-A-SECRET ".utf8)
            let payload = carried + (0..<(claimed - carried.count)).map { memory[$0 % memory.count] }
            let message = [2, request[1], request[2]] + payload + [UInt8](repeating: 0x5A, count: 16)
            return stride(from: 0, to: message.count, by: 16_384).flatMap {
                RecordConversation.record(24, version: version, Array(message[$0..<min(message.count, $0 + 16_384)]))
            }
        }

        /// 00 02, at least 8 non-zero bytes, 00, a 48-byte secret.
        static func wellFormed(_ block: [UInt8]) -> Bool {
            guard block.count > 11, block[0] == 0, block[1] == 2, let separator = block[2...].firstIndex(of: 0) else { return false }
            return separator >= 10 && block.count - separator - 1 == 48
        }

        /// The ClientKeyExchange's encrypted secret, decrypted without padding checks (`openssl pkeyutl`).
        func decrypt(_ message: [UInt8]) -> [UInt8]? {
            // An RSA key exchange: a two-byte length, then the whole ciphertext (an ECDHE one has a one-byte length).
            guard message.count >= 6 + 128, Int(message[4]) << 8 | Int(message[5]) == message.count - 6 else { return nil }
            let encrypted = Array(message[6...])
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lab-robot-\(UUID().uuidString)")
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let input = directory.appendingPathComponent("in"), output = directory.appendingPathComponent("out")
            guard (try? Data(encrypted).write(to: input)) != nil else { return nil }
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = ["pkeyutl", "-decrypt", "-inkey", keyFile, "-pkeyopt", "rsa_padding_mode:none",
                                 "-in", input.path, "-out", output.path]
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return nil }
            process.waitUntilExit()
            guard process.terminationStatus == 0, let data = try? Data(contentsOf: output) else { return nil }
            return Array(data)
        }
    }
}
