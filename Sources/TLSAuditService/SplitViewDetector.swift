import Foundation
import Synchronization
import TLSAuditCore
import TLSAuditStore

/// Compares what a fleet's vantage points see of one target. A target scanned from several
/// vantages is stored once per vantage (`KEY@VANTAGE`); after each commit, every such target in
/// the batch has its vantages' current states compared, counting only states scanned "at the same
/// time" (within two intervals plus a lease of now). Different leaf
/// keys, leaf certificates or verdicts raise one `split-view` alert naming what each vantage saw;
/// its id comes from that set of views, so the same split is alerted once, and a new one again.
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
            guard Set(states.map(\.target)).count > 1, let alert = Self.alert(key: key, states: states, at: now) else { continue }
            let names = sinks.filter { alert.severity >= $0.minimumSeverity }.map(\.name)
            if try store.recordAlert(alert, sinks: names) { raised.append(alert) }
        }
        return raised
    }

    /// The alert when a target's vantages disagree, nil when they agree. Each vantage's view is
    /// what it saw at each address its DNS gave (leaf, key, verdict): two vantages answered with
    /// different addresses that serve the same certificate see the same thing. A different key is
    /// critical (one network may be intercepted), a different certificate with the same key a
    /// warning, a different verdict alone an error.
    static func alert(key: String, states: [TargetStatus], at time: Date) -> Alert? {
        struct View: Hashable { var leaf: String; var key: String; var verdict: String }
        func view(_ state: TargetStatus) -> View {
            View(leaf: state.leafFingerprint ?? "-", key: state.leafSPKI ?? "-",
                 verdict: state.status == .failed ? "unreachable"
                    : state.compliant ? "compliant" : "not compliant (\(state.reasons.joined(separator: ",")))")
        }
        let byVantage = Dictionary(grouping: states, by: { VantageTarget.split($0.target).vantage ?? "?" })
        let views = byVantage.mapValues { Set($0.map(view)) }
        guard Set(views.values).count > 1 else { return nil }
        let keys = Set(views.values.map { Set($0.map(\.key)) })
        let leaves = Set(views.values.map { Set($0.map(\.leaf)) })
        var changes: [String: String] = [:]
        var seen: [String] = []
        for vantage in views.keys.sorted() {
            let described: String = byVantage[vantage, default: []].sorted { $0.address < $1.address }.map { state in
                let seenThere = view(state)
                return "\(state.address) leaf \(seenThere.leaf) key sha256/\(seenThere.key) \(seenThere.verdict)"
            }.joined(separator: ", ")
            changes["vantage.\(vantage)"] = described
            seen.append("\(vantage): \(described)")
        }
        let (severity, what): (AlertSeverity, String) = keys.count > 1 ? (.critical, "different leaf keys")
            : leaves.count > 1 ? (.warning, "different leaf certificates") : (.error, "different verdicts")
        // The id is the split itself (views without addresses or times): the same split is one alert.
        let identity = views.keys.sorted().map { vantage in
            "\(vantage)=" + views[vantage, default: []].map { "\($0.leaf)/\($0.key)/\($0.verdict)" }.sorted().joined(separator: "+")
        }.joined(separator: "\u{0}")
        let first = states.sorted { $0.target < $1.target }[0]
        let addresses = Set(states.map(\.address)).sorted().joined(separator: ",")
        return Alert(id: String(format: "%016llx%016llx", StableHash.fnv1a("split-view\u{0}\(key)\u{0}" + identity),
                                StableHash.fnv1a(identity, seed: 0x9e37_79b9_7f4a_7c15)),
                     kind: .splitView, severity: severity, target: key, host: first.host, port: first.port, address: addresses,
                     createdAt: time, summary: "vantage points see \(what): " + seen.joined(separator: "; "), changes: changes)
    }
}
