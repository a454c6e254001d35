import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditProbe
import TLSAuditService
import TLSAuditStore

/// Finds the database from --database, --config, the installed configuration, or the default location.
struct DatabaseOptions: ParsableArguments {
    @Option(help: "The SQLite database or a postgres:// URL (default: the configuration's, as serve resolves it; else $STATE_DIRECTORY or ./tlsaudit.sqlite).")
    var database: String?

    @Option(help: "Read the database path from this configuration file (default: /etc/tlsaudit/tlsaudit.yaml when it exists, as serve).")
    var config: String?

    /// The configuration in force: --config, else the installed one `serve` reads by default.
    var configurationPath: String? {
        config ?? (FileManager.default.fileExists(atPath: ServiceConfiguration.installedPath) ? ServiceConfiguration.installedPath : nil)
    }

    /// Opens the store; `create`: a database that does not exist yet is made (else exit 2).
    func openStore(create: Bool = false) throws -> any ScanStore {
        var path = database
        if path == nil, let file = configurationPath { path = try loadConfiguration(file).database }
        do {
            return try StoreBackends.location(path ?? ServiceConfiguration.defaultDatabase).open(create: create)
        } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(2)
        }
    }
}
