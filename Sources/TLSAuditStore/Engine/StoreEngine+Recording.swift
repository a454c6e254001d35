import Foundation
import TLSAuditModel

extension StoreEngine {
    /// `ScanStore.record`: the batch in one transaction, written in a fixed number of statements
    /// whatever its size (`BatchWrites`); a scan whose content and verdict repeat its address's
    /// current run extends that run instead of storing an observation. A fenced scan whose claim
    /// no longer stands is not stored (`RecordOutcome.leaseLost`). Recording is idempotent: a scan
    /// stored already (its batch sent again after the acknowledgement of its commit was lost, a
    /// spill file replayed after it was stored) changes nothing, and counts as stored.
    func record(_ scans: [StoredScan], decide: AlertDecision) throws -> RecordOutcome {
        guard !scans.isEmpty else { return RecordOutcome(alerts: []) }
        // Encoded before the transaction: the writer's lock is not held while JSON is built.
        let encoded = try scans.map { try ScanRows($0, handshakeJSON: handshakeJSON.json, sha256: sha256) }
        return try database.write(doing: "storing \(scans.count) scan(s)") { sql in
            let keys = zip(scans, encoded).map { AddressKey(target: $0.target, address: $1.result.address) }
            var batch = try BatchWrites(reading: keys, statements: statements, in: sql)
            // Only a scan no newer than what its address has stored can be a copy: looked up one by one,
            // which costs nothing in the usual batch (every scan newer) and a statement for each such scan.
            var fresh: [(scan: StoredScan, rows: ScanRows)] = []
            for (scan, rows) in zip(scans, encoded) {
                if batch.mayHoldAlready(scan, rows), try Self.isStored(scan, rows, in: sql) {
                    batch.place(nothingFor: scan)
                } else {
                    fresh.append((scan, rows))
                }
            }
            var newest: [ScanFence: Double] = [:]
            for (scan, rows) in fresh {
                if let fence = scan.fence { newest[fence] = max(newest[fence] ?? 0, rows.result.startedAt.timeIntervalSince1970) }
            }
            // Without a fleet (no standing fences to ask) every fenced scan is stored as it is.
            let standing = try standingFences.map { newest.isEmpty ? [:] : try $0(newest, sql) }
            var stored: [(scan: StoredScan, rows: ScanRows)] = []
            var lost: [StoredScan] = []
            for (scan, rows) in fresh {
                guard let fence = scan.fence, let standing else {
                    stored.append((scan, rows))
                    continue
                }
                switch standing[fence] ?? .superseded {
                case .current:
                    stored.append((scan, rows))
                case .expired:
                    // Ordered by its time, as a scan without a claim is (not by arrival: another
                    // node may have stored a newer scan of the address since its claim lapsed).
                    var unfenced = scan
                    unfenced.fence = nil
                    unfenced.afterClockStepBack = false
                    stored.append((unfenced, rows))
                case .superseded:
                    lost.append(scan)
                    batch.place(nothingFor: scan)
                }
            }
            var alerts: [Alert] = []
            var aside: [(scan: StoredScan, rows: ScanRows)] = []
            for (scan, rows) in stored {
                if batch.fitsInOrder(scan, rows) {
                    alerts += try batch.add(scan, rows, decide: decide, in: sql)
                } else {
                    aside.append((scan, rows))
                }
            }
            try batch.flush(into: sql)
            // Out of order (a late scan, a fenced scan behind its address's clock, an address whose
            // history has newer scans than any state): written one by one, with the timeline's fix-up.
            for (scan, rows) in aside {
                alerts += try insertOutOfOrder(scan, rows, decide: decide, into: sql)
            }
            try batch.dropRotatedAddresses(of: stored.map(\.scan), in: sql)
            return RecordOutcome(alerts: alerts, leaseLost: lost)
        }
    }

    /// Whether this very scan (its target, address and start time) is stored: as an observation
    /// (a run's first scan) or as a repeat of a run.
    private static func isStored(_ scan: StoredScan, _ rows: ScanRows, in sql: any SQLExecutor) throws -> Bool {
        let values: [SQLValue] = [.text(scan.target), .text(rows.result.address), .double(rows.result.startedAt.timeIntervalSince1970)]
        return try sql.exists("SELECT 1 FROM observation WHERE target = ? AND address = ? AND started_at = ?", values)
            || sql.exists("""
                SELECT 1 FROM run_scan r JOIN observation o ON o.id = r.observation_id
                WHERE o.target = ? AND o.address = ? AND r.started_at = ?
                """, values)
    }

    /// Stores a scan that does not follow its address's current state in time: as its own
    /// observation (never extending a run), placed on the timeline with the fix-up of the scan
    /// after it; it replaces the current state only when newer (a fenced scan always is).
    private func insertOutOfOrder(_ scan: StoredScan, _ rows: ScanRows, decide: AlertDecision,
                                  into sql: any SQLExecutor) throws -> [Alert] {
        let result = rows.result
        let startedAt = result.startedAt.timeIntervalSince1970
        // A scan older than the address's current state (written late: a node paused past its
        // lease, results replayed from a spill file after newer ones) stays in the history only,
        // at its time; one that replaces the state (a fenced scan behind its address's clock)
        // stands after the address's newest scan in the order of observation.
        let state = try sql.first(BatchWrites.currentStates + " WHERE target = ? AND address = ?",
                                  [.text(scan.target), .text(result.address)]) { try BatchWrites.CurrentState($0) }
        let late = ScanRows.isLate(startedAt: startedAt, current: state?.lastScanAt, fenced: scan.ordersByArrival)
        let orderAt = BatchWrites.orderAt(startedAt: startedAt, after: late ? nil : state?.orderAt)
        var writes = BatchWrites(statements: statements)
        let observationID = try writes.reserveID(in: sql, count: 1)
        try writes.addObservation(scan, rows, id: observationID, orderAt: orderAt)
        try writes.flush(into: sql)
        try updateTimeline(target: scan.target, rows: rows, observationID: observationID, orderAt: orderAt, in: sql)
        if late { return [] }
        let previous = try state.map { try memory($0, target: scan.target, address: result.address, in: sql) }
        // No run key: the next scan opens a new run rather than extending one that is not the newest.
        let alerts = try writes.addState(scan, rows, observationID: observationID, runKey: nil, orderAt: orderAt, previous: previous,
                                        decide: decide)
        try writes.flush(into: sql)
        return alerts
    }

    /// A row in the address's timeline when this scan's counted verdict differs from the one in
    /// force at its time. A scan stored after a later one (a CLI scan racing the service, a clock
    /// step) also fixes up the scan that follows it.
    private func updateTimeline(target: String, rows: ScanRows, observationID: Int64, orderAt: Double, in sql: any SQLExecutor) throws {
        let address = rows.result.address
        let time = rows.result.startedAt.timeIntervalSince1970
        let before = try sql.first(statements.timelineBefore, [.text(target), .text(address), .double(time)]) { row in [row.text(0) ?? "", row.text(1) ?? "", row.text(2) ?? ""] }
        if before != rows.timeline {
            try insertChange(target: target, address: address, time: time, order: orderAt, observationID: observationID,
                             state: rows.timeline, into: sql)
        }
        let next = try sql.first(statements.timelineNext, [.text(target), .text(address), .double(time)]) { row -> (id: Int64, time: Double, state: [String]) in
            let id = row.int(0) ?? 0
            let place = "observation \(id)"
            let state = try ScanRows.timeline(
                status: try StoredValues.known(row.text(2), "status", in: place), hasChain: row.bool(3) ?? false,
                compliant: row.int(4) == 1, policy: row.text(5) ?? "", failedRules: try StoredValues.rules(row.text(6)),
                pinState: try StoredValues.known(row.text(7), "pin state", in: place, optional: true))
            return (id, row.double(1) ?? time, state)
        }
        guard let next else { return }
        // By time too: the next scan may be a repeat inside a run, whose first scan has a row of its own.
        let hasRow = try sql.exists("SELECT 1 FROM address_change WHERE observation_id = ? AND started_at = ?",
                                    [.int(next.id), .double(next.time)])
        if next.state == rows.timeline, hasRow {
            try sql.execute("DELETE FROM address_change WHERE observation_id = ? AND started_at = ?", [.int(next.id), .double(next.time)])
        } else if next.state != rows.timeline, !hasRow {
            try insertChange(target: target, address: address, time: next.time, order: next.time, observationID: next.id, state: next.state,
                             into: sql)
        }
    }

    /// One row of an address's timeline; `state` is condition, policy, failed rules (JSON); `order`
    /// where it stands in the order of observation.
    private func insertChange(target: String, address: String, time: Double, order: Double, observationID: Int64, state: [String],
                              into sql: any SQLExecutor) throws {
        try sql.execute(BatchWrites.insertChanges, rows: [[.text(target), .text(address), .double(time), .int(observationID),
                                                     .text(state[0]), .text(state[1]), .text(state[2]), .double(order)]])
    }

    /// What is remembered of a target address: its current state's memory, with its expiry marks.
    private func memory(_ state: BatchWrites.CurrentState, target: String, address: String, in sql: any SQLExecutor) throws -> AddressMemory {
        var memory = state.memory
        memory.expiryMarks = Set(try sql.rows("SELECT mark FROM expiry_alert WHERE target = ? AND address = ?",
                                              [.text(target), .text(address)]) { $0.text(0) ?? "" })
        return memory
    }
}
