import Dispatch
import Foundation
import TLSAuditStore

/// PostgreSQL's spelling of the forms `SQLDialect` names.
struct PostgresDialect: SQLDialect {
    var bytewise: String { " COLLATE \"C\"" }
    var addressChangeID: String { "id" }
    // The planner picks the index unasked.
    var scanCountIndex: String { "" }
    /// The database server's clock plus the node's offset to the time: nodes whose clocks
    /// disagree still agree on leases and due times.
    func clock(_ expression: String) -> String { "(extract(epoch FROM now())::float8 + CAST(\(expression) AS float8))" }
    func time(_ date: Date) -> SQLValue { .double(date.timeIntervalSinceNow) }
    func lockSkippingLocked(_ alias: String) -> String { " FOR UPDATE OF \(alias) SKIP LOCKED" }

    /// `json`, not `jsonb`: a cast to json only checks the text, a cast to jsonb converts it (a
    /// 10,000-address report parsed each handshake twice: most of its query time).
    func jsonText(_ json: String, _ path: String...) -> String {
        "((\(json))::json #>> '{\(path.joined(separator: ","))}')"
    }

    func parsedJSON(_ json: String, as alias: String) -> (join: String, reference: String) {
        ("CROSS JOIN LATERAL (SELECT \(json)::json AS document) \(alias)", "\(alias).document")
    }

    func findingMarks(of column: String) -> String {
        "(SELECT string_agg((f.value ->> 'severity') || ' ' || (f.value ->> 'id'), chr(31)) FROM json_array_elements(\(column)::json) AS f)"
    }

    func isIn(_ column: String, _ list: SQLValue) -> SQLFragment {
        let type = if case .ints = list { "bigint" } else { "text" }
        return "\(raw: column) = ANY(CAST(\(list) AS \(raw: type)[]))"
    }

    /// The ids as an array: as a join, the planner hashed all five million references of a
    /// million scans (600 ms) instead of probing the index for the 10,000 current ones (60 ms).
    func isCurrentObservation(_ column: String) -> String { "\(column) = ANY(ARRAY(SELECT last_observation_id FROM target_state))" }

    func newestPerAddress(_ columns: [String], from table: String, where condition: SQLFragment, by order: String) -> SQLFragment {
        """
        SELECT DISTINCT ON (target, address) \(raw: columns.joined(separator: ", ")) FROM \(raw: table) WHERE \(condition)
        ORDER BY target, address, \(raw: order) DESC, id DESC
        """
    }

    /// One query for every key: its newest reached observation by an index probe each.
    func newestReachedPerKey(_ keys: [(target: String, address: String)], startedBy time: Double, reached: String) -> SQLFragment? {
        """
        unnest(CAST(\(.texts(keys.map(\.target))) AS text[]), CAST(\(.texts(keys.map(\.address))) AS text[])) AS k(target, address)
        CROSS JOIN LATERAL (SELECT * FROM observation x WHERE x.target = k.target AND x.address = k.address AND x.started_at <= \(.double(time))
                              AND \(raw: reached)
                            ORDER BY x.started_at DESC, x.id DESC LIMIT 1) o
        """
    }

    /// From the table's sequence (`BIGSERIAL`): concurrent writers never share one.
    func reserveObservationIDs(_ count: Int) -> SQLFragment {
        "SELECT nextval('observation_id_seq') FROM generate_series(1, CAST(\(.of(count)) AS integer))"
    }
}

/// The engine's statements on one libpq connection (`?` numbered `$1`... here).
struct PostgresExecutor: SQLExecutor {
    let connection: PostgresConnection
    var dialect: any SQLDialect { PostgresDialect() }

    /// Prepared once per connection: what the engine executes (writes) is the same few statements over and over.
    @discardableResult
    func execute(_ sql: String, _ values: [SQLValue]) throws -> Int {
        try connection.execute(prepared: PostgresConnection.numbered(sql), values.map(Self.parameter)).affected
    }

    /// Every row in one statement: each column sent as one array and unnested, prepared once.
    @discardableResult
    func execute(_ statement: SQLBatch, rows: [[SQLValue]]) throws -> Int {
        guard !rows.isEmpty else { return 0 }
        let arrays = statement.columns.map { "CAST(? AS \($0.type.rawValue)[])" }.joined(separator: ", ")
        let source = "unnest(\(arrays)) AS u(\(statement.columns.map(\.name).joined(separator: ", ")))"
        let values = statement.columns.indices.map { column in
            PostgresValue.text(PostgresValue.array(rows.lazy.map { Self.parameter($0[column])?.wire }))
        }
        return try connection.execute(prepared: PostgresConnection.numbered(statement.sql(source)), values).affected
    }

    /// Streaming reads run through a cursor, 2,000 rows at a time (memory stays bounded); they
    /// need the snapshot's transaction `SQLDatabase.read(snapshot: true)` opens.
    func query(_ sql: String, _ values: [SQLValue], streaming: Bool, _ body: (any SQLRow) throws -> Void) throws {
        let numbered = PostgresConnection.numbered(sql)
        guard streaming else {
            let rows = try connection.execute(numbered, values.map(Self.parameter))
            for row in 0..<rows.count { try body(PostgresRow(rows: rows, row: row)) }
            return
        }
        try connection.execute("DECLARE engine_rows NO SCROLL CURSOR FOR " + numbered, values.map(Self.parameter))
        defer { _ = try? connection.execute("CLOSE engine_rows") }
        while true {
            let rows = try connection.execute("FETCH 2000 FROM engine_rows")
            if rows.count == 0 { return }
            for row in 0..<rows.count { try body(PostgresRow(rows: rows, row: row)) }
        }
    }

    /// A value as libpq is sent it (nil for NULL).
    static func parameter(_ value: SQLValue) -> PostgresValue? {
        switch value {
        case .null: nil
        case .int(let number): .int(number)
        case .double(let number): .double(number)
        case .text(let text): .text(text)
        case .bytes(let bytes): .bytes(bytes)
        case .texts(let list): .texts(list)
        case .ints(let list): .ints(list)
        case .doubles(let list): .doubles(list)
        }
    }
}

/// One row of a libpq result (text format).
struct PostgresRow: SQLRow {
    let rows: PostgresRows
    let row: Int

    func text(_ column: Int) -> String? { rows.text(row, column: column) }
    func int(_ column: Int) -> Int64? { text(column).flatMap { Int64($0) } }
    func double(_ column: Int) -> Double? { text(column).flatMap { Double($0) } }
    func bytes(_ column: Int) -> [UInt8]? { rows.bytes(row, column: column) }
    func bool(_ column: Int) -> Bool? { text(column).map { $0 == "t" || $0 == "1" } }
    func index(of name: String) -> Int { rows.index(of: name) }
}

/// The pool's connections for the engine. Writes are transactions; snapshot reads are
/// repeatable-read, read-only transactions; other reads run as single statements.
struct PostgresDatabase: SQLDatabase {
    let pool: PostgresPool
    var dialect: any SQLDialect { PostgresDialect() }

    func write<T>(doing what: String, atomic: Bool, _ body: (any SQLExecutor) throws -> T) throws -> T {
        try pool.withConnection { connection in
            guard atomic else { return try body(PostgresExecutor(connection: connection)) }
            return try connection.transaction { try body(PostgresExecutor(connection: connection)) }
        }
    }

    func read<T>(doing what: String, snapshot: Bool, _ body: (any SQLExecutor) throws -> T) throws -> T {
        try pool.withConnection { connection in
            guard snapshot else { return try body(PostgresExecutor(connection: connection)) }
            return try connection.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") {
                try body(PostgresExecutor(connection: connection))
            }
        }
    }

    func sideReads(sharing executor: any SQLExecutor) -> (any SQLSideReads)? {
        guard let main = executor as? PostgresExecutor,
              let snapshot = try? main.connection.execute("SELECT pg_export_snapshot() AS id").text(0, "id") else { return nil }
        return PostgresSideReads(settings: pool.settings, snapshot: snapshot)
    }
}

/// Reads run on a second connection inside the main read transaction's snapshot (exported with
/// `pg_export_snapshot` and imported with `SET TRANSACTION SNAPSHOT`, as pg_dump's workers do):
/// the server counts and fetches there while the client decodes what the main connection read.
/// Without it (the second connection refused), the main connection reads everything itself.
private final class PostgresSideReads: SQLSideReads, @unchecked Sendable {
    // @unchecked: `connection` is used on `queue` only.
    private let connection: PostgresConnection
    private let queue = DispatchQueue(label: "tlsaudit.report.side-reads")

    /// A read started on the side connection; `value()` waits for it.
    private final class Pending<Value>: @unchecked Sendable {
        // @unchecked: `result` is written once before `done` is signalled and read after.
        private var result: Result<Value, any Error>?
        private let done = DispatchSemaphore(value: 0)

        func set(_ result: Result<Value, any Error>) {
            self.result = result
            done.signal()
        }

        func value() throws -> Value {
            done.wait()
            done.signal()
            return try result!.get()
        }
    }

    init?(settings: PostgresSettings, snapshot: String) {
        guard let connection = try? PostgresConnection(settings) else { return nil }
        do {
            try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try connection.execute("SET TRANSACTION SNAPSHOT '\(snapshot.filter { $0.isHexDigit || $0 == "-" })'")
        } catch {
            return nil
        }
        self.connection = connection
    }

    func start<Value>(_ read: @escaping (any SQLExecutor) throws -> Value) -> () throws -> Value {
        let pending = Pending<Value>()
        let box = PostgresConnectionBox(connection: connection)
        nonisolated(unsafe) let read = read
        queue.async { pending.set(Result { try read(PostgresExecutor(connection: box.connection)) }) }
        return pending.value
    }

    func finish() {
        let box = PostgresConnectionBox(connection: connection)
        queue.sync { _ = try? box.connection.execute("COMMIT") }
    }
}
