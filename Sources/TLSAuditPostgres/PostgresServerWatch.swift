import Synchronization
public import TLSAuditStore

/// Which PostgreSQL server this process's connections reach, and its role. A URL may name several
/// servers (a primary and its standbys): a new connection that lands on another server than the
/// last one is a failover (or a switch-over), told once to `onChange`, however many pools reconnect.
public enum PostgresServerWatch {
    /// A server as a connection found it.
    public typealias Server = DatabaseServer

    private struct State {
        var current: Server?
        var handler: (@Sendable (Server, Server?) -> Void)?
    }

    private static let state = Mutex(State())

    /// The server the newest connection reached (nil before the first).
    public static var current: Server? { state.withLock { $0.current } }

    /// Called with the new server and the one before (nil at the first connection) whenever a new
    /// connection reaches another server than the last one did.
    public static func onChange(_ handler: @escaping @Sendable (Server, Server?) -> Void) {
        state.withLock { $0.handler = handler }
    }

    static func connected(_ connection: PostgresConnection) {
        let role: String
        if connection.settings.targetSessionAttrs == "read-write" || connection.settings.targetSessionAttrs == "primary" {
            role = "primary"
        } else {
            let recovering = try? connection.execute("SELECT pg_is_in_recovery() AS recovering").bool(0, "recovering")
            role = recovering == true ? "standby" : "primary"
        }
        let server = Server(address: connection.server, role: role)
        let (changed, previous, handler) = state.withLock { state -> (Bool, Server?, (@Sendable (Server, Server?) -> Void)?) in
            let previous = state.current
            state.current = server
            return (previous != server, previous, state.handler)
        }
        if changed { handler?(server, previous) }
    }
}
