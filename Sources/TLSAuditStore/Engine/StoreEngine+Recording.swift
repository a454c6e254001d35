import Foundation
import TLSAuditModel

extension StoreEngine {
    /// `ScanStore.record`: the batch in one transaction; a fenced scan whose claim no longer
    /// stands is not stored (`RecordOutcome.leaseLost`).
    func record(_ scans: [StoredScan], decide: AlertDecision) throws -> RecordOutcome {
        guard !scans.isEmpty else { return RecordOutcome(alerts: []) }
        return try database.write(doing: "storing \(scans.count) scan(s)") { sql in
            let fences = Set(scans.compactMap(\.fence))
            let standing = fences.isEmpty ? [] : try standingFences?(fences, sql) ?? fences
            var alerts: [Alert] = []
            var stored: [StoredScan] = []
            var lost: [StoredScan] = []
            for scan in scans {
                if let fence = scan.fence, !standing.contains(fence) {
                    lost.append(scan)
                    continue
                }
                alerts += try insert(scan, decide: decide, into: sql)
                stored.append(scan)
            }
            // A target's current state is the addresses its latest scan saw: drop the others
            // (rotated out of DNS, or the placeholder of an earlier resolution failure).
            // Only rows older than the scan: a late batch does not undo a newer resolution.
            for (target, group) in Dictionary(grouping: stored, by: \.target) {
                let addresses = Set(group.map(\.result.address))
                guard !addresses.contains("-") else { continue }
                let oldest = group.map(\.result.startedAt.timeIntervalSince1970).min() ?? 0
                // A few addresses: a placeholder each (a list bound as one value costs a JSON parse on SQLite).
                let placeholders = Array(repeating: "?", count: addresses.count).joined(separator: ", ")
                try sql.execute("DELETE FROM target_state WHERE target = ? AND last_scan_at < ? AND address NOT IN (\(placeholders))",
                                [.text(target), .double(oldest)] + addresses.sorted().map { .text($0) })
            }
            return RecordOutcome(alerts: alerts, leaseLost: lost)
        }
    }

    /// Stores one scan, places it on its address's timeline, detects transitions against the
    /// remembered state, stores the alerts and their pending deliveries, and updates the state:
    /// all in the caller's transaction.
    private func insert(_ scan: StoredScan, decide: AlertDecision, into sql: any SQLExecutor) throws -> [Alert] {
        let rows = try ScanRows(scan, handshakeJSON: handshakeJSON.json, sha256: sha256)
        let result = rows.result
        let startedAt = result.startedAt.timeIntervalSince1970
        for certificate in rows.certificates {
            // Most scans show certificates already stored: skip encoding those.
            if try sql.exists("SELECT 1 FROM certificate WHERE fingerprint = ?", [.text(certificate.fingerprint)]) { continue }
            try sql.execute("""
                INSERT INTO certificate (fingerprint, der, subject, issuer, not_before, not_after, spki_sha256, summary, first_seen)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fingerprint) DO NOTHING
                """, [.text(certificate.fingerprint), .bytes(certificate.der), .text(certificate.subject), .text(certificate.issuer),
                      .double(certificate.notBefore), .double(certificate.notAfter), .text(certificate.spki),
                      .text(try certificate.summary()), .double(startedAt)])
        }
        let observationID = try sql.first("""
            INSERT INTO observation (target, host, port, sni, address, family, started_at, duration_ms, status,
                failure_category, failure_message, failure_alert, handshake, ats_refusal, trust_store, anchored, path_issues, policy,
                content_hash, revocation, node, vantage, inventory, http_headers, vulnerabilities, enumeration, anchor_in, app)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            RETURNING id
            """, [.text(scan.target), .text(scan.host), .of(scan.port), .of(scan.sni), .text(result.address), .text(result.family),
                  .double(startedAt), .of(result.durationMs), .text(result.status.rawValue),
                  .of(result.error?.category.rawValue), .of(result.error?.message), .of(result.error?.alert),
                  .of(rows.handshake), .of(result.atsClientRefusal), .of(result.chain?.trustStore), .of(rows.anchored),
                  .of(rows.pathIssues), .text(result.ats.policy.rawValue), .text(rows.contentHash), .of(rows.revocation),
                  .of(scan.node), .of(scan.vantage), .of(rows.inventory), .of(rows.headers), .of(rows.vulnerabilities),
                  .of(rows.enumeration), .of(rows.anchorIn), .of(rows.app)]) { $0.int(0) } ?? nil
        guard let observationID else { throw StoreError(.other, "the new observation has no id") }
        for reference in rows.references {
            try sql.execute("""
                INSERT INTO observation_certificate (observation_id, role, position, fingerprint, source) VALUES (?, ?, ?, ?, ?)
                """, [.int(observationID), .text(reference.role), .of(reference.position), .text(reference.fingerprint),
                      .of(reference.source)])
        }
        try sql.execute("""
            INSERT INTO verdict (observation_id, policy, judged_at, compliant, failed_rules, findings, pin)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """, [.int(observationID), .text(result.ats.policy.rawValue), .double(startedAt), .of(result.ats.compliant),
                  .text(rows.failedRules), .text(rows.findings), .of(rows.pin)])
        try updateTimeline(target: scan.target, rows: rows, observationID: observationID, in: sql)

        // A scan older than the address's current state (written late: a node paused past its
        // lease, results replayed from a spill file after newer ones) stays in the history only.
        let current = try sql.first(ScanRows.currentScanTime, [.text(scan.target), .text(result.address)]) { $0.double(0) } ?? nil
        if ScanRows.isLate(startedAt: startedAt, current: current, fenced: scan.fence != nil) {
            return []
        }
        // Change detection against what is remembered of this address; what the scan raises is
        // the caller's decision, the store keeps the facts.
        let previous = try memory(target: scan.target, address: result.address, in: sql)
        let outcome = decide(previous, StoredScan(target: scan.target, host: scan.host, port: scan.port, sni: scan.sni, result: result),
                             observationID)
        let memory = outcome.memory
        for mark in memory.expiryMarks.subtracting(previous?.expiryMarks ?? []) {
            try sql.execute("INSERT INTO expiry_alert (target, address, mark, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                            [.text(scan.target), .text(result.address), .text(mark), .double(startedAt)])
        }
        for (alert, sinks) in outcome.alerts {
            _ = try insert(alert, sinks: sinks, observationID: observationID, into: sql)
        }
        let failed = result.status == .failed
        try sql.execute(ScanRows.upsertTargetState, [
            .text(scan.target), .text(result.address), .text(scan.host), .of(scan.port), .int(observationID),
            .double(startedAt), .text(result.status.rawValue), .text(result.ats.policy.rawValue),
            .of(result.ats.compliant), .text(try StoredValues.json(memory.failedRules)),
            .of(rows.earliestExpiry), .of(memory.leafFingerprint), .of(memory.leafSPKI),
            .of(result.error?.category.rawValue), .of(memory.consecutiveFailures),
            failed ? .null : .double(startedAt), .text((memory.pinState ?? .none).rawValue), .of(result.pin?.message),
            memory.atsCompliant.map { .of($0) } ?? .null, memory.trusted.map { .of($0) } ?? .null,
            .of(memory.unreachableAlerted), .text(rows.tags), .of(rows.app), .of(ScanRows.overridesNewerClock(scan))])
        return outcome.alerts.map(\.alert)
    }

    /// A row in the address's timeline when this scan's counted verdict differs from the one in
    /// force at its time. A scan stored after a later one (a CLI scan racing the service, a clock
    /// step) also fixes up the scan that follows it.
    private func updateTimeline(target: String, rows: ScanRows, observationID: Int64, in sql: any SQLExecutor) throws {
        let address = rows.result.address
        let time = rows.result.startedAt.timeIntervalSince1970
        let before = try sql.first(statements.timelineBefore, [.text(target), .text(address), .double(time)]) { row in [row.text(0) ?? "", row.text(1) ?? "", row.text(2) ?? ""] }
        if before != rows.timeline {
            try insertChange(target: target, address: address, time: time, observationID: observationID, state: rows.timeline, into: sql)
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
        let hasRow = try sql.exists("SELECT 1 FROM address_change WHERE observation_id = ?", [.int(next.id)])
        if next.state == rows.timeline, hasRow {
            try sql.execute("DELETE FROM address_change WHERE observation_id = ?", [.int(next.id)])
        } else if next.state != rows.timeline, !hasRow {
            try insertChange(target: target, address: address, time: next.time, observationID: next.id, state: next.state, into: sql)
        }
    }

    /// One row of an address's timeline; `state` is condition, policy, failed rules (JSON).
    private func insertChange(target: String, address: String, time: Double, observationID: Int64, state: [String],
                              into sql: any SQLExecutor) throws {
        try sql.execute("""
            INSERT INTO address_change (target, address, started_at, observation_id, condition, policy, failed_rules)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """, [.text(target), .text(address), .double(time), .int(observationID), .text(state[0]), .text(state[1]), .text(state[2])])
    }

    /// What is remembered of a target address, or nil before its first scan.
    private func memory(target: String, address: String, in sql: any SQLExecutor) throws -> AddressMemory? {
        let place = "the current state of \(target) \(address)"
        // The columns it needs, not `*`: every column of a fetched row is copied.
        guard var memory = try sql.first("""
            SELECT pin_state, leaf_fingerprint, leaf_spki, ats_compliant, failed_rules, trusted, consecutive_failures,
                unreachable_alerted
            FROM target_state WHERE target = ? AND address = ?
            """, [.text(target), .text(address)], { row in
            AddressMemory(
                pinState: try StoredValues.known(row.text(0), "pin state", in: place, optional: true),
                leafFingerprint: row.text(1), leafSPKI: row.text(2), atsCompliant: row.int(3).map { $0 == 1 },
                failedRules: try StoredValues.rules(row.text(4)), trusted: row.int(5).map { $0 == 1 },
                consecutiveFailures: Int(row.int(6) ?? 0), unreachableAlerted: row.int(7) == 1, expiryMarks: [])
        }) else { return nil }
        memory.expiryMarks = Set(try sql.rows("SELECT mark FROM expiry_alert WHERE target = ? AND address = ?",
                                              [.text(target), .text(address)]) { $0.text(0) ?? "" })
        return memory
    }
}
