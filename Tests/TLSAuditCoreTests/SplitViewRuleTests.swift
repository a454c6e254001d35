import Foundation
import Testing
import TLSAuditCore

/// The split-view rule on hand-made vantage states (FleetTests.splitView runs it through two
/// fleet nodes and PostgreSQL).
@Suite("split-view rule")
struct SplitViewRuleTests {
    let time = Date(timeIntervalSince1970: 1_700_000_000)

    func state(_ vantage: String, address: String = "192.0.2.1", leaf: String = "leaf-a", key: String = "key-a",
               failed: Bool = false, compliant: Bool = true, reasons: [FindingID] = []) -> SplitViewRule.Observation {
        SplitViewRule.Observation(target: "api@\(vantage)", address: address, host: "api.example.com", port: 443,
                                  leafFingerprint: leaf, leafSPKI: key, failed: failed, compliant: compliant, reasons: reasons)
    }

    @Test("vantages that see the same leaf, key and verdict agree, whatever addresses their DNS gave")
    func agreement() {
        #expect(SplitViewRule.alert(key: "api", observations: [state("eu"), state("us", address: "198.51.100.7")], at: time) == nil)
    }

    @Test("a different leaf key is critical, a different certificate with the same key a warning, a different verdict alone an error")
    func severity() throws {
        let keys = try #require(SplitViewRule.alert(key: "api", observations: [state("eu"), state("us", leaf: "leaf-b", key: "key-b")], at: time))
        #expect(keys.severity == .critical)
        #expect(keys.kind == .splitView && keys.target == "api")
        #expect(keys.summary.hasPrefix("vantage points see different leaf keys: eu: 192.0.2.1 leaf leaf-a key sha256/key-a compliant; us: "))
        #expect(keys.changes["vantage.us"] == "192.0.2.1 leaf leaf-b key sha256/key-b compliant")
        let renewed = try #require(SplitViewRule.alert(key: "api", observations: [state("eu"), state("us", leaf: "leaf-b")], at: time))
        #expect(renewed.severity == .warning)
        #expect(renewed.summary.hasPrefix("vantage points see different leaf certificates"))
        let verdicts = try #require(SplitViewRule.alert(key: "api", observations: [
            state("eu"), state("us", compliant: false, reasons: ["ats.tls-version", "ats.trust"]),
        ], at: time))
        #expect(verdicts.severity == .error)
        #expect(verdicts.changes["vantage.us"] == "192.0.2.1 leaf leaf-a key sha256/key-a not compliant (ats.tls-version,ats.trust)")
        let unreachable = try #require(SplitViewRule.alert(key: "api", observations: [state("eu"), state("us", failed: true)], at: time))
        #expect(unreachable.severity == .error && unreachable.changes["vantage.us"]?.hasSuffix(" unreachable") == true)
    }

    @Test("the alert's id is the split itself: the same views later or at other addresses give the same id, another split another")
    func identity() throws {
        let first = try #require(SplitViewRule.alert(key: "api", observations: [state("eu"), state("us", key: "key-b")], at: time))
        let later = try #require(SplitViewRule.alert(key: "api", observations: [
            state("eu", address: "192.0.2.9"), state("us", key: "key-b"),
        ], at: time.addingTimeInterval(600)))
        let other = try #require(SplitViewRule.alert(key: "api", observations: [state("eu"), state("us", key: "key-c")], at: time))
        #expect(first.id == later.id)
        #expect(first.id != other.id)
    }
}
