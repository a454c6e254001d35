import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditReport
import TLSAuditService
import TLSAuditSQLite
import TLSAuditStore
import TLSAuditStoreConformance

/// What only the PostgreSQL backend has, on a real server: a batch in a fixed number of round
/// trips, its migrations under an advisory lock, its database's growth, the same answers as
/// SQLite, a million rows streamed. (Every backend's common behaviour: `StoreConformanceTests`.)
@Suite("PostgreSQL backend", .serialized)
struct PostgresBackendTests {
    static var server: LabPostgresServer { StoreConformance.postgresServer }
    let suite = StoreConformance.postgres

    @Test("runs: an unchanged scan extends its address's run and adds a few bytes; reports count every scan")
    func unchangedScans() throws {
        _ = try suite.unchangedScans { database in
            Int(try Self.server.psql("SELECT pg_database_size(current_database())", database: database)
                .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        }
    }

    @Test("round trips: a batch is written in the same few statements whatever its size; unchanged scans alike")
    func roundTrips() throws {
        let store = try suite.open(try suite.newLocation())
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let rounds = suite.unchangedRounds(0...3, from: start).joined().map { $0 }
        func statements(_ scans: ArraySlice<StoredScan>) throws -> Int {
            let before = PostgresTraffic.statementsOnThisThread
            _ = try store.record(Array(scans), decide: suite.decide)
            return PostgresTraffic.statementsOnThisThread - before
        }
        // Round 0 (first scans: new observations) and round 1 (unchanged), each as a batch of 8 then one of 64.
        _ = try statements(rounds[0..<8]) // prepares the statements on the connection
        let new8 = try statements(rounds[8..<16]), new64 = try statements(rounds[16..<80])
        _ = try statements(rounds[200..<208])
        let same8 = try statements(rounds[208..<216]), same64 = try statements(rounds[216..<280])
        #expect(new8 == new64 && same8 == same64, "new: \(new8) / \(new64), unchanged: \(same8) / \(same64)")
        #expect(new64 <= 14 && same64 <= 10, "new: \(new64), unchanged: \(same64) statements for 64 scans")
        // Every scan raising an alert with a delivery: still the same few statements.
        let alerting: AlertDecision = { previous, scan, _ in
            let alert = Alert(id: "\(scan.target)-\(scan.result.startedAt.timeIntervalSince1970)", kind: .certificateChanged, severity: .info,
                              target: scan.target, host: scan.host, port: scan.port, address: scan.result.address,
                              createdAt: scan.result.startedAt, summary: "changed", changes: [:])
            return AlertOutcome(alerts: [(alert, ["hook"])], memory: previous ?? AddressMemory())
        }
        func alertingStatements(_ scans: ArraySlice<StoredScan>) throws -> Int {
            let before = PostgresTraffic.statementsOnThisThread
            _ = try store.record(Array(scans), decide: alerting)
            return PostgresTraffic.statementsOnThisThread - before
        }
        _ = try alertingStatements(rounds[400..<408])
        let alerts8 = try alertingStatements(rounds[408..<416]), alerts64 = try alertingStatements(rounds[416..<480])
        #expect(alerts8 == alerts64 && alerts64 <= same64 + 3, "with alerts: \(alerts8) / \(alerts64)")
        #expect(try store.pendingDeliveries(dueBy: Date.distantFuture, sinks: ["hook"], limit: 1_000).count == 80)
    }

    @Test("migrations: a new store has every named migration, in order (SQLite's names); a newer schema is refused")
    func migrations() throws {
        let location = try suite.newLocation()
        let store = try PostgresScanStore(url: Self.server.url(database: location), sha256: Digest.sha256Hex)
        #expect(try store.appliedMigrations() == ["v1-initial", "v2-pin-state", "v3-alerts", "v4-reports", "v5-pin-counts", "v6-revocation", "v7-fleet", "v8-inventory", "v9-vulnerabilities", "v10-fencing", "v11-anchor-in", "v12-tags-app", "v13-report-claim", "v14-runs", "v15-clients", "v16-alert-target", "v17-judged-with", "v18-node-server", "v19-observation-order", "v20-check-reports", "v21-ct-logs", "v22-ct-sightings", "v23-ct-log-lease", "v24-lost-leases"])
        try Self.server.psql("INSERT INTO tlsaudit_migration (name, applied_at) VALUES ('v99-from-the-future', 1)", database: location)
        #expect {
            _ = try PostgresScanStore(url: Self.server.url(database: location), sha256: Digest.sha256Hex)
        } throws: { error in
            "\(error)".contains("newer tlsaudit (migration v99-from-the-future")
        }
    }

    @Test("migrations: nodes starting together migrate once (an advisory lock), each then sees the whole schema")
    func concurrentMigrations() async throws {
        let location = try suite.newLocation()
        let url = Self.server.url(database: location)
        try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<4 {
                group.addTask { try PostgresScanStore(url: url, sha256: Digest.sha256Hex).appliedMigrations() }
            }
            for try await applied in group { #expect(applied.count == StoreMigration.allCases.count) }
        }
        #expect(try Self.server.psql("SELECT count(*) FROM tlsaudit_migration", database: location)
            .trimmingCharacters(in: .whitespacesAndNewlines) == "\(StoreMigration.allCases.count)")
    }

    @Test("the same scans give the same status, history, alerts, deliveries and reports as on SQLite (own policy and re-judged)")
    func sameAsSQLite() throws {
        let sqlite = try SQLiteScanStore(path: StoreConformance.newSQLitePath(),
                                         sha256: Digest.sha256Hex)
        let postgres = try PostgresScanStore(url: Self.server.url(database: try suite.newLocation()), sha256: Digest.sha256Hex)
        let settings = AlertSettings(rules: AlertRules(unreachableAfter: 2), sinks: [AlertSettings.Sink(name: "hook", minimumSeverity: .info)])
        let decide = AlertSettings.decision(settings)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        // Three targets, two addresses for one of them, good and refused scans interleaved, one batch out of order.
        var batches = [suite.scans(6, target: "alpha", from: start), suite.scans(4, target: "beta", from: start.addingTimeInterval(30)),
                       suite.scans(3, target: "gamma", address: "::1", from: start.addingTimeInterval(90))]
        batches.append(suite.scans(2, target: "alpha", from: start.addingTimeInterval(-600)))
        // Beta is an app's target: its tags and app outcomes read back alike, in status and in reports' Apps section.
        batches[1] = batches[1].map { scan in
            var tagged = scan
            tagged.tags = ["app:com.example.shop"]
            tagged.result.app = StoreConformance.appOutcome
            return tagged
        }
        // A target refused three times in a row: a target.unreachable alert and its delivery.
        batches.append(suite.scans(6, target: "delta", from: start.addingTimeInterval(120)).enumerated().filter { $0.offset % 2 == 1 }.map(\.element))
        let stores: [any ScanStore] = [sqlite, postgres]
        for store in stores {
            for batch in batches { _ = try store.record(batch, decide: decide) }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .secondsSince1970
        #expect(try sqlite.status() == postgres.status())
        for target in ["alpha", "beta", "gamma", "conformance.tlsaudit.test"] {
            #expect(try sqlite.history(target: target, limit: 50) == postgres.history(target: target, limit: 50), "\(target)")
        }
        #expect(try encoder.encode(sqlite.alerts(limit: 100)) == encoder.encode(postgres.alerts(limit: 100)))
        #expect(try !sqlite.alerts(limit: 100).isEmpty)
        let due = start.addingTimeInterval(86_400)
        #expect(try encoder.encode(sqlite.pendingDeliveries(dueBy: due, sinks: ["hook"], limit: 100).map(\.alert))
            == encoder.encode(postgres.pendingDeliveries(dueBy: due, sinks: ["hook"], limit: 100).map(\.alert)))
        // A reader allowed one connection: its reports are read without the side connection
        // (PostgresReportFacts' SideReads), and must not differ.
        try Self.server.psql("CREATE ROLE one_connection LOGIN CONNECTION LIMIT 1; GRANT pg_read_all_data TO one_connection")
        var oneConnection = postgres.settings
        oneConnection.user = "one_connection"
        let single = try PostgresScanStore(oneConnection, sha256: Digest.sha256Hex)
        for policy in [nil, CompliancePolicy.appleTrust] {
            for targets in [nil, Set(["alpha", "gamma"])] {
                let query = ReportBuilder.query(end: start.addingTimeInterval(3_600), since: 7_200, policy: policy, targets: targets)
                var reports: [ComplianceReport] = []
                for store in stores + [single] {
                    let data = try ReportData.read(query, from: store, rejudge: AddressAssessment.rejudge)
                    reports.append(ReportBuilder.build(data))
                }
                let label = "policy \(policy?.rawValue ?? "as scanned"), targets \(targets?.sorted() ?? [])"
                #expect(try encoder.encode(reports[0]) == encoder.encode(reports[1]), "\(label)")
                #expect(try encoder.encode(reports[0]) == encoder.encode(reports[2]), "one connection: \(label)")
                #expect(reports[0].summary.addresses == (targets == nil ? 4 : 2), "\(label)")
                #expect(reports[0].summary.scans > 0, "\(label)")
                #expect((reports[0].apps?.first?.addresses.count ?? 0) == (targets == nil ? 1 : 0), "\(label)")
            }
        }
    }

    @Test("streaming: a million observations read one at a time, in bounded memory")
    func streaming() throws {
        try suite.streaming(rows: 1_000_000) { location in
            try Self.server.psql("""
                INSERT INTO observation (target, host, port, address, family, started_at, duration_ms, status, policy)
                SELECT 'bulk-' || (i % 1000), 'bulk.test', 443, '10.0.' || (i % 250) || '.1', 'ipv4', 1800000000 + i, 3,
                    'completed', 'ats-runtime' FROM generate_series(1, 1000000) AS i
                """, database: location)
        }
    }
}

