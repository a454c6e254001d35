import ArgumentParser
import TLSAuditCore
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditSQLite
import TLSAuditStore

/// The `tlsaudit` root command.
@main
struct TLSAuditCommand: AsyncParsableCommand {
    static let version = TLSAuditVersion.current

    static let configuration = CommandConfiguration(
        commandName: "tlsaudit",
        abstract: "TLS handshake inspector and certificate auditor: what each handshake really shows, judged against App Transport Security.",
        version: version,
        subcommands: [ScanCommand.self, ATSCommand.self, VerifyCommand.self, ServeCommand.self, CheckConfigCommand.self, StatusCommand.self,
                      HistoryCommand.self, ReportCommand.self, AlertsCommand.self, CTCommand.self, PinCommand.self, PinsCommand.self, FleetCommand.self, StoreCommand.self,
                      AppCommand.self, TrustCommand.self, DemoCommand.self]
    )

    /// Prepares the standard streams (`StandardStream.prepare`), then parses and runs the command.
    static func main() async {
        StandardStream.prepare()
        StoreBackends.registerShipped()
        await runParsed(Self.self)
    }
}

/// ArgumentParser's own `main` (a protocol extension method, so a generic call reaches it rather
/// than the override above).
private func runParsed<Command: AsyncParsableCommand>(_: Command.Type) async {
    await Command.main()
}

extension StoreBackends {
    /// The store backends tlsaudit ships, registered before any command runs: PostgreSQL's URLs,
    /// then SQLite's paths. A new backend is its module and one line here.
    static func registerShipped() {
        register(PostgresBackend(sha256: Digest.sha256Hex))
        register(SQLiteBackend(sha256: Digest.sha256Hex))
    }
}
