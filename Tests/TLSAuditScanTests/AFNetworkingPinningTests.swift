import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab

/// Every combination of AFNetworking's pinning settings against real servers, compared with what
/// `AFSecurityPolicy evaluateServerTrust:forDomain:` does (docs/apple-rules.md section 4, written out
/// below as `afnetworkingAccepts`, independently of tlsaudit's code).
@Suite("AFNetworking pinning, exactly")
struct AFNetworkingPinningTests {
    enum Server: String, CaseIterable, Sendable {
        case valid, selfSigned = "self-signed", expired, wrongName = "wrong-name"
    }

    enum Pinned: String, CaseIterable, Sendable {
        case leaf, root, unpinned
    }

    /// One lab server per kind, started once; the leaf each presents.
    struct Lab: Sendable {
        let servers: [Server: LabTLSServer]
        let leaves: [Server: LabCertificate]
        let unrelated: LabCertificate

        static let shared: Lab = try! Lab()

        init() throws {
            let pki = TestPKI.shared
            var leaves: [Server: LabCertificate] = [:]
            var chains: [Server: [LabCertificate]] = [:]
            leaves[.valid] = try pki.leaf()
            chains[.valid] = [leaves[.valid]!, pki.intermediate]
            leaves[.selfSigned] = try LabCertificateAuthority.selfSigned(.server([TestPKI.hostname]))
            chains[.selfSigned] = [leaves[.selfSigned]!]
            leaves[.expired] = try pki.leaf { request in
                request.notBefore = Date().addingTimeInterval(-90 * 86_400)
                request.notAfter = Date().addingTimeInterval(-86_400)
            }
            chains[.expired] = [leaves[.expired]!, pki.intermediate]
            leaves[.wrongName] = try pki.leaf("elsewhere.tlsaudit.test")
            chains[.wrongName] = [leaves[.wrongName]!, pki.intermediate]
            var servers: [Server: LabTLSServer] = [:]
            for server in Server.allCases {
                servers[server] = try LabTLSServer(LabServerConfiguration(chain: chains[server]!))
            }
            self.servers = servers
            self.leaves = leaves
            unrelated = pki.otherRoot
        }

        func pinnedCertificate(_ pinned: Pinned, server: Server) -> CertificateSummary {
            switch pinned {
            case .leaf: leaves[server]!.summary
            case .root: TestPKI.shared.root.summary
            case .unpinned: unrelated.summary
            }
        }
    }

    // MARK: - The reference: AFNetworking's steps, in terms of what each lab server is.

    /// The normal trust evaluation (the target's anchors), under AFNetworking's policy: SSL with
    /// the host name when validatesDomainName, basic X.509 (chain and dates) otherwise.
    static func normallyTrusted(_ server: Server, validatesDomainName: Bool) -> Bool {
        switch server {
        case .valid: true
        case .selfSigned, .expired: false
        case .wrongName: !validatesDomainName
        }
    }

    /// Certificate mode's evaluation with the pinned certificates as the only anchors.
    static func trustedByPinnedAnchor(_ server: Server, _ pinned: Pinned, validatesDomainName: Bool) -> Bool {
        switch (pinned, server) {
        case (.unpinned, _): false
        case (.root, .selfSigned): false              // its chain does not lead to the pinned root
        case (_, .expired): false                     // dates are always evaluated
        case (_, .wrongName): !validatesDomainName
        case (.leaf, _), (.root, _): true             // a pinned leaf is its own anchor
        }
    }

    /// Public-key mode: some key of the server's chain (as evaluated, anchor included) is pinned.
    static func keyInChain(_ server: Server, _ pinned: Pinned) -> Bool {
        switch (pinned, server) {
        case (.unpinned, _), (.root, .selfSigned): false
        case (.leaf, _), (.root, _): true
        }
    }

    /// Whether AFNetworking accepts the server; nil where it refuses the configuration itself.
    static func afnetworkingAccepts(mode: PinMode, allowInvalid: Bool, validatesDomainName: Bool,
                                    server: Server, pinned: Pinned) -> Bool? {
        // Step 1: invalid certificates allowed with name validation but no pins: "you MUST use pinning".
        if mode == .none, allowInvalid, validatesDomainName { return nil }
        switch mode {
        case .none:
            return allowInvalid || normallyTrusted(server, validatesDomainName: validatesDomainName)
        case .certificate, .publicKey:
            if !allowInvalid, !normallyTrusted(server, validatesDomainName: validatesDomainName) { return false }
            return mode == .certificate ? trustedByPinnedAnchor(server, pinned, validatesDomainName: validatesDomainName)
                                        : keyInChain(server, pinned)
        }
    }

    // MARK: - The table

    struct Case: Sendable, CustomTestStringConvertible {
        var mode: PinMode
        var allowInvalid: Bool
        var validatesDomainName: Bool
        var server: Server
        var pinned: Pinned
        var testDescription: String {
            "\(mode.rawValue) allow_invalid=\(allowInvalid) validates_domain_name=\(validatesDomainName) \(server.rawValue) server, \(pinned.rawValue) pinned"
        }
    }

    static let cases: [Case] = {
        var cases: [Case] = []
        for mode in PinMode.allCases {
            for allowInvalid in [false, true] {
                for validates in [false, true] {
                    for server in Server.allCases {
                        // Mode none pins nothing: one row per server.
                        for pinned in mode == .none ? [.unpinned] : Pinned.allCases {
                            cases.append(Case(mode: mode, allowInvalid: allowInvalid, validatesDomainName: validates,
                                              server: server, pinned: pinned))
                        }
                    }
                }
            }
        }
        return cases
    }()

    static let scanner: TLSScanner = try! TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: TestPKI.shared.rootFile)), judge: AddressAssessment.judge)

    @Test("every mode x allow_invalid_certificates x validates_domain_name x server x pinned certificate", arguments: cases)
    func table(_ row: Case) throws {
        let lab = Lab.shared
        let expected = Self.afnetworkingAccepts(mode: row.mode, allowInvalid: row.allowInvalid,
                                                validatesDomainName: row.validatesDomainName, server: row.server, pinned: row.pinned)
        let certificate = lab.pinnedCertificate(row.pinned, server: row.server)
        let pins: [PinValue] = switch row.mode {
        case .none: []
        case .certificate: [.certificate(certificate.sha256Fingerprint)]
        case .publicKey: [.spki(certificate.spkiSHA256)]
        }
        let policy = PinPolicy(mode: row.mode, pins: pins, allowInvalidCertificates: row.allowInvalid,
                               validatesDomainName: row.validatesDomainName)
        guard let expected else {
            #expect(!policy.problems.isEmpty, "AFNetworking refuses this configuration; so must tlsaudit")
            return
        }
        #expect(policy.problems.isEmpty, "\(policy.problems)")
        var target = ScanTarget(original: "pinning", host: TestPKI.hostname, port: lab.servers[row.server]!.port, sni: TestPKI.hostname,
                                connectTo: [try ConnectAddress.parse("127.0.0.1")])
        target.pins = policy
        let result = try #require(Self.scanner.scan(target).addresses.first)
        #expect(result.status == .completed, "\(String(describing: result.error))")
        let pin = try #require(result.pin)
        let trustErrors = result.findings.filter {
            $0.severity == .error && $0.id.rawValue.hasPrefix("trust.") && (row.validatesDomainName || $0.id != .trustHostnameMismatch)
        }
        // Mode none pins nothing: the answer is the trust evaluation's.
        let accepted = pin.state == .match || (pin.state == .none && trustErrors.isEmpty)
        #expect(accepted == expected, "tlsaudit: \(pin.state.rawValue), \(pin.message)")
        #expect((pin.state == .mismatch) == (result.finding("pin.mismatch") != nil))
        let acceptsAnything = row.mode == .none && row.allowInvalid && !row.validatesDomainName
        #expect((result.finding("pin.accepts-any-certificate") != nil) == acceptsAnything)
    }

    @Test("certificate mode anchors on a pinned root the server does not send and no trust store holds, given as the certificate itself")
    func pinnedRootNotSent() throws {
        let lab = Lab.shared
        let server = try #require(lab.servers[.valid])
        // The system store knows nothing of the test root; the app bundles it (AFNetworking's pinnedCertificates).
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore.system()), judge: AddressAssessment.judge)
        var target = ScanTarget(original: "pinning", host: TestPKI.hostname, port: server.port, sni: TestPKI.hostname,
                                connectTo: [try ConnectAddress.parse("127.0.0.1")])
        var policy = PinPolicy(mode: .certificate, pins: [.certificate(TestPKI.shared.root.summary.sha256Fingerprint)],
                               allowInvalidCertificates: true, validatesDomainName: true)
        policy.pinnedCertificates = [Data(TestPKI.shared.root.der)]
        target.pins = policy
        let pinned = try #require(scanner.scan(target).addresses.first?.pin)
        #expect(pinned.state == .match, "\(pinned.message)")
        // Known by fingerprint only, the root cannot anchor anything: a mismatch that says so.
        policy.pinnedCertificates = []
        target.pins = policy
        let fingerprintOnly = try #require(scanner.scan(target).addresses.first?.pin)
        #expect(fingerprintOnly.state == .mismatch)
    }

    @Test("check-config warns of a policy that accepts any certificate")
    func acceptsAnyWarning() {
        let policy = PinPolicy(mode: .none, allowInvalidCertificates: true, validatesDomainName: false)
        #expect(policy.problems.isEmpty)
        #expect(policy.warnings.contains { $0.contains("accepts any certificate at all") })
    }
}
