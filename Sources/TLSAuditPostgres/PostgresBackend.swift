import Foundation
public import TLSAuditModel
public import TLSAuditStore

/// PostgreSQL as a `StoreBackend`: `postgres://` and `postgresql://` URLs; its databases
/// coordinate fleets (`PostgresFleet`).
public struct PostgresBackend: StoreBackend {
    private let sha256: SHA256Hex

    /// `sha256`: the package's one SHA-256 (OpenSSL's), for the observations' content hashes.
    public init(sha256: @escaping SHA256Hex) { self.sha256 = sha256 }

    public var name: String { "PostgreSQL" }

    public func claims(_ text: String) -> Bool { text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") }

    public func location(_ text: String) throws(StoreError) -> any StoreLocation {
        PostgresLocation(settings: try PostgresSettings.parse(url: text), sha256: sha256)
    }
}

/// One PostgreSQL database (the server or servers its URL names).
public struct PostgresLocation: StoreLocation {
    public let settings: PostgresSettings
    let sha256: SHA256Hex

    public var display: String { settings.display }

    public func open(create: Bool) throws -> any ScanStore { try PostgresScanStore(settings, sha256: sha256) }

    public func testConnection() throws -> String {
        let (server, migrations) = try PostgresScanStore.testConnection(settings)
        let schema = migrations.isEmpty ? "no tlsaudit schema yet (the first node creates it)"
            : "schema at \(migrations.last ?? "?") (\(migrations.count) migration(s))"
        return "\(settings.display): connected, PostgreSQL \(server); \(schema)"
    }

    public var checkBeforeFirstCommit: (name: String, run: @Sendable () throws -> Void)? { nil }

    public var offersFleet: Bool { true }

    public func watchServers(_ onChange: @escaping @Sendable (DatabaseServer, DatabaseServer?) -> Void) {
        PostgresServerWatch.onChange(onChange)
    }

    public func fleet(node: String, vantage: String) -> (any FleetCoordinator)? {
        PostgresFleet(settings, node: node, vantage: vantage)
    }

    public func spillBase(stateDirectory: String) -> String {
        URL(fileURLWithPath: stateDirectory).appendingPathComponent("tlsaudit-postgres").path
    }
}

extension PostgresFleet: FleetCoordinator {
    public var traffic: (statements: Int, sent: Int, received: Int) { PostgresTraffic.totals }
}
