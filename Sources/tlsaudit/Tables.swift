import Foundation
import TLSAuditCore
import TLSAuditOutput
import TLSAuditStore
import TLSAuditSupport

enum StatusTable {
    static func render(_ rows: [TargetStatus], now: Date) -> String {
        guard !rows.isEmpty else { return "no scans stored yet\n" }
        // The GROUP and TAGS columns only where some target has one: a fleet without them reads as before.
        let grouped = rows.contains { $0.group != nil }
        let tagged = rows.contains { !$0.tags.isEmpty }
        let body = rows.map { row -> [String] in
            let verdict: String
            if row.status == .failed {
                verdict = "UNREACHABLE (\(row.failureCategory?.rawValue ?? "failed"), \(row.consecutiveFailures)x)"
            } else if row.compliant {
                verdict = "COMPLIANT"
            } else {
                verdict = "NOT COMPLIANT (" + row.reasons.joined(separator: ",") + ")"
            }
            let expiry = row.earliestExpiry.map { "\(Timestamp.daysLeft(until: $0, at: now))" } ?? "-"
            let cells = [row.target, row.address, TextTable.age(row.lastScanAt, now: now), row.policy.rawValue, verdict, expiry, row.pinState.rawValue]
            return cells + (grouped ? [row.group ?? "-"] : []) + (tagged ? [row.tags.isEmpty ? "-" : row.tags.joined(separator: ",")] : [])
        }
        let compliant = rows.filter { $0.status == .completed && $0.compliant }.count
        let unreachable = rows.filter { $0.status == .failed }.count
        let header = ["TARGET", "ADDRESS", "LAST SCAN", "POLICY", "VERDICT", "EXPIRES (d)", "PIN"]
        return TextTable.render(header: header + (grouped ? ["GROUP"] : []) + (tagged ? ["TAGS"] : []), rows: body)
            + "\n\(rows.count) address(es): \(compliant) compliant, \(rows.count - compliant - unreachable) not compliant, \(unreachable) unreachable\n"
            + appLines(rows)
    }

    /// One line per address judged by an app's rules: what a passing verdict relies on, or why the app does not connect.
    static func appLines(_ rows: [TargetStatus]) -> String {
        let judged = rows.compactMap { row in row.app.map { (row, $0) } }
        guard !judged.isEmpty else { return "" }
        return "\nAs the apps' clients see them:\n" + judged.map { row, app in
            "  \(row.target) \(row.address): app \(app.bundle) \(app.verdictText)\n"
        }.joined()
    }
}

enum HistoryTable {
    /// One row per scan (per run of unchanged scans); a TARGET column (the target's name, or HOST:PORT) when the name given
    /// matched several targets (one host on several ports, say: `history HOST:PORT` picks one).
    static func render(_ entries: [HistoryEntry]) -> String {
        let severalTargets = Set(entries.map(\.target)).count > 1
        let body = entries.map { entry -> [String] in
            let outcome: String
            if entry.status == .failed {
                outcome = "FAILED \(entry.failureCategory?.rawValue ?? "")"
            } else {
                let trustErrors = entry.findings.filter(\.isTrustError).map(\.id)
                outcome = (entry.compliant ? "COMPLIANT"
                    : "NOT COMPLIANT (" + TrustReasons.expand(entry.failedRules, trustErrors: trustErrors).joined(separator: ",") + ")")
                    + (entry.judgedAgainWith.map { " judged again with \($0)" } ?? "")
            }
            let handshake = [entry.protocolVersion?.rawValue, entry.cipher].compactMap { $0 }.joined(separator: " ")
            // A run of unchanged scans: its first and last time, and how many.
            let time = entry.run.map { "\(Timestamp.format(entry.startedAt)) .. \(Timestamp.format($0.lastSeenAt)) (\($0.scans) scans)" }
                ?? Timestamp.format(entry.startedAt)
            let row = [time, entry.address, outcome, handshake.isEmpty ? "-" : handshake,
                       entry.leafFingerprint.map { String($0.prefix(16)) } ?? "-"]
            return severalTargets ? [entry.target] + row : row
        }
        let header = ["TIME", "ADDRESS", "OUTCOME", "HANDSHAKE", "LEAF SHA-256"]
        return TextTable.render(header: severalTargets ? ["TARGET"] + header : header, rows: body)
    }
}
