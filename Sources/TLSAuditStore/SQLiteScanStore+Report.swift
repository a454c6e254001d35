import Foundation
import GRDB
import TLSAuditCore

extension SQLiteScanStore {
    /// Reads what a compliance report needs: the state of every target address at `query.end`, the
    /// fleet's counts over the period and the verdict changes (one ordered pass over the stored
    /// verdict changes), and the period's alerts. With `query.policy` every scan of the period is
    /// judged again from its stored observation (each distinct content once per validity state);
    /// nothing is rescanned or written.
    public func reportData(_ query: ReportQuery, rejudge: @escaping Rejudging) throws -> ReportData {
        do {
            return try pool.read { db in
                var reader = ReportReader(query: query, db: db, rejudge: rejudge)
                return try reader.read()
            }
        } catch {
            throw Self.storeError(error, doing: "reading the report data")
        }
    }
}

/// One read of the report data, inside one read transaction (a consistent snapshot while the
/// service keeps writing).
private struct ReportReader {
    let query: ReportQuery
    let db: Database
    /// The caller's judge, for `query.policy`.
    let rejudge: Rejudging
    /// Verdicts re-judged under `query.policy`, by observation content hash.
    private var rejudged: [String: Judged] = [:]
    /// Observations judged again so far.
    private var judgements = 0
    /// Prefetched: latest scans by observation id, their certificate references, start states by key.
    private var latest: [Int64: Row] = [:]
    private var chains: [Int64: [ChainReference]] = [:]
    private var startStates: [String: Tracked] = [:]

    struct ChainReference {
        var role: String
        var position: Int
        var fingerprint: String
    }

    /// Certificates of current chains, by fingerprint.
    private var certificates: [String: ReportCertificate] = [:]
    /// Certificates decoded for re-judging, by fingerprint.
    private var summaries: [String: CertificateSummary] = [:]

    /// The current-state query over one observation `o` (see `currentSQL`), built once per report.
    private let currentDetails: String

    init(query: ReportQuery, db: Database, rejudge: @escaping Rejudging) {
        self.query = query
        self.db = db
        self.rejudge = rejudge
        currentDetails = Self.currentSQL(from: "observation o", policy: query.policy)
    }

    /// An address of the fleet, as the pass tracks it.
    private struct Tracked {
        var condition: AddressCondition?
        /// The last verdict of a scan that reached the server: transitions compare these.
        var lastReachable: (condition: AddressCondition, rules: String)?
    }

    mutating func read() throws -> ReportData {
        let fleet = try fleetKeys()
        var addresses: [ReportAddress] = []
        var timeline = Timeline(query: query)
        try prefetch()
        for member in fleet {
            guard let current = try currentState(member) else { continue }
            addresses.append(current)
            let key = Self.key(member.target, member.address)
            // Each scan's own verdicts: `prefetch` read every start state from address_change.
            let start = query.policy == nil ? startStates[key] ?? Tracked()
                : try stateAtStart(target: member.target, address: member.address)
            timeline.track(key, at: start)
        }
        if query.policy == nil {
            // Each scan's own verdict: the stored changes tell the whole story.
            let cursor = try Row.fetchCursor(db.cachedStatement(sql: """
                SELECT target || char(31) || address, started_at, condition, policy, failed_rules FROM address_change
                WHERE started_at > ? AND started_at <= ? ORDER BY started_at, rowid
                """), arguments: [query.start.timeIntervalSince1970, query.end.timeIntervalSince1970])
            while let row = try cursor.next() {
                let place = "the address timeline of \((row[0] as String).replacingOccurrences(of: "\u{1F}", with: " "))"
                let verdict = PassVerdict(condition: try SQLiteScanStore.known(row[2], "condition", in: place),
                                          policy: try SQLiteScanStore.known(row[3], "policy", in: place), rules: row[4], trustErrorsAndLints: [])
                try timeline.apply(verdict, key: row[0], at: Date(timeIntervalSince1970: row[1]))
            }
        } else {
            // Another policy: every scan judged again (identical observations once).
            let (columns, joins) = Self.verdictSQL(policy: query.policy)
            let cursor = try Row.fetchCursor(db, sql: """
                SELECT \(columns), o.target || char(31) || o.address AS k, o.started_at
                FROM observation o \(joins)
                WHERE o.started_at > ? AND o.started_at <= ?
                ORDER BY o.started_at, o.id
                """, arguments: [query.start.timeIntervalSince1970, query.end.timeIntervalSince1970])
            while let row = try cursor.next() {
                let key: String = row[Column.count]
                guard timeline.tracks(key) else { continue }
                try timeline.apply(try passVerdict(row, withTrust: false), key: key,
                                   at: Date(timeIntervalSince1970: row[Column.count + 1]))
            }
        }
        let scans = try scanCounts(targets: Set(fleet.map(\.target)))
        let (trend, transitions) = timeline.finish()
        return ReportData(query: query, addresses: addresses, trend: trend, transitions: transitions,
                          alerts: try alerts(targets: Set(fleet.map(\.target))), scans: scans.all, failedScans: scans.failed,
                          rejudged: judgements)
    }

    /// The fleet's counts over time and the verdict changes, fed verdicts in time order.
    private struct Timeline {
        let query: ReportQuery
        private var tracked: [String: Tracked] = [:]
        private var counts: [AddressCondition: Int] = [:]
        private var trend: [ReportTrendSample] = []
        private var nextSample: Date
        private var transitions: [ReportTransition] = []

        init(query: ReportQuery) {
            self.query = query
            nextSample = query.start
        }

        func tracks(_ key: String) -> Bool { tracked[key] != nil }

        mutating func track(_ key: String, at start: Tracked) {
            tracked[key] = start
            if let condition = start.condition { counts[condition, default: 0] += 1 }
        }

        /// Samples every step strictly before `time` not yet sampled.
        private mutating func sample(before time: Date) {
            while nextSample < time, nextSample < query.end {
                trend.append(ReportTrendSample(at: nextSample, compliant: counts[.compliant] ?? 0,
                                               notCompliant: counts[.notCompliant] ?? 0, unreachable: counts[.unreachable] ?? 0))
                nextSample = nextSample.addingTimeInterval(query.step)
            }
        }

        mutating func apply(_ verdict: PassVerdict, key: String, at time: Date) throws {
            guard var state = tracked[key] else { return }
            if trend.isEmpty { sample(before: query.start.addingTimeInterval(0.001)) }
            sample(before: time)
            if let old = state.condition { counts[old, default: 0] -= 1 }
            counts[verdict.condition, default: 0] += 1
            state.condition = verdict.condition
            if verdict.condition != .unreachable {
                if let previous = state.lastReachable,
                   let transition = try ReportReader.transition(from: previous, to: verdict, at: time, key: key) {
                    transitions.append(transition)
                }
                state.lastReachable = (verdict.condition, verdict.rules)
            }
            tracked[key] = state
        }

        /// The trend (start, every step, end) and the transitions.
        mutating func finish() -> ([ReportTrendSample], [ReportTransition]) {
            if trend.isEmpty { sample(before: query.start.addingTimeInterval(0.001)) }
            sample(before: query.end)
            trend.append(ReportTrendSample(at: query.end, compliant: counts[.compliant] ?? 0,
                                           notCompliant: counts[.notCompliant] ?? 0, unreachable: counts[.unreachable] ?? 0))
            return (trend, transitions)
        }
    }

    /// Scans stored in the period for `targets`, and how many of them reached nothing (from the
    /// time index alone).
    private func scanCounts(targets: Set<String>) throws -> (all: Int, failed: Int) {
        if query.targets == nil {
            let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT count(*), total(status = 'failed') FROM observation INDEXED BY observation_time_status
                WHERE started_at > ? AND started_at <= ?
                """), arguments: [query.start.timeIntervalSince1970, query.end.timeIntervalSince1970])
            return (row?[0] ?? 0, Int(row?[1] as Double? ?? 0))
        }
        let rows = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT target, count(*), total(status = 'failed') FROM observation INDEXED BY observation_time_status
            WHERE started_at > ? AND started_at <= ? GROUP BY target
            """), arguments: [query.start.timeIntervalSince1970, query.end.timeIntervalSince1970])
        var all = 0, failed = 0
        for row in rows where targets.contains(row[0]) {
            all += row[1]
            failed += Int(row[2] as Double)
        }
        return (all, failed)
    }

    // MARK: - The fleet

    /// A target address of the fleet, with its latest scan as `target_state` has it.
    private struct FleetAddress {
        var target: String
        var address: String
        var lastObservationID: Int64
        var lastScanAt: Double
    }

    /// Every (target, address) with a current state, limited to the configured targets when given.
    private func fleetKeys() throws -> [FleetAddress] {
        try Row.fetchAll(db, sql: """
            SELECT target, address, last_observation_id, last_scan_at FROM target_state ORDER BY target, address
            """).compactMap { row in
            let target: String = row[0]
            if let targets = query.targets, !targets.contains(target) { return nil }
            return FleetAddress(target: target, address: row[1], lastObservationID: row[2], lastScanAt: row[3])
        }
    }

    /// The address as of `query.end`: its last scan, the last that reached it, and that scan's chain.
    /// Nil when it was first scanned after the end.
    private mutating func currentState(_ fleet: FleetAddress) throws -> ReportAddress? {
        let details = currentDetails
        let last: Row?
        if fleet.lastScanAt <= query.end.timeIntervalSince1970 {
            // The usual case, a report up to now: `prefetch` read the scan target_state points at.
            last = latest[fleet.lastObservationID]
        } else {
            last = try Row.fetchOne(db.cachedStatement(sql: details + """
                 WHERE o.target = ? AND o.address = ? AND o.started_at <= ? ORDER BY o.started_at DESC, o.id DESC LIMIT 1
                """), arguments: [fleet.target, fleet.address, query.end.timeIntervalSince1970])
        }
        guard let last else { return nil }
        let verdict = try self.verdict(last)
        // The last scan that reached the server: usually that same one.
        let reachable = verdict.condition != .unreachable ? last : try Row.fetchOne(db.cachedStatement(sql: details + """
             WHERE o.target = ? AND o.address = ? AND o.started_at <= ? AND (o.status = 'completed' OR o.trust_store IS NOT NULL)
             ORDER BY o.started_at DESC, o.id DESC LIMIT 1
            """), arguments: [fleet.target, fleet.address, query.end.timeIntervalSince1970])
        var chain: [ReportCertificate] = []
        if let id: Int64 = reachable?[Column.id] {
            let references = try chains[id] ?? Row.fetchAll(db.cachedStatement(sql: """
                SELECT role, position, fingerprint FROM observation_certificate WHERE observation_id = ? ORDER BY role, position
                """), arguments: [id]).map { ChainReference(role: $0[0], position: $0[1], fingerprint: $0[2]) }
            let path = references.filter { $0.role == "path" }
            chain = try (path.isEmpty ? references : path).compactMap { reference in
                guard var certificate = try certificate(reference.fingerprint) else { return nil }
                certificate.depth = reference.position
                return certificate
            }
        }
        return ReportAddress(
            target: fleet.target, address: fleet.address, host: last["host"], port: last["port"],
            lastScanAt: Date(timeIntervalSince1970: last["started_at"]), verdict: verdict,
            pinState: try SQLiteScanStore.known((reachable?["pin_state"] as String?) ?? "none", "pin state", in: "the current state of \(fleet.target) \(fleet.address)"),
            pinMessage: reachable?["pin_message"],
            protocolVersion: last["protocol_version"], cipher: last["cipher"],
            failureCategory: last["failure_category"], failureMessage: last["failure_message"],
            lastReachableAt: (reachable?["started_at"] as Double?).map(Date.init(timeIntervalSince1970:)), chain: chain)
    }

    /// The current-state query: the verdict columns and what the report shows of a scan, from
    /// `source` (which names the observation `o`).
    private static func currentSQL(from source: String, policy: CompliancePolicy?) -> String {
        let (columns, joins) = verdictSQL(policy: policy, withTrust: true)
        return """
            SELECT \(columns), o.host, o.port, o.started_at, o.failure_category, o.failure_message,
                json_extract(o.handshake, '$.protocolVersion') AS protocol_version,
                json_extract(o.handshake, '$.cipher.iana') AS cipher,
                json_extract(own.pin, '$.state') AS pin_state, json_extract(own.pin, '$.message') AS pin_message
            FROM \(source) \(joins) LEFT JOIN verdict own ON own.observation_id = o.id AND own.policy = o.policy
            """
    }

    /// Reads in a few statements what the per-address reads would otherwise ask 10,000 times: every
    /// address's latest scan (as `target_state` points at it), those scans' certificate references,
    /// and (for each scan's own verdicts) where each address stood at the start of the period.
    private mutating func prefetch() throws {
        for row in try Row.fetchAll(db, sql: Self.currentSQL(from: "target_state t JOIN observation o ON o.id = t.last_observation_id",
                                                             policy: query.policy)
                                        + " WHERE t.last_scan_at <= ?", arguments: [query.end.timeIntervalSince1970]) {
            latest[row[Column.id]] = row
        }
        for row in try Row.fetchAll(db, sql: """
            SELECT c.observation_id, c.role, c.position, c.fingerprint
            FROM target_state t JOIN observation_certificate c ON c.observation_id = t.last_observation_id
            """) {
            chains[row[0], default: []].append(ChainReference(role: row[1], position: row[2], fingerprint: row[3]))
        }
        // (Sorted here: an ORDER BY would make SQLite walk all of observation_certificate in key order.)
        for id in chains.keys { chains[id]?.sort { ($0.role, $0.position) < ($1.role, $1.position) } }
        guard query.policy == nil else { return }
        // The last change at or before the start (none: no scan before it), and the last one that
        // reached the server (SQLite takes the bare columns from the row with the max).
        for reachableOnly in [false, true] {
            for row in try Row.fetchAll(db, sql: """
                SELECT target || char(31) || address, condition, failed_rules, max(started_at) FROM address_change
                WHERE started_at <= ? \(reachableOnly ? "AND condition != 'unreachable'" : "") GROUP BY target, address
                """, arguments: [query.start.timeIntervalSince1970]) {
                let key: String = row[0]
                let condition: AddressCondition = try SQLiteScanStore.known(row[1], "condition",
                    in: "the address timeline of \(key.replacingOccurrences(of: "\u{1F}", with: " "))")
                var state = startStates[key] ?? Tracked()
                if reachableOnly {
                    state.lastReachable = (condition, row[2])
                } else {
                    state.condition = condition
                    if condition != .unreachable { state.lastReachable = (condition, row[2]) }
                }
                startStates[key] = state
            }
        }
    }

    /// A stored certificate's dates and names, read once per report (a fleet shares its CAs).
    private mutating func certificate(_ fingerprint: String) throws -> ReportCertificate? {
        if let known = certificates[fingerprint] { return known }
        guard let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT subject, issuer, not_before, not_after, json_extract(summary, '$.commonName') FROM certificate
            WHERE fingerprint = ?
            """), arguments: [fingerprint]) else { return nil }
        let certificate = ReportCertificate(fingerprint: fingerprint, subject: row[0], commonName: row[4], issuer: row[1],
                                            notBefore: Date(timeIntervalSince1970: row[2]),
                                            notAfter: Date(timeIntervalSince1970: row[3]), depth: 0)
        certificates[fingerprint] = certificate
        return certificate
    }

    /// Where the address stood when the period began under `query.policy`: its last scan before the
    /// start, and the last one of those that reached the server. (Under each scan's own verdicts
    /// `prefetch` reads every start state from `address_change` at once.)
    private mutating func stateAtStart(target: String, address: String) throws -> Tracked {
        var state = Tracked()
        let (columns, joins) = Self.verdictSQL(policy: query.policy)
        for reachableOnly in [false, true] {
            guard let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT \(columns)
                FROM observation o \(joins)
                WHERE o.target = ? AND o.address = ? AND o.started_at <= ?
                    \(reachableOnly ? "AND (o.status = 'completed' OR o.trust_store IS NOT NULL)" : "")
                ORDER BY o.started_at DESC, o.id DESC LIMIT 1
                """), arguments: [target, address, query.start.timeIntervalSince1970]) else { break }
            let verdict = try passVerdict(row, withTrust: false)
            if !reachableOnly { state.condition = verdict.condition }
            if verdict.condition != .unreachable {
                state.lastReachable = (verdict.condition, verdict.rules)
                break
            }
        }
        return state
    }

    /// The period's alerts for `targets`, from their columns (only a certificate change's
    /// details are read from its document).
    private func alerts(targets: Set<String>) throws -> [ReportAlert] {
        try Row.fetchAll(db.cachedStatement(sql: """
            SELECT id, created_at, kind, severity, target, address, summary,
                CASE WHEN kind = 'certificate.changed' THEN json_extract(document, '$.changes') END
            FROM alert WHERE created_at > ? AND created_at <= ? ORDER BY created_at, id
            """), arguments: [query.start.timeIntervalSince1970, query.end.timeIntervalSince1970]).compactMap { row in
            let target: String = row[4]
            guard targets.contains(target) else { return nil }
            let place = "alert \(row[0] as String? ?? "?")"
            return ReportAlert(id: row[0], createdAt: Date(timeIntervalSince1970: row[1]),
                               kind: try SQLiteScanStore.known(row[2], "alert kind", in: place),
                               severity: try SQLiteScanStore.known(row[3], "alert severity", in: place),
                               target: target, address: row[5], summary: row[6],
                               changes: try SQLiteScanStore.decode([String: String].self, row[7]) ?? [:])
        }
    }

    // MARK: - Verdicts

    /// One observation content judged under `query.policy`: its certificates' validity windows, and
    /// its verdict for each validity state met so far (the only way time changes a verdict).
    private struct Judged {
        var windows: [(notBefore: Double, notAfter: Double)]
        var verdicts: [[Bool]: PassVerdict] = [:]

        init(_ result: AddressScanResult) {
            let certificates = (result.chain?.presented ?? []) + (result.chain?.path.map(\.certificate) ?? [])
            windows = certificates.map { ($0.notBefore.timeIntervalSince1970, $0.notAfter.timeIntervalSince1970) }
        }

        func validity(at time: Double) -> [Bool] {
            windows.map { time >= $0.notBefore && time <= $0.notAfter }
        }
    }

    /// The columns every verdict query starts with, in this order (read by index: a million
    /// rows make name lookups count).
    private enum Column {
        static let id = 0, status = 1, hasChain = 2, ownPolicy = 3, compliant = 4, failedRules = 5, trustErrorsAndLints = 6
        static let content = 7, sni = 8, host = 9, startedAt = 10
        /// 1 when a verdict of the observation records a pin mismatch (pins do not depend on the policy).
        static let pinMismatch = 11
        static let count = 12
    }

    /// The leading columns (see `Column`) and the joins giving each observation's verdict: the
    /// stored one under its own policy, or under `query.policy` when stored, else the content to
    /// re-judge it from.
    private static func verdictSQL(policy: CompliancePolicy?, withTrust: Bool = false) -> (columns: String, joins: String) {
        // The ids of the trust errors and of the conformance lints among the findings, comma-separated
        // (read for the current state only).
        let trustErrorsAndLints = !withTrust ? "NULL" : """
            (SELECT group_concat(json_extract(f.value, '$.id')) FROM json_each(v.findings) AS f
             WHERE \(SQLiteScanStore.trustErrorSQL) OR json_extract(f.value, '$.id') LIKE 'lint.%')
            """
        let observation = "o.id, o.status, o.trust_store IS NOT NULL, o.policy, v.compliant, v.failed_rules, \(trustErrorsAndLints)"
        let pinMismatch = """
            (SELECT 1 FROM verdict pv WHERE pv.observation_id = o.id AND json_extract(pv.pin, '$.state') = 'mismatch' LIMIT 1)
            """
        guard let policy else {
            return ("\(observation), NULL, NULL, NULL, o.started_at, \(pinMismatch)",
                    "JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy")
        }
        // Without a stored verdict under the policy: what it is judged from (see ObservationContent).
        return ("\(observation), CASE WHEN v.observation_id IS NULL THEN ifnull(o.content_hash, 'id:' || o.id) END, o.sni, o.host, o.started_at, \(pinMismatch)",
                "LEFT JOIN verdict v ON v.observation_id = o.id AND v.policy = '\(policy.rawValue)'")
    }

    /// A verdict as the pass compares them: the failed rules kept as their stored JSON text, so
    /// that a million scans are not decoded one by one (only changes are).
    fileprivate struct PassVerdict {
        var condition: AddressCondition
        var policy: CompliancePolicy
        var rules: String
        /// The ids of the trust errors and of the conformance lints (current state only).
        var trustErrorsAndLints: [String]
    }

    /// The verdict of a row that starts with `verdictSQL()`'s columns. `withTrust` decodes the
    /// findings to name the trust errors (only the current state shows them).
    private mutating func passVerdict(_ row: Row, withTrust: Bool) throws -> PassVerdict {
        var verdict = try policyVerdict(row, withTrust: withTrust)
        // A pin mismatch is never compliant, under any policy (CountedVerdict).
        if (row[Column.pinMismatch] as Int?) == 1 {
            verdict.condition = verdict.condition == .compliant ? .notCompliant : verdict.condition
            verdict.rules = try SQLiteScanStore.json(CountedVerdict.reasons(try SQLiteScanStore.rules(verdict.rules),
                                                                            pinState: .mismatch))
        }
        return verdict
    }

    /// The verdict under the report's policy alone (stored, or judged again).
    private mutating func policyVerdict(_ row: Row, withTrust: Bool) throws -> PassVerdict {
        let status: String = row[Column.status]
        let hasChain: Bool = row[Column.hasChain]
        if let content: String = row[Column.content], let policy = query.policy {
            let time: Double = row[Column.startedAt]
            if let known = rejudged[content], let verdict = known.verdicts[known.validity(at: time)] { return verdict }
            let id: Int64 = row[Column.id]
            guard let result = try SQLiteScanStore.loadResult(observationID: id, in: db, summaries: &summaries) else {
                throw StoreError(.other, "observation \(id) vanished while reading")
            }
            let hostname: String = row[Column.sni] ?? row[Column.host]
            let judged = rejudge(result, hostname, policy, result.startedAt)
            judgements += 1
            let verdict = PassVerdict(
                condition: try Self.condition(status: status, hasChain: hasChain, compliant: judged.verdict.compliant),
                policy: policy, rules: try SQLiteScanStore.json(judged.verdict.failedRules),
                trustErrorsAndLints: Self.trustErrorsAndLints(judged.findings))
            var entry = rejudged[content] ?? Judged(result)
            entry.verdicts[entry.validity(at: time)] = verdict
            rejudged[content] = entry
            return verdict
        }
        let policy = try query.policy ?? SQLiteScanStore.known(row[Column.ownPolicy], "policy", in: "observation \(row[Column.id] as Int64? ?? 0)")
        let reported = withTrust ? ((row[Column.trustErrorsAndLints] as String?)?.split(separator: ",").map(String.init) ?? []) : []
        let compliant: Bool = row[Column.compliant]
        return PassVerdict(condition: try Self.condition(status: status, hasChain: hasChain, compliant: compliant),
                           policy: policy, rules: row[Column.failedRules] ?? "[]", trustErrorsAndLints: reported)
    }

    private mutating func verdict(_ row: Row) throws -> ReportVerdict {
        let verdict = try passVerdict(row, withTrust: true)
        var report = ReportVerdict(condition: verdict.condition, policy: verdict.policy,
                                   failedRules: try SQLiteScanStore.rules(verdict.rules),
                                   trustErrors: verdict.trustErrorsAndLints.filter { $0.hasPrefix("trust.") })
        var seen = Set<String>()
        report.lints = verdict.trustErrorsAndLints.filter { $0.hasPrefix("lint.") && seen.insert($0).inserted }
        return report
    }

    static func condition(status: String, hasChain: Bool, compliant: Bool) throws -> AddressCondition {
        AddressCondition(status: try SQLiteScanStore.known(status, "status", in: "an observation"), hasChain: hasChain, compliant: compliant)
    }

    /// The trust errors, then the conformance lints (`verdict(_:)` tells them apart by prefix).
    static func trustErrorsAndLints(_ findings: [Finding]) -> [String] {
        findings.filter { $0.isTrustError || $0.id.rawValue.hasPrefix("lint.") }.map(\.id.rawValue)
    }

    /// A new failure or a fix between two verdicts of scans that reached the server.
    fileprivate static func transition(from previous: (condition: AddressCondition, rules: String), to verdict: PassVerdict,
                                   at time: Date, key: String) throws -> ReportTransition? {
        guard previous.condition != verdict.condition || previous.rules != verdict.rules else { return nil }
        let parts = key.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false)
        let target = String(parts[0]), address = parts.count > 1 ? String(parts[1]) : ""
        let before = try SQLiteScanStore.rules(previous.rules)
        let now = try SQLiteScanStore.rules(verdict.rules)
        func make(_ kind: ReportTransition.Kind, _ rules: [String]) -> ReportTransition {
            ReportTransition(kind: kind, target: target, address: address, at: time, policy: verdict.policy, rules: rules)
        }
        switch (previous.condition, verdict.condition) {
        case (.compliant, .notCompliant):
            return make(.newFailure, now)
        case (.notCompliant, .compliant):
            return make(.fix, before)
        case (.notCompliant, .notCompliant):
            let added = now.filter { !before.contains($0) }
            return added.isEmpty ? nil : make(.newFailure, added)
        default:
            return nil
        }
    }

    static func key(_ target: String, _ address: String) -> String { target + "\u{1F}" + address }

}
