import Foundation
import Synchronization
import TLSAuditCore
import TLSAuditStore

/// Compares what a fleet's vantage points see of one target. A target scanned from several
/// vantages is stored once per vantage (`KEY@VANTAGE`); after each commit, every such target in
/// the batch has its vantages' current states compared, counting only states scanned "at the same
/// time" (within two intervals plus a lease of now). Different leaf
/// keys, leaf certificates or verdicts raise one `split-view` alert naming what each vantage saw
/// (`SplitViewRule`, in the judge, decides what differs and how severe it is); its id comes from
/// that set of views, so the same split is alerted once, and a new one again.
final class SplitViewDetector: Sendable {
    /// Seconds within which two vantages' scans count as simultaneous, by configured target key.
    private let windows: Mutex<[String: Double]>

    init(configuration: ServiceConfiguration) {
        windows = Mutex(Self.windows(configuration))
    }

    func apply(_ configuration: ServiceConfiguration) { windows.withLock { $0 = Self.windows(configuration) } }

    private static func windows(_ configuration: ServiceConfiguration) -> [String: Double] {
        Dictionary(configuration.targets.filter { $0.vantages != .any }.map { ($0.key, 2 * $0.interval + configuration.fleet.lease) },
                   uniquingKeysWith: { first, _ in first })
    }

    /// The split-view alerts the committed `batch` reveals, stored (with their deliveries to
    /// `sinks` by severity) in `store`; only the new ones are returned.
    func check(_ batch: [StoredScan], store: any ScanStore, sinks: [AlertSettings.Sink], now: Date = Date()) throws -> [Alert] {
        let windows = windows.withLock { $0 }
        let keys = Set(batch.compactMap { scan -> String? in
            let (key, vantage) = VantageTarget.split(scan.target)
            return vantage != nil && windows[key] != nil ? key : nil
        })
        var raised: [Alert] = []
        for key in keys.sorted() {
            guard let window = windows[key] else { continue }
            let states = try store.vantageStatus(of: key).filter { now.timeIntervalSince($0.lastScanAt) <= window }
            guard Set(states.map(\.target)).count > 1,
                  let alert = SplitViewRule.alert(key: key, observations: states.map(Self.observation), at: now) else { continue }
            let names = sinks.filter { alert.severity >= $0.minimumSeverity }.map(\.name)
            if try store.recordAlert(alert, sinks: names) { raised.append(alert) }
        }
        return raised
    }

    /// A vantage's current state as the rule compares it.
    static func observation(_ state: TargetStatus) -> SplitViewRule.Observation {
        SplitViewRule.Observation(target: state.target, address: state.address, host: state.host, port: state.port,
                                  leafFingerprint: state.leafFingerprint, leafSPKI: state.leafSPKI,
                                  failed: state.status == .failed, compliant: state.compliant, reasons: state.reasons)
    }
}
