import ArgumentParser
import Foundation
import Logging
import TLSAuditCore
import TLSAuditOutput
import TLSAuditProbe
import TLSAuditService
import TLSAuditStore
import TLSAuditSupport

/// `tlsaudit ct`: the Certificate Transparency follower's state and backfill.
struct CTCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ct",
        abstract: "Certificate Transparency: where serve's follower stands in each log, what it saw, and backfill.",
        subcommands: [CTStatusCommand.self, CTBackfillCommand.self]
    )

    /// The log list a service with `configuration` follows: its `ct: log_list` file, or the last
    /// known good copy of its URL (serve keeps it), else the shipped snapshot.
    static func logList(_ configuration: ServiceConfiguration?) -> CTLogList {
        guard let setting = configuration?.trustInputs[.ctLogList],
              let (list, _) = try? TrustStatusCommand.input(CTLogList.self, setting, option: nil) else { return .shipped }
        return list ?? .shipped
    }
}

/// `tlsaudit ct status`: each followed log's position and the certificates seen for pinned or
/// watched names.
struct CTStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Each CT log's position (head, next entry, backlog, problem) and the certificates logged for pinned or watched names: breaks, covered, unexpected issuers.",
        discussion: "Certificates are listed when valid from --days ago on (newest first), so that the list is what may be deployed soon. Exit status 0; 2 when the database cannot be read."
    ).parsedDirectly(under: "tlsaudit ct")

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: "List certificates valid from this many days ago on.")
    var days: Int = 30

    @Option(help: "How many certificates at most.")
    var limit: Int = 100

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    /// One log as `ct status` shows it.
    struct LogDocument: Encodable {
        var logID: String
        var log: String?
        var tiled: Bool?
        var headSize: UInt64?
        var headTime: Date?
        var nextIndex: UInt64?
        var backlog: UInt64?
        var problem: String?
        var updatedAt: Date
        /// In a fleet, the node that follows the log and until when.
        var owner: String?
        var leaseUntil: Date?
    }

    func run() throws {
        let store = try databaseOptions.openStore()
        let configuration = try databaseOptions.configurationPath.map(loadConfiguration)
        let list = CTCommand.logList(configuration)
        let now = Date()
        let states: [CTLogState], sightings: [CTSighting]
        do {
            states = try store.ctLogStates()
            sightings = try store.ctSightings(validFrom: now.addingTimeInterval(-Double(max(0, days)) * 86_400), limit: limit)
        } catch {
            StandardStream.error.write("tlsaudit: cannot read the CT follower's state: \(error)\n")
            throw ExitCode(2)
        }
        let logs = states.map { state -> LogDocument in
            let position = try? JSONDecoder().decode(CTLogPosition.self, from: Data(state.position.utf8))
            let known = list.logs.first { $0.id == state.logID }
            return LogDocument(logID: state.logID, log: known?.description, tiled: known?.tiled, headSize: position?.head?.treeSize,
                               headTime: position?.head?.timestamp, nextIndex: position?.nextIndex, backlog: position?.backlog,
                               problem: state.problem ?? (position == nil && !state.position.isEmpty ? "the stored position cannot be read" : nil),
                               updatedAt: state.updatedAt, owner: state.owner, leaseUntil: state.leaseUntil)
        }
        switch format {
        case .json:
            struct Document: Encodable {
                var logs: [LogDocument]
                var sightings: [CTSighting]
            }
            StandardStream.output.write(try jsonStyle.encoder.encodeLine(Document(logs: logs, sightings: sightings)))
        case .text:
            let logRows = logs.map { log -> [String] in
                [log.log ?? log.logID, log.tiled == true ? "static" : log.tiled == false ? "rfc6962" : "?",
                 log.headSize.map(String.init) ?? "-", log.headTime.map(Timestamp.format) ?? "-", log.nextIndex.map(String.init) ?? "-",
                 log.backlog.map(String.init) ?? "-", Timestamp.format(log.updatedAt),
                 log.owner.map { owner in (log.leaseUntil ?? .distantPast) < now ? owner + " (lease lapsed)" : owner } ?? "-", log.problem ?? ""]
            }
            StandardStream.output.write(logs.isEmpty ? "no CT log followed yet (serve with ct: {follow: true})\n"
                : TextTable.render(header: ["LOG", "API", "HEAD", "HEAD TIME", "NEXT", "BACKLOG", "UPDATED", "NODE", "PROBLEM"], rows: logRows))
            let rows = sightings.map { sighting -> [String] in
                [Timestamp.format(sighting.notBefore), sighting.verdict.rawValue, sighting.host, sighting.judgedBy,
                 DistinguishedName.attribute("CN", of: sighting.issuer) ?? sighting.issuer, "sha256/\(sighting.spki)",
                 "\(sighting.log) #\(sighting.index)\(sighting.precertificate ? " (precertificate)" : "")"]
            }
            StandardStream.output.write("\n" + (sightings.isEmpty ? "no certificate logged for a pinned or watched name valid from the last \(days) days\n"
                : TextTable.render(header: ["NOT BEFORE", "VERDICT", "HOST", "JUDGED BY", "ISSUER", "SPKI", "LOGGED"], rows: rows)))
        }
    }
}

/// `tlsaudit ct backfill`: judges what the logs took since a date for the configured names.
struct CTBackfillCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backfill",
        abstract: "Read the CT logs from a date (or an index) to their heads and judge what was logged for the configured pinned and watched names, as serve's follower does.",
        discussion: """
            For a new app or a newly watched domain: the alerts (pin.forecast-break, ct.unexpected-issuer) and sightings a \
            running serve would have recorded, each once (a repeat adds nothing), delivered by serve's alert sinks. serve's \
            positions are left alone. Every head, chunk and proof is checked as the follower checks them; --rate bounds the \
            entries read a second per log. Exit status 0 when every log was read, 1 when one stopped (a problem or a failure), \
            64 for a bad configuration or option, 2 when the database cannot be opened.
            """
    ).parsedDirectly(under: "tlsaudit ct")

    @OptionGroup var databaseOptions: DatabaseOptions

    @Option(help: "Read entries logged from this date on (YYYY-MM-DD or an RFC 3339 time).")
    var since: String?

    @Option(help: "Read from this entry index instead (with --log).")
    var index: UInt64?

    @Option(help: "Only this log (its description or base64 id).")
    var log: String?

    @Option(help: "Entries read a second per log at most.")
    var rate: Double = 2_000

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func validate() throws {
        guard (since == nil) != (index == nil) else { throw ValidationError("give --since DATE or --index N (with --log)") }
        if index != nil, log == nil { throw ValidationError("--index needs --log: indexes are a log's own") }
        if let since, Self.date(since) == nil { throw ValidationError("--since: '\(since)' is not YYYY-MM-DD or an RFC 3339 time") }
        guard rate >= 1, rate.isFinite else { throw ValidationError("--rate must be at least 1 entry a second") }
    }

    static func date(_ text: String) -> Date? {
        Timestamp.parse(text) ?? Timestamp.parse(text + "T00:00:00Z")
    }

    func run() throws {
        guard let path = databaseOptions.configurationPath else {
            throw ValidationError("ct backfill needs the configuration (--config): its targets' pins and ct: watch name what is judged")
        }
        let configuration = try loadConfiguration(path)
        let store = try databaseOptions.openStore(create: true)
        var backfill = CTBackfill(configuration: configuration, logs: CTCommand.logList(configuration), store: store,
                                  logger: Logger(label: "tlsaudit.ct"))
        backfill.rate = rate
        guard !backfill.logsToRead(only: log).isEmpty else {
            throw ValidationError(log.map { "no followed log (usable, qualified or read-only, with a URL) is '\($0)'" } ?? "the log list has no log to follow")
        }
        let results = try backfill.run(only: log, since: since.flatMap(Self.date), index: index) { line in
            if format == .text { StandardStream.error.write(line + "\n") }
        }
        if format == .json { StandardStream.output.write(try jsonStyle.encoder.encodeLine(["logs": results])) }
        if results.contains(where: { $0.problem != nil }) { throw ExitCode(1) }
    }
}
