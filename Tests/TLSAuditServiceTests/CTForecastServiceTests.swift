import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe
import TLSAuditServiceLab
import TLSAuditSQLite
import TLSAuditStore

/// `serve` with `ct: {follow: true}` against a real RFC 6962 log on loopback: the pin forecast.
@Suite("Pin forecast in serve", .serialized)
struct CTForecastServiceTests {
    let lab = ServiceLab.shared

    func spki(_ certificate: LabCertificate) -> String { Data(Digest.sha256(certificate.spkiDER)).base64EncodedString() }

    func alerts(_ database: String, _ kind: AlertKind) throws -> [StoredAlert] {
        try SQLiteScanStore(path: database, sha256: Digest.sha256Hex).alerts(limit: 100).filter { $0.alert.kind == kind }
    }

    /// The log list of `logs` and `tiledLogs`, and a configuration following them for one target
    /// pinning `pinning`'s key: the database's path and the configuration's.
    func files(_ workspace: URL, logs: [[String: Any]], tiledLogs: [[String: Any]] = [], host: String, port: Int,
               pinning: LabCertificate, watch: String = "[]") throws -> (database: String, config: String) {
        let listFile = workspace.appendingPathComponent("logs.json")
        let list: [String: Any] = ["version": "lab", "log_list_timestamp": "2026-11-01T00:00:00Z",
                                   "operators": [["name": "lab", "email": ["ct@lab.test"], "logs": logs, "tiled_logs": tiledLogs]]]
        try JSONSerialization.data(withJSONObject: list).write(to: listFile)
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try """
            database: \(database)
            log_level: info
            http: {listen: "127.0.0.1:0"}
            ct: {log_list: \(listFile.path), follow: true, start: beginning, poll: 1s, watch: \(watch)}
            defaults: {interval: 30s, timeout: 3s, sni: \(host), addresses: [127.0.0.1], trust: {ca_file: \(lab.rootFile)}}
            targets:
              - {host: \(host), port: \(port), name: pinned, pins: {leaf_identities: [\(spki(pinning))]}}
            """.write(toFile: config, atomically: true, encoding: .utf8)
        return (database, config)
    }

    @Test("a new key for a pinned name raises pin.forecast-break once (its precertificate and itself are one); a covered renewal and another name do not; a restart resumes at the next entry; a fork is ct.log-inconsistent, acted on no further")
    func forecast() throws {
        let host = ServiceLab.hostname
        let current = try lab.intermediate.issue(.server([host]))
        let server = try LabTLSServer(LabServerConfiguration(chain: [current, lab.intermediate]))
        defer { server.stop() }
        let ctLog = try LabCTLog("Lab Log serve", operator: "lab")
        let log = try LabCTLogServer(ctLog)
        defer { log.stop() }
        let workspace = try lab.workspace("ct-forecast")
        let (database, config) = try files(workspace, logs: [ctLog.listEntry(url: log.url)], host: host, port: server.port, pinning: current)

        // Logged before the start: another name, the pinned name with a new key (its precertificate
        // first, then itself), the pinned name renewed with its pinned key.
        let newKey = try lab.intermediate.issue(.server([host]))
        var sameKeyRequest = LabCertificateRequest.server([host])
        sameKeyRequest.existingKey = current.key
        log.add(try lab.intermediate.issue(.server(["elsewhere.tlsaudit.test"])), chain: [lab.intermediate])
        try log.addPrecertificate(newKey, issuer: lab.intermediate, chain: [lab.intermediate])
        log.add(newKey, chain: [lab.intermediate])
        log.add(try lab.intermediate.issue(sameKeyRequest), chain: [lab.intermediate])
        log.publish()

        var service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("the forecast alert") { (try? alerts(database, .pinForecastBreak).count) == 1 }
        service.wait("the log read to its end") { !service.lines(containing: "is covered by the pins of target pinned").isEmpty }
        let first = try #require(try alerts(database, .pinForecastBreak).first?.alert)
        #expect(first.target == "pinned" && first.host == host && first.severity == .critical)
        #expect(first.changes["index"] == "1" && first.changes["precertificate"] == "true", "raised at the precertificate, the first sight")
        #expect(first.changes["spki"] == "sha256/" + spki(newKey))
        #expect(first.summary.contains("-999") && first.summary.contains("-1202"))
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)
        #expect(try alerts(database, .pinForecastBreak).count == 1, "the final certificate after its precertificate is the same event")

        // Restarted after two more entries: only they are read.
        let another = try lab.intermediate.issue(.server([host]))
        log.add(another, chain: [lab.intermediate])
        log.add(try lab.intermediate.issue(.server(["elsewhere.tlsaudit.test"])), chain: [lab.intermediate])
        log.publish()
        service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("the second forecast alert") { (try? alerts(database, .pinForecastBreak).count) == 2 }
        let indexes = try alerts(database, .pinForecastBreak).compactMap { $0.alert.changes["index"] }.sorted()
        #expect(indexes == ["1", "4"], "no entry judged twice into a second alert, none skipped")
        service.wait("the position past the last entry") {
            let states = (try? SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctLogStates()) ?? []
            return states.first.flatMap { try? JSONDecoder().decode(CTLogPosition.self, from: Data($0.position.utf8)) }?.nextIndex == 6
        }

        // The log forks: an alert, and the forked history's certificate is not acted on.
        log.set(.fork(at: 0))
        log.add(try lab.intermediate.issue(.server([host])), chain: [lab.intermediate])
        log.publish()
        service.wait("the fork's alert") { (try? alerts(database, .ctLogInconsistent).count) == 1 }
        // The forked history grows: still the one event.
        log.add(try lab.intermediate.issue(.server([host])), chain: [lab.intermediate])
        log.publish()
        Thread.sleep(forTimeInterval: 2.5)
        #expect(try alerts(database, .ctLogInconsistent).count == 1, "once, however many rounds see it")
        #expect(try alerts(database, .pinForecastBreak).count == 2, "nothing from the forked history")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)
        #expect(try SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctLogStates().first?.problem?.contains("forked") == true)
    }

    @Test("serve follows a static-ct-api log (tiles served by nginx) like an RFC 6962 one: a new key for the pinned name is pin.forecast-break; a log answering 429 is asked again only after its Retry-After, the other log not held up")
    func staticLogAndBackOff() throws {
        let host = ServiceLab.hostname
        let current = try lab.intermediate.issue(.server([host]))
        let server = try LabTLSServer(LabServerConfiguration(chain: [current, lab.intermediate]))
        defer { server.stop() }
        let tiledLog = try LabCTLogServer(try LabCTLog("Lab Log tiled", operator: "lab"))
        defer { tiledLog.stop() }
        let tiled = try LabStaticCTLog(tiledLog)
        defer { tiled.stop() }
        let busyLog = try LabCTLog("Lab Log busy", operator: "lab")
        let busy = try LabCTLogServer(busyLog)
        defer { busy.stop() }
        busy.set(.rateLimited)
        let workspace = try lab.workspace("ct-static")
        let (database, config) = try files(workspace, logs: [busyLog.listEntry(url: busy.url)], tiledLogs: [tiled.listEntry()],
                                           host: host, port: server.port, pinning: current)
        let elsewhere = try lab.intermediate.issue(.server(["elsewhere.tlsaudit.test"]))
        for index in 0..<300 { tiledLog.add(elsewhere, chain: [lab.intermediate], at: Date(timeIntervalSince1970: 1_800_000_000 + Double(index))) }
        let newKey = try lab.intermediate.issue(.server([host]))
        tiledLog.add(newKey, chain: [lab.intermediate])
        try tiled.publish()

        let started = Date()
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("the forecast alert from the tiled log") { (try? alerts(database, .pinForecastBreak).count) == 1 }
        let alert = try #require(try alerts(database, .pinForecastBreak).first?.alert)
        #expect(alert.changes["log"] == "Lab Log tiled" && alert.changes["index"] == "300")
        #expect(alert.changes["spki"] == "sha256/" + spki(newKey))
        service.wait("the busy log's 429") { !service.lines(containing: "rate-limited").isEmpty }
        #expect(!service.lines(containing: "trying again in 7 s").isEmpty, "the log's Retry-After, not the poll interval")
        Thread.sleep(forTimeInterval: 4)
        // Rounds every second; the busy log asked again only each 7 s (a loaded machine may have let 7 s pass).
        let elapsed = Date().timeIntervalSince(started)
        #expect((1...(1 + Int(elapsed / 7))).contains(busy.requests(to: "get-sth")), "\(busy.requests(to: "get-sth")) asks in \(elapsed) s")
        let listener = try #require(ServiceHTTP.listening(service).first)
        let metrics = try ServiceHTTP.fetch("http://\(listener)/metrics").body
        #expect(metrics.contains(#"tlsaudit_ct_log_fetch_errors_total{log="Lab Log busy",kind="rate-limited"} 1"#), "\(metrics.split(separator: "\n").filter { $0.contains("ct_log") })")
        #expect(metrics.contains(#"tlsaudit_ct_log_tree_size{log="Lab Log tiled"} 301"#) && metrics.contains(#"tlsaudit_ct_log_position{log="Lab Log tiled"} 301"#))
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)
    }

    @Test("ct: watch with allowed issuers: a certificate from another CA for a name under the domain is ct.unexpected-issuer once (its precertificate and itself are one); the allowed CA's is seen; every judgement is a sighting (break, covered, seen, unexpected issuer) that ct status lists")
    func unexpectedIssuer() throws {
        let host = ServiceLab.hostname
        let current = try lab.intermediate.issue(.server([host]))
        let server = try LabTLSServer(LabServerConfiguration(chain: [current, lab.intermediate]))
        defer { server.stop() }
        let ctLog = try LabCTLog("Lab Log watch", operator: "lab")
        let log = try LabCTLogServer(ctLog)
        defer { log.stop() }
        let workspace = try lab.workspace("ct-watch")
        let (database, config) = try files(workspace, logs: [ctLog.listEntry(url: log.url)], host: host, port: server.port, pinning: current,
                                           watch: #"[{domain: tlsaudit.test, issuers: ["Service Test Intermediate"]}]"#)
        let rogue = try lab.root.issue(.authority("rogue intermediate"))
        let misissued = try rogue.issue(.server(["shop.tlsaudit.test"]))
        try log.addPrecertificate(misissued, issuer: rogue, chain: [rogue])
        // An allowed CA's certificate served beside it (extra_data is not in the tree): not its issuer, not counted.
        log.add(misissued, chain: [rogue, lab.intermediate])
        log.add(try lab.intermediate.issue(.server(["www.tlsaudit.test"])), chain: [lab.intermediate])
        log.add(try lab.intermediate.issue(.server([host])), chain: [lab.intermediate])
        var renewal = LabCertificateRequest.server([host])
        renewal.existingKey = current.key
        log.add(try lab.intermediate.issue(renewal), chain: [lab.intermediate])
        log.add(try lab.intermediate.issue(.server(["elsewhere.example"])), chain: [lab.intermediate])
        log.publish()

        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("the log read to its end") {
            let states = (try? SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctLogStates()) ?? []
            return states.first.flatMap { try? JSONDecoder().decode(CTLogPosition.self, from: Data($0.position.utf8)) }?.nextIndex == 6
        }
        let unexpected = try alerts(database, .ctUnexpectedIssuer)
        #expect(unexpected.count == 1, "the precertificate and its certificate are one event")
        let alert = try #require(unexpected.first?.alert)
        #expect(alert.host == "shop.tlsaudit.test" && alert.changes["index"] == "0" && alert.changes["allowed"] == "Service Test Intermediate")
        #expect(alert.target == "ct-watch:tlsaudit.test" && alert.severity == .error)
        #expect(try alerts(database, .pinForecastBreak).count == 1, "the new key for the pinned host")
        let listener = try #require(ServiceHTTP.listening(service).first)
        let api = try ServiceHTTP.fetch("http://\(listener)/api/v1/ct/sightings?days=30")
        let document = try JSONSerialization.jsonObject(with: Data(api.body.utf8)) as? [String: Any]
        let listed = try #require(document?["sightings"] as? [[String: Any]])
        #expect(api.status == 200 && listed.count == 4 && listed.contains { $0["verdict"] as? String == "break" && $0["judged_by"] as? String == "target pinned" })
        #expect(try ServiceHTTP.fetch("http://\(listener)/api/v1/ct/sightings?days=-1").status == 400)
        let metrics = try ServiceHTTP.fetch("http://\(listener)/metrics").body
        #expect(metrics.contains(#"tlsaudit_ct_log_tree_size{log="Lab Log watch"} 6"#) && metrics.contains(#"tlsaudit_ct_log_lag_entries{log="Lab Log watch"} 0"#))
        #expect(metrics.contains(#"tlsaudit_ct_log_entries_matched_total{log="Lab Log watch"} 5"#), "all but elsewhere.example")

        // A reload (SIGHUP) with other allowed issuers applies to what is logged next.
        _ = try files(workspace, logs: [ctLog.listEntry(url: log.url)], host: host, port: server.port, pinning: current,
                      watch: #"[{domain: tlsaudit.test, issuers: ["rogue intermediate"]}]"#)
        service.signal(SIGHUP)
        service.wait("the reload") { !service.lines(containing: "configuration reloaded").isEmpty }
        log.add(try lab.intermediate.issue(.server(["new.tlsaudit.test"])), chain: [lab.intermediate])
        log.publish()
        service.wait("the alert under the reloaded rule") { (try? alerts(database, .ctUnexpectedIssuer).count) == 2 }
        #expect(try alerts(database, .ctUnexpectedIssuer).contains { $0.alert.host == "new.tlsaudit.test" && $0.alert.changes["allowed"] == "rogue intermediate" })
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)

        let sightings = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctSightings(validFrom: nil, limit: 50)
        let verdicts = Dictionary(grouping: sightings, by: \.verdict).mapValues { $0.map(\.host).sorted() }
        #expect(verdicts[.unexpectedIssuer] == ["new.tlsaudit.test", "shop.tlsaudit.test"])
        #expect(verdicts[.pinBreak] == [host] && verdicts[.covered] == [host], "\(verdicts)")
        // Seen: www under the watched domain; the pinned host's certificates are listed with their pin verdicts instead.
        #expect(verdicts[.seen] == ["www.tlsaudit.test"])
        #expect(!sightings.contains { $0.host.contains("elsewhere") })

        let status = try Binary.run(["ct", "status", "--config", config])
        #expect(status.status == 0)
        #expect(status.stdout.contains("Lab Log watch") && status.stdout.contains("unexpected-issuer") && status.stdout.contains("shop.tlsaudit.test"),
                "\(status.stdout)\(status.stderr)")
    }

    @Test("ct backfill --since reads each log from its first entry logged that day, judges as serve does (pin.forecast-break), at most --rate entries a second; run again it adds nothing; --index reads from an index; bad options are usage errors")
    func backfill() throws {
        let host = ServiceLab.hostname
        let current = try lab.intermediate.issue(.server([host]))
        let ctLog = try LabCTLog("Lab Log backfill", operator: "lab")
        let log = try LabCTLogServer(ctLog)
        defer { log.stop() }
        let workspace = try lab.workspace("ct-backfill")
        let (database, config) = try files(workspace, logs: [ctLog.listEntry(url: log.url)], host: host, port: 9, pinning: current)
        let january = Date(timeIntervalSince1970: 1_767_225_600), june = Date(timeIntervalSince1970: 1_780_272_000)
        let other = try lab.intermediate.issue(.server(["elsewhere.tlsaudit.example"]))
        for index in 0..<20 {
            let time = (index < 10 ? january : june).addingTimeInterval(Double(index))
            if index == 3 || index == 15 {
                log.add(try lab.intermediate.issue(.server([host])), chain: [lab.intermediate], at: time)
            } else {
                log.add(other, chain: [lab.intermediate], at: time)
            }
        }
        log.publish()

        let first = try Binary.run(["ct", "backfill", "--config", config, "--since", "2026-03-01", "--rate", "10", "--format", "json"])
        #expect(first.status == 0, "\(first.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any]
        let result = try #require((document?["logs"] as? [[String: Any]])?.first)
        #expect(result["from"] as? Int == 10 && result["to"] as? Int == 20 && result["read"] as? Int == 10 && result["matched"] as? Int == 1)
        #expect(first.seconds >= 0.9, "ten entries at ten a second")
        #expect(try alerts(database, .pinForecastBreak).map { $0.alert.changes["index"] } == ["15"])

        let again = try Binary.run(["ct", "backfill", "--config", config, "--since", "2026-03-01"])
        #expect(again.status == 0 && again.stderr.contains("10 entries read, 1 naming a watched name"))
        #expect(try alerts(database, .pinForecastBreak).count == 1, "judged again, nothing added")

        let fromZero = try Binary.run(["ct", "backfill", "--config", config, "--log", "Lab Log backfill", "--index", "0"])
        #expect(fromZero.status == 0)
        #expect(try alerts(database, .pinForecastBreak).compactMap { $0.alert.changes["index"] }.sorted() == ["15", "3"])
        #expect(try SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctLogStates().isEmpty, "serve's positions are left alone")

        #expect(try Binary.run(["ct", "backfill", "--config", config, "--index", "4"]).status == 64, "an index is a log's own")
        #expect(try Binary.run(["ct", "backfill", "--config", config, "--since", "last tuesday"]).status == 64)
        #expect(try Binary.run(["ct", "backfill", "--config", config, "--since", "2026-03-01", "--log", "No Such Log"]).status == 64)
        log.set(.unavailable)
        let failing = try Binary.run(["ct", "backfill", "--config", config, "--since", "2026-03-01"])
        #expect(failing.status == 1 && failing.stderr.contains("stopped"))
    }

    @Test("faults: a store that refuses the sightings leaves the position where it was and the entries are judged again once it accepts them (one alert, nothing skipped); a stored position that cannot be read is left as it is, the log not followed, and said")
    func storeFaults() throws {
        let host = ServiceLab.hostname
        let current = try lab.intermediate.issue(.server([host]))
        let ctLog = try LabCTLog("Lab Log faults", operator: "lab")
        let log = try LabCTLogServer(ctLog)
        defer { log.stop() }
        let workspace = try lab.workspace("ct-faults")
        let (database, config) = try files(workspace, logs: [ctLog.listEntry(url: log.url)], host: host, port: 9, pinning: current)
        log.add(try lab.intermediate.issue(.server(["elsewhere.tlsaudit.example"])), chain: [lab.intermediate])
        log.add(try lab.intermediate.issue(.server([host])), chain: [lab.intermediate])
        log.publish()
        // The store as a full disk would leave it for these rows: every insert refused.
        _ = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex)
        let sqlite3 = try LabPrerequisite.program(["/usr/bin/sqlite3"], package: "sqlite3")
        #expect(try Binary.run([database, "CREATE TRIGGER refuse BEFORE INSERT ON ct_sighting BEGIN SELECT RAISE(ABORT, 'disk full'); END;"],
                               program: sqlite3).status == 0)
        func position() -> CTLogPosition? {
            let states = (try? SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctLogStates()) ?? []
            return states.first.flatMap { try? JSONDecoder().decode(CTLogPosition.self, from: Data($0.position.utf8)) }
        }
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("a refused sighting") { !service.lines(containing: "cannot record the certificate").isEmpty }
        service.wait("another round") { service.lines(containing: "cannot record the certificate").count >= 2 }
        #expect(position()?.nextIndex == 0, "the position stays before the entry whose judgement was not stored")
        #expect(try Binary.run([database, "DROP TRIGGER refuse;"], program: sqlite3).status == 0)
        service.wait("the position past the entries") { position()?.nextIndex == 2 }
        #expect(try alerts(database, .pinForecastBreak).count == 1, "raised at the first round, not again when judged again")
        #expect(try SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctSightings(validFrom: nil, limit: 10).map(\.verdict) == [.pinBreak],
                "the pinned host's certificate listed with its pin verdict")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)

        // A position damaged on disk: not overwritten (starting again would skip or reread), the log left alone, said.
        #expect(try Binary.run([database, "UPDATE ct_log SET position = '{\"read\": 12}';"], program: sqlite3).status == 0)
        log.add(try lab.intermediate.issue(.server([host])), chain: [lab.intermediate])
        log.publish()
        let restarted = try ServiceProcess(config: config, workspace: workspace)
        restarted.wait("the damaged position said") { !restarted.lines(containing: "cannot be read").isEmpty }
        Thread.sleep(forTimeInterval: 2.5)
        #expect(try SQLiteScanStore(path: database, sha256: Digest.sha256Hex).ctLogStates().first?.position == #"{"read": 12}"#)
        #expect(try alerts(database, .pinForecastBreak).count == 1, "nothing read from the log meanwhile")
        restarted.signal(SIGTERM)
        #expect(restarted.waitForExit(timeout: 20) == 0)
    }
}
