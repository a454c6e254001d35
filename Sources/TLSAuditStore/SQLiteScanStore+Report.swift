import Foundation
import GRDB
package import TLSAuditModel

extension SQLiteScanStore {
    /// Calls `body` with a reader of the stored facts inside one read transaction: a consistent
    /// snapshot while the service keeps writing. The reader is valid only within `body`.
    public func readReportFacts<T>(_ body: (any ReportFactReader) throws -> T) throws -> T {
        do {
            return try pool.read { db in try body(SQLiteReportFacts(db: db)) }
        } catch {
            throw Self.storeError(error, doing: "reading the report data")
        }
    }
}

/// The report's reads over one SQLite snapshot.
private final class SQLiteReportFacts: ReportFactReader {
    let db: Database
    /// Certificates decoded for rebuilt results, by fingerprint (a fleet shares its CAs).
    private var summaries: [String: CertificateSummary] = [:]

    init(db: Database) {
        self.db = db
    }

    func addresses() throws -> [StoredAddress] {
        try Row.fetchAll(db, sql: """
            SELECT target, address, last_observation_id, last_scan_at, tags FROM target_state ORDER BY target, address
            """).map { row in
            let key = AddressKey(target: row[0], address: row[1])
            return StoredAddress(key: key, lastObservationID: row[2], lastScanAt: Date(timeIntervalSince1970: row[3]),
                                 tags: try StoredValues.tags(row[4], in: "the current state of \(key.target) \(key.address)"))
        }
    }

    func latestScans(upTo end: Date, policy: CompliancePolicy?) throws -> [Int64: ScanFacts] {
        var scans: [Int64: ScanFacts] = [:]
        let sql = Self.detailSQL(from: "target_state t JOIN observation o ON o.id = t.last_observation_id", policy: policy)
        let cursor = try Row.fetchCursor(db, sql: sql + " WHERE t.last_scan_at <= ?", arguments: [end.timeIntervalSince1970])
        while let row = try cursor.next() {
            let scan = try Self.scan(row, asked: policy, details: true)
            scans[scan.observationID] = scan
        }
        return scans
    }

    func latestChainReferences() throws -> [Int64: [ChainReference]] {
        var chains: [Int64: [ChainReference]] = [:]
        for row in try Row.fetchAll(db, sql: """
            SELECT c.observation_id, c.role, c.position, c.fingerprint
            FROM target_state t JOIN observation_certificate c ON c.observation_id = t.last_observation_id
            """) {
            chains[row[0], default: []].append(ChainReference(role: row[1], position: row[2], fingerprint: row[3]))
        }
        // (Sorted here: an ORDER BY would make SQLite walk all of observation_certificate in key order.)
        for id in chains.keys { chains[id]?.sort { ($0.role, $0.position) < ($1.role, $1.position) } }
        return chains
    }

    func lastScan(target: String, address: String, atOrBefore time: Date, reachableOnly: Bool,
                  policy: CompliancePolicy?, details: Bool) throws -> ScanFacts? {
        let source = details ? Self.detailSQL(from: "observation o", policy: policy) : Self.verdictSQL(from: "observation o", policy: policy)
        let reachable = reachableOnly ? "AND \(ScanRows.reached("o"))" : ""
        guard let row = try Row.fetchOne(db.cachedStatement(sql: source + """
             WHERE o.target = ? AND o.address = ? AND o.started_at <= ? \(reachable)
             ORDER BY o.started_at DESC, o.id DESC LIMIT 1
            """), arguments: [target, address, time.timeIntervalSince1970]) else { return nil }
        return try Self.scan(row, asked: policy, details: details)
    }

    func chainReferences(observationID: Int64) throws -> [ChainReference] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT role, position, fingerprint FROM observation_certificate WHERE observation_id = ? ORDER BY role, position
            """), arguments: [observationID]).map { ChainReference(role: $0[0], position: $0[1], fingerprint: $0[2]) }
    }

    func certificate(fingerprint: String) throws -> ChainCertificate? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT subject, issuer, not_before, not_after, json_extract(summary, '$.commonName') FROM certificate
            WHERE fingerprint = ?
            """), arguments: [fingerprint]) else { return nil }
        return ChainCertificate(fingerprint: fingerprint, subject: row[0], commonName: row[4], issuer: row[1],
                                notBefore: Date(timeIntervalSince1970: row[2]), notAfter: Date(timeIntervalSince1970: row[3]),
                                depth: 0)
    }

    func standings(at time: Date) throws -> [AddressKey: VerdictStanding] {
        var standings: [AddressKey: VerdictStanding] = [:]
        // The last change at or before `time` (none: no scan before it), and the last one that
        // reached the server (SQLite takes the bare columns from the row with the max).
        for reachableOnly in [false, true] {
            for row in try Row.fetchAll(db, sql: """
                SELECT target, address, max(started_at), condition, policy, failed_rules FROM address_change
                WHERE started_at <= ? \(reachableOnly ? "AND condition != 'unreachable'" : "") GROUP BY target, address
                """, arguments: [time.timeIntervalSince1970]) {
                let change = try Self.change(row)
                if reachableOnly {
                    standings[change.key, default: VerdictStanding()].lastReachable = change
                } else {
                    standings[change.key, default: VerdictStanding()].last = change
                }
            }
        }
        return standings
    }

    func forEachVerdictChange(after start: Date, through end: Date, _ body: (VerdictChange) throws -> Void) throws {
        let cursor = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT target, address, started_at, condition, policy, failed_rules FROM address_change
            WHERE started_at > ? AND started_at <= ? ORDER BY started_at, rowid
            """), arguments: [start.timeIntervalSince1970, end.timeIntervalSince1970])
        while let row = try cursor.next() {
            try body(try Self.change(row))
        }
    }

    func forEachScan(after start: Date, through end: Date, policy: CompliancePolicy,
                     _ body: (ScanFacts) throws -> Void) throws {
        let cursor = try Row.fetchCursor(db, sql: Self.verdictSQL(from: "observation o", policy: policy) + """
             WHERE o.started_at > ? AND o.started_at <= ? ORDER BY o.started_at, o.id
            """, arguments: [start.timeIntervalSince1970, end.timeIntervalSince1970])
        while let row = try cursor.next() {
            try body(try Self.scan(row, asked: policy, details: false))
        }
    }

    func result(observationID: Int64) throws -> AddressScanResult? {
        try SQLiteScanStore.loadResult(observationID: observationID, in: db, summaries: &summaries)
    }

    func scanCounts(after start: Date, through end: Date, targets: Set<String>?) throws -> (all: Int, failed: Int) {
        let period: StatementArguments = [start.timeIntervalSince1970, end.timeIntervalSince1970]
        guard let targets else {
            let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT count(*), total(status = 'failed') FROM observation INDEXED BY observation_time_status
                WHERE started_at > ? AND started_at <= ?
                """), arguments: period)
            return (row?[0] ?? 0, Int(row?[1] as Double? ?? 0))
        }
        let rows = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT target, count(*), total(status = 'failed') FROM observation INDEXED BY observation_time_status
            WHERE started_at > ? AND started_at <= ? GROUP BY target
            """), arguments: period)
        var all = 0, failed = 0
        for row in rows where targets.contains(row[0]) {
            all += row[1]
            failed += Int(row[2] as Double)
        }
        return (all, failed)
    }

    func alerts(after start: Date, through end: Date) throws -> [AlertSummary] {
        // From the columns; only a certificate change's details are read from its document.
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT id, created_at, kind, severity, target, address, summary,
                CASE WHEN kind = 'certificate.changed' THEN json_extract(document, '$.changes') END
            FROM alert WHERE created_at > ? AND created_at <= ? ORDER BY created_at, id
            """), arguments: [start.timeIntervalSince1970, end.timeIntervalSince1970]).map { row in
            let place = "alert \(row[0] as String? ?? "?")"
            return AlertSummary(id: row[0], createdAt: Date(timeIntervalSince1970: row[1]),
                                kind: try StoredValues.known(row[2], "alert kind", in: place),
                                severity: try StoredValues.known(row[3], "alert severity", in: place),
                                target: row[4], address: row[5], summary: row[6],
                                changes: try StoredValues.changes(row[7]))
        }
    }

    // MARK: - Rows

    /// The columns every scan query starts with, in this order (read by index: a million rows make
    /// name lookups count).
    private enum Column {
        static let id = 0, target = 1, address = 2, host = 3, sni = 4, startedAt = 5, status = 6, hasChain = 7
        static let ownPolicy = 8, storedPolicy = 9, compliant = 10, failedRules = 11, content = 12, pinMismatch = 13
        /// With details: the verdict's findings, then what the report shows.
        static let findings = 14, port = 15, failureCategory = 16, failureMessage = 17, protocolVersion = 18
        static let cipher = 19, pinState = 20, pinMessage = 21, inventory = 22, headers = 23, vulnerabilities = 24, app = 25
    }

    /// A scan query from `source` (which names the observation `o`): the leading columns (see
    /// `Column`) and the join giving its verdict under `policy` (its own when nil; when none is
    /// stored under `policy`, the key of its content instead).
    private static func verdictSQL(from source: String, policy: CompliancePolicy?, extra: String = "",
                                   joins extraJoins: String = "") -> String {
        let join = policy.map { "LEFT JOIN verdict v ON v.observation_id = o.id AND v.policy = '\($0.rawValue)'" }
            ?? "JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy"
        // Without a stored verdict under the policy: what it is judged from (see ObservationContent).
        let content = policy == nil ? "NULL" : "CASE WHEN v.observation_id IS NULL THEN ifnull(o.content_hash, 'id:' || o.id) END"
        return """
            SELECT o.id, o.target, o.address, o.host, o.sni, o.started_at, o.status, o.trust_store IS NOT NULL, o.policy,
                v.policy, v.compliant, v.failed_rules, \(content),
                (SELECT 1 FROM verdict pv WHERE pv.observation_id = o.id AND json_extract(pv.pin, '$.state') = 'mismatch' LIMIT 1)
                \(extra)
            FROM \(source) \(join) \(extraJoins)
            """
    }

    /// `verdictSQL` with what the report shows of a current scan: the verdict's findings (id and
    /// severity, separated by char(31)) and the scan's details.
    private static func detailSQL(from source: String, policy: CompliancePolicy?) -> String {
        verdictSQL(from: source, policy: policy, extra: """
            , (SELECT \(FindingMarks.sql) FROM json_each(v.findings) AS f),
            o.port, o.failure_category, o.failure_message,
            json_extract(o.handshake, '$.protocolVersion'), json_extract(o.handshake, '$.cipher.iana'),
            json_extract(own.pin, '$.state'), json_extract(own.pin, '$.message'), o.inventory, o.http_headers, o.vulnerabilities,
            o.app
            """, joins: "LEFT JOIN verdict own ON own.observation_id = o.id AND own.policy = o.policy")
    }

    private static func scan(_ row: Row, asked policy: CompliancePolicy?, details: Bool) throws -> ScanFacts {
        let id: Int64 = row[Column.id]
        let place = "observation \(id)"
        var verdict: StoredVerdict?
        if (row[Column.storedPolicy] as String?) != nil {
            let findings = details ? try FindingMarks.parse(row[Column.findings], in: place) : []
            verdict = StoredVerdict(compliant: row[Column.compliant], failedRules: StoredRules(json: row[Column.failedRules] ?? "[]"),
                                    findings: findings)
        }
        var scan = ScanFacts(
            observationID: id, key: AddressKey(target: row[Column.target], address: row[Column.address]),
            host: row[Column.host], sni: row[Column.sni], startedAt: Date(timeIntervalSince1970: row[Column.startedAt]),
            status: try StoredValues.known(row[Column.status], "status", in: place), hasChain: row[Column.hasChain],
            ownPolicy: try StoredValues.known(row[Column.ownPolicy], "policy", in: place), verdict: verdict,
            contentKey: row[Column.content], pinMismatch: (row[Column.pinMismatch] as Int?) == 1)
        if details {
            scan.details = ScanDetails(
                port: row[Column.port],
                failureCategory: try StoredValues.known(row[Column.failureCategory], "failure category", in: place, optional: true),
                failureMessage: row[Column.failureMessage],
                protocolVersion: try StoredValues.known(row[Column.protocolVersion], "protocol version", in: place, optional: true),
                cipher: row[Column.cipher],
                pinState: try StoredValues.known((row[Column.pinState] as String?) ?? "none", "pin state", in: place),
                pinMessage: row[Column.pinMessage])
            scan.details?.inventory = try StoredValues.stored(ServerInventory.self, row[Column.inventory], "inventory", in: place)
            scan.details?.headers = try StoredValues.stored(HTTPHeadersReport.self, row[Column.headers], "HTTP headers", in: place)
            scan.details?.vulnerabilities = try StoredValues.stored(VulnerabilityReport.self, row[Column.vulnerabilities], "vulnerabilities",
                                                                    in: place)
            scan.details?.app = try StoredValues.stored(AppHostOutcome.self, row[Column.app], "app outcome", in: place)
        }
        return scan
    }

    /// A row `target, address, started_at, condition, policy, failed_rules` of `address_change`.
    private static func change(_ row: Row) throws -> VerdictChange {
        let key = AddressKey(target: row[0], address: row[1])
        let place = "the address timeline of \(key.target) \(key.address)"
        return VerdictChange(key: key, at: Date(timeIntervalSince1970: row[2]),
                             condition: try StoredValues.known(row[3], "condition", in: place),
                             policy: try StoredValues.known(row[4], "policy", in: place),
                             failedRules: StoredRules(json: row[5] ?? "[]"))
    }
}

/// The ids and severities of a verdict's findings, read in one column without decoding the findings.
package enum FindingMarks {
    /// The column over a finding `f` of `json_each(findings)`: `severity id`, separated by char(31).
    package static let sql = "group_concat(json_extract(f.value, '$.severity') || ' ' || json_extract(f.value, '$.id'), char(31))"

    package static func parse(_ column: String?, in place: String) throws -> [(id: FindingID, severity: Severity)] {
        guard let column else { return [] }
        return try column.split(separator: "\u{1F}").map { mark in
            let parts = mark.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { throw StoreError(.corrupt, "\(place): a stored finding has no id or severity") }
            return (FindingID(rawValue: String(parts[1])), try StoredValues.known(String(parts[0]), "finding severity", in: place))
        }
    }
}
