import CProcess
import Foundation

/// A throwaway PostgreSQL cluster for the tests and the bench: Debian's server binaries, `initdb`
/// in a temporary directory, listening on 127.0.0.1 at a free port (and a socket in the same
/// directory), trust authentication for one user. PostgreSQL refuses to run as root, so under root
/// the cluster runs as `nobody` (setpriv). `stop()` ends it and removes the directory.
public final class LabPostgresServer: @unchecked Sendable {
    /// Where Debian installs the server (the newest major version present).
    public static let binaries: String? = {
        let base = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []).compactMap(Int.init).sorted()
        guard let newest = versions.last else { return nil }
        let directory = "\(base)/\(newest)/bin"
        return FileManager.default.isExecutableFile(atPath: "\(directory)/initdb") ? directory : nil
    }()

    public let directory: String
    /// Set in `init` (a second port when the first start failed), read-only afterwards.
    public private(set) var port: Int
    public let user = "tlsaudit"
    private let binaries: String
    private let runsAsNobody: Bool
    /// Whether the server syncs its WAL (`fsync`): off by default, for speed, in the tests that do
    /// not stop the machine; on for the durability tests.
    private let syncs: Bool

    /// Makes and starts a cluster; throws `LabPrerequisite` when PostgreSQL is not installed.
    /// `syncs`: run with `fsync=on` (PostgreSQL's default) instead of off.
    public init(syncs: Bool = false) throws {
        self.syncs = syncs
        guard let binaries = Self.binaries else {
            throw LabPrerequisite.Missing(description: "PostgreSQL's server is not installed: apt-get install -y postgresql (.ci/run installs it)")
        }
        self.binaries = binaries
        runsAsNobody = getuid() == 0
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if runsAsNobody { try Self.shell(["chown", "nobody:nogroup", directory]) }
        port = try LabPorts.unusedPort()
        try run("initdb", ["-D", "\(directory)/data", "-U", user, "--auth=trust", "-E", "UTF8"] + (syncs ? [] : ["--no-sync"]))
        // A port taken between LabPorts' check and the server's bind, or a start slowed past its wait
        // by a loaded machine: once more on another port before giving up.
        do { try start() } catch {
            stop(removing: false)
            port = try LabPorts.unusedPort()
            try start()
        }
        try run("createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", user, "tlsaudit"])
    }

    /// A hot standby of `primary`: a base backup of it (`pg_basebackup -R`, streaming from it) on a
    /// port of its own, started and streaming before this returns. With `synchronous`, the primary
    /// waits at every commit until the standby has it (`synchronous_standby_names = '*'`).
    public init(standbyOf primary: LabPostgresServer, synchronous: Bool) throws {
        syncs = primary.syncs
        binaries = primary.binaries
        runsAsNobody = primary.runsAsNobody
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if runsAsNobody { try Self.shell(["chown", "nobody:nogroup", directory]) }
        port = try LabPorts.unusedPort()
        try run("pg_basebackup", ["-h", "127.0.0.1", "-p", "\(primary.port)", "-U", user, "-D", "\(directory)/data", "-R", "-X", "stream", "--checkpoint=fast"])
        try start()
        if synchronous {
            try primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'")
            try primary.psql("SELECT pg_reload_conf()")
        }
        let wanted = synchronous ? "sync" : "async"
        let deadline = Date().addingTimeInterval(30)
        while (try? primary.psql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = '\(wanted)'"))?
                .trimmingCharacters(in: .whitespacesAndNewlines) != "1" {
            guard Date() < deadline else { throw StartFailure(description: "the standby on port \(port) did not stream from port \(primary.port) as \(wanted) within 30 s") }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    /// Promotes this standby to a primary (`pg_ctl promote`, waiting until it accepts writes).
    public func promote() throws {
        try run("pg_ctl", ["-D", "\(directory)/data", "-w", "promote"])
    }

    deinit { stop() }

    /// The server did not start: pg_ctl's error and the end of the server's log.
    public struct StartFailure: Error, CustomStringConvertible {
        public var description: String
    }

    /// A `postgres://` URL for database `name` (created by `createDatabase`; `tlsaudit` exists).
    public func url(database name: String = "tlsaudit") -> String { "postgres://\(user)@127.0.0.1:\(port)/\(name)?sslmode=disable" }

    /// Creates an empty database (a fresh location for a store).
    public func createDatabase(_ name: String) throws {
        try run("createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", user, name])
    }

    /// Runs SQL with psql as the cluster's superuser.
    @discardableResult
    public func psql(_ sql: String, database: String = "tlsaudit") throws -> String {
        try run("psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", user, "-d", database, "-X", "-q", "-t", "-A",
                         "-v", "ON_ERROR_STOP=1", "-c", sql])
    }

    /// Starts the server (again, after `stop(removing: false)`).
    public func start() throws {
        do {
            try run("pg_ctl", ["-D", "\(directory)/data", "-l", "\(directory)/server.log", "-w", "-t", "60", "-o",
                               "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=\(syncs ? "on" : "off") -c max_connections=200",
                               "start"])
        } catch {
            // What the server said is the reason: its log's end goes with the error.
            let log = (try? String(contentsOfFile: "\(directory)/server.log", encoding: .utf8)) ?? ""
            throw StartFailure(description: "\(error); server.log ends: \(log.suffix(800))")
        }
    }

    /// Stops the server at once; removes the cluster unless `removing` is false (to start it again).
    public func stop(removing: Bool = true) {
        _ = try? run("pg_ctl", ["-D", "\(directory)/data", "-m", "immediate", "-w", "stop"])
        if removing { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Turns TLS on (restarting the server): it presents `certificate` (its key in PEM) on 127.0.0.1.
    public func enableTLS(certificatePEM: String, keyPEM: String) throws {
        let data = "\(directory)/data"
        try certificatePEM.write(toFile: "\(data)/server.crt", atomically: true, encoding: .utf8)
        try keyPEM.write(toFile: "\(data)/server.key", atomically: true, encoding: .utf8)
        try Self.shell(["chmod", "0600", "\(data)/server.key"])
        if runsAsNobody { try Self.shell(["chown", "nobody:nogroup", "\(data)/server.crt", "\(data)/server.key"]) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(data)/postgresql.conf"))
        handle.seekToEndOfFile()
        handle.write(Data("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n".utf8))
        try handle.close()
        stop(removing: false)
        try start()
    }

    @discardableResult
    private func run(_ tool: String, _ arguments: [String]) throws -> String {
        let command = ["\(binaries)/\(tool)"] + arguments
        return try Self.shell(runsAsNobody ? ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + command : command,
                              directory: directory)
    }

    /// Runs a command and waits for it with waitpid (pg_ctl leaves a daemon behind: Foundation's
    /// Process did not always see pg_ctl end), its output in a file rather than a pipe the daemon
    /// would keep open. Throws with the output when it fails.
    @discardableResult
    private static func shell(_ command: [String], directory: String? = nil) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-pg-\(UUID().uuidString).out").path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // None of the test process's descriptors: PostgreSQL counts an inherited high-numbered one
        // against max_files_per_process and refuses to start ("insufficient file descriptors").
        tlsaudit_spawn_close_from(&actions, 3)
        let arguments = ["/usr/bin/env"] + (directory.map { ["-C", $0] } ?? []) + command
        var argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/env", &actions, nil, &argv, environ)
        guard spawned == 0 else {
            throw LabPrerequisite.Missing(description: "cannot run \(command.first ?? "?"): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // Exited normally with status 0 (WIFEXITED and WEXITSTATUS, which Swift does not import).
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw LabPrerequisite.Missing(description: "\(command.joined(separator: " ")) failed (wait status \(status)): \(text)")
        }
        return text
    }
}
