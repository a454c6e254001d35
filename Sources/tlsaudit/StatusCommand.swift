import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditService
import TLSAuditStore

/// `tlsaudit status`: the fleet table.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show every target address: last scan, verdict, days to the earliest expiry in the chain, pin state.",
        discussion: """
            Reads the database; safe while the service runs. With a configuration (--config, or the installed one), \
            only its targets are shown (a target removed from it is not), each with its group. With --tag, only the targets that carry every \
            tag given (as of their latest scan); with --group, only that configuration group's targets (a GROUP column shows each \
            row's group when some target is in one). Exit 0 all compliant, 1 some not, 2 some unreachable (of the rows shown).
            """
    ).parsedDirectly(under: "tlsaudit")

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    @Option(name: .customLong("tag"), help: "Show only targets with this tag (repeat it: a target must carry every one, e.g. --tag app:com.example.shop).")
    var tags: [String] = []

    @Option(help: "Show only the targets of this configuration group (needs the configuration: --config, or the installed one).")
    var group: String?

    func validate() throws {
        if group != nil && (databaseOptions.database != nil || databaseOptions.configurationPath == nil) {
            throw ValidationError("--group needs the configuration that names the groups: give --config (not --database)")
        }
    }

    func run() throws {
        let store = try databaseOptions.openStore()
        var rows = try store.status()
        // When the database is not named, the configuration tells which targets are in force (with
        // --database alone, every stored target is shown).
        if databaseOptions.database == nil, let file = databaseOptions.configurationPath {
            // A fleet node's file may name no target (they come from `fleet apply`): then all are shown.
            if let configured = try loadConfiguration(file).configuredTargets { rows = configured.shown(rows) }
        }
        rows = rows.filter { TargetTags.carries($0.tags, every: tags) }
        if let group { rows = rows.filter { $0.group == group } }
        switch format {
        case .json:
            let encoder = jsonStyle.encoder
            StandardStream.output.write(try encoder.encodeLine(StatusDocument(targets: rows)))
        case .text where rows.isEmpty && !tags.isEmpty:
            StandardStream.output.write("no target carries \(tags.map { "'\($0)'" }.joined(separator: " and "))\(group.map { " in group '\($0)'" } ?? "")\n")
        case .text where rows.isEmpty && group != nil:
            StandardStream.output.write("no target of group '\(group ?? "")' has a scan stored\n")
        case .text:
            StandardStream.output.write(StatusTable.render(rows, now: Date()))
        }
        if rows.contains(where: { $0.status == .failed }) { throw ExitCode(2) }
        if rows.contains(where: { !$0.compliant }) { throw ExitCode(1) }
    }
}
