public import Foundation
import GRDB
public import TLSAuditModel

/// The embedded store: one SQLite file in WAL mode (readers never block the writer, so `status`
/// works while the service runs), synchronous=FULL on the writer (a commit survives power loss
/// and an OS crash, not only a killed process: `SQLitePool`), a busy timeout, and append-only
/// migrations. A database with a migration this version does not know is refused when opened;
/// `inspect` runs SQLite's `quick_check` (the service runs it at start, before its first commit).
public final class SQLiteScanStore: ScanStore, Sendable {
    let pool: SQLitePool
    public let path: String
    public var displayLocation: String { path }
    private let handshakeJSON = HandshakeJSONCache()
    /// The SHA-256 of observation content hashes (OpenSSL's, handed in: the store links no C).
    private let sha256: SHA256Hex

    /// Opens (creating when `create` is true) and migrates the database at `path`. `sha256` is the
    /// package's one SHA-256 (`Digest.sha256Hex` in the probe), for observation content hashes.
    public init(path: String, create: Bool = true, busyTimeout: Double = 10, sha256: @escaping SHA256Hex) throws {
        self.path = path
        self.sha256 = sha256
        if !create, !FileManager.default.fileExists(atPath: path) {
            throw StoreError(.unavailable, "no database at \(path) (has the service run yet?)")
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.label = "tlsaudit"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        do {
            if create { try Self.createDirectories(URL(fileURLWithPath: path).deletingLastPathComponent().path) }
            pool = try SQLitePool(path: path, configuration: configuration)
            let migrator = StoreMigrations.migrator(sha256: sha256)
            try pool.read { db in try Self.refuseUnknownMigrations(migrator, in: db, path: path) }
            try migrator.migrate(pool.pool)
        } catch {
            throw Self.storeError(error, doing: "opening \(path)")
        }
        // The file just opened (and created): what later checks compare the path with.
        guard let identity = Self.fileIdentity(path) else {
            throw StoreError(.vanished, "\(path) disappeared while it was being opened")
        }
        fileIdentity = identity
    }

    /// Throws when the database has a migration `migrator` does not know (a newer tlsaudit's),
    /// as `PostgresMigrations.refuseUnknown` does for PostgreSQL.
    private static func refuseUnknownMigrations(_ migrator: DatabaseMigrator, in db: Database, path: String) throws {
        let unknown = try migrator.appliedIdentifiers(db).subtracting(try migrator.appliedMigrations(db)).sorted()
        guard !unknown.isEmpty else { return }
        throw StoreError(.incompatible, """
            \(path) has schema migrations this version of tlsaudit does not know (\(unknown.joined(separator: ", "))): \
            a newer tlsaudit wrote it; run that version, or restore a copy made before the upgrade
            """)
    }

    /// What to do about a damaged database file, for messages.
    static func corruptionAdvice(path: String, found: String) -> String {
        """
        the database \(path) is damaged (SQLite's quick_check: \(found)); stop the service, keep a copy of the file \
        and its -wal, then either restore a backup or recover what is readable: sqlite3 \(path) ".recover" | sqlite3 \
        \(path).recovered, and point database: at the recovered file
        """
    }

    /// What `check-config --test-connection` reports of an existing file, changing nothing: the
    /// migrations it has. Throws for a damaged file and a newer schema. `PRAGMA quick_check` reads
    /// every page (b-tree structure, page and record formats; not the indexes' content against
    /// their tables): 2.4-2.7 s for a 2.6 GB file of 1,000,000 scans in the page cache, 36-61 s from a cold
    /// cache on this machine's disk.
    public static func inspect(path: String, sha256: @escaping SHA256Hex) throws -> [String] {
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            return try queue.read { db in
                let problems = try String.fetchAll(db, sql: "PRAGMA quick_check(5)")
                guard problems == ["ok"] else {
                    throw StoreError(.corrupt, corruptionAdvice(path: path, found: problems.joined(separator: "; ")))
                }
                guard try db.tableExists("grdb_migrations") else { return [] }
                let migrator = StoreMigrations.migrator(sha256: sha256)
                try refuseUnknownMigrations(migrator, in: db, path: path)
                return try migrator.appliedMigrations(db)
            }
        } catch {
            throw storeError(error, doing: "checking \(path)")
        }
    }

    /// The `synchronous` setting of the connection that writes (2 is FULL), read back from it.
    public func writerSynchronous() throws -> Int {
        try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Device and inode of the database file as opened.
    private let fileIdentity: FileIdentity

    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    private static func fileIdentity(_ path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    public func checkFileIdentity() throws {
        switch Self.fileIdentity(path) {
        case fileIdentity?: return
        case nil: throw StoreError(.vanished, "the database file \(path) was deleted (or its directory was) while it was open")
        case _?: throw StoreError(.vanished, "the database file \(path) was replaced by another file while it was open")
        }
    }

    /// Runs `PRAGMA integrity_check`; returns "ok" when the file is sound.
    public func integrityCheck() throws -> String {
        try pool.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "; ") }
    }

    /// Folds the write-ahead log into the file and rewrites it compactly, leaving one
    /// self-contained file (for fixtures and copies; the service never needs it).
    public func compact() throws {
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "VACUUM")
        }
    }

    /// The migrations applied so far, in order.
    public func appliedMigrations() throws -> [String] {
        try pool.read { db in try StoreMigrations.migrator(sha256: sha256).appliedMigrations(db) }
    }

    // MARK: - Writing

    public func record(_ scans: [StoredScan], decide: AlertDecision) throws -> RecordOutcome {
        guard !scans.isEmpty else { return RecordOutcome(alerts: []) }
        do {
            return try pool.write { db in
                var alerts: [Alert] = []
                for scan in scans {
                    alerts += try Self.insert(scan, decide: decide, handshakeJSON: handshakeJSON.json, sha256: sha256, into: db)
                }
                // A target's current state is the addresses its latest scan saw: drop the others
                // (rotated out of DNS, or the placeholder of an earlier resolution failure).
                // Only rows older than the scan: a late batch does not undo a newer resolution.
                for (target, group) in Dictionary(grouping: scans, by: \.target) {
                    let addresses = Set(group.map(\.result.address))
                    guard !addresses.contains("-") else { continue }
                    let placeholders = Array(repeating: "?", count: addresses.count).joined(separator: ", ")
                    let oldest = group.map(\.result.startedAt.timeIntervalSince1970).min() ?? 0
                    try db.cachedStatement(sql: "DELETE FROM target_state WHERE target = ? AND last_scan_at < ? AND address NOT IN (\(placeholders))")
                        .execute(arguments: [target, oldest] + StatementArguments(addresses.sorted()))
                }
                return RecordOutcome(alerts: alerts)
            }
        } catch {
            throw Self.storeError(error, doing: "storing \(scans.count) scan(s)")
        }
    }

    /// Stores one scan, detects transitions against the remembered state, stores the alerts and
    /// their pending deliveries, and updates the state: all in the caller's transaction.
    private static func insert(_ scan: StoredScan, decide: AlertDecision,
                               handshakeJSON: (HandshakeObservation) throws -> String, sha256: SHA256Hex,
                               into db: Database) throws -> [Alert] {
        let rows = try ScanRows(scan, handshakeJSON: handshakeJSON, sha256: sha256)
        let result = rows.result
        for certificate in rows.certificates {
            // Most scans show certificates already stored: skip encoding those.
            let known = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM certificate WHERE fingerprint = ?"),
                                          arguments: [certificate.fingerprint]) ?? false
            if known { continue }
            try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO certificate (fingerprint, der, subject, issuer, not_before, not_after, spki_sha256, summary, first_seen)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [
                    certificate.fingerprint, Data(certificate.der), certificate.subject, certificate.issuer,
                    certificate.notBefore, certificate.notAfter, certificate.spki, try certificate.summary(),
                    result.startedAt.timeIntervalSince1970])
        }
        let chain = result.chain
        try db.cachedStatement(sql: """
            INSERT INTO observation (target, host, port, sni, address, family, started_at, duration_ms, status,
                failure_category, failure_message, failure_alert, handshake, ats_refusal, trust_store, anchored, path_issues, policy,
                content_hash, revocation, node, vantage, inventory, http_headers, vulnerabilities, enumeration, anchor_in, app)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [scan.target, scan.host, scan.port, scan.sni, result.address, result.family,
                             result.startedAt.timeIntervalSince1970, result.durationMs, result.status.rawValue,
                             result.error?.category.rawValue, result.error?.message, result.error?.alert,
                             rows.handshake, result.atsClientRefusal, chain?.trustStore, rows.anchored, rows.pathIssues,
                             result.ats.policy.rawValue, rows.contentHash, rows.revocation, scan.node, scan.vantage, rows.inventory, rows.headers,
                             rows.vulnerabilities, rows.enumeration, rows.anchorIn, rows.app])
        let observationID = db.lastInsertedRowID
        for reference in rows.references {
            try db.cachedStatement(sql: """
                INSERT INTO observation_certificate (observation_id, role, position, fingerprint, source) VALUES (?, ?, ?, ?, ?)
                """).execute(arguments: [observationID, reference.role, reference.position, reference.fingerprint, reference.source])
        }
        try db.cachedStatement(sql: """
            INSERT INTO verdict (observation_id, policy, judged_at, compliant, failed_rules, findings, pin)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [observationID, result.ats.policy.rawValue, result.startedAt.timeIntervalSince1970,
                             result.ats.compliant ? 1 : 0, rows.failedRules, rows.findings, rows.pin])

        // The address's timeline: a row when this scan's verdict differs from the one in force at its
        // time. A scan stored after a later one (a CLI scan racing the service, a clock step) also
        // fixes up the scan that follows it.
        let time = result.startedAt.timeIntervalSince1970
        let state = rows.timeline
        func stateOf(_ row: Row?) -> [String]? {
            row.map { [$0["condition"], $0["policy"], $0["failed_rules"]] }
        }
        func stateOf(observation row: Row) throws -> [String] {
            let place = "observation \(row["id"] as Int64? ?? 0)"
            return try ScanRows.timeline(status: try StoredValues.known(row["status"], "status", in: place), hasChain: row["has_chain"],
                                         compliant: row["compliant"], policy: row["policy"], failedRules: try StoredValues.rules(row["failed_rules"]),
                                         pinState: try StoredValues.known(row["pin_state"], "pin state", in: place, optional: true))
        }
        let before = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT condition, policy, failed_rules FROM address_change WHERE target = ? AND address = ? AND started_at <= ?
            ORDER BY started_at DESC, rowid DESC LIMIT 1
            """), arguments: [scan.target, result.address, time])
        if stateOf(before) != state {
            try insertChange(target: scan.target, address: result.address, time: time, observationID: observationID,
                             state: state, into: db)
        }
        if let next = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT o.id, o.started_at, o.status, o.trust_store IS NOT NULL AS has_chain, v.compliant, v.policy, v.failed_rules,
                json_extract(v.pin, '$.state') AS pin_state
            FROM observation o JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy
            WHERE o.target = ? AND o.address = ? AND o.started_at > ? ORDER BY o.started_at, o.id LIMIT 1
            """), arguments: [scan.target, result.address, time]) {
            let nextID: Int64 = next["id"]
            let hasRow = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM address_change WHERE observation_id = ?"),
                                           arguments: [nextID]) ?? false
            let nextState = try stateOf(observation: next)
            if nextState == state, hasRow {
                try db.execute(sql: "DELETE FROM address_change WHERE observation_id = ?", arguments: [nextID])
            } else if nextState != state, !hasRow {
                try insertChange(target: scan.target, address: result.address, time: next["started_at"], observationID: nextID,
                                 state: nextState, into: db)
            }
        }

        // A scan older than the address's current state (written late: a node paused past its
        // lease, results replayed from a spill file after newer ones) stays in the history only.
        let current = try Double.fetchOne(db.cachedStatement(sql: ScanRows.currentScanTime), arguments: [scan.target, result.address])
        if ScanRows.isLate(startedAt: result.startedAt.timeIntervalSince1970, current: current, fenced: scan.fence != nil) {
            return []
        }
        // Change detection against what is remembered of this address.
        let previous = try memory(target: scan.target, address: result.address, in: db)
        // What the scan raises is the caller's decision; the store keeps the facts.
        let outcome = decide(previous, StoredScan(target: scan.target, host: scan.host, port: scan.port, sni: scan.sni, result: result),
                             observationID)
        let memory = outcome.memory
        for mark in memory.expiryMarks.subtracting(previous?.expiryMarks ?? []) {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO expiry_alert (target, address, mark, created_at) VALUES (?, ?, ?, ?)")
                .execute(arguments: [scan.target, result.address, mark, result.startedAt.timeIntervalSince1970])
        }
        for (alert, sinks) in outcome.alerts {
            _ = try Self.insert(alert, sinks: sinks, observationID: observationID, in: db)
        }

        let failed = result.status == .failed
        try db.cachedStatement(sql: ScanRows.upsertTargetState).execute(arguments: [
                             scan.target, result.address, scan.host, scan.port, observationID,
                             result.startedAt.timeIntervalSince1970, result.status.rawValue, result.ats.policy.rawValue,
                             result.ats.compliant ? 1 : 0, try StoredValues.json(memory.failedRules),
                             rows.earliestExpiry, memory.leafFingerprint, memory.leafSPKI,
                             result.error?.category.rawValue, memory.consecutiveFailures,
                             failed ? nil : result.startedAt.timeIntervalSince1970,
                             (memory.pinState ?? .none).rawValue, result.pin?.message,
                             memory.atsCompliant.map { $0 ? 1 : 0 }, memory.trusted.map { $0 ? 1 : 0 },
                             memory.unreachableAlerted ? 1 : 0, rows.tags, rows.app, ScanRows.overridesNewerClock(scan)])
        return outcome.alerts.map(\.alert)
    }

    /// One row of an address's timeline; `state` is condition, policy, failed rules (JSON).
    private static func insertChange(target: String, address: String, time: Double, observationID: Int64, state: [String],
                                     into db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO address_change (target, address, started_at, observation_id, condition, policy, failed_rules)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [target, address, time, observationID, state[0], state[1], state[2]])
    }

    /// What is remembered of a target address, or nil before its first scan.
    private static func memory(target: String, address: String, in db: Database) throws -> AddressMemory? {
        // The columns it needs, not `*`: every column of a fetched row is copied.
        let statement = try db.cachedStatement(sql: """
            SELECT pin_state, leaf_fingerprint, leaf_spki, ats_compliant, failed_rules, trusted, consecutive_failures,
                unreachable_alerted
            FROM target_state WHERE target = ? AND address = ?
            """)
        guard let row = try Row.fetchOne(statement, arguments: [target, address]) else { return nil }
        let marks = try String.fetchAll(db.cachedStatement(sql: "SELECT mark FROM expiry_alert WHERE target = ? AND address = ?"),
                                        arguments: [target, address])
        return AddressMemory(
            pinState: try StoredValues.known(row["pin_state"], "pin state", in: "the current state of \(target) \(address)", optional: true),
            leafFingerprint: row["leaf_fingerprint"], leafSPKI: row["leaf_spki"],
            atsCompliant: (row["ats_compliant"] as Int?).map { $0 == 1 },
            failedRules: try StoredValues.rules(row["failed_rules"]),
            trusted: (row["trusted"] as Int?).map { $0 == 1 },
            consecutiveFailures: row["consecutive_failures"], unreachableAlerted: row["unreachable_alerted"] == 1,
            expiryMarks: Set(marks))
    }

    // MARK: - Alerts

    public func pendingDeliveries(dueBy time: Date, sinks: [String], limit: Int) throws -> [PendingDelivery] {
        guard !sinks.isEmpty else { return [] }
        do {
            return try pool.read { db in try Self.due(db, by: time, sinks: sinks, limit: limit) }
        } catch {
            throw Self.storeError(error, doing: "reading pending alerts")
        }
    }

    /// The deliveries `pendingDeliveries` lists, read in the caller's transaction.
    private static func due(_ db: Database, by time: Date, sinks: [String], limit: Int) throws -> [PendingDelivery] {
        let placeholders = Array(repeating: "?", count: sinks.count).joined(separator: ", ")
        return try Row.fetchAll(db, sql: """
            SELECT d.sink, d.attempts, a.document FROM alert_delivery d JOIN alert a ON a.id = d.alert_id
            WHERE d.state = 'pending' AND d.next_attempt_at <= ? AND d.sink IN (\(placeholders))
            ORDER BY a.created_at, a.id LIMIT ?
            """, arguments: StatementArguments([time.timeIntervalSince1970] + sinks + [limit])).compactMap { row in
            guard let alert = try StoredValues.decode(Alert.self, row["document"]) else { return nil }
            return PendingDelivery(alert: alert, sink: row["sink"], attempts: row["attempts"])
        }
    }

    public func claimDeliveries(dueBy time: Date, sinks: [String], limit: Int, lease: Double) throws -> [PendingDelivery] {
        guard !sinks.isEmpty else { return [] }
        do {
            return try pool.write { db in
                var due = try Self.due(db, by: time, sinks: sinks, limit: limit)
                for index in due.indices {
                    due[index].leaseEpoch = try Int64.fetchOne(db, sql: """
                        UPDATE alert_delivery SET next_attempt_at = ?, lease_epoch = lease_epoch + 1 WHERE alert_id = ? AND sink = ?
                        RETURNING lease_epoch
                        """, arguments: [time.timeIntervalSince1970 + lease, due[index].alert.id, due[index].sink]) ?? 0
                }
                return due
            }
        } catch {
            throw Self.storeError(error, doing: "claiming pending alerts")
        }
    }

    public func releaseDeliveries(_ deliveries: [PendingDelivery], dueAt time: Date) throws {
        do {
            try pool.write { db in
                for delivery in deliveries {
                    try db.execute(sql: """
                        UPDATE alert_delivery SET next_attempt_at = ? WHERE alert_id = ? AND sink = ? AND state = 'pending' AND lease_epoch = ?
                        """, arguments: [time.timeIntervalSince1970, delivery.alert.id, delivery.sink, delivery.leaseEpoch])
                }
            }
        } catch {
            throw Self.storeError(error, doing: "releasing pending alerts")
        }
    }

    public func stillHolds(_ delivery: PendingDelivery) throws -> Bool {
        do {
            return try pool.read { db in
                try Bool.fetchOne(db, sql: """
                    SELECT 1 FROM alert_delivery WHERE alert_id = ? AND sink = ? AND state = 'pending' AND lease_epoch = ?
                    """, arguments: [delivery.alert.id, delivery.sink, delivery.leaseEpoch]) ?? false
            }
        } catch {
            throw Self.storeError(error, doing: "checking an alert delivery's claim")
        }
    }

    public func markDelivered(alertID: String, sink: String, at time: Date, leaseEpoch: Int64?) throws {
        do {
            try pool.write { db in
                try db.execute(sql: """
                    UPDATE alert_delivery SET state = 'delivered', delivered_at = ?, attempts = attempts + 1, last_error = NULL
                    WHERE alert_id = ? AND sink = ? AND (? IS NULL OR lease_epoch = ?)
                    """, arguments: [time.timeIntervalSince1970, alertID, sink, leaseEpoch, leaseEpoch])
            }
        } catch {
            throw Self.storeError(error, doing: "recording a delivery")
        }
    }

    public func markFailed(alertID: String, sink: String, error message: String, retryAt: Date, leaseEpoch: Int64?) throws {
        do {
            try pool.write { db in
                try db.execute(sql: """
                    UPDATE alert_delivery SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?
                    WHERE alert_id = ? AND sink = ? AND state = 'pending' AND (? IS NULL OR lease_epoch = ?)
                    """, arguments: [message, retryAt.timeIntervalSince1970, alertID, sink, leaseEpoch, leaseEpoch])
            }
        } catch {
            throw Self.storeError(error, doing: "recording a failed delivery")
        }
    }

    public func alerts(limit: Int) throws -> [StoredAlert] {
        do {
            return try pool.read { db in
                let rows = try Row.fetchAll(db, sql: "SELECT id, document FROM alert ORDER BY created_at DESC, id LIMIT ?",
                                            arguments: [limit])
                return try rows.compactMap { row in
                    guard let alert = try StoredValues.decode(Alert.self, row["document"]) else { return nil }
                    let deliveries = try Row.fetchAll(db, sql: """
                        SELECT sink, state, attempts, last_error FROM alert_delivery WHERE alert_id = ? ORDER BY sink
                        """, arguments: [alert.id]).map { delivery in
                        StoredAlert.Delivery(sink: delivery["sink"],
                                             state: try StoredValues.known(delivery["state"], "delivery state", in: "alert \(alert.id)"),
                                             attempts: delivery["attempts"], lastError: delivery["last_error"])
                    }
                    return StoredAlert(alert: alert, deliveries: deliveries)
                }
            }
        } catch {
            throw Self.storeError(error, doing: "reading alerts")
        }
    }

    /// Stores an alert and its pending deliveries (in the caller's transaction); false when its id was there already.
    private static func insert(_ alert: Alert, sinks: [String], observationID: Int64?, in db: Database) throws -> Bool {
        try db.cachedStatement(sql: ScanRows.insertAlert).execute(arguments: [
            alert.id, alert.createdAt.timeIntervalSince1970, alert.target, alert.address, alert.kind.rawValue,
            alert.severity.rawValue, alert.summary, try StoredValues.json(alert), observationID])
        guard db.changesCount > 0 else { return false }
        for sink in sinks {
            try db.cachedStatement(sql: ScanRows.insertDelivery()).execute(arguments: [alert.id, sink, alert.createdAt.timeIntervalSince1970])
        }
        return true
    }

    public func recordAlert(_ alert: Alert, sinks: [String]) throws -> Bool {
        do {
            return try pool.write { db in try Self.insert(alert, sinks: sinks, observationID: nil, in: db) }
        } catch {
            throw Self.storeError(error, doing: "storing an alert")
        }
    }

    // MARK: - Reading

    public func status() throws -> [TargetStatus] { try status(where: "", arguments: []) }

    public func vantageStatus(of target: String) throws -> [TargetStatus] {
        try status(where: "WHERE t.target LIKE ? ESCAPE '\\'", arguments: [VantageTarget.likePattern(target)])
    }

    private func status(where filter: String, arguments: StatementArguments) throws -> [TargetStatus] {
        do {
            return try pool.read { db in
                try Row.fetchAll(db, sql: """
                    SELECT t.*, (SELECT \(FindingMarks.sql)
                                 FROM verdict v, json_each(v.findings) AS f
                                 WHERE v.observation_id = t.last_observation_id AND v.policy = t.policy) AS findings
                    FROM target_state t \(filter) ORDER BY t.target, t.address
                    """, arguments: arguments).map { row in
                    let place = "the current state of \(row["target"] as String? ?? "?") \(row["address"] as String? ?? "?")"
                    let pinState: PinEvaluation.State = try StoredValues.known((row["pin_state"] as String?) ?? "none", "pin state", in: place)
                    var status = TargetStatus(
                        target: row["target"], address: row["address"], host: row["host"], port: row["port"],
                        lastScanAt: Date(timeIntervalSince1970: row["last_scan_at"]),
                        lastObservationID: row["last_observation_id"],
                        status: try StoredValues.known(row["status"], "status", in: place),
                        policy: try StoredValues.known(row["policy"], "policy", in: place),
                        compliant: CountedVerdict.compliant(row["compliant"] == 1, pinState: pinState),
                        failedRules: CountedVerdict.reasons(try StoredValues.rules(row["failed_rules"]), pinState: pinState),
                        earliestExpiry: (row["earliest_expiry"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        leafFingerprint: row["leaf_fingerprint"], leafSPKI: row["leaf_spki"],
                        failureCategory: try StoredValues.known(row["failure_category"], "failure category", in: place, optional: true),
                        consecutiveFailures: row["consecutive_failures"],
                        lastSuccessAt: (row["last_success_at"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        pinState: pinState)
                    status.trustErrors = try FindingMarks.parse(row["findings"], in: place)
                        .filter { Finding.isTrustError(id: $0.id, severity: $0.severity) }.map(\.id)
                    status.tags = try StoredValues.tags(row["tags"], in: place)
                    status.app = try StoredValues.stored(AppHostOutcome.self, row["app"], "app outcome", in: place)
                    return status
                }
            }
        } catch {
            throw Self.storeError(error, doing: "reading the status")
        }
    }

    public func forEachObservation(startedIn period: ClosedRange<Date>, _ body: (ObservationRow) throws -> Void) throws {
        do {
            try pool.read { db in
                let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                    SELECT id, target, address, started_at, status, policy FROM observation
                    WHERE started_at >= ? AND started_at <= ? ORDER BY started_at, id
                    """), arguments: [period.lowerBound.timeIntervalSince1970, period.upperBound.timeIntervalSince1970])
                while let row = try rows.next() {
                    let id: Int64 = row[0]
                    try body(ObservationRow(id: id, target: row[1], address: row[2], startedAt: Date(timeIntervalSince1970: row[3]),
                                            status: try StoredValues.known(row[4], "status", in: "observation \(id)"),
                                            policy: try StoredValues.known(row[5], "policy", in: "observation \(id)", optional: true)))
                }
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw Self.storeError(error, doing: "reading observations")
        }
    }

    public func history(target: String, limit: Int) throws -> [HistoryEntry] {
        do {
            return try pool.read { db in
                let rows = try Row.fetchAll(db, sql: """
                    SELECT o.*, v.policy, v.compliant, v.failed_rules, v.findings, json_extract(v.pin, '$.state') AS pin_state,
                        (SELECT c.fingerprint FROM observation_certificate c WHERE c.observation_id = o.id AND c.role = 'presented' AND c.position = 0) AS leaf,
                        (SELECT cert.spki_sha256 FROM observation_certificate c JOIN certificate cert ON cert.fingerprint = c.fingerprint
                            WHERE c.observation_id = o.id AND c.role = 'presented' AND c.position = 0) AS leaf_spki
                    FROM observation o JOIN verdict v ON v.observation_id = o.id
                    WHERE o.target = ? OR o.host = ? OR (o.host || ':' || o.port) = ? OR o.target LIKE ? ESCAPE '\\'
                    ORDER BY o.started_at DESC, o.id DESC LIMIT ?
                    """, arguments: [target, target, target, VantageTarget.likePattern(target), limit])
                return try rows.map { row in
                    let place = "observation \(row["id"] as Int64? ?? 0)"
                    let pinState: PinEvaluation.State? = try StoredValues.known(row["pin_state"], "pin state", in: place, optional: true)
                    let handshake = try StoredValues.decode(HandshakeObservation.self, row["handshake"])
                    return HistoryEntry(
                        observationID: row["id"], target: row["target"], address: row["address"],
                        startedAt: Date(timeIntervalSince1970: row["started_at"]), durationMs: row["duration_ms"],
                        status: try StoredValues.known(row["status"], "status", in: place),
                        failureCategory: try StoredValues.known(row["failure_category"], "failure category", in: place, optional: true),
                        failureMessage: row["failure_message"], protocolVersion: handshake?.protocolVersion,
                        cipher: handshake?.cipher.iana, leafFingerprint: row["leaf"], leafSPKI: row["leaf_spki"],
                        policy: try StoredValues.known(row["policy"], "policy", in: place),
                        compliant: CountedVerdict.compliant(row["compliant"] == 1, pinState: pinState),
                        failedRules: CountedVerdict.reasons(try StoredValues.rules(row["failed_rules"]), pinState: pinState),
                        findings: try StoredValues.decode([Finding].self, row["findings"]) ?? [],
                        inventory: try StoredValues.stored(ServerInventory.self, row["inventory"], "inventory", in: place),
                        headers: try StoredValues.stored(HTTPHeadersReport.self, row["http_headers"], "HTTP headers", in: place),
                        vulnerabilities: try StoredValues.stored(VulnerabilityReport.self, row["vulnerabilities"], "vulnerabilities", in: place))
                }
            }
        } catch {
            throw Self.storeError(error, doing: "reading the history of \(target)")
        }
    }

    public func result(observationID: Int64) throws -> AddressScanResult? {
        do {
            return try pool.read { db in
                var summaries: [String: CertificateSummary] = [:]
                return try Self.loadResult(observationID: observationID, in: db, summaries: &summaries)
            }
        } catch {
            throw Self.storeError(error, doing: "reading observation \(observationID)")
        }
    }

    /// Rebuilds a stored result from its rows, in the caller's transaction. `summaries` keeps
    /// decoded certificates between calls (a fleet shares its intermediates and roots).
    static func loadResult(observationID: Int64, in db: Database,
                           summaries: inout [String: CertificateSummary]) throws -> AddressScanResult? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT o.*, v.policy, v.compliant, v.failed_rules, v.findings FROM observation o
            JOIN verdict v ON v.observation_id = o.id AND v.policy = ifnull(o.policy, v.policy)
            WHERE o.id = ? ORDER BY v.judged_at LIMIT 1
            """), arguments: [observationID]) else { return nil }
        let certificates = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT c.role, c.position, c.source, c.fingerprint, cert.der, cert.summary FROM observation_certificate c
            JOIN certificate cert ON cert.fingerprint = c.fingerprint
            WHERE c.observation_id = ? ORDER BY c.role, c.position
            """), arguments: [observationID])
        var presented: [CertificateSummary] = []
        var path: [PathElement] = []
        for entry in certificates {
            let fingerprint: String = entry["fingerprint"]
            var summary: CertificateSummary
            if let known = summaries[fingerprint] {
                summary = known
            } else {
                guard let decoded = try StoredValues.decode(CertificateSummary.self, entry["summary"]) else { continue }
                summary = decoded
                summary.der = entry["der"]
                summaries[fingerprint] = summary
            }
            if entry["role"] == "presented" {
                presented.append(summary)
            } else {
                let index = presented.firstIndex { $0.sha256Fingerprint == summary.sha256Fingerprint }
                path.append(PathElement(certificate: summary,
                                        source: try StoredValues.known((entry["source"] as String?) ?? "presented", "certificate source",
                                                               in: "observation \(observationID)"),
                                        presentedIndex: index))
            }
        }
        // 'path' rows sort before 'presented' ones: fill in the presented indexes now.
        for index in path.indices {
            path[index].presentedIndex = presented.firstIndex { $0.sha256Fingerprint == path[index].certificate.sha256Fingerprint }
        }
        let place = "observation \(observationID)"
        var chain: ChainReport?
        if let trustStore = row["trust_store"] as String? {
            chain = ChainReport(presented: presented, path: path, anchored: row["anchored"] == 1, trustStore: trustStore,
                                issues: try StoredValues.stored([PathBuildingIssue].self, row["path_issues"], "path issues", in: place) ?? [],
                                revocation: try StoredValues.stored(RevocationReport.self, row["revocation"], "revocation facts", in: place))
            chain?.anchorIn = StoredValues.anchorIn(row["anchor_in"])
        }
        let category: ProbeFailureCategory? = try StoredValues.known(row["failure_category"], "failure category", in: place, optional: true)
        let policy: CompliancePolicy = try StoredValues.known(row["policy"], "policy", in: place)
        let failedRules = try StoredValues.rules(row["failed_rules"])
        let findings = try StoredValues.decode([Finding].self, row["findings"]) ?? []
        let rules = Dictionary(uniqueKeysWithValues: policy.rules.map {
            ($0, failedRules.contains($0) ? RuleOutcome.fail : .pass)
        })
        let status: AddressScanResult.Status = try StoredValues.known(row["status"], "status", in: place)
        var result = AddressScanResult(
            address: row["address"], family: row["family"], port: row["port"], status: status,
            startedAt: Date(timeIntervalSince1970: row["started_at"]), durationMs: row["duration_ms"],
            handshake: try StoredValues.decode(HandshakeObservation.self, row["handshake"]),
            atsClientRefusal: row["ats_refusal"],
            error: category.map { ProbeFailure($0, row["failure_message"] ?? "", alert: row["failure_alert"]) },
            chain: chain, findings: findings,
            ats: ATSVerdict(policy: policy, compliant: row["compliant"] == 1,
                            rules: status == .failed ? [:] : rules, failedRules: failedRules))
            .with(inventory: try StoredValues.stored(ServerInventory.self, row["inventory"], "inventory", in: place),
                  headers: try StoredValues.stored(HTTPHeadersReport.self, row["http_headers"], "HTTP headers", in: place),
                  vulnerabilities: try StoredValues.stored(VulnerabilityReport.self, row["vulnerabilities"], "vulnerabilities", in: place),
                  enumeration: try StoredValues.stored(EnumerationReport.self, row["enumeration"], "enumeration", in: place))
            .withinBudget() // Records stored before the budget existed are bounded when read.
        result.app = try StoredValues.stored(AppHostOutcome.self, row["app"], "app outcome", in: place)
        return result
    }

    // MARK: - Scheduled reports

    public func lastReportRun(name: String) throws -> Date? {
        do {
            return try pool.read { db in
                try Double.fetchOne(db, sql: "SELECT max(period_end) FROM report_run WHERE name = ?", arguments: [name])
                    .map(Date.init(timeIntervalSince1970:))
            }
        } catch {
            throw Self.storeError(error, doing: "reading the scheduled reports")
        }
    }

    /// One node per SQLite file: the run is the caller's unless it is recorded already.
    public func claimReportRun(name: String, periodEnd: Date, owner: String, lease: Double) throws -> ReportRunClaim {
        do {
            let recorded = try pool.read { db in
                try Bool.fetchOne(db, sql: "SELECT 1 FROM report_run WHERE name = ? AND period_end = ?",
                                  arguments: [name, periodEnd.timeIntervalSince1970]) ?? false
            }
            return recorded ? .written : .claimed(epoch: 0) // one node: nobody to fence off
        } catch {
            throw Self.storeError(error, doing: "reading the scheduled reports")
        }
    }

    public func holdsReportRun(name: String, periodEnd: Date, owner: String, epoch: Int64) throws -> Bool { true }

    public func recordReportRun(name: String, periodEnd: Date, files: [String], delivery: [String: ReportDelivery],
                                claim: (owner: String, epoch: Int64)?) throws -> Bool {
        do {
            return try pool.write { db in
                try db.execute(sql: """
                    INSERT OR REPLACE INTO report_run (name, period_end, written_at, files, delivery) VALUES (?, ?, ?, ?, ?)
                    """, arguments: [name, periodEnd.timeIntervalSince1970, Date().timeIntervalSince1970, try StoredValues.json(files),
                                     try StoredValues.json(delivery)])
                return true
            }
        } catch {
            throw Self.storeError(error, doing: "recording the scheduled report \(name)")
        }
    }

    public func prune(olderThan cutoff: Date) throws -> PruneResult {
        do {
            return try pool.write { db in
                try db.execute(sql: """
                    DELETE FROM observation WHERE started_at < ?
                    AND id NOT IN (SELECT last_observation_id FROM target_state)
                    """, arguments: [cutoff.timeIntervalSince1970])
                let observations = db.changesCount
                // Each address keeps the change in force at the cutoff and the last reachable one before
                // it: a report starting after the cutoff still knows where every address stood.
                try db.execute(sql: """
                    DELETE FROM address_change WHERE started_at < :cutoff AND rowid NOT IN (
                        SELECT id FROM (SELECT rowid AS id, max(started_at) FROM address_change
                                        WHERE started_at < :cutoff GROUP BY target, address)
                        UNION SELECT id FROM (SELECT rowid AS id, max(started_at) FROM address_change
                                              WHERE started_at < :cutoff AND condition != 'unreachable' GROUP BY target, address))
                    """, arguments: ["cutoff": cutoff.timeIntervalSince1970])
                try db.execute(sql: """
                    DELETE FROM alert WHERE created_at < ?
                    AND NOT EXISTS (SELECT 1 FROM alert_delivery d WHERE d.alert_id = alert.id AND d.state = 'pending')
                    """, arguments: [cutoff.timeIntervalSince1970])
                try db.execute(sql: """
                    DELETE FROM certificate WHERE fingerprint NOT IN (SELECT DISTINCT fingerprint FROM observation_certificate)
                    """)
                return PruneResult(observations: observations, certificates: db.changesCount)
            }
        } catch {
            throw Self.storeError(error, doing: "pruning history")
        }
    }

    // MARK: - Helpers

    /// `mkdir -p`, failing with the directory that could not be made and why, in words.
    private static func createDirectories(_ directory: String) throws {
        var current = ""
        for component in directory.split(separator: "/") {
            current += "/" + component
            // 0777 less the umask, as FileManager creates directories.
            guard mkdir(current, 0o777) != 0 else { continue }
            let failure = errno
            var isDirectory: ObjCBool = false
            if failure == EEXIST, FileManager.default.fileExists(atPath: current, isDirectory: &isDirectory) {
                if isDirectory.boolValue { continue }
                throw StoreError(.unavailable, "cannot create the directory \(current) (a file of that name exists)")
            }
            throw StoreError(.unavailable, "cannot create the directory \(current) (\(String(cString: strerror(failure))))")
        }
    }

    /// Classifies SQLite failures so the service can say what is wrong in plain words.
    static func storeError(_ error: any Error, doing what: String) -> StoreError {
        if let store = error as? StoreError { return store }
        guard let database = error as? DatabaseError else { return StoreError(.other, "\(what): \(error)") }
        switch database.resultCode {
        case .SQLITE_FULL:
            return StoreError(.full, "\(what): the disk (or database) is full")
        case .SQLITE_READONLY:
            return StoreError(.readOnly, "\(what): the database is read-only")
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return StoreError(.corrupt, "\(what): the database file is damaged or not a database (\(database.message ?? "corrupt")); "
                + "stop the service, keep a copy, then restore a backup or recover it with sqlite3's .recover")
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
            return StoreError(.unavailable, "\(what): cannot open the database (\(database.message ?? "permission denied"))")
        case .SQLITE_IOERR:
            return StoreError(.unavailable, "\(what): I/O error (\(database.message ?? "disk?"))")
        default:
            return StoreError(.other, "\(what): \(database.message ?? "\(database)")")
        }
    }
}
