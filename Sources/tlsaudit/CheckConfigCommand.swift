import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditService
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditPostgres
import TLSAuditProbe

/// `tlsaudit check-config`: validate a configuration file.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file: every error with file, line and what was expected (exit 64 when invalid)."
    )

    @Argument(help: "The YAML configuration to check.")
    var file: String

    @Flag(name: .customLong("test-connection"),
          help: "Also connect to a postgres:// database (server version, migrations applied); changes nothing. Exit 2 when it fails.")
    var testConnection = false

    func run() throws {
        let configuration = try loadConfiguration(file)
        for warning in configuration.warnings {
            StandardStream.error.write("warning: \(warning)\n")
        }
        let groups = Set(configuration.targets.compactMap(\.group))
        let location: DatabaseLocation
        do {
            location = try configuration.location()
        } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(64)
        }
        let fleetNode = configuration.targets.isEmpty && DatabaseLocation.isPostgresURL(configuration.database)
            ? " (a fleet node: its targets come from 'tlsaudit fleet apply'; node \(configuration.node.name), vantage \(configuration.node.vantage))" : ""
        StandardStream.output.write("\(file): OK: \(configuration.targets.count) target(s) in \(groups.count) group(s); database \(location.display)\(fleetNode)\n")
        guard testConnection else { return }
        switch location {
        case .postgres(let settings):
            do {
                let (server, migrations) = try PostgresScanStore.testConnection(settings)
                let schema = migrations.isEmpty ? "no tlsaudit schema yet (the first node creates it)"
                    : "schema at \(migrations.last ?? "?") (\(migrations.count) migration(s))"
                StandardStream.output.write("\(settings.display): connected, PostgreSQL \(server); \(schema)\n")
            } catch {
                StandardStream.error.write("tlsaudit: \(error)\n")
                throw ExitCode(2)
            }
        case .sqlite(let path):
            guard FileManager.default.fileExists(atPath: path) else {
                return StandardStream.output.write("\(path): not there yet (serve creates it)\n")
            }
            do {
                let migrations = try SQLiteScanStore.inspect(path: path, sha256: Digest.sha256Hex)
                StandardStream.output.write("\(path): SQLite, quick_check ok; schema at \(migrations.last ?? "none yet") (\(migrations.count) migration(s))\n")
            } catch {
                StandardStream.error.write("tlsaudit: \(error)\n")
                throw ExitCode(2)
            }
        }
    }
}
