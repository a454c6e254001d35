import Foundation
import GRDB
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditService
@testable import TLSAuditStore
import TLSAuditSQLite
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// The built binary running as the service against loopback servers.
@Suite("tlsaudit serve end to end", .serialized)
struct ServiceTests {
    let lab = ServiceLab.shared

    func status(_ database: String) throws -> [TargetStatus] {
        try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).status()
    }

    @Test("scans land on schedule; status and history read them while the service runs; SIGTERM exits 0")
    func scansOnSchedule() throws {
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let workspace = try lab.workspace("schedule")
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: [("good", good.port), ("expired", expired.port)])
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("four scans of each target") {
            let scans = service.storedScans
            return scans.filter { $0.target == "good" }.count >= 4 && scans.filter { $0.target == "expired" }.count >= 4
        }

        // Read while the service runs.
        let statusRun = try Binary.run(["status", "--database", database, "--format", "json"])
        #expect(statusRun.status == 1, "one target is not compliant: \(statusRun.stderr)")
        #expect(statusRun.stdout.contains("\"target\" : \"good\""))
        let text = try Binary.run(["status", "--config", config])
        #expect(text.stdout.contains("COMPLIANT"))
        #expect(text.stdout.contains("NOT COMPLIANT (trust.expired)"))
        let rows = try status(database)
        #expect(rows.count == 2)
        #expect(rows.first { $0.target == "good" }?.compliant == true)
        let expiredRow = try #require(rows.first { $0.target == "expired" })
        #expect(expiredRow.compliant == false)
        #expect((expiredRow.earliestExpiry ?? .distantFuture) < Date(), "days to expiry is negative for the expired leaf")

        let history = try Binary.run(["history", "--database", database, "good", "--format", "json"])
        #expect(history.status == 0)
        let entries = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).history(target: "good", limit: 100)
        #expect(entries.reduce(0) { $0 + ($1.run?.scans ?? 1) } >= 4, "a run of unchanged scans counts each")
        // On schedule: consecutive scans of one target about one interval (1 s) apart, never overlapping.
        let times = try storedScanTimes(database)["good"] ?? []
        #expect(times.count >= 4)
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 > 0.8 && $0 < 3 }, "gaps: \(gaps)")
        let textHistory = try Binary.run(["history", "--database", database, "expired"])
        #expect(textHistory.stdout.contains("NOT COMPLIANT (trust.expired)"))

        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        #expect(!service.lines(containing: "tlsaudit service stopped").isEmpty)
        #expect(try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).integrityCheck() == "ok")
    }

    @Test("the service checks revocation per target (hard here), stores the facts, and keeps the fetched CRL in its database")
    func revocation() throws {
        let crl = try LabHTTPServer()
        defer { crl.stop() }
        var request = LabCertificateRequest.server([ServiceLab.hostname])
        request.extraExtensions = [.init(name: "crlDistributionPoints", value: "URI:\(crl.url("/ca.crl"))")]
        let revoked = try lab.intermediate.issue(request)
        crl.serve(try lab.intermediate.crl(revoking: [LabRevocation(revoked, reason: 1)]), at: "/ca.crl")
        let server = try LabTLSServer(LabServerConfiguration(chain: [revoked, lab.intermediate]))
        let good = try lab.goodServer()
        defer { server.stop(); good.stop() }
        let workspace = try lab.workspace("revocation")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        let yaml = lab.configuration(database: database, targets: [("revoked", server.port), ("plain", good.port)])
            .replacingOccurrences(of: "  - {host: \(ServiceLab.hostname), port: \(good.port), name: plain}",
                                  with: "  - {host: \(ServiceLab.hostname), port: \(good.port), name: plain, revocation: hard}")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("two scans of each target") {
            let scans = service.storedScans
            return scans.filter { $0.target == "revoked" }.count >= 2 && scans.filter { $0.target == "plain" }.count >= 2
        }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)
        let status = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).status()
        let revokedState = try #require(status.first { $0.target == "revoked" })
        // Under the default policy (Apple's clients fetch no CRL) the revocation is a stored warning, not a trust error.
        #expect(revokedState.compliant && revokedState.trustErrors.isEmpty, "\(revokedState)")
        let stored = try #require(try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
            .result(observationID: try #require(revokedState.lastObservationID)))
        #expect(stored.chain?.revocation?.checks.first?.status == .revoked, "\(String(describing: stored.chain?.revocation))")
        #expect(stored.findings.contains { $0.id == .trustRevoked && $0.severity == .warning }, "\(stored.findings)")
        let plainState = try #require(status.first { $0.target == "plain" })
        #expect(!plainState.compliant && plainState.failedRules == ["ats.trust"], "hard mode: no source is an error")
        #expect(crl.requests(to: "/ca.crl") == 1, "one fetch, then the cache")
        let queue = try DatabaseQueue(path: database)
        #expect(try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM revocation_answer WHERE key LIKE 'crl %'") } == 1)
    }

    @Test("ct: {log_list:}: the service verifies each SCT against the operator's list and stores its verdict with the scan")
    func certificateTransparencyLogList() throws {
        let log = try LabCTLog("lab log", operator: "Lab")
        let leaf = try lab.intermediate.issue(.server([ServiceLab.hostname]), embedding: [
            { log.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-600)) },
            { _ in LabCTLog.forged(logID: Array(Data(base64Encoded: log.id)!), at: Date().addingTimeInterval(-600), signature: Array(repeating: 1, count: 64)) },
        ])
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        defer { server.stop() }
        let workspace = try lab.workspace("ct-log-list")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        let list = workspace.appendingPathComponent("logs.json")
        try LabCTLog.listFile([(log, "usable", Date(timeIntervalSince1970: 1_600_000_000))]).write(to: list)
        try lab.configuration(database: database, targets: [("sct", server.port)], extra: "ct: {log_list: \(list.path)}")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("a scan") { !service.storedScans.isEmpty }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)
        let store = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
        let state = try #require(try store.status().first { $0.target == "sct" })
        let result = try #require(try store.result(observationID: state.lastObservationID))
        let transparency = try #require(result.handshake?.certificateTransparency)
        #expect(transparency.scts.map(\.status) == [.valid, .invalidSignature], "\(transparency.scts)")
        #expect(transparency.scts.allSatisfy { $0.log == "lab log" && $0.operator == "Lab" })
        #expect(transparency.logList.hasPrefix(list.path))
        #expect(result.chain?.anchorIn == [], "the lab root is the operator's own anchor")
        #expect(transparency.policy.required == false)
    }

    @Test("ct: {log_list: URL}: serve fetches the list from a local HTTP server, keeps it as the last known good copy, and a restart with the server down keeps using it")
    func certificateTransparencyLogListURL() throws {
        let log = try LabCTLog("lab log", operator: "Lab")
        let leaf = try lab.intermediate.issue(.server([ServiceLab.hostname]), embedding: [
            { log.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-600)) },
        ])
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        defer { server.stop() }
        let listBytes = try LabCTLog.listFile([(log, "usable", Date(timeIntervalSince1970: 1_600_000_000))])
        let web = try LabHTTPServer(routes: ["/logs.json": Array(listBytes)])
        let port = web.port
        let workspace = try lab.workspace("ct-log-list-url")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let kept = workspace.appendingPathComponent("ct-log-list.json").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: [("sct", server.port)], extra: "ct: {log_list: \"http://127.0.0.1:\(port)/logs.json\"}")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let checked = try Binary.run(["check-config", config])
        #expect(checked.status == 0, "a URL is accepted: \(checked.stdout)\(checked.stderr)")
        for round in ["fetched", "kept"] {
            if round == "kept" { web.stop() }
            let service = try ServiceProcess(config: config, workspace: workspace)
            service.wait("a scan (\(round))") { service.storedScans.count >= 1 }
            service.signal(SIGTERM)
            #expect(service.waitForExit(timeout: 20) == 0)
            #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == listBytes, "\(round): the last known good copy beside the database")
            if round == "kept" {
                #expect(!service.lines(containing: "CT log list not refreshed").isEmpty, "the failed refresh is logged: \(service.log.suffix(2000))")
            }
            let store = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
            let state = try #require(try store.status().first { $0.target == "sct" })
            let result = try #require(try store.result(observationID: state.lastObservationID))
            #expect(result.handshake?.certificateTransparency?.scts.map(\.status) == [.valid], "\(round): the SCT verifies against the list")
        }
        let status = try Binary.run(["trust", "status", "--config", config])
        #expect(status.stdout.contains("ct-log-list: \(kept)") && status.stdout.contains("last known good copy"), "\(status.stdout)\(status.stderr)")
    }

    @Test("ct: {refresh:}: serve fetches the list again on its schedule; a newer list replaces the one in force for later scans (an SCT of a log it adds becomes valid), and /metrics tells the input's publication time and refresh outcome")
    func certificateTransparencyLogListRefresh() throws {
        let known = try LabCTLog("lab log A", operator: "Lab One"), added = try LabCTLog("lab log B", operator: "Lab Two")
        let leaf = try lab.intermediate.issue(.server([ServiceLab.hostname]), embedding: [
            { added.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-600)) },
        ])
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        defer { server.stop() }
        let first = try LabCTLog.listFile([(known, "usable", Date(timeIntervalSince1970: 1_600_000_000))], published: Date().addingTimeInterval(-7_200))
        let web = try LabHTTPServer(routes: ["/logs.json": Array(first)])
        defer { web.stop() }
        let workspace = try lab.workspace("ct-log-list-refresh")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: [("sct", server.port)],
                              extra: "http: {listen: \"127.0.0.1:0\"}\nct: {log_list: \"\(web.url("/logs.json"))\", refresh: 2s}")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 20) }
        service.wait("a scan against the first list") { service.storedScans.count >= 1 }
        func latestStatuses() throws -> [CertificateTransparencyReport.Entry.Status] {
            let store = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
            let state = try #require(try store.status().first { $0.target == "sct" })
            return try #require(try store.result(observationID: state.lastObservationID)).handshake?.certificateTransparency?.scts.map(\.status) ?? []
        }
        #expect(try latestStatuses() == [.logNewerThanList], "the first list does not know log B, older than its SCT")
        // A newer list that adds log B: the next refresh puts it in force.
        web.serve(Array(try LabCTLog.listFile([(known, "usable", Date(timeIntervalSince1970: 1_600_000_000)),
                                               (added, "usable", Date(timeIntervalSince1970: 1_600_000_000))], published: Date().addingTimeInterval(-60))),
                  at: "/logs.json")
        service.wait("the refresh") { !service.lines(containing: "CT log list updated").isEmpty }
        // A scan that started after the refresh (one under way then still used the list it started with).
        let refreshed = Date().timeIntervalSince1970
        service.wait("a scan started after the refresh") { service.storedScans.contains { $0.target == "sct" && $0.startedAt > refreshed } }
        #expect(try latestStatuses() == [.valid], "log B is in the list in force now")
        let listen = ServiceHTTP.listening(service)
        let metrics = try ServiceHTTP.fetch("http://\(listen.first ?? "")/metrics")
        #expect(metrics.body.contains("tlsaudit_trust_input_refresh_success{input=\"ct-log-list\"} 1")
                && metrics.body.contains("tlsaudit_trust_input_published_timestamp_seconds{input=\"ct-log-list\"}"), "\(metrics.body.prefix(4000))")
        // The server goes away: the refresh fails, the list in force stays, and the metric says so.
        web.stop()
        service.wait("a failed refresh") { !service.lines(containing: "CT log list not refreshed").isEmpty }
        let failed = try ServiceHTTP.fetch("http://\(listen.first ?? "")/metrics")
        #expect(failed.body.contains("tlsaudit_trust_input_refresh_success{input=\"ct-log-list\"} 0"), "\(failed.body.prefix(4000))")
        let failedAt = Date().timeIntervalSince1970
        service.wait("a scan after the failed refresh") { service.storedScans.contains { $0.target == "sct" && $0.startedAt > failedAt } }
        #expect(try latestStatuses() == [.valid], "the list in force stays")
    }

    @Test("sd_notify: READY, WATCHDOG, RELOADING on SIGHUP, STOPPING on SIGTERM")
    func systemdNotifications() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("notify")
        let notify = try NotifySocket(directory: workspace)
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("db.sqlite").path, targets: [("good", good.port)])
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace,
                                         environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"])
        var messages = notify.messages(for: 2)
        #expect(messages.contains { $0.hasPrefix("READY=1") })
        #expect(messages.filter { $0 == "WATCHDOG=1" }.count >= 2)
        service.signal(SIGHUP)
        messages = notify.messages(for: 1)
        #expect(messages.contains { $0.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") })
        #expect(messages.contains { $0.hasPrefix("READY=1") })
        service.signal(SIGTERM)
        messages = notify.messages(for: 1)
        #expect(messages.contains("STOPPING=1"))
        #expect(service.waitForExit(timeout: 10) == 0)
    }

    @Test("SIGHUP with a new spill_directory: results kept in the old one, which the next start will not read, are named in a warning")
    func reloadedSpillDirectory() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("reload-spill")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        let (old, new) = (workspace.appendingPathComponent("spill-a"), workspace.appendingPathComponent("spill-b"))
        for directory in [old, new] { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
        func configure(_ directory: URL) throws {
            try lab.configuration(database: database, targets: [("good", good.port)], extra: "spill_directory: \(directory.path)")
                .write(toFile: config, atomically: true, encoding: .utf8)
        }
        try configure(old)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("a first scan") { !service.storedScans.isEmpty }
        // A file an earlier run kept in spill_directory, which this start could not store (here: put
        // there after the start's replay), named as the service names them there.
        let path = URL(fileURLWithPath: database).standardizedFileURL.path
        let name = "db.sqlite-" + String(StableHash.fnv1a(path) & 0xFFFF_FFFF, radix: 16) + ".unstored-1.jsonl"
        let kept = old.appendingPathComponent(name).path
        try Data().write(to: URL(fileURLWithPath: kept))
        #expect(SpillLocations(base: database, fallbacks: [old.path]).waiting() == [kept], "the file is where this run looks")
        try configure(new)
        service.signal(SIGHUP)
        service.wait("the reload") { !service.lines(containing: "configuration reloaded").isEmpty }
        let warnings = service.lines(containing: "the new spill_directory no longer covers")
        // Where to move it: beside the database, as the next start reads it there.
        #expect(warnings.count == 1 && warnings.allSatisfy { $0.contains("\(kept) -> \(database).unstored-1.jsonl") }, "\(service.log.suffix(1500))")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
    }

    @Test("SIGHUP applies a valid configuration and refuses an invalid one, which keeps the old running")
    func reload() throws {
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let workspace = try lab.workspace("reload")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: [("good", good.port)]).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("a first scan") { !service.storedScans.isEmpty }

        try lab.configuration(database: database, targets: [("good", good.port), ("added", expired.port)])
            .write(toFile: config, atomically: true, encoding: .utf8)
        service.signal(SIGHUP)
        service.wait("the added target to be scanned") { service.storedScans.contains { $0.target == "added" } }
        #expect(!service.lines(containing: "configuration reloaded").isEmpty)

        try "targets:\n  - host: x\n    intervall: 5s\n".write(toFile: config, atomically: true, encoding: .utf8)
        service.signal(SIGHUP)
        service.wait("the refusal") { !service.lines(containing: "reload refused").isEmpty }
        #expect(service.lines(containing: "unknown key 'intervall'").count == 1, "the log names the error and its line")
        let before = service.storedScans.filter { $0.target == "added" }.count
        service.wait("scans to go on under the old configuration") {
            service.storedScans.filter { $0.target == "added" }.count >= before + 2
        }
        #expect(service.process.isRunning)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
    }

    @Test("SIGKILL loses no scan that was logged as stored; the database is intact and the service restarts")
    func killedProcess() throws {
        let servers = try (0..<4).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("kill")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: servers.enumerated().map { ("t\($0.offset)", $0.element.port) },
                              interval: "300ms").write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("twenty stored scans") { service.storedScans.count >= 20 }
        service.signal(SIGKILL)
        #expect(service.waitForExit(timeout: 5) != nil)
        let logged = service.storedScans

        let store = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
        #expect(try store.integrityCheck() == "ok")
        let stored = try storedScanTimes(database)
        let missing = logged.filter { scan in !(stored[scan.target] ?? []).contains { abs($0 - scan.startedAt) < 0.001 } }
        #expect(missing.isEmpty, "logged as stored but not in the database: \(missing)")

        let restarted = try ServiceProcess(config: config, workspace: workspace)
        restarted.wait("scans after the restart") { restarted.storedScans.count >= 4 }
        restarted.signal(SIGTERM)
        #expect(restarted.waitForExit(timeout: 10) == 0)
        #expect(try storedScanTimes(database)["t0", default: []].count > stored["t0", default: []].count)
    }

    @Test("unreachable targets back off exponentially")
    func backoff() throws {
        let port = try LabPorts.unusedPort()
        let workspace = try lab.workspace("backoff")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: [("closed", port)], interval: "250ms")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("four attempts", timeout: 15) { service.storedScans.count >= 4 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        let times = service.storedScans.map(\.startedAt).sorted()
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        // 0.5 s, 1 s, 2 s: each wait doubles.
        #expect(gaps.count >= 3)
        #expect(zip(gaps.dropFirst(), gaps).allSatisfy { $0 > $1 * 1.6 }, "gaps: \(gaps)")
        let row = try #require(try status(database).first)
        #expect(row.status == .failed && row.failureCategory == .connectionRefused)
        #expect(row.consecutiveFailures >= 4)
    }

    @Test("the per-host cap holds: ten targets on one tarpit host, at most two connections at once")
    func perHostCap() throws {
        let tarpit = try LabHostileServer(.tarpit)
        defer { tarpit.stop() }
        let workspace = try lab.workspace("cap")
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        var yaml = lab.configuration(database: workspace.appendingPathComponent("db.sqlite").path,
                                     targets: (0..<10).map { ("tarpit\($0)", tarpit.port) }, interval: "1s", timeout: "1s")
        yaml = yaml.replacingOccurrences(of: "per_host_concurrency: 8", with: "per_host_concurrency: 2")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("six tarpit scans", timeout: 20) { tarpit.totalConnections >= 6 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        #expect(tarpit.peakConnections <= 2, "peak \(tarpit.peakConnections)")
        #expect(tarpit.peakConnections == 2)
    }

    @Test("first runs are spread out, not a burst at start")
    func spreadStart() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("spread")
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("db.sqlite").path,
                              targets: (0..<20).map { ("t\($0)", good.port) }, interval: "10s")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("a first scan of each target") { Set(service.storedScans.map(\.target)).count == 20 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        let firsts = Dictionary(grouping: service.storedScans, by: \.target).values.map { $0.map(\.startedAt).min()! }
        let span = firsts.max()! - firsts.min()!
        #expect(span > 1.0 && span < 3.0, "first runs spread over \(span) s")
    }

    @Test("a database made by the first schema is upgraded in place, its scans kept")
    func migrationFromFirstSchema() throws {
        let workspace = try lab.workspace("migration")
        let path = workspace.appendingPathComponent("old.sqlite").path
        let queue = try DatabaseQueue(path: path)
        try SQLiteMigrations.migrator(sha256: Digest.sha256Hex).migrate(queue, upTo: "v1-initial")
        try queue.write { db in
            try db.execute(sql: """
                INSERT INTO observation (id, target, host, port, sni, address, family, started_at, duration_ms, status,
                    failure_category, failure_message)
                VALUES (1, 'legacy', 'legacy.example', 443, 'legacy.example', '192.0.2.1', 'ipv4', 1700000000, 12, 'failed',
                    'connect-timeout', 'no answer')
                """)
            try db.execute(sql: "INSERT INTO verdict VALUES (1, 'ats', 1700000000, 0, '[]', '[]')")
            try db.execute(sql: """
                INSERT INTO target_state (target, address, host, port, last_observation_id, last_scan_at, status, policy,
                    compliant, failed_rules, failure_category, consecutive_failures)
                VALUES ('legacy', '192.0.2.1', 'legacy.example', 443, 1, 1700000000, 'failed', 'ats', 0, '[]', 'connect-timeout', 3)
                """)
        }
        #expect(try queue.read { try SQLiteMigrations.migrator(sha256: Digest.sha256Hex).appliedMigrations($0) } == ["v1-initial"])
        try queue.close()

        let output = try Binary.run(["status", "--database", path])
        #expect(output.status == 2, "\(output.stderr)")
        #expect(output.stdout.contains("legacy"))
        #expect(output.stdout.contains("UNREACHABLE (connect-timeout, 3x)"))
        let store = try SQLiteScanStore(path: path, create: false, sha256: Digest.sha256Hex)
        #expect(try store.appliedMigrations() == ["v1-initial", "v2-pin-state", "v3-alerts", "v4-reports", "v5-pin-counts", "v6-revocation", "v7-fleet", "v8-inventory", "v9-vulnerabilities", "v10-fencing", "v11-anchor-in", "v12-tags-app", "v13-report-claim", "v14-runs", "v15-clients", "v16-alert-target", "v17-judged-with", "v18-node-server", "v19-observation-order", "v20-check-reports", "v21-ct-logs", "v22-ct-sightings", "v23-ct-log-lease", "v24-lost-leases"])
        // v4 fills in each observation's own policy from the verdict it was stored with.
        let backfilled = try DatabaseQueue(path: path).read { try String.fetchOne($0, sql: "SELECT policy FROM observation WHERE id = 1") }
        #expect(backfilled == "ats")
        #expect(try store.status().first?.pinState == PinEvaluation.State.none)
        #expect(try store.history(target: "legacy", limit: 10).count == 1)
        #expect(try store.integrityCheck() == "ok")
    }
}
