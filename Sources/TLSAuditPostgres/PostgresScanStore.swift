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

    /// What each fence's claim is now (`StoreEngine.FenceStanding`): current when it is the work
    /// row's newest claim (its result may reach the store after its completion: the next claim
    /// changes the epoch); superseded when its completion was not written before the lease lapsed
    /// and something took the row over (`lost_epochs`: another node's claim, or its scan made
    /// while PostgreSQL was down), and a result of the target newer than the fence's scans is
    /// stored; else expired, its results stored by their time, never over a newer state: a
    /// writer that retried through an outage, a one-node fleet, or a claim completed under its
    /// lease whose writer came after the next claim's (two nodes' writers are not ordered) loses
    /// nothing. (`done_epoch`, the claim completed last, is still written for nodes of an older
    /// version in the same fleet, which count it as current.) The rows are locked
    /// (`FOR SHARE`, in the fleet's one lock order) until the transaction ends, so no claim slips in
    /// between the check and the write. A fence whose row is gone (the target left the fleet, or
    /// its vantages changed) is superseded: its result would bring back a target no longer scanned.
    @Sendable private static func standingFences(_ fences: [ScanFence: Double], in sql: any SQLExecutor) throws -> [ScanFence: StoreEngine.FenceStanding] {
        let list = Array(fences)
        var answers: [ScanFence: StoreEngine.FenceStanding] = [:]
        try sql.query("""
            SELECT c.target, c.vantage, c.epoch,
                w.lease_epoch = c.epoch AND NOT c.epoch = ANY(w.lost_epochs) AS current,
                c.epoch = ANY(w.lost_epochs)
                    AND EXISTS (SELECT 1 FROM target_state s WHERE s.target = c.target AND s.last_scan_at > c.newest) AS superseded
            FROM fleet_work w
            JOIN unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), CAST(? AS float8[])) AS c(target, vantage, epoch, newest)
              ON w.target = c.target AND w.vantage = c.vantage
            ORDER BY w.target COLLATE "C", w.vantage COLLATE "C" FOR SHARE OF w
            """, [.texts(list.map(\.key.workTarget)), .texts(list.map(\.key.workVantage)), .ints(list.map(\.key.epoch)),
                  .doubles(list.map(\.value))], streaming: false) { row in
            let fence = ScanFence(workTarget: row.text(0) ?? "", workVantage: row.text(1) ?? "", epoch: row.int(2) ?? -1)
            answers[fence] = row.bool(3) == true ? .current : row.bool(4) == true ? .superseded : .expired
        }
        return answers
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
