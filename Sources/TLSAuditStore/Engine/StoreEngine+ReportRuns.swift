import Foundation
import TLSAuditModel

/// Scheduled report runs: which periods were written, and a claim per run (lease and epoch) so
/// that in a fleet exactly one node writes each report and one that dies hands it over.
extension StoreEngine {
    func lastReportRun(name: String) throws -> Date? {
        try database.read(doing: "reading the scheduled reports", snapshot: false) { sql in
            try sql.first("SELECT max(period_end) FROM report_run WHERE name = ?", [.text(name)]) { $0.double(0) } ?? nil
        }.map(Date.init(timeIntervalSince1970:))
    }

    /// A claim row per run: taken when free, when its lease ended, or when the owner asks again.
    func claimReportRun(name: String, periodEnd: Date, owner: String, lease: Double) throws -> ReportRunClaim {
        try database.write(doing: "claiming the scheduled report \(name)") { sql in
            let end = SQLValue.time(periodEnd)
            if try sql.exists("SELECT 1 FROM report_run WHERE name = ? AND period_end = ?", [.text(name), end]) {
                return .written
            }
            let now = Date()
            let claim: SQLFragment = """
                INSERT INTO report_claim (name, period_end, owner, lease_until, epoch)
                VALUES (\(.text(name)), \(end), \(.text(owner)), \(sql.dialect.clock(now + lease)), 1)
                ON CONFLICT (name, period_end) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until,
                    epoch = report_claim.epoch + 1
                WHERE report_claim.lease_until < \(sql.dialect.clock(now)) OR report_claim.owner = excluded.owner
                RETURNING epoch
                """
            if let epoch = try sql.first(claim, { $0.int(0) ?? 0 }) {
                return .claimed(epoch: epoch)
            }
            let holder = try sql.first("SELECT owner FROM report_claim WHERE name = ? AND period_end = ?", [.text(name), end]) {
                $0.text(0)
            } ?? nil
            return .heldByAnother(holder ?? "?")
        }
    }

    func holdsReportRun(name: String, periodEnd: Date, owner: String, epoch: Int64) throws -> Bool {
        try database.read(doing: "checking the claim of the scheduled report \(name)", snapshot: false) { sql in
            try sql.exists("""
                SELECT 1 FROM report_claim
                WHERE name = \(.text(name)) AND period_end = \(.time(periodEnd)) AND owner = \(.text(owner)) AND epoch = \(.int(epoch))
                  AND lease_until >= \(sql.dialect.clock(Date()))
                """ as SQLFragment)
        }
    }

    func recordReportRun(name: String, periodEnd: Date, files: [String], delivery: [String: ReportDelivery],
                         claim: (owner: String, epoch: Int64)?) throws -> Bool {
        try database.write(doing: "recording the scheduled report \(name)", atomic: false) { sql in
            let end = SQLValue.time(periodEnd)
            return try sql.execute("""
                INSERT INTO report_run (name, period_end, written_at, files, delivery)
                SELECT ?, ?, ?, ?, ?
                WHERE CAST(? AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM report_claim
                    WHERE name = ? AND period_end = ? AND owner = ? AND epoch = ?)
                ON CONFLICT (name, period_end) DO UPDATE SET written_at = excluded.written_at, files = excluded.files,
                    delivery = excluded.delivery
                """, [.text(name), end, .time(Date()), .text(try StoredValues.json(files)), .text(try StoredValues.json(delivery)),
                      .of(claim?.owner), .text(name), end, .of(claim?.owner), .of(claim?.epoch)]) > 0
        }
    }
}

/// Revocation answers (OCSP responses and CRLs as fetched), kept until they expire.
extension StoreEngine {
    func revocationAnswer(for key: String, at time: Date) throws -> (body: [UInt8], expires: Date)? {
        try database.read(doing: "reading a revocation answer", snapshot: false) { sql in
            try sql.first("SELECT body, expires_at FROM revocation_answer WHERE key = ? AND expires_at > ?", [.text(key), .time(time)]) {
                row -> (body: [UInt8], expires: Date)? in
                guard let body = row.bytes(0), let expires = row.double(1) else { return nil }
                return (body, Date(timeIntervalSince1970: expires))
            } ?? nil
        }
    }

    func saveRevocationAnswer(_ body: [UInt8], for key: String, expires: Date) throws {
        try database.write(doing: "storing a revocation answer") { sql in
            try sql.execute("""
                INSERT INTO revocation_answer (key, body, expires_at) VALUES (?, ?, ?)
                ON CONFLICT (key) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at
                """, [.text(key), .bytes(body), .time(expires)])
            // Expired answers are never read again: drop them as new ones arrive.
            try sql.execute("DELETE FROM revocation_answer WHERE expires_at <= ?", [.time(Date())])
        }
    }
}
