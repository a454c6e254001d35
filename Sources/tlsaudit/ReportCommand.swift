import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditReport
import TLSAuditStore
import TLSAuditSupport

/// `tlsaudit report`: a compliance report computed from the stored scans.
struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Write a compliance report from the stored scans: fleet summary and trend, every target, what changed, expiring certificates, unreachable targets.",
        discussion: """
            Computed from the database alone (no scan is made); safe while the service runs. With \
            --policy every stored observation is judged again under that policy. With --config only \
            the configured targets are reported; with --tag only the targets carrying every tag given. When \
            targets carry app:BUNDLE_ID tags, an Apps section shows each app's targets as its client sees them. Exit 0 when written, 2 when the database cannot be \
            read or the file cannot be written, 64 on bad options.
            """
    ).parsedDirectly(under: "tlsaudit")

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: ArgumentHelp("Output format: \(HelpLists.values(of: ReportFormat.self))."))
    var format: ReportFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    @Option(help: "The period: the report covers this long up to --at (e.g. 24h, 7d, 30d).")
    var since: String = DurationText.text(SettingBounds.reportPeriod.defaultValue)

    @Option(help: "Write the report to this file (atomically) instead of standard output.")
    var out: String?

    @Option(help: ArgumentHelp("Judge every stored scan under this policy instead of its own: \(HelpLists.policies)."))
    var policy: CompliancePolicy?

    @Option(help: "The end of the period, ISO 8601 (default: now).")
    var at: String?

    @Option(name: .customLong("expiring-within"), help: "List certificates expiring within this long (e.g. 30d).")
    var expiringWithin: String = DurationText.text(SettingBounds.expiringWithin.defaultValue)

    @Option(help: "The compliance goal in percent: the trend is green at or above it, red below (default \(Int(SettingBounds.goal.defaultValue))).")
    var goal: Double = ComplianceReport.defaultGoal

    @Option(name: .customLong("tag"), help: "Report only on targets with this tag (repeat it: a target must carry every one, e.g. --tag app:com.example.shop).")
    var tags: [String] = []

    func validate() throws {
        if let problem = SettingBounds.goal.problem(goal, name: "--goal") { throw ValidationError(problem + ".") }
        guard let seconds = DurationText.seconds(since), SettingBounds.reportPeriod.problem(seconds, name: "--since") == nil else {
            throw ValidationError("--since must be \(SettingBounds.reportPeriod.described).")
        }
        guard let expiring = DurationText.seconds(expiringWithin),
              SettingBounds.expiringWithin.problem(expiring, name: "--expiring-within") == nil else {
            throw ValidationError("--expiring-within must be \(SettingBounds.expiringWithin.described).")
        }
        if let at, Timestamp.parse(at) == nil {
            throw ValidationError("--at must be an ISO 8601 time like 2026-11-22T00:00:00Z.")
        }
    }

    func run() throws {
        let store = try databaseOptions.openStore()
        let targets = try databaseOptions.config.map { Set(try loadConfiguration($0).targets.map(\.key)) }
        var request = ReportRequest(since: DurationText.seconds(since)!, end: at.flatMap(Timestamp.parse) ?? Date(),
                                    policy: policy, targets: targets,
                                    expiringWithinDays: Int(DurationText.seconds(expiringWithin)! / 86_400), goal: goal)
        request.tags = tags
        let content: String
        do {
            content = try ReportRenderer.render(try ReportGenerator.report(from: store, request), as: format, compact: jsonStyle.compact)
        } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(2)
        }
        guard let out else {
            StandardStream.output.write(content)
            return
        }
        do {
            try OutputFile.write(content, to: out)
        } catch {
            StandardStream.error.write("tlsaudit: cannot write \(out): \(error.localizedDescription)\n")
            throw ExitCode(2)
        }
    }
}

