import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditOutput
import TLSAuditProbe
import TLSAuditReport
import TLSAuditServiceLab
import TLSAuditSQLite
import TLSAuditStore
import TLSAuditSupport

/// An opt-in check written outside Sources, as a newcomer would write one (docs/architecture.md,
/// "An opt-in check"): does the address still accept a ClientHello that offers TLS 1.2 at most?
struct TLS12StillAcceptedCheck: ReportingCheck {
    static let accepted: FindingID = "check.tls12-accepted"

    struct Report: Encodable {
        var accepted: Bool
        var cipher: String?
        var refusal: String?
    }

    var name: OptionalCheck { OptionalCheck(rawValue: "tls12-still") }
    var summary: String { "a handshake offering TLS 1.2 at most; 1 connection" }

    func check(_ context: AddressCheckContext, probed: ProbedAddress) -> (report: Report?, findings: [Finding])? {
        switch context.handshake(maxVersion: .tls1_2) {
        case .success(let observation):
            (Report(accepted: true, cipher: observation.cipher.iana),
             [Finding(Self.accepted, .warning, "The server still accepts TLS 1.2 (\(observation.cipher.iana)).")])
        case .failure(let failure):
            (Report(accepted: false, refusal: failure.description), [])
        }
    }
}

/// The opt-in check seam, end to end: a check of the test's own, handed to the scanner beside
/// the shipped ones, from real loopback handshakes to the scan JSON, the store, the history and a
/// report.
@Suite("A check of one's own")
struct OptInCheckTests {
    let lab = ServiceLab.shared
    let check = TLS12StillAcceptedCheck()

    func server(minVersion: TLSVersion? = nil) throws -> LabTLSServer {
        try LabTLSServer(LabServerConfiguration(chain: [try lab.intermediate.issue(.server([ServiceLab.hostname], key: .ec(curve: "P-256"))),
                                                        lab.intermediate], minVersion: minVersion))
    }

    func target(_ name: String, _ server: LabTLSServer, checks: Set<OptionalCheck>) -> ScanTarget {
        var target = ScanTarget(original: name, host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname,
                                connectTo: [ConnectAddress(host: "127.0.0.1")])
        target.checks = checks
        return target
    }

    @Test("its report and finding come from a real handshake, are judged with the scan's, print within the scan schema, and survive the store, the history and a report")
    func endToEnd() throws {
        let both = try server(), onlyTLS13 = try server(minVersion: .tls1_3)
        defer { both.stop(); onlyTLS13.stop() }
        var options = ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: lab.rootFile))
        options.additionalChecks = [check]
        let scanner = try TLSScanner(options: options, judge: AddressAssessment.judge)
        let name = check.name.rawValue

        // Accepted: the report says so and the finding is among the address's, the verdict untouched.
        let accepting = scanner.scan(target("both", both, checks: [check.name]))
        let address = try #require(accepting.addresses.first)
        let stored = try #require(address.checkReports?[name])
        #expect(stored.report?["accepted"] == .bool(true))
        #expect(stored.report?["cipher"]?.string?.hasPrefix("TLS_ECDHE_ECDSA_") == true)
        #expect(stored.findings.map(\.id) == [TLS12StillAcceptedCheck.accepted])
        #expect(address.findings.contains { $0.id == TLS12StillAcceptedCheck.accepted && $0.severity == .warning })
        #expect(address.ats.compliant, "a check's finding of its own is no rule of the policy: \(address.ats.failedRules)")
        // Refused by a TLS 1.3-only server: the report says why, no finding.
        let refusing = try #require(scanner.scan(target("tls13", onlyTLS13, checks: [check.name])).addresses.first)
        #expect(refusing.checkReports?[name]?.report?["accepted"] == .bool(false))
        #expect(refusing.checkReports?[name]?.report?["refusal"]?.string?.isEmpty == false)
        #expect(!refusing.findings.contains { $0.id == TLS12StillAcceptedCheck.accepted })
        // Not asked for: not run, and the result has no check reports at all (documents stay as they were).
        let unasked = try #require(scanner.scan(target("plain", both, checks: [])).addresses.first)
        #expect(unasked.checkReports == nil)
        // The shipped list does not know it: the configuration and --checks refuse the name.
        #expect(AddressChecks.named(name) == nil && AddressChecks.named("inventory") != nil)
        // Names are what the report schema allows (lowercase letters, digits, hyphens).
        for check in AddressChecks.shipped + [check] {
            #expect(check.name.rawValue.wholeMatch(of: /[a-z0-9-]+/) != nil, "\(check.name)")
        }

        // The scan JSON, against its schema.
        let report = ScanReport(toolVersion: "test", generatedAt: Date(), trustStore: "test", timeoutSeconds: 5,
                                targets: [accepting])
        let json = try JSONDocumentEncoder.tlsaudit.encodeString(report)
        #expect(json.contains("\"check_reports\"") && json.contains("\"tls12-still\""))
        // The text output shows the report beside the shipped checks' (the finding with the rest).
        let text = ScanTextRenderer(colour: false).render(report)
        #expect(text.contains("check tls12-still: {\"accepted\":true,\"cipher\":\"TLS_ECDHE_ECDSA_"))
        #expect(text.contains("check.tls12-accepted"))
        let schema = ServiceLab.packageRoot.appendingPathComponent("docs/scan.schema.json").path
        #expect(try LabJSONSchema.complaint(json, schema: schema) == nil)

        // Stored and read back whole: the result, the history, and judged again.
        let store = try SQLiteScanStore(path: try lab.workspace("opt-in-check").appendingPathComponent("db.sqlite").path,
                                        sha256: Digest.sha256Hex)
        _ = try store.record([StoredScan(target: "both", host: ServiceLab.hostname, port: both.port, sni: ServiceLab.hostname,
                                         result: address)], decide: AlertSettings.decision(nil))
        let id = try #require(try store.status().first?.lastObservationID)
        let loaded = try #require(try store.result(observationID: id))
        #expect(loaded.checkReports == address.checkReports)
        #expect(loaded.findings == address.findings)
        let again = AddressAssessment.rejudge(loaded, hostname: ServiceLab.hostname, policy: .atsRuntime, at: address.startedAt)
        #expect(again.findings.contains { $0.id == TLS12StillAcceptedCheck.accepted })
        #expect(try store.history(target: "both", limit: 5).first?.checkReports == address.checkReports)

        // A report counts it in the address's hygiene.
        let query = ReportBuilder.query(end: Date().addingTimeInterval(60), since: 3_600, policy: nil, targets: nil)
        let compliance = ReportBuilder.build(try ReportData.read(query, from: store, rejudge: AddressAssessment.rejudge))
        let hygiene = try #require(compliance.targets.first?.addresses.first?.hygiene)
        #expect(hygiene.checks == [check.name])
        #expect(hygiene.problems.count == 1 && hygiene.problems[0].hasPrefix("The server still accepts TLS 1.2"))
    }
}
