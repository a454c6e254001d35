import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel
import TLSAuditSupport

/// Date-bounded distrust: a lab root entered in a test table makes certificates dated after its
/// cut-off fail and earlier ones pass, by notBefore (Apple, Mozilla) and by the earliest SCT (Chrome).
@Suite("date-bounded distrust")
struct DistrustTests {
    let pki = TestPKI.shared

    /// A table distrusting the lab root for `vendor` after `cutoff`.
    func table(vendor: String, cutoff: Date, datedBy: String) throws -> String {
        let json: [String: Any] = ["version": "lab", "entries": [[
            "vendor": vendor, "operator": "Lab CA", "distrust_after": Timestamp.format(cutoff), "dated_by": datedBy,
            "source": "https://ca.lab.test/announcement",
            "roots": [["subject": pki.root.summary.subject, "spki_sha256": pki.root.summary.spkiSHA256]],
        ]]]
        let file = pki.directory.appendingPathComponent("distrust-\(vendor)-\(UUID().uuidString.prefix(6)).json")
        try JSONSerialization.data(withJSONObject: json).write(to: file)
        return file.path
    }

    func leaf(issued: Date, sctAt: Date? = nil) throws -> LabCertificate {
        var request = LabCertificateRequest.server([TestPKI.hostname], key: .rsa(bits: 2048))
        request.notBefore = issued
        guard let sctAt else { return try pki.intermediate.issue(request) }
        let logs = try [LabCTLog("lab log A", operator: "Lab One"), LabCTLog("lab log B", operator: "Lab Two")]
        return try pki.intermediate.issue(request, embedding: logs.map { log in { log.sct(precertificateEntry: $0, at: sctAt) } })
    }

    func scan(_ leaf: LabCertificate, extra: [String]) throws -> AddressScanResult {
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        return try CLI.scan(port: server.port, extra: extra).report().single
    }

    @Test("by notBefore (Apple's rows under the Apple policy): issued after the cut-off fails with trust.distrusted-after-date naming the vendor, date and announcement; issued before passes")
    func byNotBefore() throws {
        let cutoff = Date().addingTimeInterval(-10 * 86_400)
        let list = try table(vendor: "apple", cutoff: cutoff, datedBy: "not-before")
        let after = try scan(try leaf(issued: Date().addingTimeInterval(-86_400)), extra: ["--distrust-list", list])
        let finding = try #require(after.findings.first { $0.id == .trustDistrustedAfterDate }, "\(after.findings.map(\.id))")
        #expect(finding.severity == .error && finding.message.contains("Apple distrusts") && finding.message.contains("https://ca.lab.test/announcement")
                && finding.message.contains(Timestamp.format(cutoff)), "\(finding.message)")
        #expect(after.ats.compliant == false)
        let before = try scan(try leaf(issued: Date().addingTimeInterval(-20 * 86_400)), extra: ["--distrust-list", list])
        #expect(!before.findings.contains { $0.id == .trustDistrustedAfterDate } && before.ats.compliant, "\(before.findings.map(\.id))")
        // Mozilla's rows do not apply under the Apple policies.
        let mozilla = try table(vendor: "mozilla", cutoff: cutoff, datedBy: "not-before")
        let other = try scan(try leaf(issued: Date().addingTimeInterval(-86_400)), extra: ["--distrust-list", mozilla])
        #expect(!other.findings.contains { $0.id == .trustDistrustedAfterDate }, "\(other.findings.map(\.id))")
    }

    @Test("by the earliest SCT (Chrome's rows, --distrust-vendor chrome): an SCT after the cut-off fails although notBefore is earlier; an earlier SCT passes; verify judges a file the same way")
    func byEarliestSCT() throws {
        let cutoff = Date().addingTimeInterval(-10 * 86_400)
        let list = try table(vendor: "chrome", cutoff: cutoff, datedBy: "earliest-sct")
        let issued = Date().addingTimeInterval(-20 * 86_400)
        let late = try leaf(issued: issued, sctAt: Date().addingTimeInterval(-86_400))
        let lateScan = try scan(late, extra: ["--distrust-list", list, "--distrust-vendor", "chrome"])
        let finding = try #require(lateScan.findings.first { $0.id == .trustDistrustedAfterDate }, "\(lateScan.findings.map(\.id))")
        #expect(finding.message.contains("Chrome distrusts") && finding.message.contains("earliest SCT"), "\(finding.message)")
        let early = try scan(try leaf(issued: issued, sctAt: Date().addingTimeInterval(-15 * 86_400)),
                             extra: ["--distrust-list", list, "--distrust-vendor", "chrome"])
        #expect(!early.findings.contains { $0.id == .trustDistrustedAfterDate }, "\(early.findings.map(\.id))")
        // verify, offline.
        let chain = pki.directory.appendingPathComponent("late-\(UUID().uuidString.prefix(6)).pem").path
        try (late.pem + pki.intermediate.pem).write(toFile: chain, atomically: true, encoding: .utf8)
        let verify = try CLI.run(["verify", "--chain", chain, "--roots", pki.rootFile, "--host", TestPKI.hostname, "--distrust-list", list,
                                  "--distrust-vendor", "chrome"])
        #expect(verify.status != 0 && verify.stdout.contains("trust.distrusted-after-date"), "\(verify.stdout)")
        // The same table from a URL.
        let web = try LabHTTPServer(routes: ["/distrust.json": Array(try Data(contentsOf: URL(fileURLWithPath: list)))])
        defer { web.stop() }
        let fetched = try CLI.run(["verify", "--chain", chain, "--roots", pki.rootFile, "--host", TestPKI.hostname,
                                   "--distrust-list", web.url("/distrust.json"), "--distrust-vendor", "chrome"])
        #expect(fetched.status != 0 && fetched.stdout.contains("trust.distrusted-after-date"), "\(fetched.stdout)\(fetched.stderr)")
        // A broken table is unreadable input: exit 2, naming the file.
        let broken = pki.directory.appendingPathComponent("broken-distrust.json").path
        try "{\"entries\": 7}".write(toFile: broken, atomically: true, encoding: .utf8)
        let refused = try CLI.run(["verify", "--chain", chain, "--roots", pki.rootFile, "--distrust-list", broken])
        #expect(refused.status == 2 && refused.stderr.contains(broken), "\(refused.stderr)")
    }

    @Test("the service's distrust: {list:, vendor:} is checked by check-config: a good table and vendor pass, a broken table or an unknown vendor is refused")
    func serviceSetting() throws {
        let list = try table(vendor: "chrome", cutoff: Date(), datedBy: "earliest-sct")
        func config(_ distrust: String) throws -> String {
            let file = pki.directory.appendingPathComponent("distrust-config-\(UUID().uuidString.prefix(6)).yaml").path
            try "database: \(pki.directory.path)/distrust.sqlite\ndistrust: \(distrust)\ntargets: [a.example]\n".write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }
        let good = try CLI.run(["check-config", try config("{list: \(list), vendor: chrome}")])
        #expect(good.status == 0, "\(good.stdout)\(good.stderr)")
        let broken = pki.directory.appendingPathComponent("broken-service-distrust.json").path
        try "[]".write(toFile: broken, atomically: true, encoding: .utf8)
        let refused = try CLI.run(["check-config", try config("{list: \(broken)}")])
        #expect(refused.status != 0 && (refused.stdout + refused.stderr).contains("not a distrust table"), "\(refused.stdout)\(refused.stderr)")
        let vendor = try CLI.run(["check-config", try config("{vendor: safari}")])
        #expect(vendor.status != 0 && (vendor.stdout + vendor.stderr).contains("safari"), "\(vendor.stdout)\(vendor.stderr)")
    }

    @Test("the shipped table parses, and every row names a vendor, roots with 32-byte SPKI digests, a date and an announcement")
    func shippedTable() throws {
        let table = DistrustTable.shipped
        for entry in table.entries {
            #expect(!entry.roots.isEmpty && entry.source.hasPrefix("https://"), "\(entry.operator)")
            for root in entry.roots { #expect(Data(base64Encoded: root.spkiSHA256)?.count == 32, "\(root.subject)") }
        }
    }
}
