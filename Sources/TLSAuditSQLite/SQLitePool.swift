import TLSAuditStore
import Foundation
import GRDB
import Synchronization

/// GRDB's `DatabasePool` with the two guarantees the store needs that GRDB and SQLite do not give
/// by themselves:
///
/// - **Durable commits.** GRDB's WAL set-up sets `synchronous = NORMAL` on the writer after the
///   configuration's own `prepareDatabase` ran, so the writer is set to `FULL` again once the pool
///   exists: every commit syncs the write-ahead log before it returns.
/// - **No SIGBUS from the shared memory.** SQLite maps the `-shm` file and writes to it through the
///   mapping (readers too: their read marks). Once that file cannot be written (`chattr +i`, a
///   read-only remount), the next write to the mapping is a SIGBUS that no error path catches.
///   Every use of the pool checks the file with `access(W_OK)` first (no descriptor is opened:
///   closing one would drop SQLite's POSIX locks on the file) and fails with a store error instead.
///   A change between the check and SQLite's next write (microseconds) is not covered. Closing
///   the pool would write to the mapping too (the last connection's checkpoint), so a pool that
///   met an unwritable file is kept open (`quarantine`) until a pool for the same file opens again.
struct SQLitePool: Sendable {
    let pool: DatabasePool
    let sharedMemoryPath: String

    /// Pools whose shared memory could not be written when last used, kept from closing.
    private static let quarantine = Mutex<[(path: String, pool: DatabasePool)]>([])

    /// FULL; NORMAL only when `TLSAUDIT_BENCH_SQLITE_SYNCHRONOUS=normal` is set, for the
    /// benchmark's A/B of what FULL costs (docs/performance.md): never set it in service.
    static let synchronousSetting = ProcessInfo.processInfo.environment["TLSAUDIT_BENCH_SQLITE_SYNCHRONOUS"] == "normal" ? "NORMAL" : "FULL"

    init(path: String, configuration: Configuration) throws {
        sharedMemoryPath = path + "-shm"
        try Self.checkSharedMemory(sharedMemoryPath)
        // Writable again: the pools kept open for this file may close now.
        Self.quarantine.withLock { kept in kept.removeAll { $0.path == path + "-shm" } }
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = \(Self.synchronousSetting)") }
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try checkBeforeUse()
        return try pool.read(body)
    }

    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try checkBeforeUse()
        return try pool.write(body)
    }

    func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try checkBeforeUse()
        return try pool.writeWithoutTransaction(body)
    }

    /// The shared-memory check; on failure this pool is kept from closing (see the type's comment).
    private func checkBeforeUse() throws {
        do {
            try Self.checkSharedMemory(sharedMemoryPath)
        } catch {
            Self.quarantine.withLock { kept in
                if !kept.contains(where: { $0.pool === pool }) { kept.append((sharedMemoryPath, pool)) }
            }
            throw error
        }
    }

    /// Throws when the `-shm` file exists and no process may write it: immutable or append-only
    /// (EPERM) or on a file system that went read-only (EROFS). A file this user may not write
    /// (EACCES) is fine: SQLite opens it read-only and never maps it writable.
    static func checkSharedMemory(_ path: String) throws {
        guard access(path, W_OK) != 0 else { return }
        let failure = errno
        guard failure == EPERM || failure == EROFS else { return }
        let hint = failure == EPERM ? " (an immutable file? lsattr shows it; chattr -i clears it)" : ""
        throw StoreError(.readOnly, """
            the database's shared-memory file \(path) cannot be written: \(String(cString: strerror(failure)))\(hint); \
            SQLite would crash on it, so the database is not used until it is writable
            """)
    }
}
