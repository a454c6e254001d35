import CLibPQ
import Foundation
import Synchronization
public import TLSAuditStore
import TLSAuditSupport

/// Where a PostgreSQL store lives and how to reach it. No password is ever written in a
/// configuration: it is read from `passwordFile` (or libpq's own `~/.pgpass` / `PGPASSWORD`).
public struct PostgresSettings: Sendable, Hashable {
    /// The first server (the only one, but for a URL naming several).
    public var host: String
    public var port: Int
    /// Every server the URL names, in order (`postgres://h1:p1,h2:p2/db`): libpq tries them in turn
    /// and keeps the first that fits `targetSessionAttrs`, so a node follows a promoted standby.
    public var servers: [Server]
    /// libpq's `target_session_attrs` (`read-write` finds the primary; `prefer-standby` suits
    /// read-only commands); nil: libpq's default, any server that answers.
    public var targetSessionAttrs: String?

    /// One server of a URL: a host name or address, and its port.
    public struct Server: Sendable, Hashable {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, `[v6]:port`.
        public var display: String { HostText.withPort(host, port) }
    }

    /// The target_session_attrs values libpq 14 and later take.
    public static let sessionAttributes = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"]
    public var database: String
    public var user: String
    public var passwordFile: String?
    /// libpq's sslmode: `disable`, `require`, `verify-ca`, `verify-full` (the default for a host that
    /// is not a Unix socket directory or loopback).
    public var sslMode: String
    /// The CA certificates the server's certificate must chain to (`sslrootcert`).
    public var caFile: String?
    /// Connections kept open at most.
    public var poolSize: Int
    /// Every statement ends after this long (`statement_timeout`), and a connection attempt too.
    public var statementTimeout: Double

    public init(host: String, port: Int = 5432, database: String, user: String, passwordFile: String? = nil,
                sslMode: String? = nil, caFile: String? = nil, poolSize: Int = 4, statementTimeout: Double = 30) {
        self.host = host
        self.port = port
        servers = [Server(host: host, port: port)]
        self.database = database
        self.user = user
        self.passwordFile = passwordFile
        self.sslMode = sslMode ?? (host.hasPrefix("/") || ["127.0.0.1", "::1", "localhost"].contains(host) ? "prefer" : "verify-full")
        self.caFile = caFile
        self.poolSize = poolSize
        self.statementTimeout = statementTimeout
    }

    /// The sslmode values libpq knows.
    public static let sslModes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

    /// Parses `postgres://USER@HOST:PORT/DATABASE?sslmode=...&sslrootcert=...&password_file=...&pool_size=...`
    /// (`postgresql://` too). A password in the URL is refused: it would sit in the configuration in clear.
    /// Several servers are written as libpq takes them (`HOST1:PORT1,HOST2:PORT2`), with `target_session_attrs`.
    public static func parse(url text: String) throws(StoreError) -> PostgresSettings {
        let (single, servers) = try splitServers(text)
        guard let components = URLComponents(string: single), ["postgres", "postgresql"].contains(components.scheme ?? "") else {
            throw StoreError(.unavailable, "\(text): not a postgres:// URL")
        }
        guard components.password == nil else {
            throw StoreError(.unavailable, "the postgres:// URL holds a password: put it in a file and name it with password_file=PATH")
        }
        guard let host = components.host, !host.isEmpty else { throw StoreError(.unavailable, "\(text): no host") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty else { throw StoreError(.unavailable, "\(text): no database name (postgres://USER@HOST/DATABASE)") }
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] { query[item.name] = item.value ?? "" }
        let known: Set = ["sslmode", "sslrootcert", "password_file", "pool_size", "statement_timeout", "target_session_attrs"]
        if let unknown = query.keys.sorted().first(where: { !known.contains($0) }) {
            throw StoreError(.unavailable, "\(text): unknown parameter '\(unknown)' (known: \(known.sorted().joined(separator: ", ")))")
        }
        if let mode = query["sslmode"], !sslModes.contains(mode) {
            throw StoreError(.unavailable, "sslmode '\(mode)' is not one of \(sslModes.joined(separator: ", "))")
        }
        if let attributes = query["target_session_attrs"], !sessionAttributes.contains(attributes) {
            throw StoreError(.unavailable, "target_session_attrs '\(attributes)' is not one of \(sessionAttributes.joined(separator: ", "))")
        }
        var settings = PostgresSettings(host: host, port: components.port ?? 5432, database: database,
                                        user: components.user ?? NSUserName(), passwordFile: query["password_file"],
                                        sslMode: query["sslmode"], caFile: query["sslrootcert"])
        if servers.count > 1 {
            settings.servers = servers
            let loopback = servers.allSatisfy { $0.host.hasPrefix("/") || ["127.0.0.1", "::1", "localhost"].contains($0.host) }
            if query["sslmode"] == nil { settings.sslMode = loopback ? "prefer" : "verify-full" }
        }
        settings.targetSessionAttrs = query["target_session_attrs"]
        if let size = query["pool_size"] {
            guard let value = Int(size), (1...64).contains(value) else { throw StoreError(.unavailable, "pool_size must be from 1 to 64") }
            settings.poolSize = value
        }
        if let timeout = query["statement_timeout"] {
            guard let value = Double(timeout), (0.1...3600).contains(value) else {
                throw StoreError(.unavailable, "statement_timeout must be from 0.1 to 3600 seconds")
            }
            settings.statementTimeout = value
        }
        return settings
    }

    /// The URL with its server list replaced by the first server, for URLComponents, and the
    /// servers (`HOST[:PORT]`, an IPv6 address in brackets, 5432 when no port is given); no
    /// servers for a URL naming one.
    private static func splitServers(_ text: String) throws(StoreError) -> (String, [Server]) {
        guard let schemeEnd = text.range(of: "://") else { return (text, []) }
        let rest = text[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let at = authority.lastIndex(of: "@")
        let userInfo = at.map { authority[...$0] } ?? ""
        let list = at.map { authority[authority.index(after: $0)...] } ?? authority
        guard list.contains("," as Character) else { return (text, []) }
        var servers: [Server] = []
        for entry in list.split(separator: ",", omittingEmptySubsequences: false) {
            var host = Substring(entry), port = 5432
            var portText: Substring?
            if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
                let after = host[host.index(after: close)...]
                if after.hasPrefix(":") { portText = after.dropFirst() }
                host = host[host.index(after: host.startIndex)..<close]
            } else if let colon = host.lastIndex(of: ":") {
                portText = host[host.index(after: colon)...]
                host = host[..<colon]
            }
            if let portText {
                guard let value = Int(portText), (1...65_535).contains(value) else {
                    throw StoreError(.unavailable, "\(text): '\(entry)' has no port from 1 to 65535")
                }
                port = value
            }
            guard !host.isEmpty else { throw StoreError(.unavailable, "\(text): an empty host in the server list") }
            servers.append(Server(host: String(host), port: port))
        }
        let single = text[..<schemeEnd.upperBound] + userInfo + servers[0].display + rest[authorityEnd...]
        return (String(single), servers)
    }

    /// Where the store is, without secrets, for messages.
    public var display: String { "postgres://\(user)@\(servers.map(\.display).joined(separator: ","))/\(database)" }

    /// libpq's connection string (values quoted as it wants them).
    func connectionString() throws(StoreError) -> String {
        func quoted(_ value: String) -> String {
            "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        }
        var parts = [
            "host=\(quoted(servers.map(\.host).joined(separator: ",")))",
            "port=\(quoted(servers.map { String($0.port) }.joined(separator: ",")))",
            "dbname=\(quoted(database))", "user=\(quoted(user))",
            "sslmode=\(quoted(sslMode))", "connect_timeout=\(max(2, Int(statementTimeout.rounded(.up))))",
            "application_name='tlsaudit'",
            // A server that vanishes without a reset (a host gone, a partition) fails a statement
            // within about the statement timeout, not after the kernel's 15 minutes of retries:
            // statement_timeout is enforced by the server, which is then not there to enforce it.
            "keepalives=1", "keepalives_idle=10", "keepalives_interval=5", "keepalives_count=3",
            "tcp_user_timeout=\(Int(max(10, statementTimeout + 5) * 1000))",
            // Every statement bounded; times and numbers as the store reads them; no JIT (its
            // compilation cost more than it saved on every report query measured).
            "options=\(quoted("-c statement_timeout=\(Int(statementTimeout * 1000)) -c TimeZone=UTC -c extra_float_digits=3 -c client_min_messages=warning -c jit=off"))",
        ]
        if let caFile { parts.append("sslrootcert=\(quoted(caFile))") }
        if let targetSessionAttrs { parts.append("target_session_attrs=\(quoted(targetSessionAttrs))") }
        if let passwordFile {
            guard let password = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                throw StoreError(.unavailable, "cannot read the PostgreSQL password file \(passwordFile)")
            }
            parts.append("password=\(quoted(password.trimmingCharacters(in: .newlines)))")
        }
        return parts.joined(separator: " ")
    }
}

/// A parameter of a statement, sent as text (PostgreSQL casts it to the column's type).
enum PostgresValue {
    case text(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case bytes([UInt8])
    /// A `text[]` (cast it: `$1::text[]`).
    case texts([String])
    /// A `float8[]` (cast it: `$1::float8[]`).
    case doubles([Double])
    /// A `bigint[]` (cast it: `$1::bigint[]`).
    case ints([Int64])

    var wire: String {
        switch self {
        case .texts(let values): Self.array(values.map(Optional.some))
        case .doubles(let values): "{" + values.map(\.description).joined(separator: ",") + "}"
        case .ints(let values): "{" + values.map(String.init).joined(separator: ",") + "}"
        case .text(let text): text
        case .int(let value): String(value)
        case .double(let value): value.description
        case .bool(let value): value ? "t" : "f"
        case .bytes(let bytes): "\\x" + bytes.hex
        }
    }

    /// An array's text form (`{"a",NULL,"\\x00"}`): every element quoted (a `"` or `\` in it escaped), NULL bare.
    static func array(_ elements: some Sequence<String?>) -> String {
        var literal = "{"
        for (index, element) in elements.enumerated() {
            if index > 0 { literal += "," }
            guard let element else {
                literal += "NULL"
                continue
            }
            literal += "\""
            for character in element.unicodeScalars {
                if character == "\"" || character == "\\" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return literal + "}"
    }
}

/// The rows a statement returned, read as text (libpq's text format).
final class PostgresRows {
    private let result: OpaquePointer
    let count: Int
    /// Rows an INSERT, UPDATE or DELETE changed.
    let affected: Int
    /// Column names in result order: found by a scan, which for a result's few short names costs
    /// less than hashing the name (a 10,000-row report reads 200,000 values).
    private let columns: [String]

    init(_ result: OpaquePointer) {
        self.result = result
        let pq = LibPQ.api
        count = Int(pq.ntuples(result))
        affected = pq.cmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
        columns = (0..<pq.nfields(result)).map { pq.fname(result, $0).map { String(cString: $0) } ?? "" }
    }

    deinit { LibPQ.api.clear(result) }

    /// The index of the first column called `name`.
    func index(of name: String) -> Int {
        guard let index = columns.firstIndex(of: name) else { preconditionFailure("no column \(name) in the result") }
        return index
    }

    func text(_ row: Int, _ name: String) -> String? { text(row, column: index(of: name)) }

    func text(_ row: Int, column: Int) -> String? {
        let pq = LibPQ.api
        guard pq.getisnull(result, Int32(row), Int32(column)) == 0, let value = pq.getvalue(result, Int32(row), Int32(column)) else {
            return nil
        }
        return String(cString: value)
    }

    func int(_ row: Int, _ name: String) -> Int64? { text(row, name).flatMap { Int64($0) } }
    func double(_ row: Int, _ name: String) -> Double? { text(row, name).flatMap { Double($0) } }
    func bool(_ row: Int, _ name: String) -> Bool? { text(row, name).map { $0 == "t" } }

    /// A bytea column (hex output, `\x...`).
    func bytes(_ row: Int, _ name: String) -> [UInt8]? { bytes(row, column: index(of: name)) }

    func bytes(_ row: Int, column: Int) -> [UInt8]? {
        guard let text = text(row, column: column) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(max(0, text.utf8.count - 2) / 2)
        var high: UInt8?
        for character in text.utf8.dropFirst(2) {
            let nibble: UInt8 = switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
            default: 0
            }
            if let pending = high { bytes.append(pending << 4 | nibble); high = nil } else { high = nibble }
        }
        return bytes
    }
}

/// What this process has asked of PostgreSQL: statements (each one round trip) and the payload
/// bytes sent (SQL text and parameters) and received (result values). `serve` logs them at the stop.
public enum PostgresTraffic {
    static let statements = Atomic<Int>(0)
    static let bytesSent = Atomic<Int>(0)
    static let bytesReceived = Atomic<Int>(0)

    /// Statements, bytes sent, bytes received so far.
    public static var totals: (statements: Int, sent: Int, received: Int) {
        (statements.load(ordering: .relaxed), bytesSent.load(ordering: .relaxed), bytesReceived.load(ordering: .relaxed))
    }

    /// Statements sent by the calling thread so far (a store's calls run on their caller's thread:
    /// what one call costs, whatever else the process is doing).
    public static var statementsOnThisThread: Int { Thread.current.threadDictionary[threadKey] as? Int ?? 0 }
    private static let threadKey = "tlsaudit.postgres.statements"

    static func count(sql: String, parameters: [String?], result: OpaquePointer?) {
        statements.add(1, ordering: .relaxed)
        Thread.current.threadDictionary[threadKey] = statementsOnThisThread + 1
        bytesSent.add(sql.utf8.count + parameters.reduce(0) { $0 + ($1?.utf8.count ?? 0) }, ordering: .relaxed)
        guard let result else { return }
        var received = 0
        let pq = LibPQ.api
        for row in 0..<pq.ntuples(result) {
            for column in 0..<pq.nfields(result) { received += Int(pq.getlength(result, row, column)) }
        }
        bytesReceived.add(received, ordering: .relaxed)
    }
}

/// One libpq connection, used by one thread at a time (`PostgresPool` hands it out).
final class PostgresConnection {
    private let handle: OpaquePointer
    let settings: PostgresSettings

    init(_ settings: PostgresSettings) throws(StoreError) {
        self.settings = settings
        let info = try settings.connectionString()
        let pq = try LibPQ.loaded.get()
        guard let handle = pq.connectdb(info) else { throw StoreError(.unavailable, "\(settings.display): out of memory") }
        guard pq.status(handle) == CONNECTION_OK else {
            let message = Self.message(handle)
            pq.finish(handle)
            throw StoreError(.unavailable, "cannot connect to \(settings.display): \(message)")
        }
        self.handle = handle
        PostgresServerWatch.connected(self)
    }

    deinit { LibPQ.api.finish(handle) }

    /// The server this connection reached (`host:port`; one of several a URL names).
    var server: String {
        PostgresSettings.Server(host: LibPQ.api.host(handle).map { String(cString: $0) } ?? "?",
                                port: LibPQ.api.port(handle).flatMap { Int(String(cString: $0)) } ?? 0).display
    }

    /// The connection is still up (a restarted server or a broken socket makes it bad).
    var isUsable: Bool { LibPQ.api.status(handle) == CONNECTION_OK && LibPQ.api.transactionStatus(handle) == PQTRANS_IDLE }

    /// Runs one statement with bind parameters (never interpolated into the SQL).
    @discardableResult
    func execute(_ sql: String, _ parameters: [PostgresValue?] = []) throws(StoreError) -> PostgresRows {
        try run(sql, parameters) { handle, values in
            LibPQ.api.execParams(handle, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
    }

    /// The statements prepared on this connection (`execute(prepared:_:)`), by SQL: their names.
    private var prepared: [String: String] = [:]

    /// Runs `sql` as a statement prepared once per connection (parsed and planned once, then only
    /// executed): for the write path's statements, which every batch runs. Only for statements
    /// that name their result columns (a prepared `SELECT *` breaks when the schema changes).
    @discardableResult
    func execute(prepared sql: String, _ parameters: [PostgresValue?] = []) throws(StoreError) -> PostgresRows {
        let name: String
        if let known = prepared[sql] {
            name = known
        } else {
            if prepared.count >= 256 { // bounded: a statement built per call would grow it forever
                try execute("DEALLOCATE ALL")
                prepared = [:]
            }
            name = "tlsaudit_\(prepared.count + 1)"
            _ = try run(sql, []) { handle, _ in LibPQ.api.prepare(handle, name, sql, Int32(parameters.count), nil) }
            prepared[sql] = name
        }
        // Only the statement's name goes on the wire (counted as sent).
        return try run(name, parameters) { handle, values in
            LibPQ.api.execPrepared(handle, name, Int32(parameters.count), values, nil, nil, 0)
        }
    }

    /// Sends one request (`send` gets the handle and the parameters as C strings), counts it (with
    /// `sent`, the statement's text or name, and the parameters) and turns its result into rows or a `StoreError`.
    private func run(_ sent: String, _ parameters: [PostgresValue?],
                     _ send: (OpaquePointer, UnsafePointer<UnsafePointer<CChar>?>?) -> OpaquePointer?) throws(StoreError) -> PostgresRows {
        let wire = parameters.map { $0?.wire }
        var values: [UnsafeMutablePointer<CChar>?] = wire.map { $0.map { strdup($0) } ?? nil }
        defer { values.forEach { free($0) } }
        let handle = handle
        let result = values.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { send(handle, $0.baseAddress) }
        }
        PostgresTraffic.count(sql: sent, parameters: wire, result: result)
        guard let result else { throw StoreError(.unavailable, "\(settings.display): \(Self.message(handle))") }
        let status = LibPQ.api.resultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let error = Self.error(result, connection: handle, display: settings.display)
            LibPQ.api.clear(result)
            throw error
        }
        return PostgresRows(result)
    }

    /// `sql` with its `?` placeholders numbered `$1`, `$2`, ... as PostgreSQL wants them (for SQL
    /// both backends share; it holds no `?` of its own).
    static func numbered(_ sql: String) -> String {
        var number = 0
        return sql.split(separator: "?", omittingEmptySubsequences: false).enumerated().map { index, part in
            guard index > 0 else { return String(part) }
            number += 1
            return "$\(number)" + part
        }.joined()
    }

    /// Runs several statements without parameters (a migration's script).
    func run(script sql: String) throws(StoreError) {
        let pq = LibPQ.api
        guard let result = pq.exec(handle, sql) else { throw StoreError(.unavailable, "\(settings.display): \(Self.message(handle))") }
        defer { pq.clear(result) }
        let status = pq.resultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            throw Self.error(result, connection: handle, display: settings.display)
        }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    /// `begin` opens it (`BEGIN`, or with an isolation level and access mode).
    func transaction<T>(_ begin: String = "BEGIN", _ body: () throws -> T) throws -> T {
        try execute(begin)
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    /// Waits up to `timeout` seconds for notifications on the channels this connection LISTENs
    /// to, and returns their payloads (empty after the timeout). Throws when the connection broke.
    func notifications(waitingUpTo timeout: Double) throws(StoreError) -> [String] {
        var payloads = drainNotifications()
        guard payloads.isEmpty else { return payloads }
        let pq = LibPQ.api
        var descriptor = pollfd(fd: pq.socket(handle), events: Int16(POLLIN), revents: 0)
        guard descriptor.fd >= 0 else { throw StoreError(.unavailable, "\(settings.display): the connection is closed") }
        _ = poll(&descriptor, 1, Int32(max(0, timeout) * 1000))
        guard pq.consumeInput(handle) == 1, pq.status(handle) == CONNECTION_OK else {
            throw StoreError(.unavailable, "\(settings.display): the connection failed (\(Self.message(handle)))")
        }
        payloads = drainNotifications()
        return payloads
    }

    private func drainNotifications() -> [String] {
        var payloads: [String] = []
        let pq = LibPQ.api
        while let notification = pq.notifies(handle) {
            payloads.append(String(cString: notification.pointee.extra))
            pq.freemem(notification)
        }
        return payloads
    }

    private static func message(_ handle: OpaquePointer) -> String {
        (LibPQ.api.errorMessage(handle).map { String(cString: $0) } ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A failed statement as a StoreError, classified by its SQLSTATE.
    private static func error(_ result: OpaquePointer, connection: OpaquePointer, display: String) -> StoreError {
        let pq = LibPQ.api
        let state = pq.resultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
        let text = pq.resultErrorMessage(result).map { String(cString: $0) }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let message = text.isEmpty ? message(connection) : text
        switch state {
        case "53100": return StoreError(.full, "\(display): the disk is full (\(message))")
        case "25006": return StoreError(.readOnly, "\(display): read-only (\(message))")
        case "57014": return StoreError(.unavailable, "\(display): a statement ran past statement_timeout (\(message))")
        case let state where state.hasPrefix("08") || state.hasPrefix("57P"):
            return StoreError(.unavailable, "\(display): the connection failed (\(message))")
        case "XX001", "XX002": return StoreError(.corrupt, "\(display): data corrupted (\(message))")
        default:
            return StoreError(pq.status(connection) == CONNECTION_OK ? .other : .unavailable, "\(display): \(message)")
        }
    }
}
