import Foundation

/// A value of a row being copied between stores, as SQLite holds it (never a list).
public typealias CopiedValue = SQLValue

/// The tables `store copy` moves, in an order that respects their references, each with the
/// columns that order its rows (a stable order: a copy stopped midway resumes after the rows
/// the destination has).
public enum CopiedTables {
    public static let all: [(name: String, order: String)] = [
        ("certificate", "fingerprint"), ("observation", "id"), ("observation_certificate", "observation_id, role, position"),
        ("verdict", "observation_id, policy"), ("observation_run", "observation_id"), ("run_scan", "observation_id, started_at"),
        ("target_state", "target, address"), ("address_change", "rowid"),
        ("alert", "id"), ("alert_delivery", "alert_id, sink"), ("expiry_alert", "target, address, mark"),
        ("report_run", "name, period_end"), ("revocation_answer", "key"),
    ]
}
