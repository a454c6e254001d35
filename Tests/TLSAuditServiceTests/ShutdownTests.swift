import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// Starting and stopping keep their promises: signals from the first instant, a stop within the
/// grace whatever a sink does, and an exit status that says when results could not be stored.
@Suite("start and stop", .serialized)
struct ShutdownTests {
    let lab = ServiceLab.shared

    /// A configuration whose one target refuses connections (so `target.unreachable` is raised on
    /// the first scan) and whose webhook is `url` with `timeout`.
    func unreachableTargetConfig(_ workspace: URL, webhook url: String, timeout: String) throws -> String {
        let path = workspace.appendingPathComponent("tlsaudit.yaml").path
        let yaml = lab.configuration(database: workspace.appendingPathComponent("db.sqlite").path,
                                     targets: [("gone", try LabPorts.unusedPort())], interval: "200ms", extra: """
            alerts:
              unreachable_after: 1
              sinks:
                - {name: hook, type: webhook, url: "\(url)", timeout: \(timeout)}
            """)
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("a webhook that never answers cannot hold a stop past --shutdown-grace; the delivery stays pending")
    func shutdownGrace() throws {
        let tarpit = try LabHostileServer(.tarpit)
        defer { tarpit.stop() }
        let workspace = try lab.workspace("grace")
        let config = try unreachableTargetConfig(workspace, webhook: "http://127.0.0.1:\(tarpit.port)/alerts", timeout: "30s")
        let check = try Binary.run(["check-config", config])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.contains("longer than serve's --shutdown-grace") || check.stderr.contains("longer than serve's --shutdown-grace"),
                "\(check.stdout)\(check.stderr)")

        let service = try ServiceProcess(config: config, workspace: workspace, extraArguments: ["--shutdown-grace", "2"])
        service.wait("the alert") { !service.lines(containing: "alert raised").isEmpty }
        Thread.sleep(forTimeInterval: 1) // The delivery is under way, into the tarpit.
        let stopped = ContinuousClock.now
        service.signal(SIGTERM)
        // Before: 29 s (the sink's timeout) against a 15 s grace.
        let status = service.waitForExit(timeout: 20)
        let took = ContinuousClock.now - stopped
        #expect(status == 0, "\(service.log.suffix(2000))")
        #expect(took < .seconds(4.5), "stopping took \(took) with a 2 s grace")
        #expect(!service.lines(containing: "abandoned at the end of the shutdown grace").isEmpty, "\(service.log.suffix(2000))")
        let store = try SQLiteScanStore(path: workspace.appendingPathComponent("db.sqlite").path, create: false, sha256: Digest.sha256Hex)
        let pending = try store.pendingDeliveries(dueBy: Date().addingTimeInterval(86_400), sinks: ["hook"], limit: 10)
        #expect(pending.contains { $0.alert.kind == .unreachable }, "the abandoned delivery is retried after the restart")
    }

    /// `serve` for one target, `server`, in a fresh workspace (`launcher` runs it through another program).
    static func service(of server: LabTLSServer, lab: ServiceLab, workspace name: String, launcher: [String] = []) throws -> ServiceProcess {
        let workspace = try lab.workspace(name)
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("db.sqlite").path, targets: [("t", server.port)])
            .write(toFile: config, atomically: true, encoding: .utf8)
        return try ServiceProcess(config: config, workspace: workspace, launcher: launcher)
    }

    /// Waits until `pid` has a handler for `signal` (SigCgt in /proc), the first instant a process
    /// can catch it: before, only the dynamic loader has run. Returns the seconds waited.
    static func waitForHandler(pid: Int32, signal: Int32, timeout: Double = 10, orBlocked: Bool = false) -> Double? {
        let started = Date()
        let fields = orBlocked ? ["SigCgt:", "SigBlk:"] : ["SigCgt:"]
        while Date().timeIntervalSince(started) < timeout {
            if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
               status.split(separator: "\n").contains(where: { line in
                   fields.contains { line.hasPrefix($0) }
                       && (UInt64(line.drop { $0 != "\t" }.trimmingCharacters(in: .whitespaces), radix: 16) ?? 0) & (1 << UInt64(signal - 1)) != 0
               }) {
                return Date().timeIntervalSince(started)
            }
            usleep(100)
        }
        return nil
    }

    /// `nil`: as soon as the process catches SIGHUP at all (before, it died of one at 20 ms, 3 of 3).
    @Test("SIGHUP right after start is applied once the service is ready, not fatal", arguments: [nil, 0.05] as [Double?])
    func earlyHangup(delay: Double?) throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let service = try Self.service(of: server, lab: lab, workspace: "hup")
        if let delay {
            Thread.sleep(forTimeInterval: delay)
        } else {
            let waited = Self.waitForHandler(pid: service.process.processIdentifier, signal: SIGHUP)
            #expect(waited != nil, "the service never caught SIGHUP")
        }
        service.signal(SIGHUP)
        service.wait("the reload") { !service.lines(containing: "configuration reloaded").isEmpty }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(service.process.isRunning, "\(service.log.suffix(1500))")
        #expect(service.lines(containing: "configuration reloaded").count == 1)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        #expect(service.process.terminationReason == .exit, "stopped by its own exit, not killed by the signal")
    }

    /// 0: as soon as the process holds SIGHUP blocked (env) or caught (tlsaudit), whichever is first.
    @Test("started as the unit starts it (env --block-signal), a SIGHUP as early as it can be held is applied, never fatal",
          arguments: [0.0, 0.002, 0.005])
    func hangupAtOnce(delay: Double) throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let service = try Self.service(of: server, lab: lab, workspace: "hup-unit", launcher: ["/usr/bin/env", "--block-signal=HUP,TERM,INT"])
        #expect(Self.waitForHandler(pid: service.process.processIdentifier, signal: SIGHUP, orBlocked: true) != nil)
        if delay > 0 { Thread.sleep(forTimeInterval: delay) }
        service.signal(SIGHUP)
        service.wait("the reload") { !service.lines(containing: "configuration reloaded").isEmpty }
        #expect(service.process.isRunning, "\(service.log.suffix(1500))")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        #expect(service.process.terminationReason == .exit)
    }

    @Test("SIGTERM as soon as the service can catch it stops it cleanly (exit 0)")
    func earlyTermination() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let service = try Self.service(of: server, lab: lab, workspace: "term")
        // SIGHUP, SIGTERM and SIGINT are caught together from the start: the first instant.
        #expect(Self.waitForHandler(pid: service.process.processIdentifier, signal: SIGHUP) != nil)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0, "\(service.log.suffix(1500))")
        #expect(service.process.terminationReason == .exit)
        #expect(!service.lines(containing: "tlsaudit service stopped").isEmpty)
    }

    @Test("results that could not be stored: exit 75, kept beside the database, stored at the next start")
    func unstoredResultsSurviveARestart() throws {
        let servers = try (0..<2).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("spill")
        chmod(workspace.path, 0o777)
        let database = workspace.appendingPathComponent("db.sqlite").path
        _ = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex)
        chown(database, 65534, 65534)
        chmod(database, 0o444) // The service's user may not write the database, but may write beside it.
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: servers.enumerated().map { ("t\($0.offset)", $0.element.port) },
                              interval: "100ms").write(toFile: config, atomically: true, encoding: .utf8)
        chmod(config, 0o644)
        try LabPrerequisite.root(for: "runs the service as nobody with setpriv")
        let asNobody = [try LabPrerequisite.program(["/usr/bin/setpriv"], package: "util-linux"), "--reuid=65534", "--regid=65534", "--clear-groups"]
        let first = try ServiceProcess(config: config, workspace: workspace, launcher: asNobody)
        first.wait("the read-only error") { !first.lines(containing: "the database is read-only").isEmpty }
        Thread.sleep(forTimeInterval: 1)
        first.signal(SIGTERM)
        // Before: exit 0 with `unstored=N` in the log.
        #expect(first.waitForExit(timeout: 15) == 75, "\(first.log.suffix(2000))")
        #expect(first.storedScans.isEmpty)
        let spills = try FileManager.default.contentsOfDirectory(atPath: workspace.path)
            .filter { $0.hasPrefix("db.sqlite.unstored-") && $0.hasSuffix(".jsonl") }
        #expect(spills.count == 1, "\(spills)")
        let spill = workspace.appendingPathComponent(try #require(spills.first)).path
        let kept = try String(contentsOfFile: spill, encoding: .utf8).split(separator: "\n")
            .map { try JSONDecoder().decode(StoredScan.self, from: Data($0.utf8)) }
        #expect(kept.count >= 4, "\(kept.count) results kept")

        for suffix in ["", "-wal", "-shm"] { chmod(database + suffix, 0o644) }
        let second = try ServiceProcess(config: config, workspace: workspace, launcher: asNobody)
        second.wait("the kept results stored") {
            !second.lines(containing: "stored the scan results an earlier run could not store").isEmpty
        }
        #expect(!FileManager.default.fileExists(atPath: spill), "the file is removed once its results are stored")
        second.signal(SIGTERM)
        #expect(second.waitForExit(timeout: 15) == 0)
        _ = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
        let stored = try storedScanTimes(database)
        for target in Set(kept.map(\.target)) {
            let times = stored[target] ?? []
            let missing = kept.filter { scan in
                scan.target == target && !times.contains { abs($0 - scan.result.startedAt.timeIntervalSince1970) < 0.001 }
            }
            #expect(missing.isEmpty, "\(missing.count) kept results of \(target) were not stored")
        }
    }
}
