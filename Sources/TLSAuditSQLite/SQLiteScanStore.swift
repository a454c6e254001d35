public import TLSAuditStore
import Foundation
import GRDB
public import TLSAuditModel

/// The embedded store: one SQLite file in WAL mode (readers never block the writer, so `status`
/// works while the service runs), synchronous=FULL on the writer (a commit survives power loss
/// and an OS crash, not only a killed process: `SQLitePool`), a busy timeout, and append-only
/// migrations. A database with a migration this version does not know is refused when opened;
/// `inspect` runs SQLite's `quick_check` (the service runs it at start, before its first commit).
public final class SQLiteScanStore: EngineBackedStore, FileBackedStore, Sendable {
    let pool: SQLitePool
    public let path: String
    public var displayLocation: String { path }
    /// The store's logic (`StoreEngine`) over this file's connections.
    public let engine: StoreEngine
    /// The SHA-256 of observation content hashes (OpenSSL's, handed in: the store links no C).
    private let sha256: SHA256Hex

    /// Opens (creating when `create` is true) and migrates the database at `path`. `sha256` is the
    /// package's one SHA-256 (`Digest.sha256Hex` in the probe), for observation content hashes.
    public init(path: String, create: Bool = true, busyTimeout: Double = 10, sha256: @escaping SHA256Hex) throws {
        self.path = path
        self.sha256 = sha256
        if !create, !FileManager.default.fileExists(atPath: path) {
            throw StoreError(.unavailable, "no database at \(path) (has the service run yet?)")
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.label = "tlsaudit"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        do {
            if create { try Self.createDirectories(URL(fileURLWithPath: path).deletingLastPathComponent().path) }
            pool = try SQLitePool(path: path, configuration: configuration)
            let migrator = SQLiteMigrations.migrator(sha256: sha256)
            try pool.read { db in try Self.refuseUnknownMigrations(migrator, in: db, path: path) }
            try SQLiteSchemaSnapshot.make(in: pool.pool, migrator: migrator)
            try migrator.migrate(pool.pool)
            // The reader that checked the migrations holds the schema as it was: its statements
            // would expand `*` to the old columns (SQLite re-prepares them with the new ones at
            // the first step, but the row's column names stay those counted at prepare).
            pool.pool.invalidateReadOnlyConnections()
        } catch {
            throw Self.storeError(error, doing: "opening \(path)")
        }
        engine = StoreEngine(database: SQLiteDatabase(pool: pool), sha256: sha256)
        // The file just opened (and created): what later checks compare the path with.
        guard let identity = Self.fileIdentity(path) else {
            throw StoreError(.vanished, "\(path) disappeared while it was being opened")
        }
        fileIdentity = identity
    }

    /// Throws when the database has a migration `migrator` does not know (a newer tlsaudit's),
    /// as `PostgresMigrations.refuseUnknown` does for PostgreSQL.
    private static func refuseUnknownMigrations(_ migrator: DatabaseMigrator, in db: Database, path: String) throws {
        let unknown = try migrator.appliedIdentifiers(db).subtracting(try migrator.appliedMigrations(db)).sorted()
        guard !unknown.isEmpty else { return }
        throw StoreError(.incompatible, """
            \(path) has schema migrations this version of tlsaudit does not know (\(unknown.joined(separator: ", "))): \
            a newer tlsaudit wrote it; run that version, or restore a copy made before the upgrade
            """)
    }

    /// What to do about a damaged database file, for messages.
    static func corruptionAdvice(path: String, found: String) -> String {
        """
        the database \(path) is damaged (SQLite's quick_check: \(found)); stop the service, keep a copy of the file \
        and its -wal, then either restore a backup or recover what is readable: sqlite3 \(path) ".recover" | sqlite3 \
        \(path).recovered, and point database: at the recovered file
        """
    }

    /// What `check-config --test-connection` reports of an existing file, changing nothing: the
    /// migrations it has. Throws for a damaged file and a newer schema. `PRAGMA quick_check` reads
    /// every page (b-tree structure, page and record formats; not the indexes' content against
    /// their tables): 2.4-2.7 s for a 2.6 GB file of 1,000,000 scans in the page cache, 36-61 s from a cold
    /// cache on this machine's disk.
    public static func inspect(path: String, sha256: @escaping SHA256Hex) throws -> [String] {
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            return try queue.read { db in
                let problems = try String.fetchAll(db, sql: "PRAGMA quick_check(5)")
                guard problems == ["ok"] else {
                    throw StoreError(.corrupt, corruptionAdvice(path: path, found: problems.joined(separator: "; ")))
                }
                guard try db.tableExists("grdb_migrations") else { return [] }
                let migrator = SQLiteMigrations.migrator(sha256: sha256)
                try refuseUnknownMigrations(migrator, in: db, path: path)
                return try migrator.appliedMigrations(db)
            }
        } catch {
            throw storeError(error, doing: "checking \(path)")
        }
    }

    /// The `synchronous` setting of the connection that writes (2 is FULL), read back from it.
    public func writerSynchronous() throws -> Int {
        try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Device and inode of the database file as opened.
    private let fileIdentity: FileIdentity

    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    private static func fileIdentity(_ path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    public func checkFileIdentity() throws {
        switch Self.fileIdentity(path) {
        case fileIdentity?: return
        case nil: throw StoreError(.vanished, "the database file \(path) was deleted (or its directory was) while it was open")
        case _?: throw StoreError(.vanished, "the database file \(path) was replaced by another file while it was open")
        }
    }

    /// Runs `PRAGMA integrity_check`; returns "ok" when the file is sound.
    public func integrityCheck() throws -> String {
        try pool.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "; ") }
    }

    /// Folds the write-ahead log into the file and rewrites it compactly, leaving one
    /// self-contained file (for fixtures and copies; the service never needs it).
    public func compact() throws {
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            try db.execute(sql: "VACUUM")
        }
    }

    /// The migrations applied so far, in order.
    public func appliedMigrations() throws -> [String] {
        try pool.read { db in try SQLiteMigrations.migrator(sha256: sha256).appliedMigrations(db) }
    }

    // MARK: - Helpers

    /// `mkdir -p`, failing with the directory that could not be made and why, in words.
    private static func createDirectories(_ directory: String) throws {
        var current = ""
        for component in directory.split(separator: "/") {
            current += "/" + component
            // 0777 less the umask, as FileManager creates directories.
            guard mkdir(current, 0o777) != 0 else { continue }
            let failure = errno
            var isDirectory: ObjCBool = false
            if failure == EEXIST, FileManager.default.fileExists(atPath: current, isDirectory: &isDirectory) {
                if isDirectory.boolValue { continue }
                throw StoreError(.unavailable, "cannot create the directory \(current) (a file of that name exists)")
            }
            throw StoreError(.unavailable, "cannot create the directory \(current) (\(String(cString: strerror(failure))))")
        }
    }

    /// Classifies SQLite failures so the service can say what is wrong in plain words.
    static func storeError(_ error: any Error, doing what: String) -> StoreError {
        if let store = error as? StoreError { return store }
        guard let database = error as? DatabaseError else { return StoreError(.other, "\(what): \(error)") }
        switch database.resultCode {
        case .SQLITE_FULL:
            return StoreError(.full, "\(what): the disk (or database) is full")
        case .SQLITE_READONLY:
            return StoreError(.readOnly, "\(what): the database is read-only")
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return StoreError(.corrupt, "\(what): the database file is damaged or not a database (\(database.message ?? "corrupt")); "
                + "stop the service, keep a copy, then restore a backup or recover it with sqlite3's .recover")
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
            return StoreError(.unavailable, "\(what): cannot open the database (\(database.message ?? "permission denied"))")
        case .SQLITE_IOERR:
            return StoreError(.unavailable, "\(what): I/O error (\(database.message ?? "disk?"))")
        default:
            return StoreError(.other, "\(what): \(database.message ?? "\(database)")")
        }
    }
}
