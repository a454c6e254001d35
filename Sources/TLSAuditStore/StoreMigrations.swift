package import GRDB
package import TLSAuditModel

/// The schema, as append-only named migrations: a released migration is never edited, only
/// followed by a new one, so a database made by any earlier version upgrades in place.
package enum StoreMigrations {
    package static func migrator(sha256: @escaping SHA256Hex) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-initial", migrate: createInitialSchema)
        migrator.registerMigration("v2-pin-state", migrate: addPinState)
        migrator.registerMigration("v3-alerts", migrate: addAlerts)
        migrator.registerMigration("v4-reports") { db in try addReports(db, sha256: sha256) }
        migrator.registerMigration("v5-pin-counts", migrate: countPinMismatches)
        migrator.registerMigration("v6-revocation", migrate: addRevocation)
        migrator.registerMigration("v7-fleet", migrate: addFleet)
        migrator.registerMigration("v8-inventory") { db in
            // The opt-in checks' reports, JSON: ServerInventory (checks: [inventory]), HTTPHeadersReport (checks: [headers]).
            try db.execute(sql: "ALTER TABLE observation ADD COLUMN inventory TEXT; ALTER TABLE observation ADD COLUMN http_headers TEXT")
        }
        migrator.registerMigration("v9-vulnerabilities") { db in
            // VulnerabilityReport (checks: [vulnerabilities]) and EnumerationReport (Mozilla policies), JSON.
            try db.execute(sql: "ALTER TABLE observation ADD COLUMN vulnerabilities TEXT; ALTER TABLE observation ADD COLUMN enumeration TEXT")
        }
        migrator.registerMigration("v10-fencing") { db in
            // The fleet's fencing tokens live in PostgreSQL (one node writes a SQLite file); the
            // migration keeps the one list of names both stores share, with the delivery's epoch column.
            try db.execute(sql: "ALTER TABLE alert_delivery ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v11-anchor-in") { db in
            // The public root stores holding a path's anchor (ChainReport.anchorIn, comma-separated;
            // '' for an operator's own anchor): the public-trust rules follow it when history is judged again.
            try db.execute(sql: "ALTER TABLE observation ADD COLUMN anchor_in TEXT")
        }
        migrator.registerMigration("v12-tags-app") { db in try db.execute(sql: tagsAndApp) }
        migrator.registerMigration("v13-report-claim") { db in
            // The claim of each scheduled report run (PostgreSQL has had it since v7-fleet): both
            // stores run the one engine's claim, lease and epoch (StoreEngine+ReportRuns).
            try db.execute(sql: """
                CREATE TABLE report_claim (
                    name TEXT NOT NULL,
                    period_end REAL NOT NULL,
                    owner TEXT NOT NULL,
                    lease_until REAL NOT NULL,
                    epoch INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (name, period_end)
                )
                """)
        }
        return migrator
    }

    /// A target's configured tags (JSON [String]) with its current state, and the app outcome
    /// (JSON AppHostOutcome, NULL when the target is judged by no app's rules) of each scan and of
    /// the current state. The same script on PostgreSQL.
    package static let tagsAndApp = """
        ALTER TABLE target_state ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE target_state ADD COLUMN app TEXT;
        ALTER TABLE observation ADD COLUMN app TEXT;
        """

    /// Certificates stored once by fingerprint; raw observations apart from verdicts; the
    /// current state per target address for change detection.
    static func createInitialSchema(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE certificate (
                fingerprint TEXT PRIMARY KEY,          -- SHA-256 of the DER, lowercase hex
                der BLOB NOT NULL,
                subject TEXT NOT NULL,
                issuer TEXT NOT NULL,
                not_before REAL NOT NULL,              -- Unix seconds
                not_after REAL NOT NULL,
                spki_sha256 TEXT NOT NULL,             -- base64 SPKI pin
                summary TEXT NOT NULL,                 -- JSON CertificateSummary without the DER
                first_seen REAL NOT NULL
            );
            CREATE INDEX certificate_not_after ON certificate(not_after);

            -- What a probe saw, independent of any policy.
            CREATE TABLE observation (
                id INTEGER PRIMARY KEY,
                target TEXT NOT NULL,
                host TEXT NOT NULL,
                port INTEGER NOT NULL,
                sni TEXT,
                address TEXT NOT NULL,
                family TEXT NOT NULL,
                started_at REAL NOT NULL,
                duration_ms INTEGER NOT NULL,
                status TEXT NOT NULL,                  -- completed | failed
                failure_category TEXT,
                failure_message TEXT,
                failure_alert TEXT,
                handshake TEXT,                        -- JSON HandshakeObservation
                ats_refusal TEXT,
                trust_store TEXT,
                anchored INTEGER,
                path_issues TEXT                       -- JSON [PathBuildingIssue]
            );
            CREATE INDEX observation_target_time ON observation(target, started_at);
            CREATE INDEX observation_time ON observation(started_at);

            CREATE TABLE observation_certificate (
                observation_id INTEGER NOT NULL REFERENCES observation(id) ON DELETE CASCADE,
                role TEXT NOT NULL,                    -- presented | path
                position INTEGER NOT NULL,
                fingerprint TEXT NOT NULL REFERENCES certificate(fingerprint),
                source TEXT,                           -- path only: presented | trust-store
                PRIMARY KEY (observation_id, role, position)
            );
            CREATE INDEX observation_certificate_fingerprint ON observation_certificate(fingerprint);

            -- A judgement of an observation under one policy; recomputable from the observation.
            CREATE TABLE verdict (
                observation_id INTEGER NOT NULL REFERENCES observation(id) ON DELETE CASCADE,
                policy TEXT NOT NULL,
                judged_at REAL NOT NULL,
                compliant INTEGER NOT NULL,
                failed_rules TEXT NOT NULL,            -- JSON [String]
                findings TEXT NOT NULL,                -- JSON [Finding]
                PRIMARY KEY (observation_id, policy)
            );

            CREATE TABLE target_state (
                target TEXT NOT NULL,
                address TEXT NOT NULL,
                host TEXT NOT NULL,
                port INTEGER NOT NULL,
                last_observation_id INTEGER NOT NULL,
                last_scan_at REAL NOT NULL,
                status TEXT NOT NULL,
                policy TEXT,
                compliant INTEGER,
                failed_rules TEXT,
                earliest_expiry REAL,
                leaf_fingerprint TEXT,
                leaf_spki TEXT,
                failure_category TEXT,
                consecutive_failures INTEGER NOT NULL DEFAULT 0,
                last_success_at REAL,
                PRIMARY KEY (target, address)
            );
            """)
    }

    /// The pin state shown by `status` (pins themselves come with the pin configuration).
    static func addPinState(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE target_state ADD COLUMN pin_state TEXT NOT NULL DEFAULT 'none'")
    }

    /// Alerts with their delivery state per sink, expiry alerts already raised, and what change
    /// detection remembers of each address.
    static func addAlerts(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE alert (
                id TEXT PRIMARY KEY,                   -- stable: receivers deduplicate on it
                created_at REAL NOT NULL,
                target TEXT NOT NULL,
                address TEXT NOT NULL,
                kind TEXT NOT NULL,
                severity TEXT NOT NULL,
                summary TEXT NOT NULL,
                document TEXT NOT NULL,                -- JSON Alert
                observation_id INTEGER
            );
            CREATE INDEX alert_time ON alert(created_at);

            CREATE TABLE alert_delivery (
                alert_id TEXT NOT NULL REFERENCES alert(id) ON DELETE CASCADE,
                sink TEXT NOT NULL,
                state TEXT NOT NULL,                   -- pending | delivered
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at REAL NOT NULL,
                last_error TEXT,
                delivered_at REAL,
                PRIMARY KEY (alert_id, sink)
            );
            CREATE INDEX alert_delivery_due ON alert_delivery(state, next_attempt_at);

            CREATE TABLE expiry_alert (
                target TEXT NOT NULL,
                address TEXT NOT NULL,
                mark TEXT NOT NULL,                    -- certificate fingerprint # threshold
                created_at REAL NOT NULL,
                PRIMARY KEY (target, address, mark)
            );

            ALTER TABLE target_state ADD COLUMN pin_message TEXT;
            ALTER TABLE target_state ADD COLUMN ats_compliant INTEGER;
            ALTER TABLE target_state ADD COLUMN trusted INTEGER;
            ALTER TABLE target_state ADD COLUMN unreachable_alerted INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE verdict ADD COLUMN pin TEXT;
            """)
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
        try db.execute(sql: """
            ALTER TABLE observation ADD COLUMN revocation TEXT;   -- JSON RevocationReport
            CREATE TABLE revocation_answer (
                key TEXT PRIMARY KEY,                  -- "ocsp URL sha256(request)" or "crl URL"
                body BLOB NOT NULL,                    -- the DER OCSP response or CRL as fetched
                expires_at REAL NOT NULL
            );
            """)
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

            CREATE TABLE address_change (
                target TEXT NOT NULL,
                address TEXT NOT NULL,
                started_at REAL NOT NULL,
                observation_id INTEGER NOT NULL,
                condition TEXT NOT NULL,               -- compliant | not-compliant | unreachable
                policy TEXT NOT NULL,
                failed_rules TEXT NOT NULL             -- JSON [String], as in verdict
            );
            CREATE INDEX address_change_address ON address_change(target, address, started_at);
            CREATE INDEX address_change_time ON address_change(started_at);
            CREATE INDEX address_change_observation ON address_change(observation_id);
            INSERT INTO address_change (target, address, started_at, observation_id, condition, policy, failed_rules)
            \(addressChanges);

            CREATE TABLE report_run (
                name TEXT NOT NULL,                    -- the configured report's name
                period_end REAL NOT NULL,              -- the scheduled instant the report covers up to
                written_at REAL NOT NULL,
                files TEXT NOT NULL,                   -- JSON [String]: paths written
                delivery TEXT,                         -- JSON {sink: "delivered" | error}
                PRIMARY KEY (name, period_end)
            );
            """)
        try ObservationContent.backfill(db, sha256: sha256)
    }
}
