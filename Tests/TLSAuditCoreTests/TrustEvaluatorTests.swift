import Foundation
import Testing
import TLSAuditCore

/// Rule logic on hand-made summaries; the end-to-end tests cover the same rules on real chains.
@Suite("trust rules")
struct TrustEvaluatorTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func certificate(_ name: String, issuer: String, ca: Bool?, pathLength: Int? = nil,
                            notAfter: Date = now.addingTimeInterval(86_400), eku: [String]? = ["serverAuth"]) -> CertificateSummary {
        CertificateSummary(subject: "CN=\(name)", issuer: "CN=\(issuer)", commonName: name, serial: "01", version: 3,
                           notBefore: now.addingTimeInterval(-86_400), notAfter: notAfter,
                           signatureAlgorithm: "sha256WithRSAEncryption", signatureHash: "SHA256",
                           publicKey: PublicKeyDescription(type: "RSA", bits: 2048),
                           basicConstraints: ca.map { BasicConstraints(isCA: $0, pathLength: pathLength, critical: true) },
                           keyUsage: nil, extendedKeyUsage: eku,
                           subjectAlternativeNames: SubjectAlternativeNames(dns: ["host.test"]),
                           unhandledCriticalExtensions: [], isSelfSigned: name == issuer,
                           sha256Fingerprint: name, spkiSHA256: name, der: Data())
    }

    /// The trust.* findings (the helper presents the root too, which chain.root-sent notes).
    static func evaluate(_ path: [CertificateSummary], at time: Date = now, publicTrust: Bool = false) -> [Finding] {
        let building = PathBuildingResult(path: path.enumerated().map {
            PathElement(certificate: $0.element, source: .presented, presentedIndex: $0.offset)
        }, anchored: true, issues: [])
        return TrustEvaluator.evaluate(presented: path, building: building,
                                       context: TrustContext(hostname: "host.test", time: time, publicTrust: publicTrust))
            .filter { $0.id.rawValue.hasPrefix("trust.") }
    }

    @Test("a good path has no findings")
    func good() {
        let path = [Self.certificate("leaf", issuer: "int", ca: false, eku: ["serverAuth"]),
                    Self.certificate("int", issuer: "root", ca: true, pathLength: 0),
                    Self.certificate("root", issuer: "root", ca: true)]
        #expect(Self.evaluate(path).isEmpty)
    }

    @Test("notAfter is inclusive (RFC 5280): valid at notAfter, expired one second later")
    func notAfterInclusive() {
        let leaf = Self.certificate("leaf", issuer: "leaf", ca: nil, notAfter: Self.now)
        #expect(Self.evaluate([leaf], at: Self.now).isEmpty)
        #expect(Self.evaluate([leaf], at: Self.now.addingTimeInterval(1)).map(\.id) == [.trustExpired])
    }

    @Test("an issuer without basicConstraints is not a CA")
    func issuerWithoutConstraints() {
        let path = [Self.certificate("leaf", issuer: "signer", ca: false),
                    Self.certificate("signer", issuer: "root", ca: nil),
                    Self.certificate("root", issuer: "root", ca: true)]
        let findings = Self.evaluate(path)
        #expect(findings.map(\.id) == [.trustIssuerNotCA])
        #expect(findings.first?.depth == 1)
    }

    @Test("pathLen counts intermediates below the CA, self-issued ones excepted")
    func pathLength() {
        let twoBelow = [Self.certificate("leaf", issuer: "a", ca: false),
                        Self.certificate("a", issuer: "b", ca: true),
                        Self.certificate("b", issuer: "c", ca: true),
                        Self.certificate("c", issuer: "root", ca: true, pathLength: 1),
                        Self.certificate("root", issuer: "root", ca: true)]
        let findings = Self.evaluate(twoBelow)
        #expect(findings.map(\.id) == [.trustPathLengthExceeded])
        #expect(findings.first?.depth == 3)
        let selfIssuedBelow = [Self.certificate("leaf", issuer: "a", ca: false),
                               Self.certificate("a", issuer: "a", ca: true),
                               Self.certificate("a2", issuer: "root", ca: true, pathLength: 0),
                               Self.certificate("root", issuer: "root", ca: true)]
        #expect(!Self.evaluate(selfIssuedBelow).contains { $0.id == .trustPathLengthExceeded })
    }

    @Test("Apple's validity limits: 825 days and an hour under own anchors, 398 days (no slip) under Apple's root store")
    func appleValidityLimits() {
        func leaf(seconds: Double, eku: [String]? = ["serverAuth"]) -> CertificateSummary {
            var certificate = Self.certificate("leaf", issuer: "leaf", ca: nil, eku: eku)
            certificate.notBefore = Self.now.addingTimeInterval(-86_400)
            certificate.notAfter = certificate.notBefore.addingTimeInterval(seconds)
            return certificate
        }
        func ids(_ certificate: CertificateSummary, publicTrust: Bool) -> [FindingID] {
            let building = PathBuildingResult(path: [PathElement(certificate: certificate, source: .presented, presentedIndex: 0)],
                                              anchored: true, issues: [])
            return TrustEvaluator.evaluate(presented: [certificate], building: building,
                                           context: TrustContext(hostname: "host.test", time: Self.now, publicTrust: publicTrust)).map(\.id)
        }
        let day = 86_400.0
        #expect(ids(leaf(seconds: 825 * day), publicTrust: false).isEmpty)
        #expect(ids(leaf(seconds: 825 * day + 1_800), publicTrust: false).isEmpty, "trustd allows an hour past 825 days")
        #expect(ids(leaf(seconds: 825 * day + 3_601), publicTrust: false) == [.trustLifetime])
        #expect(ids(leaf(seconds: 398 * day), publicTrust: true).isEmpty)
        #expect(ids(leaf(seconds: 398 * day + 1), publicTrust: true) == [.trustLifetime], "no slip for 398 days")
        #expect(ids(leaf(seconds: 399 * day), publicTrust: false).isEmpty, "398 days is for publicly trusted certificates only")
    }

    @Test("the lifetime message gives the period to the minute")
    func lifetimeMessage() {
        var certificate = Self.certificate("leaf", issuer: "leaf", ca: nil)
        certificate.notBefore = Self.now.addingTimeInterval(-86_400)
        certificate.notAfter = certificate.notBefore.addingTimeInterval(900 * 86_400 + 5_400)
        let building = PathBuildingResult(path: [PathElement(certificate: certificate, source: .presented, presentedIndex: 0)],
                                          anchored: true, issues: [])
        let message = TrustEvaluator.evaluate(presented: [certificate], building: building,
                                              context: TrustContext(hostname: "host.test", time: Self.now)).first { $0.id == .trustLifetime }?.message
        #expect(message?.contains("valid for 900 days 1 h 30 min") == true, "\(message ?? "none")")
        #expect(message?.contains("configuration profile") == true, "a leaf that is its own anchor: a profile-installed one is exempt")
    }

    @Test("serverAuth by anchor kind: Apple's store wants serverAuth itself; own anchors want it after 2019-07-01; clientAuth only fails everywhere", arguments: [
        // (leaf EKU, passes under own anchors, passes under Apple's root store)
        (["serverAuth"] as [String]?, true, true), (["anyExtendedKeyUsage"], false, false), (nil, false, false),
        (["clientAuth"], false, false), ([], false, false), (["msSGC"], false, false), (["serverAuth", "clientAuth"], true, true),
    ])
    func leafServerAuth(usages: [String]?, passesOwn: Bool, passesApple: Bool) {
        let path = [Self.certificate("leaf", issuer: "root", ca: false, eku: usages),
                    Self.certificate("root", issuer: "root", ca: true)]
        #expect(Self.evaluate(path).contains { $0.id == .trustEKU } == !passesOwn)
        #expect(Self.evaluate(path, publicTrust: true).contains { $0.id == .trustEKU } == !passesApple)
    }

    @Test("own anchors: trustd's cutoff is 2019-06-30T23:00Z (its 'jul2019'), strictly after; before it only a server usage is asked")
    func ownAnchorCutoff() {
        let cutoff = 1_561_935_600.0 // 2019-06-30T23:00:00Z
        func findings(_ usages: [String]?, notBefore: Double, days: Double = 90) -> [FindingID] {
            var certificate = Self.certificate("leaf", issuer: "root", ca: false, eku: usages)
            certificate.notBefore = Date(timeIntervalSince1970: notBefore)
            certificate.notAfter = certificate.notBefore.addingTimeInterval(days * 86_400)
            return Self.evaluate([certificate, Self.certificate("root", issuer: "root", ca: true)], at: Date(timeIntervalSince1970: notBefore + 60))
                .map(\.id)
        }
        #expect(!findings(nil, notBefore: cutoff).contains(.trustEKU), "at the cutoff itself: not after it")
        #expect(findings(nil, notBefore: cutoff + 1).contains(.trustEKU))
        #expect(findings(nil, notBefore: 1_561_939_200).contains(.trustEKU), "2019-07-01T00:00Z is after trustd's cutoff")
        #expect(!findings(["anyExtendedKeyUsage"], notBefore: cutoff).contains(.trustEKU))
        #expect(!findings(["msSGC"], notBefore: cutoff).contains(.trustEKU), "a Server Gated Crypto usage passes the check every chain gets")
        #expect(findings(["clientAuth"], notBefore: cutoff).contains(.trustEKU))
        #expect(!findings(["serverAuth"], notBefore: cutoff, days: 900).contains(.trustLifetime), "no limit before the cutoff")
        #expect(findings(["serverAuth"], notBefore: cutoff + 1, days: 900).contains(.trustLifetime))
    }

    static let publicLimitCases: [(Double, Double, Bool)] = [
        // (notBefore, validity in days, passes)
        (1_467_331_199, Double(365 * 5 + 2) + 1.0 / 48, true), (1_467_331_199, Double(365 * 5 + 2) + 0.05, false), // before 2016-07-01: 60 months
        (1_467_331_200, Double(365 * 3 + 2 * 31 + 30 + 1) + 1.0 / 48, true), (1_467_331_200, Double(365 * 5 + 2), false), // then 39 months
        (1_519_862_400, 825 + 1.0 / 48, true), (1_519_862_400, 825.05, false),       // from 2018-03-01: 825 days
        (1_598_918_399, 825 + 1.0 / 48, true), (1_598_918_400, 398 + 1.0 / 86_400, false), (1_598_918_400, 398, true), // from 2020-09-01: 398
    ]

    @Test("Apple's root store: the older limits by notBefore, each with an hour's slip but 398 days", arguments: publicLimitCases)
    func publicLimits(notBefore: Double, days: Double, passes: Bool) {
        var certificate = Self.certificate("leaf", issuer: "root", ca: false)
        certificate.notBefore = Date(timeIntervalSince1970: notBefore)
        certificate.notAfter = certificate.notBefore.addingTimeInterval((days * 86_400).rounded())
        let found = Self.evaluate([certificate, Self.certificate("root", issuer: "root", ca: true)],
                                  at: certificate.notBefore.addingTimeInterval(60), publicTrust: true).map(\.id)
        #expect(found.contains(.trustLifetime) == !passes, "\(found)")
    }

    @Test("a chain that anchors nowhere is judged by the rules of the store that judged it (as ats does)")
    func unanchoredRuleModel() {
        func report(store: String, anchored: Bool, anchorIn: [String]?) -> ChainReport {
            var chain = ChainReport(presented: [], path: [], anchored: anchored, trustStore: store, issues: [])
            chain.anchorIn = anchorIn
            return chain
        }
        #expect(report(store: "apple", anchored: false, anchorIn: nil).judgedAsPublic)
        #expect(!report(store: "apple", anchored: false, anchorIn: nil).publicTrust, "CT and the like still need an anchor")
        #expect(!report(store: "ca-file:root.pem", anchored: false, anchorIn: nil).judgedAsPublic)
        #expect(report(store: "ca-file:root.pem", anchored: true, anchorIn: ["apple"]).judgedAsPublic, "an Apple root given as --ca-file")
        #expect(!report(store: "apple", anchored: true, anchorIn: []).judgedAsPublic)
    }

    @Test("an intermediate restricted to clientAuth: refused under every anchor (SecPolicyCheckExtendedKeyUsage); msSGC passes only under own anchors")
    func intermediateUsage() {
        let path = [Self.certificate("leaf", issuer: "int", ca: false),
                    Self.certificate("int", issuer: "root", ca: true, eku: ["clientAuth"]),
                    Self.certificate("root", issuer: "root", ca: true)]
        #expect(Self.evaluate(path, publicTrust: true).contains { $0.id == .trustEKU && $0.depth == 1 && $0.severity == .error })
        let own = Self.evaluate(path).filter { $0.id == .trustEKU }
        #expect(own.map(\.severity) == [.error] && own.first?.depth == 1, "\(own)")
        let sgc = [path[0], Self.certificate("int", issuer: "root", ca: true, eku: ["msSGC"]), path[2]]
        #expect(!Self.evaluate(sgc).contains { $0.id == .trustEKU }, "a Server Gated Crypto usage is one the SSL policy allows")
        #expect(Self.evaluate(sgc, publicTrust: true).contains { $0.id == .trustEKU }, "Apple's root store wants serverAuth or anyEKU")
        let empty = [path[0], Self.certificate("int", issuer: "root", ca: true, eku: []), path[2]]
        #expect(!Self.evaluate(empty, publicTrust: true).contains { $0.id == .trustEKU }, "an empty list restricts nothing trustd reads")
        #expect(!Self.evaluate(empty).contains { $0.id == .trustEKU })
    }
}

@Suite("ATS rules")
struct ATSRuleTests {
    static func observation(_ version: TLSVersion, iana: String, forwardSecret: Bool) -> HandshakeObservation {
        HandshakeObservation(clientProfile: .ats, protocolVersion: version,
                             cipher: CipherSuiteDescription(iana: iana, openssl: iana, code: "0x0000", keyExchange: forwardSecret ? "ECDHE" : "RSA",
                                                            authentication: "RSA", isAEAD: true, strengthBits: 128),
                             keyExchange: KeyExchangeDescription(group: nil, ephemeralKey: nil, forwardSecrecy: forwardSecret),
                             serverSignatureHash: nil, clientCertificateRequested: false)
    }

    @Test("suite rules", arguments: [
        (TLSVersion.tls1_2, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", true, [String]()),
        (.tls1_2, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", true, ["ats.cipher-suite"]), // missing from Apple's list
        (.tls1_2, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", true, []),
        (.tls1_2, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", true, ["ats.cipher-suite"]),
        (.tls1_2, "TLS_RSA_WITH_AES_128_GCM_SHA256", false, ["ats.forward-secrecy"]),
        (.tls1_3, "TLS_CHACHA20_POLY1305_SHA256", true, []),
        (.tls1_1, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", true, ["ats.tls-version"]),
    ])
    func suites(version: TLSVersion, iana: String, forwardSecret: Bool, failing: [String]) {
        let findings = CompliancePolicy.ats.evaluate(observation: Self.observation(version, iana: iana, forwardSecret: forwardSecret),
                                          presented: [], building: PathBuildingResult(path: [], anchored: false, issues: []),
                                          trustFindings: [], atsClientRefusal: nil)
        #expect(findings.map(\.id.rawValue) == failing)
        #expect(CompliancePolicy.ats.verdict(from: findings).compliant == failing.isEmpty)
    }
}

@Suite("Certificate Transparency (Apple)")
struct CertificateTransparencyTests {
    func findings(lifetimeDays: Double, scts: SCTCounts, publicTrust: Bool) -> [FindingID] {
        var leaf = TrustEvaluatorTests.certificate("host.test", issuer: "root", ca: false)
        leaf.notAfter = leaf.notBefore.addingTimeInterval(lifetimeDays * 86_400)
        let root = TrustEvaluatorTests.certificate("root", issuer: "root", ca: true)
        var observation = ATSRuleTests.observation(.tls1_3, iana: "TLS_AES_128_GCM_SHA256", forwardSecret: true)
        observation.signedCertificateTimestamps = scts
        let building = PathBuildingResult(path: [PathElement(certificate: leaf, source: .presented, presentedIndex: 0),
                                                 PathElement(certificate: root, source: .trustStore, presentedIndex: nil)],
                                          anchored: true, issues: [])
        let (result, _) = AddressAssessment.assess(observation: observation, presented: [leaf], building: building,
                                                   context: TrustContext(hostname: "host.test", time: TrustEvaluatorTests.now,
                                                                         publicTrust: publicTrust),
                                                   policy: .ats, atsClientRefusal: nil)
        return result.filter { $0.id == .trustCertificateTransparency }.map(\.id)
    }

    @Test("embedded SCT counts by lifetime, TLS/OCSP delivery, and private roots exempt")
    func rules() {
        #expect(findings(lifetimeDays: 90, scts: SCTCounts(embedded: 2, tlsExtension: 0, ocsp: 0), publicTrust: true).isEmpty)
        #expect(!findings(lifetimeDays: 90, scts: SCTCounts(embedded: 1, tlsExtension: 0, ocsp: 0), publicTrust: true).isEmpty)
        #expect(!findings(lifetimeDays: 300, scts: SCTCounts(embedded: 2, tlsExtension: 0, ocsp: 0), publicTrust: true).isEmpty)
        #expect(findings(lifetimeDays: 300, scts: SCTCounts(embedded: 3, tlsExtension: 0, ocsp: 0), publicTrust: true).isEmpty)
        #expect(findings(lifetimeDays: 300, scts: SCTCounts(embedded: 1, tlsExtension: 1, ocsp: 0), publicTrust: true).isEmpty)
        #expect(findings(lifetimeDays: 300, scts: SCTCounts(embedded: 0, tlsExtension: 0, ocsp: 0), publicTrust: false).isEmpty)
    }
}
