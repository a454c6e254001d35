import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditOutput
import TLSAuditProbe
import TLSAuditReport
import TLSAuditService
import TLSAuditStore
import TLSAuditSupport

/// `tlsaudit alerts`: the alerts raised, with their delivery state.
struct AlertsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "alerts",
        abstract: "List the newest alerts and their delivery state per sink."
    ).parsedDirectly(under: "tlsaudit")

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: "How many alerts.")
    var limit: Int = 50

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func run() throws {
        let alerts = try databaseOptions.openStore().alerts(limit: limit)
        switch format {
        case .json:
            StandardStream.output.write(try jsonStyle.encoder.encodeLine(alerts))
        case .text:
            let rows = alerts.map { stored -> [String] in
                let delivery = stored.deliveries.map { "\($0.sink):\($0.state)\($0.attempts > 1 ? "(\($0.attempts))" : "")" }
                    .joined(separator: " ")
                return [Timestamp.format(stored.alert.createdAt), stored.alert.severity.rawValue, stored.alert.kind.rawValue,
                        "\(stored.alert.target) \(stored.alert.address)", delivery, stored.alert.summary]
            }
            StandardStream.output.write(alerts.isEmpty ? "no alerts\n"
                : TextTable.render(header: ["TIME", "SEVERITY", "KIND", "TARGET", "DELIVERY", "SUMMARY"], rows: rows))
        }
    }
}
