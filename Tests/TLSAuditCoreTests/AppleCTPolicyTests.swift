import Foundation
import Testing
import TLSAuditCore
@testable import TLSAuditModel

/// Apple's CT policy table (support.apple.com/103214) at its boundaries, on SCTs whose signatures
/// were checked (the end-to-end tests verify real and lab SCTs): lifetimes, operator caps, log
/// states at the time of check and at the SCT's time, delivery channels.
@Suite("Apple's CT policy")
struct AppleCTPolicyTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000) // 2027-01-15
    static let day: TimeInterval = 86_400

    /// Logs `a`...: operator by the name's first letter group given, usable since long ago unless said.
    static func logs(_ entries: [(id: String, operator: String, state: CTLogList.State, since: Date, tiled: Bool)]) -> CTLogList {
        CTLogList(source: "test", logs: entries.map {
            CTLogList.Log(id: $0.id, key: [1], description: "log \($0.id)", operatorName: $0.operator, state: $0.state,
                          stateSince: $0.since, tiled: $0.tiled)
        })
    }

    static let standard = logs([
        ("a1", "A", .usable, now.addingTimeInterval(-400 * day), false),
        ("a2", "A", .usable, now.addingTimeInterval(-400 * day), false),
        ("a3", "A", .qualified, now.addingTimeInterval(-400 * day), false),
        ("b1", "B", .usable, now.addingTimeInterval(-400 * day), false),
        ("b2", "B", .readonly, now.addingTimeInterval(-10 * day), false),
        ("c1", "C", .usable, now.addingTimeInterval(-400 * day), false),
        ("r1", "R", .retired, now.addingTimeInterval(-30 * day), false),
        ("p1", "P", .pending, now.addingTimeInterval(-400 * day), false),
        ("x1", "X", .rejected, now.addingTimeInterval(-400 * day), false),
        ("late", "L", .usable, now.addingTimeInterval(10 * day), false),
        ("t1", "T", .usable, now.addingTimeInterval(-400 * day), true),
        ("t2", "U", .usable, now.addingTimeInterval(-400 * day), true),
    ])

    /// A leaf issued `issuedDaysAgo` days before now, valid for `days` (Apple's inclusive count).
    static func leaf(days: Int, issuedDaysAgo: Double = 10) -> CertificateSummary {
        var leaf = TrustEvaluatorTests.certificate("host.test", issuer: "root", ca: false)
        leaf.notBefore = now.addingTimeInterval(-issuedDaysAgo * day)
        leaf.notAfter = leaf.notBefore.addingTimeInterval(Double(days) * day - 1)
        return leaf
    }

    static func sct(_ log: String, _ origin: SCTOrigin = .embedded, ago: Double = 10, signature: SCTSignatureCheck = .valid) -> SignedCertificateTimestamp {
        SignedCertificateTimestamp(logID: log, origin: origin, timestampMs: Int64((now.timeIntervalSince1970 - ago * day) * 1000),
                                   signature: signature)
    }

    static func judge(_ scts: [SignedCertificateTimestamp], days: Int = 90, issuedDaysAgo: Double = 10,
                      logs: CTLogList = standard) -> CertificateTransparencyReport {
        AppleCTPolicy.evaluate(scts, leaf: leaf(days: days, issuedDaysAgo: issuedDaysAgo), logs: logs, at: now, applicability: .required)
    }

    @Test("lifetime counts inclusively: 180 days needs 2 SCTs, 181 needs 3; 398 still 3")
    func lifetimeBoundaries() {
        #expect(AppleCTPolicy.lifetimeDays(Self.leaf(days: 180)) == 180)
        #expect(AppleCTPolicy.lifetimeDays(Self.leaf(days: 181)) == 181)
        #expect(Self.judge([Self.sct("a1"), Self.sct("b1")], days: 180).policy.satisfied)
        #expect(!Self.judge([Self.sct("a1"), Self.sct("b1")], days: 181).policy.satisfied)
        #expect(Self.judge([Self.sct("a1"), Self.sct("b1"), Self.sct("c1")], days: 181).policy.satisfied)
        #expect(Self.judge([Self.sct("a1"), Self.sct("b1"), Self.sct("c1")], days: 398).policy.satisfied)
        // One second past 180 days is a 181st day.
        var leaf = Self.leaf(days: 180)
        leaf.notAfter = leaf.notAfter.addingTimeInterval(1)
        #expect(AppleCTPolicy.lifetimeDays(leaf) == 181)
    }

    @Test("operator caps: 1 per operator counts up to 180 days, 2 from 181 to 398")
    func operatorCaps() {
        let sameOperator = Self.judge([Self.sct("a1"), Self.sct("a2")], days: 90)
        #expect(!sameOperator.policy.satisfied, "two logs of one operator count once")
        #expect(sameOperator.policy.reason.contains("at most 1 per operator"))
        #expect(Self.judge([Self.sct("a1"), Self.sct("a2"), Self.sct("b1")], days: 200).policy.satisfied, "2 of A and 1 of B: 3 counted")
        #expect(!Self.judge([Self.sct("a1"), Self.sct("a2"), Self.sct("a3")], days: 200).policy.satisfied, "3 of A: 2 counted")
        #expect(!Self.judge([Self.sct("a1"), Self.sct("a1"), Self.sct("b1")], days: 200).policy.satisfied, "the same log twice counts once")
    }

    @Test("log states at the time of check and at the SCT's time")
    func logStates() {
        // Read-only logs are currently approved; retired ones count for SCTs made before retirement.
        #expect(Self.judge([Self.sct("a1"), Self.sct("b2")]).policy.satisfied)
        #expect(Self.judge([Self.sct("a1"), Self.sct("r1", ago: 40)]).policy.satisfied)
        let afterRetirement = Self.judge([Self.sct("a1"), Self.sct("r1", ago: 20)])
        #expect(afterRetirement.scts[1].status == .logNotApprovedAtTime)
        #expect(!afterRetirement.policy.satisfied)
        // Pending, rejected, and a log usable only from a later date are not approved now.
        for log in ["p1", "x1", "late"] {
            let report = Self.judge([Self.sct("a1"), Self.sct(log)])
            #expect(report.scts[1].status == .logNotApprovedAtTime, "\(log)")
            #expect(!report.policy.satisfied, "\(log)")
        }
        // An embedded policy needs one SCT from a currently approved log: two retired ones are not enough.
        let retiredOnly = Self.logs([("r1", "R", .retired, Self.now.addingTimeInterval(-5 * Self.day), false),
                                     ("r2", "S", .retired, Self.now.addingTimeInterval(-5 * Self.day), false)])
        #expect(!Self.judge([Self.sct("r1", ago: 9), Self.sct("r2", ago: 9)], logs: retiredOnly).policy.satisfied)
    }

    @Test("statuses: unknown log, bad signature, future timestamp never count")
    func statuses() {
        let report = Self.judge([Self.sct("nobody", signature: .unknownLog), Self.sct("a1", signature: .invalid),
                                 Self.sct("b1", ago: -1), Self.sct("c1")])
        #expect(report.scts.map(\.status) == [.unknownLog, .invalidSignature, .futureTimestamp, .valid])
        #expect(!report.policy.satisfied)
        #expect(report.policy.reason.contains("1 future-timestamp") && report.policy.reason.contains("1 invalid-signature"), "\(report.policy.reason)")
    }

    @Test("TLS extension or OCSP: two SCTs from currently approved logs, one delivered in the handshake")
    func delivered() {
        #expect(Self.judge([Self.sct("a1", .tlsExtension), Self.sct("b1", .ocsp)], days: 300).policy.satisfied)
        #expect(Self.judge([Self.sct("a1"), Self.sct("b1", .tlsExtension)], days: 300).policy.satisfied)
        #expect(!Self.judge([Self.sct("a1", .tlsExtension)], days: 90).policy.satisfied, "one SCT is never enough")
        // A retired log is only once approved: it does not count for the handshake route.
        #expect(!Self.judge([Self.sct("a1", .tlsExtension), Self.sct("r1", .ocsp, ago: 40)], days: 300).policy.satisfied)
    }

    @Test("at least one SCT from an RFC 6962 log: tiled logs alone do not satisfy")
    func tiledOnly() {
        let report = Self.judge([Self.sct("t1"), Self.sct("t2")])
        #expect(!report.policy.satisfied)
        #expect(report.policy.reason.contains("RFC 6962"))
        #expect(Self.judge([Self.sct("t1"), Self.sct("b1")]).policy.satisfied)
    }

    @Test("certificates issued before 2021-04-21 follow the month table, without operator caps")
    func olderCertificates() {
        let old = Date(timeIntervalSince1970: 1_600_000_000) // 2020-09-13
        func judge(_ scts: [SignedCertificateTimestamp], months: Int) -> Bool {
            var leaf = Self.leaf(days: 90)
            leaf.notBefore = old
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC")!
            leaf.notAfter = calendar.date(byAdding: .month, value: months, to: old)!.addingTimeInterval(-1)
            let logs = Self.logs(["a1", "a2", "a3", "a4", "a5"].map { ($0, "A", .usable, old.addingTimeInterval(-Self.day), false) })
            return AppleCTPolicy.evaluate(scts.map { SignedCertificateTimestamp(logID: $0.logID, origin: .embedded,
                                                                                 timestampMs: Int64(old.timeIntervalSince1970 * 1000), signature: .valid) },
                                          leaf: leaf, logs: logs, at: old.addingTimeInterval(Self.day), applicability: .required).policy.satisfied
        }
        let five = ["a1", "a2", "a3", "a4", "a5"].map { Self.sct($0) }
        #expect(judge(Array(five.prefix(2)), months: 15), "under 15 months: 2, of one operator")
        #expect(!judge(Array(five.prefix(2)), months: 16))
        #expect(judge(Array(five.prefix(3)), months: 27))
        #expect(!judge(Array(five.prefix(3)), months: 28))
        #expect(judge(Array(five.prefix(4)), months: 39))
        #expect(!judge(Array(five.prefix(4)), months: 40))
        #expect(judge(five, months: 40))
    }

    @Test("the shipped log list parses: every operator's logs, keys, states")
    func shippedList() throws {
        let list = CTLogList.shipped
        #expect(list.logs.count == 181)
        #expect(list.source.contains("53.34"))
        // Its name before parsing (the snapshot's constants) is the name parsing gives.
        #expect(list.source == (try CTLogList.parse(Data(CTLogListSnapshot.json.utf8), source: "tlsaudit's snapshot")).source)
        #expect(list.log(id: "KTxRllTIOWW6qlD8WAfUt2+/WHopctykwwz05UVH9Hg=")?.operatorName == "Google")
        #expect(list.logs.filter { $0.state == .usable }.count == 33)
        #expect(list.logs.contains { $0.tiled })
    }
}
