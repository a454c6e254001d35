public import Foundation
import TLSAuditSupport

/// Apple's Certificate Transparency policy (support.apple.com/103214; docs/apple-rules.md in our
/// words): each SCT judged against the log list at the time of check, then the count rules.
public enum AppleCTPolicy {
    /// Apple requires CT for publicly trusted certificates issued from this day.
    public static let enforcedFrom = Date(timeIntervalSince1970: 1_539_648_000) // 2018-10-16T00:00:00Z: trustd requires CT of leaves with notBefore from then on ("after October 15, 2018")
    /// Certificates issued from this day follow the table with per-operator caps; earlier ones the month table.
    public static let operatorCapsFrom = Date(timeIntervalSince1970: 1_618_963_200) // 2021-04-21T00:00:00Z

    /// Whether the policy applies to a chain, and why not when it does not.
    public enum Applicability: Sendable {
        case required
        case notRequired(String)
    }

    /// Judges `scts` for `leaf` at `time` against `logs`. The report is complete whether or not the
    /// policy applies (`applicability`): `satisfied` still says whether the SCTs would meet it.
    public static func evaluate(_ scts: [SignedCertificateTimestamp], leaf: CertificateSummary, logs: CTLogList, at time: Date,
                                applicability: Applicability) -> CertificateTransparencyReport {
        let entries = scts.map { judge($0, logs: logs, at: time) }
        var (satisfied, reason) = countRules(entries, leaf: leaf, logs: logs, at: time)
        var listOutdated: Bool?
        if !satisfied, let provisional = countingLogsNewerThanList(entries, leaf: leaf, logs: logs, at: time) {
            (satisfied, reason, listOutdated) = (true, provisional, true)
        }
        let policy: CertificateTransparencyReport.Policy
        switch applicability {
        case .required: policy = .init(required: true, satisfied: satisfied, reason: reason, listOutdated: listOutdated)
        case .notRequired(let why): policy = .init(required: false, satisfied: satisfied, reason: "\(why); the SCTs \(satisfied ? "would meet" : "would not meet") it: \(reason)",
                                                   listOutdated: listOutdated)
        }
        return CertificateTransparencyReport(scts: entries, policy: policy, logList: logs.source)
    }

    /// One SCT's status at `time`: its signature as observed, then the log's approval and the SCT's date.
    public static func judge(_ sct: SignedCertificateTimestamp, logs: CTLogList, at time: Date) -> CertificateTransparencyReport.Entry {
        let log = logs.log(id: sct.logID)
        var status: CertificateTransparencyReport.Entry.Status
        switch sct.signature {
        case .unknownLog: status = .unknownLog // Unknown to the list that checked it: its signature was never verified.
        case .issuerUnknown: status = .issuerUnknown
        case .invalid: status = .invalidSignature
        case .valid:
            if let log {
                if sct.timestamp > time { status = .futureTimestamp }
                else if log.currentlyApproved(at: time) || log.onceApproved(forSCTAt: sct.timestamp) { status = .valid }
                else { status = .logNotApprovedAtTime }
            } else {
                status = .unknownLog
            }
        }
        // A log the list does not know, whose SCT postdates the list: a log added since, not a failure.
        if status == .unknownLog, log == nil, let published = logs.publishedAt, sct.timestamp > published, sct.timestamp <= time {
            status = .logNewerThanList
        }
        return .init(logID: sct.logID, log: log?.description, operator: log?.operatorName, origin: sct.origin,
                     timestamp: sct.timestamp, status: status, signature: sct.signature, timestampMs: sct.timestampMs)
    }

    /// The policy's answer when the SCTs from logs newer than the list are counted as from approved,
    /// static-ct-api logs of operators of their own (what they most likely are): the reason, with
    /// the list to update, when that meets the policy; nil when it still does not, or there are none.
    static func countingLogsNewerThanList(_ entries: [CertificateTransparencyReport.Entry], leaf: CertificateSummary, logs: CTLogList,
                                          at time: Date) -> String? {
        let newer = entries.filter { $0.status == .logNewerThanList }
        guard !newer.isEmpty else { return nil }
        var assumed = logs.logs
        for entry in newer where !assumed.contains(where: { $0.id == entry.logID }) {
            assumed.append(CTLogList.Log(id: entry.logID, key: [], description: entry.logID, operatorName: "unlisted operator \(entry.logID)",
                                         state: .usable, stateSince: .distantPast, tiled: true))
        }
        let provisional = CTLogList(source: logs.source, logs: assumed)
        let counted = entries.map { entry -> CertificateTransparencyReport.Entry in
            var copy = entry
            if copy.status == .logNewerThanList { copy.status = .valid; copy.operator = "unlisted operator \(entry.logID)" }
            return copy
        }
        let (satisfied, reason) = countRules(counted, leaf: leaf, logs: provisional, at: time)
        guard satisfied else { return nil }
        let published = logs.publishedAt.map { Timestamp.formatDay($0) } ?? "its publication"
        return "met if the \(newer.count) SCT\(newer.count == 1 ? "" : "s") from log\(newer.count == 1 ? "" : "s") newer than the log list are approved: \(reason); "
            + "the log list in force (\(logs.source), published \(published)) is older than those SCTs: update it (--ct-log-list, ct: {log_list:})"
    }

    /// The certificate's lifetime in days as Apple counts it: notBefore through notAfter inclusive,
    /// any part of a further 86,400 seconds counting as one more day.
    public static func lifetimeDays(_ leaf: CertificateSummary) -> Int {
        let seconds = leaf.notAfter.timeIntervalSince(leaf.notBefore) + 1
        return max(0, Int((seconds / 86_400).rounded(.up)))
    }

    /// The embedded requirement: SCTs from distinct logs, and how many of one operator count (nil: no cap).
    public static func embeddedRequirement(_ leaf: CertificateSummary) -> (count: Int, perOperator: Int?, lifetime: String) {
        if leaf.notBefore >= operatorCapsFrom {
            let days = lifetimeDays(leaf)
            return days <= 180 ? (2, 1, "\(days)-day certificate") : (3, 2, "\(days)-day certificate")
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        func months(_ count: Int) -> Date { calendar.date(byAdding: .month, value: count, to: leaf.notBefore) ?? .distantFuture }
        let needed = leaf.notAfter < months(15) ? 2 : leaf.notAfter < months(27) ? 3 : leaf.notAfter < months(39) ? 4 : 5
        return (needed, nil, "\(lifetimeDays(leaf))-day certificate issued before 2021-04-21")
    }

    /// Apple's two ways to comply, over SCTs whose status is `valid`.
    static func countRules(_ entries: [CertificateTransparencyReport.Entry], leaf: CertificateSummary, logs: CTLogList,
                           at time: Date) -> (Bool, String) {
        let valid = entries.filter { $0.status == .valid }
        func distinctLogs(_ list: [CertificateTransparencyReport.Entry]) -> [CertificateTransparencyReport.Entry] {
            var seen = Set<String>()
            return list.filter { seen.insert($0.logID).inserted }
        }
        let current = distinctLogs(valid.filter { logs.log(id: $0.logID)?.currentlyApproved(at: time) == true })
        let rfc6962 = valid.contains { logs.log(id: $0.logID)?.tiled == false }

        // (a) At least two SCTs from currently approved logs, one of them via the TLS extension or OCSP.
        let delivered = current.filter { $0.origin != .embedded }
        let viaHandshake = current.count >= 2 && !delivered.isEmpty

        // (b) Embedded: one from a currently approved log, and the table's count from once or currently
        // approved logs, distinct, with at most `perOperator` of one operator counted.
        let requirement = embeddedRequirement(leaf)
        let embedded = distinctLogs(valid.filter { $0.origin == .embedded })
        var perOperator: [String: Int] = [:]
        let counted = embedded.filter { entry in
            guard let cap = requirement.perOperator else { return true }
            let name = entry.operator ?? entry.logID
            perOperator[name, default: 0] += 1
            return perOperator[name]! <= cap
        }
        let embeddedOK = counted.count >= requirement.count && embedded.contains { entry in current.contains { $0.logID == entry.logID } }

        let cap = requirement.perOperator.map { ", at most \($0) per operator" } ?? ""
        let notCounted = entries.filter { $0.status != .valid }
        var rejected = ""
        if !notCounted.isEmpty {
            let byStatus = Dictionary(grouping: notCounted, by: \.status.rawValue).map { "\($0.value.count) \($0.key)" }.sorted()
            rejected = "; not counted: \(byStatus.joined(separator: ", "))"
        }
        if !rfc6962, viaHandshake || embeddedOK {
            return (false, "no valid SCT comes from an RFC 6962 log (Apple requires at least one)\(rejected)")
        }
        if embeddedOK {
            return (true, "\(counted.count) embedded SCTs from distinct approved logs count (\(requirement.count) needed for a \(requirement.lifetime)\(cap))\(rejected)")
        }
        if viaHandshake {
            return (true, "\(current.count) SCTs from currently approved logs, \(delivered.count) of them over the TLS extension or OCSP\(rejected)")
        }
        return (false, "a \(requirement.lifetime) needs \(requirement.count) embedded SCTs from distinct approved logs\(cap), one of them currently approved (\(counted.count) count), or 2 SCTs from currently approved logs with one over the TLS extension or OCSP (\(current.count) such SCTs, \(delivered.count) delivered)\(rejected)")
    }
}
