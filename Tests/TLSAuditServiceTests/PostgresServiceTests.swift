import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditPostgres
import GRDB
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// `tlsaudit serve` with `database: postgres://...`, against a throwaway PostgreSQL cluster.
@Suite("serve against PostgreSQL", .serialized)
struct PostgresServiceTests {
    let lab = ServiceLab.shared

    @Test("serve stores into PostgreSQL; status, history and report read it; check-config tests the connection and refuses a password in the URL")
    func serveOnPostgres() throws {
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let workspace = try lab.workspace("postgres")
        let url = postgres.url()
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: url, targets: [("good", good.port), ("expired", expired.port)])
            .write(toFile: config, atomically: true, encoding: .utf8)

        let before = try Binary.run(["check-config", config, "--test-connection"])
        #expect(before.status == 0, "\(before.stderr)")
        #expect(before.stdout.contains("connected, PostgreSQL") && before.stdout.contains("no tlsaudit schema yet"), "\(before.stdout)")

        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("two scans of each target") {
            let scans = service.storedScans
            return scans.filter { $0.target == "good" }.count >= 2 && scans.filter { $0.target == "expired" }.count >= 2
        }
        let status = try Binary.run(["status", "--database", url, "--format", "json"])
        #expect(status.status == 1, "one target is not compliant: \(status.stderr)")
        #expect(status.stdout.contains("\"target\" : \"good\"") && status.stdout.contains("\"target\" : \"expired\""), "\(status.stdout)")
        let text = try Binary.run(["status", "--config", config])
        #expect(text.stdout.contains("NOT COMPLIANT (trust.expired)"), "\(text.stdout)\(text.stderr)")
        let history = try Binary.run(["history", "--database", url, "good", "--format", "json"])
        #expect(history.status == 0, "\(history.stderr)")
        let report = try Binary.run(["report", "--database", url, "--since", "1h", "--format", "json"])
        #expect(report.status == 0 && report.stdout.contains("\"not_compliant\" : 1"), "\(report.stdout.prefix(400))\(report.stderr)")
        let alerts = try Binary.run(["alerts", "--database", url, "--format", "json"])
        #expect(alerts.status == 0 && alerts.stdout.contains("trust.broken"), "the expired target's alert: \(alerts.stdout.prefix(400))\(alerts.stderr)")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        let stored = Int(try postgres.psql("SELECT count(*) FROM scan").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(stored >= 4)

        let after = try Binary.run(["check-config", config, "--test-connection"])
        #expect(after.stdout.contains("schema at v24-lost-leases (24 migration(s))"), "\(after.stdout)")

        // A password in the URL is refused with its line; a server that is not there is a clear error, exit 2.
        let withPassword = workspace.appendingPathComponent("password.yaml").path
        try lab.configuration(database: "postgres://tlsaudit:secret@127.0.0.1:\(postgres.port)/tlsaudit", targets: [("good", good.port)])
            .write(toFile: withPassword, atomically: true, encoding: .utf8)
        let refused = try Binary.run(["check-config", withPassword])
        #expect(refused.status == 64 && refused.stderr.contains("password.yaml:1:") && refused.stderr.contains("password_file"),
                "\(refused.stderr)")
        let nowhere = workspace.appendingPathComponent("nowhere.yaml").path
        try lab.configuration(database: "postgres://tlsaudit@127.0.0.1:\(try LabPorts.unusedPort())/tlsaudit?sslmode=disable",
                              targets: [("good", good.port)]).write(toFile: nowhere, atomically: true, encoding: .utf8)
        let unreachable = try Binary.run(["check-config", nowhere, "--test-connection"])
        #expect(unreachable.status == 2 && unreachable.stderr.contains("cannot connect to postgres://tlsaudit@127.0.0.1"),
                "\(unreachable.stderr)")
    }

    @Test("PostgreSQL stopped under a running service and started again: scanning goes on, and every scan logged as stored is in the database")
    func postgresRestarted() throws {
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("postgres-restart")
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: postgres.url(), targets: [("good", good.port)]).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("two stored scans") { service.storedScans.count >= 2 }
        postgres.stop(removing: false)
        service.wait("a failed commit, said in the log") { !service.lines(containing: "cannot store scan results").isEmpty }
        Thread.sleep(forTimeInterval: 2)
        try postgres.start()
        let before = service.storedScans.count
        service.wait("storing resumed", timeout: 40) { !service.lines(containing: "storing works again").isEmpty && service.storedScans.count > before }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        let logged = service.storedScans.count
        let stored = Int(try postgres.psql("SELECT count(*) FROM scan").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        #expect(stored == logged, "every scan logged as stored is in the database (logged \(logged), stored \(stored))")
        #expect(logged >= 5, "scanning went on while PostgreSQL was down: \(logged) stored")
    }

    @Test("store copy: a SQLite store into PostgreSQL, everything (alerts, deliveries, report runs); stopped midway it resumes; counts checked; the same status, history, alerts and report; a destination with other data refused")
    func storeCopy() throws {
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let workspace = try lab.workspace("copy")
        let file = workspace.appendingPathComponent("fixture.sqlite").path
        try FileManager.default.copyItem(atPath: ServiceLab.reportFixtures.appendingPathComponent("fixture.sqlite").path, toPath: file)
        do {
            // A delivery and a report run, so that every table has rows.
            let store = try SQLiteScanStore(path: file, create: false, sha256: Digest.sha256Hex)
            let alert = try #require(try store.alerts(limit: 1).first).alert
            var pending = alert
            pending.id = "copy-test-alert"
            #expect(try store.recordAlert(pending, sinks: ["hook"]))
            try store.recordReportRun(name: "weekly", periodEnd: Date(timeIntervalSince1970: 1_794_000_000), files: ["/tmp/w.json"],
                                      delivery: [:])
            // An app's target: its tags and its latest scan's app outcome (the v12 columns) must come across.
            let outcome = String(decoding: try JSONEncoder().encode(AppHostOutcome(
                bundle: "com.example.shop", entry: "fixed.example", reliesOn: ["NSExceptionMinimumTLSVersion"], configuration: "ats-tls12",
                connects: true, reasons: [], detail: "TLS 1.2")), as: UTF8.self)
            try DatabaseQueue(path: file).write { db in
                try db.execute(sql: "UPDATE target_state SET tags = '[\"app:com.example.shop\"]', app = ? WHERE target = 'fixed'", arguments: [outcome])
                try db.execute(sql: "UPDATE observation SET app = ? WHERE id IN (SELECT last_observation_id FROM target_state WHERE target = 'fixed')",
                               arguments: [outcome])
            }
        }
        let url = postgres.url()
        let copy = try Binary.run(["store", "copy", "--from", file, "--to", url, "--batch", "7"])
        #expect(copy.status == 0 && copy.stdout.contains("every table's count matches"), "\(copy.stdout)\(copy.stderr)")
        // The fixture's 135 scans, folded into runs when it was opened (v14-runs): 17 observations, 118 repeats.
        #expect(copy.stdout.contains("observation: 17 row(s), 17 copied") && copy.stdout.contains("run_scan: 118 row(s), 118 copied")
                && copy.stdout.contains("alert_delivery: 1 row(s), 1 copied")
                && copy.stdout.contains("report_run: 1 row(s), 1 copied"), "\(copy.stdout)")

        // Stopped midway: the later tables' rows and part of the observations' children are missing.
        try postgres.psql("""
            DELETE FROM alert_delivery; DELETE FROM alert; DELETE FROM report_run; DELETE FROM expiry_alert; DELETE FROM address_change;
            DELETE FROM verdict WHERE observation_id > 100; UPDATE store_copy SET finished_at = NULL;
            """)
        let resumed = try Binary.run(["store", "copy", "--from", file, "--to", url])
        #expect(resumed.status == 0, "\(resumed.stdout)\(resumed.stderr)")
        #expect(resumed.stdout.contains("verdict: 17 row(s), 16 there already, 1 copied") && resumed.stdout.contains("alert_delivery: 1 row(s), 1 copied"),
                "\(resumed.stdout)")

        for arguments in [["status", "--format", "json"], ["alerts", "--format", "json", "--limit", "100"], ["history", "fixed", "--format", "json"],
                          ["report", "--at", ServiceLab.reportFixtureEnd, "--since", "7d", "--format", "json"],
                          ["report", "--at", ServiceLab.reportFixtureEnd, "--since", "7d", "--format", "json", "--tag", "app:com.example.shop"]] {
            let fromFile = try Binary.run(arguments + ["--database", file])
            let fromPostgres = try Binary.run(arguments + ["--database", url])
            #expect(fromFile.stdout == fromPostgres.stdout && !fromFile.stdout.isEmpty, "\(arguments[0]) differs after the copy")
            if arguments.contains("--tag") || arguments[0] == "status" {
                #expect(fromPostgres.stdout.contains("\"app:com.example.shop\"") && fromPostgres.stdout.contains("NSExceptionMinimumTLSVersion"),
                        "\(arguments[0]): the tags and app outcome copied: \(fromPostgres.stdout.prefix(600))")
            }
        }
        // A new scan after the copy gets an id after the copied ones.
        #expect(try postgres.psql("SELECT nextval(pg_get_serial_sequence('observation', 'id')) > (SELECT max(id) FROM observation)")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "t")

        // A database holding other scans is not a destination.
        let other = workspace.appendingPathComponent("other.sqlite").path
        try FileManager.default.copyItem(atPath: file, toPath: other)
        let refused = try Binary.run(["store", "copy", "--from", other, "--to", url])
        #expect(refused.status == 2 && refused.stderr.contains("already holds scans"), "\(refused.stderr)")
    }

    @Test("TLS to PostgreSQL: the database: postgres: block with sslmode verify-full and a CA file connects and serve stores through it; a CA that did not sign the server's certificate is refused")
    func tlsToPostgres() throws {
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let workspace = try lab.workspace("postgres-tls")
        var request = LabCertificateRequest.server(["db.tlsaudit.test"])
        request.ipAddresses = ["127.0.0.1"]
        let serverCertificate = try lab.intermediate.issue(request)
        try postgres.enableTLS(certificatePEM: serverCertificate.pem + lab.intermediate.pem, keyPEM: serverCertificate.key.pem)
        let good = try lab.goodServer()
        defer { good.stop() }
        let passwordFile = workspace.appendingPathComponent("password").path
        try "not-needed-with-trust\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        func block(caFile: String) -> String {
            """
            database:
              postgres:
                host: 127.0.0.1
                port: \(postgres.port)
                database: tlsaudit
                user: \(postgres.user)
                password_file: \(passwordFile)
                sslmode: verify-full
                ca_file: \(caFile)
                pool_size: 2
            """
        }
        let config = workspace.appendingPathComponent("tls.yaml").path
        try lab.configuration(database: "x", targets: [("good", good.port)]).replacingOccurrences(of: "database: x", with: block(caFile: lab.rootFile))
            .write(toFile: config, atomically: true, encoding: .utf8)
        let connected = try Binary.run(["check-config", config, "--test-connection"])
        #expect(connected.status == 0 && connected.stdout.contains("connected, PostgreSQL"), "\(connected.stdout)\(connected.stderr)")
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("a stored scan") { service.storedScans.count >= 1 }
        let sessions = try postgres.psql("""
            SELECT count(*) || ' ' || count(*) FILTER (WHERE s.ssl AND s.version IN ('TLSv1.2', 'TLSv1.3'))
            FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = 'tlsaudit'
            """).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        #expect(sessions.count == 2 && sessions[0] != "0" && sessions[0] == sessions[1], "every tlsaudit session is TLS: \(sessions)")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        #expect(Int(try postgres.psql("SELECT count(*) FROM observation").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 1)

        // A CA that did not sign the server's certificate: no connection.
        let stranger = try LabCertificateAuthority.selfSigned(.authority("stranger root"))
        let strangerFile = workspace.appendingPathComponent("stranger.pem").path
        try stranger.pem.write(toFile: strangerFile, atomically: true, encoding: .utf8)
        let wrongCA = workspace.appendingPathComponent("wrong-ca.yaml").path
        try lab.configuration(database: "x", targets: [("good", good.port)]).replacingOccurrences(of: "database: x", with: block(caFile: strangerFile))
            .write(toFile: wrongCA, atomically: true, encoding: .utf8)
        let refused = try Binary.run(["check-config", wrongCA, "--test-connection"])
        #expect(refused.status == 2 && refused.stderr.contains("certificate verify failed"), "\(refused.stderr)")
    }
}

/// PostgreSQL's faults against the real service: a newer schema, a crash of the server.
extension PostgresServiceTests {
    @Test("a PostgreSQL store migrated by a newer tlsaudit: serve exits 2 at once naming the migration (it kept running, logging errors); check-config --test-connection exits 2")
    func newerPostgresSchema() throws {
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("postgres-newer")
        _ = try PostgresScanStore(url: postgres.url(), sha256: Digest.sha256Hex)
        try postgres.psql("INSERT INTO tlsaudit_migration (name, applied_at) VALUES ('v99-from-the-future', 1)")
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: postgres.url(), targets: [("good", good.port)]).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        #expect(service.waitForExit(timeout: 20) == 2, "\(service.log.suffix(2000))")
        #expect(!service.lines(containing: "v99-from-the-future").isEmpty)
        #expect(service.storedScans.isEmpty)
        let check = try Binary.run(["check-config", config, "--test-connection"])
        #expect(check.status == 2, "\(check.stdout)")
        #expect(check.stderr.contains("v99-from-the-future"), "\(check.stderr)")
    }

    @Test("COMMIT acknowledgements lost on the way (the first, a quarter of them, those of the stop; the transactions committed): nothing is recorded twice: every scan logged as stored once is in the database once, each run's repeats are its run_scan rows, no scan is its own repeat")
    func lostCommitAcknowledgements() throws {
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let dropper = try LabCommitAckDropper(upstreamPort: postgres.port, dropFirst: 1, dropRate: 0.25)
        defer { dropper.stop() }
        let servers = try (0..<4).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("postgres-lost-acks")
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        let url = postgres.url().replacingOccurrences(of: ":\(postgres.port)/", with: ":\(dropper.port)/")
        try lab.configuration(database: url, targets: servers.enumerated().map { ("t\($0.offset)", $0.element.port) },
                              interval: "200ms").write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("six acknowledgements lost and scans stored after them", timeout: 120) {
            dropper.commits.dropped >= 6 && service.storedScans.count >= 60
        }
        // A commit loses its answer, and the stop comes while its results wait for the retry; the
        // stop's commits lose theirs too: the results are found stored by a new connection, not
        // kept in a spill file (exit 75) while the database holds them.
        let droppedBefore = dropper.commits.dropped
        dropper.loseNext(3)
        service.wait("a commit's answer lost") { dropper.commits.dropped > droppedBefore }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 30) == 0, "\(service.lines(containing: "not stored"))")
        #expect(service.lines(containing: "could not be stored").isEmpty)
        let kept = (FileManager.default.enumerator(atPath: workspace.path)?.compactMap { $0 as? String } ?? []).filter { $0.contains(".unstored-") }
        #expect(kept.isEmpty, "a spill file of results stored after all is removed: \(kept)")
        let logged = service.storedScans
        let distinct = Set(logged.map { "\($0.target) \($0.address) \(Int(($0.startedAt * 1000).rounded()))" })
        #expect(distinct.count == logged.count, "each scan logged as stored once")
        func count(_ sql: String) throws -> Int { Int(try postgres.psql(sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
        #expect(try count("SELECT count(*) FROM scan") == logged.count, "the database holds exactly the scans logged (\(logged.count))")
        #expect(try count("SELECT count(*) FROM (SELECT 1 FROM scan GROUP BY target, address, started_at HAVING count(*) > 1) twice") == 0)
        #expect(try count("""
            SELECT count(*) FROM observation_run r
            WHERE r.repeats <> (SELECT count(*) FROM run_scan s WHERE s.observation_id = r.observation_id)
            """) == 0, "each run's repeats are the rows of its repeats")
        #expect(try count("SELECT count(*) FROM run_scan s JOIN observation o ON o.id = s.observation_id WHERE s.started_at = o.started_at") == 0,
                "no run's first scan is also its repeat")
        #expect(service.lines(containing: "not stored").isEmpty)
        #expect(dropper.commits.dropped >= 6, "\(dropper.commits)")
    }

    @Test("PostgreSQL (fsync on) stopped with -m immediate right after a logged commit, then started again: every scan logged as stored is there")
    func postgresCrashLosesNothingLogged() throws {
        let postgres = try LabPostgresServer(syncs: true)
        defer { postgres.stop() }
        let servers = try (0..<3).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("postgres-crash")
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: postgres.url(), targets: servers.enumerated().map { ("t\($0.offset)", $0.element.port) },
                              interval: "100ms").write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans stored") { service.storedScans.count >= 20 }
        // Right after a commit is logged: the server dies as in a crash (no shutdown checkpoint).
        let logged = service.storedScans.count
        service.wait("the next logged commit") { service.storedScans.count > logged }
        postgres.stop(removing: false)
        service.wait("the outage noticed") { !service.lines(containing: "cannot store scan results").isEmpty }
        try postgres.start()
        service.wait("storing to resume", timeout: 60) { !service.lines(containing: "storing works again").isEmpty }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        var stored: [String: [Double]] = [:]
        for row in try postgres.psql("SELECT target || ' ' || address || ' ' || started_at::text FROM scan").split(separator: "\n") {
            let parts = row.split(separator: " ")
            guard parts.count == 3, let time = Double(parts[2]) else { continue }
            stored["\(parts[0]) \(parts[1])", default: []].append(time)
        }
        // The log gives start times to the millisecond.
        let missing = service.storedScans.filter { scan in
            !(stored["\(scan.target) \(scan.address)"] ?? []).contains { abs($0 - scan.startedAt) < 0.001 }
        }
        #expect(service.storedScans.count > logged)
        #expect(missing.isEmpty, "\(missing.count) of \(service.storedScans.count) scans logged as stored are missing")
    }
}

/// Fencing tokens on alert deliveries and report runs: a claim taken over after its lease ran
/// out leaves its first holder nothing to send or record.
extension PostgresServiceTests {
    @Test("an alert delivery and a report run claimed again after the lease: the first claim no longer holds, and what its holder records is refused")
    func deliveriesAndReportsAreFenced() throws {
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let store = try PostgresScanStore(url: postgres.url(), sha256: Digest.sha256Hex)
        let copy = try lab.workspace("fenced").appendingPathComponent("fixture.sqlite").path
        try FileManager.default.copyItem(atPath: ServiceLab.reportFixtures.appendingPathComponent("fixture.sqlite").path, toPath: copy)
        let fixture = try SQLiteScanStore(path: copy, create: false, sha256: Digest.sha256Hex)
        var alert = try #require(try fixture.alerts(limit: 1).first).alert
        alert.id = "fenced-alert"
        #expect(try store.recordAlert(alert, sinks: ["hook"]))

        let first = try #require(try store.claimDeliveries(dueBy: Date(), sinks: ["hook"], limit: 1, lease: 0.3).first)
        #expect(try store.stillHolds(first))
        Thread.sleep(forTimeInterval: 0.6)
        #expect(try !store.stillHolds(first), "the lease ran out")
        let second = try #require(try store.claimDeliveries(dueBy: Date(), sinks: ["hook"], limit: 1, lease: 30).first)
        #expect(second.leaseEpoch == first.leaseEpoch + 1)
        try store.markFailed(alertID: alert.id, sink: "hook", error: "late", retryAt: Date(), leaseEpoch: first.leaseEpoch)
        try store.markDelivered(alertID: alert.id, sink: "hook", at: Date(), leaseEpoch: first.leaseEpoch)
        #expect(try postgres.psql("SELECT state || ' ' || attempts FROM alert_delivery WHERE alert_id = 'fenced-alert'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "pending 0", "the first holder's outcome is not recorded")
        #expect(try store.stillHolds(second))
        try store.markDelivered(alertID: alert.id, sink: "hook", at: Date(), leaseEpoch: second.leaseEpoch)
        #expect(try postgres.psql("SELECT state FROM alert_delivery WHERE alert_id = 'fenced-alert'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "delivered")

        let end = Date(timeIntervalSince1970: 1_794_000_000)
        guard case .claimed(let paused) = try store.claimReportRun(name: "weekly", periodEnd: end, owner: "node-a", lease: 0.3) else {
            Issue.record("node-a could not claim the run")
            return
        }
        Thread.sleep(forTimeInterval: 0.6)
        guard case .claimed(let taken) = try store.claimReportRun(name: "weekly", periodEnd: end, owner: "node-b", lease: 30) else {
            Issue.record("node-b could not take the run over after node-a's lease")
            return
        }
        #expect(taken > paused)
        #expect(try !store.holdsReportRun(name: "weekly", periodEnd: end, owner: "node-a", epoch: paused))
        #expect(try !store.recordReportRun(name: "weekly", periodEnd: end, files: ["/a"], delivery: [:], claim: ("node-a", paused)))
        #expect(try store.holdsReportRun(name: "weekly", periodEnd: end, owner: "node-b", epoch: taken))
        #expect(try store.recordReportRun(name: "weekly", periodEnd: end, files: ["/b"], delivery: [:], claim: ("node-b", taken)))
        #expect(try postgres.psql("SELECT files FROM report_run WHERE name = 'weekly'").contains("/b"))
    }
}
