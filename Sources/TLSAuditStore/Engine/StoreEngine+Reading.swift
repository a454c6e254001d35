import Foundation
import TLSAuditModel

extension StoreEngine {
    func status() throws -> [TargetStatus] { try status(where: "", []) }

    func status(of target: String) throws -> [TargetStatus] { try status(where: "WHERE t.target = ?", [.text(target)]) }

    func vantageStatus(of target: String) throws -> [TargetStatus] {
        try status(where: "WHERE t.target LIKE ? ESCAPE '\\'", [.text(VantageTarget.likePattern(target))])
    }

    private func status(where filter: String, _ values: [SQLValue]) throws -> [TargetStatus] {
        try database.read(doing: "reading the status", snapshot: false) { sql in
            let dialect = sql.dialect
            return try sql.rows("""
                SELECT t.*, (SELECT \(dialect.findingMarks(of: "v.findings")) FROM verdict v
                             WHERE v.observation_id = t.last_observation_id AND v.policy = t.policy) AS findings
                FROM target_state t \(filter) ORDER BY t.target\(dialect.bytewise), t.address\(dialect.bytewise)
                """, values) { row in
                let place = "the current state of \(row.text("target") ?? "?") \(row.text("address") ?? "?")"
                let pinState: PinEvaluation.State = try StoredValues.known(row.text("pin_state") ?? "none", "pin state", in: place)
                var status = TargetStatus(
                    target: row.text("target") ?? "", address: row.text("address") ?? "", host: row.text("host") ?? "",
                    port: row.integer("port"), lastScanAt: row.date("last_scan_at"),
                    lastObservationID: row.int("last_observation_id") ?? 0,
                    status: try StoredValues.known(row.text("status"), "status", in: place),
                    policy: try StoredValues.known(row.text("policy"), "policy", in: place),
                    compliant: CountedVerdict.compliant(row.int("compliant") == 1, pinState: pinState),
                    failedRules: CountedVerdict.reasons(try StoredValues.rules(row.text("failed_rules")), pinState: pinState),
                    earliestExpiry: row.double("earliest_expiry").map(Date.init(timeIntervalSince1970:)),
                    leafFingerprint: row.text("leaf_fingerprint"), leafSPKI: row.text("leaf_spki"),
                    failureCategory: try StoredValues.known(row.text("failure_category"), "failure category", in: place, optional: true),
                    consecutiveFailures: row.integer("consecutive_failures"),
                    lastSuccessAt: row.double("last_success_at").map(Date.init(timeIntervalSince1970:)),
                    pinState: pinState)
                status.trustErrors = try FindingMarks.parse(row.text("findings"), in: place)
                    .filter { Finding.isTrustError(id: $0.id, severity: $0.severity) }.map(\.id)
                status.tags = try StoredValues.tags(row.text("tags"), in: place)
                status.app = try StoredValues.stored(AppHostOutcome.self, row.text("app"), "app outcome", in: place)
                return status
            }
        }
    }

    func forEachObservation(startedIn period: ClosedRange<Date>, _ body: (ObservationRow) throws -> Void) throws {
        try database.read(doing: "reading observations", snapshot: true) { sql in
            try sql.query("""
                SELECT id, target, address, started_at, status, policy FROM observation
                WHERE started_at >= ? AND started_at <= ? ORDER BY started_at, id
                """, [.time(period.lowerBound), .time(period.upperBound)], streaming: true) { row in
                let id = row.int(0) ?? 0
                try body(ObservationRow(id: id, target: row.text(1) ?? "", address: row.text(2) ?? "",
                                        startedAt: Date(timeIntervalSince1970: row.double(3) ?? 0),
                                        status: try StoredValues.known(row.text(4), "status", in: "observation \(id)"),
                                        policy: try StoredValues.known(row.text(5), "policy", in: "observation \(id)", optional: true)))
            }
        }
    }

    func history(target: String, limit: Int) throws -> [HistoryEntry] {
        var entries = try database.read(doing: "reading the history of \(target)", snapshot: false) { sql in
            try sql.rows("""
                SELECT o.id, o.target, o.address, o.started_at, o.duration_ms, o.status, o.failure_category, o.failure_message,
                    o.handshake, o.inventory, o.http_headers, o.vulnerabilities, o.clients, o.check_reports, o.judged_with, v.policy AS verdict_policy, v.compliant, v.failed_rules,
                    v.findings, \(sql.dialect.jsonText("v.pin", "state")) AS pin_state,
                    (SELECT c.fingerprint FROM observation_certificate c WHERE c.observation_id = o.id AND c.role = 'presented'
                        AND c.position = 0) AS leaf,
                    (SELECT cert.spki_sha256 FROM observation_certificate c JOIN certificate cert ON cert.fingerprint = c.fingerprint
                        WHERE c.observation_id = o.id AND c.role = 'presented' AND c.position = 0) AS leaf_spki,
                    r.repeats, r.last_seen_at, r.duration_min_ms, r.duration_max_ms, r.duration_sum_ms
                FROM observation o JOIN verdict v ON v.observation_id = o.id LEFT JOIN observation_run r ON r.observation_id = o.id
                WHERE o.target = ? OR o.host = ? OR (o.host || ':' || o.port) = ? OR o.target LIKE ? ESCAPE '\\'
                ORDER BY coalesce(r.last_order_at, r.last_seen_at, o.order_at, o.started_at) DESC, o.id DESC LIMIT ?
                """, [.text(target), .text(target), .text(target), .text(VantageTarget.likePattern(target)), .of(limit)]) { row in
                let id = row.int("id") ?? 0
                let place = "observation \(id)"
                let pinState: PinEvaluation.State? = try StoredValues.known(row.text("pin_state"), "pin state", in: place, optional: true)
                let handshake = try StoredValues.decode(HandshakeObservation.self, row.text("handshake"))
                var entry = HistoryEntry(
                    observationID: id, target: row.text("target") ?? "", address: row.text("address") ?? "",
                    startedAt: row.date("started_at"), durationMs: row.integer("duration_ms"),
                    status: try StoredValues.known(row.text("status"), "status", in: place),
                    failureCategory: try StoredValues.known(row.text("failure_category"), "failure category", in: place, optional: true),
                    failureMessage: row.text("failure_message"), protocolVersion: handshake?.protocolVersion,
                    cipher: handshake?.cipher.iana, leafFingerprint: row.text("leaf"), leafSPKI: row.text("leaf_spki"),
                    policy: try StoredValues.known(row.text("verdict_policy"), "policy", in: place),
                    compliant: CountedVerdict.compliant(row.int("compliant") == 1, pinState: pinState),
                    failedRules: CountedVerdict.reasons(try StoredValues.rules(row.text("failed_rules")), pinState: pinState),
                    findings: try StoredValues.decode([Finding].self, row.text("findings")) ?? [],
                    inventory: try StoredValues.stored(ServerInventory.self, row.text("inventory"), "inventory", in: place),
                    headers: try StoredValues.stored(HTTPHeadersReport.self, row.text("http_headers"), "HTTP headers", in: place),
                    vulnerabilities: try StoredValues.stored(VulnerabilityReport.self, row.text("vulnerabilities"), "vulnerabilities",
                                                             in: place),
                    clients: try StoredValues.stored(ClientSimulationReport.self, row.text("clients"), "client simulation", in: place))
                entry.judgedWith = try StoredValues.stored(JudgedWith.self, row.text("judged_with"), "trust inputs judged with", in: place)
                entry.checkReports = try StoredValues.stored([String: CheckReport].self, row.text("check_reports"), "check reports", in: place)
                if let repeats = row.int("repeats"), repeats > 0 {
                    let first = entry.durationMs
                    let sum = Int(row.int("duration_sum_ms") ?? 0) + first
                    entry.run = RunSummary(scans: Int(repeats) + 1, lastSeenAt: row.date("last_seen_at"),
                                           durationMinMs: min(first, row.integer("duration_min_ms")),
                                           durationMaxMs: max(first, row.integer("duration_max_ms")),
                                           durationMeanMs: Int((Double(sum) / Double(repeats + 1)).rounded()))
                }
                return entry
            }
        }
        HistoryEntry.noteInputChanges(&entries)
        return entries
    }

    func result(observationID: Int64) throws -> AddressScanResult? {
        try database.read(doing: "reading observation \(observationID)", snapshot: true) { sql in
            var summaries: [String: CertificateSummary] = [:]
            return try Self.loadResult(observationID: observationID, in: sql, summaries: &summaries)
        }
    }

    /// Rebuilds a stored result from its rows, in the caller's transaction. `summaries` keeps
    /// decoded certificates between calls (a fleet shares its intermediates and roots).
    static func loadResult(observationID: Int64, in sql: any SQLExecutor,
                           summaries: inout [String: CertificateSummary]) throws -> AddressScanResult? {
        let place = "observation \(observationID)"
        var presented: [CertificateSummary] = []
        var path: [PathElement] = []
        try sql.query("""
            SELECT c.role, c.source, c.fingerprint, cert.der, cert.summary FROM observation_certificate c
            JOIN certificate cert ON cert.fingerprint = c.fingerprint
            WHERE c.observation_id = ? ORDER BY c.role\(sql.dialect.bytewise), c.position
            """, [.int(observationID)], streaming: false) { entry in
            let fingerprint = entry.text(2) ?? ""
            var summary: CertificateSummary
            if let known = summaries[fingerprint] {
                summary = known
            } else {
                guard let decoded = try StoredValues.stored(CertificateSummary.self, entry.text(4), "certificate summary", in: place)
                else { return }
                summary = decoded
                summary.der = Data(entry.bytes(3) ?? [])
                summaries[fingerprint] = summary
            }
            if entry.text(0) == "presented" {
                presented.append(summary)
            } else {
                path.append(PathElement(certificate: summary,
                                        source: try StoredValues.known(entry.text(1) ?? "presented", "certificate source", in: place),
                                        presentedIndex: nil))
            }
        }
        // 'path' rows sort before 'presented' ones: the presented indexes are filled in now.
        for index in path.indices {
            path[index].presentedIndex = presented.firstIndex { $0.sha256Fingerprint == path[index].certificate.sha256Fingerprint }
        }
        return try sql.first("""
            SELECT o.*, v.policy AS verdict_policy, v.compliant, v.failed_rules, v.findings FROM observation o
            JOIN verdict v ON v.observation_id = o.id AND v.policy = coalesce(o.policy, v.policy)
            WHERE o.id = ? ORDER BY v.judged_at LIMIT 1
            """, [.int(observationID)]) { row in
            var chain: ChainReport?
            if let trustStore = row.text("trust_store") {
                chain = ChainReport(presented: presented, path: path, anchored: row.int("anchored") == 1, trustStore: trustStore,
                                    issues: try StoredValues.stored([PathBuildingIssue].self, row.text("path_issues"), "path issues",
                                                                    in: place) ?? [],
                                    revocation: try StoredValues.stored(RevocationReport.self, row.text("revocation"), "revocation facts",
                                                                        in: place))
                chain?.anchorIn = StoredValues.anchorIn(row.text("anchor_in"))
            }
            let category: ProbeFailureCategory? = try StoredValues.known(row.text("failure_category"), "failure category", in: place,
                                                                          optional: true)
            let policy: CompliancePolicy = try StoredValues.known(row.text("verdict_policy"), "policy", in: place)
            let failedRules = try StoredValues.rules(row.text("failed_rules"))
            let outcomes = Dictionary(uniqueKeysWithValues: policy.rules.map { ($0, failedRules.contains($0) ? RuleOutcome.fail : .pass) })
            let status: AddressScanResult.Status = try StoredValues.known(row.text("status"), "status", in: place)
            var result = AddressScanResult(
                address: row.text("address") ?? "", family: row.text("family") ?? "", port: row.integer("port"), status: status,
                startedAt: row.date("started_at"), durationMs: row.integer("duration_ms"),
                handshake: try StoredValues.stored(HandshakeObservation.self, row.text("handshake"), "handshake", in: place),
                atsClientRefusal: row.text("ats_refusal"),
                error: category.map { ProbeFailure($0, row.text("failure_message") ?? "", alert: row.text("failure_alert")) },
                chain: chain, findings: try StoredValues.stored([Finding].self, row.text("findings"), "findings", in: place) ?? [],
                ats: PolicyVerdict(policy: policy, compliant: row.int("compliant") == 1, rules: status == .failed ? [:] : outcomes,
                                failedRules: failedRules))
                .with(inventory: try StoredValues.stored(ServerInventory.self, row.text("inventory"), "inventory", in: place),
                      headers: try StoredValues.stored(HTTPHeadersReport.self, row.text("http_headers"), "HTTP headers", in: place),
                      vulnerabilities: try StoredValues.stored(VulnerabilityReport.self, row.text("vulnerabilities"), "vulnerabilities",
                                                               in: place),
                      enumeration: try StoredValues.stored(EnumerationReport.self, row.text("enumeration"), "enumeration", in: place),
                      clients: try StoredValues.stored(ClientSimulationReport.self, row.text("clients"), "client simulation", in: place),
                      checkReports: try StoredValues.stored([String: CheckReport].self, row.text("check_reports"), "check reports",
                                                            in: place))
                .withinBudget() // Records stored before the budget existed are bounded when read.
            result.app = try StoredValues.stored(AppHostOutcome.self, row.text("app"), "app outcome", in: place)
            result.judgedWith = try StoredValues.stored(JudgedWith.self, row.text("judged_with"), "trust inputs judged with", in: place)
            return result
        }
    }

    func prune(olderThan cutoff: Date) throws -> PruneResult {
        try database.write(doing: "pruning history") { sql in
            let time = SQLValue.time(cutoff)
            // A run goes when its last scan is older than the cutoff.
            let observations = try sql.execute("""
                DELETE FROM observation WHERE started_at < ? AND id NOT IN (SELECT last_observation_id FROM target_state)
                AND NOT EXISTS (SELECT 1 FROM observation_run r WHERE r.observation_id = observation.id AND r.last_seen_at >= ?)
                """, [time, time])
            // The times of a current run's older repeats (its summary still counts them).
            try sql.execute("DELETE FROM run_scan WHERE started_at < ?", [time])
            // Each address keeps the change in force at the cutoff and the last reachable one before
            // it: a report starting after the cutoff still knows where every address stood.
            let id = sql.dialect.addressChangeID
            let kept = ["\(id) AS change_id", "started_at"]
            let newest = sql.dialect.newestPerAddress(kept, from: "address_change", where: "started_at < \(time)")
            let newestReached = sql.dialect.newestPerAddress(kept, from: "address_change",
                                                             where: "started_at < \(time) AND condition != 'unreachable'")
            try sql.execute("""
                DELETE FROM address_change WHERE started_at < \(time) AND \(raw: id) NOT IN (SELECT change_id FROM (\(newest)) newest)
                AND \(raw: id) NOT IN (SELECT change_id FROM (\(newestReached)) reached)
                """ as SQLFragment)
            try sql.execute("""
                DELETE FROM alert WHERE created_at < ?
                AND NOT EXISTS (SELECT 1 FROM alert_delivery d WHERE d.alert_id = alert.id AND d.state = 'pending')
                """, [time])
            let certificates = try sql.execute("""
                DELETE FROM certificate WHERE NOT EXISTS (SELECT 1 FROM observation_certificate r WHERE r.fingerprint = certificate.fingerprint)
                """, [])
            return PruneResult(observations: observations, certificates: certificates)
        }
    }
}
