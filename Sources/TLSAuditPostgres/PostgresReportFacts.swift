import Dispatch
import Foundation
import TLSAuditModel
public import TLSAuditStore

extension PostgresScanStore {
    /// Calls `body` with a reader of the stored facts inside one read-only, repeatable-read
    /// transaction: a consistent snapshot while other nodes keep writing.
    /// The slowest independent reads (the period's scan counts, the current chains' certificates)
    /// run beside the others on a second connection sharing the snapshot (``SideReads``).
    public func readReportFacts<T>(_ body: (any ReportFactReader) throws -> T) throws -> T {
        try pool.withConnection { connection in
            try connection.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") {
                let snapshot = try connection.execute("SELECT pg_export_snapshot() AS id").text(0, "id")
                let side = snapshot.flatMap { SideReads(settings: pool.settings, snapshot: $0) }
                defer { side?.finish() }
                return try body(PostgresReportFacts(connection: connection, side: side))
            }
        }
    }
}

/// Reads run on a second connection inside the main read transaction's snapshot (exported with
/// `pg_export_snapshot` and imported with `SET TRANSACTION SNAPSHOT`, as pg_dump's workers do):
/// the server counts and fetches there while the client decodes what the main connection read.
/// Without it (the second connection refused), the main connection reads everything itself.
private final class SideReads: @unchecked Sendable {
    // @unchecked: `connection` is used on `queue` only.
    private let connection: PostgresConnection
    private let queue = DispatchQueue(label: "tlsaudit.report.side-reads")

    /// A read started on the side connection; `value()` waits for it.
    final class Pending<Value>: @unchecked Sendable {
        // @unchecked: `result` is written once before `done` is signalled and read after.
        private var result: Result<Value, any Error>?
        private let done = DispatchSemaphore(value: 0)

        fileprivate func set(_ result: Result<Value, any Error>) {
            self.result = result
            done.signal()
        }

        func value() throws -> Value {
            done.wait()
            done.signal()
            return try result!.get()
        }
    }

    init?(settings: PostgresSettings, snapshot: String) {
        guard let connection = try? PostgresConnection(settings) else { return nil }
        do {
            try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try connection.execute("SET TRANSACTION SNAPSHOT '\(snapshot.filter { $0.isHexDigit || $0 == "-" })'")
        } catch {
            return nil
        }
        self.connection = connection
    }

    /// Starts `read` on the side connection, after the reads started before it.
    func start<Value>(_ read: @escaping (PostgresConnection) throws -> Value) -> Pending<Value> {
        let pending = Pending<Value>()
        let box = PostgresConnectionBox(connection: connection)
        nonisolated(unsafe) let read = read
        queue.async { pending.set(Result { try read(box.connection) }) }
        return pending
    }

    /// Waits for the reads started and ends the side transaction (the connection closes with it).
    func finish() {
        let box = PostgresConnectionBox(connection: connection)
        queue.sync { _ = try? box.connection.execute("COMMIT") }
    }
}

/// The report's reads over one PostgreSQL snapshot (the same facts `SQLiteReportFacts` reads).
private final class PostgresReportFacts: ReportFactReader {
    let connection: PostgresConnection
    private var summaries: [String: CertificateSummary] = [:]
    /// Reads under way on the side connection, when there is one.
    private let side: SideReads?
    private var counts: (period: String, pending: SideReads.Pending<(all: Int, failed: Int)>)?
    private let currentChains: SideReads.Pending<[Int64: [ChainReference]]>?
    private let currentCertificates: SideReads.Pending<[String: ChainCertificate]>?

    init(connection: PostgresConnection, side: SideReads?) {
        self.connection = connection
        self.side = side
        currentChains = side?.start { connection in try Self.latestChainReferences(on: connection) }
        // Every certificate the current chains name: what `certificates(fingerprints:)` is asked first.
        currentCertificates = side?.start { connection in
            try Self.certificates(on: connection, where: """
                fingerprint IN (SELECT fingerprint FROM observation_certificate
                                WHERE observation_id = ANY(ARRAY(SELECT last_observation_id FROM target_state)))
                """)
        }
    }

    func addresses() throws -> [StoredAddress] {
        let rows = try connection.execute("""
            SELECT target, address, last_observation_id, last_scan_at, tags FROM target_state
            ORDER BY target COLLATE "C", address COLLATE "C"
            """)
        return try (0..<rows.count).map { row in
            let key = AddressKey(target: rows.text(row, "target") ?? "", address: rows.text(row, "address") ?? "")
            return StoredAddress(key: key, lastObservationID: rows.int(row, "last_observation_id") ?? 0,
                                 lastScanAt: Date(timeIntervalSince1970: rows.double(row, "last_scan_at") ?? 0),
                                 tags: try StoredValues.tags(rows.text(row, "tags"), in: "the current state of \(key.target) \(key.address)"))
        }
    }

    func latestScans(upTo end: Date, policy: CompliancePolicy?) throws -> [Int64: ScanFacts] {
        let rows = try connection.execute(Self.scanSQL(from: "target_state t JOIN observation o ON o.id = t.last_observation_id",
                                                       policy: policy, details: true) + " WHERE t.last_scan_at <= $1",
                                          [.double(end.timeIntervalSince1970)])
        var scans: [Int64: ScanFacts] = [:]
        for row in 0..<rows.count {
            let scan = try Self.scan(rows, row, details: true)
            scans[scan.observationID] = scan
        }
        return scans
    }

    /// The ids as an array: as a join, the planner hashed all five million references of a
    /// million scans (600 ms) instead of probing the index for the 10,000 current ones (60 ms).
    func latestChainReferences() throws -> [Int64: [ChainReference]] {
        if let chains = try? currentChains?.value() { return chains }
        return try Self.latestChainReferences(on: connection)
    }

    private static func latestChainReferences(on connection: PostgresConnection) throws -> [Int64: [ChainReference]] {
        let rows = try connection.execute("""
            SELECT c.observation_id, c.role, c.position, c.fingerprint FROM observation_certificate c
            WHERE c.observation_id = ANY(ARRAY(SELECT last_observation_id FROM target_state))
            ORDER BY c.observation_id, c.role COLLATE "C", c.position
            """)
        var chains: [Int64: [ChainReference]] = [:]
        for row in 0..<rows.count {
            chains[rows.int(row, "observation_id") ?? 0, default: []].append(reference(rows, row))
        }
        return chains
    }

    func lastScan(target: String, address: String, atOrBefore time: Date, reachableOnly: Bool,
                  policy: CompliancePolicy?, details: Bool) throws -> ScanFacts? {
        let reachable = reachableOnly ? "AND \(ScanRows.reached("o"))" : ""
        let rows = try connection.execute(Self.scanSQL(from: "observation o", policy: policy, details: details) + """
             WHERE o.target = $1 AND o.address = $2 AND o.started_at <= $3 \(reachable)
             ORDER BY o.started_at DESC, o.id DESC LIMIT 1
            """, [.text(target), .text(address), .double(time.timeIntervalSince1970)])
        return rows.count == 0 ? nil : try Self.scan(rows, 0, details: details)
    }

    func chainReferences(observationID: Int64) throws -> [ChainReference] {
        let rows = try connection.execute("""
            SELECT role, position, fingerprint FROM observation_certificate WHERE observation_id = $1
            ORDER BY role COLLATE "C", position
            """, [.int(observationID)])
        return (0..<rows.count).map { Self.reference(rows, $0) }
    }

    func chainReferences(observationIDs: [Int64]) throws -> [Int64: [ChainReference]] {
        guard !observationIDs.isEmpty else { return [:] }
        let rows = try connection.execute("""
            SELECT observation_id, role, position, fingerprint FROM observation_certificate WHERE observation_id = ANY($1::bigint[])
            ORDER BY observation_id, role COLLATE "C", position
            """, [.texts(observationIDs.map(String.init))])
        var chains: [Int64: [ChainReference]] = [:]
        for row in 0..<rows.count { chains[rows.int(row, "observation_id") ?? 0, default: []].append(Self.reference(rows, row)) }
        return chains
    }

    func certificate(fingerprint: String) throws -> ChainCertificate? {
        try Self.certificates(on: connection, where: "fingerprint = $1", [.text(fingerprint)])[fingerprint]
    }

    /// One query for all of them (a fleet's unreachable addresses: one round trip each took a
    /// second of a 10,000-target report).
    func lastReachableScans(of keys: [AddressKey], atOrBefore time: Date, policy: CompliancePolicy?) throws -> [AddressKey: ScanFacts] {
        guard !keys.isEmpty else { return [:] }
        let rows = try connection.execute(Self.scanSQL(from: """
            unnest($1::text[], $2::text[]) AS k(target, address)
            CROSS JOIN LATERAL (SELECT * FROM observation x WHERE x.target = k.target AND x.address = k.address AND x.started_at <= $3
                                  AND \(ScanRows.reached("x"))
                                ORDER BY x.started_at DESC, x.id DESC LIMIT 1) o
            """, policy: policy, details: true), [.texts(keys.map(\.target)), .texts(keys.map(\.address)), .double(time.timeIntervalSince1970)])
        var found: [AddressKey: ScanFacts] = [:]
        for row in 0..<rows.count {
            let scan = try Self.scan(rows, row, details: true)
            found[scan.key] = scan
        }
        return found
    }

    /// One query for all of them (a report's chains name thousands of certificates: one round
    /// trip each took 3 of a 10,000-target report's 5 seconds); those of the current chains come
    /// from the side connection.
    func certificates(fingerprints: [String]) throws -> [String: ChainCertificate] {
        guard !fingerprints.isEmpty else { return [:] }
        let prefetched = (try? currentCertificates?.value()) ?? [:]
        let asked = Set(fingerprints)
        var found = prefetched.filter { asked.contains($0.key) }
        let missing = fingerprints.filter { prefetched[$0] == nil }
        guard !missing.isEmpty else { return found }
        found.merge(try Self.certificates(on: connection, where: "fingerprint = ANY($1::text[])", [.texts(missing)])) { $1 }
        return found
    }

    private static func certificates(on connection: PostgresConnection, where condition: String,
                                     _ parameters: [PostgresValue?] = []) throws -> [String: ChainCertificate] {
        let rows = try connection.execute("""
            SELECT fingerprint, subject, issuer, not_before, not_after, summary::json ->> 'commonName' AS common_name FROM certificate
            WHERE \(condition)
            """, parameters)
        var found: [String: ChainCertificate] = [:]
        for row in 0..<rows.count {
            guard let fingerprint = rows.text(row, "fingerprint") else { continue }
            found[fingerprint] = ChainCertificate(fingerprint: fingerprint, subject: rows.text(row, "subject") ?? "",
                                                  commonName: rows.text(row, "common_name"), issuer: rows.text(row, "issuer") ?? "",
                                                  notBefore: Date(timeIntervalSince1970: rows.double(row, "not_before") ?? 0),
                                                  notAfter: Date(timeIntervalSince1970: rows.double(row, "not_after") ?? 0), depth: 0)
        }
        return found
    }

    func standings(at time: Date) throws -> [AddressKey: VerdictStanding] {
        var standings: [AddressKey: VerdictStanding] = [:]
        for reachableOnly in [false, true] {
            let rows = try connection.execute("""
                SELECT DISTINCT ON (target, address) target, address, started_at, condition, policy, failed_rules FROM address_change
                WHERE started_at <= $1 \(reachableOnly ? "AND condition != 'unreachable'" : "")
                ORDER BY target, address, started_at DESC, id DESC
                """, [.double(time.timeIntervalSince1970)])
            for row in 0..<rows.count {
                let change = try Self.change(rows, row)
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
        try stream("""
            SELECT target, address, started_at, condition, policy, failed_rules FROM address_change
            WHERE started_at > $1 AND started_at <= $2 ORDER BY started_at, id
            """, [.double(start.timeIntervalSince1970), .double(end.timeIntervalSince1970)]) { rows, row in
            try body(try Self.change(rows, row))
        }
    }

    func forEachScan(after start: Date, through end: Date, policy: CompliancePolicy,
                     _ body: (ScanFacts) throws -> Void) throws {
        try stream(Self.scanSQL(from: "observation o", policy: policy, details: false) + """
             WHERE o.started_at > $1 AND o.started_at <= $2 ORDER BY o.started_at, o.id
            """, [.double(start.timeIntervalSince1970), .double(end.timeIntervalSince1970)]) { rows, row in
            try body(try Self.scan(rows, row, details: false))
        }
    }

    func result(observationID: Int64) throws -> AddressScanResult? {
        try PostgresScanStore.loadResult(observationID: observationID, on: connection, summaries: &summaries)
    }

    func willCountScans(after start: Date, through end: Date, targets: Set<String>?) {
        guard let side else { return }
        counts = (Self.period(start, end, targets), side.start { connection in
            try Self.scanCounts(on: connection, after: start, through: end, targets: targets)
        })
    }

    func scanCounts(after start: Date, through end: Date, targets: Set<String>?) throws -> (all: Int, failed: Int) {
        // A side read that failed (its connection dropped) is read again here.
        if let counts, counts.period == Self.period(start, end, targets), let value = try? counts.pending.value() { return value }
        return try Self.scanCounts(on: connection, after: start, through: end, targets: targets)
    }

    private static func period(_ start: Date, _ end: Date, _ targets: Set<String>?) -> String {
        "\(start.timeIntervalSince1970) \(end.timeIntervalSince1970) \(targets?.sorted() ?? [])"
    }

    /// Counted by the server (grouping a million scans by target to filter them here took twice as long).
    private static func scanCounts(on connection: PostgresConnection, after start: Date, through end: Date,
                                   targets: Set<String>?) throws -> (all: Int, failed: Int) {
        var parameters: [PostgresValue?] = [.double(start.timeIntervalSince1970), .double(end.timeIntervalSince1970)]
        if let targets { parameters.append(.texts(targets.sorted())) }
        let rows = try connection.execute("""
            SELECT count(*) AS scans, count(*) FILTER (WHERE status = 'failed') AS failed FROM observation
            WHERE started_at > $1 AND started_at <= $2 \(targets == nil ? "" : "AND target = ANY($3::text[])")
            """, parameters)
        return (Int(rows.int(0, "scans") ?? 0), Int(rows.int(0, "failed") ?? 0))
    }

    func alerts(after start: Date, through end: Date) throws -> [AlertSummary] {
        let rows = try connection.execute("""
            SELECT id, created_at, kind, severity, target, address, summary,
                CASE WHEN kind = 'certificate.changed' THEN (document::jsonb -> 'changes')::text END AS changes
            FROM alert WHERE created_at > $1 AND created_at <= $2 ORDER BY created_at, id COLLATE "C"
            """, [.double(start.timeIntervalSince1970), .double(end.timeIntervalSince1970)])
        return try (0..<rows.count).map { row in
            let place = "alert \(rows.text(row, "id") ?? "?")"
            return AlertSummary(id: rows.text(row, "id") ?? "", createdAt: Date(timeIntervalSince1970: rows.double(row, "created_at") ?? 0),
                                kind: try StoredValues.known(rows.text(row, "kind"), "alert kind", in: place),
                                severity: try StoredValues.known(rows.text(row, "severity"), "alert severity", in: place),
                                target: rows.text(row, "target") ?? "", address: rows.text(row, "address") ?? "",
                                summary: rows.text(row, "summary") ?? "",
                                changes: try StoredValues.changes(rows.text(row, "changes")))
        }
    }

    // MARK: - Rows

    /// Runs a query through a cursor, 2,000 rows at a time (memory stays bounded).
    private func stream(_ sql: String, _ parameters: [PostgresValue?], _ body: (PostgresRows, Int) throws -> Void) throws {
        try connection.execute("DECLARE report_rows NO SCROLL CURSOR FOR " + sql, parameters)
        defer { _ = try? connection.execute("CLOSE report_rows") }
        while true {
            let rows = try connection.execute("FETCH 2000 FROM report_rows")
            if rows.count == 0 { return }
            for row in 0..<rows.count { try body(rows, row) }
        }
    }

    /// A scan query from `source` (which names the observation `o`), with its verdict under
    /// `policy` (its own when nil; when none is stored under it, the key of its content instead).
    private static func scanSQL(from source: String, policy: CompliancePolicy?, details: Bool) -> String {
        let join = policy.map { "LEFT JOIN verdict v ON v.observation_id = o.id AND v.policy = '\($0.rawValue)'" }
            ?? "JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy"
        let content = policy == nil ? "NULL" : "CASE WHEN v.observation_id IS NULL THEN coalesce(o.content_hash, 'id:' || o.id) END"
        // With details (a report's current scans, thousands at most), probed per scan: as EXISTS, the
        // planner hashed the pin state of every stored verdict (200 ms of a million-scan report).
        let pinMismatch = details
            ? "coalesce((SELECT bool_or(pv.pin::json ->> 'state' = 'mismatch') FROM verdict pv WHERE pv.observation_id = o.id), false)"
            : "EXISTS (SELECT 1 FROM verdict pv WHERE pv.observation_id = o.id AND pv.pin::jsonb ->> 'state' = 'mismatch')"
        // `json`, not `jsonb`: a cast to json only checks the text, a cast to jsonb converts it (a
        // 10,000-address report parsed each handshake twice: most of its query time).
        let detail = !details ? "" : """
            , (SELECT string_agg((f.value ->> 'severity') || ' ' || (f.value ->> 'id'), chr(31))
               FROM json_array_elements(v.findings::json) AS f) AS findings,
            o.port, o.failure_category, o.failure_message,
            h.document ->> 'protocolVersion' AS protocol_version, h.document -> 'cipher' ->> 'iana' AS cipher,
            p.document ->> 'state' AS pin_state, p.document ->> 'message' AS pin_message,
            o.inventory, o.http_headers, o.vulnerabilities, o.app
            """
        return """
            SELECT o.id, o.target, o.address, o.host, o.sni, o.started_at, o.status, o.trust_store IS NOT NULL AS has_chain,
                o.policy AS own_policy, v.policy AS stored_policy, v.compliant, v.failed_rules, \(content) AS content_key,
                \(pinMismatch) AS pin_mismatch
                \(detail)
            FROM \(source) \(join)
            \(details ? """
                LEFT JOIN verdict own ON own.observation_id = o.id AND own.policy = o.policy
                CROSS JOIN LATERAL (SELECT o.handshake::json AS document) h CROSS JOIN LATERAL (SELECT own.pin::json AS document) p
                """ : "")
            """
    }

    private static func scan(_ rows: PostgresRows, _ row: Int, details: Bool) throws -> ScanFacts {
        let id = rows.int(row, "id") ?? 0
        let place = "observation \(id)"
        var verdict: StoredVerdict?
        if rows.text(row, "stored_policy") != nil {
            verdict = StoredVerdict(compliant: rows.int(row, "compliant") == 1,
                                    failedRules: StoredRules(json: rows.text(row, "failed_rules") ?? "[]"),
                                    findings: details ? try FindingMarks.parse(rows.text(row, "findings"), in: place) : [])
        }
        var scan = ScanFacts(
            observationID: id, key: AddressKey(target: rows.text(row, "target") ?? "", address: rows.text(row, "address") ?? ""),
            host: rows.text(row, "host") ?? "", sni: rows.text(row, "sni"),
            startedAt: Date(timeIntervalSince1970: rows.double(row, "started_at") ?? 0),
            status: try StoredValues.known(rows.text(row, "status"), "status", in: place), hasChain: rows.bool(row, "has_chain") ?? false,
            ownPolicy: try StoredValues.known(rows.text(row, "own_policy"), "policy", in: place), verdict: verdict,
            contentKey: rows.text(row, "content_key"), pinMismatch: rows.bool(row, "pin_mismatch") ?? false)
        if details {
            scan.details = ScanDetails(
                port: Int(rows.int(row, "port") ?? 0),
                failureCategory: try StoredValues.known(rows.text(row, "failure_category"), "failure category", in: place, optional: true),
                failureMessage: rows.text(row, "failure_message"),
                protocolVersion: try StoredValues.known(rows.text(row, "protocol_version"), "protocol version", in: place,
                                                           optional: true),
                cipher: rows.text(row, "cipher"),
                pinState: try StoredValues.known(rows.text(row, "pin_state") ?? "none", "pin state", in: place),
                pinMessage: rows.text(row, "pin_message"))
            scan.details?.inventory = try StoredValues.stored(ServerInventory.self, rows.text(row, "inventory"), "inventory", in: place)
            scan.details?.headers = try StoredValues.stored(HTTPHeadersReport.self, rows.text(row, "http_headers"), "HTTP headers", in: place)
            scan.details?.vulnerabilities = try StoredValues.stored(VulnerabilityReport.self, rows.text(row, "vulnerabilities"),
                                                                    "vulnerabilities", in: place)
            scan.details?.app = try StoredValues.stored(AppHostOutcome.self, rows.text(row, "app"), "app outcome", in: place)
        }
        return scan
    }

    private static func reference(_ rows: PostgresRows, _ row: Int) -> ChainReference {
        ChainReference(role: rows.text(row, "role") ?? "", position: Int(rows.int(row, "position") ?? 0),
                       fingerprint: rows.text(row, "fingerprint") ?? "")
    }

    private static func change(_ rows: PostgresRows, _ row: Int) throws -> VerdictChange {
        let key = AddressKey(target: rows.text(row, "target") ?? "", address: rows.text(row, "address") ?? "")
        let place = "the address timeline of \(key.target) \(key.address)"
        return VerdictChange(key: key, at: Date(timeIntervalSince1970: rows.double(row, "started_at") ?? 0),
                             condition: try StoredValues.known(rows.text(row, "condition"), "condition", in: place),
                             policy: try StoredValues.known(rows.text(row, "policy"), "policy", in: place),
                             failedRules: StoredRules(json: rows.text(row, "failed_rules") ?? "[]"))
    }
}
