public import Foundation

/// The small interface the store engine (`StoreEngine`) runs over: a backend gives it
/// transactions (`SQLDatabase`), statements with bound values and rows (`SQLExecutor`), and the
/// few SQL forms its dialect spells its own way (`SQLDialect`). Everything else (what a scan
/// writes, how results, alerts, report runs and report facts are read) lives once, in the engine.

/// A value bound to a statement's parameter (never interpolated into the SQL).
public enum SQLValue: Sendable, Hashable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case bytes([UInt8])
    /// A list for ``SQLDialect/isIn(_:_:)`` (one parameter however long the list).
    case texts([String])
    case ints([Int64])
    case doubles([Double])

    /// An optional value: NULL for nil.
    public static func of(_ value: String?) -> SQLValue { value.map { .text($0) } ?? .null }
    public static func of(_ value: Int?) -> SQLValue { value.map { .int(Int64($0)) } ?? .null }
    public static func of(_ value: Int64?) -> SQLValue { value.map { .int($0) } ?? .null }
    public static func of(_ value: Double?) -> SQLValue { value.map { .double($0) } ?? .null }
    public static func of(_ value: Bool) -> SQLValue { .int(value ? 1 : 0) }
    /// A time as stored: seconds since 1970.
    public static func time(_ date: Date) -> SQLValue { .double(date.timeIntervalSince1970) }
}

/// One row of a result, read by column index (in the statement's order) or by name.
public protocol SQLRow {
    func text(_ column: Int) -> String?
    func int(_ column: Int) -> Int64?
    func double(_ column: Int) -> Double?
    func bytes(_ column: Int) -> [UInt8]?
    /// A boolean expression's value (SQLite: 0 / 1; PostgreSQL: f / t); nil for NULL.
    func bool(_ column: Int) -> Bool?
    /// The index of the first column called `name`.
    func index(of name: String) -> Int
}

extension SQLRow {
    public func text(_ name: String) -> String? { text(index(of: name)) }
    public func int(_ name: String) -> Int64? { int(index(of: name)) }
    public func double(_ name: String) -> Double? { double(index(of: name)) }
    public func bytes(_ name: String) -> [UInt8]? { bytes(index(of: name)) }
    public func bool(_ name: String) -> Bool? { bool(index(of: name)) }
    public func integer(_ name: String) -> Int { Int(int(name) ?? 0) }
    public func date(_ name: String) -> Date { Date(timeIntervalSince1970: double(name) ?? 0) }
}

/// Runs statements on one connection inside the transaction (or snapshot) it was handed out for.
/// SQL is written with `?` placeholders; a backend that numbers them (`$1`) does so itself.
public protocol SQLExecutor {
    var dialect: any SQLDialect { get }
    /// Runs a statement; returns the rows it changed (INSERT, UPDATE, DELETE).
    @discardableResult
    func execute(_ sql: String, _ values: [SQLValue]) throws -> Int
    /// Runs a query and calls `body` with each row, valid only during the call. With `streaming`,
    /// the backend reads the rows in bounded batches (a cursor) rather than all at once.
    func query(_ sql: String, _ values: [SQLValue], streaming: Bool, _ body: (any SQLRow) throws -> Void) throws
    /// Runs `statement` for every row of `rows` (each in `statement.columns`' order): PostgreSQL
    /// sends them all in one round trip (a column array each, unnested), SQLite runs its one
    /// prepared statement row by row. Returns the rows changed.
    @discardableResult
    func execute(_ statement: SQLBatch, rows: [[SQLValue]]) throws -> Int
}

/// A statement run over many rows at once (`SQLExecutor.execute(_:rows:)`): `sql` is given the
/// row source to select from, a table expression named `u` whose columns are `columns`' names.
public struct SQLBatch: Sendable {
    public struct Column: Sendable {
        public var name: String
        public var type: SQLColumnType

        public init(_ name: String, _ type: SQLColumnType) {
            self.name = name
            self.type = type
        }
    }

    public var columns: [Column]
    public var sql: @Sendable (_ rows: String) -> String

    /// `columns` as `name:type` (`text`, `bigint`, `double`, `bytes`), and the statement around the row source.
    public init(_ columns: [Column], sql: @escaping @Sendable (_ rows: String) -> String) {
        self.columns = columns
        self.sql = sql
    }

    /// `INSERT INTO table (columns) SELECT ... FROM rows` followed by `suffix` (an ON CONFLICT clause).
    public static func insert(into table: String, _ columns: [Column], _ suffix: String = "") -> SQLBatch {
        let names = columns.map(\.name).joined(separator: ", ")
        // `WHERE true`: SQLite reads an ON CONFLICT after a bare SELECT's FROM as a join constraint.
        return SQLBatch(columns) { rows in "INSERT INTO \(table) (\(names)) SELECT \(names) FROM \(rows) WHERE true \(suffix)" }
    }
}

/// The type of a column of `SQLBatch` rows (PostgreSQL casts each column's array to it).
public enum SQLColumnType: String, Sendable {
    case text
    case bigint
    case double = "float8"
    case bytes = "bytea"
}

extension SQLExecutor {
    /// Runs a statement and its values; returns the rows it changed.
    @discardableResult
    public func execute(_ statement: SQLFragment) throws -> Int { try execute(statement.text, statement.values) }

    /// Runs a query and its values (see ``query(_:_:streaming:_:)``).
    public func query(_ statement: SQLFragment, streaming: Bool, _ body: (any SQLRow) throws -> Void) throws {
        try query(statement.text, statement.values, streaming: streaming, body)
    }

    /// The rows of a query and its values, each turned into a value by `transform`.
    public func rows<T>(_ statement: SQLFragment, _ transform: (any SQLRow) throws -> T) throws -> [T] {
        try rows(statement.text, statement.values, transform)
    }

    /// The first row of a query and its values turned into a value, nil when there is none.
    public func first<T>(_ statement: SQLFragment, _ transform: (any SQLRow) throws -> T) throws -> T? {
        try first(statement.text, statement.values, transform)
    }

    /// Whether a query and its values return any row.
    public func exists(_ statement: SQLFragment) throws -> Bool { try exists(statement.text, statement.values) }

    /// The rows of a query, each turned into a value by `transform`.
    public func rows<T>(_ sql: String, _ values: [SQLValue] = [], _ transform: (any SQLRow) throws -> T) throws -> [T] {
        var found: [T] = []
        try query(sql, values, streaming: false) { found.append(try transform($0)) }
        return found
    }

    /// The first row of a query turned into a value, nil when there is none.
    public func first<T>(_ sql: String, _ values: [SQLValue] = [], _ transform: (any SQLRow) throws -> T) throws -> T? {
        var found: T?
        try query(sql, values, streaming: false) { row in
            if found == nil { found = try transform(row) }
        }
        return found
    }

    /// Whether a query returns any row.
    public func exists(_ sql: String, _ values: [SQLValue] = []) throws -> Bool {
        try first(sql, values) { _ in true } ?? false
    }
}

/// The SQL forms the two dialects spell differently. Everything else the engine writes is the
/// SQL both share (upserts with `ON CONFLICT`, `RETURNING`, window-free joins).
public protocol SQLDialect: Sendable {
    /// What follows a text column in ORDER BY to sort it bytewise ("" where that is the default).
    var bytewise: String { get }
    /// The name of `address_change`'s row id.
    var addressChangeID: String { get }
    /// What follows `FROM observation` to count a period's scans by the (started_at, status,
    /// target) index ("" where the planner picks it unasked).
    var scanCountIndex: String { get }
    /// What follows a SELECT (from `alias`) to lock its rows for the transaction, skipping rows
    /// another transaction holds ("" where one writer at a time is the rule anyway).
    func lockSkippingLocked(_ alias: String) -> String
    /// The SQL of a time held by the SQL expression `expression` (a column of ``time(_:)``
    /// values). On PostgreSQL the database server's clock plus an offset (nodes whose clocks
    /// disagree still agree on leases), on SQLite the time itself. A time the code holds goes
    /// through ``clock(_:)-(Date)``, which binds it.
    func clock(_ expression: String) -> String
    /// The value stored for `date` where ``clock(_:)-(String)`` reads it.
    func time(_ date: Date) -> SQLValue
    /// The text at `path` (keys) inside the JSON text `json`.
    func jsonText(_ json: String, _ path: String...) -> String
    /// `json` parsed once for several ``jsonText(_:_:)`` reads: a join to append after the FROM
    /// clause (or "") and the expression to read from.
    func parsedJSON(_ json: String, as alias: String) -> (join: String, reference: String)
    /// A verdict's findings (`column`, a JSON array) as `severity id` pairs joined by char(31),
    /// read without decoding the findings (`FindingMarks`).
    func findingMarks(of column: String) -> String
    /// `column` is one of `list` (`.texts` or `.ints`), bound as one value however long.
    func isIn(_ column: String, _ list: SQLValue) -> SQLFragment
    /// `column` names an address's current observation (`target_state.last_observation_id`).
    func isCurrentObservation(_ column: String) -> String
    /// The newest row per (target, address) of `table` matching `condition`, by `order` (an
    /// expression of its columns) then row id: `columns` in order, and perhaps one more after them.
    func newestPerAddress(_ columns: [String], from table: String, where condition: SQLFragment, by order: String) -> SQLFragment
    /// For `lastReachableScans`: a FROM source naming each of `keys`' newest observation `o`
    /// started by `time` for which `reached` (an expression of `x`, the observation) holds, or
    /// nil to ask key by key.
    func newestReachedPerKey(_ keys: [(target: String, address: String)], startedBy time: Double, reached: String) -> SQLFragment?
    /// A query returning `count` new observation ids, none of which another writer gets
    /// (inserted with them later in the same transaction).
    func reserveObservationIDs(_ count: Int) -> SQLFragment
}

/// A backend's connections: transactions and snapshots to run the engine's statements in.
public protocol SQLDatabase: Sendable {
    var dialect: any SQLDialect { get }
    /// Runs `body` in one write transaction: committed when it returns, rolled back when it
    /// throws. Without `atomic`, a single statement may run on its own (no BEGIN/COMMIT).
    /// Errors come back as `StoreError`, saying they happened `doing` what.
    func write<T>(doing what: String, atomic: Bool, _ body: (any SQLExecutor) throws -> T) throws -> T
    /// Runs `body` reading; with `snapshot`, in one consistent read-only snapshot (required for
    /// streaming queries).
    func read<T>(doing what: String, snapshot: Bool, _ body: (any SQLExecutor) throws -> T) throws -> T
    /// A second connection reading the same snapshot as `executor`'s (reads run beside the main
    /// ones, as pg_dump's workers do), or nil.
    func sideReads(sharing executor: any SQLExecutor) -> (any SQLSideReads)?
}

extension SQLDatabase {
    public func sideReads(sharing executor: any SQLExecutor) -> (any SQLSideReads)? { nil }

    func write<T>(doing what: String, _ body: (any SQLExecutor) throws -> T) throws -> T {
        try write(doing: what, atomic: true, body)
    }
}

/// Reads started on a second connection sharing a snapshot; `finish` waits for them and ends it.
public protocol SQLSideReads: AnyObject {
    /// Starts `read`; the returned function waits for its value.
    func start<Value>(_ read: @escaping (any SQLExecutor) throws -> Value) -> () throws -> Value
    func finish()
}

extension SQLDialect {
    /// The newest row per (target, address) of `table` matching `condition`, by start time.
    func newestPerAddress(_ columns: [String], from table: String, where condition: SQLFragment) -> SQLFragment {
        newestPerAddress(columns, from: table, where: condition, by: "started_at")
    }

    /// The SQL of `date` (``clock(_:)-(String)`` of the bound ``time(_:)``).
    public func clock(_ date: Date) -> SQLFragment { SQLFragment(clock("?"), [time(date)]) }
}
