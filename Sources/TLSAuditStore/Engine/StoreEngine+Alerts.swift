import Foundation
import TLSAuditModel

/// The alert outbox: alerts stored with the scan that raised them, a pending delivery per sink,
/// claimed under a lease (with an epoch that fences off a node paused past it). Due times and
/// leases are on the dialect's clock (`SQLDialect.clock`: PostgreSQL's server clock for a fleet).
extension StoreEngine {
    func pendingDeliveries(dueBy time: Date, sinks: [String], limit: Int) throws -> [PendingDelivery] {
        guard !sinks.isEmpty else { return [] }
        return try database.read(doing: "reading pending alerts", snapshot: false) { sql in
            try due(by: time, sinks: sinks, limit: limit, lock: false, in: sql)
        }
    }

    /// The deliveries `pendingDeliveries` lists, read in the caller's transaction; with `lock`,
    /// locked for the transaction, skipping those another node has locked.
    private func due(by time: Date, sinks: [String], limit: Int, lock: Bool, in sql: any SQLExecutor) throws -> [PendingDelivery] {
        let dialect = sql.dialect
        let due: SQLFragment = """
            SELECT d.sink, d.attempts, a.document FROM alert_delivery d JOIN alert a ON a.id = d.alert_id
            WHERE d.state = 'pending' AND d.next_attempt_at <= \(dialect.clock(time)) AND \(dialect.isIn("d.sink", .texts(sinks)))
            ORDER BY a.created_at, a.id\(raw: dialect.bytewise) LIMIT \(.of(limit))\(raw: lock ? dialect.lockSkippingLocked("d") : "")
            """
        return try sql.rows(due) { row -> PendingDelivery? in
            guard let alert = try StoredValues.decode(Alert.self, row.text(2)) else { return nil }
            return PendingDelivery(alert: alert, sink: row.text(0) ?? "", attempts: Int(row.int(1) ?? 0))
        }.compactMap { $0 }
    }

    func claimDeliveries(dueBy time: Date, sinks: [String], limit: Int, lease: Double) throws -> [PendingDelivery] {
        guard !sinks.isEmpty else { return [] }
        return try database.write(doing: "claiming pending alerts") { sql in
            var claimed = try due(by: time, sinks: sinks, limit: limit, lock: true, in: sql)
            for index in claimed.indices {
                claimed[index].leaseEpoch = try sql.first("""
                    UPDATE alert_delivery SET next_attempt_at = \(sql.dialect.clock(time + lease)), lease_epoch = lease_epoch + 1
                    WHERE alert_id = \(.text(claimed[index].alert.id)) AND sink = \(.text(claimed[index].sink)) RETURNING lease_epoch
                    """ as SQLFragment) {
                    $0.int(0) ?? 0
                } ?? 0
            }
            return claimed
        }
    }

    func releaseDeliveries(_ deliveries: [PendingDelivery], dueAt time: Date) throws {
        guard !deliveries.isEmpty else { return }
        try database.write(doing: "releasing pending alerts") { sql in
            for delivery in deliveries {
                try sql.execute("""
                    UPDATE alert_delivery SET next_attempt_at = \(sql.dialect.clock(time))
                    WHERE alert_id = \(.text(delivery.alert.id)) AND sink = \(.text(delivery.sink)) AND state = 'pending'
                      AND lease_epoch = \(.int(delivery.leaseEpoch))
                    """ as SQLFragment)
            }
        }
    }

    func releaseEveryDelivery(dueAt time: Date) throws {
        try database.write(doing: "releasing pending alerts") { sql in
            try sql.execute("""
                UPDATE alert_delivery SET next_attempt_at = \(sql.dialect.clock(time))
                WHERE state = 'pending' AND next_attempt_at > \(sql.dialect.clock(time))
                """ as SQLFragment)
        }
    }

    /// The claim is the delivery's newest and its lease has not run out.
    func stillHolds(_ delivery: PendingDelivery) throws -> Bool {
        try database.read(doing: "checking an alert delivery's claim", snapshot: false) { sql in
            try sql.exists("""
                SELECT 1 FROM alert_delivery
                WHERE alert_id = \(.text(delivery.alert.id)) AND sink = \(.text(delivery.sink)) AND state = 'pending'
                  AND lease_epoch = \(.int(delivery.leaseEpoch)) AND next_attempt_at > \(sql.dialect.clock(Date()))
                """ as SQLFragment)
        }
    }

    func markDelivered(alertID: String, sink: String, at time: Date, leaseEpoch: Int64?) throws {
        _ = try database.write(doing: "recording a delivery", atomic: false) { sql in
            try sql.execute("""
                UPDATE alert_delivery SET state = 'delivered', delivered_at = ?, attempts = attempts + 1, last_error = NULL
                WHERE alert_id = ? AND sink = ? AND (CAST(? AS BIGINT) IS NULL OR lease_epoch = ?)
                """, [.time(time), .text(alertID), .text(sink), .of(leaseEpoch), .of(leaseEpoch)])
        }
    }

    func markFailed(alertID: String, sink: String, error message: String, retryAt: Date, leaseEpoch: Int64?) throws {
        _ = try database.write(doing: "recording a failed delivery", atomic: false) { sql in
            try sql.execute("""
                UPDATE alert_delivery SET attempts = attempts + 1, last_error = \(.text(message)), next_attempt_at = \(sql.dialect.clock(retryAt))
                WHERE alert_id = \(.text(alertID)) AND sink = \(.text(sink)) AND state = 'pending'
                  AND (CAST(\(.of(leaseEpoch)) AS BIGINT) IS NULL OR lease_epoch = \(.of(leaseEpoch)))
                """ as SQLFragment)
        }
    }

    func alerts(limit: Int) throws -> [StoredAlert] { try alerts(where: "", [], limit: limit) }

    func alerts(of target: String, limit: Int) throws -> [StoredAlert] {
        try alerts(where: "WHERE target = ?", [.text(target)], limit: limit)
    }

    private func alerts(where filter: String, _ values: [SQLValue], limit: Int) throws -> [StoredAlert] {
        try database.read(doing: "reading alerts", snapshot: true) { sql in
            let documents = try sql.rows("SELECT id, document FROM alert \(filter) ORDER BY created_at DESC, id\(sql.dialect.bytewise) LIMIT ?",
                                         values + [.of(limit)]) { $0.text(1) }
            return try documents.compactMap { document -> StoredAlert? in
                guard let alert = try StoredValues.decode(Alert.self, document) else { return nil }
                let deliveries = try sql.rows("""
                    SELECT sink, state, attempts, last_error FROM alert_delivery WHERE alert_id = ? ORDER BY sink\(sql.dialect.bytewise)
                    """, [.text(alert.id)]) { row in
                    StoredAlert.Delivery(sink: row.text(0) ?? "",
                                         state: try StoredValues.known(row.text(1), "delivery state", in: "alert \(alert.id)"),
                                         attempts: Int(row.int(2) ?? 0), lastError: row.text(3))
                }
                return StoredAlert(alert: alert, deliveries: deliveries)
            }
        }
    }

    func recordAlert(_ alert: Alert, sinks: [String]) throws -> Bool {
        try database.write(doing: "storing an alert") { sql in
            try statements.insert(alert, sinks: sinks, observationID: nil, into: sql)
        }
    }
}

extension StoreEngine.Statements {
    /// Stores an alert and its pending deliveries (in the caller's transaction); false when its id was there already.
    func insert(_ alert: Alert, sinks: [String], observationID: Int64?, into sql: any SQLExecutor) throws -> Bool {
        let inserted = try sql.execute(BatchWrites.insertAlerts, rows: [BatchWrites.alertRow(alert, observationID: observationID)])
        guard inserted > 0 else { return false }
        try sql.execute(insertDeliveries, rows: sinks.map { [.text(alert.id), .text($0), sql.dialect.time(alert.createdAt)] })
        return true
    }
}
