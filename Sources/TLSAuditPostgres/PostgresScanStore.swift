public import Foundation
public import TLSAuditModel
public import TLSAuditStore

/// The store on PostgreSQL, for fleets of scanners: the same `ScanStore` as SQLite (it passes the
/// same conformance suite), the same named migrations, the same JSON documents as text. Every
/// statement runs with bind parameters and under `statement_timeout`; connections come from a
/// small pool and are opened again after the server restarts.
public final class PostgresScanStore: ScanStore, Sendable {
    public let settings: PostgresSettings
    public var displayLocation: String { settings.display }
    let pool: PostgresPool
    /// The package's one SHA-256 (`Digest.sha256Hex`), for observation content hashes.
    private let sha256: SHA256Hex
    private let handshakeJSON = HandshakeJSONCache()

    /// Connects to the database `settings` names and brings its schema up to date (once for the
    /// whole fleet: an advisory lock); a schema from a newer tlsaudit is refused.
    public init(_ settings: PostgresSettings, sha256: @escaping SHA256Hex) throws {
        self.settings = settings
        self.sha256 = sha256
        pool = PostgresPool(settings)
        try pool.withConnection { try PostgresMigrations.migrate($0) }
    }

    /// `init` from a `postgres://` URL.
    public convenience init(url: String, sha256: @escaping SHA256Hex) throws {
        try self.init(try PostgresSettings.parse(url: url), sha256: sha256)
    }

    public func appliedMigrations() throws -> [String] {
        try pool.withConnection { try PostgresMigrations.appliedMigrations($0) }
    }

    /// A database server does not vanish under its path as a file does: nothing to check.
    public func checkFileIdentity() throws {}

    // MARK: - Writing

    public func record(_ scans: [StoredScan], decide: AlertDecision) throws -> RecordOutcome {
        guard !scans.isEmpty else { return RecordOutcome(alerts: []) }
        return try pool.withConnection { connection in
            try connection.transaction {
                var alerts: [Alert] = []
                var stored: [StoredScan] = []
                var lost: [StoredScan] = []
                let held = try Self.heldFences(Set(scans.compactMap(\.fence)), on: connection)
                for scan in scans {
                    if let fence = scan.fence, !held.contains(fence) {
                        lost.append(scan)
                        continue
                    }
                    alerts += try insert(scan, decide: decide, on: connection)
                    stored.append(scan)
                }
                // A target's current state is the addresses its latest scan saw: drop the others
                // (only rows older than the scan: a late batch does not undo a newer resolution).
                for (target, group) in Dictionary(grouping: stored, by: \.target) {
                    let addresses = Set(group.map(\.result.address)).sorted()
                    guard !addresses.contains("-") else { continue }
                    let placeholders = addresses.indices.map { "$\($0 + 3)" }.joined(separator: ", ")
                    let oldest = group.map(\.result.startedAt.timeIntervalSince1970).min() ?? 0
                    try connection.execute("DELETE FROM target_state WHERE target = $1 AND last_scan_at < $2 AND address NOT IN (\(placeholders))",
                                           [.text(target), .double(oldest)] + addresses.map { .text($0) })
                }
                return RecordOutcome(alerts: alerts, leaseLost: lost)
            }
        }
    }

    /// The fences whose claim still stands: the work row's newest claim, or the claim whose
    /// completion was written (its result may reach the store after that). The rows are locked
    /// (`FOR SHARE`, in the fleet's one lock order) until the transaction ends, so no claim slips in
    /// between the check and the write. A fence whose row is gone (the target left the fleet, or
    /// its vantages changed) does not stand: its result would bring back a target no longer scanned.
    private static func heldFences(_ fences: Set<ScanFence>, on connection: PostgresConnection) throws -> Set<ScanFence> {
        guard !fences.isEmpty else { return [] }
        let list = Array(fences)
        let rows = try connection.execute("""
            SELECT w.target, w.vantage, c.epoch FROM fleet_work w
            JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS c(target, vantage, epoch)
              ON w.target = c.target AND w.vantage = c.vantage AND (w.lease_epoch = c.epoch OR w.done_epoch = c.epoch)
            ORDER BY w.target COLLATE "C", w.vantage COLLATE "C" FOR SHARE OF w
            """, [.texts(list.map(\.workTarget)), .texts(list.map(\.workVantage)), .ints(list.map(\.epoch))])
        return Set((0..<rows.count).map { row in
            ScanFence(workTarget: rows.text(row, "target") ?? "", workVantage: rows.text(row, "vantage") ?? "", epoch: rows.int(row, "epoch") ?? -1)
        })
    }

    /// One scan, its timeline row, the alerts the caller's decision raises and the address's state,
    /// in the caller's transaction (as `SQLiteScanStore` does, over the same `ScanRows`).
    private func insert(_ scan: StoredScan, decide: AlertDecision, on connection: PostgresConnection) throws -> [Alert] {
        let rows = try ScanRows(scan, handshakeJSON: handshakeJSON.json, sha256: sha256)
        let result = rows.result
        let startedAt = result.startedAt.timeIntervalSince1970
        for certificate in rows.certificates {
            let known = try connection.execute("SELECT 1 FROM certificate WHERE fingerprint = $1", [.text(certificate.fingerprint)])
            if known.count > 0 { continue }
            try connection.execute("""
                INSERT INTO certificate (fingerprint, der, subject, issuer, not_before, not_after, spki_sha256, summary, first_seen)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (fingerprint) DO NOTHING
                """, [.text(certificate.fingerprint), .bytes(certificate.der), .text(certificate.subject), .text(certificate.issuer),
                      .double(certificate.notBefore), .double(certificate.notAfter), .text(certificate.spki),
                      .text(try certificate.summary()), .double(startedAt)])
        }
        let chain = result.chain
        let inserted = try connection.execute("""
            INSERT INTO observation (target, host, port, sni, address, family, started_at, duration_ms, status,
                failure_category, failure_message, failure_alert, handshake, ats_refusal, trust_store, anchored, path_issues, policy,
                content_hash, revocation, node, vantage, inventory, http_headers, vulnerabilities, enumeration, anchor_in, app)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27,
                $28)
            RETURNING id
            """, [.text(scan.target), .text(scan.host), .int(Int64(scan.port)), scan.sni.map { .text($0) }, .text(result.address),
                  .text(result.family), .double(startedAt), .int(Int64(result.durationMs)), .text(result.status.rawValue),
                  result.error.map { .text($0.category.rawValue) }, result.error.map { .text($0.message) },
                  result.error?.alert.map { .text($0) }, rows.handshake.map { .text($0) }, result.atsClientRefusal.map { .text($0) },
                  chain.map { .text($0.trustStore) }, rows.anchored.map { .int(Int64($0)) }, rows.pathIssues.map { .text($0) },
                  .text(result.ats.policy.rawValue), .text(rows.contentHash), rows.revocation.map { .text($0) },
                  scan.node.map { .text($0) }, scan.vantage.map { .text($0) }, rows.inventory.map { .text($0) }, rows.headers.map { .text($0) },
                  rows.vulnerabilities.map { .text($0) }, rows.enumeration.map { .text($0) }, rows.anchorIn.map { .text($0) },
                  rows.app.map { .text($0) }])
        guard let observationID = inserted.int(0, "id") else { throw StoreError(.other, "the new observation has no id") }
        for reference in rows.references {
            try connection.execute("""
                INSERT INTO observation_certificate (observation_id, role, position, fingerprint, source) VALUES ($1, $2, $3, $4, $5)
                """, [.int(observationID), .text(reference.role), .int(Int64(reference.position)), .text(reference.fingerprint),
                      reference.source.map { .text($0) }])
        }
        try connection.execute("""
            INSERT INTO verdict (observation_id, policy, judged_at, compliant, failed_rules, findings, pin)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """, [.int(observationID), .text(result.ats.policy.rawValue), .double(startedAt), .int(result.ats.compliant ? 1 : 0),
                  .text(rows.failedRules), .text(rows.findings), rows.pin.map { .text($0) }])
        try updateTimeline(scan: scan, rows: rows, observationID: observationID, on: connection)

        // A scan older than the address's current state stays in the history only (as SQLite's store).
        let current = try connection.execute(PostgresConnection.numbered(ScanRows.currentScanTime), [.text(scan.target), .text(result.address)])
            .double(0, "last_scan_at")
        if ScanRows.isLate(startedAt: startedAt, current: current, fenced: scan.fence != nil) {
            return []
        }
        // Change detection is the caller's decision; the store keeps the facts.
        let previous = try memory(target: scan.target, address: result.address, on: connection)
        let outcome = decide(previous, StoredScan(target: scan.target, host: scan.host, port: scan.port, sni: scan.sni, result: result),
                             observationID)
        let memory = outcome.memory
        for mark in memory.expiryMarks.subtracting(previous?.expiryMarks ?? []) {
            try connection.execute("""
                INSERT INTO expiry_alert (target, address, mark, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
                """, [.text(scan.target), .text(result.address), .text(mark), .double(startedAt)])
        }
        for (alert, sinks) in outcome.alerts {
            _ = try Self.insert(alert, sinks: sinks, observationID: observationID, on: connection)
        }
        let failed = result.status == .failed
        try connection.execute(PostgresConnection.numbered(ScanRows.upsertTargetState),
            [.text(scan.target), .text(result.address), .text(scan.host), .int(Int64(scan.port)), .int(observationID),
                  .double(startedAt), .text(result.status.rawValue), .text(result.ats.policy.rawValue),
                  .int(result.ats.compliant ? 1 : 0), .text(try StoredValues.json(memory.failedRules)),
                  rows.earliestExpiry.map { .double($0) }, memory.leafFingerprint.map { .text($0) }, memory.leafSPKI.map { .text($0) },
                  result.error.map { .text($0.category.rawValue) }, .int(Int64(memory.consecutiveFailures)),
                  failed ? nil : .double(startedAt), .text((memory.pinState ?? .none).rawValue), result.pin.map { .text($0.message) },
                  memory.atsCompliant.map { .int($0 ? 1 : 0) }, memory.trusted.map { .int($0 ? 1 : 0) },
                  .int(memory.unreachableAlerted ? 1 : 0), .text(rows.tags), rows.app.map { .text($0) },
                  .int(Int64(ScanRows.overridesNewerClock(scan)))])
        return outcome.alerts.map(\.alert)
    }

    /// A row in the address's timeline when this scan's counted verdict differs from the one in
    /// force at its time; a scan stored after a later one also fixes up the scan that follows it.
    private func updateTimeline(scan: StoredScan, rows: ScanRows, observationID: Int64, on connection: PostgresConnection) throws {
        let address = rows.result.address
        let time = rows.result.startedAt.timeIntervalSince1970
        let before = try connection.execute("""
            SELECT condition, policy, failed_rules FROM address_change WHERE target = $1 AND address = $2 AND started_at <= $3
            ORDER BY started_at DESC, id DESC LIMIT 1
            """, [.text(scan.target), .text(address), .double(time)])
        let previous = before.count == 0 ? nil
            : [before.text(0, "condition") ?? "", before.text(0, "policy") ?? "", before.text(0, "failed_rules") ?? ""]
        if previous != rows.timeline {
            try insertChange(target: scan.target, address: address, time: time, observationID: observationID, state: rows.timeline,
                             on: connection)
        }
        let next = try connection.execute("""
            SELECT o.id, o.started_at, o.status, o.trust_store IS NOT NULL AS has_chain, v.compliant, v.policy, v.failed_rules,
                v.pin::jsonb ->> 'state' AS pin_state
            FROM observation o JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy
            WHERE o.target = $1 AND o.address = $2 AND o.started_at > $3 ORDER BY o.started_at, o.id LIMIT 1
            """, [.text(scan.target), .text(address), .double(time)])
        guard next.count > 0, let nextID = next.int(0, "id") else { return }
        let place = "observation \(nextID)"
        let nextState = try ScanRows.timeline(
            status: try StoredValues.known(next.text(0, "status"), "status", in: place), hasChain: next.bool(0, "has_chain") ?? false,
            compliant: next.int(0, "compliant") == 1, policy: next.text(0, "policy") ?? "",
            failedRules: try StoredValues.rules(next.text(0, "failed_rules")),
            pinState: try StoredValues.known(next.text(0, "pin_state"), "pin state", in: place, optional: true))
        let hasRow = try connection.execute("SELECT 1 FROM address_change WHERE observation_id = $1", [.int(nextID)]).count > 0
        if nextState == rows.timeline, hasRow {
            try connection.execute("DELETE FROM address_change WHERE observation_id = $1", [.int(nextID)])
        } else if nextState != rows.timeline, !hasRow {
            try insertChange(target: scan.target, address: address, time: next.double(0, "started_at") ?? time, observationID: nextID,
                             state: nextState, on: connection)
        }
    }

    private func insertChange(target: String, address: String, time: Double, observationID: Int64, state: [String],
                              on connection: PostgresConnection) throws {
        try connection.execute("""
            INSERT INTO address_change (target, address, started_at, observation_id, condition, policy, failed_rules)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """, [.text(target), .text(address), .double(time), .int(observationID), .text(state[0]), .text(state[1]), .text(state[2])])
    }

    /// What is remembered of a target address, or nil before its first scan.
    private func memory(target: String, address: String, on connection: PostgresConnection) throws -> AddressMemory? {
        let rows = try connection.execute("""
            SELECT pin_state, leaf_fingerprint, leaf_spki, ats_compliant, failed_rules, trusted, consecutive_failures,
                unreachable_alerted
            FROM target_state WHERE target = $1 AND address = $2
            """, [.text(target), .text(address)])
        guard rows.count > 0 else { return nil }
        let marks = try connection.execute("SELECT mark FROM expiry_alert WHERE target = $1 AND address = $2",
                                           [.text(target), .text(address)])
        return AddressMemory(
            pinState: try StoredValues.known(rows.text(0, "pin_state"), "pin state", in: "the current state of \(target) \(address)",
                                                optional: true),
            leafFingerprint: rows.text(0, "leaf_fingerprint"), leafSPKI: rows.text(0, "leaf_spki"),
            atsCompliant: rows.int(0, "ats_compliant").map { $0 == 1 },
            failedRules: try StoredValues.rules(rows.text(0, "failed_rules")),
            trusted: rows.int(0, "trusted").map { $0 == 1 },
            consecutiveFailures: Int(rows.int(0, "consecutive_failures") ?? 0),
            unreachableAlerted: rows.int(0, "unreachable_alerted") == 1,
            expiryMarks: Set((0..<marks.count).compactMap { marks.text($0, "mark") }))
    }

    // MARK: - Alerts

    /// A delivery's due time is kept on the server's clock: the SQL for "server now plus parameter
    /// `number` seconds", the parameter being ``fromNow(_:)`` of the node's time.
    static func serverClock(_ number: Int) -> String { "(extract(epoch FROM now())::float8 + $\(number)::float8)" }

    /// A node's time as seconds from the node's now, to be added to the server's now.
    static func fromNow(_ time: Date) -> PostgresValue { .double(time.timeIntervalSinceNow) }

    public func pendingDeliveries(dueBy time: Date, sinks: [String], limit: Int) throws -> [PendingDelivery] {
        guard !sinks.isEmpty else { return [] }
        return try pool.withConnection { connection in
            let placeholders = sinks.indices.map { "$\($0 + 2)" }.joined(separator: ", ")
            let rows = try connection.execute("""
                SELECT d.sink, d.attempts, a.document FROM alert_delivery d JOIN alert a ON a.id = d.alert_id
                WHERE d.state = 'pending' AND d.next_attempt_at <= \(Self.serverClock(1)) AND d.sink IN (\(placeholders))
                ORDER BY a.created_at, a.id COLLATE "C" LIMIT $\(sinks.count + 2)
                """, [Self.fromNow(time)] + sinks.map { .text($0) } + [.int(Int64(limit))])
            return try (0..<rows.count).compactMap { row in
                guard let alert = try StoredValues.decode(Alert.self, rows.text(row, "document")) else { return nil }
                return PendingDelivery(alert: alert, sink: rows.text(row, "sink") ?? "", attempts: Int(rows.int(row, "attempts") ?? 0))
            }
        }
    }

    /// Claimed with `FOR UPDATE SKIP LOCKED`: two nodes claiming at once get different deliveries.
    /// Due times and leases are on the database server's clock (``serverClock(_:)``), so nodes whose
    /// clocks disagree still take a delivery over only once its lease has run out.
    public func claimDeliveries(dueBy time: Date, sinks: [String], limit: Int, lease: Double) throws -> [PendingDelivery] {
        guard !sinks.isEmpty else { return [] }
        return try pool.withConnection { connection in
            let rows = try connection.execute("""
                WITH due AS (
                    SELECT d.alert_id, d.sink FROM alert_delivery d JOIN alert a ON a.id = d.alert_id
                    WHERE d.state = 'pending' AND d.next_attempt_at <= \(Self.serverClock(1)) AND d.sink = ANY($2::text[])
                    ORDER BY a.created_at, a.id COLLATE "C" LIMIT $3
                    FOR UPDATE OF d SKIP LOCKED
                )
                UPDATE alert_delivery d SET next_attempt_at = \(Self.serverClock(4)), lease_epoch = d.lease_epoch + 1 FROM due, alert a
                WHERE d.alert_id = due.alert_id AND d.sink = due.sink AND a.id = d.alert_id
                RETURNING d.sink, d.attempts, a.document, a.created_at, a.id, d.lease_epoch
                """, [Self.fromNow(time), .texts(sinks), .int(Int64(limit)), .double(lease)])
            let claimed = try (0..<rows.count).compactMap { row -> (Double, String, PendingDelivery)? in
                guard let alert = try StoredValues.decode(Alert.self, rows.text(row, "document")) else { return nil }
                var delivery = PendingDelivery(alert: alert, sink: rows.text(row, "sink") ?? "", attempts: Int(rows.int(row, "attempts") ?? 0))
                delivery.leaseEpoch = rows.int(row, "lease_epoch") ?? 0
                return (rows.double(row, "created_at") ?? 0, rows.text(row, "id") ?? "", delivery)
            }
            // RETURNING has no order: oldest alert first, as listed.
            return claimed.sorted { first, second in
                first.0 != second.0 ? first.0 < second.0 : first.1.utf8.lexicographicallyPrecedes(second.1.utf8)
            }.map(\.2)
        }
    }

    public func releaseDeliveries(_ deliveries: [PendingDelivery], dueAt time: Date) throws {
        guard !deliveries.isEmpty else { return }
        _ = try pool.withConnection { connection in
            try connection.execute("""
                UPDATE alert_delivery d SET next_attempt_at = \(Self.serverClock(1))
                FROM unnest($2::text[], $3::text[], $4::bigint[]) AS c(alert_id, sink, epoch)
                WHERE d.state = 'pending' AND d.alert_id = c.alert_id AND d.sink = c.sink AND d.lease_epoch = c.epoch
                """, [Self.fromNow(time), .texts(deliveries.map(\.alert.id)), .texts(deliveries.map(\.sink)),
                      .ints(deliveries.map(\.leaseEpoch))])
        }
    }

    /// The claim is the delivery's newest and its lease has not run out, on the server's clock.
    public func stillHolds(_ delivery: PendingDelivery) throws -> Bool {
        try pool.withConnection { connection in
            try connection.execute("""
                SELECT 1 FROM alert_delivery WHERE alert_id = $1 AND sink = $2 AND state = 'pending' AND lease_epoch = $3
                  AND next_attempt_at > extract(epoch FROM now())
                """, [.text(delivery.alert.id), .text(delivery.sink), .int(delivery.leaseEpoch)]).count > 0
        }
    }

    public func markDelivered(alertID: String, sink: String, at time: Date, leaseEpoch: Int64?) throws {
        _ = try pool.withConnection { connection in
            try connection.execute("""
                UPDATE alert_delivery SET state = 'delivered', delivered_at = $1, attempts = attempts + 1, last_error = NULL
                WHERE alert_id = $2 AND sink = $3 AND ($4::bigint IS NULL OR lease_epoch = $4::bigint)
                """, [.double(time.timeIntervalSince1970), .text(alertID), .text(sink), leaseEpoch.map { .int($0) }])
        }
    }

    public func markFailed(alertID: String, sink: String, error message: String, retryAt: Date, leaseEpoch: Int64?) throws {
        _ = try pool.withConnection { connection in
            try connection.execute("""
                UPDATE alert_delivery SET attempts = attempts + 1, last_error = $1, next_attempt_at = \(Self.serverClock(2))
                WHERE alert_id = $3 AND sink = $4 AND state = 'pending' AND ($5::bigint IS NULL OR lease_epoch = $5::bigint)
                """, [.text(message), Self.fromNow(retryAt), .text(alertID), .text(sink), leaseEpoch.map { .int($0) }])
        }
    }

    public func alerts(limit: Int) throws -> [StoredAlert] {
        try pool.withConnection { connection in
            let rows = try connection.execute("SELECT id, document FROM alert ORDER BY created_at DESC, id COLLATE \"C\" LIMIT $1",
                                              [.int(Int64(limit))])
            return try (0..<rows.count).compactMap { row in
                guard let alert = try StoredValues.decode(Alert.self, rows.text(row, "document")) else { return nil }
                let deliveries = try connection.execute("""
                    SELECT sink, state, attempts, last_error FROM alert_delivery WHERE alert_id = $1 ORDER BY sink COLLATE "C"
                    """, [.text(alert.id)])
                return StoredAlert(alert: alert, deliveries: try (0..<deliveries.count).map { index in
                    StoredAlert.Delivery(sink: deliveries.text(index, "sink") ?? "",
                                         state: try StoredValues.known(deliveries.text(index, "state"), "delivery state",
                                                                          in: "alert \(alert.id)"),
                                         attempts: Int(deliveries.int(index, "attempts") ?? 0),
                                         lastError: deliveries.text(index, "last_error"))
                })
            }
        }
    }

    // MARK: - Reading

    /// Stores an alert and its pending deliveries (in the caller's transaction); false when its id was there already.
    private static func insert(_ alert: Alert, sinks: [String], observationID: Int64?, on connection: PostgresConnection) throws -> Bool {
        let inserted = try connection.execute(PostgresConnection.numbered(ScanRows.insertAlert), [
            .text(alert.id), .double(alert.createdAt.timeIntervalSince1970), .text(alert.target), .text(alert.address),
            .text(alert.kind.rawValue), .text(alert.severity.rawValue), .text(alert.summary), .text(try StoredValues.json(alert)),
            observationID.map { .int($0) }])
        guard inserted.affected > 0 else { return false }
        for sink in sinks {
            try connection.execute(PostgresConnection.numbered(ScanRows.insertDelivery(dueAt: Self.serverClock(3))),
                                   [.text(alert.id), .text(sink), Self.fromNow(alert.createdAt)])
        }
        return true
    }

    public func recordAlert(_ alert: Alert, sinks: [String]) throws -> Bool {
        try pool.withConnection { connection in
            try connection.transaction { try Self.insert(alert, sinks: sinks, observationID: nil, on: connection) }
        }
    }

    public func status() throws -> [TargetStatus] { try status(where: "", []) }

    public func vantageStatus(of target: String) throws -> [TargetStatus] {
        try status(where: "WHERE t.target LIKE $1 ESCAPE '\\'", [.text(VantageTarget.likePattern(target))])
    }

    private func status(where filter: String, _ parameters: [PostgresValue?]) throws -> [TargetStatus] {
        try pool.withConnection { connection in
            let rows = try connection.execute("""
                SELECT t.*, (SELECT string_agg((f.value ->> 'severity') || ' ' || (f.value ->> 'id'), chr(31))
                             FROM verdict v, jsonb_array_elements(v.findings::jsonb) AS f
                             WHERE v.observation_id = t.last_observation_id AND v.policy = t.policy) AS findings
                FROM target_state t \(filter) ORDER BY t.target COLLATE "C", t.address COLLATE "C"
                """, parameters)
            return try (0..<rows.count).map { row in
                let place = "the current state of \(rows.text(row, "target") ?? "?") \(rows.text(row, "address") ?? "?")"
                let pinState: PinEvaluation.State = try StoredValues.known(rows.text(row, "pin_state") ?? "none", "pin state", in: place)
                var status = TargetStatus(
                    target: rows.text(row, "target") ?? "", address: rows.text(row, "address") ?? "", host: rows.text(row, "host") ?? "",
                    port: Int(rows.int(row, "port") ?? 0), lastScanAt: Date(timeIntervalSince1970: rows.double(row, "last_scan_at") ?? 0),
                    lastObservationID: rows.int(row, "last_observation_id") ?? 0,
                    status: try StoredValues.known(rows.text(row, "status"), "status", in: place),
                    policy: try StoredValues.known(rows.text(row, "policy"), "policy", in: place),
                    compliant: CountedVerdict.compliant(rows.int(row, "compliant") == 1, pinState: pinState),
                    failedRules: CountedVerdict.reasons(try StoredValues.rules(rows.text(row, "failed_rules")), pinState: pinState),
                    earliestExpiry: rows.double(row, "earliest_expiry").map(Date.init(timeIntervalSince1970:)),
                    leafFingerprint: rows.text(row, "leaf_fingerprint"), leafSPKI: rows.text(row, "leaf_spki"),
                    failureCategory: try StoredValues.known(rows.text(row, "failure_category"), "failure category", in: place,
                                                               optional: true),
                    consecutiveFailures: Int(rows.int(row, "consecutive_failures") ?? 0),
                    lastSuccessAt: rows.double(row, "last_success_at").map(Date.init(timeIntervalSince1970:)), pinState: pinState)
                status.trustErrors = try FindingMarks.parse(rows.text(row, "findings"), in: place)
                    .filter { Finding.isTrustError(id: $0.id, severity: $0.severity) }.map(\.id)
                status.tags = try StoredValues.tags(rows.text(row, "tags"), in: place)
                status.app = try StoredValues.stored(AppHostOutcome.self, rows.text(row, "app"), "app outcome", in: place)
                return status
            }
        }
    }

    public func forEachObservation(startedIn period: ClosedRange<Date>, _ body: (ObservationRow) throws -> Void) throws {
        try pool.withConnection { connection in
            try connection.transaction("BEGIN READ ONLY") {
                try connection.execute("""
                    DECLARE observations NO SCROLL CURSOR FOR
                    SELECT id, target, address, started_at, status, policy FROM observation
                    WHERE started_at >= $1 AND started_at <= $2 ORDER BY started_at, id
                    """, [.double(period.lowerBound.timeIntervalSince1970), .double(period.upperBound.timeIntervalSince1970)])
                while true {
                    let rows = try connection.execute("FETCH 2000 FROM observations")
                    if rows.count == 0 { break }
                    for row in 0..<rows.count {
                        let id = rows.int(row, "id") ?? 0
                        try body(ObservationRow(
                            id: id, target: rows.text(row, "target") ?? "", address: rows.text(row, "address") ?? "",
                            startedAt: Date(timeIntervalSince1970: rows.double(row, "started_at") ?? 0),
                            status: try StoredValues.known(rows.text(row, "status"), "status", in: "observation \(id)"),
                            policy: try StoredValues.known(rows.text(row, "policy"), "policy", in: "observation \(id)", optional: true)))
                    }
                }
            }
        }
    }

    public func history(target: String, limit: Int) throws -> [HistoryEntry] {
        try pool.withConnection { connection in
            let rows = try connection.execute("""
                SELECT o.id, o.target, o.address, o.started_at, o.duration_ms, o.status, o.failure_category, o.failure_message,
                    o.handshake, o.inventory, o.http_headers, o.vulnerabilities, v.policy AS verdict_policy, v.compliant, v.failed_rules, v.findings,
                    v.pin::jsonb ->> 'state' AS pin_state,
                    (SELECT c.fingerprint FROM observation_certificate c WHERE c.observation_id = o.id AND c.role = 'presented'
                        AND c.position = 0) AS leaf,
                    (SELECT cert.spki_sha256 FROM observation_certificate c JOIN certificate cert ON cert.fingerprint = c.fingerprint
                        WHERE c.observation_id = o.id AND c.role = 'presented' AND c.position = 0) AS leaf_spki
                FROM observation o JOIN verdict v ON v.observation_id = o.id
                WHERE o.target = $1 OR o.host = $1 OR (o.host || ':' || o.port) = $1 OR o.target LIKE $3 ESCAPE '\\'
                ORDER BY o.started_at DESC, o.id DESC LIMIT $2
                """, [.text(target), .int(Int64(limit)), .text(VantageTarget.likePattern(target))])
            return try (0..<rows.count).map { row in
                let id = rows.int(row, "id") ?? 0
                let place = "observation \(id)"
                let pinState: PinEvaluation.State? = try StoredValues.known(rows.text(row, "pin_state"), "pin state", in: place,
                                                                               optional: true)
                let handshake = try StoredValues.decode(HandshakeObservation.self, rows.text(row, "handshake"))
                return HistoryEntry(
                    observationID: id, target: rows.text(row, "target") ?? "", address: rows.text(row, "address") ?? "",
                    startedAt: Date(timeIntervalSince1970: rows.double(row, "started_at") ?? 0),
                    durationMs: Int(rows.int(row, "duration_ms") ?? 0),
                    status: try StoredValues.known(rows.text(row, "status"), "status", in: place),
                    failureCategory: try StoredValues.known(rows.text(row, "failure_category"), "failure category", in: place,
                                                               optional: true),
                    failureMessage: rows.text(row, "failure_message"), protocolVersion: handshake?.protocolVersion,
                    cipher: handshake?.cipher.iana, leafFingerprint: rows.text(row, "leaf"), leafSPKI: rows.text(row, "leaf_spki"),
                    policy: try StoredValues.known(rows.text(row, "verdict_policy"), "policy", in: place),
                    compliant: CountedVerdict.compliant(rows.int(row, "compliant") == 1, pinState: pinState),
                    failedRules: CountedVerdict.reasons(try StoredValues.rules(rows.text(row, "failed_rules")), pinState: pinState),
                    findings: try StoredValues.decode([Finding].self, rows.text(row, "findings")) ?? [],
                    inventory: try StoredValues.stored(ServerInventory.self, rows.text(row, "inventory"), "inventory", in: place),
                    headers: try StoredValues.stored(HTTPHeadersReport.self, rows.text(row, "http_headers"), "HTTP headers", in: place),
                    vulnerabilities: try StoredValues.stored(VulnerabilityReport.self, rows.text(row, "vulnerabilities"), "vulnerabilities",
                                                             in: place))
            }
        }
    }

    public func result(observationID: Int64) throws -> AddressScanResult? {
        try pool.withConnection { connection in
            var summaries: [String: CertificateSummary] = [:]
            return try Self.loadResult(observationID: observationID, on: connection, summaries: &summaries)
        }
    }

    /// Rebuilds a stored result from its rows (certificates decoded once per `summaries`).
    static func loadResult(observationID: Int64, on connection: PostgresConnection,
                           summaries: inout [String: CertificateSummary]) throws -> AddressScanResult? {
        let rows = try connection.execute("""
            SELECT o.*, v.policy AS verdict_policy, v.compliant, v.failed_rules, v.findings FROM observation o
            JOIN verdict v ON v.observation_id = o.id AND v.policy = coalesce(o.policy, v.policy)
            WHERE o.id = $1 ORDER BY v.judged_at LIMIT 1
            """, [.int(observationID)])
        guard rows.count > 0 else { return nil }
        let certificates = try connection.execute("""
            SELECT c.role, c.position, c.source, c.fingerprint, cert.der, cert.summary FROM observation_certificate c
            JOIN certificate cert ON cert.fingerprint = c.fingerprint
            WHERE c.observation_id = $1 ORDER BY c.role COLLATE "C", c.position
            """, [.int(observationID)])
        let place = "observation \(observationID)"
        var presented: [CertificateSummary] = []
        var path: [PathElement] = []
        for entry in 0..<certificates.count {
            let fingerprint = certificates.text(entry, "fingerprint") ?? ""
            var summary: CertificateSummary
            if let known = summaries[fingerprint] {
                summary = known
            } else {
                guard let decoded = try StoredValues.stored(CertificateSummary.self, certificates.text(entry, "summary"),
                                                               "certificate summary", in: place) else { continue }
                summary = decoded
                summary.der = Data(certificates.bytes(entry, "der") ?? [])
                summaries[fingerprint] = summary
            }
            if certificates.text(entry, "role") == "presented" {
                presented.append(summary)
            } else {
                path.append(PathElement(certificate: summary,
                                        source: try StoredValues.known(certificates.text(entry, "source") ?? "presented",
                                                                          "certificate source", in: place),
                                        presentedIndex: nil))
            }
        }
        for index in path.indices {
            path[index].presentedIndex = presented.firstIndex { $0.sha256Fingerprint == path[index].certificate.sha256Fingerprint }
        }
        var chain: ChainReport?
        if let trustStore = rows.text(0, "trust_store") {
            chain = ChainReport(presented: presented, path: path, anchored: rows.int(0, "anchored") == 1, trustStore: trustStore,
                                issues: try StoredValues.stored([PathBuildingIssue].self, rows.text(0, "path_issues"), "path issues",
                                                                   in: place) ?? [],
                                revocation: try StoredValues.stored(RevocationReport.self, rows.text(0, "revocation"),
                                                                       "revocation facts", in: place))
            chain?.anchorIn = StoredValues.anchorIn(rows.text(0, "anchor_in"))
        }
        let category: ProbeFailureCategory? = try StoredValues.known(rows.text(0, "failure_category"), "failure category", in: place,
                                                                       optional: true)
        let policy: CompliancePolicy = try StoredValues.known(rows.text(0, "verdict_policy"), "policy", in: place)
        let failedRules = try StoredValues.rules(rows.text(0, "failed_rules"))
        let outcomes = Dictionary(uniqueKeysWithValues: policy.rules.map { ($0, failedRules.contains($0) ? RuleOutcome.fail : .pass) })
        let status: AddressScanResult.Status = try StoredValues.known(rows.text(0, "status"), "status", in: place)
        var result = AddressScanResult(
            address: rows.text(0, "address") ?? "", family: rows.text(0, "family") ?? "", port: Int(rows.int(0, "port") ?? 0),
            status: status, startedAt: Date(timeIntervalSince1970: rows.double(0, "started_at") ?? 0),
            durationMs: Int(rows.int(0, "duration_ms") ?? 0),
            handshake: try StoredValues.stored(HandshakeObservation.self, rows.text(0, "handshake"), "handshake", in: place),
            atsClientRefusal: rows.text(0, "ats_refusal"),
            error: category.map { ProbeFailure($0, rows.text(0, "failure_message") ?? "", alert: rows.text(0, "failure_alert")) },
            chain: chain, findings: try StoredValues.stored([Finding].self, rows.text(0, "findings"), "findings", in: place) ?? [],
            ats: ATSVerdict(policy: policy, compliant: rows.int(0, "compliant") == 1, rules: status == .failed ? [:] : outcomes,
                            failedRules: failedRules))
            .with(inventory: try StoredValues.stored(ServerInventory.self, rows.text(0, "inventory"), "inventory", in: place),
                  headers: try StoredValues.stored(HTTPHeadersReport.self, rows.text(0, "http_headers"), "HTTP headers", in: place),
                  vulnerabilities: try StoredValues.stored(VulnerabilityReport.self, rows.text(0, "vulnerabilities"), "vulnerabilities",
                                                           in: place),
                  enumeration: try StoredValues.stored(EnumerationReport.self, rows.text(0, "enumeration"), "enumeration", in: place))
            .withinBudget()
        result.app = try StoredValues.stored(AppHostOutcome.self, rows.text(0, "app"), "app outcome", in: place)
        return result
    }

    // MARK: - Reports, retention, revocation answers

    public func lastReportRun(name: String) throws -> Date? {
        try pool.withConnection { connection in
            try connection.execute("SELECT max(period_end) AS last FROM report_run WHERE name = $1", [.text(name)])
                .double(0, "last").map(Date.init(timeIntervalSince1970:))
        }
    }

    /// A claim row per run: taken when free, when its lease ended, or when the owner asks again.
    public func claimReportRun(name: String, periodEnd: Date, owner: String, lease: Double) throws -> ReportRunClaim {
        try pool.withConnection { connection in
            try connection.transaction {
                let end = PostgresValue.double(periodEnd.timeIntervalSince1970)
                if try connection.execute("SELECT 1 FROM report_run WHERE name = $1 AND period_end = $2", [.text(name), end]).count > 0 {
                    return .written
                }
                let taken = try connection.execute("""
                    INSERT INTO report_claim (name, period_end, owner, lease_until, epoch) VALUES ($1, $2, $3, extract(epoch FROM now()) + $4, 1)
                    ON CONFLICT (name, period_end) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until,
                        epoch = report_claim.epoch + 1
                    WHERE report_claim.lease_until < extract(epoch FROM now()) OR report_claim.owner = EXCLUDED.owner
                    RETURNING epoch
                    """, [.text(name), end, .text(owner), .double(lease)])
                if taken.count > 0 { return .claimed(epoch: taken.int(0, "epoch") ?? 0) }
                let holder = try connection.execute("SELECT owner FROM report_claim WHERE name = $1 AND period_end = $2", [.text(name), end])
                return .heldByAnother(holder.text(0, "owner") ?? "?")
            }
        }
    }

    public func holdsReportRun(name: String, periodEnd: Date, owner: String, epoch: Int64) throws -> Bool {
        try pool.withConnection { connection in
            try connection.execute("""
                SELECT 1 FROM report_claim WHERE name = $1 AND period_end = $2 AND owner = $3 AND epoch = $4
                  AND lease_until >= extract(epoch FROM now())
                """, [.text(name), .double(periodEnd.timeIntervalSince1970), .text(owner), .int(epoch)]).count > 0
        }
    }

    public func recordReportRun(name: String, periodEnd: Date, files: [String], delivery: [String: ReportDelivery],
                                claim: (owner: String, epoch: Int64)?) throws -> Bool {
        try pool.withConnection { connection in
            try connection.execute("""
                INSERT INTO report_run (name, period_end, written_at, files, delivery)
                SELECT $1, $2, $3, $4, $5
                WHERE $6::text IS NULL OR EXISTS (SELECT 1 FROM report_claim
                    WHERE name = $1 AND period_end = $2 AND owner = $6::text AND epoch = $7::bigint)
                ON CONFLICT (name, period_end) DO UPDATE SET written_at = excluded.written_at, files = excluded.files,
                    delivery = excluded.delivery
                """, [.text(name), .double(periodEnd.timeIntervalSince1970), .double(Date().timeIntervalSince1970),
                      .text(try StoredValues.json(files)), .text(try StoredValues.json(delivery)),
                      claim.map { .text($0.owner) }, claim.map { .int($0.epoch) }]).affected > 0
        }
    }

    public func prune(olderThan cutoff: Date) throws -> PruneResult {
        try pool.withConnection { connection in
            try connection.transaction {
                let time = PostgresValue.double(cutoff.timeIntervalSince1970)
                let observations = try connection.execute("""
                    DELETE FROM observation WHERE started_at < $1 AND id NOT IN (SELECT last_observation_id FROM target_state)
                    """, [time]).affected
                // Each address keeps the change in force at the cutoff and the last reachable one before it.
                try connection.execute("""
                    DELETE FROM address_change WHERE started_at < $1 AND id NOT IN (
                        SELECT DISTINCT ON (target, address) id FROM address_change WHERE started_at < $1
                        ORDER BY target, address, started_at DESC, id DESC)
                    AND id NOT IN (
                        SELECT DISTINCT ON (target, address) id FROM address_change WHERE started_at < $1 AND condition != 'unreachable'
                        ORDER BY target, address, started_at DESC, id DESC)
                    """, [time])
                try connection.execute("""
                    DELETE FROM alert WHERE created_at < $1
                    AND NOT EXISTS (SELECT 1 FROM alert_delivery d WHERE d.alert_id = alert.id AND d.state = 'pending')
                    """, [time])
                let certificates = try connection.execute("""
                    DELETE FROM certificate c WHERE NOT EXISTS (SELECT 1 FROM observation_certificate r WHERE r.fingerprint = c.fingerprint)
                    """).affected
                return PruneResult(observations: observations, certificates: certificates)
            }
        }
    }

    public func revocationAnswer(for key: String, at time: Date) throws -> (body: [UInt8], expires: Date)? {
        try pool.withConnection { connection in
            let rows = try connection.execute("SELECT body, expires_at FROM revocation_answer WHERE key = $1 AND expires_at > $2",
                                              [.text(key), .double(time.timeIntervalSince1970)])
            guard rows.count > 0, let body = rows.bytes(0, "body"), let expires = rows.double(0, "expires_at") else { return nil }
            return (body, Date(timeIntervalSince1970: expires))
        }
    }

    public func saveRevocationAnswer(_ body: [UInt8], for key: String, expires: Date) throws {
        try pool.withConnection { connection in
            try connection.transaction {
                try connection.execute("""
                    INSERT INTO revocation_answer (key, body, expires_at) VALUES ($1, $2, $3)
                    ON CONFLICT (key) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at
                    """, [.text(key), .bytes(body), .double(expires.timeIntervalSince1970)])
                try connection.execute("DELETE FROM revocation_answer WHERE expires_at <= $1", [.double(Date().timeIntervalSince1970)])
            }
        }
    }
}

extension PostgresScanStore {
    /// What `check-config --test-connection` reports: the server's version and the migrations the
    /// database has (none before the first node starts), without changing anything.
    public static func testConnection(_ settings: PostgresSettings) throws -> (server: String, migrations: [String]) {
        let connection = try PostgresConnection(settings)
        let version = try connection.execute("SHOW server_version").text(0, "server_version") ?? "?"
        let exists = try connection.execute("SELECT to_regclass('tlsaudit_migration') IS NOT NULL AS present").bool(0, "present") ?? false
        let migrations = exists ? try PostgresMigrations.appliedMigrations(connection) : []
        try PostgresMigrations.refuseUnknown(migrations, display: settings.display)
        return (version, migrations)
    }
}
