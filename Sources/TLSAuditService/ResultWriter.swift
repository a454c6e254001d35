public import Foundation
public import Logging
import Synchronization
public import TLSAuditCore
public import TLSAuditStore
import TLSAuditSupport

/// The one batching writer of scan results, for `serve` and `scan --database`: results are
/// committed in batches on its own serial queue while scanning goes on. When the store fails (disk
/// full, read-only file, missing directory), the service's writer (`.retry`) keeps results queued in
/// memory and retries with backoff, reopening the database when it could not be written, so the
/// service keeps scanning and resumes storing when it can; a command's writer (`.stop`) stops at
/// the first failure and `finish` reports it. A result is logged as "stored" only after its
/// transaction committed.
public final class ResultWriter: @unchecked Sendable {
    /// What a failed commit does.
    public enum FailureHandling: Sendable {
        /// Keep the results in memory (up to the capacity) and retry with backoff: the service.
        case retry
        /// Stop storing; `finish` reports the failure: a command that prints its results anyway.
        case stop
    }

    private let failureHandling: FailureHandling
    /// With `.stop`: the failure that stopped storing.
    private var stoppedBy: (any Error)?
    // @unchecked: every mutable property is only touched on `queue`; those without `private` are
    // shared with the store-health checks (ResultWriter+Health.swift).
    let queue = DispatchQueue(label: "tlsaudit.writer")
    private let openStore: @Sendable () throws -> any ScanStore
    var store: (any ScanStore)?
    let logger: Logger
    var pending: [StoredScan] = []
    private var flushScheduled = false
    private var retryDelay: Double = 0
    var failing = false
    /// The kind of the last failed commit's error (nil after a commit or a failure of another type).
    private var lastFailureKind: StoreError.Kind?
    /// When a failed commit was last logged: while the store stays down (retried every 2 s at most
    /// when it does not answer), the same failure is logged once a minute, not at every retry.
    private var failureLoggedAt: DispatchTime?
    /// Results dropped because the in-memory queue was full (the exit status reports them).
    private var dropped = 0
    /// Set by `finish`: the service is stopping and nothing more is stored.
    private var closed = false
    /// Set when a commit found the database damaged: nothing more is written to it; results go
    /// to `damagedSpill` (appended and synced per batch) and `serve` exits 75 at the stop.
    var damaged: StoreError?
    var damagedSpill: String?
    var spilledWhileDamaged = 0
    /// Every file this run's results went to while the database was damaged, in order: more than
    /// one when a file stopped taking them (full) or a reload moved the spill directory.
    var damagedSpills: [String] = []
    /// Set while the start's integrity check runs: nothing is committed until it passed.
    var awaitingCheck = false
    /// Spill files asked to be replayed while the integrity check ran: replayed once it ended,
    /// unless it found the database damaged or the service is stopping.
    var replayAfterCheck: SpillLocations?
    /// Where results go while the database is damaged, and at a stop with results unstored; set by the service.
    public var spill: SpillLocations?
    /// Called (on `queue`) with a store failure no retry can cure that is not damage (a schema this
    /// version does not know): the service stops and `serve` exits 2.
    public var onFatal: (@Sendable (StoreError) -> Void)?
    /// Results kept in memory at most while the store is failing; beyond this the oldest are dropped (and logged).
    private let capacity: Int
    /// Called on `queue` after each successful commit with the alerts it raised.
    public var onAlerts: (@Sendable ([Alert]) -> Void)?
    /// Compares a fleet's vantage points after each commit (the service sets it in fleet mode).
    var splitView: SplitViewDetector?
    /// Called on `queue` after each attempt to commit a batch: the batch, the seconds it took,
    /// and whether it was committed (the metrics).
    var onCommit: (@Sendable ([StoredScan], Double, Bool) -> Void)?
    /// How alerts are raised; replaced on reload.
    private let alerting: Mutex<AlertSettings>

    /// `openStore` opens (and migrates) the database; it is called again after failures that a
    /// fresh connection may cure (read-only, unavailable).
    public init(openStore: @escaping @Sendable () throws -> any ScanStore, alerting: AlertSettings, logger: Logger,
                capacity: Int = 100_000, failureHandling: FailureHandling = .retry) {
        self.openStore = openStore
        self.failureHandling = failureHandling
        self.alerting = Mutex(alerting)
        self.logger = logger
        self.capacity = capacity
        queue.async {
            // Open early so a problem shows at start-up; a failure here counts as failing (with
            // `.stop`, it stops storing: `finish` reports it even when no result arrives).
            do {
                _ = try self.currentStore()
            } catch {
                if failureHandling == .stop { self.stoppedBy = error } else { self.failing = true }
            }
        }
        identityTimer.schedule(deadline: .now() + Self.identityCheckInterval, repeating: Self.identityCheckInterval)
        identityTimer.setEventHandler { [weak self] in self?.checkIdentity() }
        identityTimer.resume()
    }

    deinit { identityTimer.cancel() }

    /// How often the database file is checked between commits (each commit checks it too).
    static let identityCheckInterval = 2.0
    private lazy var identityTimer = DispatchSource.makeTimerSource(queue: queue)

    /// The open store, opening it when needed (on `queue`).
    func currentStore() throws -> any ScanStore {
        if let store { return store }
        do {
            let opened = try openStore()
            store = opened
            return opened
        } catch {
            logger.error("cannot open the database: \(error)")
            throw error
        }
    }

    /// Queues results; they are committed within ~200 ms (together with whatever else arrived: at
    /// a few dozen scans a second, a batch of several, written in the same few statements as one).
    public func submit(_ scans: [StoredScan]) {
        queue.async {
            guard self.stoppedBy == nil else { return }
            guard !self.closed else {
                // A scan abandoned at the shutdown grace that finished after all: not stored, and said so.
                self.logger.warning("a scan finished after the stop; its result is not stored", metadata: ["results": "\(scans.count)"])
                return
            }
            self.pending += scans
            if self.pending.count > self.capacity {
                let dropped = self.pending.count - self.capacity
                self.pending.removeFirst(dropped)
                self.dropped += dropped
                self.logger.critical("dropped scan results: the store has been failing and the in-memory queue is full",
                                     metadata: ["dropped": "\(dropped)"])
            }
            self.scheduleFlush(after: self.failing ? self.retryDelay : 0.2)
        }
    }

    private func scheduleFlush(after delay: Double) {
        guard !flushScheduled else { return }
        flushScheduled = true
        queue.asyncAfter(deadline: .now() + delay) {
            self.flushScheduled = false
            self.flushNow()
        }
    }

    /// Writes everything pending; on failure keeps it and schedules a retry.
    func flushNow() {
        guard !pending.isEmpty else { return }
        if damaged != nil { return spillWhileDamaged() }
        guard !awaitingCheck else { return } // committed when the check has passed
        let batch = pending
        let began = DispatchTime.now()
        var committed = false
        defer { onCommit?(batch, Double(DispatchTime.now().uptimeNanoseconds - began.uptimeNanoseconds) / 1e9, committed) }
        do {
            let store = try currentStore()
            // Checked before and after the commit: a batch committed to a file that was deleted or
            // replaced meanwhile is lost with it, so it stays pending and goes to the new file.
            try (store as? any FileBackedStore)?.checkFileIdentity()
            let outcome = try store.record(batch, decide: AlertSettings.decision(alerting.withLock { $0 }))
            let alerts = outcome.alerts
            try (store as? any FileBackedStore)?.checkFileIdentity()
            pending.removeFirst(batch.count)
            committed = true
            if failing {
                logger.notice("storing works again", metadata: ["stored": "\(batch.count)"])
            }
            failing = false
            lastFailureKind = nil
            retryDelay = 0
            let lost = Set(outcome.leaseLost.map(Self.identity))
            for scan in outcome.leaseLost {
                logger.warning("scan result not stored: its fleet lease was lost (this node was paused or cut off past the lease, and another node claimed the target since)", metadata: [
                    "target": "\(scan.target)", "address": "\(scan.result.address)",
                    "started_at": "\(Timestamp.formatMilliseconds(scan.result.startedAt))", "lease_epoch": "\(scan.fence?.epoch ?? 0)",
                ])
            }
            for scan in batch where lost.isEmpty || !lost.contains(Self.identity(scan)) {
                logger.info("stored scan", metadata: [
                    "target": "\(scan.target)", "address": "\(scan.result.address)",
                    "started_at": "\(Timestamp.formatMilliseconds(scan.result.startedAt))",
                    "status": "\(scan.result.status.rawValue)", "compliant": "\(scan.result.ats.compliant)",
                ])
            }
            var raised = alerts
            if let splitView {
                do {
                    raised += try splitView.check(batch, store: store, sinks: alerting.withLock { $0 }.sinks)
                } catch {
                    logger.error("cannot compare the vantage points' views: \(error)")
                }
            }
            if !raised.isEmpty { onAlerts?(raised) }
        } catch {
            lastFailureKind = (error as? StoreError)?.kind
            if failureHandling == .stop {
                stoppedBy = error
                pending.removeAll()
                return
            }
            if let fatal = error as? StoreError, fatal.isFatal {
                store = nil
                failing = true
                if fatal.kind == .corrupt {
                    stopStoring(damagedBy: fatal, "storing stops; results are kept in a file beside it and stored at the next start once it is repaired (exit 75 at the stop)")
                    spillWhileDamaged()
                } else {
                    logger.critical("cannot store scan results: \(fatal)", metadata: ["pending": "\(pending.count)"])
                    onFatal?(fatal)
                }
                return
            }
            let kind = (error as? StoreError)?.kind
            // A vanished file is recreated at once; a database that does not answer is asked again
            // every 2 s at most (a connection attempt is cheap, and results wait for it: a longer
            // backoff outlasts the outage, and a fleet's claims expire meanwhile); other failures back off.
            retryDelay = kind == .vanished ? 0.05 : min(kind == .unavailable ? 2 : 60, max(1, retryDelay * 2))
            if kind == .readOnly || kind == .unavailable || kind == .corrupt || kind == .vanished {
                store = nil // A new connection sees a file made writable (or a directory created) meanwhile.
            }
            let advice: String = switch kind {
            case .full?: "free disk space; results are kept in memory and stored when space returns"
            case .readOnly?: "make the database and its -wal and -shm files writable; results are kept in memory meanwhile"
            case .vanished?: "a new database is opened at the path; results not yet in it are kept in memory and stored there"
            default: "results are kept in memory and retried"
            }
            let now = DispatchTime.now()
            if !failing || failureLoggedAt.map({ now.uptimeNanoseconds - $0.uptimeNanoseconds >= 60_000_000_000 }) ?? true {
                failureLoggedAt = now
                logger.error("cannot store scan results: \(error)", metadata: [
                    "pending": "\(pending.count)", "retry_in_s": "\(Int(retryDelay))", "advice": "\(advice)",
                ])
            }
            failing = true
            scheduleFlush(after: retryDelay)
        }
    }

    /// What tells one scan result from another in a batch.
    private static func identity(_ scan: StoredScan) -> String {
        "\(scan.target)\u{0}\(scan.result.address)\u{0}\(scan.result.startedAt.timeIntervalSince1970)"
    }

    /// Whether the last commit failed (results wait in memory for the store); answered within
    /// `timeout` seconds, else nil (the writer is stuck in a commit).
    func isFailing(answeringWithin timeout: Double) -> Bool? {
        queue.answer(within: timeout) { self.failing }
    }

    /// Replaces the alert settings (reload).
    public func apply(_ settings: AlertSettings) { alerting.withLock { $0 = settings } }

    /// Where results go from now on while the database is damaged (a reload's `spill_directory`):
    /// a file this run was appending to where the next start will not look is left for a new one.
    public func apply(spill: SpillLocations) {
        queue.async {
            self.spill = spill
            if let file = self.damagedSpill, !spill.holds(file) { self.damagedSpill = nil }
        }
    }

    // MARK: - Results kept across a restart

    /// What `finish` did with the results still unstored at shutdown.
    public struct Finish: Sendable {
        /// Results that could not be stored (now in `files`, less `lost`).
        public var unstored: Int
        /// Of those, the results no file could take: lost when the process exits.
        public var lost = 0
        /// Results dropped earlier because the in-memory queue was full.
        public var dropped: Int
        /// The files holding them: those written while the database was damaged, then the one
        /// written at the stop.
        public var files: [String] = []
        /// Why the file could not be written (the results are lost).
        public var error: String?
        /// With `.stop`: the failure that stopped storing (the results from then on were not stored).
        public var stoppedBy: String?
        /// The damage that stopped storing while running, when it did (its results are in `file`).
        public var damaged: String?
    }

    /// At shutdown, in one step on the writer's queue (nothing can be stored or queued in between):
    /// a last attempt to store, then what is still pending goes to a new spill file, written
    /// atomically and synced, in the first of `spill`'s locations that takes it. When none does
    /// (every one full or unwritable), the results stay in memory and storing and spilling are tried
    /// again every half second until `deadline` (the stop's grace); what is still pending then is
    /// lost, and counted (`Finish.lost`). Later submissions are refused (and logged). With `.stop`,
    /// nothing is spilled (the outcome names the failure that stopped storing) and the database is closed.
    public func finish(spill: SpillLocations, deadline: Date = .distantPast) -> Finish {
        queue.sync {
            closed = true
            replayAfterCheck = nil // the stop keeps the files for the next start
            flushNow()
            let keptFirst = storeAgainAfterLostConnection(until: deadline, spill: spill)
            // A command's writer closes the database (SQLite folds its write-ahead log into the file);
            // the service's stays open: sinks still read it until the process ends.
            defer { if failureHandling == .stop { store = nil } }
            var outcome = Finish(unstored: pending.count + spilledWhileDamaged, dropped: dropped, files: damagedSpills, error: nil,
                                 stoppedBy: stoppedBy.map { "\($0)" }, damaged: damaged.map { "\($0)" })
            guard failureHandling == .retry else { return outcome }
            var waited = false
            var spilled = 0
            if let keptFirst, !pending.isEmpty {
                outcome.files.append(keptFirst)
                spilled = pending.count
                pending.removeAll()
            }
            while !pending.isEmpty {
                switch spillPending(to: spill) {
                case .success(let path):
                    outcome.files.append(path)
                    outcome.error = nil
                    spilled = pending.count
                    pending.removeAll()
                    continue
                case .failure(let failures):
                    outcome.error = failures.description
                }
                guard Date() < deadline else { break }
                if !waited {
                    waited = true
                    logger.critical("\(pending.count) scan results cannot be stored or kept in any file (\(outcome.error ?? "")): they stay in memory; trying again until the shutdown grace ends (free space, or set spill_directory on another file system)")
                }
                Thread.sleep(forTimeInterval: 0.5)
                store = nil // A new connection sees space freed meanwhile.
                flushNow()
            }
            outcome.unstored = spilledWhileDamaged + spilled + pending.count
            outcome.lost = pending.count
            return outcome
        }
    }

    /// Writes what is pending to a new spill file (atomically, synced) in the first of `spill`'s
    /// locations that takes it; pending is left as it is.
    private func spillPending(to spill: SpillLocations) -> Result<String, SpillFiles.SpillFailures> {
        SpillFiles.writeToFirst(of: spill.newFiles()) { try SpillFiles.writeDurably(try SpillFiles.encodeLines(pending), to: $0) }
    }

    /// At the stop, when the last attempt failed for a lost connection (a PostgreSQL restart, a
    /// COMMIT whose answer was lost on the way), which a new connection usually cures at once: the
    /// results are first written to a spill file (so a retry that hangs past the stop's timeout
    /// loses nothing), then storing is tried again every 250 ms for up to 3 s (within the stop's
    /// grace). When a retry stores them, the file is removed; a commit whose answer was lost is
    /// found stored by the retry, not repeated. Returns the file when the results are still in it.
    private func storeAgainAfterLostConnection(until deadline: Date, spill: SpillLocations) -> String? {
        guard failureHandling == .retry, damaged == nil, lastFailureKind == .unavailable, !pending.isEmpty,
              case .success(let path) = spillPending(to: spill) else { return nil }
        let giveUp = min(deadline, Date().addingTimeInterval(3))
        while !pending.isEmpty, damaged == nil, lastFailureKind == .unavailable, Date() < giveUp {
            Thread.sleep(forTimeInterval: 0.25)
            flushNow()
        }
        guard pending.isEmpty else { return path }
        // Stored after all (or kept in the damaged database's spill file): the copy goes.
        if unlink(path) == 0 { SpillFiles.syncDirectory(of: path) }
        return nil
    }

    /// At start: stores the results earlier runs could not store, file by file in batches, and
    /// removes each file once all of it is stored in the file at the database path. A file that
    /// cannot be stored now stays for the next start. While the start's integrity check runs, the
    /// files wait for it: a damaged database takes nothing (the files wait for the one that
    /// replaces it), and a file stored into one before the check found it would be removed.
    public func replaySpills(_ spill: SpillLocations) {
        queue.async {
            if self.awaitingCheck {
                self.replayAfterCheck = spill
            } else {
                self.replayNow(spill)
            }
        }
    }

    /// `replaySpills`' work, on `queue`.
    func replayNow(_ spill: SpillLocations) {
        guard damaged == nil, !closed else { return }
        for path in spill.waiting() {
            do {
                let store = try currentStore()
                let alerts = try SpillFiles.replay(path, into: store, decide: AlertSettings.decision(alerting.withLock { $0 }), logger: logger)
                if !alerts.isEmpty { onAlerts?(alerts) }
            } catch {
                logger.error("cannot store the scan results kept from an earlier run: \(error); they stay in \(path) for the next start")
            }
        }
    }

    /// Stores an alert raised apart from a scan (a trust input's transition), with a delivery to each
    /// sink its severity reaches, and hands it to `onAlerts`; false when one with its id is stored already.
    public func raise(_ alert: Alert) throws -> Bool {
        let names = alerting.withLock { $0 }.sinks.filter { alert.severity >= $0.minimumSeverity }.map(\.name)
        guard try perform({ try $0.recordAlert(alert, sinks: names) }) else { return false }
        onAlerts?([alert])
        return true
    }

    /// Runs `body` with the store on the writer's queue (so it is ordered with writes), waiting for it.
    public func perform<T>(_ body: (any ScanStore) throws -> T) throws -> T {
        try queue.sync {
            checkIdentity()
            return try body(try currentStore())
        }
    }
}
