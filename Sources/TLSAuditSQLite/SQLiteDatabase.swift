import TLSAuditStore
import Foundation
import GRDB

/// SQLite's spelling of the forms `SQLDialect` names.
struct SQLiteDialect: SQLDialect {
    // SQLite compares text bytewise unless told otherwise.
    var bytewise: String { "" }
    var addressChangeID: String { "rowid" }
    var scanCountIndex: String { "INDEXED BY observation_time_status" }
    /// One node per file: the node's own clock.
    func clock(_ expression: String) -> String { expression }
    func time(_ date: Date) -> SQLValue { .time(date) }
    // One writer at a time: nothing to skip.
    func lockSkippingLocked(_ alias: String) -> String { "" }

    func jsonText(_ json: String, _ path: String...) -> String {
        "json_extract(\(json), '$.\(path.joined(separator: "."))')"
    }

    func parsedJSON(_ json: String, as alias: String) -> (join: String, reference: String) { ("", json) }

    func findingMarks(of column: String) -> String {
        "(SELECT group_concat(json_extract(f.value, '$.severity') || ' ' || json_extract(f.value, '$.id'), char(31)) FROM json_each(\(column)) AS f)"
    }

    /// The list is bound as a JSON array.
    func isIn(_ column: String, _ list: SQLValue) -> SQLFragment { "\(raw: column) IN (SELECT value FROM json_each(\(list)))" }

    func isCurrentObservation(_ column: String) -> String { "\(column) IN (SELECT last_observation_id FROM target_state)" }

    /// SQLite takes the bare columns from the row with the max.
    func newestPerAddress(_ columns: [String], from table: String, where condition: SQLFragment, by order: String) -> SQLFragment {
        "SELECT \(raw: columns.joined(separator: ", ")), max(\(raw: order)) AS newest FROM \(raw: table) WHERE \(condition) GROUP BY target, address"
    }

    /// In the process, a query per key costs no round trip.
    func newestReachedPerKey(_ keys: [(target: String, address: String)], startedBy time: Double, reached: String) -> SQLFragment? { nil }

    /// One writer at a time: the ids after the largest, inside the write transaction.
    func reserveObservationIDs(_ count: Int) -> SQLFragment {
        """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(.of(count)))
        SELECT (SELECT coalesce(max(id), 0) FROM observation) + i FROM n
        """
    }
}

/// The engine's statements on one GRDB connection (statements cached per connection).
struct SQLiteExecutor: SQLExecutor {
    let db: Database
    var dialect: any SQLDialect { SQLiteDialect() }

    @discardableResult
    func execute(_ sql: String, _ values: [SQLValue]) throws -> Int {
        try db.cachedStatement(sql: sql).execute(arguments: Self.arguments(values))
        return db.changesCount
    }

    /// One prepared statement (cached on the connection) run row by row: in-process, a row costs no round trip.
    @discardableResult
    func execute(_ statement: SQLBatch, rows: [[SQLValue]]) throws -> Int {
        guard !rows.isEmpty else { return 0 }
        let source = "(SELECT " + statement.columns.map { "? AS \($0.name)" }.joined(separator: ", ") + ") AS u"
        let prepared = try db.cachedStatement(sql: statement.sql(source))
        var changed = 0
        for row in rows {
            try prepared.execute(arguments: Self.arguments(row))
            changed += db.changesCount
        }
        return changed
    }

    func query(_ sql: String, _ values: [SQLValue], streaming: Bool, _ body: (any SQLRow) throws -> Void) throws {
        let statement = try db.cachedStatement(sql: sql)
        // By name once per query: GRDB's Row.columnNames reads each column's value on the way.
        let columns = Dictionary(statement.columnNames.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let cursor = try Row.fetchCursor(statement, arguments: Self.arguments(values))
        while let row = try cursor.next() { try body(SQLiteRow(row: row, columns: columns)) }
    }

    /// The values as GRDB binds them. (Built from existentials on purpose: GRDB's initializer for a
    /// sequence of one concrete type maps it with a key path, which the runtime resolves on each
    /// call: a quarter of the write path's CPU.)
    private static func arguments(_ values: [SQLValue]) throws -> StatementArguments {
        StatementArguments(try values.map { value -> (any DatabaseValueConvertible)? in
            switch value {
            case .null: nil
            case .int(let number): number
            case .double(let number): number
            case .text(let text): text
            case .bytes(let bytes): Data(bytes)
            case .texts(let list): try StoredValues.json(list)
            case .ints(let list): try StoredValues.json(list)
            case .doubles(let list): try StoredValues.json(list)
            }
        })
    }
}

/// A GRDB row (valid while its cursor is on it), read leniently: SQLite keeps whatever type a
/// value was written with, so each accessor converts rather than trapping on a mismatch.
struct SQLiteRow: SQLRow {
    let row: Row
    /// The query's column indexes by name.
    let columns: [String: Int]

    private func value(_ column: Int) -> DatabaseValue.Storage { (row[column] as DatabaseValue).storage }

    func text(_ column: Int) -> String? {
        switch value(column) {
        case .null: nil
        case .string(let text): text
        case .int64(let number): String(number)
        case .double(let number): String(number)
        case .blob(let data): String(decoding: data, as: UTF8.self)
        }
    }

    func int(_ column: Int) -> Int64? {
        switch value(column) {
        case .int64(let number): number
        case .double(let number): Int64(exactly: number)
        case .string(let text): Int64(text)
        case .null, .blob: nil
        }
    }

    func double(_ column: Int) -> Double? {
        switch value(column) {
        case .double(let number): number
        case .int64(let number): Double(number)
        case .string(let text): Double(text)
        case .null, .blob: nil
        }
    }

    func bytes(_ column: Int) -> [UInt8]? {
        switch value(column) {
        case .blob(let data): Array(data)
        case .string(let text): Array(text.utf8)
        case .null, .int64, .double: nil
        }
    }

    func bool(_ column: Int) -> Bool? { int(column).map { $0 != 0 } }

    func index(of name: String) -> Int {
        guard let index = columns[name] else {
            preconditionFailure("no column \(name) in the result (\(row.columnNames.joined(separator: ", ")))")
        }
        return index
    }
}

/// The SQLite file's connections for the engine: GRDB's pool (`SQLitePool`): one writer,
/// readers on snapshots.
struct SQLiteDatabase: SQLDatabase {
    let pool: SQLitePool
    var dialect: any SQLDialect { SQLiteDialect() }

    func write<T>(doing what: String, atomic: Bool, _ body: (any SQLExecutor) throws -> T) throws -> T {
        do {
            return try pool.write { db in try body(SQLiteExecutor(db: db)) }
        } catch {
            throw SQLiteScanStore.storeError(error, doing: what)
        }
    }

    // GRDB's reads are always a snapshot (a deferred transaction).
    func read<T>(doing what: String, snapshot: Bool, _ body: (any SQLExecutor) throws -> T) throws -> T {
        do {
            return try pool.read { db in try body(SQLiteExecutor(db: db)) }
        } catch {
            throw SQLiteScanStore.storeError(error, doing: what)
        }
    }
}
