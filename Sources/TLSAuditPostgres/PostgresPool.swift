import Dispatch
import Synchronization
import TLSAuditStore

/// Connections to one PostgreSQL database, opened on demand up to `settings.poolSize` and kept
/// while they stay usable: one that broke (a restarted server, a dropped socket, a transaction
/// left open) is closed instead of handed out again, so the next use reconnects.
final class PostgresPool: Sendable {
    let settings: PostgresSettings
    private let idle = Mutex<[PostgresConnectionBox]>([])
    private let slots: DispatchSemaphore

    init(_ settings: PostgresSettings) {
        self.settings = settings
        slots = DispatchSemaphore(value: settings.poolSize)
    }

    /// Runs `body` with a connection of its own (waiting for one when all are in use).
    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        slots.wait()
        defer { slots.signal() }
        let connection = try idle.withLock { $0.popLast() }?.connection ?? PostgresConnection(settings)
        defer {
            if connection.isUsable { idle.withLock { $0.append(PostgresConnectionBox(connection: connection)) } }
        }
        return try body(connection)
    }
}

/// A connection moved between threads by the pool, used by one of them at a time.
struct PostgresConnectionBox: @unchecked Sendable {
    let connection: PostgresConnection
}
