import Foundation
public import TLSAuditModel
public import TLSAuditStore

/// SQLite as a `StoreBackend`: a `database:` that does not begin with a URL scheme (`name://`) is
/// a SQLite file's path.
public struct SQLiteBackend: StoreBackend {
    private let sha256: SHA256Hex

    /// `sha256`: the package's one SHA-256 (OpenSSL's), for the observations' content hashes.
    public init(sha256: @escaping SHA256Hex) { self.sha256 = sha256 }

    public var name: String { "SQLite" }

    public func claims(_ text: String) -> Bool { StoreBackends.urlScheme(of: text) == nil }

    public func location(_ text: String) throws(StoreError) -> any StoreLocation { SQLiteLocation(path: text, sha256: sha256) }
}

/// One SQLite file.
public struct SQLiteLocation: StoreLocation {
    public let path: String
    let sha256: SHA256Hex

    public var display: String { path }

    public func open(create: Bool) throws -> any ScanStore { try SQLiteScanStore(path: path, create: create, sha256: sha256) }

    public func testConnection() throws -> String {
        guard FileManager.default.fileExists(atPath: path) else { return "\(path): not there yet (serve creates it)" }
        let migrations = try SQLiteScanStore.inspect(path: path, sha256: sha256)
        return "\(path): SQLite, quick_check ok; schema at \(migrations.last ?? "none yet") (\(migrations.count) migration(s))"
    }

    public var checkBeforeFirstCommit: (name: String, run: @Sendable () throws -> Void)? {
        let (path, sha256) = (path, sha256)
        return ("quick_check of \(path)", { _ = try SQLiteScanStore.inspect(path: path, sha256: sha256) })
    }

    public var offersFleet: Bool { false }

    public func watchServers(_ onChange: @escaping @Sendable (DatabaseServer, DatabaseServer?) -> Void) {}

    public func fleet(node: String, vantage: String) -> (any FleetCoordinator)? { nil }

    public func spillBase(stateDirectory: String) -> String { path }
}
