import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditService
import TLSAuditStore
import TLSAuditProbe

/// `tlsaudit check-config`: validate a configuration file.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file: every error with file, line and what was expected (exit 64 when invalid)."
    ).parsedDirectly(under: "tlsaudit")

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
        let location: any StoreLocation
        do {
            location = try configuration.location()
        } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(64)
        }
        let fleetNode = configuration.targets.isEmpty && location.offersFleet
            ? " (a fleet node: its targets come from 'tlsaudit fleet apply'; node \(configuration.node.name), vantage \(configuration.node.vantage))" : ""
        StandardStream.output.write("\(file): OK: \(configuration.targets.count) target(s) in \(groups.count) group(s); database \(location.display)\(fleetNode)\n")
        guard testConnection else { return }
        do {
            StandardStream.output.write(try location.testConnection() + "\n")
        } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(2)
        }
    }
}
