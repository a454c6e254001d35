import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditService
import TLSAuditStore
import TLSAuditSQLite

/// `tlsaudit demo`: the service, for real, against TLS servers it starts on loopback. No network,
/// no configuration file needed.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the real service for a few cycles against loopback TLS servers it starts in-process, then print the status table.",
        discussion: """
            The servers: a good chain, an expired leaf, a weak server (TLS 1.0, static RSA, RSA-1024, \
            SHA-1), a wrong-name leaf sent without its intermediate, and a port where nothing listens. \
            The service scans each every 2 seconds and stores the scans in SQLite.
            """
    ).parsedDirectly(under: "tlsaudit")

    @Option(help: "The SQLite database (default: a fresh file in a temporary directory).")
    var database: String?

    @Option(help: "Scan cycles to run (2 s each).")
    var cycles: Int = 3

    @Flag(help: "Show the service's log lines on stderr.")
    var verbose = false

    @OptionGroup var log: LogFormatOption

    func validate() throws {
        guard (1...100).contains(cycles) else { throw ValidationError("--cycles must be between 1 and 100.") }
    }

    func run() async throws {
        LogSetup.bootstrap(level: verbose ? "info" : "warning", format: log.logFormat)
        let lab = try DemoLab()
        defer {
            lab.stop()
            // The directory holds the demo's CA file, and its database unless --database named one:
            // kept then (the commands printed at the end read it), removed otherwise.
            if database != nil { try? FileManager.default.removeItem(at: lab.directory) }
        }
        let directory = lab.directory
        let configuration = ServiceConfiguration(
            database: database ?? directory.appendingPathComponent("tlsaudit-demo.sqlite").path,
            concurrency: 8, perHostConcurrency: 8, retention: 86_400, maxBackoff: 8, logLevel: "info",
            targets: lab.targets(interval: 2))
        StandardStream.output.write("tlsaudit demo: \(lab.servers.count) TLS servers on 127.0.0.1 and one closed port; database \(configuration.database)\n")
        StandardStream.output.write("running the service for \(cycles) cycle(s) of 2 s...\n\n")
        let service = try ScanService(configuration: configuration, configurationPath: nil,
                                      logger: Logger(label: "tlsaudit"), shutdownGrace: 5)
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "tlsaudit")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                try await Task.sleep(for: .seconds(Double(cycles) * 2 + 1))
                await group.triggerGracefulShutdown()
            }
            try await tasks.waitForAll()
        }
        let store = try SQLiteScanStore(path: configuration.database, create: false, sha256: Digest.sha256Hex)
        StandardStream.output.write(StatusTable.render(try store.status(), now: Date()) + "\n")
        StandardStream.output.write("See one target's scans:  tlsaudit history --database \(configuration.database) expired\n")
        StandardStream.output.write("A compliance report:     tlsaudit report --database \(configuration.database) --since 1h [--format html --out demo.html]\n")
    }
}

/// The demo's servers: a small PKI and one loopback server per situation.
struct DemoLab {
    let servers: [(name: String, server: LabTLSServer)]
    let closedPort: Int
    let directory: URL
    let caFile: String
    static let hostname = "demo.tlsaudit.test"

    init() throws {
        let name = Self.hostname
        let root = try LabCertificateAuthority.selfSigned(.authority("tlsaudit demo root"))
        let intermediate = try root.issue(.authority("tlsaudit demo intermediate", pathLength: 0))
        let good = try intermediate.issue(.server([name]))
        var expiredRequest = LabCertificateRequest.server([name])
        expiredRequest.notBefore = Date().addingTimeInterval(-400 * 86_400)
        expiredRequest.notAfter = Date().addingTimeInterval(-10 * 86_400)
        let expired = try intermediate.issue(expiredRequest)
        let weak = try intermediate.issue(.server([name], key: .rsa(bits: 1024), digest: .sha1))
        let wrongName = try intermediate.issue(.server(["other.tlsaudit.test"]))
        servers = [
            ("good", try LabTLSServer(LabServerConfiguration(chain: [good, intermediate]))),
            ("expired", try LabTLSServer(LabServerConfiguration(chain: [expired, intermediate]))),
            ("weak", try LabTLSServer(LabServerConfiguration(chain: [weak, intermediate], maxVersion: .tls1_0, cipherList: "AES128-SHA"))),
            ("wrong-name", try LabTLSServer(LabServerConfiguration(chain: [wrongName]))),
        ]
        closedPort = try LabPorts.unusedPort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-demo-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        caFile = directory.appendingPathComponent("demo-root.pem").path
        try root.pem.write(toFile: caFile, atomically: true, encoding: .utf8)
    }

    /// One service target per server, named after it, trusting the demo root.
    func targets(interval: Double) -> [TargetConfiguration] {
        let ports = servers.map { ($0.name, $0.server.port) } + [("closed-port", closedPort)]
        return ports.map { name, port in
            TargetConfiguration(key: name, host: Self.hostname, port: port, sni: Self.hostname,
                                addresses: .list(["127.0.0.1"]), interval: interval, timeout: 3, policy: .default,
                                trust: .caFile(caFile), tags: ["demo"], group: nil)
        }
    }

    func stop() {
        for (_, server) in servers { server.stop() }
    }
}
