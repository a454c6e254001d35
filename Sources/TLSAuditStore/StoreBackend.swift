import Foundation
import Synchronization
public import TLSAuditModel

/// A kind of database tlsaudit stores into (SQLite files, PostgreSQL servers): it says which
/// `database:` values are its own and reads them. The executable registers the backends it ships
/// (`StoreBackends.register`); the service and the commands know only this protocol.
public protocol StoreBackend: Sendable {
    /// Its name in messages ("SQLite", "PostgreSQL").
    var name: String { get }
    /// Whether `text` (`database:`, `--database`) names one of its databases: a URL scheme it owns,
    /// or, for the backend of plain paths, text without a scheme.
    func claims(_ text: String) -> Bool
    /// Reads `text` (which it claims), throwing what is wrong with it.
    func location(_ text: String) throws(StoreError) -> any StoreLocation
}

/// One database of a backend, as `database:` names it.
public protocol StoreLocation: Sendable {
    /// For messages: the path, or the URL without secrets.
    var display: String { get }
    /// Opens the store, bringing its schema up to date (creating a new database when `create` and
    /// the backend makes its own); refuses a schema with migrations this version does not know.
    func open(create: Bool) throws -> any ScanStore
    /// `check-config --test-connection`: one line on what is there; throws when it cannot be reached
    /// or read.
    func testConnection() throws -> String
    /// A check of the whole database before the service's first commit (SQLite's quick_check,
    /// which reads every page): its name and the check; nil when the backend has none.
    var checkBeforeFirstCommit: (name: String, run: @Sendable () throws -> Void)? { get }
    /// Whether the database coordinates a fleet of nodes (its own file, not a fleet, otherwise).
    var offersFleet: Bool { get }
    /// The fleet's coordination for node `node` at `vantage`; nil when `offersFleet` is false.
    func fleet(node: String, vantage: String) -> (any FleetCoordinator)?
    /// Calls `onChange` whenever a new connection of this process reaches another server than the
    /// last one did (a failover or a switch-over), with the one before (nil at the first); a backend
    /// of local files never calls it.
    func watchServers(_ onChange: @escaping @Sendable (_ server: DatabaseServer, _ previous: DatabaseServer?) -> Void)
    /// Where results wait when they cannot be stored: beside the database file, else a file named
    /// for the backend in `stateDirectory`.
    func spillBase(stateDirectory: String) -> String
}

/// A database server as a connection found it.
public struct DatabaseServer: Sendable, Equatable {
    /// `host:port`.
    public var address: String
    /// `primary`, or `standby` (in recovery: read-only).
    public var role: String

    public init(address: String, role: String) {
        self.address = address
        self.role = role
    }
}

extension StoreLocation {
    /// Opens the store, creating a new database when the backend makes its own.
    public func open() throws -> any ScanStore { try open(create: true) }
}

/// The backends tlsaudit knows, in the order they were registered: the first that claims a
/// `database:` value reads it.
public enum StoreBackends {
    private static let registered = Mutex<[any StoreBackend]>([])

    /// Adds `backend` (again: replaces the one of the same name).
    public static func register(_ backend: any StoreBackend) {
        registered.withLock { backends in
            backends.removeAll { $0.name == backend.name }
            backends.append(backend)
        }
    }

    /// The URL scheme `text` starts with (`postgres` for `postgres://...`), nil for a path: a
    /// letter, then letters, digits, `+`, `-` or `.`, then `://` (RFC 3986's scheme).
    public static func urlScheme(of text: String) -> String? {
        guard let end = text.range(of: "://") else { return nil }
        let scheme = text[..<end.lowerBound]
        guard let first = scheme.first, first.isASCII, first.isLetter,
              scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) else { return nil }
        return String(scheme)
    }

    /// The names of the backends registered.
    public static var names: [String] { registered.withLock { $0.map(\.name) } }

    /// The database `text` names, read by the backend that claims it.
    public static func location(_ text: String) throws(StoreError) -> any StoreLocation {
        let backend = registered.withLock { $0.first { $0.claims(text) } }
        guard let backend else {
            let names = Self.names
            throw StoreError(.unavailable, names.isEmpty
                ? "no store backend is registered (the program must register its backends first)"
                : "no store backend takes '\(text)' (known: \(names.joined(separator: ", ")); a path is a SQLite file, a URL names its backend by its scheme)")
        }
        return try backend.location(text)
    }

    /// The backend that claims `text`, nil when none does.
    public static func backend(of text: String) -> (any StoreBackend)? {
        registered.withLock { $0.first { $0.claims(text) } }
    }

    /// Whether `text` names a database that coordinates a fleet (false when no backend reads it).
    public static func offersFleet(_ text: String) -> Bool {
        (try? location(text))?.offersFleet ?? false
    }
}

/// A fleet's coordination (the PostgreSQL backend's `PostgresFleet`): the configuration's versions,
/// the nodes' heartbeats and the work queue with its leases. The service's `FleetWork` calls it
/// from queues of its own (every call may block on the database).
public protocol FleetCoordinator: Sendable {
    /// Stores a new configuration version with its targets' work rows; the version's number.
    /// `onlyIfFirst`: only when there is none yet (a node's own file at the fleet's first start).
    func apply(document: String, sha256: String, targets: [FleetTarget], appliedBy: String, onlyIfFirst: Bool) throws -> Int64
    /// Adds the work rows a vantage joining late needs (one per target and vantage).
    func ensureRows(forEveryVantageOf targets: [FleetTarget]) throws
    func latestConfiguration() throws -> FleetConfigurationVersion?
    func latestVersion() throws -> Int64?
    /// Waits up to `timeout` seconds for a new configuration version to be announced; true when one was.
    func waitForConfiguration(timeout: Double) -> Bool
    /// Records this node alive (taking its name at the start); throws `FleetNameConflict` when
    /// another live process holds the name.
    func heartbeat(_ beat: FleetHeartbeat, starting: Bool, replacing: Bool, process: String) throws
    /// The live nodes and the due times changed since `since` (server time).
    func view(changedSince since: Double) throws -> FleetView
    /// Whether the database answers.
    func ping() throws
    /// Claims up to `limit` due scans under leases of `lease` seconds, within the per-host cap.
    func claim(limit: Int, perHostCap: Int, lease: Double) throws -> FleetClaims
    /// Writes finished scans' next due times and releases their leases.
    func complete(_ completions: [FleetCompletion]) throws
    /// Gives claims back unscanned.
    func release(_ claims: [FleetClaim]) throws
    /// Renews the leases of scans in flight.
    func renew(_ claims: [FleetClaim], lease: Double) throws
    /// Statements and bytes this process exchanged with the database so far (the statistics at the stop).
    var traffic: (statements: Int, sent: Int, received: Int) { get }
}
