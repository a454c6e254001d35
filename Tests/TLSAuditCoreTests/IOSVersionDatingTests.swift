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
    @Test("when the newest simulated iOS does not connect, the line names the newest that does and why the newest fails")
    func connectsOnlyUpToAVersion() throws {
        let iOS = SimulatedClientRegistry.iOSClients
        try #require(iOS.count >= 3)
        // The older half connects, the newer half does not (a suite later clients dropped).
        let results = iOS.enumerated().map { index, client in
            index < iOS.count / 2 ? ClientSimulationResult(client: client, connects: true, protocolVersion: "TLSv1.2")
                : ClientSimulationResult(client: client, connects: false, failure: "no suite in common")
        }
        let report = ClientSimulationReport(clients: results, connections: results.count, durationMs: 1)
        let line = try #require(ATSDiagnostics.oldestIOSLine(results, oldest: report.oldestConnectingIOS))
        #expect(line.hasPrefix("oldest iOS that connects: \(iOS[0].name)"), "\(line)")
        #expect(line.contains("the newest that connects is \(iOS[iOS.count / 2 - 1].name)"), "\(line)")
        #expect(line.contains("\(iOS[iOS.count - 1].name), the newest simulated, does not (no suite in common)"), "\(line)")
        // Every version connects: the line says nothing of a newest.
        let all = iOS.map { ClientSimulationResult(client: $0, connects: true, protocolVersion: "TLSv1.3") }
        let allLine = try #require(ATSDiagnostics.oldestIOSLine(all, oldest: ClientSimulationReport(clients: all, connections: 1, durationMs: 1).oldestConnectingIOS))
        #expect(!allLine.contains("newest"), "\(allLine)")
    }
}
