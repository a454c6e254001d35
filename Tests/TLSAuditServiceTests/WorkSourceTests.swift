import Foundation
import GRDB
import Logging
import Synchronization
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe
import TLSAuditStore
@testable import TLSAuditService
import TLSAuditServiceLab

/// The scheduler's seam: where its work comes from is a `WorkSource`. A source written here, as a
/// new one would be (one type, handed to `ScanScheduler.init`), runs real scans of a lab server.
@Suite("work sources")
struct WorkSourceTests {
    init() { TestBackends.register() }

    let lab = ServiceLab.shared

    /// Each target once, in the order given; its results tagged so the store shows whose they were.
    final class OnceEach: WorkSource, @unchecked Sendable {
        private weak var scheduler: ScanScheduler?
        private var left: [String]
        let finished = Mutex<[(key: String, schedule: TargetSchedule?)]>([])
        let changes = Mutex<[Bool]>([])

        init(_ keys: [String]) { left = keys }

        func attach(to scheduler: ScanScheduler) { self.scheduler = scheduler }
        func targetsChanged(reloaded: Bool) { changes.withLock { $0.append(reloaded) } }

        func launchDue(now: SchedulerTime) {
            while let scheduler, scheduler.freeWorkers > 0, let key = left.first {
                left.removeFirst()
                scheduler.launch(key)
            }
        }

        func finishing(_ key: String, scans: inout [StoredScan]) -> Int? {
            for index in scans.indices { scans[index].tags = ["source:once-each"] }
            return nil
        }

        func finished(_ key: String, schedule: TargetSchedule?) { finished.withLock { $0.append((key, schedule)) } }
    }

    @Test("a work source of the test's own plugs into the scheduler: each target it hands out is scanned once (not on the targets' own interval), its mark on the results is stored, and it hears each target's next due time")
    func ownSource() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let workspace = try lab.workspace("work-source")
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let configuration = try ServiceConfiguration.parse(
            yaml: lab.configuration(database: database, targets: [("a", server.port), ("b", server.port), ("c", server.port)], interval: "1s"),
            file: "work-source.yaml", baseDirectory: workspace.path)
        let trustStores = try ScanService.trustStores(for: configuration)
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: lab.rootFile)),
                                     judge: AddressAssessment.judge)
        let location = try configuration.location()
        let writer = ResultWriter(openStore: { try location.open() }, alerting: configuration.alerts.settings, logger: Logger(label: "test"))
        let source = OnceEach(["b", "a", "c"])
        let scheduler = ScanScheduler(configuration: configuration, trustStores: trustStores, scanner: scanner, writer: writer,
                                      logger: Logger(label: "test"), source: source)
        scheduler.start()
        let deadline = Date().addingTimeInterval(30)
        while source.finished.withLock({ $0.count }) < 3, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let finishedAt = SchedulerTime.now
        // Past the targets' 1 s interval: a source that hands out nothing more launches nothing more.
        Thread.sleep(forTimeInterval: 1.5)
        #expect(scheduler.stop(deadline: Date().addingTimeInterval(5)) == 0)
        let finish = writer.finish(spill: configuration.spillLocations, deadline: Date().addingTimeInterval(5))
        #expect(finish.unstored == 0)

        let finished = source.finished.withLock { $0 }
        #expect(finished.map(\.key).sorted() == ["a", "b", "c"], "\(finished.map(\.key))")
        #expect(scheduler.scanCounts() == ["a": 1, "b": 1, "c": 1])
        #expect(source.changes.withLock { $0 } == [false], "told of the targets once, at the start")
        for (key, schedule) in finished {
            // Reachable: no failure, due again after the interval.
            #expect(schedule?.consecutiveFailures == 0, "\(key)")
            #expect(schedule.map { $0.nextDue.interval(since: finishedAt) > 0 } == true, "\(key) is due after it finished")
        }
        let queue = try DatabaseQueue(path: database)
        let rows = try queue.read { try Row.fetchAll($0, sql: "SELECT target, tags FROM target_state ORDER BY target") }
        #expect(rows.map { $0["target"] as String } == ["a", "b", "c"])
        #expect(rows.allSatisfy { ($0["tags"] as String?)?.contains("source:once-each") == true }, "\(rows)")
        #expect(try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM scan") } == 3)
    }
}
