import Foundation
import Logging
import Synchronization
import Testing
import TLSAuditLab
import TLSAuditModel
import TLSAuditMonitoring
@testable import TLSAuditService

/// The trust-input keeper's alerts: one per transition, however many refreshes check at once.
@Suite("trust-input keeper")
struct TrustInputKeeperTests {
    @Test("conditions checked from many threads at once (each input's refresh timer checks every input): one alert per transition, not one per thread")
    func concurrentChecksAlertOnce() throws {
        let log = try LabCTLog("lab log A", operator: "Lab One")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keeper-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let list = directory.appendingPathComponent("logs.json")
        try LabCTLog.listFile([(log, "usable", Date(timeIntervalSince1970: 1_600_000_000))], published: Date().addingTimeInterval(-40 * 86_400))
            .write(to: list)
        var settings = TrustInputSettings()
        settings.ctLogList.source = list.path
        settings.ctLogList.maxAge = 30 * 86_400
        let keeper = TrustInputKeeper(settings: settings, metrics: ScanMetrics(), logger: Logger(label: "test"))
        let raised = Mutex<[Alert]>([])
        keeper.raise = { alert in
            // As a store write takes a while: the window in which a second check would read no alert yet.
            Thread.sleep(forTimeInterval: 0.02)
            raised.withLock { $0.append(alert) }
            return true
        }
        keeper.latestAlert = { target in raised.withLock { alerts in alerts.last { $0.target == target } } }
        DispatchQueue.concurrentPerform(iterations: 8) { _ in keeper.checkConditions() }
        let stale = raised.withLock { $0 }.filter { $0.kind == .trustInputStale }
        #expect(stale.count == 1, "\(stale.count) stale alerts for one transition")
    }
}
