import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditService
import TLSAuditStore

/// Sets up swift-log once: one line per event on stderr (journald adds its own timestamp).
enum LogSetup {
    static func bootstrap(level: String) {
        let logLevel = Logger.Level(rawValue: level) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = logLevel
            return handler
        }
    }
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
        abstract: "Run the service: scan every configured target on its schedule and keep the history in SQLite.",
        discussion: """
            SIGTERM or SIGINT: stop scheduling, let scans and alert deliveries in flight finish (up to \
            --shutdown-grace; an abandoned delivery is retried after the restart), commit, exit 0; exit 75 \
            when scan results could not be stored (they are kept in DATABASE.unstored-TIME.jsonl and stored at \
            the next start). SIGHUP: reload the configuration; an invalid one is refused and the old \
            one keeps running. With NOTIFY_SOCKET set (systemd Type=notify) it sends READY, \
            RELOADING, STOPPING and WATCHDOG notifications.
            """
    )

    @Option(help: "The YAML configuration.")
    var config: String = "/etc/tlsaudit/tlsaudit.yaml"

    @Option(help: "Override the configuration's database path.")
    var database: String?

    @Option(name: .customLong("shutdown-grace"), help: "Seconds scans and alert deliveries in flight may run on after SIGTERM.")
    var shutdownGrace: Double = ServiceConfiguration.defaultShutdownGrace

    func run() async throws {
        var configuration = try loadConfiguration(config)
        if let database { configuration.database = database }
        LogSetup.bootstrap(level: configuration.logLevel)
        let logger = Logger(label: "tlsaudit")
        for warning in configuration.warnings { logger.warning("configuration: \(warning)") }
        let service: ScanService
        do {
            service = try ScanService(configuration: configuration, configurationPath: config, logger: logger,
                                      shutdownGrace: shutdownGrace)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(2)
        }
        try await service.runUntilTerminated()
        // Documented in README ("Exit status"): results that could not be stored.
        if service.unstoredAtExit > 0 { throw ExitCode(75) }
    }
}

/// `tlsaudit check-config`: validate a configuration file.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file: every error with file, line and what was expected (exit 64 when invalid)."
    )

    @Argument(help: "The YAML configuration to check.")
    var file: String

    func run() throws {
        let configuration = try loadConfiguration(file)
        for warning in configuration.warnings {
            StandardStream.error.write("warning: \(warning)\n")
        }
        let groups = Set(configuration.targets.compactMap(\.group))
        StandardStream.output.write("\(file): OK: \(configuration.targets.count) target(s) in \(groups.count) group(s); database \(configuration.database)\n")
    }
}

/// Finds the database from --database, --config, the installed configuration, or the default location.
struct DatabaseOptions: ParsableArguments {
    @Option(help: "The SQLite database (default: the configuration's, as serve resolves it; else $STATE_DIRECTORY or ./tlsaudit.sqlite).")
    var database: String?

    @Option(help: "Read the database path from this configuration file (default: /etc/tlsaudit/tlsaudit.yaml when it exists, as serve).")
    var config: String?

    /// The configuration in force: --config, else the installed one `serve` reads by default.
    var configurationPath: String? {
        config ?? (FileManager.default.fileExists(atPath: ServiceConfiguration.installedPath) ? ServiceConfiguration.installedPath : nil)
    }

    func openStore() throws -> SQLiteScanStore {
        var path = database
        if path == nil, let file = configurationPath { path = try loadConfiguration(file).database }
        do {
            return try SQLiteScanStore(path: path ?? ServiceConfiguration.defaultDatabase, create: false)
        } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(2)
        }
    }
}

/// `tlsaudit status`: the fleet table.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show every target address: last scan, verdict, days to the earliest expiry in the chain, pin state.",
        discussion: """
            Reads the database; safe while the service runs. With a configuration (--config, or the installed one), \
            only its targets are shown (a target removed from it is not). Exit 0 all compliant, 1 some not, 2 some unreachable.
            """
    )

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: "Output format: text or json.")
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func run() throws {
        let store = try databaseOptions.openStore()
        var rows = try store.status()
        // When the database is not named, the configuration tells which targets are in force (with
        // --database alone, every stored target is shown).
        if databaseOptions.database == nil, let file = databaseOptions.configurationPath {
            let configured = Set(try loadConfiguration(file).targets.map(\.key))
            rows = rows.filter { configured.contains($0.target) }
        }
        switch format {
        case .json:
            let encoder = jsonStyle.encoder
            StandardStream.output.write(try encoder.encode(StatusDocument(targets: rows)) + Data("\n".utf8))
        case .text:
            StandardStream.output.write(StatusTable.render(rows, now: Date()))
        }
        if rows.contains(where: { $0.status == .failed }) { throw ExitCode(2) }
        if rows.contains(where: { !$0.compliant }) { throw ExitCode(1) }
    }
}

/// The JSON of `status --format json`.
struct StatusDocument: Encodable {
    let schema = "tlsaudit.status/1"
    let targets: [TargetStatus]
}

/// `tlsaudit history`: the scans of one target.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show the stored scans of a target (its name, host or host:port), newest first."
    )

    @Argument(help: "Target name, host or host:port.")
    var target: String

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: "How many scans to show.")
    var limit: Int = 20

    @Option(help: "Output format: text or json.")
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func run() throws {
        let store = try databaseOptions.openStore()
        let entries = try store.history(target: target, limit: limit)
        guard !entries.isEmpty else {
            StandardStream.error.write("tlsaudit: no scans of \(target) in \(store.path)\n")
            throw ExitCode(2)
        }
        switch format {
        case .json:
            StandardStream.output.write(try jsonStyle.encoder.encode(entries) + Data("\n".utf8))
        case .text:
            StandardStream.output.write(HistoryTable.render(entries))
        }
    }
}
