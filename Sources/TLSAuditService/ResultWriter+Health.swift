import Foundation
import TLSAuditStore

/// The writer's store-health checks, on its queue: the database file replaced or deleted under the
/// service (checked every `identityCheckInterval` and around each commit), the integrity check
/// that runs before the first commit, and the damage that stops storing (results then go to a
/// spill file, appended and synced per batch, and `serve` exits 75 at the stop).
extension ResultWriter {
    /// A database file deleted or replaced under the service is noticed even when nothing is being
    /// stored: logged, and a new one opened (created and migrated) at the path (on `queue`).
    func checkIdentity() {
        guard let store else { return }
        do {
            try (store as? any FileBackedStore)?.checkFileIdentity()
        } catch {
            self.store = nil
            logger.error("\(error); opening the database at its path again", metadata: ["pending": "\(pending.count)"])
            if (try? currentStore()) != nil { logger.notice("the database at its path is open again; storing goes there") }
        }
    }

    /// Runs `check` on a thread of its own and commits nothing until it has passed (results
    /// arriving meanwhile wait in memory; the writer's queue stays free for the API and the stop):
    /// the service's SQLite `quick_check`, which reads the whole file (a minute for 2.6 GB from a
    /// cold cache) and so does not hold the start up. Damage found stops storing as damage met
    /// while running does, and stops the service (`serve` exits 2). A stop before the check ends
    /// keeps the waiting results in a spill file.
    public func checkBeforeFirstCommit(_ what: String, _ check: @escaping @Sendable () throws -> Void) {
        queue.sync { awaitingCheck = true }
        Thread { [self] in
            let started = DispatchTime.now()
            let outcome = Result { try check() }
            let seconds = String(format: "%.2f", Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9)
            queue.async { [self] in
                awaitingCheck = false
                switch outcome {
                case .success:
                    logger.info("\(what): ok", metadata: ["seconds": "\(seconds)"])
                case .failure(let error as StoreError) where error.kind == .corrupt:
                    stopStoring(damagedBy: error, "nothing is stored into it; results are kept in a file beside it")
                    onFatal?(error)
                case .failure(let error):
                    logger.error("\(what) could not run: \(error)")
                }
                if let spill = replayAfterCheck {
                    replayAfterCheck = nil
                    replayNow(spill)
                }
                flushNow()
            }
        }.start()
    }

    /// From now on nothing goes into the database: results go to the spill file (`flushNow`).
    func stopStoring(damagedBy error: StoreError, _ consequence: String) {
        store = nil
        failing = true
        damaged = error
        logger.critical("the database is damaged: \(consequence): \(error)")
    }

    /// While the database is damaged: appends what is pending to this run's spill file (synced),
    /// in the first location that takes it, or keeps it in memory when none does (the stop tries again).
    func spillWhileDamaged() {
        guard let spill, !pending.isEmpty else { return }
        switch SpillFiles.writeToFirst(of: (damagedSpill.map { [$0] } ?? []) + spill.newFiles(), { try SpillFiles.appendDurably(try SpillFiles.encodeLines(pending), to: $0) }) {
        case .success(let path):
            damagedSpill = path
            if !damagedSpills.contains(path) { damagedSpills.append(path) }
            spilledWhileDamaged += pending.count
            logger.error("not stored (the database is damaged); kept in \(path)", metadata: ["results": "\(pending.count)"])
            pending.removeAll()
        case .failure(let failures):
            logger.critical("the database is damaged and results cannot be kept in a file either: \(failures); they stay in memory",
                            metadata: ["pending": "\(pending.count)"])
        }
    }
}
