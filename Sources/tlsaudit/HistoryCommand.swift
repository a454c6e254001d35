import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditService
import TLSAuditStore

/// `tlsaudit history`: the scans of one target.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show the stored scans of a target (its name, host or host:port), newest first."
    ).parsedDirectly(under: "tlsaudit")

    @Argument(help: "Target name, host or host:port.")
    var target: String

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: "How many scans to show.")
    var limit: Int = 20

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func run() throws {
        let store = try databaseOptions.openStore()
        let entries = try store.history(target: target, limit: limit)
        guard !entries.isEmpty else {
            StandardStream.error.write("tlsaudit: no scans of \(target) in \(store.displayLocation)\n")
            throw ExitCode(2)
        }
        switch format {
        case .json:
            StandardStream.output.write(try jsonStyle.encoder.encodeLine(entries))
        case .text:
            StandardStream.output.write(HistoryTable.render(entries))
        }
    }
}
