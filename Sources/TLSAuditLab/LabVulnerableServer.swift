import Foundation
import TLSAuditProbe
#if canImport(Glibc)
import Glibc
#endif

/// A vulnerable behaviour reproduced at the protocol level, as the servers that had it behaved.
public enum LabVulnerability: Sendable {
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
    /// the ROBOT behaviours decrypt key exchanges with.
    public init(_ vulnerability: LabVulnerability, backendPort: Int, keyPEM: String) throws {
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
            var relay = Relay(vulnerability: vulnerability, client: client, server: upstream, keyFile: keyFile)
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
        var fromClient: [UInt8] = []
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
                guard send(client, RecordConversation.record(record.type, version: record.version, record.fragment)) else { return false }
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
            let process = Process()
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
