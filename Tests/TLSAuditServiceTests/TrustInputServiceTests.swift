import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe
import TLSAuditService
@testable import TLSAuditStore
import TLSAuditSQLite
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// `serve` keeps its trust inputs current: Apple's roots and the CT log list from URLs, refreshed
/// on their schedule, used by the scans that follow, kept for a restart without network; a stale
/// or failing input raises one alert per transition through the sinks.
@Suite("trust inputs in the service", .serialized)
struct TrustInputServiceTests {
    let lab = ServiceLab.shared

    func alerts(_ receiver: LabWebhookReceiver, _ kind: AlertKind, input: TrustInputKind) -> [Alert] {
        receiver.received.compactMap { try? JSONDecoder.tlsaudit.decode(Alert.self, from: $0.body) }
            .filter { $0.kind == kind && $0.target == "trust-input:\(input.rawValue)" }
    }

    /// Each input's condition in `/api/v1/trust-inputs`.
    func conditions(_ listen: [String]) throws -> [String: String] {
        let body = try ServiceHTTP.fetch("http://\(listen.first ?? "")/api/v1/trust-inputs").body
        let document = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        let inputs = try #require(document["inputs"] as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: inputs.compactMap { input in
            (input["input"] as? String).map { ($0, input["condition"] as? String ?? "?") }
        })
    }

    @Test("Apple's roots and the CT log list from URLs: the status page shows a stale input; a new root set is used by the next scans, and the verdict it changes is said to be judged again with it, in one alert and in history; a stale list alerts once, a fresh one clears it; a source gone alerts once after 3 failures, also across a restart that keeps the last good copies")
    func refreshedAlertedKept() throws {
        let other = try LabCertificateAuthority.selfSigned(.authority("tlsaudit lab other root"))
        // A 367-day leaf with three SCTs from three operators' logs of the list: compliant once its root is Apple's.
        let log = try LabCTLog("lab log A", operator: "Lab One"), second = try LabCTLog("lab log B", operator: "Lab Two"),
            third = try LabCTLog("lab log C", operator: "Lab Three")
        let logs = [log, second, third].map { ($0, "usable", Date(timeIntervalSince1970: 1_600_000_000)) }
        let leaf = try lab.intermediate.issue(.server([ServiceLab.hostname]), embedding: [log, second, third].map { ctLog in
            { ctLog.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-600)) }
        })
        let stale = try LabCTLog.listFile(logs, published: Date().addingTimeInterval(-40 * 86_400))
        let web = try LabHTTPServer(routes: ["/roots.pem": Array(other.pem.utf8), "/logs.json": Array(stale)])
        defer { web.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        defer { server.stop() }
        let workspace = try lab.workspace("trust-inputs")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try (lab.configuration(database: database, targets: [], extra: """
            http: {listen: "127.0.0.1:0"}
            ct: {log_list: "\(web.url("/logs.json"))", refresh: 1s, max_age: 30d}
            apple_roots: {source: "\(web.url("/roots.pem"))", refresh: 1s}
            alerts:
              sinks:
                - {name: hook, type: webhook, url: "http://127.0.0.1:\(receiver.port)/alerts"}
            """) + "  - {host: \(ServiceLab.hostname), port: \(server.port), name: apple, trust: apple}\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        #expect(try Binary.run(["check-config", config]).status == 0)

        func anchored() throws -> Bool? {
            let store = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
            guard let state = try store.status().first(where: { $0.target == "apple" }) else { return nil }
            return try store.result(observationID: state.lastObservationID)?.chain?.anchored
        }
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("a scan against the fetched roots") { service.storedScans.count >= 1 }
        #expect(try anchored() == false, "the lab root is not among the fetched Apple roots")
        #expect(FileManager.default.fileExists(atPath: workspace.appendingPathComponent("apple-roots.pem").path), "kept beside the database")
        service.wait("the stale list's alert") { alerts(receiver, .trustInputStale, input: .ctLogList).count == 1 }
        let staleAlert = try #require(alerts(receiver, .trustInputStale, input: .ctLogList).first)
        #expect(staleAlert.summary.contains("40 days old") && staleAlert.summary.contains("max_age of 30 days"), "\(staleAlert.summary)")
        // The status page says so above the table.
        let listen = ServiceHTTP.listening(service)
        let program = try LabPrerequisite.program(["/usr/bin/chromium", "/usr/bin/chromium-browser"], package: "chromium")
        var chromium = HeadlessBrowser(program: program, workspace: workspace)
        let page = try chromium.dom("http://\(listen.first ?? "")/")
        #expect(page.contains("ct-log-list is stale: \(web.url("/logs.json"))") && page.contains("40 days old (max_age 30 days)"),
                "\(page.components(separatedBy: "trust-inputs").dropFirst().first?.prefix(600) ?? "no banner")")

        // Apple's roots now hold the lab root: the next scans anchor there.
        web.serve(Array((other.pem + lab.root.pem).utf8), at: "/roots.pem")
        service.wait("the new roots") { !service.lines(containing: "Apple root store updated").isEmpty }
        let updated = Date().timeIntervalSince1970
        service.wait("a scan after the new roots") { service.storedScans.contains { $0.startedAt > updated + 0.5 } }
        #expect(try anchored() == true, "judged against the refreshed Apple roots")
        let latest = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
        let latestState = try #require(try latest.status().first { $0.target == "apple" })
        let latestResult = try #require(try latest.result(observationID: latestState.lastObservationID))
        #expect(latestResult.ats.compliant, "compliant under Apple's roots: \(latestResult.findings.map { "\($0.id.rawValue): \($0.message)" })")
        // The verdict changed with the same certificate because the roots did: the alert and the history say so, once.
        func restored() -> [Alert] {
            receiver.received.compactMap { try? JSONDecoder.tlsaudit.decode(Alert.self, from: $0.body) }.filter { $0.kind == .trustRestored && $0.target == "apple" }
        }
        service.wait("trust restored") { restored().count == 1 }
        let restoredAlert = try #require(restored().first)
        #expect(restoredAlert.summary.contains("the same certificate, judged again with Apple root store of")
                && restoredAlert.changes["judged_again_with"]?.hasPrefix("Apple root store of") == true, "\(restoredAlert.summary)")
        let history = try Binary.run(["history", "apple", "--database", database])
        #expect(history.stdout.contains("COMPLIANT judged again with Apple root store of"), "\(history.stdout)")
        #expect(history.stdout.components(separatedBy: "judged again with").count == 2, "only the entry where the verdict changed: \(history.stdout)")

        // A fresh list: one alert saying the input is current again; the stale one is not repeated.
        web.serve(Array(try LabCTLog.listFile(logs, published: Date())), at: "/logs.json")
        service.wait("the list current again") { alerts(receiver, .trustInputCurrent, input: .ctLogList).count == 1 }
        #expect(try conditions(listen) == ["ct-log-list": "current", "apple-roots": "current", "distrust": "current"])

        // Invalid JSON in place of the list: refused with a log line saying why, the list in force stays.
        web.serve(Array("<html>".utf8), at: "/logs.json")
        service.wait("the invalid list refused") { !service.lines(containing: "not a CT log list").isEmpty }
        #expect(service.lines(containing: "CT log list not refreshed: the one in force stays").count >= 1)
        // The source goes away: after 3 failed refreshes in a row, one alert per input, not one per failure.
        web.stop()
        service.wait("refresh-failing alerts") {
            alerts(receiver, .trustInputRefreshFailing, input: .ctLogList).count == 1 && alerts(receiver, .trustInputRefreshFailing, input: .appleRoots).count == 1
        }
        Thread.sleep(forTimeInterval: 3)
        #expect(alerts(receiver, .trustInputRefreshFailing, input: .ctLogList).count == 1)
        #expect(alerts(receiver, .trustInputStale, input: .ctLogList).count == 1)
        #expect(try conditions(listen) == ["ct-log-list": "refresh-failing", "apple-roots": "refresh-failing", "distrust": "current"])
        let metrics = try ServiceHTTP.fetch("http://\(listen.first ?? "")/metrics")
        #expect(metrics.body.contains("tlsaudit_trust_input_refresh_success{input=\"apple-roots\"} 0")
                && metrics.body.contains("tlsaudit_trust_input_age_seconds{input=\"ct-log-list\"}")
                && metrics.body.contains("tlsaudit_trust_input_max_age_seconds{input=\"ct-log-list\"} 2592000"), "\(metrics.body.prefix(3000))")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 20) == 0)

        // A restart with the source still gone: the kept copies are in force (the lab root anchors),
        // and the failing inputs are not alerted on again.
        let restarted = try ServiceProcess(config: config, workspace: workspace)
        let started = Date().timeIntervalSince1970
        restarted.wait("a scan after the restart") { restarted.storedScans.contains { $0.startedAt > started } }
        #expect(try anchored() == true, "the last known good Apple roots after a restart without network")
        Thread.sleep(forTimeInterval: 4)
        #expect(alerts(receiver, .trustInputRefreshFailing, input: .ctLogList).count == 1, "no second alert for the same condition")
        #expect(restored().count == 1, "no regression storm: one alert per transition")
        restarted.signal(SIGTERM)
        #expect(restarted.waitForExit(timeout: 20) == 0)
    }
}
