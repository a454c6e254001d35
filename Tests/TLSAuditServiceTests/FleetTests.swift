import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import Synchronization
import TLSAuditSupport
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// Three `tlsaudit serve` node processes sharing one throwaway PostgreSQL cluster.
@Suite("fleet: three nodes on one PostgreSQL", .serialized)
struct FleetTests {
    let lab = ServiceLab.shared

    /// A PostgreSQL cluster, the fleet configuration file and a file per node.
    struct Fleet {
        let postgres: LabPostgresServer
        let workspace: URL
        /// A hot standby of `postgres` (`withStandby`): then `url` names both, the primary first.
        var standby: LabPostgresServer?
        var url: String {
            guard let standby else { return postgres.url() }
            return "postgres://\(postgres.user)@127.0.0.1:\(postgres.port),127.0.0.1:\(standby.port)/tlsaudit?sslmode=disable&target_session_attrs=read-write"
        }

        init(_ name: String, standby synchronous: Bool? = nil) throws {
            postgres = try LabPostgresServer()
            workspace = try ServiceLab.shared.workspace(name)
            if let synchronous { standby = try LabPostgresServer(standbyOf: postgres, synchronous: synchronous) }
        }

        /// Writes the fleet's configuration (targets, alerts, fleet settings) and returns its path.
        func fleetFile(_ name: String = "fleet.yaml", targets: [(String, Int)], interval: String, extra: String,
                       perHostConcurrency: Int = 8) throws -> String {
            let path = workspace.appendingPathComponent(name).path
            try ServiceLab.shared.configuration(database: url, targets: targets, interval: interval, extra: extra,
                                                perHostConcurrency: perHostConcurrency)
                .write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        /// Starts a node whose own file names only the database, itself and the fleet settings;
        /// `hosts`: the node sees this /etc/hosts (its own mount namespace), as a vantage point
        /// behind another DNS would; `clockAhead`: the node's wall clock runs this far ahead (libfaketime).
        func node(_ name: String, vantage: String = "default", fleet: String, hosts: String? = nil,
                  clockAhead: String? = nil, extraArguments: [String] = [], extra: String = "") throws -> ServiceProcess {
            let path = workspace.appendingPathComponent("\(name).yaml").path
            try """
                database: \(url)
                node: {name: \(name), vantage: \(vantage)}
                fleet: \(fleet)
                \(extra)
                """.write(toFile: path, atomically: true, encoding: .utf8)
            if let clockAhead {
                // Exec'd from a shell: in the first process libfaketime is loaded into, it sets an
                // environment variable at start-up and Swift then saw no command-line arguments
                // (Debian's libfaketime 0.9.10); a process exec'd after that sees them. Monotonic time
                // stays real (faked, Dispatch's timers stalled); libdispatch's timer thread then
                // spins on libfaketime's timerfd_settime, a core for the node's life: a test-only cost.
                return try ServiceProcess(config: path, workspace: workspace, launcher: [
                    "/usr/bin/env", "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1", "FAKETIME=+\(clockAhead)",
                    "FAKETIME_DONT_FAKE_MONOTONIC=1", "/bin/sh", "-c", "exec \"$0\" \"$@\""])
            }
            guard let hosts else { return try ServiceProcess(config: path, workspace: workspace, extraArguments: extraArguments) }
            let hostsFile = workspace.appendingPathComponent("\(name).hosts").path
            try hosts.write(toFile: hostsFile, atomically: true, encoding: .utf8)
            return try ServiceProcess(config: path, workspace: workspace, launcher: [
                "/usr/bin/unshare", "--mount", "--", "/bin/sh", "-c", "mount --bind \(hostsFile) /etc/hosts && exec \"$0\" \"$@\""])
        }

        func query(_ sql: String) throws -> [[String]] {
            try postgres.psql(sql).split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        }

        /// Every stored scan: target, node, start time.
        func scans() throws -> [(target: String, node: String, startedAt: Double)] {
            try query("SELECT target, coalesce(node, ''), started_at FROM scan ORDER BY target, started_at").compactMap { row in
                guard row.count == 3, let started = Double(row[2]) else { return nil }
                return (row[0], row[1], started)
            }
        }
    }

    /// Stops the nodes with SIGTERM and expects each to exit 0 within 15 s.
    static func stop(_ nodes: [ServiceProcess]) {
        for node in nodes { node.signal(SIGTERM) }
        for node in nodes { #expect(node.waitForExit(timeout: 15) == 0, "\(node.log.suffix(1500))") }
    }

    /// The configuration's alert sinks: one webhook, `hook`, at `path` of the receiver.
    static func webhook(_ receiver: LabWebhookReceiver, path: String = "/alerts", timeout: String = "2s") -> String {
        """
        alerts:
          sinks:
            - name: hook
              type: webhook
              url: http://127.0.0.1:\(receiver.port)\(path)
              timeout: \(timeout)
        """
    }

    /// The smallest gap between two scans of one target, over all targets.
    static func smallestGap(_ scans: [(target: String, node: String, startedAt: Double)]) -> (target: String, gap: Double)? {
        var smallest: (String, Double)?
        for (target, group) in Dictionary(grouping: scans, by: \.target) {
            let times = group.map(\.startedAt).sorted()
            for (earlier, later) in zip(times, times.dropFirst()) where smallest == nil || later - earlier < smallest!.1 {
                smallest = (target, later - earlier)
            }
        }
        return smallest
    }

    @Test("fleet apply, three nodes share the targets; a node killed with SIGKILL has its targets taken over within lease plus interval; no target scanned twice within an interval; each alert delivered once; fleet status")
    func sharedWorkAndTakeover() throws {
        let fleet = try Fleet("fleet-kill")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        let targets = (1...8).map { ("good-\($0)", good.port) } + [("expired-1", expired.port), ("expired-2", expired.port)]
        let interval = 2.0, lease = 5.0
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: targets, interval: "2s", extra: """
            fleet: \(settings)
            \(Self.webhook(receiver))
            """)
        let applied = try Binary.run(["fleet", "apply", file])
        #expect(applied.status == 0 && applied.stdout.contains("fleet configuration version 1 applied"), "\(applied.stdout)\(applied.stderr)")

        let nodes = try ["node-a", "node-b", "node-c"].map { try fleet.node($0, fleet: settings) }
        try nodes[0].wait("every target scanned twice, by all three nodes", timeout: 30) {
            let scans = try fleet.scans()
            return Set(scans.map(\.node)).count == 3
                && targets.allSatisfy { target in scans.filter { $0.target == target.0 }.count >= 2 }
        }
        let status = try Binary.run(["fleet", "status", "--database", fleet.url, "--format", "json"])
        #expect(status.status == 0, "all alive, all on version 1: \(status.stdout)\(status.stderr)")
        for name in ["node-a", "node-b", "node-c"] {
            #expect(status.stdout.contains("\"name\" : \"\(name)\""), "\(status.stdout)")
        }
        #expect(status.stdout.contains("\"configuration_version\" : 1"), "\(status.stdout)")

        // SIGKILL mid-cycle: its leases expire and the others take its targets over.
        let killedAt = Date().timeIntervalSince1970
        nodes[0].signal(SIGKILL)
        #expect(nodes[0].waitForExit(timeout: 5) != nil)
        let bound = lease + interval
        try nodes[1].wait("every target scanned again after the kill", timeout: bound + 10) {
            let scans = try fleet.scans()
            return targets.allSatisfy { target in scans.contains { $0.target == target.0 && $0.startedAt > killedAt } }
        }
        let scans = try fleet.scans()
        for target in targets {
            let first = scans.filter { $0.target == target.0 && $0.startedAt > killedAt }.map(\.startedAt).min() ?? .infinity
            #expect(first - killedAt <= bound + 1.5, "\(target.0) scanned again \(first - killedAt) s after the kill (lease + interval = \(bound) s)")
        }
        #expect(!scans.contains { $0.node == "node-a" && $0.startedAt > killedAt + 0.5 }, "the killed node stored nothing")
        if let (target, gap) = Self.smallestGap(scans) {
            #expect(gap >= interval - 0.2, "\(target) was scanned twice within \(gap) s (interval \(interval) s)")
        }

        // The killed node shows as lost once its heartbeat is older than three polls plus the lease.
        try nodes[1].wait("node-a lost in fleet status", timeout: 15) {
            let output = try Binary.run(["fleet", "status", "--database", fleet.url])
            return output.status == 1 && output.stdout.split(separator: "\n").contains { $0.hasPrefix("node-a") && $0.contains("LOST") }
        }

        // Each alert once: the expired targets' alerts reached the webhook exactly once each, fleet-wide.
        nodes[1].wait("the expired targets' alerts delivered") {
            Set(receiver.received.compactMap { $0.headers["X-Tlsaudit-Alert-Id"] ?? $0.headers["x-tlsaudit-alert-id"] }).count >= 2
        }
        Thread.sleep(forTimeInterval: 2)
        let ids = receiver.received.compactMap { try? JSONDecoder.tlsaudit.decode(Alert.self, from: $0.body).id }
        #expect(ids.count >= 2 && ids.count == Set(ids).count, "each alert delivered once: \(ids)")
        let delivered = try fleet.query("SELECT count(*) FROM alert_delivery WHERE sink = 'hook' AND state = 'delivered'")
        #expect(delivered.first?.first == "\(ids.count)", "the database counts as many deliveries as the receiver got: \(delivered)")

        Self.stop(Array(nodes.dropFirst()))
    }

    @Test("a node whose clock runs 10 minutes ahead does not take over alert deliveries another node holds: their leases are on the server's clock; each alert reaches the slow webhook once")
    func skewedClocks() throws {
        let fleet = try Fleet("fleet-skew")
        defer { fleet.postgres.stop() }
        let expired = try lab.expiredServer()
        defer { expired.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        receiver.respond(with: 200, delay: 4)
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: [("expired", expired.port)], interval: "1s", extra: """
            fleet: \(settings)
            \(Self.webhook(receiver, timeout: "10s"))
            """)
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        // The node on time raises the alerts and claims their deliveries (lease 30 + 10 x 10 s);
        // the first one is at the slow webhook when the node 10 minutes ahead starts.
        let onTime = try fleet.node("node-now", fleet: settings)
        onTime.wait("the first delivery at the webhook", timeout: 30) { !receiver.attempts.isEmpty }
        let ahead = try fleet.node("node-ahead", fleet: settings, clockAhead: "10m")
        try ahead.wait("the node ahead scanning", timeout: 30) { try fleet.scans().contains { $0.node == "node-ahead" } }
        let stamped = try fleet.scans().filter { $0.node == "node-ahead" }.map(\.startedAt).max() ?? 0
        #expect(stamped > Date().timeIntervalSince1970 + 500, "the node's clock really runs ahead (its scans are stamped \(stamped))")
        let raised = Int(try fleet.query("SELECT count(*) FROM alert_delivery WHERE sink = 'hook'").first?.first ?? "") ?? 0
        #expect(raised >= 2, "the expired target raised several alerts: \(raised)")
        onTime.wait("every alert delivered", timeout: 4.0 * Double(raised) + 10) { receiver.received.count >= raised }
        Thread.sleep(forTimeInterval: 5)
        let ids = receiver.attempts.compactMap { try? JSONDecoder.tlsaudit.decode(Alert.self, from: $0.body).id }
        #expect(ids.count == raised && Set(ids).count == raised, "each alert sent once, not taken over by the node ahead: \(ids)")
        #expect(ahead.lines(containing: "alert delivered").allSatisfy { $0.contains("sink=log") }, "the node ahead delivered nothing to the webhook")
        Self.stop([onTime, ahead])
    }

    @Test("a configuration applied while the nodes run: all three converge within seconds (NOTIFY, the poll is 10 s), the new target is scanned, a removed one is not")
    func configurationConverges() throws {
        let fleet = try Fleet("fleet-apply")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let settings = "{lease: 30s, poll: 10s}"
        let first = try fleet.fleetFile(targets: [("one", good.port), ("two", good.port)], interval: "1s", extra: "fleet: \(settings)")
        #expect(try Binary.run(["fleet", "apply", first]).status == 0)
        let nodes = try ["node-a", "node-b", "node-c"].map { try fleet.node($0, fleet: settings) }
        nodes[0].wait("every node on version 1", timeout: 30) {
            nodes.allSatisfy { !$0.lines(containing: "fleet configuration version 1 running").isEmpty }
        }
        try nodes[0].wait("both targets scanned") { Set(try fleet.scans().map(\.target)) == ["one", "two"] }

        let second = try fleet.fleetFile("fleet-2.yaml", targets: [("one", good.port), ("three", good.port)], interval: "1s",
                                         extra: "fleet: \(settings)")
        let appliedAt = Date()
        let applied = try Binary.run(["fleet", "apply", second])
        #expect(applied.status == 0 && applied.stdout.contains("version 2"), "\(applied.stdout)\(applied.stderr)")
        nodes[0].wait("every node on version 2", timeout: 8) {
            nodes.allSatisfy { !$0.lines(containing: "fleet configuration version 2 running").isEmpty }
        }
        let converged = Date().timeIntervalSince(appliedAt)
        #expect(converged < 5, "converged in \(converged) s: notified, not polled (poll 10 s)")
        let switched = Date().timeIntervalSince1970 + 0.5
        try nodes[0].wait("the new target scanned") { try fleet.scans().contains { $0.target == "three" } }
        Thread.sleep(forTimeInterval: 2)
        #expect(!(try fleet.scans()).contains { $0.target == "two" && $0.startedAt > switched }, "the removed target is no longer scanned")
        let status = try Binary.run(["fleet", "status", "--database", fleet.url, "--format", "json"])
        #expect(status.status == 0, "every node alive and on the newest version: \(status.stdout)")
        Self.stop(nodes)
    }

    @Test("PostgreSQL stopped for 30 s under three nodes and started again: they keep scanning, then store everything they logged as stored")
    func postgresDownUnderTheFleet() throws {
        let fleet = try Fleet("fleet-down")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: (1...6).map { ("t\($0)", good.port) }, interval: "1s", extra: "fleet: \(settings)")
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let nodes = try ["node-a", "node-b", "node-c"].map { try fleet.node($0, fleet: settings) }
        nodes[0].wait("all three nodes storing", timeout: 30) { nodes.allSatisfy { $0.storedScans.count >= 2 } }
        fleet.postgres.stop(removing: false)
        let downAt = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 30)
        try fleet.postgres.start()
        let upAt = Date().timeIntervalSince1970
        nodes[0].wait("every node stored again", timeout: 60) {
            nodes.allSatisfy { node in node.storedScans.contains { $0.startedAt > upAt } }
        }
        for node in nodes { node.signal(SIGTERM) }
        for node in nodes { #expect(node.waitForExit(timeout: 20) == 0, "\(node.log.suffix(1500))") }
        let logged = nodes.map(\.storedScans.count).reduce(0, +)
        let stored = try fleet.scans()
        #expect(stored.count == logged, "every scan logged as stored is in the database (logged \(logged), stored \(stored.count))")
        let duringOutage = stored.filter { $0.startedAt > downAt + 1 && $0.startedAt < upAt - 1 }
        #expect(duringOutage.count >= 20, "scanning went on while PostgreSQL was down: \(duringOutage.count) scans")
        // The nodes went on scanning what each claimed last: no target by two nodes at once.
        if let (target, gap) = Self.smallestGap(stored) {
            #expect(gap >= 0.8, "\(target) was scanned twice within \(gap) s (interval 1 s)")
        }
    }

    @Test("PostgreSQL stopped (-m immediate) for 25 s under a one-node and a two-node fleet, then started: each writer stores again within seconds, and no result is refused for a lost lease (none was taken by a newer result); everything logged as stored is there",
          arguments: [1, 2])
    func outageLosesNoResult(nodeCount: Int) throws {
        let fleet = try Fleet("fleet-outage-\(nodeCount)")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: (1...20).map { ("t\($0)", good.port) }, interval: "1s", extra: "fleet: \(settings)")
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let nodes = try (0..<nodeCount).map { try fleet.node("node-\($0)", fleet: settings) }
        nodes[0].wait("every node storing", timeout: 30) { nodes.allSatisfy { $0.storedScans.count >= 4 } }
        fleet.postgres.stop(removing: false)
        nodes[0].wait("the outage noticed") { nodes.allSatisfy { !$0.lines(containing: "cannot store scan results").isEmpty } }
        Thread.sleep(forTimeInterval: 25)
        try fleet.postgres.start()
        let upAt = Date()
        let resumed = nodes[0].wait("every writer storing again", timeout: 20) {
            nodes.allSatisfy { !$0.lines(containing: "storing works again").isEmpty }
        }
        let secondsToResume = Date().timeIntervalSince(upAt)
        #expect(resumed && secondsToResume < 8, "the writers stored again \(secondsToResume) s after PostgreSQL answered")
        Thread.sleep(forTimeInterval: 3)
        Self.stop(nodes)
        let refused = nodes.flatMap { $0.lines(containing: "its fleet lease was lost") }
        #expect(refused.isEmpty, "\(refused.count) results refused: \(refused.prefix(3))")
        let logged = nodes.map(\.storedScans.count).reduce(0, +)
        let stored = try fleet.scans()
        #expect(stored.count == logged, "every scan logged as stored is in the database (logged \(logged), stored \(stored.count))")
        #expect(logged >= 100, "\(logged) scans stored")
    }

    @Test("a primary and a hot standby (synchronous, then asynchronous replication), two nodes on a URL naming both with target_session_attrs=read-write; the primary stopped with -m immediate and the standby promoted: storing resumes within 10 s, one log line per node names the new server, every scan logged as stored is in the promoted database exactly once (synchronous), or what is missing is counted (asynchronous)",
          arguments: [true, false])
    func failover(synchronous: Bool) throws {
        let began = Date()
        func mark(_ what: String) { print("failover(\(synchronous)) \(String(format: "%.1f", Date().timeIntervalSince(began))) s: \(what)") }
        let fleet = try Fleet("fleet-failover-\(synchronous ? "sync" : "async")", standby: synchronous)
        defer { fleet.postgres.stop(); fleet.standby?.stop() }
        let standby = try #require(fleet.standby)
        let good = try lab.goodServer()
        defer { good.stop() }
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: (1...10).map { ("t\($0)", good.port) }, interval: "500ms", extra: "fleet: \(settings)")
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let checked = try Binary.run(["check-config", file])
        #expect(checked.status == 0, "check-config takes a URL naming two servers: \(checked.stdout)\(checked.stderr)")
        mark("clusters ready")
        // node-a serves the status page and the API: they must keep answering across the failover.
        let nodes = try ["node-a", "node-b"].map { try fleet.node($0, fleet: settings, extra: $0 == "node-a" ? "http: {listen: \"127.0.0.1:0\"}" : "") }
        nodes[0].wait("both nodes storing", timeout: 30) { nodes.allSatisfy { $0.storedScans.count >= 10 } }
        mark("nodes storing")
        let listener = try #require(ServiceHTTP.listening(nodes[0]).first)
        fleet.postgres.stop(removing: false)
        let downAt = Date()
        try standby.promote()
        let promotedAt = Date()
        let resumed = nodes[0].wait("both nodes storing on the promoted server", timeout: 30) {
            nodes.allSatisfy { node in node.storedScans.contains { $0.startedAt > promotedAt.timeIntervalSince1970 } }
        }
        let seconds = Date().timeIntervalSince(downAt)
        #expect(resumed && seconds < 10, "storing resumed \(seconds) s after the primary stopped")
        mark("resumed")
        for path in ["/api/v1/status", "/"] {
            #expect(try ServiceHTTP.fetch("http://\(listener)\(path)").status == 200, "\(path) answers after the failover")
        }
        // fleet status: the server that answered it, and the one each node's heartbeat reached.
        var status = ""
        nodes[0].wait("fleet status naming the promoted server for both nodes") {
            status = (try? Binary.run(["fleet", "status", "--database", fleet.url]).stdout) ?? ""
            return status.split(separator: "\n").filter { $0.hasPrefix("node-") && $0.contains("127.0.0.1:\(standby.port)") }.count == 2
        }
        #expect(status.contains("(answered by 127.0.0.1:\(standby.port), primary)"), "\(status)")
        Thread.sleep(forTimeInterval: 2)
        Self.stop(nodes)
        mark("stopped")
        for node in nodes {
            let switched = node.lines(containing: "PostgreSQL: now connected to 127.0.0.1:\(standby.port) (primary)")
            #expect(switched.count == 1, "one line for the failover: \(switched)")
            // Not an error storm: what failed while the primary was gone is said a few times, not per scan.
            let errors = node.log.split(separator: "\n").filter { $0.contains(" error ") || $0.contains(" critical ") }
            print("failover(\(synchronous)): \(errors.count) error lines in a node's log")
            #expect(errors.count <= 12, "\(errors.count) error lines: \(errors.prefix(12))")
        }
        // Read-only commands on the same URL, and on one that prefers a standby (none is left: the primary answers).
        let reading = fleet.url.replacingOccurrences(of: "target_session_attrs=read-write", with: "target_session_attrs=prefer-standby")
        for url in [fleet.url, reading] {
            let status = try Binary.run(["status", "--database", url, "--format", "json"])
            #expect(status.stdout.contains("\"t1\""), "status on \(url): \(status.stdout.prefix(300))\(status.stderr)")
            let report = try Binary.run(["report", "--database", url, "--since", "1h", "--format", "json"])
            #expect(report.status == 0, "report on \(url): \(report.stderr)")
        }
        // The promoted server's epoch sequence is past every epoch the primary handed out.
        let ahead = try standby.psql("""
            SELECT (SELECT last_value FROM fleet_lease_epoch) >= (SELECT max(greatest(coalesce(lease_epoch, 0), coalesce(done_epoch, 0))) FROM fleet_work)
            """)
        #expect(ahead.trimmingCharacters(in: .whitespacesAndNewlines) == "t")
        let logged = nodes.flatMap(\.storedScans)
        let twice = try standby.psql("SELECT count(*) FROM (SELECT 1 FROM scan GROUP BY target, address, started_at HAVING count(*) > 1) t")
        #expect(twice.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "no scan twice in the promoted database")
        var stored: [String: [Double]] = [:]
        for row in try standby.psql("SELECT target || ' ' || address || ' ' || started_at::text FROM scan").split(separator: "\n") {
            let parts = row.split(separator: " ")
            guard parts.count == 3, let time = Double(parts[2]) else { continue }
            stored["\(parts[0]) \(parts[1])", default: []].append(time)
        }
        // The log gives start times to the millisecond.
        let missing = logged.filter { scan in !(stored["\(scan.target) \(scan.address)"] ?? []).contains { abs($0 - scan.startedAt) < 0.001 } }
        if synchronous {
            #expect(missing.isEmpty, "\(missing.count) of \(logged.count) scans logged as stored are not in the promoted database")
        } else {
            // Asynchronous replication: what the standby had not received when the primary stopped is lost.
            let window = missing.map(\.startedAt).min().map { downAt.timeIntervalSince1970 - $0 } ?? 0
            print("asynchronous failover: \(missing.count) of \(logged.count) scans logged as stored are missing (started in the \(String(format: "%.2f", window)) s before the stop)")
            #expect(missing.count <= logged.count / 10, "\(missing.count) of \(logged.count) lost")
        }
    }

    @Test("two vantages see different certificates for one name (their DNS answers differ): one split-view alert naming what each saw; each vantage has its own status")
    func splitView() throws {
        let fleet = try Fleet("fleet-split")
        defer { fleet.postgres.stop() }
        // One name, two servers on one port: 127.0.0.2 answers with the genuine leaf, 127.0.0.3 with another key.
        let genuine = try LabTLSServer(LabServerConfiguration(chain: [lab.good, lab.intermediate], bindAddress: "127.0.0.2"))
        defer { genuine.stop() }
        let other = try lab.intermediate.issue(.server([ServiceLab.hostname]))
        let impostor = try LabTLSServer(LabServerConfiguration(chain: [other, lab.intermediate], bindAddress: "127.0.0.3", port: genuine.port))
        defer { impostor.stop() }
        let settings = "{lease: 5s, poll: 500ms}"
        let file = fleet.workspace.appendingPathComponent("fleet.yaml").path
        try (ServiceLab.shared.configuration(database: fleet.url, targets: [], interval: "1s", extra: "fleet: \(settings)")
            + "  - {host: split.tlsaudit.test, port: \(genuine.port), name: api, vantage: all, addresses: all}\n")
            .write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let europe = try fleet.node("node-eu", vantage: "eu", fleet: settings, hosts: "127.0.0.1 localhost\n127.0.0.2 split.tlsaudit.test\n")
        let america = try fleet.node("node-us", vantage: "us", fleet: settings, hosts: "127.0.0.1 localhost\n127.0.0.3 split.tlsaudit.test\n")
        try europe.wait("both vantages scanned twice", timeout: 30) {
            let scans = try fleet.scans()
            return scans.filter { $0.target == "api@eu" }.count >= 2 && scans.filter { $0.target == "api@us" }.count >= 2
        }
        Thread.sleep(forTimeInterval: 2)
        let alerts = try Binary.run(["alerts", "--database", fleet.url, "--format", "json"])
        let split = alerts.stdout.components(separatedBy: "\"kind\" : \"split-view\"").count - 1
        #expect(split == 1, "one split-view alert while the split lasts: \(alerts.stdout.prefix(3000))")
        #expect(try fleet.query("SELECT count(*) FROM alert WHERE kind = 'split-view'").first?.first == "1")
        let document = try fleet.query("SELECT document FROM alert WHERE kind = 'split-view'").first?.joined(separator: "|") ?? ""
        #expect(document.contains(lab.good.summary.sha256Fingerprint) && document.contains(other.summary.sha256Fingerprint),
                "names both leaves: \(document)")
        #expect(document.contains("\"vantage.eu\"") && document.contains("\"vantage.us\"") && document.contains("\"critical\""),
                "by vantage, critical (different keys): \(document)")
        let status = try Binary.run(["status", "--database", fleet.url])
        #expect(status.stdout.contains("api@eu") && status.stdout.contains("api@us"), "\(status.stdout)")
        let history = try Binary.run(["history", "api", "--database", fleet.url, "--format", "json"])
        #expect(history.stdout.contains("\"target\" : \"api@eu\"") && history.stdout.contains("\"target\" : \"api@us\""),
                "history of the configured key lists every vantage: \(history.stdout.prefix(1500))")
        let nodes = try fleet.query("SELECT DISTINCT target || ' ' || node || ' ' || vantage FROM scan ORDER BY 1").map { $0.joined() }
        #expect(nodes == ["api@eu node-eu eu", "api@us node-us us"], "results record the node and vantage: \(nodes)")
        Self.stop([europe, america])
    }

    @Test("a node held back by one host's cap claims again as each of its scans completes, not after a poll: 20 targets behind one host, per_host_concurrency 2, poll 10 s, all scanned within 5 s, never more than 2 leased or scanning at once")
    func reclaimOnCompletion() throws {
        let fleet = try Fleet("fleet-reclaim")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let settings = "{lease: 30s, poll: 10s}"
        // Every target has the lab's one host name.
        let file = try fleet.fleetFile(targets: (1...20).map { ("one-host-\($0)", good.port) }, interval: "1h",
                                       extra: "fleet: \(settings)", perHostConcurrency: 2)
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        _ = try fleet.query("UPDATE fleet_work SET next_due = 0") // all due now, not spread over the first 10 s

        // Every 20 ms: the leases in flight (the cap is counted against them, fleet-wide).
        let sampling = Atomic(true)
        let mostLeased = Atomic(0)
        let sampler = Thread {
            while sampling.load(ordering: .relaxed) {
                let leased = (try? fleet.query("SELECT count(*) FROM fleet_work WHERE lease_until >= extract(epoch FROM now())"))?
                    .first?.first.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
                mostLeased.max(leased, ordering: .relaxed)
                Thread.sleep(forTimeInterval: 0.02)
            }
        }
        sampler.start()
        let node = try fleet.node("node-a", fleet: settings)
        try node.wait("all 20 targets scanned", timeout: 30) { try fleet.scans().count >= 20 }
        sampling.store(false, ordering: .relaxed)
        Self.stop([node])

        let started = try fleet.scans().map(\.startedAt)
        let span = (started.max() ?? 0) - (started.min() ?? 0)
        #expect(started.count == 20 && span < 5, "\(started.count) scans in \(span) s: claimed again on completion, not per poll (10 s)")
        #expect(mostLeased.load(ordering: .relaxed) <= 2, "at most 2 leases at once on the host: \(mostLeased.load(ordering: .relaxed))")
        // The probes themselves: never more than 2 running at once (each from its start for its duration).
        let probes = try fleet.query("SELECT started_at, duration_ms FROM observation").compactMap { row -> (Double, Double)? in
            guard row.count == 2, let start = Double(row[0]), let milliseconds = Double(row[1]) else { return nil }
            return (start, start + milliseconds / 1000)
        }
        let mostAtOnce = probes.map { probe in probes.filter { $0.0 <= probe.0 && probe.0 < $0.1 }.count }.max() ?? 0
        #expect(mostAtOnce <= 2, "at most 2 scans of the host at once: \(mostAtOnce)")
    }

    @Test("a scheduled report is written and sent by exactly one of three nodes")
    func reportOnce() throws {
        let fleet = try Fleet("fleet-report")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: [("one", good.port), ("two", good.port)], interval: "1s", extra: """
            fleet: \(settings)
            \(Self.webhook(receiver, path: "/reports"))
            reports:
              - name: fleet-daily
                schedule: daily
                at: "\(ServiceLab.timeOfDay(10))"
                timezone: UTC
                since: 1h
                formats: [json]
                directory: \(fleet.workspace.path)/reports
                sinks: [hook]
            """)
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let nodes = try ["node-a", "node-b", "node-c"].map { try fleet.node($0, fleet: settings) }
        nodes[0].wait("the report at the webhook", timeout: 30) {
            receiver.received.contains { $0.headers["x-tlsaudit-report-id"] != nil }
        }
        Thread.sleep(forTimeInterval: 3)
        #expect(receiver.received.filter { $0.headers["x-tlsaudit-report-id"] != nil }.count == 1, "sent once")
        #expect(nodes.map { $0.lines(containing: "scheduled report written").count }.reduce(0, +) == 1, "written by one node")
        #expect(try fleet.query("SELECT count(*) FROM report_run").first?.first == "1")
        Self.stop(nodes)
    }
}

/// The CT follower in a fleet: each log followed by one node.
extension FleetTests {
    @Test("ct: follow in a fleet: each log is followed by the one node that claims it (one alert per certificate, never two); the node killed with SIGKILL hands its logs over when its lease lapses, and the other goes on from the stored position")
    func ctLogsLeased() throws {
        let fleet = try Fleet("fleet-ct")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let logs = try ["Lab Log fleet A", "Lab Log fleet B"].map { name in try LabCTLogServer(try LabCTLog(name, operator: "lab")) }
        defer { for log in logs { log.stop() } }
        let listFile = fleet.workspace.appendingPathComponent("logs.json")
        let list: [String: Any] = ["version": "lab", "log_list_timestamp": "2026-11-01T00:00:00Z",
                                   "operators": [["name": "lab", "email": ["ct@lab.test"], "logs": logs.map { $0.log.listEntry(url: $0.url) }]]]
        try JSONSerialization.data(withJSONObject: list).write(to: listFile)
        // Every certificate for a name under tlsaudit.test is unexpected: one alert each, whichever node reads it.
        for (index, log) in logs.enumerated() {
            log.add(try lab.intermediate.issue(.server(["first-\(index).tlsaudit.test"])), chain: [lab.intermediate])
            log.publish()
        }
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: [("good", good.port)], interval: "5s", extra: """
            fleet: \(settings)
            ct: {log_list: \(listFile.path), follow: true, start: beginning, poll: 1s, watch: [{domain: tlsaudit.test, issuers: [nobody]}]}
            """)
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let nodes = try ["node-a", "node-b"].map { try fleet.node($0, fleet: settings, extra: "ct: {log_list: \(listFile.path)}") }
        func alertCount() -> Int {
            Int((try? fleet.query("SELECT count(*) FROM alert WHERE kind = 'ct.unexpected-issuer'"))?.first?.first ?? "") ?? 0
        }
        nodes[0].wait("both logs read", timeout: 30) { alertCount() == 2 }
        let owners = try fleet.query("SELECT log_id, owner FROM ct_log ORDER BY log_id")
        #expect(owners.count == 2 && owners.allSatisfy { $0.count == 2 && ["node-a", "node-b"].contains($0[1]) }, "\(owners)")
        for log in logs {
            let followers = nodes.filter { !$0.lines(containing: "this node follows \(log.log.description)").isEmpty }
            #expect(followers.count == 1, "\(log.log.description): one follower")
        }
        Thread.sleep(forTimeInterval: 2)
        #expect(alertCount() == 2, "never two alerts for one certificate")

        // The holder of log A dies; what log A takes next is read by the other node after the lease (25 s at least).
        let ownerA = try #require(owners.first { $0[0] == logs[0].log.id }?[1])
        let dying = ownerA == "node-a" ? nodes[0] : nodes[1]
        let survivor = ownerA == "node-a" ? nodes[1] : nodes[0]
        kill(dying.pid, SIGKILL)
        _ = dying.waitForExit(timeout: 10)
        logs[0].add(try lab.intermediate.issue(.server(["after-kill.tlsaudit.test"])), chain: [lab.intermediate])
        logs[0].publish()
        survivor.wait("log A taken over", timeout: 60) { alertCount() == 3 }
        #expect(!survivor.lines(containing: "this node follows \(logs[0].log.description)").isEmpty)
        #expect(try fleet.query("SELECT owner FROM ct_log WHERE log_id = '\(logs[0].log.id)'").first?.first == (ownerA == "node-a" ? "node-b" : "node-a"))
        Self.stop([survivor])
    }
}

/// A node's identity and a node paused past its leases.
extension FleetTests {
    @Test("a second node under a live node's name is refused (exit 2, naming the other's host and start); --replace-node takes the name over and the other stops; a node restarted after a crash on the same host starts")
    func twinNames() throws {
        let fleet = try Fleet("fleet-twins")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        let settings = "{lease: 5s, poll: 500ms}"
        let file = try fleet.fleetFile(targets: [("good-1", good.port), ("good-2", good.port)], interval: "1s", extra: "fleet: \(settings)")
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let first = try fleet.node("node-a", fleet: settings)
        first.wait("scans stored") { first.storedScans.count >= 2 }

        let twin = try fleet.node("node-a", fleet: settings)
        #expect(twin.waitForExit(timeout: 20) == 2, "\(twin.log.suffix(2000))")
        let refusal = twin.lines(containing: "another node named node-a is alive").joined()
        #expect(refusal.contains("pid \(first.pid)") && refusal.contains("started"), "\(twin.log.suffix(2000))")
        #expect(twin.storedScans.isEmpty)
        #expect(first.process.isRunning)
        let status = try Binary.run(["fleet", "status", "--database", fleet.url, "--format", "json"])
        let nodes = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])["nodes"] as? [[String: Any]]
        #expect(nodes?.filter { $0["name"] as? String == "node-a" }.count == 1, "\(status.stdout)")

        let replacement = try fleet.node("node-a", fleet: settings, extraArguments: ["--replace-node"])
        #expect(first.waitForExit(timeout: 20) == 2, "\(first.log.suffix(2000))")
        #expect(!first.lines(containing: "was taken over").isEmpty)
        let before = replacement.storedScans.count
        replacement.wait("the replacement scanning") { replacement.storedScans.count >= before + 2 }

        replacement.signal(SIGKILL)
        _ = replacement.waitForExit(timeout: 10)
        let restarted = try fleet.node("node-a", fleet: settings)
        restarted.wait("the restarted node scanning", timeout: 30) { restarted.storedScans.count >= 2 }
        Self.stop([restarted])
    }

    @Test("a node paused (SIGSTOP) past its leases, three times, with scans in flight: its late results are not stored, its targets' state never moves back in time, everything logged as stored is there")
    func pausedNode() throws {
        let fleet = try Fleet("fleet-pause")
        defer { fleet.postgres.stop() }
        let good = try lab.goodServer()
        defer { good.stop() }
        // Tarpits keep scans in flight for the whole timeout (2 s): a pause always finds some.
        let tarpits = try (0..<4).map { _ in try LabHostileServer(.tarpit) }
        defer { tarpits.forEach { $0.stop() } }
        let settings = "{lease: 5s, poll: 500ms}"
        let targets = (1...6).map { ("good-\($0)", good.port) } + tarpits.enumerated().map { ("slow-\($0.offset)", $0.element.port) }
        let file = try fleet.fleetFile(targets: targets, interval: "1s", extra: "fleet: \(settings)")
        #expect(try Binary.run(["fleet", "apply", file]).status == 0)
        let paused = try fleet.node("node-a", fleet: settings)
        let other = try fleet.node("node-b", fleet: settings)
        paused.wait("both nodes scanning", timeout: 30) { paused.storedScans.count >= 4 && other.storedScans.count >= 4 }

        // Every 200 ms: each address's last_scan_at, which must never go back.
        let sampling = Atomic(true)
        let regressions = Mutex<[String]>([])
        let sampler = Thread {
            var latest: [String: Double] = [:]
            while sampling.load(ordering: .relaxed) {
                for row in (try? fleet.query("SELECT target, address, last_scan_at FROM target_state")) ?? [] where row.count == 3 {
                    guard let time = Double(row[2]) else { continue }
                    let key = row[0] + " " + row[1]
                    if let seen = latest[key], time < seen - 0.000_5 {
                        regressions.withLock { $0.append("\(key): \(seen) -> \(time)") }
                    }
                    latest[key] = max(latest[key] ?? 0, time)
                }
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
        sampler.start()
        var pausesWithSlowScan = 0
        for _ in 0..<3 {
            // Pause while the node holds a tarpit's lease (a scan that stays in flight for 2 s): which
            // node claims which due scan is a race, and on a loaded machine one node may win all the
            // tarpits for a while; without this wait a pause could find only millisecond scans.
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                let held = (try? fleet.query("SELECT count(*) FROM fleet_work WHERE lease_owner = 'node-a' AND target LIKE 'slow-%' AND lease_until > extract(epoch FROM now())")) ?? []
                if let count = held.first?.first.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }), count > 0 {
                    pausesWithSlowScan += 1
                    break
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            paused.signal(SIGSTOP)
            // The lease (5 s) runs out, the other node claims the targets and stores its scans of
            // them (2 s each against a tarpit), and scans them again: the paused node's results,
            // started before the pause, are older than all of that when it wakes.
            Thread.sleep(forTimeInterval: 12)
            paused.signal(SIGCONT)
            Thread.sleep(forTimeInterval: 4)
        }
        sampling.store(false, ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.5)
        Self.stop([paused, other])

        #expect(regressions.withLock { $0 }.isEmpty, "last_scan_at went back: \(regressions.withLock { $0 }.prefix(10))")
        #expect(pausesWithSlowScan > 0, "the paused node never held a tarpit's lease in 20 s before a pause")
        let lostLines = paused.lines(containing: "its fleet lease was lost")
        #expect(!lostLines.isEmpty, "the paused node's late results were refused: \(paused.log.suffix(3000))")
        let stored = try fleet.scans()
        func isStored(_ target: String, _ time: Double) -> Bool { stored.contains { $0.target == target && abs($0.startedAt - time) < 0.001 } }
        for node in [paused, other] {
            let missing = node.storedScans.filter { !isStored($0.target, $0.startedAt) }
            #expect(missing.isEmpty, "\(missing.count) scans logged as stored are missing")
        }
        for line in lostLines {
            func value(_ key: String) -> String? {
                line.range(of: "\(key)=").map { String(line[$0.upperBound...].prefix { $0 != " " }) }
            }
            if let target = value("target"), let time = value("started_at").flatMap(Timestamp.parse)?.timeIntervalSince1970 {
                #expect(!isStored(target, time), "a result refused for its lost lease was stored: \(line)")
            }
        }
    }
}
