import Foundation
import TLSAuditModel

extension StoreEngine {
    /// Calls `body` with a reader of the stored facts inside one read snapshot (consistent while
    /// scans keep being written); the reader is valid only within `body`. Where the backend
    /// offers a second connection on the same snapshot, the slowest independent reads (the
    /// period's scan counts, the current chains and their certificates) run there meanwhile.
    func readReportFacts<T>(_ body: (any ReportFactReader) throws -> T) throws -> T {
        try database.read(doing: "reading the report data", snapshot: true) { sql in
            let side = database.sideReads(sharing: sql)
            defer { side?.finish() }
            return try body(SQLReportFacts(sql: sql, side: side))
        }
    }
}

/// The report's reads over one snapshot, on either backend.
final class SQLReportFacts: ReportFactReader {
    let sql: any SQLExecutor
    private var dialect: any SQLDialect { sql.dialect }
    /// Certificates decoded for rebuilt results, by fingerprint (a fleet shares its CAs).
    private var summaries: [String: CertificateSummary] = [:]
    private let side: (any SQLSideReads)?
    private var counts: (period: String, value: () throws -> (all: Int, failed: Int))?
    private let currentChains: (() throws -> [Int64: [ChainReference]])?
    private let currentCertificates: (() throws -> [String: ChainCertificate])?

    init(sql: any SQLExecutor, side: (any SQLSideReads)?) {
        self.sql = sql
        self.side = side
        currentChains = side?.start { sql in try Self.latestChainReferences(in: sql) }
        // Every certificate the current chains name: what `certificates(fingerprints:)` is asked first.
        currentCertificates = side?.start { sql in
            try Self.certificates(in: sql, where: """
                fingerprint IN (SELECT fingerprint FROM observation_certificate
                                WHERE \(raw: sql.dialect.isCurrentObservation("observation_id")))
                """)
        }
    }

    func addresses() throws -> [StoredAddress] {
        try sql.rows("""
            SELECT target, address, last_observation_id, last_scan_at, tags FROM target_state
            ORDER BY target\(dialect.bytewise), address\(dialect.bytewise)
            """) { row in
            let key = AddressKey(target: row.text(0) ?? "", address: row.text(1) ?? "")
            return StoredAddress(key: key, lastObservationID: row.int(2) ?? 0, lastScanAt: Date(timeIntervalSince1970: row.double(3) ?? 0),
                                 tags: try StoredValues.tags(row.text(4), in: "the current state of \(key.target) \(key.address)"))
        }
    }

    func latestScans(upTo end: Date, policy: CompliancePolicy?) throws -> [Int64: ScanFacts] {
        var scans: [Int64: ScanFacts] = [:]
        let current = scanSQL(from: "target_state t JOIN observation o ON o.id = t.last_observation_id", policy: policy, details: true,
                              lastScanBy: end)
        try sql.query(current.appending("WHERE t.last_scan_at <= \(.time(end))"), streaming: false) { row in
            let scan = try Self.scan(row, details: true)
            scans[scan.observationID] = scan
        }
        return scans
    }

    func latestChainReferences() throws -> [Int64: [ChainReference]] {
        if let chains = try? currentChains?() { return chains }
        return try Self.latestChainReferences(in: sql)
    }

    /// The current scans' references, sorted here (an ORDER BY would make SQLite walk all of
    /// observation_certificate in key order).
    private static func latestChainReferences(in sql: any SQLExecutor) throws -> [Int64: [ChainReference]] {
        var chains: [Int64: [ChainReference]] = [:]
        try sql.query("""
            SELECT c.observation_id, c.role, c.position, c.fingerprint FROM observation_certificate c
            WHERE \(sql.dialect.isCurrentObservation("c.observation_id"))
            """, [], streaming: false) { row in
            chains[row.int(0) ?? 0, default: []].append(reference(row, from: 1))
        }
        for id in chains.keys { chains[id]?.sort { ($0.role, $0.position) < ($1.role, $1.position) } }
        return chains
    }

    func lastScan(target: String, address: String, atOrBefore time: Date, reachableOnly: Bool,
                  policy: CompliancePolicy?, details: Bool) throws -> ScanFacts? {
        let reachable = reachableOnly ? "AND \(ScanRows.reached("o"))" : ""
        return try sql.first(scanSQL(from: "observation o", policy: policy, details: details, lastScanBy: time).appending("""
            WHERE o.target = \(.text(target)) AND o.address = \(.text(address)) AND o.started_at <= \(.time(time)) \(raw: reachable)
            ORDER BY o.started_at DESC, o.id DESC LIMIT 1
            """)) { try Self.scan($0, details: details) }
    }

    /// One query for all of them where the dialect can (a fleet's unreachable addresses: one
    /// round trip each took a second of a 10,000-target report on PostgreSQL).
    func lastReachableScans(of keys: [AddressKey], atOrBefore time: Date, policy: CompliancePolicy?) throws -> [AddressKey: ScanFacts] {
        guard !keys.isEmpty else { return [:] }
        var found: [AddressKey: ScanFacts] = [:]
        guard let source = dialect.newestReachedPerKey(keys.map { ($0.target, $0.address) }, startedBy: time.timeIntervalSince1970,
                                                      reached: ScanRows.reached("x")) else {
            for key in keys {
                found[key] = try lastScan(target: key.target, address: key.address, atOrBefore: time, reachableOnly: true,
                                          policy: policy, details: true)
            }
            return found
        }
        try sql.query(scanSQL(from: source, policy: policy, details: true, lastScanBy: time), streaming: false) { row in
            let scan = try Self.scan(row, details: true)
            found[scan.key] = scan
        }
        return found
    }

    func chainReferences(observationID: Int64) throws -> [ChainReference] {
        try sql.rows("""
            SELECT role, position, fingerprint FROM observation_certificate WHERE observation_id = ?
            ORDER BY role\(dialect.bytewise), position
            """, [.int(observationID)]) { Self.reference($0, from: 0) }
    }

    func chainReferences(observationIDs: [Int64]) throws -> [Int64: [ChainReference]] {
        guard !observationIDs.isEmpty else { return [:] }
        var chains: [Int64: [ChainReference]] = [:]
        try sql.query("""
            SELECT observation_id, role, position, fingerprint FROM observation_certificate
            WHERE \(dialect.isIn("observation_id", .ints(observationIDs)))
            ORDER BY observation_id, role\(raw: dialect.bytewise), position
            """ as SQLFragment, streaming: false) { row in
            chains[row.int(0) ?? 0, default: []].append(Self.reference(row, from: 1))
        }
        return chains
    }

    func certificate(fingerprint: String) throws -> ChainCertificate? {
        try Self.certificates(in: sql, where: "fingerprint = \(.text(fingerprint))")[fingerprint]
    }

    /// One query for all of them (a report's chains name thousands of certificates: one round
    /// trip each took 3 of a 10,000-target report's 5 seconds on PostgreSQL); those of the current
    /// chains come from the side reads where there are any.
    func certificates(fingerprints: [String]) throws -> [String: ChainCertificate] {
        guard !fingerprints.isEmpty else { return [:] }
        let prefetched = (try? currentCertificates?()) ?? [:]
        let asked = Set(fingerprints)
        var found = prefetched.filter { asked.contains($0.key) }
        let missing = fingerprints.filter { prefetched[$0] == nil }
        guard !missing.isEmpty else { return found }
        found.merge(try Self.certificates(in: sql, where: dialect.isIn("fingerprint", .texts(missing)))) { $1 }
        return found
    }

    private static func certificates(in sql: any SQLExecutor, where condition: SQLFragment) throws -> [String: ChainCertificate] {
        var found: [String: ChainCertificate] = [:]
        try sql.query("""
            SELECT fingerprint, subject, issuer, not_before, not_after, \(raw: sql.dialect.jsonText("summary", "commonName")) FROM certificate
            WHERE \(condition)
            """ as SQLFragment, streaming: false) { row in
            guard let fingerprint = row.text(0) else { return }
            found[fingerprint] = ChainCertificate(fingerprint: fingerprint, subject: row.text(1) ?? "", commonName: row.text(5),
                                                  issuer: row.text(2) ?? "",
                                                  notBefore: Date(timeIntervalSince1970: row.double(3) ?? 0),
                                                  notAfter: Date(timeIntervalSince1970: row.double(4) ?? 0), depth: 0)
        }
        return found
    }

    func standings(at time: Date) throws -> [AddressKey: VerdictStanding] {
        var standings: [AddressKey: VerdictStanding] = [:]
        // The last change at or before `time` (none: no scan before it), and the last one that
        // reached the server.
        for reachableOnly in [false, true] {
            let newest = dialect.newestPerAddress(["target", "address", "started_at", "condition", "policy", "failed_rules"],
                                                  from: "address_change",
                                                  where: "started_at <= \(.time(time))\(raw: reachableOnly ? " AND condition != 'unreachable'" : "")")
            try sql.query(newest, streaming: false) { row in
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
        try sql.query("""
            SELECT target, address, started_at, condition, policy, failed_rules FROM address_change
            WHERE started_at > ? AND started_at <= ? ORDER BY started_at, \(dialect.addressChangeID)
            """, [.time(start), .time(end)], streaming: true) { try body(try Self.change($0)) }
    }

    func forEachScan(after start: Date, through end: Date, policy: CompliancePolicy,
                     _ body: (ScanFacts) throws -> Void) throws {
        try sql.query(scanSQL(from: "observation o", policy: policy, details: false).appending("""
            WHERE o.started_at > \(.time(start)) AND o.started_at <= \(.time(end)) ORDER BY o.started_at, o.id
            """), streaming: true) { try body(try Self.scan($0, details: false)) }
    }

    func result(observationID: Int64) throws -> AddressScanResult? {
        try StoreEngine.loadResult(observationID: observationID, in: sql, summaries: &summaries)
    }

    func willCountScans(after start: Date, through end: Date, targets: Set<String>?) {
        guard let side else { return }
        counts = (Self.period(start, end, targets), side.start { sql in
            try Self.scanCounts(in: sql, after: start, through: end, targets: targets)
        })
    }

    func scanCounts(after start: Date, through end: Date, targets: Set<String>?) throws -> (all: Int, failed: Int) {
        // A side read that failed (its connection dropped) is read again here.
        if let counts, counts.period == Self.period(start, end, targets), let value = try? counts.value() { return value }
        return try Self.scanCounts(in: sql, after: start, through: end, targets: targets)
    }

    private static func period(_ start: Date, _ end: Date, _ targets: Set<String>?) -> String {
        "\(start.timeIntervalSince1970) \(end.timeIntervalSince1970) \(targets?.sorted() ?? [])"
    }

    /// Counted by the database (grouping a million scans by target to filter them here took
    /// twice as long on PostgreSQL).
    private static func scanCounts(in sql: any SQLExecutor, after start: Date, through end: Date,
                                   targets: Set<String>?) throws -> (all: Int, failed: Int) {
        let onlyTargets: SQLFragment = targets.map { "AND \(sql.dialect.isIn("o.target", .texts($0.sorted())))" } ?? ""
        // The runs' first scans (the observations) in the period...
        let counts: (all: Int, failed: Int) = try sql.first("""
            SELECT count(*), coalesce(sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0)
            FROM observation o \(raw: sql.dialect.scanCountIndex)
            WHERE started_at > \(.time(start)) AND started_at <= \(.time(end)) \(onlyTargets)
            """ as SQLFragment) { (Int($0.int(0) ?? 0), Int($0.int(1) ?? 0)) } ?? (0, 0)
        // ...and the repeats in it of every run that reaches into it (found by their summaries).
        let repeats: (all: Int, failed: Int) = try sql.first("""
            SELECT count(*), coalesce(sum(CASE WHEN o.status = 'failed' THEN 1 ELSE 0 END), 0)
            FROM run_scan s JOIN observation o ON o.id = s.observation_id
            WHERE s.observation_id IN (SELECT observation_id FROM observation_run WHERE last_seen_at > \(.time(start)))
              AND s.started_at > \(.time(start)) AND s.started_at <= \(.time(end)) \(onlyTargets)
            """ as SQLFragment) { (Int($0.int(0) ?? 0), Int($0.int(1) ?? 0)) } ?? (0, 0)
        return (counts.all + repeats.all, counts.failed + repeats.failed)
    }

    func alerts(after start: Date, through end: Date) throws -> [AlertSummary] {
        // From the columns; only a certificate change's details are read from its document.
        try sql.rows("""
            SELECT id, created_at, kind, severity, target, address, summary,
                CASE WHEN kind = 'certificate.changed' THEN \(dialect.jsonText("document", "changes")) END
            FROM alert WHERE created_at > ? AND created_at <= ? ORDER BY created_at, id\(dialect.bytewise)
            """, [.time(start), .time(end)]) { row in
            let place = "alert \(row.text(0) ?? "?")"
            return AlertSummary(id: row.text(0) ?? "", createdAt: Date(timeIntervalSince1970: row.double(1) ?? 0),
                                kind: try StoredValues.known(row.text(2), "alert kind", in: place),
                                severity: try StoredValues.known(row.text(3), "alert severity", in: place),
                                target: row.text(4) ?? "", address: row.text(5) ?? "", summary: row.text(6) ?? "",
                                changes: try StoredValues.changes(row.text(7)))
        }
    }

    // MARK: - Rows

    /// The columns every scan query starts with, in this order (read by index: a million rows make
    /// name lookups count).
    private enum Column {
        static let id = 0, target = 1, address = 2, host = 3, sni = 4, startedAt = 5, status = 6, hasChain = 7
        static let ownPolicy = 8, storedPolicy = 9, compliant = 10, failedRules = 11, content = 12, pinMismatch = 13
        /// When asked: the last scan of the run at or before a time (NULL when the first is).
        static let lastScan = 14
        /// With details: the verdict's findings, then what the report shows.
        static let findings = 15, port = 16, failureCategory = 17, failureMessage = 18, protocolVersion = 19
        static let cipher = 20, pinState = 21, pinMessage = 22, inventory = 23, headers = 24, vulnerabilities = 25, app = 26, clients = 27
        static let checkReports = 28
    }

    /// A scan query from `source` (which names the observation `o`): the leading columns (see
    /// `Column`) and the join giving its verdict under `policy` (its own when nil; when none is
    /// stored under `policy`, the key of its content instead).
    /// With `lastScanBy`, the run's last scan at or before that time is read too (`Column.lastScan`).
    private func scanSQL(from source: SQLFragment, policy: CompliancePolicy?, details: Bool, lastScanBy bound: Date? = nil) -> SQLFragment {
        let join = policy.map { "LEFT JOIN verdict v ON v.observation_id = o.id AND v.policy = '\($0.rawValue)'" }
            ?? "JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy"
        // The run's last scan at or before the time bound first (a repeat's, by the run_scan key).
        let last: SQLFragment = bound.map { "(SELECT max(s.started_at) FROM run_scan s WHERE s.observation_id = o.id AND s.started_at <= \(.time($0)))" }
            ?? "NULL"
        // Without a stored verdict under the policy: what it is judged from (see ObservationContent).
        let content = policy == nil ? "NULL" : "CASE WHEN v.observation_id IS NULL THEN coalesce(o.content_hash, 'id:' || o.id) END"
        let mismatch = "\(dialect.jsonText("pv.pin", "state")) = 'mismatch'"
        // With details (a report's current scans, thousands at most), probed per scan: as EXISTS,
        // PostgreSQL's planner hashed the pin state of every stored verdict (200 ms of a million-scan report).
        let pinMismatch = details
            ? "(SELECT 1 FROM verdict pv WHERE pv.observation_id = o.id AND \(mismatch) LIMIT 1) IS NOT NULL"
            : "EXISTS (SELECT 1 FROM verdict pv WHERE pv.observation_id = o.id AND \(mismatch))"
        guard details else {
            return """
                SELECT o.id, o.target, o.address, o.host, o.sni, o.started_at, o.status, o.trust_store IS NOT NULL, o.policy,
                    v.policy, v.compliant, v.failed_rules, \(raw: content), \(raw: pinMismatch), \(last)
                FROM \(source) \(raw: join)
                """
        }
        // Each JSON document parsed once for the values read from it.
        let handshake = dialect.parsedJSON("o.handshake", as: "h")
        let pin = dialect.parsedJSON("own.pin", as: "p")
        return """
            SELECT o.id, o.target, o.address, o.host, o.sni, o.started_at, o.status, o.trust_store IS NOT NULL, o.policy,
                v.policy, v.compliant, v.failed_rules, \(raw: content), \(raw: pinMismatch), \(last),
                \(raw: dialect.findingMarks(of: "v.findings")),
                o.port, o.failure_category, o.failure_message,
                \(raw: dialect.jsonText(handshake.reference, "protocolVersion")), \(raw: dialect.jsonText(handshake.reference, "cipher", "iana")),
                \(raw: dialect.jsonText(pin.reference, "state")), \(raw: dialect.jsonText(pin.reference, "message")),
                o.inventory, o.http_headers, o.vulnerabilities, o.app, o.clients, o.check_reports
            FROM \(source) \(raw: join)
            LEFT JOIN verdict own ON own.observation_id = o.id AND own.policy = o.policy \(raw: handshake.join) \(raw: pin.join)
            """
    }

    /// A scan row as `ScanFacts`: its time is the run's last scan at or before the query's bound
    /// where it asked for it (`lastScan`), else the run's first.
    private static func scan(_ row: any SQLRow, details: Bool) throws -> ScanFacts {
        let id = row.int(Column.id) ?? 0
        let place = "observation \(id)"
        var verdict: StoredVerdict?
        if row.text(Column.storedPolicy) != nil {
            verdict = StoredVerdict(compliant: row.int(Column.compliant) == 1,
                                    failedRules: StoredRules(json: row.text(Column.failedRules) ?? "[]"),
                                    findings: details ? try FindingMarks.parse(row.text(Column.findings), in: place) : [])
        }
        var scan = ScanFacts(
            observationID: id, key: AddressKey(target: row.text(Column.target) ?? "", address: row.text(Column.address) ?? ""),
            host: row.text(Column.host) ?? "", sni: row.text(Column.sni),
            startedAt: Date(timeIntervalSince1970: row.double(Column.lastScan) ?? row.double(Column.startedAt) ?? 0),
            status: try StoredValues.known(row.text(Column.status), "status", in: place), hasChain: row.bool(Column.hasChain) ?? false,
            ownPolicy: try StoredValues.known(row.text(Column.ownPolicy), "policy", in: place), verdict: verdict,
            contentKey: row.text(Column.content), pinMismatch: row.bool(Column.pinMismatch) ?? false)
        if details {
            scan.details = ScanDetails(
                port: Int(row.int(Column.port) ?? 0),
                failureCategory: try StoredValues.known(row.text(Column.failureCategory), "failure category", in: place, optional: true),
                failureMessage: row.text(Column.failureMessage),
                protocolVersion: try StoredValues.known(row.text(Column.protocolVersion), "protocol version", in: place, optional: true),
                cipher: row.text(Column.cipher),
                pinState: try StoredValues.known(row.text(Column.pinState) ?? "none", "pin state", in: place),
                pinMessage: row.text(Column.pinMessage))
            scan.details?.inventory = try StoredValues.stored(ServerInventory.self, row.text(Column.inventory), "inventory", in: place)
            scan.details?.headers = try StoredValues.stored(HTTPHeadersReport.self, row.text(Column.headers), "HTTP headers", in: place)
            scan.details?.vulnerabilities = try StoredValues.stored(VulnerabilityReport.self, row.text(Column.vulnerabilities),
                                                                    "vulnerabilities", in: place)
            scan.details?.app = try StoredValues.stored(AppHostOutcome.self, row.text(Column.app), "app outcome", in: place)
            scan.details?.clients = try StoredValues.stored(ClientSimulationReport.self, row.text(Column.clients), "client simulation",
                                                            in: place)
            scan.details?.checkReports = try StoredValues.stored([String: CheckReport].self, row.text(Column.checkReports),
                                                                 "check reports", in: place)
        }
        return scan
    }

    /// `role, position, fingerprint` starting at column `first`.
    private static func reference(_ row: any SQLRow, from first: Int) -> ChainReference {
        ChainReference(role: row.text(first) ?? "", position: Int(row.int(first + 1) ?? 0), fingerprint: row.text(first + 2) ?? "")
    }

    /// A row `target, address, started_at, condition, policy, failed_rules` of `address_change`.
    private static func change(_ row: any SQLRow) throws -> VerdictChange {
        let key = AddressKey(target: row.text(0) ?? "", address: row.text(1) ?? "")
        let place = "the address timeline of \(key.target) \(key.address)"
        return VerdictChange(key: key, at: Date(timeIntervalSince1970: row.double(2) ?? 0),
                             condition: try StoredValues.known(row.text(3), "condition", in: place),
                             policy: try StoredValues.known(row.text(4), "policy", in: place),
                             failedRules: StoredRules(json: row.text(5) ?? "[]"))
    }
}

/// The ids and severities of a verdict's findings, read in one column without decoding the findings.
enum FindingMarks {
    static func parse(_ column: String?, in place: String) throws -> [(id: FindingID, severity: Severity)] {
        guard let column else { return [] }
        return try column.split(separator: "\u{1F}").map { mark in
            let parts = mark.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { throw StoreError(.corrupt, "\(place): a stored finding has no id or severity") }
            return (FindingID(rawValue: String(parts[1])), try StoredValues.known(String(parts[0]), "finding severity", in: place))
        }
    }
}
