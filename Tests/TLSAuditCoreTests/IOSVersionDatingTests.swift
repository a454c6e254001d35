import Foundation
import Testing
@testable import TLSAuditCore

/// How `IOSVersionRules` dates a chain failure: from the certificates, never from the message text,
/// which quotes what the certificate says.
@Suite("oldest iOS: dating chain failures")
struct IOSVersionDatingTests {
    static func leaf(cn: String, dns: [String] = [], eku: [String]? = ["serverAuth"]) -> CertificateSummary {
        CertificateSummary(subject: "CN=\(cn)", issuer: "CN=int", commonName: cn, serial: "01", version: 3,
                           notBefore: Date(timeIntervalSince1970: 1_700_000_000), notAfter: Date(timeIntervalSince1970: 1_720_000_000),
                           signatureAlgorithm: "sha256WithRSAEncryption", signatureHash: "SHA256",
                           publicKey: PublicKeyDescription(type: "RSA", bits: 2048),
                           basicConstraints: BasicConstraints(isCA: false, pathLength: nil, critical: true),
                           keyUsage: nil, extendedKeyUsage: eku, subjectAlternativeNames: SubjectAlternativeNames(dns: dns),
                           unhandledCriticalExtensions: [], isSelfSigned: false, sha256Fingerprint: cn, spkiSHA256: cn, der: Data())
    }

    @Test("a host named only in the CN dates from iOS 13; a CN that merely quotes the message's words does not")
    func commonName() {
        let mismatch = Finding(.trustHostnameMismatch, .error, depth: 0, "only iOS 12 and earlier match a name in the CN")
        #expect(IOSVersionRules.since(mismatch, leaf: Self.leaf(cn: "app.test"), hostname: "APP.test.") == [13])
        #expect(IOSVersionRules.since(mismatch, leaf: Self.leaf(cn: "*.test"), hostname: "app.test") == nil, "no wildcard over a public suffix")
        #expect(IOSVersionRules.since(mismatch, leaf: Self.leaf(cn: "only iOS 12 and earlier match a name in the CN"), hostname: "app.test") == nil)
        #expect(IOSVersionRules.since(mismatch, leaf: Self.leaf(cn: "app.test", dns: ["other.test"]), hostname: "app.test") == nil,
                "with SANs the CN was never read")
        #expect(IOSVersionRules.since(mismatch, leaf: Self.leaf(cn: "127.0.0.1"), hostname: "127.0.0.1") == nil)
    }

    @Test("serverAuth itself dates from iOS 13; an extendedKeyUsage without any server usage fails every version")
    func extendedKeyUsage() {
        let finding = Finding(.trustEKU, .error, depth: 0, "restricts extendedKeyUsage to")
        #expect(IOSVersionRules.since(finding, leaf: Self.leaf(cn: "restricts extendedKeyUsage to", eku: nil), hostname: "app.test") == [13])
        #expect(IOSVersionRules.since(finding, leaf: Self.leaf(cn: "app.test", eku: ["anyExtendedKeyUsage"]), hostname: "app.test") == [13])
        #expect(IOSVersionRules.since(finding, leaf: Self.leaf(cn: "app.test", eku: ["clientAuth"]), hostname: "app.test") == nil)
        let intermediate = Finding(.trustEKU, .error, depth: 1, "restricts extendedKeyUsage to clientAuth")
        #expect(IOSVersionRules.since(intermediate, leaf: Self.leaf(cn: "app.test"), hostname: "app.test") == [13])
        let key = Finding(.atsKeySize, .error, depth: 1, "RSA 1024")
        #expect(IOSVersionRules.since(key, leaf: nil, hostname: nil) == IOSVersionRules.issuingCASince)
        #expect(IOSVersionRules.since(Finding(.atsKeySize, .error, depth: 0, "RSA 1024"), leaf: nil, hostname: nil) == IOSVersionRules.atsSince)
    }

    @Test("a stored result's SCT counts give no CT finding to a chain that anchors nowhere")
    func unanchoredCT() {
        var observation = HandshakeObservation(clientProfile: .ats, protocolVersion: .tls1_2,
            cipher: CipherSuiteDescription(iana: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", openssl: "ECDHE-RSA-AES128-GCM-SHA256", code: "0xC02F",
                                           keyExchange: "ECDHE", authentication: "RSA", isAEAD: true, strengthBits: 128),
            keyExchange: KeyExchangeDescription(group: nil, ephemeralKey: nil, forwardSecrecy: true),
            serverSignatureHash: nil, clientCertificateRequested: false)
        observation.signedCertificateTimestamps = SCTCounts(embedded: 0, tlsExtension: 0, ocsp: 0)
        let context = TrustContext(hostname: "app.test", time: Date(timeIntervalSince1970: 1_710_000_000), publicTrust: true)
        let leaf = Self.leaf(cn: "app.test", dns: ["app.test"])
        #expect(AddressAssessment.certificateTransparency(observation, leaf: leaf, anchored: false, context: context) == nil)
        #expect(AddressAssessment.certificateTransparency(observation, leaf: leaf, anchored: true, context: context)?.id == .trustCertificateTransparency)
    }
}

@Suite("the oldest-iOS line")
struct OldestIOSLineTests {
    static func line(_ results: [ClientSimulationResult], chainFailures: [Finding] = []) -> String? {
        let oldest = IOSVersionRules.oldest(results, chainFailures: chainFailures, minimumTLSVersion: .tls1_2, forwardSecrecy: true).client
        let stop = IOSVersionRules.newestStop(results, chainFailures: chainFailures, minimumTLSVersion: .tls1_2, forwardSecrecy: true)
        return ATSDiagnostics.oldestIOSLine(results, oldest: oldest, newestStop: stop)
    }

    @Test("when the newest simulated iOS does not connect (a handshake, or a rule a later version began), the line names the newest that does and why")
    func connectsOnlyUpToAVersion() throws {
        // The iOS clients with ATS, oldest first, as the rules order them.
        let all = SimulatedClientRegistry.iOSClients.map { ClientSimulationResult(client: $0, connects: true, protocolVersion: "TLSv1.2", group: "x25519") }
        let iOS = IOSVersionRules.atsClients(all)
        try #require(iOS.count >= 3)
        // The older half handshakes, the newer half does not (a suite later clients dropped).
        let half = iOS.count / 2
        let failing = Set(iOS.dropFirst(half).map(\.short))
        let results = SimulatedClientRegistry.iOSClients.map { client in
            failing.contains(client.short) ? ClientSimulationResult(client: client, connects: false, failure: "no suite in common")
                : ClientSimulationResult(client: client, connects: true, protocolVersion: "TLSv1.2", group: "x25519")
        }
        let stopped = try #require(Self.line(results))
        #expect(stopped.hasPrefix("oldest iOS that connects: \(iOS[0].client)"), "\(stopped)")
        #expect(stopped.contains("the newest that connects is \(iOS[half - 1].client)"), "\(stopped)")
        #expect(stopped.contains("\(iOS[iOS.count - 1].client), the newest simulated, does not (no suite in common)"), "\(stopped)")
        // Every version handshakes, but a SHA-1 intermediate is refused from iOS 13: the stop is the rule's.
        let sha1 = Finding(.atsSignatureHash, .error, depth: 1, "The CA certificate int is signed with sha1WithRSAEncryption.")
        let ruled = try #require(Self.line(all, chainFailures: [sha1]))
        #expect(ruled.contains("does not (ats.signature-hash, a rule since iOS 13)"), "\(ruled)")
        // Every version connects: the line says nothing of a newest.
        #expect(try #require(Self.line(all)).contains("newest") == false)
    }
}
