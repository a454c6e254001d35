import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe

/// `tlsaudit demo`: real scans of local TLS servers, with no network and no configuration.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start a few loopback TLS servers in-process (good, expired, weak, ...) and scan them for real."
    )

    @Option(help: "Output format: text or json.")
    var format: OutputFormat = .text

    func run() throws {
        let lab = try DemoLab()
        let store = try TrustStore(caFile: lab.caFile)
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: store))
        let targets = lab.servers.map { name, server in
            ScanTarget(original: "\(name) (\(server.endpoint))", host: "demo.tlsaudit.test", port: server.port,
                       sni: "demo.tlsaudit.test", connectTo: [ConnectAddress(host: "127.0.0.1")])
        }
        let results = scanner.scan(targets)
        let report = ScanReport(toolVersion: TLSAuditCommand.version, generatedAt: Date(), trustStore: store.label,
                                timeoutSeconds: 5, targets: results)
        switch format {
        case .json:
            FileHandle.standardOutput.write(try JSONEncoder.tlsaudit.encode(report) + Data("\n".utf8))
        case .text:
            print("tlsaudit demo: \(targets.count) TLS servers on 127.0.0.1, trusting the demo's own root CA\n")
            let colour = ProcessInfo.processInfo.environment["NO_COLOR"] == nil && isatty(STDOUT_FILENO) == 1
            print(ScanTextRenderer(colour: colour, showChain: false).render(report), terminator: "")
        }
        for (_, server) in lab.servers { server.stop() }
    }
}

/// The demo's servers: a small PKI and one loopback server per situation.
struct DemoLab {
    let servers: [(String, LabTLSServer)]
    let caFile: String

    init() throws {
        let name = "demo.tlsaudit.test"
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
            ("weak: RSA-1024, SHA-1, TLS 1.0, static RSA",
             try LabTLSServer(LabServerConfiguration(chain: [weak, intermediate], maxVersion: .tls1_0, cipherList: "AES128-SHA"))),
            ("wrong name, no intermediate", try LabTLSServer(LabServerConfiguration(chain: [wrongName]))),
        ]
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-demo-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        caFile = directory.appendingPathComponent("root.pem").path
        try root.pem.write(toFile: caFile, atomically: true, encoding: .utf8)
    }
}
