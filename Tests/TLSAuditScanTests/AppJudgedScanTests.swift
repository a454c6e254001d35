import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel
import TLSAuditProbe

/// A scan of a target judged by an app's rules (`app:`, as `app import` writes it): the handshake
/// the app's own client makes decides, and what the app's exception lifts is named, not hidden.
@Suite("app-judged scans")
struct AppJudgedScanTests {
    let pki = TestPKI.shared
    static let name = "legacy.app.test"

    func scan(_ server: LabTLSServer, rules: AppHostRules?) throws -> AddressScanResult {
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: pki.rootFile)),
                                     judge: AddressAssessment.judge)
        var target = ScanTarget(original: Self.name, host: Self.name, port: server.port, sni: Self.name,
                                connectTo: [try ConnectAddress.parse("127.0.0.1")])
        target.app = rules
        return try #require(scanner.scan(target).addresses.first)
    }

    /// The rules `app import` writes for `Self.name` under an Info.plist whose NSAppTransportSecurity is `ats`.
    func rules(_ ats: [String: PlistValue]) -> AppHostRules {
        AppTransportSecurityPolicy(.dictionary(ats)).hostRules(for: Self.name, bundle: "test.tlsaudit.shop")
    }

    func entry(_ keys: [String: PlistValue]) -> [String: PlistValue] {
        ["NSExceptionDomains": .dictionary([Self.name: .dictionary(keys)])]
    }

    @Test("a TLS 1.0 server the app's exception covers: compliant for the app, the lifted findings kept as information naming the exception; re-judged the same")
    func exceptionCoversServer() throws {
        let leaf = try pki.intermediate.issue(.server([Self.name], key: .rsa(bits: 2048)))
        let legacy = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "ECDHE-RSA-AES128-SHA"))
        defer { legacy.stop() }
        let generic = try scan(legacy, rules: nil)
        #expect(!generic.countedCompliant && generic.ats.failedRules.contains(.atsTLSVersion), "a generic Apple client refuses TLS 1.0")

        let app = rules(entry(["NSExceptionMinimumTLSVersion": .string("TLSv1.0")]))
        #expect(app.configuration == "TLSv1.0" && app.reliesOn == ["NSExceptionMinimumTLSVersion"])
        let result = try scan(legacy, rules: app)
        let outcome = try #require(result.app)
        #expect(outcome.connects && outcome.reasons.isEmpty && outcome.entry == Self.name, "\(outcome)")
        #expect(outcome.detail.contains("TLS 1.0"), "\(outcome.detail)")
        #expect(result.countedCompliant, "\(result.ats.failedRules)")
        let lifted = try #require(result.finding("ats.tls-version"))
        #expect(lifted.severity == .info)
        #expect(lifted.message.hasPrefix("Lifted for app test.tlsaudit.shop by NSExceptionDomains 'legacy.app.test' (NSExceptionMinimumTLSVersion)"),
                "\(lifted.message)")
        let again = AddressAssessment.rejudge(result, hostname: Self.name, policy: .atsRuntime, at: Date())
        #expect(again.verdict.compliant, "reports re-judge the stored scan with its app outcome: \(again.verdict.failedRules)")

        // The same server, an exception that does not lift what it lacks: not compliant for the app either.
        let forwardSecrecyOnly = rules(entry(["NSExceptionRequiresForwardSecrecy": .bool(false)]))
        let refused = try scan(legacy, rules: forwardSecrecyOnly)
        #expect(refused.app?.connects == false && refused.app?.reasons == ["ats.handshake"], "\(String(describing: refused.app))")
        #expect(!refused.countedCompliant)
        #expect(refused.finding("ats.tls-version")?.severity == .error, "nothing is lifted when the app does not connect")
    }

    @Test("a server a generic Apple client accepts under an entry that relaxes something: compliant, relying on no exception (the entry is named as not needed)")
    func exceptionNotRelied() throws {
        let leaf = try pki.intermediate.issue(.server([Self.name], key: .rsa(bits: 2048)))
        let modern = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { modern.stop() }
        let result = try scan(modern, rules: rules(entry(["NSExceptionMinimumTLSVersion": .string("TLSv1.0")])))
        let outcome = try #require(result.app)
        #expect(outcome.connects && outcome.entry == Self.name && outcome.reliesOn == [], "\(outcome)")
        #expect(outcome.reliance == "default ATS (NSExceptionDomains 'legacy.app.test' applies; none of its exceptions is needed)")
        #expect(result.countedCompliant && !result.findings.contains { $0.message.hasPrefix("Lifted") })
    }

    @Test("a server a generic Apple client accepts but the app's stricter entry (TLS 1.3 only) refuses: not compliant for the app, with the reason")
    func stricterEntryRefuses() throws {
        let leaf = try pki.intermediate.issue(.server([Self.name], key: .rsa(bits: 2048)))
        let tls12 = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_2, maxVersion: .tls1_2))
        defer { tls12.stop() }
        #expect(try scan(tls12, rules: nil).countedCompliant, "TLS 1.2 with ECDHE-GCM passes default ATS")
        let strict = rules(entry(["NSExceptionMinimumTLSVersion": .string("TLSv1.3")]))
        #expect(strict.configuration == "TLSv1.3")
        let result = try scan(tls12, rules: strict)
        #expect(result.app?.connects == false, "\(String(describing: result.app))")
        #expect(!result.countedCompliant && result.ats.failedRules == [.atsHandshake], "\(result.ats.failedRules)")
        #expect(result.finding("ats.handshake")?.message.contains("App test.tlsaudit.shop's client (ATS configuration TLSv1.3) does not connect") == true)
    }

    @Test("the app's AFSecurityPolicy (app: afnetworking): a server whose leaf is not the bundled one is a pin mismatch for the app, shown as the pin state; the bundled leaf matches")
    func afnetworkingPins() throws {
        let leaf = try pki.intermediate.issue(.server([Self.name], key: .rsa(bits: 2048)))
        let other = try pki.intermediate.issue(.server([Self.name], key: .rsa(bits: 2048)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        func pinned(_ certificate: LabCertificate) -> AppHostRules {
            var policy = PinPolicy(mode: .certificate, pins: [.certificate(certificate.summary.sha256Fingerprint)])
            policy.pinnedCertificates = [Data(certificate.der)]
            return AppTransportSecurityPolicy(nil).hostRules(for: Self.name, bundle: "test.tlsaudit.shop", afnetworking: policy)
        }
        let matching = try scan(server, rules: pinned(leaf))
        #expect(matching.app?.connects == true && matching.pin?.state == .match && matching.countedCompliant, "\(String(describing: matching.pin))")
        let swapped = try scan(server, rules: pinned(other))
        #expect(swapped.app?.connects == false && swapped.app?.reasons == ["pin.mismatch"], "\(String(describing: swapped.app))")
        #expect(swapped.pin?.state == .mismatch && !swapped.countedCompliant)
        #expect(swapped.finding("pin.mismatch")?.message.contains("AFSecurityPolicy") == true)
        #expect(swapped.finding("ats.handshake") == nil, "a pin mismatch is the pin's verdict, not a handshake failure")
    }

    @Test("arbitrary loads: ATS minimums lifted, Apple's trust rules not (an expired chain fails for the app too)")
    func arbitraryLoadsKeepTrust() throws {
        var request = LabCertificateRequest.server([Self.name], key: .rsa(bits: 2048))
        request.notBefore = Date(timeIntervalSinceNow: -90 * 86_400)
        request.notAfter = Date(timeIntervalSinceNow: -86_400)
        let expired = try pki.intermediate.issue(request)
        let server = try LabTLSServer(LabServerConfiguration(chain: [expired, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "AES128-SHA"))
        defer { server.stop() }
        let open = rules(["NSAllowsArbitraryLoads": .bool(true)])
        #expect(open.configuration == "arbitrary-loads" && open.reliesOn == ["NSAllowsArbitraryLoads"])
        let result = try scan(server, rules: open)
        #expect(result.app?.connects == false && result.app?.reasons.contains("trust.expired") == true, "\(String(describing: result.app))")
        #expect(!result.countedCompliant)
        #expect(result.finding("trust.expired")?.severity == .error)
    }
}
