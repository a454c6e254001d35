import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditService
import TLSAuditStore

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
