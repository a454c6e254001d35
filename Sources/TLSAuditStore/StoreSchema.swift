/// The tables both backends create, written once: the migrations of each (`SQLiteMigrations`,
/// `PostgresMigrations`) run these scripts with the column types their dialect spells its own
/// way, so that a table cannot differ between the two by accident. Comments say what a column
/// holds; times are Unix seconds; JSON documents are text, byte for byte as the store wrote them.
package struct StoreSchema: Sendable {
    /// A floating-point column (`REAL`, `DOUBLE PRECISION`).
    package var real: String
    /// A 64-bit integer referring to a row id (`INTEGER`, `BIGINT`).
    package var bigint: String
    /// Raw bytes (`BLOB`, `BYTEA`).
    package var bytes: String
    /// An integer key numbered by the database (`INTEGER PRIMARY KEY`, `BIGSERIAL PRIMARY KEY`).
    package var serialKey: String
    /// `address_change`'s own key column with its comma, where the dialect has no implicit row id.
    package var addressChangeKey: String

    /// What follows a CREATE TABLE whose key is its only index (` WITHOUT ROWID` on SQLite).
    package var withoutRowID: String

    /// A backend's spellings (`StoreSchema.sqlite` in TLSAuditSQLite, `StoreSchema.postgres` in TLSAuditPostgres).
    package init(real: String, bigint: String, bytes: String, serialKey: String, addressChangeKey: String, withoutRowID: String) {
        self.real = real
        self.bigint = bigint
        self.bytes = bytes
        self.serialKey = serialKey
        self.addressChangeKey = addressChangeKey
        self.withoutRowID = withoutRowID
    }

    /// v1: certificates stored once by fingerprint; raw observations apart from verdicts; the
    /// current state per target address for change detection.
    package var initialTables: String {
        """
        CREATE TABLE certificate (
            fingerprint TEXT PRIMARY KEY,          -- SHA-256 of the DER, lowercase hex
            der \(bytes) NOT NULL,
            subject TEXT NOT NULL,
            issuer TEXT NOT NULL,
            not_before \(real) NOT NULL,
            not_after \(real) NOT NULL,
            spki_sha256 TEXT NOT NULL,             -- base64 SPKI pin
            summary TEXT NOT NULL,                 -- JSON CertificateSummary without the DER
            first_seen \(real) NOT NULL
        );
        CREATE INDEX certificate_not_after ON certificate(not_after);

        -- What a probe saw, independent of any policy.
        CREATE TABLE observation (
            id \(serialKey),
            target TEXT NOT NULL,
            host TEXT NOT NULL,
            port INTEGER NOT NULL,
            sni TEXT,
            address TEXT NOT NULL,
            family TEXT NOT NULL,
            started_at \(real) NOT NULL,
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

        CREATE TABLE observation_certificate (
            observation_id \(bigint) NOT NULL REFERENCES observation(id) ON DELETE CASCADE,
            role TEXT NOT NULL,                    -- presented | path
            position INTEGER NOT NULL,
            fingerprint TEXT NOT NULL REFERENCES certificate(fingerprint),
            source TEXT,                           -- path only: presented | trust-store
            PRIMARY KEY (observation_id, role, position)
        );
        CREATE INDEX observation_certificate_fingerprint ON observation_certificate(fingerprint);

        -- A judgement of an observation under one policy; recomputable from the observation.
        CREATE TABLE verdict (
            observation_id \(bigint) NOT NULL REFERENCES observation(id) ON DELETE CASCADE,
            policy TEXT NOT NULL,
            judged_at \(real) NOT NULL,
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
            last_observation_id \(bigint) NOT NULL,
            last_scan_at \(real) NOT NULL,
            status TEXT NOT NULL,
            policy TEXT,
            compliant INTEGER,
            failed_rules TEXT,
            earliest_expiry \(real),
            leaf_fingerprint TEXT,
            leaf_spki TEXT,
            failure_category TEXT,
            consecutive_failures INTEGER NOT NULL DEFAULT 0,
            last_success_at \(real),
            PRIMARY KEY (target, address)
        );
        """
    }

    /// v3: alerts with their delivery state per sink, expiry alerts already raised, and what
    /// change detection remembers of each address.
    package var alertTables: String {
        """
        CREATE TABLE alert (
            id TEXT PRIMARY KEY,                   -- stable: receivers deduplicate on it
            created_at \(real) NOT NULL,
            target TEXT NOT NULL,
            address TEXT NOT NULL,
            kind TEXT NOT NULL,
            severity TEXT NOT NULL,
            summary TEXT NOT NULL,
            document TEXT NOT NULL,                -- JSON Alert
            observation_id \(bigint)
        );
        CREATE INDEX alert_time ON alert(created_at);

        CREATE TABLE alert_delivery (
            alert_id TEXT NOT NULL REFERENCES alert(id) ON DELETE CASCADE,
            sink TEXT NOT NULL,
            state TEXT NOT NULL,                   -- pending | delivered
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at \(real) NOT NULL,
            last_error TEXT,
            delivered_at \(real),
            PRIMARY KEY (alert_id, sink)
        );
        CREATE INDEX alert_delivery_due ON alert_delivery(state, next_attempt_at);

        CREATE TABLE expiry_alert (
            target TEXT NOT NULL,
            address TEXT NOT NULL,
            mark TEXT NOT NULL,                    -- certificate fingerprint # threshold
            created_at \(real) NOT NULL,
            PRIMARY KEY (target, address, mark)
        );

        ALTER TABLE target_state ADD COLUMN pin_message TEXT;
        ALTER TABLE target_state ADD COLUMN ats_compliant INTEGER;
        ALTER TABLE target_state ADD COLUMN trusted INTEGER;
        ALTER TABLE target_state ADD COLUMN unreachable_alerted INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE verdict ADD COLUMN pin TEXT;
        """
    }

    /// v4's tables: `address_change`, one row each time an address's verdict changed (condition,
    /// policy or failing rules), so that a report walks the changes rather than every scan; and
    /// the scheduled reports already written (a restart neither skips nor repeats one).
    package var reportTables: String {
        """
        CREATE TABLE address_change (
            \(addressChangeKey)
            target TEXT NOT NULL,
            address TEXT NOT NULL,
            started_at \(real) NOT NULL,
            observation_id \(bigint) NOT NULL,
            condition TEXT NOT NULL,               -- compliant | not-compliant | unreachable
            policy TEXT NOT NULL,
            failed_rules TEXT NOT NULL             -- JSON [String], as in verdict
        );
        CREATE INDEX address_change_address ON address_change(target, address, started_at);
        CREATE INDEX address_change_time ON address_change(started_at);
        CREATE INDEX address_change_observation ON address_change(observation_id);

        CREATE TABLE report_run (
            name TEXT NOT NULL,                    -- the configured report's name
            period_end \(real) NOT NULL,           -- the scheduled instant the report covers up to
            written_at \(real) NOT NULL,
            files TEXT NOT NULL,                   -- JSON [String]: paths written
            delivery TEXT,                         -- JSON {sink: "delivered" | error}
            PRIMARY KEY (name, period_end)
        );
        """
    }

    /// v6: revocation facts per observation, and the cache of revocation answers (OCSP
    /// responses and CRLs as fetched, kept until their nextUpdate) so that a restart does not ask
    /// every responder again.
    package var revocationTables: String {
        """
        ALTER TABLE observation ADD COLUMN revocation TEXT;   -- JSON RevocationReport
        CREATE TABLE revocation_answer (
            key TEXT PRIMARY KEY,                  -- "ocsp URL sha256(request)" or "crl URL"
            body \(bytes) NOT NULL,                -- the DER OCSP response or CRL as fetched
            expires_at \(real) NOT NULL
        );
        """
    }

    /// v13 on SQLite (PostgreSQL's v7-fleet made it): the claim of each scheduled report run,
    /// with its lease and epoch.
    package var reportClaimTable: String {
        """
        CREATE TABLE report_claim (
            name TEXT NOT NULL,
            period_end \(real) NOT NULL,
            owner TEXT NOT NULL,
            lease_until \(real) NOT NULL,
            epoch \(bigint) NOT NULL DEFAULT 0,
            PRIMARY KEY (name, period_end)
        );
        """
    }

    /// v14: runs of unchanged scans. An observation is the first scan of a run; each later scan of
    /// the address whose stored content and verdict are the same (`ScanRows.runKey`) extends its
    /// run instead of storing a new observation: a row of `run_scan` (its time, duration and node:
    /// no scan is lost) and the run's summary in `observation_run` (only runs with repeats have
    /// one). The view `scan` lists every scan, first or repeat. The address's current run key is
    /// kept with its state.
    package var runTables: String {
        """
        CREATE TABLE observation_run (
            observation_id \(bigint) PRIMARY KEY REFERENCES observation(id) ON DELETE CASCADE,
            repeats INTEGER NOT NULL,              -- scans after the first
            last_seen_at \(real) NOT NULL,         -- when the newest of them started
            duration_min_ms INTEGER NOT NULL,      -- their durations (the first scan's is its own)
            duration_max_ms INTEGER NOT NULL,
            duration_sum_ms \(bigint) NOT NULL
        );
        CREATE TABLE run_scan (
            observation_id \(bigint) NOT NULL REFERENCES observation(id) ON DELETE CASCADE,
            started_at \(real) NOT NULL,
            duration_ms INTEGER NOT NULL,
            node TEXT,
            PRIMARY KEY (observation_id, started_at)
        )\(withoutRowID);
        CREATE VIEW scan AS
            SELECT o.id AS observation_id, o.target, o.address, o.started_at, o.duration_ms, o.node, o.vantage, o.status
            FROM observation o
            UNION ALL
            SELECT s.observation_id, o.target, o.address, s.started_at, s.duration_ms, s.node, o.vantage, o.status
            FROM run_scan s JOIN observation o ON o.id = s.observation_id;
        ALTER TABLE target_state ADD COLUMN run_key TEXT;
        """
    }

    /// v19: the order of observation, apart from the recorded wall-clock times. A scan taken while
    /// the wall clock stood behind its address's newest scan (stepped back) stands just after that
    /// scan (`BatchWrites.orderAt`): the history lists it, and the timeline's newest row is found, by
    /// this order. NULL in rows stored before: their order is their start time (`last_seen_at` for
    /// a run, `last_scan_at` for a state).
    package var observationOrder: String {
        """
        ALTER TABLE observation ADD COLUMN order_at \(real);
        ALTER TABLE observation_run ADD COLUMN last_order_at \(real);
        ALTER TABLE address_change ADD COLUMN order_at \(real);
        ALTER TABLE target_state ADD COLUMN order_at \(real);
        """
    }

    /// The columns (of observation `o` and its own verdict `v`) whose equality makes two scans of
    /// an address one run, for the v14 migration; what the store compares as it goes is
    /// `ScanRows.runKey`, a hash of the same values. `same` is the dialect's NULL-safe equality.
    package static let runColumns = [
        "o.host", "o.port", "o.sni", "o.family", "o.status", "o.failure_category", "o.failure_message", "o.failure_alert",
        "o.handshake", "o.ats_refusal", "o.trust_store", "o.anchored", "o.path_issues", "o.policy", "o.content_hash",
        "o.revocation", "o.vantage", "o.inventory", "o.http_headers", "o.vulnerabilities", "o.enumeration", "o.anchor_in",
        "o.app", "v.compliant", "v.failed_rules", "v.findings", "v.pin",
    ]

    /// The v14 migration's script: existing observations that repeat the one before them (by
    /// start time, per address) become repeats of the first of their run (their time, duration
    /// and node kept in `run_scan`; a second scan of a run at the same instant is one scan); what
    /// pointed at a repeat (the current state, alerts, the timeline) points at its run's first
    /// scan, and the repeats' rows go. `same(a, b)` spells NULL-safe equality.
    package static func collapseRuns(same: (String, String) -> String) -> String {
        let columns = runColumns.enumerated().map { "\($0.element) AS c\($0.offset)" }.joined(separator: ", ")
        let lagged = runColumns.enumerated().map { "LAG(\($0.element)) OVER w AS p\($0.offset)" }.joined(separator: ", ")
        let equal = runColumns.indices.map { same("c\($0)", "p\($0)") }.joined(separator: " AND ")
        return """
            CREATE TEMPORARY TABLE run_member AS
            SELECT id, head_id, started_at, duration_ms FROM (
                SELECT id, started_at, duration_ms,
                    FIRST_VALUE(id) OVER (PARTITION BY target, address, run ORDER BY started_at, id) AS head_id
                FROM (
                    SELECT id, target, address, started_at, duration_ms,
                        SUM(head) OVER (PARTITION BY target, address ORDER BY started_at, id ROWS UNBOUNDED PRECEDING) AS run
                    FROM (
                        SELECT id, target, address, started_at, duration_ms,
                            CASE WHEN previous_id IS NOT NULL AND \(equal) THEN 0 ELSE 1 END AS head
                        FROM (
                            SELECT o.id, o.target, o.address, o.started_at, o.duration_ms, \(columns),
                                LAG(o.id) OVER w AS previous_id, \(lagged)
                            FROM observation o JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy
                            WINDOW w AS (PARTITION BY o.target, o.address ORDER BY o.started_at, o.id)
                        ) compared
                    ) marked
                ) numbered
            ) grouped WHERE id != head_id;
            CREATE INDEX run_member_id ON run_member(id);
            INSERT INTO run_scan (observation_id, started_at, duration_ms, node)
            SELECT m.head_id, m.started_at, m.duration_ms, o.node FROM run_member m JOIN observation o ON o.id = m.id
            WHERE true ON CONFLICT DO NOTHING;
            INSERT INTO observation_run (observation_id, repeats, last_seen_at, duration_min_ms, duration_max_ms, duration_sum_ms)
            SELECT observation_id, count(*), max(started_at), min(duration_ms), max(duration_ms), sum(duration_ms)
            FROM run_scan GROUP BY observation_id;
            UPDATE target_state SET last_observation_id = (SELECT head_id FROM run_member m WHERE m.id = target_state.last_observation_id)
            WHERE last_observation_id IN (SELECT id FROM run_member);
            UPDATE alert SET observation_id = (SELECT head_id FROM run_member m WHERE m.id = alert.observation_id)
            WHERE observation_id IN (SELECT id FROM run_member);
            UPDATE address_change SET observation_id = (SELECT head_id FROM run_member m WHERE m.id = address_change.observation_id)
            WHERE observation_id IN (SELECT id FROM run_member);
            DELETE FROM observation_certificate WHERE observation_id IN (SELECT id FROM run_member);
            DELETE FROM verdict WHERE observation_id IN (SELECT id FROM run_member);
            DELETE FROM observation WHERE id IN (SELECT id FROM run_member);
            DROP TABLE run_member;
            """
    }
}

/// Migration scripts every backend runs as they are (no type a dialect spells its own way).
extension StoreSchema {
    /// The trust inputs each scan was judged with (JSON JudgedWith, NULL before). The same script on every backend.
    package static let judgedWithColumn = "ALTER TABLE observation ADD COLUMN judged_with TEXT;"

    /// Where the CT follower stands in each log it follows (its position as JSON, what the log
    /// did wrong), kept across restarts.
    package var ctLogTable: String {
        "CREATE TABLE ct_log (log_id TEXT PRIMARY KEY, position TEXT NOT NULL, problem TEXT, updated_at \(real) NOT NULL);"
    }

    /// In a fleet, which node follows each CT log and until when (its lease, on the database's clock), and the claim's epoch.
    package var ctLogLease: String {
        "ALTER TABLE ct_log ADD COLUMN owner TEXT; ALTER TABLE ct_log ADD COLUMN lease_until \(real); "
            + "ALTER TABLE ct_log ADD COLUMN epoch \(bigint) NOT NULL DEFAULT 0;"
    }

    /// What the CT follower judged of each certificate logged for a pinned or watched name: one
    /// row per certificate and judging rule (its precertificate and itself are one).
    package var ctSightingTable: String {
        """
        CREATE TABLE ct_sighting (id TEXT PRIMARY KEY, seen_at \(real) NOT NULL, log TEXT NOT NULL, entry_index \(bigint) NOT NULL,
            precertificate INTEGER NOT NULL, host TEXT NOT NULL, target TEXT NOT NULL, judged_by TEXT NOT NULL, verdict TEXT NOT NULL,
            serial TEXT NOT NULL, issuer TEXT NOT NULL, spki TEXT NOT NULL, not_before \(real) NOT NULL, not_after \(real) NOT NULL);
        CREATE INDEX ct_sighting_valid ON ct_sighting(not_before);
        """
    }

    /// The reports of the opt-in checks without a column of their own (JSON [String: CheckReport],
    /// NULL when none ran). The same script on every backend.
    package static let checkReportsColumn = "ALTER TABLE observation ADD COLUMN check_reports TEXT;"

    /// A target's configured tags (JSON [String]) with its current state, and the app outcome
    /// (JSON AppHostOutcome, NULL when the target is judged by no app's rules) of each scan and of
    /// the current state. The same script on every backend.
    package static let tagsAndApp = """
        ALTER TABLE target_state ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE target_state ADD COLUMN app TEXT;
        ALTER TABLE observation ADD COLUMN app TEXT;
        """

    /// A target's alerts, newest first, for its page (`alerts(of:limit:)`). The same script on every backend.
    package static let alertTargetIndex = "CREATE INDEX alert_target_time ON alert(target, created_at);"
}
