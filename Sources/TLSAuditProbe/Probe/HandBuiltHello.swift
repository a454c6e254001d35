import Foundation
import TLSAuditModel

/// ClientHellos this libssl cannot send (a compression method, groups it does not know, such as the
/// post-quantum hybrids), built byte by byte, and the first answer parsed: a ServerHello (or
/// HelloRetryRequest) or an alert. Only the hello is sent: no key is ever needed.
package enum HandBuiltHello {
    /// `SHA-256("HelloRetryRequest")`: the random of a HelloRetryRequest (RFC 8446, 4.1.3).
    package static let helloRetryRandom: [UInt8] = [
        0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
        0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
    ]

    /// Post-quantum hybrid groups (IANA TLS Supported Groups), by code point.
    static let postQuantumGroups: [(code: UInt16, name: String)] = [
        (0x11EC, "X25519MLKEM768"), (0x11EB, "SecP256r1MLKEM768"), (0x11ED, "SecP384r1MLKEM1024"),
        (0x6399, "X25519Kyber768Draft00"),
    ]

    struct ServerHello {
        var version: UInt16
        var cipher: UInt16
        var compression: UInt8
        var isHelloRetryRequest: Bool
        /// The key_share group a HelloRetryRequest asks for, or a ServerHello's share's group.
        var selectedGroup: UInt16?
        /// The extensions' types, in the order sent.
        var extensions: [UInt16]
        /// The session id the server sent (echoed, new, or empty).
        var sessionID: [UInt8] = []
    }

    enum Answer {
        case serverHello(ServerHello)
        case alert(UInt8)
        /// The server closed or reset the connection on the hello without a word (how some servers
        /// refuse what they do not take), in a sentence.
        case closed(String)
        /// Closed, timed out or not TLS, in a sentence.
        case other(String)
    }

    /// ECDHE, DHE and RSA key exchange with AES-GCM, ChaCha20, AES-CBC and 3DES, then the renegotiation SCSV.
    static let tls12Suites: [UInt16] = [0xC02F, 0xC030, 0xC02B, 0xC02C, 0xCCA8, 0xCCA9, 0xC013, 0xC014, 0xC009, 0xC00A,
                                        0x009E, 0x009F, 0x0033, 0x0039, 0x009C, 0x009D, 0x002F, 0x0035, 0x000A, 0x00FF]
    /// RSA key exchange only (TLS_RSA_WITH_AES_128_GCM_SHA256 ... 3DES), then the renegotiation SCSV.
    static let rsaKeyExchangeSuites: [UInt16] = [0x009C, 0x009D, 0x003C, 0x003D, 0x002F, 0x0035, 0x000A, 0x00FF]

    /// What a hand-built ClientHello offers; every list goes on the wire as given, in order.
    struct Offer: Sendable {
        /// legacy_version: 0x0300 (SSLv3) to 0x0303 (TLS 1.2; TLS 1.3 is offered in supported_versions).
        var version: UInt16 = 0x0303
        var suites: [UInt16]
        var compression: [UInt8] = [0]
        var serverName: String?
        /// supported_groups; nil leaves the extension out.
        var groups: [UInt16]? = [0x001D, 0x0017, 0x0018, 0x0019]
        /// ec_point_formats (uncompressed) alongside the groups.
        var pointFormats = true
        /// signature_algorithms; nil leaves it out (as SSLv3 to TLS 1.1 clients do).
        var signatureAlgorithms: [UInt16]? = HandBuiltHello.signatureAlgorithms
        /// supported_versions (TLS 1.3); nil leaves it out.
        var supportedVersions: [UInt16]?
        /// key_share entries (group and key); nil leaves it out, [] sends an empty list.
        var keyShares: [KeyShare]?
        /// A 32-byte legacy session id (as TLS 1.3 clients send), else an empty one.
        var legacySessionID = true
        /// A legacy session id sent as given (Ticketbleed's short one), instead of `legacySessionID`'s.
        var sessionID: [UInt8]?
        /// Any other extensions, appended in order.
        var extraExtensions: [Extension] = []

        struct KeyShare: Sendable { var group: UInt16; var key: [UInt8] }
        struct Extension: Sendable { var type: UInt16; var data: [UInt8] }

        init(version: UInt16 = 0x0303, suites: [UInt16], serverName: String?) {
            self.version = version
            self.suites = suites
            self.serverName = serverName
            if version < 0x0303 { signatureAlgorithms = nil }
        }

        /// The ClientHello in one handshake record (record version TLS 1.0, SSLv3 for an SSLv3 hello).
        var bytes: [UInt8] {
            var extensions: [(UInt16, [UInt8])] = []
            if let serverName { extensions.append((0x0000, HandBuiltHello.serverNameExtension(serverName))) }
            if let groups {
                extensions.append((0x000A, vector16(u16s: groups)))
                if pointFormats { extensions.append((0x000B, [1, 0])) }
            }
            if let signatureAlgorithms { extensions.append((0x000D, vector16(u16s: signatureAlgorithms))) }
            if let supportedVersions {
                extensions.append((0x002B, [UInt8(supportedVersions.count * 2)] + supportedVersions.flatMap(u16)))
                extensions.append((0x002D, [1, 1]))  // psk_key_exchange_modes: psk_dhe_ke
            }
            if let keyShares {
                extensions.append((0x0033, vector16(keyShares.flatMap { u16($0.group) + vector16($0.key) })))
            }
            extensions += extraExtensions.map { ($0.type, $0.data) }
            var body: [UInt8] = u16(version) + (0..<32).map { _ in UInt8.random(in: 0...255) }
            if let sessionID {
                body += [UInt8(sessionID.count)] + sessionID
            } else {
                body += legacySessionID ? [32] + (0..<32).map { _ in UInt8.random(in: 0...255) } : [0]
            }
            body += vector16(u16s: suites)
            body += [UInt8(compression.count)] + compression
            // An SSLv3 hello carries no extensions block when there is nothing in it.
            if !(extensions.isEmpty && version == 0x0300) {
                body += vector16(extensions.flatMap { type, data in u16(type) + vector16(data) })
            }
            let handshake = [0x01] + u24(body.count) + body
            return [0x16, 0x03, version == 0x0300 ? 0x00 : 0x01] + u16(UInt16(handshake.count)) + handshake
        }
    }

    /// A TLS 1.2 ClientHello (a server may answer with a lower version) offering `compression`
    /// methods (DEFLATE is 1, null 0) and `suites`; `heartbeat` adds the RFC 6520 extension.
    static func tls12(serverName: String?, compression: [UInt8] = [0], suites: [UInt16] = tls12Suites, heartbeat: Bool = false) -> [UInt8] {
        var offer = Offer(suites: suites, serverName: serverName)
        offer.compression = compression
        if heartbeat { offer.extraExtensions.append(Offer.Extension(type: 0x000F, data: [1])) }  // heartbeat: peer allowed to send
        return offer.bytes
    }

    /// A TLS 1.3 ClientHello whose supported_groups are `groups` and whose key_share is empty: a
    /// server that accepts one of them answers with a HelloRetryRequest naming its choice.
    static func tls13(serverName: String?, groups: [UInt16]) -> [UInt8] {
        var offer = Offer(suites: [0x1301, 0x1302, 0x1303], serverName: serverName)
        offer.groups = groups
        offer.pointFormats = false
        offer.supportedVersions = [0x0304]
        offer.keyShares = []
        return offer.bytes
    }

    static let signatureAlgorithms: [UInt16] = [0x0403, 0x0503, 0x0603, 0x0804, 0x0805, 0x0806, 0x0807, 0x0808,
                                                0x0401, 0x0501, 0x0601, 0x0201, 0x0203]

    static func serverNameExtension(_ name: String) -> [UInt8] {
        vector16([0] + vector16(Array(name.utf8)))
    }

    static func u16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
    static func u24(_ value: Int) -> [UInt8] { [UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    static func vector16(_ bytes: [UInt8]) -> [UInt8] { u16(UInt16(bytes.count)) + bytes }
    static func vector16(u16s: [UInt16]) -> [UInt8] { vector16(u16s.flatMap(u16)) }

    /// Connects (STARTTLS first when the target asks), sends `hello` and reads the first answer;
    /// a connection that cannot be made is `.other`, with why.
    static func exchange(_ hello: [UInt8], address: SocketAddress, target: ScanTarget, timeout: Double) -> Answer {
        do {
            let socket = try TCPSocket.open(to: address, target: target, deadline: Deadline(after: timeout), timeout: timeout)
            return exchange(hello, socket: socket, deadline: Deadline(after: timeout))
        } catch {
            return .other(error.description)
        }
    }

    /// Sends `hello` on a connected socket and reads up to the first handshake message or alert.
    static func exchange(_ hello: [UInt8], socket: TCPSocket, deadline: Deadline) -> Answer {
        guard socket.send(hello, until: deadline) else { return .closed("the server closed the connection on the ClientHello") }
        var records = RecordConversation(socket: socket, deadline: deadline)
        var handshake: [UInt8] = []
        while true {
            switch records.next() {
            case .record(RecordConversation.handshake, let fragment):
                handshake += fragment
                if let message = firstMessage(handshake) { return message }
                guard handshake.count <= 65_536 else { return .other("over 64 KiB without a ServerHello") }
            case .record(let type, _): return .other("a record of type \(type) before the ServerHello")
            case .alert(let description): return .alert(description)
            case .closed: return .closed("the server closed the connection without answering the ClientHello")
            case .failed(ECONNRESET): return .closed("the server reset the connection on the ClientHello")
            case .timedOut: return .other("no answer to the ClientHello in time")
            case .failed(let code): return .other("the connection failed: \(errnoText(code))")
            case .notTLS: return .other("the answer is not a TLS record")
            }
        }
    }

    /// The ServerHello at the start of `handshake`, once complete.
    private static func firstMessage(_ handshake: [UInt8]) -> Answer? {
        var buffer = handshake
        guard let message = RecordConversation.takeHandshakeMessage(&buffer) else { return nil }
        guard message.type == 2 else { return .other("the first handshake message is not a ServerHello (type \(message.type))") }
        return serverHello(message.body).map { .serverHello($0) } ?? .other("a truncated ServerHello")
    }

    /// A ServerHello's body (after the handshake header), or nil when truncated; the version is
    /// the supported_versions extension's when present.
    static func serverHello(_ body: [UInt8]) -> ServerHello? {
        guard body.count >= 38 else { return nil }
        var index = 2
        let random = Array(body[index..<(index + 32)])
        index += 32
        let sessionLength = Int(body[index])
        index += 1 + sessionLength
        guard body.count >= index + 3 else { return nil }
        let extensions = extensions(body, at: index + 3)
        var hello = ServerHello(version: UInt16(body[0]) << 8 | UInt16(body[1]), cipher: UInt16(body[index]) << 8 | UInt16(body[index + 1]),
                                compression: body[index + 2], isHelloRetryRequest: random == helloRetryRandom, selectedGroup: nil,
                                extensions: extensions.map(\.type), sessionID: Array(body[35..<min(body.count, 35 + sessionLength)]))
        for (type, data) in extensions where data.count >= 2 {
            if type == 0x002B { hello.version = UInt16(data[0]) << 8 | UInt16(data[1]) }
            if type == 0x0033 { hello.selectedGroup = UInt16(data[0]) << 8 | UInt16(data[1]) }
        }
        return hello
    }

    /// The extensions of a hello whose extensions block (its two-byte length, then the entries)
    /// starts at `index`; an entry running past the block ends the list.
    package static func extensions(_ hello: [UInt8], at index: Int) -> [(type: UInt16, data: [UInt8])] {
        guard hello.count >= index + 2 else { return [] }
        let end = min(hello.count, index + 2 + (Int(hello[index]) << 8 | Int(hello[index + 1])))
        var cursor = index + 2
        var found: [(type: UInt16, data: [UInt8])] = []
        while cursor + 4 <= end {
            let size = Int(hello[cursor + 2]) << 8 | Int(hello[cursor + 3])
            guard cursor + 4 + size <= end else { break }
            found.append((UInt16(hello[cursor]) << 8 | UInt16(hello[cursor + 1]), Array(hello[(cursor + 4)..<(cursor + 4 + size)])))
            cursor += 4 + size
        }
        return found
    }
}
