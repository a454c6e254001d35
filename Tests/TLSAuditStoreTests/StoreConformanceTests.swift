import Foundation
import GRDB
import Synchronization
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditPostgres
import TLSAuditReport
import TLSAuditProbe
import TLSAuditService
import TLSAuditStore
import TLSAuditSQLite

/// What every `ScanStore` backend must do, written against the protocol only: a backend is a
/// function that opens (creating when needed) the store at a location. SQLite runs it here; the
/// next backend runs the same suite with its own `Backend`.
struct StoreConformance {
    /// Opens the store at `location` (a fresh location gives an empty store).
    let open: @Sendable (_ location: String) throws -> any ScanStore
    /// A fresh location.
    let newLocation: @Sendable () throws -> String

    /// Real scan results, from real handshakes with a lab server: the facts a store keeps.
    static let samples: [AddressScanResult] = {
        let pki = try! LabCertificateAuthority.selfSigned(.authority("conformance root"))
        let intermediate = try! pki.issue(.authority("conformance intermediate"))
        let leaf = try! intermediate.issue(.server(["conformance.tlsaudit.test"]))
        let rootFile = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-root-\(getpid()).pem").path
        try! pki.pem.write(toFile: rootFile, atomically: true, encoding: .utf8)
        let server = try! LabTLSServer(LabServerConfiguration(chain: [leaf, intermediate]))
        defer { server.stop() }
        let scanner = try! TLSScanner(options: ScanOptions(timeout: 5, trustStore: try! TrustStore(caFile: rootFile)), judge: AddressAssessment.judge)
        var target = ScanTarget(original: "t", host: "conformance.tlsaudit.test", port: server.port, sni: "conformance.tlsaudit.test",
                                connectTo: [ConnectAddress(host: "127.0.0.1")])
        target.checks = [.inventory, .vulnerabilities]
        let good = scanner.scan(target).addresses[0]
        let refused = scanner.scan(ScanTarget(original: "t", host: "conformance.tlsaudit.test", port: try! LabPorts.unusedPort(),
                                              sni: nil, connectTo: [ConnectAddress(host: "127.0.0.1")])).addresses[0]
        return [good, refused]
    }()

    /// `count` scans of target `target`, a minute apart from `start`, alternating a good scan and a refused one.
    func scans(_ count: Int, target: String = "t", address: String = "127.0.0.1", from start: Date) -> [StoredScan] {
        (0..<count).map { index in
            var result = Self.samples[index % 2]
            result.address = address
            result.startedAt = start.addingTimeInterval(Double(index) * 60)
            return StoredScan(target: target, host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result)
        }
    }

    let decide = AlertSettings.decision(nil)

    func durability() throws {
        let location = try newLocation()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        do {
            let store = try open(location)
            _ = try store.record(scans(10, from: start), decide: decide)
        }
        let reopened = try open(location)
        let history = try reopened.history(target: "t", limit: 100)
        #expect(history.count == 10)
        #expect(history.first?.startedAt == start.addingTimeInterval(540))
        let status = try #require(try reopened.status().first)
        #expect(status.status == .failed, "the latest scan (the tenth, refused) is the current state")
        let result = try #require(try reopened.result(observationID: status.lastObservationID))
        #expect(result.status == .failed)
        let good = try #require(try reopened.result(observationID: history[1].observationID))
        #expect(good.handshake == Self.samples[0].handshake)
        #expect(good.chain?.presented.map(\.der) == Self.samples[0].chain?.presented.map(\.der))
        #expect(good.findings == Self.samples[0].findings)
        #expect(good.inventory != nil && good.inventory == Self.samples[0].inventory, "the configuration inventory is kept with the scan")
        #expect(good.vulnerabilities != nil && good.vulnerabilities == Self.samples[0].vulnerabilities, "the vulnerability report is kept with the scan")
        #expect(good.handshake?.certificateTransparency != nil, "the CT report is kept with the handshake")
        #expect(good.chain?.anchorIn == [], "an operator's own anchor is kept as such")
        // A chain anchored in a public root (whichever store judged it) keeps that fact for reports that judge history again.
        var publicScan = scans(1, target: "p", from: start)[0]
        publicScan.result.chain?.anchorIn = ["apple", "system"]
        _ = try reopened.record([publicScan], decide: decide)
        let stored = try #require(try reopened.history(target: "p", limit: 1).first)
        #expect(try reopened.result(observationID: stored.observationID)?.chain?.anchorIn == ["apple", "system"])
    }

    /// A target's tags and an app outcome, as the service stores them.
    static let appOutcome = AppHostOutcome(bundle: "com.example.shop", entry: "conformance.tlsaudit.test",
                                           reliesOn: ["NSExceptionMinimumTLSVersion"], configuration: "ats-tls12", connects: true,
                                           reasons: [], detail: "TLS 1.2 as the app's client")

    func tagsAndApp() throws {
        let location = try newLocation()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        do {
            var tagged = scans(1, target: "shop", from: start)[0]
            tagged.tags = ["app:com.example.shop", "prod"]
            tagged.result.app = Self.appOutcome
            _ = try open(location).record([tagged] + scans(1, target: "plain", from: start), decide: decide)
        }
        let store = try open(location)
        let rows = try store.status()
        let shop = try #require(rows.first { $0.target == "shop" })
        #expect(shop.tags == ["app:com.example.shop", "prod"])
        #expect(shop.app == Self.appOutcome)
        let plain = try #require(rows.first { $0.target == "plain" })
        #expect(plain.tags.isEmpty && plain.app == nil)
        // One target's rows, read by its key (its page): exactly the status rows of that key.
        #expect(try store.status(of: "shop") == rows.filter { $0.target == "shop" })
        #expect(try store.status(of: "sho").isEmpty && store.status(of: "shop@eu").isEmpty)
        // The result read back carries the app outcome (re-judging and reports see it).
        #expect(try store.result(observationID: shop.lastObservationID)?.app == Self.appOutcome)
        #expect(try store.result(observationID: plain.lastObservationID)?.app == nil)
        // Reports read both from their facts, and --tag keeps only the tagged target.
        var query = ReportBuilder.query(end: start.addingTimeInterval(60), since: 3_600, policy: nil, targets: nil)
        query.tags = ["app:com.example.shop"]
        let data = try ReportData.read(query, from: store, rejudge: AddressAssessment.rejudge)
        #expect(data.addresses.map(\.target) == ["shop"])
        #expect(data.addresses.first?.tags == ["app:com.example.shop", "prod"] && data.addresses.first?.app == Self.appOutcome)
        // The next scan's tags and outcome replace the current state's.
        var next = scans(1, target: "shop", from: start.addingTimeInterval(120))[0]
        next.tags = ["staging"]
        _ = try store.record([next], decide: decide)
        let replaced = try #require(try store.status().first { $0.target == "shop" })
        #expect(replaced.tags == ["staging"] && replaced.app == nil)
    }

    func atomicBatchesBesideAReader() throws {
        let location = try newLocation()
        let store = try open(location)
        let reader = try open(location)
        let done = Atomic<Bool>(false)
        let seen = Mutex<Set<Int>>([])
        let thread = Thread {
            while !done.load(ordering: .relaxed) {
                // Identical scans make runs: their scans are counted.
                if let count = try? Self.scanCount(reader.history(target: "batched", limit: 10_000)) {
                    seen.withLock { _ = $0.insert(count) }
                }
            }
        }
        thread.start()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for batch in 0..<20 {
            _ = try store.record(scans(25, target: "batched", from: start.addingTimeInterval(Double(batch) * 25 * 60)), decide: decide)
        }
        done.store(true, ordering: .relaxed)
        while thread.isExecuting { Thread.sleep(forTimeInterval: 0.01) }
        let counts = seen.withLock { $0 }
        #expect(counts.allSatisfy { $0 % 25 == 0 }, "a reader saw part of a batch: \(counts.sorted())")
        #expect(counts.count > 1, "the reader read while the writer wrote")
        #expect(try Self.scanCount(reader.history(target: "batched", limit: 10_000)) == 500)
    }

    /// 200 addresses scanned 11 times, the same each time but for the duration, in batches of 64.
    func unchangedRounds(_ rounds: ClosedRange<Int>, from start: Date) -> [[StoredScan]] {
        let scans = rounds.flatMap { round in
            (0..<200).map { index in
                var result = Self.samples[0]
                result.startedAt = start.addingTimeInterval(Double(round) * 120 + Double(index) / 10)
                result.durationMs = 10 + round
                return StoredScan(target: "u\(index)", host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result)
            }
        }
        return stride(from: 0, to: scans.count, by: 64).map { Array(scans[$0..<min($0 + 64, scans.count)]) }
    }

    /// An unchanged scan extends its address's run (one observation; the run's count, last time
    /// and durations) and adds a few bytes at most; a change opens a new run; reports count every scan.
    func unchangedScans(size: (String) throws -> Int) throws -> Double {
        let location = try newLocation()
        let store = try open(location)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for batch in unchangedRounds(0...0, from: start) { _ = try store.record(batch, decide: decide) }
        let before = try size(location)
        for batch in unchangedRounds(1...10, from: start) { _ = try store.record(batch, decide: decide) }
        let perScan = Double(try size(location) - before) / 2_000
        #expect(perScan <= 300, "\(perScan) bytes per unchanged scan")
        let history = try store.history(target: "u7", limit: 10)
        #expect(history.count == 1)
        let run = try #require(history.first?.run)
        #expect(run.scans == 11 && run.lastSeenAt == start.addingTimeInterval(1_200.7))
        #expect(history.first?.startedAt == start.addingTimeInterval(0.7) && history.first?.durationMs == 10)
        #expect(run.durationMinMs == 10 && run.durationMaxMs == 20 && run.durationMeanMs == 15)
        // A period that starts and ends inside the runs counts the scans within it: rounds 3, 4 and 5.
        let query = ReportBuilder.query(end: start.addingTimeInterval(650), since: 300, policy: nil, targets: nil)
        let report = ReportBuilder.build(try ReportData.read(query, from: store, rejudge: AddressAssessment.rejudge))
        #expect(report.summary.scans == 600 && report.summary.failedScans == 0)
        // The last scan at or before the report's end, inside the run.
        #expect(report.targets.first { $0.target == "u7" }?.addresses.first?.lastScanAt == start.addingTimeInterval(600.7))
        // A change opens a new run; the same content again after it is a third.
        var changed = unchangedRounds(11...12, from: start).joined().filter { $0.target == "u7" }
        changed[0].result = Self.samples[1]
        changed[0].result.startedAt = start.addingTimeInterval(11 * 120)
        _ = try store.record(changed, decide: decide)
        #expect(try store.history(target: "u7", limit: 10).map { $0.run?.scans ?? 1 } == [1, 1, 11])
        return perScan
    }

    /// A late scan with another verdict inside a run: the timeline turns at the late scan and back
    /// at the run's next repeat, as if every scan had been stored in order.
    func lateScanInsideARun() throws {
        let store = try open(try newLocation())
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        func scan(_ sample: Int, at seconds: Double) -> StoredScan {
            var result = Self.samples[sample]
            result.startedAt = start.addingTimeInterval(seconds)
            return StoredScan(target: "late", host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result)
        }
        _ = try store.record([0.0, 60, 120, 180].map { scan(0, at: $0) }, decide: decide)
        _ = try store.record([scan(1, at: 90)], decide: decide)
        let changes = try store.readReportFacts { reader in
            var changes: [(Double, AddressCondition)] = []
            try reader.forEachVerdictChange(after: start.addingTimeInterval(-1), through: start.addingTimeInterval(300)) {
                changes.append(($0.at.timeIntervalSince(start), $0.condition))
            }
            return changes
        }
        #expect(changes.map(\.0) == [0, 90, 120] && changes.map(\.1) == [changes[0].1, .unreachable, changes[0].1], "\(changes)")
        #expect(try store.status().first?.lastScanAt == start.addingTimeInterval(180), "the late scan is history only")
    }

    /// Scans taken while the wall clock stood a day behind the address's newest scan (stepped
    /// back; the scheduler marks them): history lists them after that scan, in the order they were
    /// taken, a run of them stays one run, and the timeline turns at each change, as if the clock
    /// had not moved.
    func clockStepBackHistory() throws {
        let store = try open(try newLocation())
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        func scan(_ sample: Int, at seconds: Double, stepBack: Bool = false) -> StoredScan {
            var result = Self.samples[sample]
            result.startedAt = start.addingTimeInterval(seconds)
            var scan = StoredScan(target: "stepped", host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result)
            scan.afterClockStepBack = stepBack
            return scan
        }
        let day = 86_400.0
        _ = try store.record([day, day + 60, day + 120].map { scan(0, at: $0) }, decide: decide)
        // The clock steps back a day: the server stops answering for two scans, then answers again.
        _ = try store.record([scan(1, at: 0, stepBack: true)], decide: decide)
        _ = try store.record([scan(1, at: 60, stepBack: true), scan(0, at: 120, stepBack: true)], decide: decide)
        let history = try store.history(target: "stepped", limit: 10)
        let shown = history.map { "\($0.status.rawValue) x\($0.run?.scans ?? 1) at \(Int($0.startedAt.timeIntervalSince(start)))" }
        #expect(shown == ["completed x1 at 120", "failed x2 at 0", "completed x3 at 86400"], "newest first: \(shown)")
        let status = try store.status()
        #expect(status.count == 1 && status.first?.status == .completed && status.first?.lastObservationID == history.first?.observationID,
                "the state is the newest observation: \(status)")
        // One timeline row per turn (completed, unreachable, completed): the newest is found by the
        // order of observation, so the return to the day-ahead verdict is a turn of its own.
        let changes = try store.readReportFacts { reader in
            var changes: [(Double, AddressCondition)] = []
            try reader.forEachVerdictChange(after: start.addingTimeInterval(-1), through: start.addingTimeInterval(2 * day)) {
                changes.append(($0.at.timeIntervalSince(start), $0.condition))
            }
            return changes
        }
        #expect(changes.count == 3 && changes.filter { $0.1 == .unreachable }.map(\.0) == [0], "\(changes)")
        // A scan of the same verdict after the turn back extends that run, and is no new turn.
        _ = try store.record([scan(0, at: 180, stepBack: true)], decide: decide)
        let after = try store.history(target: "stepped", limit: 10)
        #expect(after.map { $0.run?.scans ?? 1 } == [2, 2, 3], "\(after.map { $0.run?.scans ?? 1 })")
    }

    /// The scans a history shows, a run's scans each.
    static func scanCount(_ entries: [HistoryEntry]) -> Int { entries.reduce(0) { $0 + ($1.run?.scans ?? 1) } }

    /// The alert outbox: an alert is stored once; a claim moves its delivery out of reach for the
    /// lease and raises its epoch; a node holding an older claim can neither record nor release;
    /// a failure is retried at its time; a delivered alert is due no more.
    func alertOutbox() throws {
        let store = try open(try newLocation())
        let now = Date()
        let alert = Alert(id: "conformance-1", kind: .pinMismatch, severity: .critical, target: "t", host: "t.test", port: 443,
                          address: "127.0.0.1", createdAt: now.addingTimeInterval(-5), summary: "pin mismatch", changes: [:])
        #expect(try store.recordAlert(alert, sinks: ["hook", "mail"]))
        #expect(try !store.recordAlert(alert, sinks: ["hook"]), "the same id twice is stored once")
        #expect(try store.pendingDeliveries(dueBy: now, sinks: ["hook", "mail", "gone"], limit: 10).map(\.sink).sorted() == ["hook", "mail"])
        #expect(try store.pendingDeliveries(dueBy: now, sinks: [], limit: 10).isEmpty)

        let first = try store.claimDeliveries(dueBy: now, sinks: ["hook"], limit: 10, lease: 60)
        #expect(first.map(\.sink) == ["hook"])
        #expect(try store.stillHolds(first[0]))
        #expect(try store.claimDeliveries(dueBy: now, sinks: ["hook"], limit: 10, lease: 60).isEmpty, "claimed: out of reach for the lease")
        // The lease ran out (the node paused): another claim takes it, with a newer epoch.
        let later = now.addingTimeInterval(120)
        let second = try store.claimDeliveries(dueBy: later, sinks: ["hook"], limit: 10, lease: 60)
        #expect(second.count == 1 && second[0].leaseEpoch > first[0].leaseEpoch)
        #expect(try !store.stillHolds(first[0]), "an older claim no longer holds")
        try store.markDelivered(alertID: alert.id, sink: "hook", at: later, leaseEpoch: first[0].leaseEpoch)
        try store.releaseDeliveries(first, dueAt: now)
        #expect(try store.alerts(limit: 10).first?.deliveries.first { $0.sink == "hook" }?.state == .pending,
                "the stale claim recorded nothing")
        // The newest claim fails once, then delivers.
        try store.markFailed(alertID: alert.id, sink: "hook", error: "refused", retryAt: later.addingTimeInterval(30),
                             leaseEpoch: second[0].leaseEpoch)
        #expect(try store.pendingDeliveries(dueBy: later, sinks: ["hook"], limit: 10).isEmpty)
        let retry = try store.pendingDeliveries(dueBy: later.addingTimeInterval(31), sinks: ["hook"], limit: 10)
        #expect(retry.map(\.attempts) == [1])
        try store.markDelivered(alertID: alert.id, sink: "hook", at: later.addingTimeInterval(31))
        let stored = try #require(try store.alerts(limit: 10).first)
        #expect(stored.alert.id == alert.id)
        #expect(stored.deliveries.map(\.sink) == ["hook", "mail"])
        #expect(stored.deliveries.map(\.state) == [.delivered, .pending])
        #expect(stored.deliveries[0].attempts == 2 && stored.deliveries[0].lastError == nil)
        #expect(try store.pendingDeliveries(dueBy: later.addingTimeInterval(3600), sinks: ["hook"], limit: 10).isEmpty)
        // One target's alerts (its page), newest first, the others' left out.
        var other = alert
        other.id = "conformance-2"
        other.target = "u"
        #expect(try store.recordAlert(other, sinks: []))
        #expect(try store.alerts(of: "t", limit: 10).map(\.alert.id) == [alert.id])
        #expect(try store.alerts(of: "u", limit: 10).map(\.alert.id) == [other.id])
        #expect(try store.alerts(of: "t", limit: 10).first?.deliveries == stored.deliveries)
        #expect(try store.alerts(of: "nobody", limit: 10).isEmpty && store.alerts(limit: 10).count == 2)
    }

    /// Scheduled report runs: one claim at a time per run (its owner may ask again), a recorded
    /// run is written for everyone, a record under a claim that is no longer the run's is refused.
    func reportRuns() throws {
        let store = try open(try newLocation())
        let end = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(try store.lastReportRun(name: "weekly") == nil)
        guard case .claimed(let epoch) = try store.claimReportRun(name: "weekly", periodEnd: end, owner: "node-a", lease: 60) else {
            Issue.record("the first claim is the caller's")
            return
        }
        #expect(try store.holdsReportRun(name: "weekly", periodEnd: end, owner: "node-a", epoch: epoch))
        #expect(try store.claimReportRun(name: "weekly", periodEnd: end, owner: "node-b", lease: 60) == .heldByAnother("node-a"))
        guard case .claimed(let again) = try store.claimReportRun(name: "weekly", periodEnd: end, owner: "node-a", lease: 60) else {
            Issue.record("the owner may claim again")
            return
        }
        #expect(again > epoch)
        #expect(try !store.holdsReportRun(name: "weekly", periodEnd: end, owner: "node-a", epoch: epoch), "the older claim is gone")
        #expect(try !store.recordReportRun(name: "weekly", periodEnd: end, files: ["a.json"], delivery: [:], claim: ("node-a", epoch)))
        #expect(try store.lastReportRun(name: "weekly") == nil)
        #expect(try store.recordReportRun(name: "weekly", periodEnd: end, files: ["a.json"], delivery: ["hook": .delivered],
                                          claim: ("node-a", again)))
        #expect(try store.lastReportRun(name: "weekly") == end)
        #expect(try store.claimReportRun(name: "weekly", periodEnd: end, owner: "node-b", lease: 60) == .written)
        // Another period is claimed apart; a lease that ran out is taken over.
        let next = end.addingTimeInterval(7 * 86400)
        guard case .claimed = try store.claimReportRun(name: "weekly", periodEnd: next, owner: "node-b", lease: -1) else {
            Issue.record("another period is free")
            return
        }
        guard case .claimed = try store.claimReportRun(name: "weekly", periodEnd: next, owner: "node-a", lease: 60) else {
            Issue.record("an expired lease is taken over")
            return
        }
        try store.recordReportRun(name: "weekly", periodEnd: next, files: [], delivery: [:])
        #expect(try store.lastReportRun(name: "weekly") == next)
    }

    /// Revocation answers: read back until they expire, replaced by a newer one, expired ones dropped.
    func revocationAnswers() throws {
        let store = try open(try newLocation())
        let now = Date()
        try store.saveRevocationAnswer([0x30, 0x03, 0x0A, 0x01, 0x00], for: "ocsp http://ocsp.test/ abc", expires: now.addingTimeInterval(3600))
        let answer = try #require(try store.revocationAnswer(for: "ocsp http://ocsp.test/ abc", at: now))
        #expect(answer.body == [0x30, 0x03, 0x0A, 0x01, 0x00])
        #expect(abs(answer.expires.timeIntervalSince(now.addingTimeInterval(3600))) < 0.001)
        #expect(try store.revocationAnswer(for: "ocsp http://ocsp.test/ abc", at: now.addingTimeInterval(3601)) == nil)
        #expect(try store.revocationAnswer(for: "crl http://crl.test/", at: now) == nil)
        try store.saveRevocationAnswer([0xFF], for: "ocsp http://ocsp.test/ abc", expires: now.addingTimeInterval(7200))
        #expect(try store.revocationAnswer(for: "ocsp http://ocsp.test/ abc", at: now.addingTimeInterval(3601))?.body == [0xFF])
    }

    func retention() throws {
        let store = try open(try newLocation())
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        _ = try store.record(scans(6, target: "old", from: start), decide: decide)
        _ = try store.record(scans(4, target: "new", from: start.addingTimeInterval(86_400)), decide: decide)
        let pruned = try store.prune(olderThan: start.addingTimeInterval(3_600))
        #expect(pruned.observations == 5, "every old scan but the address's latest")
        #expect(try store.history(target: "old", limit: 100).count == 1)
        #expect(try store.history(target: "new", limit: 100).count == 4)
        #expect(try store.status().count == 2)
    }

    func streaming(rows: Int, fill: (String) throws -> Void) throws {
        let location = try newLocation()
        let store = try open(location)
        _ = try store.record(scans(2, target: "real", from: Date(timeIntervalSince1970: 1_700_000_000)), decide: decide)
        try fill(location)
        let baseline = Self.residentBytes()
        var peak = baseline
        var count = 0
        var last = Date.distantPast
        var outOfOrder = 0
        try store.forEachObservation(startedIn: Date.distantPast...Date.distantFuture) { row in
            if row.startedAt < last { outOfOrder += 1 }
            last = row.startedAt
            count += 1
            if count % 100_000 == 0 { peak = max(peak, Self.residentBytes()) }
        }
        #expect(count == rows + 2)
        #expect(outOfOrder == 0)
        let growth = peak - baseline
        #expect(growth < 64 << 20, "streaming \(count) rows grew the resident set by \(growth >> 20) MiB")
    }

    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = text.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

@Suite("store conformance: SQLite")
struct SQLiteStoreConformanceTests {
    static let directory: URL = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-conformance-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: SQLiteStoreConformanceTests.directory) }
        return directory
    }()

    let suite = StoreConformance(
        open: { try SQLiteScanStore(path: $0, sha256: Digest.sha256Hex) },
        newLocation: { SQLiteStoreConformanceTests.directory.appendingPathComponent("\(UUID().uuidString).sqlite").path })

    @Test("a fenced scan behind its address's clock (a node whose clock runs behind) replaces the state and lists first in history")
    func fencedScanBehindLeadsHistory() throws {
        let store = try SQLiteScanStore(path: Self.directory.appendingPathComponent("\(UUID().uuidString).sqlite").path, sha256: Digest.sha256Hex)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        func scan(_ sample: Int, at seconds: Double) -> StoredScan {
            var result = StoreConformance.samples[sample]
            result.startedAt = start.addingTimeInterval(seconds)
            return StoredScan(target: "fenced", host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result)
        }
        _ = try store.record([0.0, 60].map { scan(0, at: $0) }, decide: suite.decide)
        var behind = scan(1, at: 30)
        behind.fence = ScanFence(workTarget: "fenced", workVantage: "", epoch: 2)
        _ = try store.record([behind], decide: suite.decide)
        let history = try store.history(target: "fenced", limit: 10)
        #expect(history.map(\.status) == [.failed, .completed], "\(history.map { ($0.status, $0.startedAt.timeIntervalSince(start)) })")
        #expect(try store.status().first?.lastObservationID == history.first?.observationID)
        // The next scan follows it (a fenced scan's state carries no run key: the next one opens its own).
        _ = try store.record([scan(1, at: 90)], decide: suite.decide)
        let after = try store.history(target: "fenced", limit: 10)
        #expect(after.map { $0.startedAt.timeIntervalSince(start) } == [90, 30, 0], "\(after.map { $0.startedAt.timeIntervalSince(start) })")
    }

    @Test("a new database is made from the schema snapshot: the schema and migrations the migrations make, and the snapshot is current")
    func schemaSnapshot() throws {
        let migrated = try SQLiteSchemaSnapshot.migrated()
        #expect(SQLiteSchemaSnapshot.migrations == migrated.migrations && SQLiteSchemaSnapshot.statements == migrated.statements,
                "SQLiteSchemaSnapshot.swift is not what the migrations make: swift run tlsaudit-bench schema-snapshot > Sources/TLSAuditSQLite/SQLiteSchemaSnapshot.swift")
        let path = Self.directory.appendingPathComponent("\(UUID().uuidString).sqlite").path
        let store = try SQLiteScanStore(path: path, sha256: Digest.sha256Hex)
        #expect(try store.appliedMigrations() == migrated.migrations)
        let made = try DatabaseQueue(path: path).read(SQLiteSchemaSnapshot.schema(of:))
        #expect(made.statements == migrated.statements, "the schema of a new database is the migrations' schema")
        // Opened again, nothing is made twice (a database with tables is migrated, and here is up to
        // date), and no write lock is taken: it opens while another connection holds one.
        // (Another process holds it: GRDB leaves no transaction open between accesses.)
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = ["python3", "-c", """
            import sqlite3, sys, time
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            time.sleep(4)
            """, path]
        let pipe = Pipe()
        holder.standardOutput = pipe
        try holder.run()
        defer { holder.terminate(); holder.waitUntilExit() }
        #expect(String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self).contains("locked"))
        let opened = Date()
        _ = try SQLiteScanStore(path: path, busyTimeout: 2, sha256: Digest.sha256Hex)
        #expect(Date().timeIntervalSince(opened) < 1.5, "waited for the write lock")
        #expect(try DatabaseQueue(path: path).read(SQLiteSchemaSnapshot.schema(of:)).statements == migrated.statements)
    }

    @Test("runs: an unchanged scan extends its address's run and adds a few bytes; reports count every scan")
    func unchangedScans() throws {
        _ = try suite.unchangedScans { path in
            try DatabaseQueue(path: path).writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                return try Int.fetchOne(db, sql: "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()") ?? 0
            }
        }
    }

    @Test("migrations: a new store has every named migration, in order")
    func migrations() throws {
        let store = try SQLiteScanStore(path: try suite.newLocation(), sha256: Digest.sha256Hex)
        #expect(try store.appliedMigrations() == ["v1-initial", "v2-pin-state", "v3-alerts", "v4-reports", "v5-pin-counts", "v6-revocation", "v7-fleet", "v8-inventory", "v9-vulnerabilities", "v10-fencing", "v11-anchor-in", "v12-tags-app", "v13-report-claim", "v14-runs", "v15-clients", "v16-alert-target", "v17-judged-with", "v18-node-server", "v19-observation-order"])
    }

    @Test("streaming: a million observations read one at a time, in bounded memory")
    func streaming() throws {
        try suite.streaming(rows: 1_000_000) { path in
            // A million rows straight into the schema (recording them one by one would take minutes).
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(sql: """
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
                    INSERT INTO observation (target, host, port, address, family, started_at, duration_ms, status, policy)
                    SELECT 'bulk-' || (i % 1000), 'bulk.test', 443, '10.0.' || (i % 250) || '.1', 'ipv4', 1800000000 + i, 3,
                        'completed', 'ats-runtime' FROM n
                    """)
            }
        }
    }
}

/// The backends the protocol-only cases run on in this process: SQLite, and a backend this test
/// target defines and reaches only through the registry (`TmpfsSQLiteBackend`).
enum LocalConformanceBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite = "SQLite"
    case testBackend = "test-shm://, a test backend through the registry"

    var testDescription: String { rawValue }

    var suite: StoreConformance {
        switch self {
        case .sqlite:
            StoreConformance(open: { try SQLiteScanStore(path: $0, sha256: Digest.sha256Hex) },
                             newLocation: { SQLiteStoreConformanceTests.directory.appendingPathComponent("\(UUID().uuidString).sqlite").path })
        case .testBackend:
            TmpfsSQLiteBackend.registered
        }
    }
}

@Suite("store conformance: SQLite and a test backend")
struct LocalStoreConformanceTests {
    @Test("durability: what record returned is there after the store is closed and opened again, whole", arguments: LocalConformanceBackend.allCases)
    func durability(_ backend: LocalConformanceBackend) throws { try backend.suite.durability() }

    @Test("transactions: a reader beside the writer never sees part of a batch", arguments: LocalConformanceBackend.allCases)
    func transactions(_ backend: LocalConformanceBackend) throws { try backend.suite.atomicBatchesBesideAReader() }

    @Test("retention: old scans go, each address's latest stays", arguments: LocalConformanceBackend.allCases)
    func retention(_ backend: LocalConformanceBackend) throws { try backend.suite.retention() }

    @Test("alert outbox: stored once, claimed under a lease with an epoch, a stale claim records nothing, retried, delivered", arguments: LocalConformanceBackend.allCases)
    func alertOutbox(_ backend: LocalConformanceBackend) throws { try backend.suite.alertOutbox() }

    @Test("report runs: one claim per run, its owner may claim again, a stale claim's record is refused, a run lease expires", arguments: LocalConformanceBackend.allCases)
    func reportRuns(_ backend: LocalConformanceBackend) throws { try backend.suite.reportRuns() }

    @Test("revocation answers: kept until they expire, replaced by a newer one", arguments: LocalConformanceBackend.allCases)
    func revocationAnswers(_ backend: LocalConformanceBackend) throws { try backend.suite.revocationAnswers() }

    @Test("tags and app: a target's tags and its scan's app outcome are read back by status, results and reports", arguments: LocalConformanceBackend.allCases)
    func tagsAndApp(_ backend: LocalConformanceBackend) throws { try backend.suite.tagsAndApp() }

    @Test("runs: a late scan with another verdict inside a run turns the timeline there and back at the next repeat", arguments: LocalConformanceBackend.allCases)
    func lateScanInsideARun(_ backend: LocalConformanceBackend) throws { try backend.suite.lateScanInsideARun() }

    @Test("clock steps: scans taken while the wall clock stood behind follow the newest in history, runs and the timeline", arguments: LocalConformanceBackend.allCases)
    func clockStepBackHistory(_ backend: LocalConformanceBackend) throws { try backend.suite.clockStepBackHistory() }
}

/// The same suite against a real PostgreSQL: a throwaway cluster (Debian's server, started by the
/// test as an unprivileged user on a free loopback port), one new database per location.
@Suite("store conformance: PostgreSQL", .serialized)
struct PostgresStoreConformanceTests {
    static let server: LabPostgresServer = {
        let server = try! LabPostgresServer()
        atexit { PostgresStoreConformanceTests.server.stop() }
        return server
    }()

    let suite = StoreConformance(
        open: { try PostgresScanStore(url: PostgresStoreConformanceTests.server.url(database: $0), sha256: Digest.sha256Hex) },
        newLocation: {
            let name = "conformance_\(UUID().uuidString.prefix(8).lowercased())"
            try PostgresStoreConformanceTests.server.createDatabase(name)
            return name
        })

    @Test("durability: what record returned is there after the store is closed and opened again, whole")
    func durability() throws { try suite.durability() }

    @Test("transactions: a reader beside the writer never sees part of a batch")
    func transactions() throws { try suite.atomicBatchesBesideAReader() }

    @Test("retention: old scans go, each address's latest stays")
    func retention() throws { try suite.retention() }

    @Test("alert outbox: stored once, claimed under a lease with an epoch, a stale claim records nothing, retried, delivered")
    func alertOutbox() throws { try suite.alertOutbox() }

    @Test("report runs: one claim per run, its owner may claim again, a stale claim's record is refused, a run lease expires")
    func reportRuns() throws { try suite.reportRuns() }

    @Test("revocation answers: kept until they expire, replaced by a newer one")
    func revocationAnswers() throws { try suite.revocationAnswers() }

    @Test("tags and app: a target's tags and its scan's app outcome are read back by status, results and reports")
    func tagsAndApp() throws { try suite.tagsAndApp() }

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

    @Test("runs: a late scan with another verdict inside a run turns the timeline there and back at the next repeat")
    func lateScanInsideARun() throws { try suite.lateScanInsideARun() }

    @Test("clock steps: scans taken while the wall clock stood behind follow the newest in history, runs and the timeline")
    func clockStepBackHistory() throws { try suite.clockStepBackHistory() }

    @Test("migrations: a new store has every named migration, in order (SQLite's names); a newer schema is refused")
    func migrations() throws {
        let location = try suite.newLocation()
        let store = try PostgresScanStore(url: Self.server.url(database: location), sha256: Digest.sha256Hex)
        #expect(try store.appliedMigrations() == ["v1-initial", "v2-pin-state", "v3-alerts", "v4-reports", "v5-pin-counts", "v6-revocation", "v7-fleet", "v8-inventory", "v9-vulnerabilities", "v10-fencing", "v11-anchor-in", "v12-tags-app", "v13-report-claim", "v14-runs", "v15-clients", "v16-alert-target", "v17-judged-with", "v18-node-server", "v19-observation-order"])
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
            for try await applied in group { #expect(applied.count == 19) }
        }
        #expect(try Self.server.psql("SELECT count(*) FROM tlsaudit_migration", database: location)
            .trimmingCharacters(in: .whitespacesAndNewlines) == "19")
    }

    @Test("the same scans give the same status, history, alerts, deliveries and reports as on SQLite (own policy and re-judged)")
    func sameAsSQLite() throws {
        let sqlite = try SQLiteScanStore(path: SQLiteStoreConformanceTests.directory.appendingPathComponent("\(UUID().uuidString).sqlite").path,
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
