// Test support: compiled only where swift-testing is (`swift test`); a release build of the package
// (`swift build -c release`) builds this target empty.
#if canImport(Testing)
public import Foundation
import Synchronization
import Testing
public import TLSAuditCore
public import TLSAuditLab
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditReport
import TLSAuditService
public import TLSAuditStore
import TLSAuditSQLite

/// What every `ScanStore` backend must do, written against the protocol only: a backend is a
/// function that opens (creating when needed) the store at a location. `TLSAuditStoreTests` runs it
/// over every backend (`ConformanceBackend`); each backend's test target adds what only it has.
public struct StoreConformance: Sendable {
    /// Opens the store at `location` (a fresh location gives an empty store).
    public let open: @Sendable (_ location: String) throws -> any ScanStore
    /// A fresh location.
    public let newLocation: @Sendable () throws -> String

    public init(open: @escaping @Sendable (_ location: String) throws -> any ScanStore, newLocation: @escaping @Sendable () throws -> String) {
        self.open = open
        self.newLocation = newLocation
    }

    /// Real scan results, from real handshakes with a lab server: the facts a store keeps.
    public static let samples: [AddressScanResult] = {
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
    public func scans(_ count: Int, target: String = "t", address: String = "127.0.0.1", from start: Date) -> [StoredScan] {
        (0..<count).map { index in
            var result = Self.samples[index % 2]
            result.address = address
            result.startedAt = start.addingTimeInterval(Double(index) * 60)
            return StoredScan(target: target, host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result)
        }
    }

    public let decide = AlertSettings.decision(nil)

    public func durability() throws {
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
    public static let appOutcome = AppHostOutcome(bundle: "com.example.shop", entry: "conformance.tlsaudit.test",
                                           reliesOn: ["NSExceptionMinimumTLSVersion"], configuration: "ats-tls12", connects: true,
                                           reasons: [], detail: "TLS 1.2 as the app's client")

    public func tagsAndApp() throws {
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

    public func atomicBatchesBesideAReader() throws {
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
    public func unchangedRounds(_ rounds: ClosedRange<Int>, from start: Date) -> [[StoredScan]] {
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
    public func unchangedScans(size: (String) throws -> Int) throws -> Double {
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
    public func lateScanInsideARun() throws {
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
    public func clockStepBackHistory() throws {
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
    public static func scanCount(_ entries: [HistoryEntry]) -> Int { entries.reduce(0) { $0 + ($1.run?.scans ?? 1) } }

    /// The alert outbox: an alert is stored once; a claim moves its delivery out of reach for the
    /// lease and raises its epoch; a node holding an older claim can neither record nor release;
    /// a failure is retried at its time; a delivered alert is due no more.
    public func alertOutbox() throws {
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
    public func reportRuns() throws {
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
    public func revocationAnswers() throws {
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

    /// CT logs' positions: none at first, kept per log, replaced, read back in log id order, and
    /// still there when the store is opened again; the follower's sightings, each recorded once.
    public func ctLogStates() throws {
        let location = try newLocation()
        let store = try open(location)
        #expect(try store.ctLogStates() == [])
        let now = Date(timeIntervalSince1970: 1_790_000_000.25)
        let second = CTLogState(logID: "Zm9v", position: #"{"startedAt":5}"#, updatedAt: now)
        let first = CTLogState(logID: "YmFy", position: #"{"startedAt":0}"#, problem: "the log forked", updatedAt: now)
        try store.saveCTLogState(second)
        try store.saveCTLogState(first)
        #expect(try store.ctLogStates() == [first, second])
        var moved = second
        moved.position = #"{"startedAt":9}"#
        moved.updatedAt = now.addingTimeInterval(60)
        try store.saveCTLogState(moved)
        let reopened = try open(location)
        #expect(try reopened.ctLogStates() == [first, moved])

        // Sightings: the first record of an id stays (a certificate after its precertificate, another
        // log's copy); read newest notBefore first, from a date, bounded.
        let sighting = CTSighting(id: "a1", seenAt: now, log: "Lab Log", index: 1 << 40, precertificate: true, host: "api.test", target: "api",
                                  judgedBy: "target api", verdict: .pinBreak, serial: "0A", issuer: "CN=CA", spki: "c3BraQ==",
                                  notBefore: now.addingTimeInterval(86_400), notAfter: now.addingTimeInterval(90 * 86_400))
        try reopened.recordCTSighting(sighting)
        var again = sighting
        again.precertificate = false
        again.index = 7
        try reopened.recordCTSighting(again)
        var older = sighting
        older.id = "b2"
        older.verdict = .covered
        older.notBefore = now.addingTimeInterval(-40 * 86_400)
        try reopened.recordCTSighting(older)
        #expect(try reopened.ctSightings(validFrom: nil, limit: 10) == [sighting, older])
        #expect(try reopened.ctSightings(validFrom: now.addingTimeInterval(-30 * 86_400), limit: 10) == [sighting])
        #expect(try reopened.ctSightings(validFrom: nil, limit: 1) == [sighting])

        // Fleet leases: one follower per log; a renewal keeps the epoch, a lapsed lease goes to the next node
        // with a new one, and a save under an old claim is refused.
        #expect(try reopened.claimCTLog("bmV3", owner: "node-a", lease: 60) == 1)
        #expect(try reopened.ctLogStates().first { $0.logID == "bmV3" }.map { ($0.position, $0.owner) } ?? ("?", nil) == ("", "node-a"))
        #expect(try reopened.claimCTLog("bmV3", owner: "node-b", lease: 60) == nil, "node-a's lease runs")
        #expect(try reopened.claimCTLog("bmV3", owner: "node-a", lease: 60) == 1, "renewed")
        var leased = CTLogState(logID: "bmV3", position: #"{"startedAt":3}"#, updatedAt: now)
        #expect(try reopened.saveCTLogState(leased, claim: ("node-a", 1)))
        #expect(try !reopened.saveCTLogState(leased, claim: ("node-b", 1)))
        #expect(try reopened.claimCTLog("bmV3", owner: "node-a", lease: -10) == 1, "renewed into the past: lapsed")
        #expect(try reopened.claimCTLog("bmV3", owner: "node-b", lease: 60) == 2)
        leased.position = #"{"startedAt":4}"#
        #expect(try !reopened.saveCTLogState(leased, claim: ("node-a", 1)), "node-a lost the log")
        #expect(try reopened.saveCTLogState(leased, claim: ("node-b", 2)))
        let held = try #require(try reopened.ctLogStates().first { $0.logID == "bmV3" })
        #expect(held.position == #"{"startedAt":4}"# && held.owner == "node-b" && (held.leaseUntil ?? .distantPast) > Date())
    }

    public func retention() throws {
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

    public func streaming(rows: Int, fill: (String) throws -> Void) throws {
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

    public static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = text.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

extension StoreConformance {
    /// A directory for SQLite files, removed when the process exits.
    public static let sqliteDirectory: URL = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-conformance-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: StoreConformance.sqliteDirectory) }
        return directory
    }()

    /// A new SQLite file's path.
    public static func newSQLitePath() -> String { sqliteDirectory.appendingPathComponent("\(UUID().uuidString).sqlite").path }

    /// The suite on SQLite files.
    public static let sqlite = StoreConformance(open: { try SQLiteScanStore(path: $0, sha256: Digest.sha256Hex) },
                                                newLocation: { newSQLitePath() })

    /// One throwaway PostgreSQL cluster for the process (Debian's server, started as an unprivileged
    /// user on a free loopback port), stopped when the process exits.
    public static let postgresServer: LabPostgresServer = {
        let server = try! LabPostgresServer()
        atexit { StoreConformance.postgresServer.stop() }
        return server
    }()

    /// The suite on PostgreSQL: one new database per location.
    public static let postgres = StoreConformance(
        open: { try PostgresScanStore(url: StoreConformance.postgresServer.url(database: $0), sha256: Digest.sha256Hex) },
        newLocation: {
            let name = "conformance_\(UUID().uuidString.prefix(8).lowercased())"
            try StoreConformance.postgresServer.createDatabase(name)
            return name
        })
}
#endif
