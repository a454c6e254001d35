import ArgumentParser

/// `tlsaudit-bench`: builds the databases reports are tested and measured on, and times the JSON encoder. Not installed;
/// run with `swift run -c release tlsaudit-bench ...` (bench/report does).
@main
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tlsaudit-bench",
        abstract: "Build report fixtures and synthetic fleets from real loopback handshakes.",
        subcommands: [ReportFixtureCommand.self, FillCommand.self, JSONBenchCommand.self, SCTBenchCommand.self, LimboBenchCommand.self,
                      SchemaSnapshotCommand.self, CTFollowBenchCommand.self]
    )
}
