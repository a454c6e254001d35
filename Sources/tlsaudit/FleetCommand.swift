import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditOutput
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditService
import TLSAuditStore
import TLSAuditSupport

/// `tlsaudit fleet`: the one configuration of a fleet of nodes on PostgreSQL, and its nodes.
struct FleetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Manage a fleet of tlsaudit nodes sharing one PostgreSQL database.",
        subcommands: [Apply.self, Status.self]
    )

    /// The PostgreSQL settings of --database, else of the configuration's `database:`; exit 2 when it is not PostgreSQL.
    static func postgres(_ text: String) throws -> PostgresSettings {
        guard let settings = (try? StoreBackends.location(text) as? PostgresLocation)?.settings else {
            StandardStream.error.write("tlsaudit: fleet commands need a PostgreSQL database (postgres://...), not \(text)\n")
            throw ExitCode(2)
        }
        return settings
    }

    struct Apply: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apply",
            abstract: "Validate a configuration and store it as the fleet's next version; every node runs it within seconds.",
            discussion: """
                The nodes are told at once (LISTEN/NOTIFY) and poll as well. Each node keeps its own `database:` and \
                `node:` settings; everything else (targets, alerts, reports, intervals, concurrency, fleet lease and poll) \
                comes from this file. Exit 0 applied, 64 the file is invalid (nothing stored), 2 the database cannot be reached.
                """
        ).parsedDirectly(under: "tlsaudit fleet")

        @Argument(help: "The YAML configuration to apply.")
        var file: String

        @Option(help: "The fleet's postgres:// URL (default: the file's database:).")
        var database: String?

        func run() throws {
            let configuration = try loadConfiguration(file)
            for warning in configuration.warnings { StandardStream.error.write("warning: \(warning)\n") }
            let settings = try FleetCommand.postgres(database ?? configuration.database)
            guard !configuration.targets.isEmpty else {
                StandardStream.error.write("\(file): no targets: a fleet configuration needs a 'targets' list (or 'groups')\n")
                throw ExitCode(64)
            }
            let version: Int64
            do {
                let document = try String(contentsOfFile: file, encoding: .utf8)
                _ = try PostgresScanStore(settings, sha256: Digest.sha256Hex) // the schema brought up to date
                let fleet = PostgresFleet(settings, node: NodeIdentity.defaultName, vantage: "")
                version = try fleet.apply(document: document, sha256: Digest.sha256Hex(Array(document.utf8)),
                                          targets: configuration.fleetTargets, appliedBy: "\(NSUserName())@\(NodeIdentity.defaultName)")
            } catch {
                StandardStream.error.write("tlsaudit: \(error)\n")
                throw ExitCode(2)
            }
            StandardStream.output.write("fleet configuration version \(version) applied to \(settings.display): \(configuration.targets.count) target(s)\n")
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "List the fleet's nodes: vantage, configuration version, last heartbeat, scans in flight, scans per minute.",
            discussion: """
                A node is 'lost' when its last heartbeat is older than three of its poll periods plus its lease (its \
                scans are then taken over by the others). Exit 0 when every node is alive and runs the newest version, 1 \
                otherwise, 2 when the database cannot be read.
                """
        ).parsedDirectly(under: "tlsaudit fleet")

        @OptionGroup var databaseOptions: DatabaseOptions

        @Option(help: ArgumentHelp(HelpLists.outputFormat))
        var format: OutputFormat = .text

        @OptionGroup var jsonStyle: JSONStyleOptions

        func run() throws {
            var text = databaseOptions.database
            if text == nil, let file = databaseOptions.configurationPath { text = try loadConfiguration(file).database }
            let settings = try FleetCommand.postgres(text ?? ServiceConfiguration.defaultDatabase)
            let nodes: [FleetNodeStatus]
            let latest: FleetConfigurationVersion?
            let work: FleetWorkSummary
            do {
                _ = try PostgresScanStore(settings, sha256: Digest.sha256Hex)
                let fleet = PostgresFleet(settings, node: NodeIdentity.defaultName, vantage: "")
                nodes = try fleet.nodes()
                latest = try fleet.latestConfiguration()
                work = try fleet.workSummary()
            } catch {
                StandardStream.error.write("tlsaudit: \(error)\n")
                throw ExitCode(2)
            }
            let server = PostgresServerWatch.current
            let document = FleetStatusDocument(database: FleetStatusDocument.Database(url: settings.display, server: server?.address, role: server?.role),
                                               configurationVersion: latest?.version, appliedAt: latest?.appliedAt,
                                               appliedBy: latest?.appliedBy, work: work,
                                               nodes: nodes.map { FleetStatusDocument.Node(node: $0, lost: $0.lost) })
            switch format {
            case .json:
                StandardStream.output.write(try jsonStyle.encoder.encodeLine(document))
            case .text:
                StandardStream.output.write(FleetStatusTable.render(document))
            }
            let behind = document.nodes.contains { !$0.lost && $0.node.configurationVersion != latest?.version }
            if document.nodes.isEmpty || document.nodes.contains(where: \.lost) || behind { throw ExitCode(1) }
        }
    }
}

/// The JSON of `fleet status --format json`.
struct FleetStatusDocument: Encodable {
    struct Node: Encodable {
        let node: FleetNodeStatus
        let lost: Bool

        func encode(to encoder: any Encoder) throws {
            try node.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(lost, forKey: .lost)
        }

        enum Key: String, CodingKey { case lost }
    }

    /// The database as configured, and the server that answered (of several a URL names) and its role.
    struct Database: Encodable {
        let url: String
        let server: String?
        let role: String?
    }

    let schema = "tlsaudit.fleet-status/1"
    let database: Database
    let configurationVersion: Int64?
    let appliedAt: Date?
    let appliedBy: String?
    let work: FleetWorkSummary
    let nodes: [Node]
}

enum FleetStatusTable {
    static func render(_ document: FleetStatusDocument) -> String {
        var text = "database: \(document.database.url)"
            + (document.database.server.map { " (answered by \($0), \(document.database.role ?? "?"))" } ?? "") + "\n"
        if let version = document.configurationVersion {
            text += "configuration version \(version), applied \(document.appliedAt.map { Timestamp.format($0) } ?? "?") by \(document.appliedBy ?? "?")\n"
        } else {
            text += "no fleet configuration yet: tlsaudit fleet apply FILE\n"
        }
        text += "work: \(document.work.scans) scan(s) scheduled, \(document.work.leased) in flight, \(document.work.waiting) due and waiting"
        text += document.work.waiting > 0 ? " (longest \(DurationText.text(document.work.longestWait.rounded())))\n" : "\n"
        guard !document.nodes.isEmpty else { return text + "no node has started yet\n" }
        let rows = document.nodes.map { entry -> [String] in
            let node = entry.node
            return [node.name, node.vantage, node.configurationVersion.map(String.init) ?? "-",
                    "\(DurationText.text(node.heartbeatAge.rounded())) ago", entry.lost ? "LOST" : "alive",
                    "\(node.inFlight)", String(format: "%.0f", node.scansPerMinute), "\(node.scansTotal)", node.databaseServer ?? "-"]
        }
        return text + "\n" + TextTable.render(header: ["NODE", "VANTAGE", "CONFIG", "HEARTBEAT", "STATE", "IN FLIGHT", "SCANS/MIN", "SCANS", "DATABASE"],
                                              rows: rows)
    }
}
