import Foundation
public import TLSAuditPostgres
import TLSAuditProbe
public import TLSAuditStore
import TLSAuditSQLite

/// Where the store is: a SQLite file (the embedded default) or a PostgreSQL database named by a
/// `postgres://` URL (fleet mode). `database:` in the configuration and `--database` take either.
public enum DatabaseLocation: Sendable, Hashable {
    case sqlite(path: String)
    case postgres(PostgresSettings)

    /// A `postgres://` or `postgresql://` URL is PostgreSQL; anything else is a SQLite path.
    public static func isPostgresURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Reads `text` as `database:` or `--database` give it.
    public static func parse(_ text: String) throws(StoreError) -> DatabaseLocation {
        isPostgresURL(text) ? .postgres(try PostgresSettings.parse(url: text)) : .sqlite(path: text)
    }

    /// Opens the store (SQLite: creating the file when `create`; PostgreSQL: the database must
    /// exist, its schema is brought up to date), with the package's one SHA-256. Either refuses a
    /// schema with migrations this version does not know.
    public func open(create: Bool = true) throws -> any ScanStore {
        switch self {
        case .sqlite(let path): try SQLiteScanStore(path: path, create: create, sha256: Digest.sha256Hex)
        case .postgres(let settings): try PostgresScanStore(settings, sha256: Digest.sha256Hex)
        }
    }

    /// For messages: the path, or the URL without secrets.
    public var display: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let settings): settings.display
        }
    }
}
