import Foundation
public import TLSAuditModel
public import TLSAuditStore

/// The store on PostgreSQL, for fleets of scanners: the same `ScanStore` as SQLite (it passes the
/// same conformance suite), the same named migrations, the same JSON documents as text. Every
/// statement runs with bind parameters and under `statement_timeout`; connections come from a
/// small pool and are opened again after the server restarts.
public final class PostgresScanStore: EngineBackedStore, Sendable {
    public let settings: PostgresSettings
    public var displayLocation: String { settings.display }
    let pool: PostgresPool
    /// The store's logic (`StoreEngine`) over this database's connections, with the fleet's
    /// fencing: a scan whose claim no longer stands is not stored.
    public let engine: StoreEngine

    /// Connects to the database `settings` names and brings its schema up to date (once for the
    /// whole fleet: an advisory lock); a schema from a newer tlsaudit is refused.
    public init(_ settings: PostgresSettings, sha256: @escaping SHA256Hex) throws {
        self.settings = settings
        pool = PostgresPool(settings)
        engine = StoreEngine(database: PostgresDatabase(pool: pool), sha256: sha256, standingFences: Self.standingFences)
        try pool.withConnection { try PostgresMigrations.migrate($0) }
    }

    /// `init` from a `postgres://` URL.
    public convenience init(url: String, sha256: @escaping SHA256Hex) throws {
        try self.init(try PostgresSettings.parse(url: url), sha256: sha256)
    }

    public func appliedMigrations() throws -> [String] {
        try pool.withConnection { try PostgresMigrations.appliedMigrations($0) }
    }

    /// The fences whose claim still stands: the work row's newest claim, or the claim whose
    /// completion was written (its result may reach the store after that). The rows are locked
    /// (`FOR SHARE`, in the fleet's one lock order) until the transaction ends, so no claim slips in
    /// between the check and the write. A fence whose row is gone (the target left the fleet, or
    /// its vantages changed) does not stand: its result would bring back a target no longer scanned.
    @Sendable private static func standingFences(_ fences: Set<ScanFence>, in sql: any SQLExecutor) throws -> Set<ScanFence> {
        let list = Array(fences)
        return Set(try sql.rows("""
            SELECT w.target, w.vantage, c.epoch FROM fleet_work w
            JOIN unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[])) AS c(target, vantage, epoch)
              ON w.target = c.target AND w.vantage = c.vantage AND (w.lease_epoch = c.epoch OR w.done_epoch = c.epoch)
            ORDER BY w.target COLLATE "C", w.vantage COLLATE "C" FOR SHARE OF w
            """, [.texts(list.map(\.workTarget)), .texts(list.map(\.workVantage)), .ints(list.map(\.epoch))]) { row in
            ScanFence(workTarget: row.text(0) ?? "", workVantage: row.text(1) ?? "", epoch: row.int(2) ?? -1)
        })
    }
}

extension PostgresScanStore {
    /// What `check-config --test-connection` reports: the server's version and the migrations the
    /// database has (none before the first node starts), without changing anything.
    public static func testConnection(_ settings: PostgresSettings) throws -> (server: String, migrations: [String]) {
        let connection = try PostgresConnection(settings)
        let version = try connection.execute("SHOW server_version").text(0, "server_version") ?? "?"
        let exists = try connection.execute("SELECT to_regclass('tlsaudit_migration') IS NOT NULL AS present").bool(0, "present") ?? false
        let migrations = exists ? try PostgresMigrations.appliedMigrations(connection) : []
        try PostgresMigrations.refuseUnknown(migrations, display: settings.display)
        return (version, migrations)
    }
}
