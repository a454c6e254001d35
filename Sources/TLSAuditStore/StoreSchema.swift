/// The tables both backends create, written once: the migrations of each (`StoreMigrations`,
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

    package static let sqlite = StoreSchema(real: "REAL", bigint: "INTEGER", bytes: "BLOB", serialKey: "INTEGER PRIMARY KEY",
                                            addressChangeKey: "")
    package static let postgres = StoreSchema(real: "DOUBLE PRECISION", bigint: "BIGINT", bytes: "BYTEA",
                                              serialKey: "BIGSERIAL PRIMARY KEY", addressChangeKey: "id BIGSERIAL PRIMARY KEY,")

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
}
