import Foundation
package import TLSAuditStore

/// The schema on PostgreSQL, as the same named, append-only migrations as SQLite's
/// (`SQLiteMigrations`): what a released migration creates never changes, a change comes as a new
/// migration. The tables both backends share are written once (`StoreSchema.postgres`). JSON
/// documents are kept as text, byte for byte as the store wrote them (as on SQLite), and cast to
/// `json` where a query reads into them (`PostgresDialect`).
enum PostgresMigrations {
    /// The key of the advisory lock every node takes while it migrates: two nodes starting
    /// against one database migrate once, one after the other.
    static let lockKey: Int64 = 0x746C_7361_7564_6974 // "tlsaudit"

    /// Every step of the schema's history, spelled for PostgreSQL: the script, nil where it has nothing to do.
    static let all = StoreMigration.spelled([
        (StoreMigration.initial, StoreSchema.postgres.initialTables),
        (StoreMigration.pinState, "ALTER TABLE target_state ADD COLUMN pin_state TEXT NOT NULL DEFAULT 'none';"),
        (StoreMigration.alerts, StoreSchema.postgres.alertTables),
        // The backfills SQLite's v4 and v5 run have nothing to fill here: PostgreSQL stores begin
        // with this schema, and the store writes these columns and rows as it goes.
        (StoreMigration.reports, """
            ALTER TABLE observation ADD COLUMN policy TEXT;
            ALTER TABLE observation ADD COLUMN content_hash TEXT;
            CREATE INDEX observation_address_time ON observation(target, address, started_at);
            CREATE INDEX observation_time_status ON observation(started_at, status, target);
            \(StoreSchema.postgres.reportTables)
            """),
        (StoreMigration.pinCounts, nil),
        (StoreMigration.revocation, StoreSchema.postgres.revocationTables),
        // The fleet: which node and vantage took each scan; the configuration every node runs
        // (versions, newest wins); the nodes' heartbeats; the work queue (one row per target and
        // vantage, '*' for "any one vantage", claimed under a lease); one lockable row per host
        // (the fleet-wide per-host cap); claims of scheduled report runs; copies from SQLite files
        // (`store copy`, resumable). Times are the server's
        // clock in Unix seconds, so that nodes with skewed clocks agree on leases.
        (StoreMigration.fleet, """
            ALTER TABLE observation ADD COLUMN node TEXT;
            ALTER TABLE observation ADD COLUMN vantage TEXT;
            CREATE TABLE fleet_configuration (
                version BIGSERIAL PRIMARY KEY,
                applied_at DOUBLE PRECISION NOT NULL,
                applied_by TEXT NOT NULL,
                document TEXT NOT NULL,
                sha256 TEXT NOT NULL
            );
            CREATE TABLE fleet_node (
                name TEXT PRIMARY KEY,
                vantage TEXT NOT NULL,
                configuration_version BIGINT,
                started_at DOUBLE PRECISION NOT NULL,
                heartbeat_at DOUBLE PRECISION NOT NULL,
                in_flight INTEGER NOT NULL DEFAULT 0,
                scans_per_minute DOUBLE PRECISION NOT NULL DEFAULT 0,
                scans_total BIGINT NOT NULL DEFAULT 0,
                process TEXT,
                poll DOUBLE PRECISION NOT NULL,
                lease DOUBLE PRECISION NOT NULL
            );
            CREATE TABLE fleet_host (host TEXT PRIMARY KEY);
            CREATE TABLE fleet_work (
                target TEXT NOT NULL,
                vantage TEXT NOT NULL,
                host TEXT NOT NULL REFERENCES fleet_host(host),
                scan_interval DOUBLE PRECISION NOT NULL,
                next_due DOUBLE PRECISION NOT NULL,
                consecutive_failures INTEGER NOT NULL DEFAULT 0,
                lease_owner TEXT,
                lease_until DOUBLE PRECISION,
                last_node TEXT,
                last_done_at DOUBLE PRECISION,
                updated_at DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM now()),
                PRIMARY KEY (target, vantage)
            );
            CREATE INDEX fleet_work_due ON fleet_work(next_due);
            CREATE INDEX fleet_work_updated ON fleet_work(updated_at);
            CREATE INDEX fleet_work_host ON fleet_work(host, lease_until);
            CREATE TABLE store_copy (
                source TEXT PRIMARY KEY,
                started_at DOUBLE PRECISION NOT NULL,
                finished_at DOUBLE PRECISION
            );
            CREATE TABLE report_claim (
                name TEXT NOT NULL,
                period_end DOUBLE PRECISION NOT NULL,
                owner TEXT NOT NULL,
                lease_until DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (name, period_end)
            );
            """),
        // The opt-in checks' reports, JSON: ServerInventory (checks: [inventory]), HTTPHeadersReport (checks: [headers]).
        (StoreMigration.inventory, "ALTER TABLE observation ADD COLUMN inventory TEXT; ALTER TABLE observation ADD COLUMN http_headers TEXT;"),
        // VulnerabilityReport (checks: [vulnerabilities]) and EnumerationReport (Mozilla policies), JSON.
        (StoreMigration.vulnerabilities, "ALTER TABLE observation ADD COLUMN vulnerabilities TEXT; ALTER TABLE observation ADD COLUMN enumeration TEXT;"),
        // Fencing tokens: every claim of a work row (from one sequence, so a row removed and added
        // again never repeats a token), a delivery or a report run raises its epoch; a write made
        // under an older epoch (a node paused past its lease) is refused; `done_epoch` is the claim
        // whose completion was written (its result may still be on its way to the store). And a
        // node's identity: the process that holds its name (a random id per start) and its host.
        (StoreMigration.fencing, """
            CREATE SEQUENCE fleet_lease_epoch;
            ALTER TABLE fleet_work ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
            ALTER TABLE fleet_work ADD COLUMN done_epoch BIGINT NOT NULL DEFAULT 0;
            ALTER TABLE alert_delivery ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
            ALTER TABLE report_claim ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
            ALTER TABLE fleet_node ADD COLUMN instance TEXT;
            ALTER TABLE fleet_node ADD COLUMN host TEXT;
            """),
        // The public root stores holding a path's anchor (ChainReport.anchorIn, comma-separated).
        (StoreMigration.anchorIn, "ALTER TABLE observation ADD COLUMN anchor_in TEXT;"),
        // Tags with the current state, the app outcome with each scan and the current state (SQLite's script).
        (StoreMigration.tagsApp, StoreSchema.tagsAndApp),
        // report_claim exists here since v7-fleet; SQLite gains it (the one list of names both share).
        (StoreMigration.reportClaim, nil),
        // Unchanged scans extend a run; the scans already stored are folded into runs (SQLite's script).
        // The rows every scan updates leave room in their page for the new version (a HOT update:
        // no index touched, the old version pruned in place), so that an unchanged scan grows nothing.
        (StoreMigration.runs, StoreSchema.postgres.runTables + StoreSchema.collapseRuns { "\($0) IS NOT DISTINCT FROM \($1)" } + """
            ALTER TABLE target_state SET (fillfactor = 50);
            ALTER TABLE observation_run SET (fillfactor = 50);
            """),
        // ClientSimulationReport (checks: [clients]), JSON.
        (StoreMigration.clients, "ALTER TABLE observation ADD COLUMN clients TEXT;"),
        // A target's alerts, newest first, for its page (SQLite's script).
        (StoreMigration.alertTarget, StoreSchema.alertTargetIndex),
        // The trust inputs each scan was judged with (JSON JudgedWith).
        (StoreMigration.judgedWith, StoreSchema.judgedWithColumn),
        // The server each node's connections reach (`host:port`): `fleet status` across a failover.
        (StoreMigration.nodeServer, "ALTER TABLE fleet_node ADD COLUMN database_server TEXT;"),
        // The order of observation apart from wall-clock times (SQLite's script, this dialect's types).
        (StoreMigration.observationOrder, StoreSchema.postgres.observationOrder),
        // The reports of the opt-in checks without a column of their own (JSON).
        (StoreMigration.checkReports, StoreSchema.checkReportsColumn),
        // Where the CT follower stands in each log.
        (StoreMigration.ctLogs, StoreSchema.postgres.ctLogTable),
        // What the follower judged, and (a fleet) which node follows each log.
        (StoreMigration.ctSightings, StoreSchema.postgres.ctSightingTable),
        (StoreMigration.ctLogLease, StoreSchema.postgres.ctLogLease),
        // The last claims of each work row whose lease lapsed before their completion was written,
        // and that something took over (a node paused or cut off past its lease): only their
        // results are refused once a newer one is stored; a claim completed under its lease keeps
        // its result, stored by its time however late its writer brings it.
        (StoreMigration.lostLeases, "ALTER TABLE fleet_work ADD COLUMN lost_epochs BIGINT[] NOT NULL DEFAULT '{}';"),
    ] as [(StoreMigration, String?)])

    /// Brings the database to this version's schema, once however many nodes start together (an
    /// advisory lock held while migrating). A database migrated by a newer tlsaudit is refused:
    /// this version would misread what it does not know.
    static func migrate(_ connection: PostgresConnection) throws {
        try connection.execute("SELECT pg_advisory_lock($1)", [.int(lockKey)])
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock($1)", [.int(lockKey)]) }
        // Created only when missing: CREATE ... IF NOT EXISTS needs the right to create even when
        // the table is there, and a read-only role (reports, status) must open a current schema.
        let exists = try connection.execute("SELECT to_regclass('tlsaudit_migration') IS NOT NULL AS present").bool(0, "present") ?? false
        if !exists {
            try connection.execute("""
                CREATE TABLE IF NOT EXISTS tlsaudit_migration (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)
                """)
        }
        let applied = try appliedMigrations(connection)
        try refuseUnknown(applied, display: connection.settings.display)
        for (migration, script) in all where !applied.contains(migration.rawValue) {
            try connection.transaction {
                if let script { try connection.run(script: script) }
                try connection.execute("INSERT INTO tlsaudit_migration (name, applied_at) VALUES ($1, $2)",
                                       [.text(migration.rawValue), .double(Date().timeIntervalSince1970)])
            }
        }
    }

    /// Throws when `applied` has a migration this version does not know (a newer tlsaudit's).
    static func refuseUnknown(_ applied: [String], display: String) throws {
        let known = Set(StoreMigration.allCases.map(\.rawValue))
        let unknown = applied.filter { !known.contains($0) }
        guard !unknown.isEmpty else { return }
        throw StoreError(.incompatible, """
            \(display) has the schema of a newer tlsaudit (migration \(unknown.joined(separator: ", ")), unknown to this \
            version): upgrade tlsaudit on this node
            """)
    }

    /// The migrations applied, in the order they were.
    static func appliedMigrations(_ connection: PostgresConnection) throws -> [String] {
        let rows = try connection.execute("SELECT name FROM tlsaudit_migration ORDER BY applied_at, name")
        return (0..<rows.count).compactMap { rows.text($0, "name") }
    }
}

extension StoreSchema {
    /// PostgreSQL's spellings of the shared tables' types.
    package static let postgres = StoreSchema(real: "DOUBLE PRECISION", bigint: "BIGINT", bytes: "BYTEA",
                                              serialKey: "BIGSERIAL PRIMARY KEY", addressChangeKey: "id BIGSERIAL PRIMARY KEY,", withoutRowID: "")
}
