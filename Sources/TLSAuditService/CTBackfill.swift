public import Foundation
public import Logging
public import TLSAuditCore
public import TLSAuditProbe
public import TLSAuditStore

/// `tlsaudit ct backfill`: reads the logs from a date (or an index) up to their current heads and
/// judges what was logged for the configured pinned and watched names as `serve`'s follower does
/// (the same alerts, the same sightings; a repeat of either adds nothing), for a new app or a
/// domain just added. It keeps no position of its own and leaves `serve`'s alone; it reads at
/// most `rate` entries a second per log, with every head, chunk and proof checked as the follower
/// checks them.
public struct CTBackfill {
    /// What the backfill did in one log.
    public struct LogResult: Sendable, Encodable {
        public var log: String
        /// The first index read and the head's size the backfill read up to.
        public var from: UInt64
        public var to: UInt64
        public var read: Int
        /// Entries that named a watched name.
        public var matched: Int
        /// A fork, a rewind, entries that are not the tree's, or a failure that ended the log's backfill.
        public var problem: String?
    }

    public let configuration: ServiceConfiguration
    public let logs: CTLogList
    public let store: any ScanStore
    public let logger: Logger
    /// Entries a second per log at most.
    public var rate: Double = 2_000

    public init(configuration: ServiceConfiguration, logs: CTLogList, store: any ScanStore, logger: Logger) {
        self.configuration = configuration
        self.logs = logs
        self.store = store
        self.logger = logger
    }

    /// The logs a backfill reads: those `serve` follows, or the one whose description or id is `only`.
    public func logsToRead(only: String?) -> [CTLogList.Log] {
        CTWatcher.followed(logs).filter { log in only.map { log.description == $0 || log.id == $0 } ?? true }
    }

    /// Reads each log from its first entry logged at `since` (or from `index`) to its head now.
    public func run(only: String?, since: Date?, index: UInt64?, progress: (String) -> Void) throws -> [LogResult] {
        let targets = configuration.targets.map(\.scanTarget)
        let names = PinForecast.pinnedNames(targets)
        let watched = WatchedDomain.all(configuration.ctFollow?.watch ?? [], targets: targets)
        let sinks = configuration.alerts.sinks
        let store = store
        let trustStore = try TrustStore.system()
        let judge = CTForecastJudge(trustStore: { trustStore }, raiseAlert: { alert in
            try store.recordAlert(alert, sinks: sinks.filter { alert.severity >= $0.minimumSeverity }.map(\.name))
        }, recordSighting: { try store.recordCTSighting($0) }, logger: logger)
        let needles = PinForecast.needles(names, watched: watched)
        var results: [LogResult] = []
        for log in logsToRead(only: only) {
            guard let client = CTWatcher.source(of: log) else { continue }
            let follower = CTLogFollower(client: client, chunk: 256, needles: needles)
            var result = LogResult(log: log.description, from: 0, to: 0, read: 0, matched: 0)
            do {
                let head = try client.treeHead()
                let first = try index ?? follower.firstIndex(loggedAtOrAfter: since ?? Date(), treeSize: head.treeSize)
                var position = try follower.start(at: first)
                result.from = position.nextIndex
                result.to = position.head?.treeSize ?? 0
                progress("\(log.description): entries \(result.from) to \(result.to) (\(result.to - min(result.to, result.from)) to read)")
                let began = Date()
                while position.nextIndex < result.to {
                    let step = try follower.step(position)
                    if let problem = step.problem {
                        result.problem = problem.description
                        break
                    }
                    for match in step.matches where !judge.judge(match.entry, index: match.index, log: log, names: names, watched: watched) {
                        throw CTLogFailure(.refused, "an alert or a sighting could not be stored")
                    }
                    result.read += step.read
                    result.matched += step.matches.count
                    position = step.position
                    // The rate bound: never ahead of `rate` entries a second since the start.
                    let due = Double(result.read) / max(1, rate) - Date().timeIntervalSince(began)
                    if due > 0 { Thread.sleep(forTimeInterval: due) }
                }
            } catch {
                result.problem = "\(error)"
            }
            progress("\(log.description): \(result.read) entries read, \(result.matched) naming a watched name"
                     + (result.problem.map { "; stopped: \($0)" } ?? ""))
            results.append(result)
        }
        return results
    }
}
