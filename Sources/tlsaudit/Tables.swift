import Foundation
import TLSAuditCore
import TLSAuditOutput
import TLSAuditStore

enum StatusTable {
    static func render(_ rows: [TargetStatus], now: Date) -> String {
        guard !rows.isEmpty else { return "no scans stored yet\n" }
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
            return [row.target, row.address, TextTable.age(row.lastScanAt, now: now), row.policy.rawValue, verdict, expiry, row.pinState.rawValue]
        }
        let compliant = rows.filter { $0.status == .completed && $0.compliant }.count
        let unreachable = rows.filter { $0.status == .failed }.count
        return TextTable.render(header: ["TARGET", "ADDRESS", "LAST SCAN", "POLICY", "VERDICT", "EXPIRES (d)", "PIN"], rows: body)
            + "\n\(rows.count) address(es): \(compliant) compliant, \(rows.count - compliant - unreachable) not compliant, \(unreachable) unreachable\n"
    }
}

enum HistoryTable {
    /// One row per scan; a TARGET column (the target's name, or HOST:PORT) when the name given
    /// matched several targets (one host on several ports, say: `history HOST:PORT` picks one).
    static func render(_ entries: [HistoryEntry]) -> String {
        let severalTargets = Set(entries.map(\.target)).count > 1
        let body = entries.map { entry -> [String] in
            let outcome: String
            if entry.status == .failed {
                outcome = "FAILED \(entry.failureCategory?.rawValue ?? "")"
            } else {
                let trustErrors = entry.findings.filter(\.isTrustError).map(\.id)
                outcome = entry.compliant ? "COMPLIANT"
                    : "NOT COMPLIANT (" + TrustReasons.expand(entry.failedRules, trustErrors: trustErrors).joined(separator: ",") + ")"
            }
            let handshake = [entry.protocolVersion?.rawValue, entry.cipher].compactMap { $0 }.joined(separator: " ")
            let row = [Timestamp.format(entry.startedAt), entry.address, outcome, handshake.isEmpty ? "-" : handshake,
                       entry.leafFingerprint.map { String($0.prefix(16)) } ?? "-"]
            return severalTargets ? [entry.target] + row : row
        }
        let header = ["TIME", "ADDRESS", "OUTCOME", "HANDSHAKE", "LEAF SHA-256"]
        return TextTable.render(header: severalTargets ? ["TARGET"] + header : header, rows: body)
    }
}
