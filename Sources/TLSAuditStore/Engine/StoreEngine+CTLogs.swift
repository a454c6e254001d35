import Foundation

/// Where the CT follower stands in each log (`ct_log`), one row a log.
extension StoreEngine {
    func ctLogStates() throws -> [CTLogState] {
        try database.read(doing: "reading the CT logs' positions", snapshot: false) { sql in
            // The lease as time left on the database's clock, then on this one's.
            let now = Date()
            return try sql.rows("""
                SELECT log_id, position, problem, updated_at, owner, lease_until - \(sql.dialect.clock(now)) FROM ct_log ORDER BY log_id
                """ as SQLFragment) { row in
                var state = CTLogState(logID: row.text(0) ?? "", position: row.text(1) ?? "", problem: row.text(2),
                                       updatedAt: Date(timeIntervalSince1970: row.double(3) ?? 0))
                state.owner = row.text(4)
                state.leaseUntil = row.double(5).map { now.addingTimeInterval($0) }
                return state
            }
        }
    }

    func saveCTLogState(_ state: CTLogState) throws {
        try database.write(doing: "storing a CT log's position") { sql in
            try sql.execute("""
                INSERT INTO ct_log (log_id, position, problem, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (log_id) DO UPDATE SET position = excluded.position, problem = excluded.problem, updated_at = excluded.updated_at
                """, [.text(state.logID), .text(state.position), .of(state.problem), .time(state.updatedAt)])
        }
    }

    func claimCTLog(_ logID: String, owner: String, lease: Double) throws -> Int64? {
        try database.write(doing: "claiming the CT log \(logID)") { sql in
            let now = Date()
            let claim: SQLFragment = """
                INSERT INTO ct_log (log_id, position, problem, updated_at, owner, lease_until, epoch)
                VALUES (\(.text(logID)), '', NULL, \(.time(now)), \(.text(owner)), \(sql.dialect.clock(now + lease)), 1)
                ON CONFLICT (log_id) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until,
                    epoch = CASE WHEN ct_log.owner = excluded.owner AND ct_log.lease_until >= \(sql.dialect.clock(now))
                                 THEN ct_log.epoch ELSE ct_log.epoch + 1 END
                WHERE ct_log.owner IS NULL OR ct_log.owner = excluded.owner OR ct_log.lease_until < \(sql.dialect.clock(now))
                RETURNING epoch
                """
            return try sql.first(claim) { $0.int(0) ?? 0 }
        }
    }

    func saveCTLogState(_ state: CTLogState, claim: (owner: String, epoch: Int64)) throws -> Bool {
        try database.write(doing: "storing a CT log's position") { sql in
            try sql.execute("""
                UPDATE ct_log SET position = \(.text(state.position)), problem = \(.of(state.problem)), updated_at = \(.time(state.updatedAt))
                WHERE log_id = \(.text(state.logID)) AND owner = \(.text(claim.owner)) AND epoch = \(.int(claim.epoch))
                  AND lease_until >= \(sql.dialect.clock(Date()))
                """ as SQLFragment) > 0
        }
    }

    func recordCTSighting(_ sighting: CTSighting) throws {
        try database.write(doing: "recording a CT sighting") { sql in
            try sql.execute("""
                INSERT INTO ct_sighting (id, seen_at, log, entry_index, precertificate, host, target, judged_by, verdict, serial, issuer,
                                         spki, not_before, not_after)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING
                """, [.text(sighting.id), .time(sighting.seenAt), .text(sighting.log), .int(Int64(clamping: sighting.index)),
                      .int(sighting.precertificate ? 1 : 0), .text(sighting.host), .text(sighting.target), .text(sighting.judgedBy),
                      .text(sighting.verdict.rawValue), .text(sighting.serial), .text(sighting.issuer), .text(sighting.spki),
                      .time(sighting.notBefore), .time(sighting.notAfter)])
        }
    }

    func ctSightings(validFrom since: Date?, limit: Int) throws -> [CTSighting] {
        try database.read(doing: "reading the CT sightings", snapshot: false) { sql in
            try sql.rows("""
                SELECT id, seen_at, log, entry_index, precertificate, host, target, judged_by, verdict, serial, issuer, spki, not_before, not_after
                FROM ct_sighting WHERE not_before >= ? ORDER BY not_before DESC, id LIMIT ?
                """, [.time(since ?? Date(timeIntervalSince1970: 0)), .int(Int64(max(0, limit)))]) { row in
                CTSighting(id: row.text(0) ?? "", seenAt: Date(timeIntervalSince1970: row.double(1) ?? 0), log: row.text(2) ?? "",
                           index: UInt64(max(0, row.int(3) ?? 0)), precertificate: row.int(4) == 1, host: row.text(5) ?? "",
                           target: row.text(6) ?? "", judgedBy: row.text(7) ?? "",
                           verdict: CTSighting.Verdict(rawValue: row.text(8) ?? "") ?? .seen, serial: row.text(9) ?? "",
                           issuer: row.text(10) ?? "", spki: row.text(11) ?? "",
                           notBefore: Date(timeIntervalSince1970: row.double(12) ?? 0), notAfter: Date(timeIntervalSince1970: row.double(13) ?? 0))
            }
        }
    }
}
