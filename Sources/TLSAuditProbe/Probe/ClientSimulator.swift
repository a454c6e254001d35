import Foundation
public import TLSAuditModel
import TLSAuditSupport

extension Enumerator {
    /// Client simulation (`checks: [clients]`): each client's recorded ClientHello is sent as that
    /// client sends it, its server_name rewritten to the target's, and the server's answer (the
    /// ServerHello, and up to ServerHelloDone its Certificate and ServerKeyExchange, or a TLS 1.3
    /// ServerHello or HelloRetryRequest) is judged with the client's limits, as testssl.sh's
    /// client simulation does. No handshake is completed: one connection per client, at most
    /// `perHostConcurrency` at a time. `leaf` is the scan's leaf, the one TLS 1.3 answers are judged
    /// on (their Certificate is encrypted).
    public func clientSimulation(_ address: SocketAddress, target: ScanTarget, leaf: CertificateSummary?,
                                 clients: [SimulatedClient] = SimulatedClientRegistry.all) -> ClientSimulationReport {
        let started = ContinuousClock.now
        let timeout = target.timeout ?? scanner.options.timeout
        let results = WorkerPool.map(clients, concurrency: perHostConcurrency) { client in
            ClientSimulation.simulate(client, address: address, target: target, leaf: leaf, timeout: timeout)
        }
        return ClientSimulationReport(clients: results, connections: clients.count, durationMs: milliseconds(since: started))
    }
}

/// One simulated client: its hello replayed, the server's answer read and judged.
enum ClientSimulation {
    /// What a client's ClientHello offers, read from its bytes.
    struct Offer {
        var suites: Set<UInt16> = []
        /// supported_groups; nil when the client sent none (it then accepts any curve).
        var groups: [UInt16]?
        /// TLS 1.3 key_share groups.
        var keyShares: [UInt16] = []
    }

    /// The server's answer, read up to ServerHelloDone (TLS 1.2 and lower) or the ServerHello (TLS 1.3).
    struct Answer {
        var hello: HandBuiltHello.ServerHello
        var certificates: [[UInt8]] = []
        var serverKeyExchange: [UInt8]?
    }

    static func simulate(_ client: SimulatedClient, address: SocketAddress, target: ScanTarget, leaf: CertificateSummary?,
                         timeout: Double) -> ClientSimulationResult {
        let hello = withServerName(client.hello, target.sni)
        let answer: Answer
        do {
            answer = try exchange(hello, address: address, target: target, timeout: timeout)
        } catch {
            return ClientSimulationResult(client: client, connects: false, failure: error.sentence)
        }
        return judge(answer, client: client, offer: offer(of: hello), scanLeaf: leaf)
    }

    // MARK: - Judging the answer

    /// Whether `client` goes on with the server's `answer`, as testssl.sh's client simulation decides.
    static func judge(_ answer: Answer, client: SimulatedClient, offer: Offer, scanLeaf: CertificateSummary?) -> ClientSimulationResult {
        let hello = answer.hello
        let suite = CipherSuiteRegistry.suite(hello.cipher)
        let suiteName = CipherSuiteRegistry.name(hello.cipher)
        let version = TLSVersion.name(wireValue: hello.version)
        func fails(_ why: String) -> ClientSimulationResult {
            ClientSimulationResult(client: client, connects: false, protocolVersion: version, suite: suite, failure: why)
        }
        guard client.versions.contains(hello.version) else {
            return fails("the server chose \(version), which the client does not accept (it speaks \(range(client.versions))).")
        }
        guard offer.suites.contains(hello.cipher) else { return fails("the server chose \(suiteName), which the client does not offer.") }
        var group: String?
        if hello.version >= 0x0304 {
            guard let selected = hello.selectedGroup else { return fails("the server's TLS 1.3 answer names no key share group.") }
            let name = NamedGroupRegistry.name(selected)
            if hello.isHelloRetryRequest {
                // The client sends a second hello with a share of the group asked for, if it supports that group.
                guard offer.groups?.contains(selected) ?? false, !offer.keyShares.contains(selected) else {
                    return fails("the server asked (HelloRetryRequest) for a \(name) key share, which the client does not offer.")
                }
            } else if !offer.keyShares.contains(selected) {
                return fails("the server answered with a \(name) key share the client did not send.")
            }
            group = name
        } else if let suite, let body = answer.serverKeyExchange, let parameters = ServerKeyExchangeParameters(body, suite: suite) {
            switch parameters {
            case .namedCurve(let curve):
                group = NamedGroupRegistry.name(curve)
                if let groups = offer.groups, !groups.contains(curve) {
                    return fails("the server chose the curve \(NamedGroupRegistry.name(curve)), which the client does not offer.")
                }
            case .finiteField(let prime, _):
                let bits = parameters.bits ?? 0
                group = DHPrimes.rfc7919Group(prime) ?? "DH \(bits) bits"
                if let minimum = client.minDHBits, bits < minimum {
                    return fails("the server's DH group has \(bits) bits, below the client's minimum of \(minimum).")
                }
                if let maximum = client.maxDHBits, bits > maximum {
                    return fails("the server's DH group has \(bits) bits, above the client's maximum of \(maximum).")
                }
            case .temporaryRSA:
                group = "RSA \(parameters.bits ?? 0) bits (export)"
            }
        } else if suite?.keyExchangeField == "RSA" {
            group = "RSA key exchange"
        }
        // TLS 1.3 encrypts the Certificate: the scan's leaf stands for it.
        let leaf = hello.version >= 0x0304 ? scanLeaf : answer.certificates.first.flatMap { try? X509Certificate.summary(der: $0) }
        if let leaf, let why = leafRefusal(leaf, client: client) { return fails(why) }
        return ClientSimulationResult(client: client, connects: true, protocolVersion: version, suite: suite, group: group,
                                      serverKey: leaf?.publicKey.summary)
    }

    /// Why `client` refuses the leaf's key or signature, or nil.
    static func leafRefusal(_ leaf: CertificateSummary, client: SimulatedClient) -> String? {
        // The modelled current Apple client refuses what ATS refuses (one rule for scan, verify and this table).
        if client.isModelledAppleATS, let problem = CertificateRules.keyProblem(leaf) {
            return "the server's certificate has \(problem)."
        }
        let key = leaf.publicKey
        if key.isRSA, let minimum = client.minRSABits, key.bits < minimum {
            return "the server's RSA key has \(key.bits) bits, below the client's minimum of \(minimum)."
        }
        if key.isRSA, let maximum = client.maxRSABits, key.bits > maximum {
            return "the server's RSA key has \(key.bits) bits, above the client's maximum of \(maximum)."
        }
        if key.isEC, let minimum = client.minECDSABits, key.bits < minimum {
            return "the server's ECDSA key has \(key.bits) bits, below the client's minimum of \(minimum)."
        }
        if client.requiresSHA2, let hash = leaf.signatureHash?.uppercased(), hash == "SHA1" || hash == "MD5" {
            return "the server's certificate is signed with \(hash), and the client requires SHA-2."
        }
        return nil
    }

    static func range(_ versions: ClosedRange<UInt16>) -> String {
        func name(_ value: UInt16) -> String { TLSVersion(wireValue: Int(value))?.displayName ?? "0x" + value.hex(width: 4, uppercase: true) }
        return versions.lowerBound == versions.upperBound ? name(versions.lowerBound) : "\(name(versions.lowerBound)) to \(name(versions.upperBound))"
    }

    // MARK: - The ClientHello

    /// The positions of a TLS-record ClientHello's parts, or nil for an SSLv2-compatible or truncated one.
    private static func extensionsStart(_ hello: [UInt8]) -> (suites: Int, extensions: Int)? {
        guard hello.count > 9 + 38, hello[0] == 0x16, hello[5] == 0x01 else { return nil }
        var index = 9 + 2 + 32
        index += 1 + Int(hello[index])
        let suites = index
        guard hello.count >= index + 2 else { return nil }
        index += 2 + (Int(hello[index]) << 8 | Int(hello[index + 1]))
        guard hello.count > index else { return nil }
        index += 1 + Int(hello[index])
        return (suites, index)
    }

    /// What `hello` offers: its suites, supported_groups and key shares.
    static func offer(of hello: [UInt8]) -> Offer {
        var offer = Offer()
        if hello.count > 11, hello[0] & 0x80 != 0 {
            // SSLv2-compatible CLIENT-HELLO: 3-byte cipher specs, the TLS suites among them start with 0.
            let specsLength = Int(hello[5]) << 8 | Int(hello[6])
            var index = 11
            while index + 3 <= min(hello.count, 11 + specsLength) {
                if hello[index] == 0 { offer.suites.insert(UInt16(hello[index + 1]) << 8 | UInt16(hello[index + 2])) }
                index += 3
            }
            return offer
        }
        guard let start = extensionsStart(hello) else { return offer }
        let suitesLength = Int(hello[start.suites]) << 8 | Int(hello[start.suites + 1])
        for index in stride(from: start.suites + 2, to: min(hello.count - 1, start.suites + 2 + suitesLength), by: 2) {
            offer.suites.insert(UInt16(hello[index]) << 8 | UInt16(hello[index + 1]))
        }
        func u16s(_ data: ArraySlice<UInt8>) -> [UInt16] {
            stride(from: data.startIndex, to: data.endIndex - 1, by: 2).map { UInt16(data[$0]) << 8 | UInt16(data[$0 + 1]) }
        }
        for (type, data) in HandBuiltHello.extensions(hello, at: start.extensions) where data.count >= 2 {
            if type == 0x000A { offer.groups = u16s(data[2...]) }
            if type == 0x0033 {
                var cursor = 2
                while cursor + 4 <= data.count {
                    offer.keyShares.append(UInt16(data[cursor]) << 8 | UInt16(data[cursor + 1]))
                    cursor += 4 + (Int(data[cursor + 2]) << 8 | Int(data[cursor + 3]))
                }
            }
        }
        return offer
    }

    /// `hello` with its server_name extension naming `serverName` (left out when nil, as for an IP
    /// address), and the extensions', handshake's and record's lengths rewritten to match. A hello
    /// without a server_name, or an SSLv2-compatible one, is sent as recorded.
    static func withServerName(_ hello: [UInt8], _ serverName: String?) -> [UInt8] {
        guard let start = extensionsStart(hello) else { return hello }
        let extensions = HandBuiltHello.extensions(hello, at: start.extensions)
        guard extensions.contains(where: { $0.type == 0x0000 }) else { return hello }
        var block: [UInt8] = []
        for (type, data) in extensions {
            if type == 0x0000 {
                guard let serverName else { continue }
                block += HandBuiltHello.u16(type) + HandBuiltHello.vector16(HandBuiltHello.serverNameExtension(serverName))
            } else {
                block += HandBuiltHello.u16(type) + HandBuiltHello.vector16(data)
            }
        }
        let body = Array(hello[9..<start.extensions]) + HandBuiltHello.vector16(block)
        let handshake = [0x01] + HandBuiltHello.u24(body.count) + body
        return Array(hello[0..<3]) + HandBuiltHello.u16(UInt16(handshake.count)) + handshake
    }

    // MARK: - The server's answer

    struct Refusal: Error {
        var sentence: String
        init(_ sentence: String) { self.sentence = sentence }
    }

    /// Connects (STARTTLS first when the target asks), sends `hello` and reads the answer up to
    /// ServerHelloDone, or only the ServerHello when it is TLS 1.3 or a HelloRetryRequest (what
    /// follows is encrypted, or a new round), every read bounded (`RecordConversation.start`).
    static func exchange(_ hello: [UInt8], address: SocketAddress, target: ScanTarget, timeout: Double) throws(Refusal) -> Answer {
        let flight: RecordConversation.FirstFlight
        do {
            flight = try RecordConversation.start(address, target: target, hello: hello, timeout: timeout) { flight in
                flight.version >= 0x0304 || flight.serverHello?.isHelloRetryRequest == true
            }.1
        } catch {
            switch error {
            case .refused(let alert): throw Refusal("the server refused the ClientHello with alert \(OpenSSLErrors.alertName(Int32(alert))).")
            case .other(let why), .closed(let why): throw Refusal(why + ".")
            }
        }
        guard let serverHello = flight.serverHello else { throw Refusal("the server sent no ServerHello.") }
        return Answer(hello: serverHello, certificates: flight.certificates, serverKeyExchange: flight.serverKeyExchange)
    }
}
