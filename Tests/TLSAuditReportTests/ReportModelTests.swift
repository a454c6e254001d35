import Foundation
import Testing
import TLSAuditCore
@testable import TLSAuditReport

/// The report module on hand-made values: what goes first, which fix is advised, and that
/// server-made strings stay text in every format (the end-to-end report tests, on a database of real
/// handshakes, are in ReportTests).
@Suite("report model and renderers")
struct ReportModelTests {
    @Test("fix first names an address that is not compliant for no rule (its handshake failed after the chain)")
    func fixFirstCatchAll() {
        let address = ComplianceReport.AddressEntry(
            address: "127.0.0.1", status: .notCompliant, policy: .atsRuntime, failedRules: [], trusted: true, trustErrors: [],
            pinState: .none, pinMessage: nil, earliestExpiry: nil, daysLeft: nil, protocolVersion: nil, cipher: nil,
            lastScanAt: Date(), failureCategory: .clientCertificateRequired, failureMessage: "the server requires a client certificate")
        let items = ReportBuilder.fixFirst([.init(target: "mtls", host: "h", port: 443, status: .notCompliant, addresses: [address])], within: 30)
        #expect(items.map(\.category) == ["handshake"])
        #expect(items.first?.problem == "client-certificate-required" && items.first?.fix.contains("client certificate") == true)
    }

    @Test("the advised fix for each trust problem, revocation included; unknown ids are named")
    func trustFixes() {
        #expect(ReportBuilder.trustFix(["trust.incomplete-chain"]) == "send the intermediate certificate with the leaf")
        #expect(ReportBuilder.trustFix(["trust.revoked"]).contains("replace the revoked certificate"))
        #expect(ReportBuilder.trustFix(["revocation.unknown", "trust.revoked"]).contains("staple OCSP"))
        #expect(ReportBuilder.trustFix(["trust.something-new"]) == "fix the chain: trust.something-new")
    }

    @Test("the fix-first list's words come from the finding catalog: every id it names has a short fix there")
    func fixesFromCatalog() {
        for id in ReportBuilder.trustFixOrder + [.trustExpired, .pinMismatch] {
            #expect(FindingCatalog[id]?.fix?.short?.isEmpty == false, "\(id) has no short fix in FindingCatalog")
        }
        #expect(ReportBuilder.trustFix(["trust.hostname-mismatch", "trust.incomplete-chain", "trust.self-signed", "trust.untrusted-root"])
                == "send the intermediate certificate with the leaf; reissue with the host name in subjectAltName; use a certificate from a CA the clients trust")
        let expired = ComplianceReport.AddressEntry(
            address: "127.0.0.1", status: .notCompliant, policy: .atsRuntime, failedRules: [.atsTrust], trusted: false,
            trustErrors: [.trustExpired], pinState: .mismatch, pinMessage: nil, earliestExpiry: nil, daysLeft: -3,
            protocolVersion: nil, cipher: nil, lastScanAt: Date(), failureCategory: nil, failureMessage: nil)
        let items = ReportBuilder.fixFirst([.init(target: "t", host: "h", port: 443, status: .notCompliant, addresses: [expired])], within: 30)
        #expect(items.map(\.fix) == ["renew the expired certificate and install it with its intermediate",
                                     "find out why the key changed (an unplanned reissue, or interception); update the pins only for a change you made"])
    }

    @Test("server-made strings cannot escape their format: CSV formulas, Markdown markup, terminal escapes")
    func neutralising() {
        #expect(CSVReport.field("=\u{301}1+1", numeric: false).utf8.starts(with: "\"'=".utf8))
        #expect("abc\u{202E}fed".withoutControlCharacters == "abc\u{FFFD}fed")
        #expect(HTMLReport.escape("x\u{2066}y") == "x\u{FFFD}y")
        #expect(CSVReport.field("=HYPERLINK(\"x\")", numeric: false) == "\"'=HYPERLINK(\"\"x\"\")\"")
        #expect(CSVReport.field("-3", numeric: true) == "-3")
        #expect(CSVReport.field("@SUM(A1)", numeric: false) == "\"'@SUM(A1)\"")
        #expect(CSVReport.field("a,b", numeric: false) == "\"a,b\"")
        #expect(MarkdownReport.escape("<b>|*x*") == "&lt;b&gt;\\|\\*x\\*")
        #expect("red\u{1B}[31m\nline".withoutControlCharacters == "red\u{FFFD}[31m\u{FFFD}line")
        #expect(HTMLReport.escape("<a href='x'>\"&") == "&lt;a href=&#39;x&#39;&gt;&quot;&amp;")
    }
}
