import ArgumentParser

/// The `tlsaudit` root command.
@main
struct TLSAuditCommand: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "tlsaudit",
        abstract: "TLS handshake inspector and certificate auditor: what each handshake really shows, judged against App Transport Security.",
        version: version,
        subcommands: [ScanCommand.self, DemoCommand.self]
    )
}
