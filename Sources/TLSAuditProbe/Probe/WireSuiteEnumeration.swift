import COpenSSL
import TLSAuditModel
import TLSAuditSupport

/// SSLv3 to TLS 1.2 suites found on the wire: hand-built ClientHellos offering every suite of the
/// IANA registry a server can pick without a pre-shared key (RC4, 3DES, export, NULL, anonymous,
/// IDEA, SEED, ARIA, Camellia, GOST included), the server's choice read from its first flight and
/// removed from the next offer, until the server refuses. No handshake is completed; the key
/// exchange's group or prime is read from the ServerKeyExchange.
extension Enumerator {
    /// Suites offered per ClientHello when a server fails on the one that offers them all.
    static let fallbackChunk = 40

    /// Every suite `version` (SSLv3 to TLS 1.2) accepts, in the server's order: one connection per
    /// accepted suite, one for the refusal, and one more for the order when two or more are accepted.
    func wireSuites(for version: TLSVersion, address: SocketAddress, target: ScanTarget, probes: ProbeCounter) -> ProtocolSupport {
        let candidates = CipherSuiteRegistry.offerable(at: version.wireValue).map(\.code)
        var walk = walkSuites(candidates, version: version, address: address, target: target, probes: probes)
        var detail = ""
        // Some servers fail on a long ClientHello, or refuse it outright: when the walk found nothing,
        // a short hello of common suites tells; if that one is answered, the registry is offered in chunks.
        if walk.accepted.isEmpty, let why = intolerance(of: walk.end, version: version, address: address, target: target, probes: probes) {
            var chunked = SuiteWalk(accepted: [], end: .refused(""))
            for start in stride(from: 0, to: candidates.count, by: Self.fallbackChunk) {
                let chunk = Array(candidates[start..<min(candidates.count, start + Self.fallbackChunk)])
                let part = walkSuites(chunk, version: version, address: address, target: target, probes: probes)
                chunked.accepted += part.accepted
                if case .failed = part.end { chunked.end = part.end }
            }
            if !chunked.accepted.isEmpty {
                detail = "; the server failed on a ClientHello offering all \(candidates.count) suites (\(why)), so they were offered \(Self.fallbackChunk) at a time and the order holds within each group"
                walk = chunked
            }
        }
        guard !walk.accepted.isEmpty else {
            switch walk.end {
            case .refused(let why):
                return ProtocolSupport(version: version.rawValue, status: .rejected, detail: "refused: \(why)")
            case .failed(let why):
                return ProtocolSupport(version: version.rawValue, status: .notTested, detail: "the probe failed: \(why)")
            }
        }
        var preference: String?
        if walk.accepted.count >= 2 {
            // Offer the first two choices reversed: a server that keeps its first choice enforces its order.
            let first = walk.accepted[0].code, second = walk.accepted[1].code
            if case .chose(let code, _) = offer([second, first], version: version, address: address, target: target, probes: probes) {
                preference = code == first ? "server" : "client"
            }
        }
        return ProtocolSupport(version: version.rawValue, status: .accepted,
                               detail: "\(walk.accepted.count) suite(s) accepted of the \(candidates.count) offered by hand-built ClientHellos\(detail)",
                               suites: walk.accepted.map(\.suite), preference: preference)
    }

    /// Why the walk's end looks like intolerance of the long hello rather than the version's
    /// refusal: it failed without an alert, or it was refused while a short hello of common suites
    /// is answered at the same version. Nil when the refusal stands.
    private func intolerance(of end: SuiteWalk.End, version: TLSVersion, address: SocketAddress, target: ScanTarget,
                             probes: ProbeCounter) -> String? {
        switch end {
        case .failed(let why):
            return why
        case .refused(let why):
            let common = HandBuiltHello.tls12Suites.filter { code in
                code != CipherSuiteRegistry.renegotiationSCSV && (version.wireValue >= 0x0303 || CipherSuiteRegistry.suite(code)?.existsBeforeTLS12 == true)
            }
            guard case .chose = offer(common, version: version, address: address, target: target, probes: probes) else { return nil }
            return "refused with \(why), while a hello of \(common.count) common suites was answered"
        }
    }

    private struct SuiteWalk {
        var accepted: [(code: UInt16, suite: AcceptedSuite)]
        var end: End
        enum End { case refused(String), failed(String) }
    }

    /// Offer and remove until the server refuses.
    private func walkSuites(_ candidates: [UInt16], version: TLSVersion, address: SocketAddress, target: ScanTarget,
                            probes: ProbeCounter) -> SuiteWalk {
        var remaining = candidates
        var walk = SuiteWalk(accepted: [], end: .refused("no suite offered"))
        while !remaining.isEmpty {
            switch offer(remaining, version: version, address: address, target: target, probes: probes) {
            case .chose(let code, let keyExchange):
                guard remaining.contains(code) else {
                    walk.end = .failed("the server chose \(CipherSuiteRegistry.name(code)), which was not offered")
                    return walk
                }
                walk.accepted.append((code, AcceptedSuite(cipher: describeSuite(code), keyExchange: keyExchange)))
                remaining.removeAll { $0 == code }
            case .otherVersion(let answered):
                walk.end = .refused("the server answered a \(version.rawValue) ClientHello with \(answered)")
                return walk
            case .refused(let why):
                walk.end = .refused(why)
                return walk
            case .failed(let why):
                walk.end = walk.accepted.isEmpty ? .failed(why) : .refused(why)
                return walk
            }
        }
        return walk
    }

    enum WireChoice {
        case chose(UInt16, KeyExchangeDescription)
        case otherVersion(String)
        case refused(String)
        case failed(String)
    }

    /// One hand-built ClientHello at `version` offering `suites` (and the renegotiation SCSV), read up to ServerHelloDone.
    func offer(_ suites: [UInt16], version: TLSVersion, address: SocketAddress, target: ScanTarget, probes: ProbeCounter,
               groups: [UInt16]? = nil) -> WireChoice {
        probes.increment()
        var hello = HandBuiltHello.Offer(version: version.wireValue, suites: suites + [CipherSuiteRegistry.renegotiationSCSV], serverName: target.sni)
        hello.groups = groups ?? Self.wireGroupOffer
        hello.legacySessionID = false
        let timeout = target.timeout ?? scanner.options.timeout
        do {
            // The ServerKeyExchange is read when the suite has one; the rest of the flight is not needed.
            let (_, flight) = try RecordConversation.start(address, target: target, hello: hello.bytes, timeout: timeout, helloSuffices: true) { flight in
                flight.version != version.wireValue || flight.serverKeyExchange != nil
                    || !(CipherSuiteRegistry.suite(flight.cipher).map { $0.isFiniteFieldDH || $0.isEllipticCurveDH || $0.isExport } ?? false)
            }
            guard flight.version == version.wireValue else {
                return .otherVersion(TLSVersion.name(wireValue: flight.version))
            }
            return .chose(flight.cipher, Self.keyExchange(of: flight))
        } catch {
            switch error {
            case .refused(let alert): return .refused("alert \(OpenSSLErrors.alertName(Int32(alert)))")
            // A silent close is how some servers refuse a version: a refusal, as a completed handshake's probe counts it.
            case .closed(let why): return .refused(why)
            case .other(let why): return .failed(why)
            }
        }
    }

    /// The groups a wire ClientHello lists: every elliptic curve and RFC 7919 group of the registry.
    static let wireGroupOffer: [UInt16] = {
        let preferred: [UInt16] = [0x001D, 0x0017, 0x0018, 0x0019, 0x001E]
        return preferred + NamedGroupRegistry.all.filter { [.ellipticCurve, .finiteField].contains($0.kind) && !preferred.contains($0.code) }.map(\.code)
    }()

    /// The key exchange as the ServerKeyExchange shows it: the curve, the RFC 7919 group or the
    /// prime's size, an export RSA key; nothing for static RSA.
    static func keyExchange(of flight: RecordConversation.FirstFlight) -> KeyExchangeDescription {
        let parameters = flight.keyExchange(for: CipherSuiteRegistry.suite(flight.cipher))
        let bits = parameters?.bits ?? 0
        switch parameters {
        case .namedCurve(let code):
            return KeyExchangeDescription(group: NamedGroupRegistry.name(code),
                                          ephemeralKey: ephemeralKey(curve: code, name: NamedGroupRegistry.group(code)?.name), forwardSecrecy: true)
        case .finiteField(let prime, _):
            return KeyExchangeDescription(group: DHPrimes.rfc7919Group(prime), ephemeralKey: PublicKeyDescription(type: "DH", bits: bits),
                                          forwardSecrecy: true)
        case .temporaryRSA:
            return KeyExchangeDescription(group: nil, ephemeralKey: PublicKeyDescription(type: "RSA", bits: bits), forwardSecrecy: false)
        case nil:
            return KeyExchangeDescription(group: nil, ephemeralKey: nil, forwardSecrecy: false)
        }
    }

    /// An ECDHE key as OpenSSL describes a peer's temporary key (`PublicKeyInfo.describe`).
    private static func ephemeralKey(curve code: UInt16, name: String?) -> PublicKeyDescription {
        switch code {
        case 0x001D: return PublicKeyDescription(type: "X25519", bits: 253)
        case 0x001E: return PublicKeyDescription(type: "X448", bits: 448)
        case 0x0017: return PublicKeyDescription(type: "EC", bits: 256, curve: "prime256v1")
        default:
            let bits = name.flatMap { Int($0.filter(\.isNumber).prefix(3)) } ?? 0
            return PublicKeyDescription(type: "EC", bits: bits, curve: name)
        }
    }

    /// The suite as OpenSSL describes it when this libssl knows it (the same words as a completed
    /// handshake's), else from the registry.
    func describeSuite(_ code: UInt16) -> CipherSuiteDescription {
        if let context = try? scanner.sharedContext(.permissive), let ssl = SSL_new(context.pointer) {
            defer { SSL_free(ssl) }
            let bytes = [UInt8(code >> 8), UInt8(code & 0xFF)]
            if let cipher = SSL_CIPHER_find(ssl, bytes) { return HandshakeProbe.cipherDescription(of: cipher) }
        }
        if let suite = CipherSuiteRegistry.suite(code) { return suite.description }
        let text = "0x" + code.hex(width: 4, uppercase: true)
        return CipherSuiteDescription(iana: text, openssl: text, code: text, keyExchange: "unknown", authentication: "unknown",
                                      isAEAD: false, strengthBits: 0)
    }
}
