import COpenSSL
import Foundation
public import TLSAuditModel
import TLSAuditSupport

/// The named verdicts of `checks: [vulnerabilities]` (DROWN, POODLE, SWEET32, FREAK, LOGJAM, RC4,
/// BEAST, LUCKY13, BREACH, Ticketbleed, client-initiated renegotiation, ClientHello tolerance):
/// each a targeted hand-built ClientHello read up to the server's first answer (or first flight),
/// never a handshake this libssl cannot finish. A ClientHello offering only the weak suites that
/// the server picks from is the evidence; one it refuses is the absence.
extension Enumerator {
    /// Every named verdict of `address` (`leafSPKI`: the scan's leaf's key, base64 SHA-256, for
    /// DROWN), one job each, `perHostConcurrency` at a time, then client renegotiation: 14
    /// connections (one fewer when `inventory` already tried a client renegotiation, one fewer
    /// without TLS 1.2 for Ticketbleed's ticket, three more when the large GREASE hello fails).
    func namedVerdicts(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, timeout: Double,
                       inventory: ServerInventory?, leafSPKI: String?) -> (answers: [Vulnerability: VulnerabilityAnswer], sslv2Key: String?) {
        let verdicts: [Vulnerability] = [.helloTolerance, .drown, .poodle, .sweet32, .freak, .logjam, .rc4, .beast, .lucky13, .breach,
                                         .ticketbleed]
        let sslv2Key = SleepingLock<String?>(nil)
        let answers = WorkerPool.map(verdicts, concurrency: perHostConcurrency) { verdict -> VulnerabilityAnswer in
            let offers = SuiteOffers(address: address, target: target, probes: probes, timeout: timeout)
            switch verdict {
            case .drown:
                let (answer, key) = self.drown(address, target: target, probes: probes, timeout: timeout, leafSPKI: leafSPKI)
                sslv2Key.withLock { $0 = key }
                return answer
            case .poodle: return offers.poodle()
            case .sweet32: return offers.judge("64-bit block cipher (3DES, DES, IDEA, RC2)", version: 0x0303) { $0.has64BitBlocks }
            case .freak: return offers.freak()
            case .logjam: return offers.logjam()
            case .rc4: return offers.judge("RC4", version: 0x0303) { $0.isRC4 }
            case .beast: return offers.beast()
            case .lucky13:
                return offers.judge("CBC with HMAC", version: 0x0303, consequence: "a timing side channel, closed by constant-time MAC checks in current libraries (informational)") { $0.isCBC }
            case .breach: return self.breach(address, target: target, probes: probes, timeout: timeout)
            case .ticketbleed: return self.ticketbleed(address, target: target, probes: probes, timeout: timeout)
            case .helloTolerance: return offers.helloTolerance()
            default: return .notTested("not a named verdict")
            }
        }
        var found = Dictionary(uniqueKeysWithValues: zip(verdicts, answers))
        // Last and alone: `openssl s_server`, one connection at a time, takes a second to come back
        // from a refused renegotiation, which probes queued behind it would wait for (measured:
        // 1 s in the pool, 25 ms after it).
        found[.clientRenegotiation] = clientRenegotiation(address, target: target, probes: probes, timeout: timeout, inventory: inventory)
        return (found, sslv2Key.withLock { $0 })
    }

    // MARK: - DROWN

    /// An SSLv2 CLIENT-HELLO (as the enumeration sends it): a SERVER-HELLO is DROWN, with the key
    /// of the certificate it carries (returned, SPKI SHA-256 base64) compared with the TLS leaf's.
    private func drown(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, timeout: Double,
                       leafSPKI: String?) -> (VulnerabilityAnswer, String?) {
        probes.increment()
        let answer: [UInt8]
        do {
            answer = try LegacyHello.exchange(address, target: target, timeout: timeout)
        } catch {
            return (.notTested(error.description), nil)
        }
        let protocolSupport = LegacyHello.interpret(answer, version: "SSLv2")
        guard protocolSupport.status == .accepted else {
            return (.notVulnerable("the server speaks no SSLv2: \(protocolSupport.detail)"), nil)
        }
        // SERVER-HELLO: length (2), type 4, session-id-hit, certificate type, version (2), certificate length (2) ...
        var key = "", spki: String?
        if answer.count >= 13 {
            let certificateLength = Int(answer[7]) << 8 | Int(answer[8])
            if answer.count >= 13 + certificateLength, certificateLength > 0,
               let certificate = try? X509Certificate(der: Array(answer[13..<(13 + certificateLength)])).summary() {
                let same = leafSPKI.map { $0 == certificate.spkiSHA256 ? ": the same key as the TLS certificate's" : ": not the TLS certificate's key (its TLS sessions fall only if that key is on an SSLv2 server too)" } ?? ""
                spki = certificate.spkiSHA256
                key = ", with a certificate for \(certificate.subject) (SPKI sha256 \(certificate.spkiSHA256)\(same))"
            }
        }
        return (.vulnerable("the server answered an SSLv2 CLIENT-HELLO with SERVER-HELLO\(key); SSLv2 on any server with a TLS server's RSA key lets an attacker decrypt that server's recorded TLS sessions"), spki)
    }

    // MARK: - BREACH

    /// The headers check's GET (`Accept-Encoding: gzip,deflate`) over HTTPS: a Content-Encoding on
    /// the answer is compression of the page, which BREACH reads secrets through.
    private func breach(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, timeout: Double) -> VulnerabilityAnswer {
        guard target.starttls == nil else { return .notTested("not HTTPS (STARTTLS)") }
        let path = target.headersPath ?? "/"
        let (received, failure) = httpsGET(address, target: target, probes: probes, path: path, timeout: timeout)
        guard let head = received else { return .notTested("no HTTP answer over HTTPS: \(failure)") }
        if let encoding = head.first("content-encoding"), encoding.lowercased() != "identity" {
            return .vulnerable("the \(head.status) answer to GET \(path) with Accept-Encoding: gzip,deflate came with Content-Encoding: \(encoding.prefix(40)): a page that reflects input next to a secret (a CSRF token) lets an attacker who sees the traffic recover the secret")
        }
        return .notVulnerable("the \(head.status) answer to GET \(path) with Accept-Encoding: gzip,deflate is not compressed (no Content-Encoding)")
    }

    // MARK: - Ticketbleed

    /// testssl.sh's session ID, six arbitrary bytes.
    static let ticketbleedSessionID: [UInt8] = [0x00, 0x0B, 0xAD, 0xC0, 0xDE, 0x00]

    /// A TLS 1.2 handshake for a session ticket, then a ClientHello offering it with a 6-byte
    /// session ID: a server that resumes must echo those 6 bytes; F5's BIG-IP echoed 32, the other 26
    /// from its memory (CVE-2016-9244). The extra bytes are not kept.
    private func ticketbleed(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, timeout: Double) -> VulnerabilityAnswer {
        var ticket: [UInt8] = []
        var cipher: UInt16 = 0
        let first = handshake(address, target: target, probes: probes,
                              override: ClientHelloOverride(minVersion: .tls1_0, maxVersion: .tls1_2)) { ssl in
            guard let session = SSL_get_session(ssl) else { return }
            var bytes: UnsafePointer<UInt8>?
            var length = 0
            SSL_SESSION_get0_ticket(session, &bytes, &length)
            if let bytes, length > 0 { ticket = Array(UnsafeBufferPointer(start: bytes, count: length)) }
            if let current = SSL_SESSION_get0_cipher(session) { cipher = UInt16(truncatingIfNeeded: SSL_CIPHER_get_protocol_id(current)) }
        }
        guard let observation = first.observation else {
            return .notVulnerable("no TLS 1.2-or-lower handshake (\(first.failure?.description ?? "failed")); session tickets with a session ID echo are TLS 1.0-1.2's")
        }
        guard !ticket.isEmpty else { return .notVulnerable("the server issued no session ticket (\(observation.protocolVersion.rawValue))") }
        var offer = HandBuiltHello.Offer(version: observation.protocolVersion.wireValue,
                                         suites: [cipher] + HandBuiltHello.tls12Suites.filter { $0 != cipher }, serverName: target.sni)
        offer.sessionID = Self.ticketbleedSessionID
        // extended_master_secret: a session made with it is resumed only by a hello that offers it (RFC 7627).
        offer.extraExtensions = [.init(type: 0x0017, data: []), .init(type: 0x0023, data: ticket)]
        let sent = Self.ticketbleedSessionID
        switch SuiteOffers(address: address, target: target, probes: probes, timeout: timeout).answer(offer.bytes) {
        case .serverHello(let hello):
            let echoed = hello.sessionID
            if echoed.count > sent.count, Array(echoed.prefix(sent.count)) == sent {
                return .vulnerable("offered its own session ticket with a \(sent.count)-byte session ID, the server echoed \(echoed.count) bytes: \(echoed.count - sent.count) of them from its memory (not kept)")
            }
            if echoed == sent {
                return .notVulnerable("the server resumed its session ticket and echoed the \(sent.count)-byte session ID as sent")
            }
            return .notVulnerable("the server did not resume its session ticket (a new \(echoed.count)-byte session ID), so nothing to echo")
        case .alert(let alert):
            return .notVulnerable("the server refused a ClientHello with its own session ticket: alert \(OpenSSLErrors.alertName(Int32(alert)))")
        case .other(let why), .closed(let why):
            return .notTested(why)
        }
    }

    // MARK: - Client-initiated renegotiation

    /// The inventory's answer when it ran, else its probe: a renegotiation the client starts that
    /// the server completes costs it a full handshake each time (a denial of service lever).
    private func clientRenegotiation(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, timeout: Double,
                                     inventory: ServerInventory?) -> VulnerabilityAnswer {
        let secure: InventoryAnswer, client: InventoryAnswer
        if let inventory {
            (secure, client) = (inventory.secureRenegotiation, inventory.clientRenegotiation)
        } else if let answers = renegotiation(address, target: target, probes: probes, timeout: timeout) {
            (secure, client) = answers
        } else {
            return .notVulnerable("no TLS 1.2-or-lower handshake completed; renegotiation does not exist in TLS 1.3")
        }
        let rfc5746 = secure.status == .no ? "; and without RFC 5746, an attacker in the middle can prefix its own data (CVE-2009-3555)" : ""
        switch client.status {
        case .yes: return .vulnerable(client.detail + rfc5746)
        case .no: return .notVulnerable(client.detail)
        case .notTested: return .notTested(client.detail)
        }
    }
}

/// One probe's hand-built ClientHellos, read up to the server's first answer or first flight.
struct SuiteOffers {
    let address: SocketAddress
    let target: ScanTarget
    let probes: ProbeCounter
    let timeout: Double

    /// The server's first answer to `hello` on a new connection.
    func answer(_ hello: [UInt8]) -> HandBuiltHello.Answer {
        probes.increment()
        return HandBuiltHello.exchange(hello, address: address, target: target, timeout: timeout)
    }

    /// The offerable suites at `version` that `include` selects, and the renegotiation SCSV.
    static func suites(at version: UInt16, _ include: (CipherSuiteInfo) -> Bool) -> [UInt16] {
        CipherSuiteRegistry.offerable(at: version).filter(include).map(\.code) + [CipherSuiteRegistry.renegotiationSCSV]
    }

    /// A ClientHello at `version` offering only the suites `weak` selects: the server picking one
    /// (at most at `highest`) is vulnerable, a refusal is not.
    func judge(_ what: String, version: UInt16, highest: UInt16 = 0x0303, consequence: String? = nil,
               _ weak: @escaping (CipherSuiteInfo) -> Bool) -> VulnerabilityAnswer {
        let suites = Self.suites(at: version, weak)
        let offered = "\(version == 0x0300 ? "an" : "a") \(TLSVersion.name(wireValue: version)) ClientHello offering only the \(suites.count - 1) \(what) suites"
        switch answer(HandBuiltHello.Offer(version: version, suites: suites, serverName: target.sni).bytes) {
        case .serverHello(let hello):
            guard let chosen = CipherSuiteRegistry.suite(hello.cipher), weak(chosen), hello.version <= highest else {
                return .notVulnerable("to \(offered), the server answered \(TLSVersion.name(wireValue: hello.version)) with \(CipherSuiteRegistry.name(hello.cipher))")
            }
            return .vulnerable("to \(offered), the server chose \(chosen.name) at \(TLSVersion.name(wireValue: hello.version))" + (consequence.map { ": \($0)" } ?? ""))
        case .alert(let alert):
            return .notVulnerable("the server refused \(offered): alert \(OpenSSLErrors.alertName(Int32(alert)))")
        case .closed(let why):
            return Self.silentRefusal(offered, why)
        case .other(let why):
            return .notTested("\(offered): \(why)")
        }
    }

    /// The server's first flight in answer to a TLS 1.2 ClientHello offering `suites`.
    func firstFlight(_ suites: [UInt16]) throws(RecordConversation.Failure) -> RecordConversation.FirstFlight {
        probes.increment()
        return try RecordConversation.start(address, target: target, hello: HandBuiltHello.Offer(suites: suites, serverName: target.sni).bytes,
                                            timeout: timeout).1
    }

    /// SSLv3 with a CBC suite (SSLv3's CBC padding is not checked: POODLE).
    func poodle() -> VulnerabilityAnswer {
        judge("CBC", version: 0x0300, highest: 0x0300,
              consequence: "SSLv3's CBC padding is unchecked, so an attacker in the middle who can make the client retry decrypts a byte per 256 requests") { $0.isCBC }
    }

    /// TLS 1.0 (or SSLv3) with a CBC suite: the IV of a record is the previous record's last block.
    func beast() -> VulnerabilityAnswer {
        judge("CBC", version: 0x0301, highest: 0x0301,
              consequence: "records' IVs are predictable, mitigated by 1/n-1 record splitting in clients") { $0.isCBC }
    }

    /// Export RSA: the server picks one and sends a temporary RSA key of 512 bits.
    func freak() -> VulnerabilityAnswer {
        let suites = Self.suites(at: 0x0303) { $0.isExportRSA }
        let offered = "a ClientHello offering only the \(suites.count - 1) export RSA suites"
        do {
            let flight = try firstFlight(suites)
            guard let chosen = CipherSuiteRegistry.suite(flight.cipher), chosen.isExportRSA else {
                return .notVulnerable("to \(offered), the server chose \(CipherSuiteRegistry.name(flight.cipher))")
            }
            let key = flight.keyExchange(for: chosen)?.bits.map { " and a \($0)-bit temporary RSA key" } ?? ""
            return .vulnerable("to \(offered), the server chose \(chosen.name)\(key): a 512-bit key factored in hours decrypts the session")
        } catch {
            return Self.refusal(error, offered)
        }
    }

    /// Export DH, then the DHE group any DHE suite gets: under 2048 bits (or export) is LOGJAM;
    /// a widely shared prime is said (one precomputation breaks every server that uses it).
    func logjam() -> VulnerabilityAnswer {
        let export = Self.suites(at: 0x0303) { $0.isExportDH }
        let offeredExport = "a ClientHello offering only the \(export.count - 1) export DH suites"
        do {
            let flight = try firstFlight(export)
            if let chosen = CipherSuiteRegistry.suite(flight.cipher), chosen.isExportDH {
                let group = Self.dhGroup(flight.keyExchange(for: chosen))
                return .vulnerable("to \(offeredExport), the server chose \(chosen.name)\(group.map { " with \($0)" } ?? ""): an export DH group is broken by precomputation")
            }
        } catch {
            if case .other(let why) = error { return .notTested("\(offeredExport): \(why)") }
        }
        let ephemeral = Self.suites(at: 0x0303) { $0.isFiniteFieldDH && !$0.isExport }
        let offered = "a ClientHello offering only the \(ephemeral.count - 1) DHE suites"
        do {
            let flight = try firstFlight(ephemeral)
            guard let chosen = CipherSuiteRegistry.suite(flight.cipher), chosen.isFiniteFieldDH,
                  let parameters = flight.keyExchange(for: chosen), let bits = parameters.bits,
                  case .finiteField(let prime, _) = parameters else {
                return .notVulnerable("no export DH; to \(offered), the server chose \(CipherSuiteRegistry.name(flight.cipher)) without a DH group")
            }
            let group = Self.dhGroup(parameters) ?? "\(bits)-bit group"
            if bits < 2048 {
                return .vulnerable("no export DH, but \(chosen.name) uses a \(group), under 2048 bits: within reach of a precomputation")
            }
            return .notVulnerable("no export DH; DHE uses a \(group)\(DHPrimes.commonPrimeLabel(prime) != nil ? ": shared, but large enough" : "")")
        } catch {
            return Self.refusal(error, offered, what: "no export DH, and no DHE")
        }
    }

    /// The DH group in words: bits, and its RFC 7919 name or common source.
    static func dhGroup(_ parameters: ServerKeyExchangeParameters?) -> String? {
        guard let parameters, let bits = parameters.bits, case .finiteField(let prime, _) = parameters else { return nil }
        if let name = DHPrimes.rfc7919Group(prime) { return "\(bits)-bit group (\(name))" }
        if let label = DHPrimes.commonPrimeLabel(prime) { return "\(bits)-bit group, a prime many servers share (\(label))" }
        return "\(bits)-bit group"
    }

    /// A ClientHello refused (with an alert, or by a silent close): not vulnerable; any other failure: not tested.
    static func refusal(_ error: RecordConversation.Failure, _ offered: String, what: String? = nil) -> VulnerabilityAnswer {
        switch error {
        case .refused(let alert):
            return .notVulnerable("\(what.map { "\($0): " } ?? "")the server refused \(offered): alert \(OpenSSLErrors.alertName(Int32(alert)))")
        case .closed(let why):
            return silentRefusal(offered, why, what: what)
        case .other(let why):
            return .notTested("\(offered): \(why)")
        }
    }

    /// A silent close is a refusal, as an alert is (the ClientHello tolerance verdict tells a
    /// server that closes on every hello).
    static func silentRefusal(_ offered: String, _ why: String, what: String? = nil) -> VulnerabilityAnswer {
        .notVulnerable("\(what.map { "\($0): " } ?? "")to \(offered), \(why): a refusal")
    }

    // MARK: - ClientHello tolerance

    /// GREASE values (RFC 8701) for suites, groups, extensions, versions and signature algorithms.
    static let grease: [UInt16] = [0x0A0A, 0x1A1A, 0x2A2A, 0x3A3A, 0x4A4A]

    /// A ClientHello as current browsers send one: TLS 1.3 and 1.2 suites, an empty key share (a
    /// TLS 1.3 server answers with a HelloRetryRequest), with GREASE values and padded over 512 bytes
    /// as asked.
    func toleranceHello(grease: Bool, padded: Bool) -> [UInt8] {
        var offer = HandBuiltHello.Offer(suites: [0x1301, 0x1302, 0x1303] + HandBuiltHello.tls12Suites, serverName: target.sni)
        offer.supportedVersions = [0x0304, 0x0303, 0x0302, 0x0301]
        offer.keyShares = []
        if grease {
            offer.suites.insert(Self.grease[0], at: 0)
            offer.groups = [Self.grease[1]] + (offer.groups ?? [])
            offer.supportedVersions = [Self.grease[2]] + (offer.supportedVersions ?? [])
            offer.signatureAlgorithms = [Self.grease[3]] + (offer.signatureAlgorithms ?? [])
            offer.keyShares = [.init(group: Self.grease[1], key: [0])]
            offer.extraExtensions.append(.init(type: Self.grease[4], data: []))
        }
        if padded {
            // The padding extension (RFC 7685) bringing the handshake message to 700 bytes.
            let size = offer.bytes.count - 5
            offer.extraExtensions.append(.init(type: 0x0015, data: [UInt8](repeating: 0, count: max(0, 700 - size - 4))))
        }
        return offer.bytes
    }

    /// One large GREASE ClientHello; when it fails, a plain one (failing too: not tested) and each
    /// half apart, to say which the server cannot take.
    func helloTolerance() -> VulnerabilityAnswer {
        func accepted(_ answer: HandBuiltHello.Answer) -> Bool { if case .serverHello = answer { true } else { false } }
        func words(_ answer: HandBuiltHello.Answer) -> String {
            switch answer {
            case .serverHello(let hello): "answered with \(hello.isHelloRetryRequest ? "a HelloRetryRequest" : "a ServerHello")"
            case .alert(let alert): "refused it with alert \(OpenSSLErrors.alertName(Int32(alert)))"
            case .other(let why), .closed(let why): why.replacingOccurrences(of: "the server ", with: "")
            }
        }
        let full = toleranceHello(grease: true, padded: true)
        let both = answer(full)
        if accepted(both) {
            return .notVulnerable("to a \(full.count - 5)-byte ClientHello with GREASE values in its suites, groups, key share, versions, signature algorithms and extensions, the server \(words(both))")
        }
        let plain = answer(toleranceHello(grease: false, padded: false))
        guard accepted(plain) else {
            return .notTested("the server fails a plain ClientHello too (\(words(plain))), so its intolerance cannot be told")
        }
        let greaseOnly = answer(toleranceHello(grease: true, padded: false))
        let paddedHello = toleranceHello(grease: false, padded: true)
        let paddedOnly = answer(paddedHello)
        var broken: [String] = []
        if !accepted(paddedOnly) { broken.append("a \(paddedHello.count - 5)-byte ClientHello (\(words(paddedOnly)))") }
        if !accepted(greaseOnly) { broken.append("GREASE values (\(words(greaseOnly)))") }
        if broken.isEmpty { broken.append("a \(full.count - 5)-byte ClientHello with GREASE values (\(words(both)))") }
        return .vulnerable("the server answers a plain ClientHello but fails on \(broken.joined(separator: " and on ")): clients that send them (browsers do) cannot connect")
    }
}
