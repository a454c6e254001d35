import Foundation
import Testing
import TLSAuditLab
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
        let stored = Int(try postgres.psql("SELECT count(*) FROM observation").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(stored >= 4)

        let after = try Binary.run(["check-config", config, "--test-connection"])
        #expect(after.stdout.contains("schema at v7-fleet (7 migration(s))"), "\(after.stdout)")

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
        let stored = Int(try postgres.psql("SELECT count(*) FROM observation").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        #expect(stored == logged, "every scan logged as stored is in the database (logged \(logged), stored \(stored))")
        #expect(logged >= 5, "scanning went on while PostgreSQL was down: \(logged) stored")
    }
}
