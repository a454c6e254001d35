#if canImport(Glibc)
import Glibc
#endif
import TLSAuditModel

/// A TLS 1.2-or-lower conversation at the record layer, for the probes libssl refuses to make
/// (a heartbeat that lies about its length, a ChangeCipherSpec too early, a forged key exchange):
/// a hand-built ClientHello, the server's first flight read up to ServerHelloDone, then records
/// sent raw and the server's reaction read. Every read is bounded in bytes and time.
package struct RecordConversation {
    static let changeCipherSpec: UInt8 = 20, alert: UInt8 = 21, handshake: UInt8 = 22, applicationData: UInt8 = 23, heartbeat: UInt8 = 24

    /// What the server sent in answer to the ClientHello, through ServerHelloDone.
    struct FirstFlight {
        var version: UInt16
        var cipher: UInt16
        /// The server's hello extensions, by type.
        var extensions: [UInt16]
        /// The Certificate message's certificates, DER, leaf first.
        var certificates: [[UInt8]]
        /// The ServerKeyExchange's body, when one was sent (ephemeral or export key exchange).
        var serverKeyExchange: [UInt8]? = nil
        /// The server sent a CertificateRequest.
        var certificateRequested = false
        /// The server's session id from the ServerHello.
        var sessionID: [UInt8] = []
        /// The ServerHello as parsed (a TLS 1.3 one, or a HelloRetryRequest, only when `enough` took it).
        var serverHello: HandBuiltHello.ServerHello? = nil

        /// The key-exchange parameters of `serverKeyExchange` read as `suite` defines them.
        func keyExchange(for suite: CipherSuiteInfo?) -> ServerKeyExchangeParameters? {
            guard let body = serverKeyExchange, let suite else { return nil }
            return ServerKeyExchangeParameters(body, suite: suite)
        }
    }

    /// The server's reaction to what was sent.
    enum Reaction: Equatable {
        case record(type: UInt8, fragment: [UInt8])
        case alert(UInt8)
        case closed
        /// The connection failed with this errno (ECONNRESET: reset by the peer).
        case failed(Int32)
        case timedOut
        case notTLS

        /// As sslyze's ROBOT test words it, for comparing reactions.
        var summary: String {
            switch self {
            case .record(let type, _): "record of type \(type)"
            case .alert(let description): "alert \(OpenSSLErrors.alertName(Int32(description)))"
            case .closed: "connection closed"
            // A failure other than a reset counts as a close (as the comparison of reactions always did).
            case .failed(let code): code == ECONNRESET ? "connection reset" : "connection closed"
            case .timedOut: "no answer in time"
            case .notTLS: "bytes that are not TLS"
            }
        }
    }

    enum Failure: Error {
        /// The server refused the ClientHello with this alert.
        case refused(UInt8)
        /// The server closed or reset the connection on the ClientHello without a word (how some
        /// servers refuse a version or a list of suites), in a sentence.
        case closed(String)
        /// Anything else, in a sentence.
        case other(String)
    }

    let socket: TCPSocket
    let deadline: Deadline
    private var pending: [UInt8] = []
    private(set) var version: UInt16 = 0x0303

    /// Records read from `socket` (which has sent its hello) until `deadline`.
    init(socket: TCPSocket, deadline: Deadline) {
        self.socket = socket
        self.deadline = deadline
    }

    /// Connects (STARTTLS first when the target asks), sends `hello`, and reads the first flight.
    /// `enough`, given the flight read so far (the ServerHello, then each further message), says
    /// when nothing more is needed. With `helloSuffices`, a ServerHello followed by silence or a
    /// close still counts (the version and suite are known; what follows it is missing).
    static func start(_ address: SocketAddress, target: ScanTarget, hello: [UInt8], timeout: Double,
                      helloSuffices: Bool = false, enough: (FirstFlight) -> Bool = { _ in false }) throws(Failure) -> (RecordConversation, FirstFlight) {
        let deadline = Deadline(after: timeout)
        let socket: TCPSocket
        do {
            socket = try TCPSocket.open(to: address, target: target, deadline: deadline, timeout: timeout)
        } catch {
            throw .other(error.description)
        }
        var conversation = RecordConversation(socket: socket, deadline: deadline)
        guard socket.send(hello, until: deadline) else { throw .closed("the server closed the connection on the ClientHello") }
        var partial: FirstFlight?
        do {
            let flight = try conversation.readFirstFlight(into: &partial, enough: enough)
            return (conversation, flight)
        } catch {
            guard helloSuffices, let partial else { throw error }
            if case .refused = error { throw error }
            return (conversation, partial)
        }
    }

    /// Handshake messages up to ServerHelloDone (or until `enough`): the ServerHello, the
    /// Certificate and the ServerKeyExchange kept; `flight` holds what was read when it throws.
    private mutating func readFirstFlight(into flight: inout FirstFlight?, enough: (FirstFlight) -> Bool) throws(Failure) -> FirstFlight {
        var handshake: [UInt8] = []
        while true {
            switch next() {
            case .record(RecordConversation.handshake, let fragment):
                handshake += fragment
                guard handshake.count <= 262_144 else { throw .other("a first flight over 256 KiB") }
                while let message = Self.takeHandshakeMessage(&handshake) {
                    switch message.type {
                    case 2:
                        guard let hello = HandBuiltHello.serverHello(message.body) else { throw .other("a truncated ServerHello") }
                        flight = FirstFlight(version: hello.version, cipher: hello.cipher, extensions: hello.extensions, certificates: [],
                                             sessionID: hello.sessionID, serverHello: hello)
                        version = hello.version
                        if enough(flight!) { return flight! }
                        guard hello.version <= 0x0303, !hello.isHelloRetryRequest else {
                            throw .other("the server answered a TLS 1.2 ClientHello with version \(hello.version)")
                        }
                    case 11:
                        guard flight != nil else { throw .other("a Certificate before the ServerHello") }
                        flight!.certificates = Self.certificates(message.body)
                    case 12:
                        guard flight != nil else { throw .other("a ServerKeyExchange before the ServerHello") }
                        flight!.serverKeyExchange = message.body
                        if enough(flight!) { return flight! }
                    case 13:
                        guard flight != nil else { throw .other("a CertificateRequest before the ServerHello") }
                        flight!.certificateRequested = true
                    case 14:
                        guard let flight else { throw .other("a ServerHelloDone before the ServerHello") }
                        return flight
                    default:
                        break
                    }
                }
            case .record(let type, _): throw .other("a record of type \(type) in the server's first flight")
            case .alert(let description): throw .refused(description)
            case .failed(ECONNRESET): throw .closed("the server reset the connection on the ClientHello")
            case .closed, .failed: throw .closed("the server closed the connection without answering the ClientHello")
            case .timedOut: throw .other("no complete answer to the ClientHello in time")
            case .notTLS: throw .other("the answer is not TLS")
            }
        }
    }

    /// The first whole handshake message of `buffer` (type and body after the 4-byte header),
    /// removed from it; nil until one is complete.
    package static func takeHandshakeMessage(_ buffer: inout [UInt8]) -> (type: UInt8, body: [UInt8])? {
        guard buffer.count >= 4 else { return nil }
        let length = Int(buffer[1]) << 16 | Int(buffer[2]) << 8 | Int(buffer[3])
        guard buffer.count >= 4 + length else { return nil }
        defer { buffer.removeFirst(4 + length) }
        return (buffer[0], Array(buffer[4..<(4 + length)]))
    }

    /// A plaintext record of `type` in the negotiated version.
    package static func record(_ type: UInt8, version: UInt16, _ fragment: [UInt8]) -> [UInt8] {
        [type, UInt8(version >> 8), UInt8(version & 0xFF), UInt8(fragment.count >> 8), UInt8(fragment.count & 0xFF)] + fragment
    }

    /// Sends `bytes` as they are; false when the server has gone.
    func send(_ bytes: [UInt8]) -> Bool { socket.send(bytes, until: deadline) }

    /// The next record (alerts decoded), or how the connection ended.
    mutating func next() -> Reaction {
        while true {
            if pending.count >= 5 {
                let length = Int(pending[3]) << 8 | Int(pending[4])
                guard (20...24).contains(pending[0]), pending[1] == 3, length <= 18_432 else { return .notTLS }
                if pending.count >= 5 + length {
                    let type = pending[0]
                    let fragment = Array(pending[5..<(5 + length)])
                    pending.removeFirst(5 + length)
                    if type == Self.alert, fragment.count >= 2 { return .alert(fragment[1]) }
                    return .record(type: type, fragment: fragment)
                }
            }
            switch socket.receiveSome(until: deadline, maximum: 16_384) {
            case .data(let data): pending += data
            case .closed: return .closed
            case .timedOut: return .timedOut
            case .failed(let code): return .failed(code)
            }
        }
    }

    /// The certificate_list of a TLS 1.2 Certificate message.
    private static func certificates(_ body: [UInt8]) -> [[UInt8]] {
        guard body.count >= 3 else { return [] }
        let end = min(body.count, 3 + (Int(body[0]) << 16 | Int(body[1]) << 8 | Int(body[2])))
        var cursor = 3
        var found: [[UInt8]] = []
        while cursor + 3 <= end {
            let size = Int(body[cursor]) << 16 | Int(body[cursor + 1]) << 8 | Int(body[cursor + 2])
            guard cursor + 3 + size <= end else { break }
            found.append(Array(body[(cursor + 3)..<(cursor + 3 + size)]))
            cursor += 3 + size
        }
        return found
    }
}

/// What a TLS 1.2-or-lower ServerKeyExchange carries, read by the suite's key exchange.
enum ServerKeyExchangeParameters: Equatable {
    /// ECDHE: the named curve (IANA code point).
    case namedCurve(UInt16)
    /// Finite-field DHE: the prime and generator, big-endian.
    case finiteField(prime: [UInt8], generator: [UInt8])
    /// Export RSA: a temporary RSA key's modulus (FREAK).
    case temporaryRSA(modulus: [UInt8])

    init?(_ body: [UInt8], suite: CipherSuiteInfo) {
        func vector16(at index: Int) -> [UInt8]? {
            guard body.count >= index + 2 else { return nil }
            let length = Int(body[index]) << 8 | Int(body[index + 1])
            guard body.count >= index + 2 + length else { return nil }
            return Array(body[(index + 2)..<(index + 2 + length)])
        }
        if suite.isEllipticCurveDH {
            guard body.count >= 3, body[0] == 3 else { return nil }  // named_curve
            self = .namedCurve(UInt16(body[1]) << 8 | UInt16(body[2]))
        } else if suite.isFiniteFieldDH {
            guard let prime = vector16(at: 0), let generator = vector16(at: 2 + prime.count) else { return nil }
            self = .finiteField(prime: prime, generator: generator)
        } else if suite.keyExchangeField.hasPrefix("RSA") {
            guard let modulus = vector16(at: 0) else { return nil }
            self = .temporaryRSA(modulus: modulus)
        } else {
            return nil
        }
    }

    /// Bits of a finite-field prime or RSA modulus (leading zero bytes dropped).
    var bits: Int? {
        let bytes: [UInt8]
        switch self {
        case .namedCurve: return nil
        case .finiteField(let prime, _): bytes = prime
        case .temporaryRSA(let modulus): bytes = modulus
        }
        let significant = bytes.drop { $0 == 0 }
        guard let first = significant.first else { return 0 }
        return (significant.count - 1) * 8 + (8 - first.leadingZeroBitCount)
    }
}
