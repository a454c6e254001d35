import Foundation
import Logging
import TLSAuditCore
import TLSAuditMonitoring
import TLSAuditProbe
import TLSAuditStore
import TLSAuditSupport

/// `ct: {follow: true}`: follows the logs of the log list in force (usable, qualified and
/// read-only ones; RFC 6962 and static-ct-api) on a thread of its own and raises `pin.forecast-break` for a logged certificate
/// that the pins of a configured name would refuse, before any server presents it. Each log's
/// position is kept in the store after the alerts it led to (an alert's id makes a repeat a
/// no-op), so a restart neither judges an entry twice into two alerts nor skips one. A log that
/// forks, rewinds or serves entries its tree does not hold raises `ct.log-inconsistent` once (per
/// log and known head), nothing it served then is acted on, and it is looked at again an hour
/// later. A log that fails is retried later (twice the poll interval per failure in a row, or what
/// its 429 asked, at most an hour). An alert that cannot be stored leaves the position where it
/// was: the entries are read again next round. Certificates already expired are not judged.
final class CTWatcher: @unchecked Sendable {
    // @unchecked: `stopped` and `retries` are read and written under `wake`'s lock or on the watcher's thread only.
    /// The `ct: follow` settings in force (a reload's, SIGHUP); nil when following is off.
    private let currentSettings: @Sendable () -> CTFollowSettings?
    private let writer: ResultWriter
    private let scanner: TLSScanner
    private let targets: @Sendable () -> [ScanTarget]
    private let logger: Logger
    private let wake = NSCondition()
    private let finished = DispatchSemaphore(value: 0)
    private var stopped = false
    private var started = false
    /// Per log id: when to try again, and the failures in a row.
    private var retries: [String: (at: Date, failures: Int)] = [:]
    /// Steps per log in one round: a log far behind is read over several rounds, the others not held up.
    static let stepsPerRound = 50
    /// Whether "nothing pinned" was said (once, not every round).
    private var saidNothingPinned = false
    /// Whether "following is off" was said.
    private var saidOff = false
    /// In a fleet, this node's name (it follows the logs it claims); nil on a single node.
    private let owner: String?
    /// The claims this node holds, by log id (to say a change once).
    private var heldEpochs: [String: Int64] = [:]
    private let judge: CTForecastJudge
    private let metrics: ScanMetrics?
    /// Per log id: since when the follower has been behind the log's head (none when caught up).
    private var behindSince: [String: Date] = [:]

    init(settings: @escaping @Sendable () -> CTFollowSettings?, writer: ResultWriter, scanner: TLSScanner,
         targets: @escaping @Sendable () -> [ScanTarget], owner: String? = nil, metrics: ScanMetrics? = nil, logger: Logger) {
        self.metrics = metrics
        self.owner = owner
        currentSettings = settings
        self.writer = writer
        self.scanner = scanner
        self.targets = targets
        self.logger = logger
        judge = CTForecastJudge(trustStore: { scanner.options.trustStore }, raiseAlert: { try writer.raise($0) },
                                recordSighting: { sighting in try writer.perform { try $0.recordCTSighting(sighting) } }, logger: logger)
    }

    func start() {
        started = true
        let thread = Thread { [self] in
            // Off from the start is not news; off after a reload is. (Read here, on the watcher's
            // thread: the settings live on the service's control queue, which start-up may hold.)
            var firstRound = true
            while !isStopped {
                let settings = currentSettings()
                if let settings {
                    if saidOff { logger.notice("CT follower: ct: follow is on again") }
                    saidOff = false
                    round(settings)
                } else if !saidOff {
                    if !firstRound { logger.notice("CT follower: ct: follow is off since the configuration was reloaded; no log is read") }
                    saidOff = true
                }
                firstRound = false
                wake.lock()
                if !stopped { _ = wake.wait(until: Date().addingTimeInterval(settings?.poll ?? 60)) }
                wake.unlock()
            }
            finished.signal()
        }
        thread.name = "tlsaudit.ct"
        thread.start()
    }

    /// Asks the thread to stop after the step in progress (each request is bounded by its timeout).
    func beginStopping() {
        wake.lock()
        stopped = true
        wake.broadcast()
        wake.unlock()
    }

    /// Waits for the thread to end, until `deadline`.
    func finish(by deadline: Date) {
        beginStopping()
        if started, finished.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow)) == .timedOut {
            logger.warning("the CT follower did not stop in time; its step in progress is left to end on its own")
        }
    }

    private var isStopped: Bool {
        wake.lock()
        defer { wake.unlock() }
        return stopped
    }

    /// The logs followed: RFC 6962 and static-ct-api logs with a URL (a tiled log's monitoring
    /// URL), usable, qualified or read-only.
    static func followed(_ list: CTLogList) -> [CTLogList.Log] {
        list.logs.filter { log in
            log.url != nil && [.usable, .qualified, .readonly].contains(log.state ?? .pending)
        }
    }

    /// Each log's reader, kept across rounds (a tiled log's issuers stay cached), with what it was made for.
    private var sources: [String: (url: String, key: [UInt8], source: any CTLogSource)] = [:]

    /// The reader of `log`, made once while its URL and key stay.
    private func reader(of log: CTLogList.Log) -> (any CTLogSource)? {
        if let kept = sources[log.id], kept.url == log.url, kept.key == log.key { return kept.source }
        guard let url = log.url, let source = Self.source(of: log) else { return nil }
        sources[log.id] = (url, log.key, source)
        return source
    }

    /// The reader of `log`: its tiles for a static-ct-api log, its RFC 6962 API otherwise.
    static func source(of log: CTLogList.Log) -> (any CTLogSource)? {
        guard let url = log.url else { return nil }
        return log.tiled ? CTTileClient(url: url, key: log.key, timeout: 10) : CTLogClient(url: url, key: log.key, timeout: 10)
    }

    /// One round over the logs.
    private func round(_ settings: CTFollowSettings) {
        let targets = targets()
        let names = PinForecast.pinnedNames(targets)
        let watched = WatchedDomain.all(settings.watch, targets: targets)
        guard !names.isEmpty || !watched.isEmpty else {
            if !saidNothingPinned { logger.notice("CT follower: nothing is pinned or watched; no log is read") }
            saidNothingPinned = true
            return
        }
        saidNothingPinned = false
        let needles = PinForecast.needles(names, watched: watched)
        for log in Self.followed(scanner.ctLogs) {
            if isStopped { return }
            if let retry = retries[log.id], retry.at > Date() { continue }
            follow(log, settings: settings, names: names, watched: watched, needles: needles)
        }
    }

    /// A fleet node's claim on a log lapsed or went to another node: it stops acting on the log.
    private struct LostLease: Error {}

    private func lostLease(_ log: CTLogList.Log) {
        if heldEpochs.removeValue(forKey: log.id) != nil {
            logger.notice("CT follower: this node's claim on \(log.description) lapsed or went to another node; it stops acting on the log")
        }
    }

    /// In a fleet: claims (or renews) the log for this node; nil while another node follows it.
    private func claim(_ log: CTLogList.Log, settings: CTFollowSettings) throws -> (owner: String, epoch: Int64)? {
        guard let owner else { return nil }
        // Renewed before every page (a request is bounded by 10 s): a node that stops renewing hands the log over after this.
        let lease = max(25, 5 * settings.poll)
        guard let epoch = try writer.perform({ try $0.claimCTLog(log.id, owner: owner, lease: lease) }) else { throw LostLease() }
        if heldEpochs[log.id] != epoch {
            logger.notice("CT follower: this node follows \(log.description) (claim \(epoch), lease \(Int(lease)) s)")
            heldEpochs[log.id] = epoch
        }
        return (owner, epoch)
    }

    private func follow(_ log: CTLogList.Log, settings: CTFollowSettings, names: [PinForecast.PinnedName], watched: [WatchedDomain],
                        needles: [[UInt8]]) {
        guard let url = log.url, let client = reader(of: log) else { return }
        var follower = CTLogFollower(client: client, needles: needles)
        // In a fleet the claim is renewed before each page: a long step does not outlive it.
        if owner != nil { follower.keepGoing = { [self] in (try? self.claim(log, settings: settings)) != nil } }
        do {
            var claim = try self.claim(log, settings: settings)
            // Read after the claim: the position as the last holder left it. A claimed log nobody has followed yet holds none.
            let stored: CTLogState?
            do {
                stored = try writer.perform { try $0.ctLogStates() }.first { $0.logID == log.id && !$0.position.isEmpty }
            } catch {
                logger.error("CT follower: cannot read \(log.description)'s stored position: \(error); trying again next round")
                return
            }
            var position: CTLogPosition
            if let stored {
                do {
                    position = try JSONDecoder().decode(CTLogPosition.self, from: Data(stored.position.utf8))
                } catch {
                    // Not overwritten: starting again would skip entries (start: end) or read the whole log again.
                    logger.error("CT follower: the stored position of \(log.description) cannot be read (\(error)); the log is not followed until it is mended")
                    retries[log.id] = (Date().addingTimeInterval(3_600), 0)
                    return
                }
            } else {
                position = try follower.start(fromBeginning: settings.fromBeginning)
                try save(position, of: log, problem: nil, claim: claim)
                logger.notice("CT follower: following \(log.description) from entry \(position.nextIndex) (its head: \(position.head?.treeSize ?? 0))")
            }
            for _ in 0..<Self.stepsPerRound {
                if isStopped { return }
                claim = try self.claim(log, settings: settings)
                let step = try follower.step(position)
                if let problem = step.problem {
                    raiseProblem(problem, log: log, url: url, known: position.head)
                    try save(position, of: log, problem: problem.description, claim: claim)
                    measure(log, position, read: 0, matched: 0, problem: true)
                    retries[log.id] = (Date().addingTimeInterval(max(settings.poll, 3_600)), 0)
                    return
                }
                var stored = true
                for match in step.matches where !judge.judge(match.entry, index: match.index, log: log, names: names, watched: watched) {
                    stored = false
                }
                guard stored else {
                    logger.error("CT follower: \(log.description): an alert could not be stored; its entries are read again next round")
                    return
                }
                if step.malformed > 0 { logger.warning("CT follower: \(step.malformed) entries of \(log.description) do not decode; skipped") }
                position = step.position
                try save(position, of: log, problem: nil, claim: claim)
                measure(log, position, read: step.read, matched: step.matches.count, problem: false)
                if position.backlog == 0 { break }
            }
            retries[log.id] = nil
        } catch let failure as CTLogFailure where failure.kind == .abandoned {
            lostLease(log)
        } catch is LostLease {
            lostLease(log)
        } catch let failure as CTLogFailure {
            let failures = (retries[log.id]?.failures ?? 0) + 1
            let delay = min(3_600, max(settings.poll, failure.retryAfter ?? settings.poll * pow(2, Double(min(failures, 12)))))
            retries[log.id] = (Date().addingTimeInterval(delay), failures)
            metrics?.recordCTLogFailure(log.description, kind: failure.kind.rawValue)
            logger.warning("CT follower: \(log.description): \(failure) (\(failure.kind.rawValue)); trying again in \(Int(delay.rounded())) s")
        } catch {
            logger.error("CT follower: cannot keep \(log.description)'s position: \(error); it is read again from the stored one")
        }
    }

    /// The log's gauges and counters after a step.
    private func measure(_ log: CTLogList.Log, _ position: CTLogPosition, read: Int, matched: Int, problem: Bool) {
        guard let metrics else { return }
        let now = Date()
        if position.backlog == 0 { behindSince[log.id] = nil } else if behindSince[log.id] == nil { behindSince[log.id] = now }
        metrics.recordCTLog(log.description, treeSize: position.head?.treeSize ?? 0, headTimestamp: position.head?.timestamp.timeIntervalSince1970,
                            nextIndex: position.nextIndex, lagSeconds: behindSince[log.id].map { now.timeIntervalSince($0) } ?? 0,
                            read: read, matched: matched, problem: problem)
    }

    /// Keeps the position (in a fleet, only under this node's claim: else `LostLease`).
    private func save(_ position: CTLogPosition, of log: CTLogList.Log, problem: String?, claim: (owner: String, epoch: Int64)?) throws {
        let json = String(decoding: try JSONEncoder().encode(position), as: UTF8.self)
        let state = CTLogState(logID: log.id, position: json, problem: problem, updatedAt: Date())
        guard let claim else {
            try writer.perform { try $0.saveCTLogState(state) }
            return
        }
        guard try writer.perform({ try $0.saveCTLogState(state, claim: claim) }) else { throw LostLease() }
    }

    /// One alert per log and known head: a log that keeps growing a forked history is one event.
    private func raiseProblem(_ problem: CTLogProblem, log: CTLogList.Log, url: String, known: SignedTreeHead?) {
        let kind = switch problem { case .rewound: "rewound"; case .inconsistent: "inconsistent"; case .entriesDoNotMatch: "entries" }
        let knownHead = known.map { "\($0.treeSize)|\(Data($0.rootHash).base64EncodedString())" } ?? "none"
        let alert = Alert(id: "ct.log-inconsistent-" + Digest.sha256Hex(Array("\(log.id)|\(kind)|\(knownHead)".utf8)).prefix(32),
                          kind: .ctLogInconsistent, severity: .critical, target: "ct-log:\(log.id)", host: "", port: 0, address: url,
                          createdAt: Date(), summary: "\(log.description): \(problem); nothing it served then is acted on",
                          changes: ["log": log.description, "problem": problem.description])
        do { _ = try writer.raise(alert) } catch { logger.error("CT follower: cannot store the alert about \(log.description): \(error)") }
        logger.error("CT follower: \(log.description): \(problem)")
    }
}
