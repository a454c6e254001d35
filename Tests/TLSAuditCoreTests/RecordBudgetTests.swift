import Foundation
import Testing
@testable import TLSAuditCore

/// The record budget on hand-made results: bounds in bytes, and applying it twice changes nothing.
@Suite("record budget")
struct RecordBudgetTests {
    @Test("a clamp bounds UTF-8 bytes: one character of 30,000 combining marks is cut too")
    func clampsBytes() {
        let hostile = "a" + String(repeating: "\u{301}", count: 30_000) // one Character, 60,001 bytes
        #expect(hostile.count == 1)
        let clamped = RecordBudget.clamp(hostile)
        #expect(clamped.utf8.count <= RecordBudget.messageBytes, "\(clamped.utf8.count) bytes")
        #expect(clamped.hasSuffix("more bytes]"))
        #expect(RecordBudget.clamp("short") == "short")
        let finding = Finding(.trustExpired, .error, "x " + hostile)
        #expect(finding.message.utf8.count <= RecordBudget.messageBytes)
    }

    static func result(findings: Int, presented: Int, longMessages: Bool) -> AddressScanResult {
        let certificate = TrustEvaluatorTests.certificate("c", issuer: "c", ca: true)
        let message = longMessages ? String(repeating: "m", count: 3_000) : "m"
        let chain = ChainReport(presented: Array(repeating: certificate, count: presented),
                                path: [PathElement(certificate: certificate, source: .presented, presentedIndex: presented - 1)],
                                anchored: false, trustStore: "system",
                                issues: (0..<60).map { PathBuildingIssue(kind: .other, depth: $0, code: 1, detail: message) })
        return AddressScanResult(address: "127.0.0.1", family: "ipv4", port: 443, status: .failed, startedAt: Date(timeIntervalSince1970: 0),
                                 durationMs: 1, handshake: nil, error: ProbeFailure(.handshakeFailed, message), chain: chain,
                                 findings: (0..<findings).map { Finding($0 % 3 == 0 ? .trustExpired : .chainRootSent, $0 % 3 == 0 ? .error : .info,
                                                                        depth: $0, message) },
                                 ats: PolicyVerdict(policy: .atsRuntime, compliant: false, rules: [:], failedRules: []))
    }

    @Test("applying the budget twice gives what applying it once gives", arguments: [(10, 3, false), (100, 40, false), (100, 40, true)])
    func idempotent(findings: Int, presented: Int, long: Bool) {
        let once = Self.result(findings: findings, presented: presented, longMessages: long).withinBudget()
        #expect(once.withinBudget() == once)
        #expect(once.findings.count <= RecordBudget.findings)
        #expect(RecordBudget.estimatedBytes(once) <= RecordBudget.recordBytes, "\(RecordBudget.estimatedBytes(once))")
        let errorsBefore = Self.result(findings: findings, presented: presented, longMessages: long).findings.filter { $0.severity == .error }.count
        let errorsAfter = once.findings.filter { $0.severity == .error }.count
        #expect(errorsAfter == min(errorsBefore, RecordBudget.findings - 1) || errorsAfter == errorsBefore, "errors are kept first")
    }

    @Test("an excluded '.secret.example.com' does not reach '*.example.com'; an invalid name is never permitted")
    func constraintDetails() {
        let wildcard = TrustEvaluatorTests.certificate("leaf", issuer: "ca", ca: false)
        var leaf = wildcard
        leaf.subjectAlternativeNames = SubjectAlternativeNames(dns: ["*.example.com"])
        let below = NameConstraintChecker(NameConstraints(excludedDNS: [".secret.example.com"]))
        #expect(below.violations(in: leaf).isEmpty)
        let withSelf = NameConstraintChecker(NameConstraints(excludedDNS: ["secret.example.com"]))
        #expect(!withSelf.violations(in: leaf).isEmpty, "the wildcard can stand for secret.example.com")
        var invalid = wildcard
        invalid.subjectAlternativeNames = SubjectAlternativeNames(dns: ["a..example.com"])
        let everything = NameConstraintChecker(NameConstraints(permittedDNS: [""]))
        #expect(!everything.violations(in: invalid).isEmpty)
        // A SAN with a trailing dot is inside no subtree written without one (trustd's suffix match).
        var dotted = wildcard
        dotted.subjectAlternativeNames = SubjectAlternativeNames(dns: ["www.example.com."])
        #expect(!NameConstraintChecker(NameConstraints(permittedDNS: ["example.com"])).violations(in: dotted).isEmpty)
        #expect(NameConstraintChecker(NameConstraints(excludedDNS: ["example.com"])).violations(in: dotted).isEmpty)
        dotted.subjectAlternativeNames = SubjectAlternativeNames(dns: ["www.example.com"])
        #expect(NameConstraintChecker(NameConstraints(permittedDNS: ["example.com"])).violations(in: dotted).isEmpty)
    }
}
