package import TLSAuditStore
package import GRDB
package import TLSAuditModel

/// The schema, as append-only named migrations: a released migration is never edited, only
/// followed by a new one, so a database made by any earlier version upgrades in place.
package enum SQLiteMigrations {
    /// SQLite's spelling of each step of the schema's one history (`StoreMigration`), as GRDB's
    /// migrator runs them (each in a transaction, recorded in `grdb_migrations`).
    package static func migrator(sha256: @escaping SHA256Hex) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for (migration, step) in steps(sha256: sha256) {
            migrator.registerMigration(migration.rawValue) { db in try step?(db) }
        }
        return migrator
    }

    /// Each step's work on SQLite, nil where it has nothing to do.
    private static func steps(sha256: @escaping SHA256Hex) -> [(migration: StoreMigration, step: (@Sendable (Database) throws -> Void)?)] {
        StoreMigration.spelled([
            (.initial, createInitialSchema),
            (.pinState, addPinState),
            (.alerts, addAlerts),
            (.reports, { db in try addReports(db, sha256: sha256) }),
            (.pinCounts, countPinMismatches),
            (.revocation, addRevocation),
            (.fleet, addFleet),
            // The opt-in checks' reports, JSON: ServerInventory (checks: [inventory]), HTTPHeadersReport (checks: [headers]).
            (.inventory, { db in
                try db.execute(sql: "ALTER TABLE observation ADD COLUMN inventory TEXT; ALTER TABLE observation ADD COLUMN http_headers TEXT")
            }),
            // VulnerabilityReport (checks: [vulnerabilities]) and EnumerationReport (Mozilla policies), JSON.
            (.vulnerabilities, { db in
                try db.execute(sql: "ALTER TABLE observation ADD COLUMN vulnerabilities TEXT; ALTER TABLE observation ADD COLUMN enumeration TEXT")
            }),
            // The fleet's fencing tokens live in PostgreSQL (one node writes a SQLite file): here,
            // the delivery's epoch column.
            (.fencing, { db in try db.execute(sql: "ALTER TABLE alert_delivery ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0") }),
            // The public root stores holding a path's anchor (ChainReport.anchorIn, comma-separated;
            // '' for an operator's own anchor): the public-trust rules follow it when history is judged again.
            (.anchorIn, { db in try db.execute(sql: "ALTER TABLE observation ADD COLUMN anchor_in TEXT") }),
            (.tagsApp, { db in try db.execute(sql: StoreSchema.tagsAndApp) }),
            // The claim of each scheduled report run (PostgreSQL has had it since v7-fleet): both
            // stores run the one engine's claim, lease and epoch (StoreEngine+ReportRuns).
            (.reportClaim, { db in try db.execute(sql: StoreSchema.sqlite.reportClaimTable) }),
            // Unchanged scans extend a run (StoreSchema.runTables); the scans already stored are
            // folded into runs the same way.
            (.runs, { db in try db.execute(sql: StoreSchema.sqlite.runTables + StoreSchema.collapseRuns { "\($0) IS \($1)" }) }),
            // ClientSimulationReport (checks: [clients]), JSON.
            (.clients, { db in try db.execute(sql: "ALTER TABLE observation ADD COLUMN clients TEXT") }),
            (.alertTarget, { db in try db.execute(sql: StoreSchema.alertTargetIndex) }),
            (.judgedWith, { db in try db.execute(sql: StoreSchema.judgedWithColumn) }),
            // PostgreSQL's fleet_node.database_server: SQLite has no fleet table.
            (.nodeServer, nil),
            (.observationOrder, { db in try db.execute(sql: StoreSchema.sqlite.observationOrder) }),
            (.checkReports, { db in try db.execute(sql: StoreSchema.checkReportsColumn) }),
            (.ctLogs, { db in try db.execute(sql: StoreSchema.sqlite.ctLogTable) }),
            (.ctSightings, { db in try db.execute(sql: StoreSchema.sqlite.ctSightingTable) }),
            (.ctLogLease, { db in try db.execute(sql: StoreSchema.sqlite.ctLogLease) }),
            // PostgreSQL's fleet_work.lost_epochs: SQLite has no fleet table.
            (.lostLeases, nil),
        ])
    }

    /// Certificates stored once by fingerprint; raw observations apart from verdicts; the
    /// current state per target address for change detection.
    static func createInitialSchema(_ db: Database) throws {
        try db.execute(sql: StoreSchema.sqlite.initialTables)
        try db.execute(sql: "CREATE INDEX observation_time ON observation(started_at)") // replaced in v4
    }

    /// The pin state shown by `status` (pins themselves come with the pin configuration).
    static func addPinState(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE target_state ADD COLUMN pin_state TEXT NOT NULL DEFAULT 'none'")
    }

    /// Alerts with their delivery state per sink, expiry alerts already raised, and what change
    /// detection remembers of each address.
    static func addAlerts(_ db: Database) throws {
        try db.execute(sql: StoreSchema.sqlite.alertTables)
    }

    /// What reports read: each observation's own policy (so the verdict it was stored with is found
    /// without guessing among re-judgements) and a hash of its content (`ObservationContent`); `address_change`, one row each time an address's
    /// verdict changed (condition, policy or failing rules), so that a report walks the changes
    /// rather than every scan; a time index that also answers "how many scans, how many failed";
    /// and the scheduled reports already written (a restart neither skips nor repeats one).
    /// Every scan whose verdict differs from the address's previous scan (or is its first), as
    /// `address_change` rows: the v4 backfill (the store writes the same rows as it goes).
    package static let addressChanges = """
        SELECT target, address, started_at, id, condition, policy, failed_rules FROM (
            SELECT *, LAG(condition || '|' || policy || '|' || failed_rules)
                      OVER (PARTITION BY target, address ORDER BY started_at, id) AS previous
            FROM (
                SELECT o.target, o.address, o.started_at, o.id, v.policy,
                    CASE WHEN json_extract(v.pin, '$.state') = 'mismatch' AND v.failed_rules NOT LIKE '%"pin.mismatch"%'
                         THEN json_insert(v.failed_rules, '$[#]', 'pin.mismatch') ELSE v.failed_rules END AS failed_rules,
                    CASE WHEN o.status = 'failed' AND o.trust_store IS NULL THEN 'unreachable'
                         WHEN o.status = 'completed' AND v.compliant = 1
                              AND ifnull(json_extract(v.pin, '$.state'), '') != 'mismatch' THEN 'compliant'
                         ELSE 'not-compliant' END AS condition
                FROM observation o JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy
            )
        ) WHERE previous IS NULL OR previous != condition || '|' || policy || '|' || failed_rules
        ORDER BY started_at, id
        """

    /// A pin mismatch is never compliant (`CountedVerdict`): the timeline is rebuilt so that
    /// reports count the mismatches stored before, as the store now writes them.
    static func countPinMismatches(_ db: Database) throws {
        try db.execute(sql: """
            DELETE FROM address_change;
            INSERT INTO address_change (target, address, started_at, observation_id, condition, policy, failed_rules)
            \(addressChanges);
            """)
    }

    /// Revocation facts per observation, and the service's cache of revocation answers (OCSP
    /// responses and CRLs as fetched, kept until their nextUpdate) so that a restart does not ask
    /// every responder again.
    static func addRevocation(_ db: Database) throws {
        try db.execute(sql: StoreSchema.sqlite.revocationTables)
    }

    /// Which node and vantage point took each scan (a fleet's nodes, on PostgreSQL; empty for a
    /// single node). The fleet's coordination tables exist on PostgreSQL only: SQLite serves one node.
    static func addFleet(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE observation ADD COLUMN node TEXT;
            ALTER TABLE observation ADD COLUMN vantage TEXT;
            """)
    }

    static func addReports(_ db: Database, sha256: SHA256Hex) throws {
        try db.execute(sql: """
            ALTER TABLE observation ADD COLUMN policy TEXT;
            ALTER TABLE observation ADD COLUMN content_hash TEXT;  -- see ObservationContent
            UPDATE observation SET policy = (SELECT v.policy FROM verdict v WHERE v.observation_id = observation.id
                                             ORDER BY v.judged_at LIMIT 1);
            CREATE INDEX observation_address_time ON observation(target, address, started_at);
            DROP INDEX observation_time;
            CREATE INDEX observation_time_status ON observation(started_at, status, target);
            \(StoreSchema.sqlite.reportTables)
            INSERT INTO address_change (target, address, started_at, observation_id, condition, policy, failed_rules)
            \(addressChanges);
            """)
        try ObservationContent.backfill(db, sha256: sha256)
    }
}

extension ObservationContent {
    /// Fills in `content_hash` for observations stored before it existed (the v4 migration), in
    /// batches so that a database of millions of scans does not hold every hash in memory.
    static func backfill(_ db: Database, batch: Int = 10_000, sha256: SHA256Hex) throws {
        let update = try db.makeStatement(sql: "UPDATE observation SET content_hash = ? WHERE id = ?")
        while true {
            let rows = try Row.fetchAll(db.cachedStatement(sql: """
                SELECT id, status, failure_category, handshake, ats_refusal, trust_store, anchored, path_issues, ifnull(sni, host)
                FROM observation WHERE content_hash IS NULL LIMIT ?
                """), arguments: [batch])
            if rows.isEmpty { return }
            for row in rows {
                let id: Int64 = row[0]
                let chain = try Row.fetchAll(db.cachedStatement(sql: """
                    SELECT role, position, fingerprint, source FROM observation_certificate WHERE observation_id = ?
                    """), arguments: [id]).map { ChainEntry(role: $0[0], position: $0[1], fingerprint: $0[2], source: $0[3]) }
                let hash = hash(status: row[1], failureCategory: row[2], handshake: row[3], atsRefusal: row[4],
                                trustStore: row[5], anchored: row[6], pathIssues: row[7], hostname: row[8], chain: chain,
                                sha256: sha256)
                try update.execute(arguments: [hash, id])
            }
        }
    }
}

extension StoreSchema {
    /// SQLite's spellings of the shared tables' types.
    package static let sqlite = StoreSchema(real: "REAL", bigint: "INTEGER", bytes: "BLOB", serialKey: "INTEGER PRIMARY KEY",
                                            addressChangeKey: "", withoutRowID: " WITHOUT ROWID")
}
