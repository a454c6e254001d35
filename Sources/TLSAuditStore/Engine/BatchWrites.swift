import Foundation
import TLSAuditModel

/// What one batch of scans writes, gathered in memory and then written in a fixed number of
/// statements (`SQLExecutor.execute(_:rows:)`: one round trip each on PostgreSQL) however many
/// scans the batch holds: observations, chain references, verdicts, certificates not seen
/// before, runs extended, timeline rows, expiry marks and the addresses' current states. It
/// reads the batch's addresses once (current states, expiry marks, the timeline's newest rows)
/// and carries them forward scan by scan, so two scans of one address in a batch see each other.
struct BatchWrites {
    private let statements: StoreEngine.Statements

    /// What an address's current state (`target_state`) says when the batch starts, and after
    /// each scan added.
    struct CurrentState {
        /// The latest start time recorded.
        var lastScanAt: Double
        /// Where the address's newest scan stands in the order of observation (`orderAt`).
        var orderAt: Double
        var observationID: Int64
        var runKey: String?
        var memory: AddressMemory

        init(_ row: any SQLRow) throws {
            let place = "the current state of \(row.text("target") ?? "?") \(row.text("address") ?? "?")"
            lastScanAt = row.double("last_scan_at") ?? 0
            orderAt = row.double("order_at") ?? lastScanAt
            observationID = row.int("last_observation_id") ?? 0
            runKey = row.text("run_key")
            memory = AddressMemory(
                pinState: try StoredValues.known(row.text("pin_state"), "pin state", in: place, optional: true),
                leafFingerprint: row.text("leaf_fingerprint"), leafSPKI: row.text("leaf_spki"),
                atsCompliant: row.int("ats_compliant").map { $0 == 1 }, failedRules: try StoredValues.rules(row.text("failed_rules")),
                trusted: row.int("trusted").map { $0 == 1 }, consecutiveFailures: Int(row.int("consecutive_failures") ?? 0),
                unreachableAlerted: row.int("unreachable_alerted") == 1, expiryMarks: [])
        }

        init(lastScanAt: Double, orderAt: Double, observationID: Int64, runKey: String?, memory: AddressMemory) {
            self.lastScanAt = lastScanAt
            self.orderAt = orderAt
            self.observationID = observationID
            self.runKey = runKey
            self.memory = memory
        }
    }

    /// The columns `CurrentState` reads, by name (the columns it needs, not `*`: every column fetched is copied).
    static let currentStates = """
        SELECT target, address, last_scan_at, last_observation_id, run_key, pin_state, leaf_fingerprint, leaf_spki,
            ats_compliant, failed_rules, trusted, consecutive_failures, unreachable_alerted,
            coalesce(order_at, last_scan_at) AS order_at
        FROM target_state
        """

    private var states: [AddressKey: CurrentState] = [:]
    private var marks: [AddressKey: Set<String>] = [:]
    /// The timeline's newest state per address (condition, policy, failed rules).
    private var timeline: [AddressKey: [String]] = [:]
    /// For addresses without a current state: when their newest stored scan (a run's last) started.
    private var newestScan: [AddressKey: Double] = [:]
    /// Addresses with a scan out of order in this batch: their later scans go the same way.
    private var outOfOrder: Set<AddressKey> = []

    /// Each certificate of the new observations, with the time of the first scan that showed it.
    private var certificates: [String: (row: ScanRows.CertificateRow, firstSeen: Double)] = [:]
    private var observations: [[SQLValue]] = []
    private var references: [[SQLValue]] = []
    private var verdicts: [[SQLValue]] = []
    private var changes: [[SQLValue]] = []
    /// Scans that extend a run: its observation, the scan's start, order, duration and node.
    private var repeats: [(observationID: Int64, startedAt: Double, orderAt: Double, durationMs: Int, node: String?)] = []
    private var expiryMarks: [[SQLValue]] = []
    /// The newest state per address (one row each: a statement may not update a row twice).
    private var newStates: [AddressKey: (values: [SQLValue], fenced: Bool)] = [:]
    private(set) var alerts: [(alert: Alert, sinks: [String], observationID: Int64)] = []
    /// Observation ids reserved and not used yet, and how many scans may still need one.
    private var reserved: [Int64] = []
    private var unplaced: Int

    /// Writes with nothing read (a scan written on its own).
    init(statements: StoreEngine.Statements) {
        self.statements = statements
        unplaced = 1
    }

    /// Reads what the batch's `keys` need to be placed: one statement each for their targets'
    /// current states, expiry marks and timelines, one more when some address has no state.
    init(reading keys: [AddressKey], statements: StoreEngine.Statements, in sql: any SQLExecutor) throws {
        self.statements = statements
        unplaced = keys.count
        let dialect = sql.dialect
        let ofTargets = dialect.isIn("target", .texts(Set(keys.map(\.target)).sorted()))
        for (key, state) in try sql.rows("\(raw: Self.currentStates) WHERE \(ofTargets)", {
            (AddressKey(target: $0.text(0) ?? "", address: $0.text(1) ?? ""), try CurrentState($0))
        }) {
            states[key] = state
        }
        try sql.query("SELECT target, address, mark FROM expiry_alert WHERE \(ofTargets)", streaming: false) { row in
            marks[AddressKey(target: row.text(0) ?? "", address: row.text(1) ?? ""), default: []].insert(row.text(2) ?? "")
        }
        let newest = dialect.newestPerAddress(["target", "address", "started_at", "condition", "policy", "failed_rules"],
                                              from: "address_change", where: ofTargets,
                                              by: "coalesce(order_at, started_at)")
        try sql.query(newest, streaming: false) { row in
            timeline[AddressKey(target: row.text(0) ?? "", address: row.text(1) ?? "")] = [row.text(3) ?? "", row.text(4) ?? "", row.text(5) ?? ""]
        }
        let stateless = Set(keys.filter { states[$0] == nil }.map(\.target))
        if !stateless.isEmpty {
            try sql.query("""
                SELECT o.target, o.address, max(coalesce(r.last_seen_at, o.started_at))
                FROM observation o LEFT JOIN observation_run r ON r.observation_id = o.id
                WHERE \(dialect.isIn("o.target", .texts(stateless.sorted()))) GROUP BY o.target, o.address
                """ as SQLFragment, streaming: false) { row in
                newestScan[AddressKey(target: row.text(0) ?? "", address: row.text(1) ?? "")] = row.double(2)
            }
        }
    }

    /// Whether the scan may be stored already: it is no newer than the newest scan stored of its
    /// address (a new scan always is newer). Nothing else is read for the usual scan.
    func mayHoldAlready(_ scan: StoredScan, _ rows: ScanRows) -> Bool {
        let key = AddressKey(target: scan.target, address: rows.result.address)
        let time = rows.result.startedAt.timeIntervalSince1970
        return (states[key]?.lastScanAt ?? newestScan[key]).map { time <= $0 } ?? false
    }

    /// A scan of the keys read that is not written after all (stored already, or its lease lost):
    /// it needs no observation id.
    mutating func place(nothingFor scan: StoredScan) {
        unplaced -= 1
    }

    /// Whether the scan follows everything stored of its address (so it may extend the current run
    /// and its timeline row follows the newest): true for the usual scan, and for one taken after
    /// the wall clock stepped back (it follows by arrival: it extends the current run); false for a
    /// late one, a fenced one behind its address's clock, or one of an address whose history is
    /// newer than any state.
    mutating func fitsInOrder(_ scan: StoredScan, _ rows: ScanRows) -> Bool {
        let key = AddressKey(target: scan.target, address: rows.result.address)
        let time = rows.result.startedAt.timeIntervalSince1970
        guard !outOfOrder.contains(key) else { return false }
        let follows = (scan.afterClockStepBack && states[key] != nil)
            || states[key].map { time >= $0.lastScanAt } ?? (newestScan[key].map { time >= $0 } ?? true)
        if !follows { outOfOrder.insert(key) }
        unplaced -= follows ? 0 : 1
        return follows
    }

    /// Where an in-order scan stands in its address's order of observation: at its start time,
    /// or, when the wall clock stands behind the address's newest scan (stepped back), a
    /// millisecond after that scan. The order never runs backwards for an address.
    static func orderAt(startedAt: Double, after newest: Double?) -> Double {
        guard let newest, startedAt <= newest else { return startedAt }
        return newest + 0.001
    }

    /// Adds an in-order scan: it extends its address's run when its content and verdict are the
    /// run's, else it is a new observation (and a timeline row when its verdict changed).
    mutating func add(_ scan: StoredScan, _ rows: ScanRows, decide: AlertDecision, in sql: any SQLExecutor) throws -> [Alert] {
        let key = AddressKey(target: scan.target, address: rows.result.address)
        let startedAt = rows.result.startedAt.timeIntervalSince1970
        let orderAt = Self.orderAt(startedAt: startedAt, after: states[key]?.orderAt)
        let observationID: Int64
        if let current = states[key], current.runKey == rows.runKey {
            observationID = current.observationID
            repeats.append((observationID, startedAt, orderAt, rows.result.durationMs, scan.node))
        } else {
            observationID = try reserveID(in: sql, count: unplaced)
            try addObservation(scan, rows, id: observationID, orderAt: orderAt)
            if timeline[key] != rows.timeline {
                changes.append([.text(key.target), .text(key.address), .double(startedAt), .int(observationID),
                                .text(rows.timeline[0]), .text(rows.timeline[1]), .text(rows.timeline[2]), .double(orderAt)])
                timeline[key] = rows.timeline
            }
        }
        unplaced -= 1
        var previous = states[key]?.memory
        previous?.expiryMarks = marks[key] ?? []
        previous?.lastScanAt = states[key].map { Date(timeIntervalSince1970: $0.lastScanAt) }
        return try addState(scan, rows, observationID: observationID, runKey: rows.runKey, orderAt: orderAt, previous: previous,
                            decide: decide)
    }

    /// An observation id for a new observation: the first call reserves `count` at once.
    mutating func reserveID(in sql: any SQLExecutor, count: Int) throws -> Int64 {
        if reserved.isEmpty {
            reserved = try sql.rows(sql.dialect.reserveObservationIDs(max(1, count))) { $0.int(0) ?? 0 }.reversed()
        }
        guard let id = reserved.popLast() else { throw StoreError(.other, "no observation id was reserved") }
        return id
    }

    /// The observation's row, its certificate references and verdict, and its certificates.
    /// `orderAt`: where it stands in its address's order of observation (`orderAt(startedAt:after:)`).
    mutating func addObservation(_ scan: StoredScan, _ rows: ScanRows, id: Int64, orderAt: Double) throws {
        let result = rows.result
        let startedAt = result.startedAt.timeIntervalSince1970
        for certificate in rows.certificates where certificates[certificate.fingerprint] == nil {
            certificates[certificate.fingerprint] = (certificate, startedAt)
        }
        observations.append([
            .int(id), .text(scan.target), .text(scan.host), .of(scan.port), .of(scan.sni), .text(result.address), .text(result.family),
            .double(startedAt), .of(result.durationMs), .text(result.status.rawValue),
            .of(result.error?.category.rawValue), .of(result.error?.message), .of(result.error?.alert),
            .of(rows.handshake), .of(result.atsClientRefusal), .of(result.chain?.trustStore), .of(rows.anchored),
            .of(rows.pathIssues), .text(result.ats.policy.rawValue), .text(rows.contentHash), .of(rows.revocation),
            .of(scan.node), .of(scan.vantage), .of(rows.inventory), .of(rows.headers), .of(rows.vulnerabilities),
            .of(rows.enumeration), .of(rows.anchorIn), .of(rows.app), .of(rows.clients), .of(rows.judgedWith),
            .of(rows.checkReports), .double(orderAt)])
        for reference in rows.references {
            references.append([.int(id), .text(reference.role), .of(reference.position), .text(reference.fingerprint), .of(reference.source)])
        }
        verdicts.append([.int(id), .text(result.ats.policy.rawValue), .double(startedAt), .of(result.ats.compliant),
                         .text(rows.failedRules), .text(rows.findings), .of(rows.pin)])
    }

    /// Change detection against the address's memory (`decide`): the alerts and expiry marks it
    /// raises and the address's new current state.
    mutating func addState(_ scan: StoredScan, _ rows: ScanRows, observationID: Int64, runKey: String?, orderAt: Double,
                           previous: AddressMemory?, decide: AlertDecision) throws -> [Alert] {
        let result = rows.result
        let key = AddressKey(target: scan.target, address: result.address)
        let startedAt = result.startedAt.timeIntervalSince1970
        let outcome = decide(previous, StoredScan(target: scan.target, host: scan.host, port: scan.port, sni: scan.sni, result: result),
                             observationID)
        let memory = outcome.memory
        for mark in memory.expiryMarks.subtracting(previous?.expiryMarks ?? []) {
            expiryMarks.append([.text(key.target), .text(key.address), .text(mark), .double(startedAt)])
        }
        marks[key, default: []].formUnion(memory.expiryMarks)
        alerts += outcome.alerts.map { ($0.alert, $0.sinks, observationID) }
        let failed = result.status == .failed
        var values: [SQLValue] = [
            .text(key.target), .text(key.address), .text(scan.host), .of(scan.port), .int(observationID),
            .double(startedAt), .text(result.status.rawValue), .text(result.ats.policy.rawValue),
            .of(result.ats.compliant), .text(try StoredValues.json(memory.failedRules)),
            .of(rows.earliestExpiry), .of(memory.leafFingerprint), .of(memory.leafSPKI),
            .of(result.error?.category.rawValue), .of(memory.consecutiveFailures),
            failed ? .null : .double(startedAt), .text((memory.pinState ?? .none).rawValue), .of(result.pin?.message),
            memory.atsCompliant.map { .of($0) } ?? .null, memory.trusted.map { .of($0) } ?? .null,
            .of(memory.unreachableAlerted), .text(rows.tags), .of(rows.app), .of(runKey), .double(orderAt)]
        // An earlier scan of the batch's expiry and last success stand where this one has none
        // (the upsert keeps the stored ones the same way).
        if let earlier = newStates[key]?.values {
            for column in [Self.earliestExpiryColumn, Self.lastSuccessColumn] where values[column] == .null {
                values[column] = earlier[column]
            }
        }
        newStates[key] = (values, scan.ordersByArrival)
        states[key] = CurrentState(lastScanAt: max(startedAt, states[key]?.lastScanAt ?? startedAt),
                                   orderAt: max(orderAt, states[key]?.orderAt ?? orderAt), observationID: observationID,
                                   runKey: runKey, memory: memory)
        return outcome.alerts.map(\.alert)
    }

    /// Writes everything gathered, in the order the tables refer to each other, and forgets it.
    mutating func flush(into sql: any SQLExecutor) throws {
        if !certificates.isEmpty {
            let fingerprints = certificates.keys.sorted()
            let known = Set(try sql.rows("SELECT fingerprint FROM certificate WHERE \(sql.dialect.isIn("fingerprint", .texts(fingerprints)))") {
                $0.text(0) ?? ""
            })
            // Most scans show certificates already stored: only the others are encoded.
            try sql.execute(Self.insertCertificates, rows: try fingerprints.filter { !known.contains($0) }.map { fingerprint in
                let (certificate, firstSeen) = certificates[fingerprint]!
                return [.text(fingerprint), .bytes(certificate.der), .text(certificate.subject), .text(certificate.issuer),
                        .double(certificate.notBefore), .double(certificate.notAfter), .text(certificate.spki),
                        .text(try certificate.summary()), .double(firstSeen)]
            })
        }
        try sql.execute(Self.insertObservations, rows: observations)
        try sql.execute(Self.insertReferences, rows: references)
        try sql.execute(Self.insertVerdicts, rows: verdicts)
        try sql.execute(Self.insertRepeats, rows: repeats.map {
            [.int($0.observationID), .double($0.startedAt), .of($0.durationMs), .of($0.node)]
        })
        // Each run's summary of the batch's repeats (one row per run: a statement may not update a row twice).
        let runs = Dictionary(grouping: repeats, by: \.observationID).sorted { $0.key < $1.key }
        try sql.execute(Self.extendRuns, rows: runs.map { id, scans in
            let durations = scans.map(\.durationMs)
            return [.int(id), .of(scans.count), .double(scans.map(\.startedAt).max()!), .of(durations.min()!), .of(durations.max()!),
                    .of(durations.reduce(0, +)), .double(scans.map(\.orderAt).max()!)]
        })
        try sql.execute(Self.insertChanges, rows: changes)
        try sql.execute(Self.insertExpiryMarks, rows: expiryMarks)
        if !alerts.isEmpty {
            // An alert stored already (a scan stored again) gets no new deliveries.
            let known = Set(try sql.rows("SELECT id FROM alert WHERE \(sql.dialect.isIn("id", .texts(alerts.map(\.alert.id))))") {
                $0.text(0) ?? ""
            })
            var seen = known
            let fresh = alerts.filter { seen.insert($0.alert.id).inserted }
            try sql.execute(Self.insertAlerts, rows: try fresh.map { try Self.alertRow($0.alert, observationID: $0.observationID) })
            try sql.execute(statements.insertDeliveries, rows: fresh.flatMap { alert, sinks, _ in
                sinks.map { [.text(alert.id), .text($0), sql.dialect.time(alert.createdAt)] }
            })
        }
        // In key order: two writers of overlapping addresses lock their rows in one order.
        let ordered = newStates.sorted { ($0.key.target, $0.key.address) < ($1.key.target, $1.key.address) }
        try sql.execute(Self.upsertStates(fenced: false), rows: ordered.filter { !$0.value.fenced }.map(\.value.values))
        try sql.execute(Self.upsertStates(fenced: true), rows: ordered.filter { $0.value.fenced }.map(\.value.values))
        certificates = [:]
        observations = []
        references = []
        verdicts = []
        changes = []
        repeats = []
        expiryMarks = []
        alerts = []
        newStates = [:]
    }

    /// A target's current state is the addresses its latest scan saw: drops the others (rotated
    /// out of DNS, or the placeholder of an earlier resolution failure). Only rows older than the
    /// scans: a late batch does not undo a newer resolution.
    func dropRotatedAddresses(of scans: [StoredScan], in sql: any SQLExecutor) throws {
        var dropped: [[SQLValue]] = []
        for (target, group) in Dictionary(grouping: scans, by: \.target) {
            let addresses = Set(group.map(\.result.address))
            guard !addresses.contains("-") else { continue }
            let oldest = group.map(\.result.startedAt.timeIntervalSince1970).min() ?? 0
            for (key, state) in states where key.target == target && !addresses.contains(key.address) && state.lastScanAt < oldest {
                dropped.append([.text(key.target), .text(key.address), .double(oldest)])
            }
        }
        try sql.execute(Self.dropStates, rows: dropped)
    }

    // MARK: - The statements

    private static func columns(_ list: String) -> [SQLBatch.Column] {
        list.split(separator: " ").map { field in
            let parts = field.split(separator: ":")
            return SQLBatch.Column(String(parts[0]), SQLColumnType(rawValue: String(parts[1]))!)
        }
    }

    static let insertCertificates = SQLBatch.insert(into: "certificate", columns("""
        fingerprint:text der:bytea subject:text issuer:text not_before:float8 not_after:float8 spki_sha256:text summary:text \
        first_seen:float8
        """), "ON CONFLICT (fingerprint) DO NOTHING")

    static let insertObservations = SQLBatch.insert(into: "observation", columns("""
        id:bigint target:text host:text port:bigint sni:text address:text family:text started_at:float8 duration_ms:bigint \
        status:text failure_category:text failure_message:text failure_alert:text handshake:text ats_refusal:text \
        trust_store:text anchored:bigint path_issues:text policy:text content_hash:text revocation:text node:text vantage:text \
        inventory:text http_headers:text vulnerabilities:text enumeration:text anchor_in:text app:text clients:text judged_with:text \
        check_reports:text order_at:float8
        """))

    static let insertReferences = SQLBatch.insert(into: "observation_certificate", columns("""
        observation_id:bigint role:text position:bigint fingerprint:text source:text
        """))

    static let insertVerdicts = SQLBatch.insert(into: "verdict", columns("""
        observation_id:bigint policy:text judged_at:float8 compliant:bigint failed_rules:text findings:text pin:text
        """))

    static let insertChanges = SQLBatch.insert(into: "address_change", columns("""
        target:text address:text started_at:float8 observation_id:bigint condition:text policy:text failed_rules:text order_at:float8
        """))

    static let insertAlerts = SQLBatch.insert(into: "alert", columns("""
        id:text created_at:float8 target:text address:text kind:text severity:text summary:text document:text observation_id:bigint
        """), "ON CONFLICT (id) DO NOTHING")

    /// An alert's row for `insertAlerts` (`observationID`: the scan that raised it, if one did).
    static func alertRow(_ alert: Alert, observationID: Int64?) throws -> [SQLValue] {
        [.text(alert.id), .time(alert.createdAt), .text(alert.target), .text(alert.address), .text(alert.kind.rawValue),
         .text(alert.severity.rawValue), .text(alert.summary), .text(try StoredValues.json(alert)), .of(observationID)]
    }

    /// A pending delivery per alert and sink, due at the alert's time (`due`, on the dialect's clock).
    static func insertDeliveries(clock: String) -> SQLBatch {
        SQLBatch(columns("alert_id:text sink:text due:float8")) { rows in
            """
            INSERT INTO alert_delivery (alert_id, sink, state, attempts, next_attempt_at)
            SELECT alert_id, sink, 'pending', 0, \(clock) FROM \(rows) WHERE true ON CONFLICT DO NOTHING
            """
        }
    }

    static let insertExpiryMarks = SQLBatch.insert(into: "expiry_alert", columns("target:text address:text mark:text created_at:float8"),
                                                   "ON CONFLICT DO NOTHING")

    /// The repeats of runs, each scan's time, duration and node (a scan written twice, replayed
    /// from a spill file after it was stored, is one scan).
    static let insertRepeats = SQLBatch.insert(into: "run_scan", columns("observation_id:bigint started_at:float8 duration_ms:bigint node:text"),
                                               "ON CONFLICT DO NOTHING")

    /// Extends runs by the repeats of the batch (a run's first repeat creates its row).
    static let extendRuns = SQLBatch.insert(into: "observation_run", columns("""
        observation_id:bigint repeats:bigint last_seen_at:float8 duration_min_ms:bigint duration_max_ms:bigint duration_sum_ms:bigint \
        last_order_at:float8
        """), """
        ON CONFLICT (observation_id) DO UPDATE SET repeats = observation_run.repeats + excluded.repeats,
            last_seen_at = CASE WHEN excluded.last_seen_at > observation_run.last_seen_at THEN excluded.last_seen_at
                                ELSE observation_run.last_seen_at END,
            duration_min_ms = CASE WHEN excluded.duration_min_ms < observation_run.duration_min_ms THEN excluded.duration_min_ms
                                   ELSE observation_run.duration_min_ms END,
            duration_max_ms = CASE WHEN excluded.duration_max_ms > observation_run.duration_max_ms THEN excluded.duration_max_ms
                                   ELSE observation_run.duration_max_ms END,
            duration_sum_ms = observation_run.duration_sum_ms + excluded.duration_sum_ms,
            last_order_at = CASE WHEN excluded.last_order_at > coalesce(observation_run.last_order_at, observation_run.last_seen_at)
                                 THEN excluded.last_order_at
                                 ELSE coalesce(observation_run.last_order_at, observation_run.last_seen_at) END
        """)

    private static let stateColumns = columns("""
        target:text address:text host:text port:bigint last_observation_id:bigint last_scan_at:float8 status:text policy:text \
        compliant:bigint failed_rules:text earliest_expiry:float8 leaf_fingerprint:text leaf_spki:text failure_category:text \
        consecutive_failures:bigint last_success_at:float8 pin_state:text pin_message:text ats_compliant:bigint trusted:bigint \
        unreachable_alerted:bigint tags:text app:text run_key:text order_at:float8
        """)
    private static let earliestExpiryColumn = stateColumns.firstIndex { $0.name == "earliest_expiry" }!
    private static let lastSuccessColumn = stateColumns.firstIndex { $0.name == "last_success_at" }!

    /// The addresses' current states. A fenced scan (its claim orders it after every other) may
    /// replace a state its node's clock calls newer; `last_scan_at` keeps the later of the two times.
    private static func upsertStates(fenced: Bool) -> SQLBatch { fenced ? upsertFencedStates : upsertUnfencedStates }
    private static let upsertFencedStates = upsertStates(replacingNewer: true)
    private static let upsertUnfencedStates = upsertStates(replacingNewer: false)
    private static func upsertStates(replacingNewer: Bool) -> SQLBatch {
        SQLBatch.insert(into: "target_state", stateColumns, """
            ON CONFLICT (target, address) DO UPDATE SET
                host = excluded.host, port = excluded.port,
                last_observation_id = excluded.last_observation_id,
                last_scan_at = CASE WHEN excluded.last_scan_at > target_state.last_scan_at THEN excluded.last_scan_at
                                    ELSE target_state.last_scan_at END,
                status = excluded.status, policy = excluded.policy, compliant = excluded.compliant,
                failed_rules = excluded.failed_rules,
                earliest_expiry = coalesce(excluded.earliest_expiry, target_state.earliest_expiry),
                leaf_fingerprint = excluded.leaf_fingerprint, leaf_spki = excluded.leaf_spki,
                failure_category = excluded.failure_category,
                consecutive_failures = excluded.consecutive_failures,
                last_success_at = coalesce(excluded.last_success_at, target_state.last_success_at),
                pin_state = excluded.pin_state,
                pin_message = excluded.pin_message,
                ats_compliant = excluded.ats_compliant, trusted = excluded.trusted,
                unreachable_alerted = excluded.unreachable_alerted,
                tags = excluded.tags, app = excluded.app, run_key = excluded.run_key,
                order_at = CASE WHEN excluded.order_at > coalesce(target_state.order_at, target_state.last_scan_at)
                                THEN excluded.order_at ELSE coalesce(target_state.order_at, target_state.last_scan_at) END
            \(replacingNewer ? "" : "WHERE target_state.last_scan_at <= excluded.last_scan_at")
            """)
    }

    static let dropStates = SQLBatch(columns("target:text address:text before:float8")) { rows in
        """
        DELETE FROM target_state WHERE EXISTS (SELECT 1 FROM \(rows)
            WHERE u.target = target_state.target AND u.address = target_state.address AND target_state.last_scan_at < u.before)
        """
    }
}
