import Foundation
import Logging
import Synchronization
import TLSAuditCore
import TLSAuditStore

/// Stores scan results in batches on its own serial queue. When the store fails (disk full,
/// read-only file, missing directory), results stay queued in memory and are retried with
/// backoff, reopening the database when it could not be written: the service keeps scanning and
/// resumes storing when it can. A result is logged as "stored" only after its transaction committed.
final class ResultWriter: @unchecked Sendable {
    // @unchecked: `store`, `pending`, `retryDelay` and `failing` are only touched on `queue`.
    private let queue = DispatchQueue(label: "tlsaudit.writer")
    private let openStore: @Sendable () throws -> any ScanStore
    private var store: (any ScanStore)?
    private let logger: Logger
    private var pending: [StoredScan] = []
    private var flushScheduled = false
    private var retryDelay: Double = 0
    private var failing = false
    /// Results dropped because the in-memory queue was full (the exit status reports them).
    private var dropped = 0
    var droppedCount: Int { queue.sync { dropped } }
    /// Results kept in memory at most while the store is failing; beyond this the oldest are dropped (and logged).
    private let capacity: Int
    /// Called on `queue` after each successful commit with the alerts it raised.
    var onAlerts: (@Sendable ([Alert]) -> Void)?
    /// How alerts are raised; replaced on reload.
    private let alerting: Mutex<AlertSettings>

    /// `openStore` opens (and migrates) the database; it is called again after failures that a
    /// fresh connection may cure (read-only, unavailable).
    init(openStore: @escaping @Sendable () throws -> any ScanStore, alerting: AlertSettings, logger: Logger,
         capacity: Int = 100_000) {
        self.openStore = openStore
        self.alerting = Mutex(alerting)
        self.logger = logger
        self.capacity = capacity
        queue.async {
            // Open early so a problem shows at start-up; a failure here counts as failing.
            if (try? self.currentStore()) == nil { self.failing = true }
        }
        identityTimer.schedule(deadline: .now() + Self.identityCheckInterval, repeating: Self.identityCheckInterval)
        identityTimer.setEventHandler { [weak self] in self?.checkIdentity() }
        identityTimer.resume()
    }

    deinit { identityTimer.cancel() }

    /// How often the database file is checked between commits (each commit checks it too).
    static let identityCheckInterval = 2.0
    private lazy var identityTimer = DispatchSource.makeTimerSource(queue: queue)

    /// A database file deleted or replaced under the service is noticed even when nothing is being
    /// stored: logged, and a new one opened (created and migrated) at the path (on `queue`).
    private func checkIdentity() {
        guard let store else { return }
        do {
            try store.checkFileIdentity()
        } catch {
            self.store = nil
            logger.error("\(error); opening the database at its path again", metadata: ["pending": "\(pending.count)"])
            if (try? currentStore()) != nil { logger.notice("the database at its path is open again; storing goes there") }
        }
    }

    /// The open store, opening it when needed (on `queue`).
    private func currentStore() throws -> any ScanStore {
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

    /// Queues results; they are committed within ~50 ms (together with whatever else arrived).
    func submit(_ scans: [StoredScan]) {
        queue.async {
            self.pending += scans
            if self.pending.count > self.capacity {
                let dropped = self.pending.count - self.capacity
                self.pending.removeFirst(dropped)
                self.dropped += dropped
                self.logger.critical("dropped scan results: the store has been failing and the in-memory queue is full",
                                     metadata: ["dropped": "\(dropped)"])
            }
            self.scheduleFlush(after: self.failing ? self.retryDelay : 0.05)
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
    private func flushNow() {
        guard !pending.isEmpty else { return }
        let batch = pending
        do {
            let store = try currentStore()
            // Checked before and after the commit: a batch committed to a file that was deleted or
            // replaced meanwhile is lost with it, so it stays pending and goes to the new file.
            try store.checkFileIdentity()
            let alerts = try store.record(batch, alerting: alerting.withLock { $0 })
            try store.checkFileIdentity()
            pending.removeFirst(batch.count)
            if failing {
                logger.notice("storing works again", metadata: ["stored": "\(batch.count)"])
            }
            failing = false
            retryDelay = 0
            for scan in batch {
                logger.info("stored scan", metadata: [
                    "target": "\(scan.target)", "address": "\(scan.result.address)",
                    "started_at": "\(Timestamp.formatMilliseconds(scan.result.startedAt))",
                    "status": "\(scan.result.status.rawValue)", "compliant": "\(scan.result.ats.compliant)",
                ])
            }
            if !alerts.isEmpty { onAlerts?(alerts) }
        } catch {
            let kind = (error as? StoreError)?.kind
            // A vanished file is recreated at once; other failures back off.
            retryDelay = kind == .vanished ? 0.05 : min(60, max(1, retryDelay * 2))
            if kind == .readOnly || kind == .unavailable || kind == .corrupt || kind == .vanished {
                store = nil // A new connection sees a file made writable (or a directory created) meanwhile.
            }
            let advice: String = switch kind {
            case .full?: "free disk space; results are kept in memory and stored when space returns"
            case .readOnly?: "make the database and its -wal and -shm files writable; results are kept in memory meanwhile"
            case .vanished?: "a new database is opened at the path; results not yet in it are kept in memory and stored there"
            default: "results are kept in memory and retried"
            }
            logger.error("cannot store scan results: \(error)", metadata: [
                "pending": "\(pending.count)", "retry_in_s": "\(Int(retryDelay))", "advice": "\(advice)",
            ])
            failing = true
            scheduleFlush(after: retryDelay)
        }
    }

    /// Replaces the alert settings (reload).
    func apply(_ settings: AlertSettings) { alerting.withLock { $0 = settings } }

    /// Writes what is pending now and waits (for shutdown). Returns the number left unstored.
    @discardableResult
    func flush() -> Int {
        queue.sync {
            flushNow()
            return pending.count
        }
    }

    // MARK: - Results kept across a restart

    /// Where results that could not be stored at shutdown wait for the next start: beside the database.
    static func spillPath(forDatabase database: String) -> String { database + ".unstored.json" }

    /// At shutdown, after `flush`: writes what is still pending to `path` (added to what an earlier
    /// run left there), atomically and synced, and forgets it. Returns how many results the file holds.
    func spillPending(to path: String) throws -> Int {
        try queue.sync {
            guard !pending.isEmpty else { return 0 }
            var scans = FileManager.default.fileExists(atPath: path) ? try Self.readSpill(path) : []
            scans += pending
            try Self.writeDurably(try JSONEncoder().encode(scans), to: path)
            pending.removeAll()
            return scans.count
        }
    }

    /// At start: stores the results an earlier run could not store, then removes the file. When
    /// they cannot be stored now either, the file stays for the next start.
    func replaySpill(from path: String) {
        queue.async {
            guard FileManager.default.fileExists(atPath: path) else { return }
            do {
                let scans = try Self.readSpill(path)
                let store = try self.currentStore()
                try store.checkFileIdentity()
                let alerts = try store.record(scans, alerting: self.alerting.withLock { $0 })
                guard unlink(path) == 0 || errno == ENOENT else {
                    throw StoreError(.other, "cannot remove \(path): \(String(cString: strerror(errno)))")
                }
                self.logger.notice("stored the scan results the last run could not store", metadata: [
                    "stored": "\(scans.count)", "file": "\(path)",
                ])
                if !alerts.isEmpty { self.onAlerts?(alerts) }
            } catch {
                self.logger.error("cannot store the scan results kept from the last run: \(error); they stay in \(path) for the next start")
            }
        }
    }

    static func readSpill(_ path: String) throws -> [StoredScan] {
        let bytes = try InputLimits.read(path, limit: 1 << 30, what: "unstored results file")
        return try JSONDecoder().decode([StoredScan].self, from: Data(bytes))
    }

    /// Writes `data` to a temporary file beside `path`, syncs it and renames it over `path`.
    static func writeDurably(_ data: Data, to path: String) throws {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StoreError(.other, "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        let failure: Int32? = data.withUnsafeBytes { buffer in
            while written < buffer.count {
                let count = write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if count < 0 { if errno == EINTR { continue }; return errno }
                written += count
            }
            return fsync(descriptor) == 0 ? nil : errno
        }
        close(descriptor)
        if let failure {
            unlink(temporary)
            throw StoreError(failure == ENOSPC ? .full : .other, "cannot write \(temporary): \(String(cString: strerror(failure)))")
        }
        guard rename(temporary, path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw StoreError(.other, "cannot rename \(temporary) to \(path): \(String(cString: strerror(failure)))")
        }
    }

    /// Runs `body` with the store on the writer's queue (so it is ordered with writes), waiting for it.
    func perform<T>(_ body: (any ScanStore) throws -> T) throws -> T {
        try queue.sync {
            checkIdentity()
            return try body(try currentStore())
        }
    }
}
