import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditService
import TLSAuditStore

/// Sets up swift-log once: one line per event on stderr, in `format` (`LogFormat`: readable text on
/// a terminal, priority-prefixed lines under systemd's journal, or JSON lines).
enum LogSetup {
    static func bootstrap(level: String, format: LogFormat) {
        format.bootstrap(level: Logger.Level(rawValue: level) ?? .info)
    }
}

/// `--log-format`, shared by the commands that log (`serve`, `demo`).
struct LogFormatOption: ParsableArguments {
    @Option(name: .customLong("log-format"),
            help: ArgumentHelp("How log lines are written on stderr: \(HelpLists.values(of: LogFormat.self)). auto (the default) is journal when stderr is systemd's journal (JOURNAL_STREAM), else text; journal: a syslog priority prefix (<3> error, <4> warning, <6> info) and no timestamp, for journalctl -p; json: one object per line (time, level, logger, message, target, address and the event's other fields).",
                               valueName: "format"))
    var logFormat: LogFormat = .auto
}

/// Loads a configuration file or exits 64 with every problem listed.
func loadConfiguration(_ path: String) throws -> ServiceConfiguration {
    do {
        return try ServiceConfiguration.load(path: path)
    } catch {
        StandardStream.error.write(error.description + "\n")
        throw ExitCode(64)
    }
}

/// `tlsaudit serve`: the long-running service.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the service: scan every configured target on its schedule and keep the history in SQLite (or PostgreSQL: a fleet node).",
        discussion: """
            SIGTERM or SIGINT: stop scheduling, let scans and alert deliveries in flight finish (up to \
            --shutdown-grace; an abandoned delivery is retried after the restart), commit, exit 0; exit 75 \
            when scan results could not be stored (a failing disk, or the database found damaged while running; \
            they are kept in DATABASE.unstored-TIME.jsonl and stored at the next start). Exit 2 when it cannot start or must not go on: \
            a database migrated by a newer tlsaudit, a damaged SQLite file, in a fleet a node name another \
            live process holds (--replace-node takes it over). SIGHUP: reload the configuration; an invalid one is refused and the old \
            one keeps running. With NOTIFY_SOCKET set (systemd Type=notify) it sends READY, \
            RELOADING, STOPPING and WATCHDOG notifications.
            """
    ).parsedDirectly(under: "tlsaudit")

    @Option(help: "The YAML configuration.")
    var config: String = ServiceConfiguration.installedPath

    @Option(help: "Override the configuration's database path.")
    var database: String?

    @Option(name: .customLong("shutdown-grace"), help: "Seconds scans and alert deliveries in flight may run on after SIGTERM.")
    var shutdownGrace: Double = ServiceConfiguration.defaultShutdownGrace

    @OptionGroup var log: LogFormatOption

    @Flag(name: .customLong("replace-node"),
          help: "Fleet mode: take this node's name over even while another process's heartbeat holds it (that process stops).")
    var replaceNode = false

    func validate() throws {
        if let problem = SettingBounds.shutdownGrace.problem(shutdownGrace, name: "--shutdown-grace") {
            throw ValidationError(problem + ".")
        }
    }

    func run() async throws {
        var configuration = try loadConfiguration(config)
        if let database { configuration.database = database }
        LogSetup.bootstrap(level: configuration.logLevel, format: log.logFormat)
        let logger = Logger(label: "tlsaudit")
        for warning in configuration.warnings { logger.warning("configuration: \(warning)") }
        let service: ScanService
        do {
            service = try ScanService(configuration: configuration, configurationPath: config, logger: logger,
                                      shutdownGrace: shutdownGrace, replaceNode: replaceNode)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(2)
        }
        try await service.runUntilTerminated()
        if service.unrecoverableError != nil { throw ExitCode(2) }
        // Documented in README ("Exit status"): results that could not be stored.
        if service.unstoredAtExit > 0 { throw ExitCode(75) }
    }
}
