import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe

/// `tlsaudit ats`: nscurl --ats-diagnostics for Linux, with the exception an app would need.
struct ATSCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ats",
        abstract: "One probe per ATS configuration (default, minimum TLS versions, no forward secrecy, arbitrary loads), the runtime suites, and the smallest Info.plist exception this server needs.",
        discussion: "Exit status: 0 no exception needed, 1 an exception is needed (or none helps), 2 could not connect, 64 usage error."
    )

    @Argument(help: "The server, HOST[:PORT].")
    var target: String

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Output format: text or json.")
    var format: OutputFormat = .text

    func run() throws {
        let parsed = try parseSingleTarget(target, connectTo: connection.connectTo)
        let store = try loadTrustStore(caFile: connection.caFile)
        let scanner = try TLSScanner(options: ScanOptions(timeout: connection.timeout, trustStore: store))
        let enumerator = Enumerator(scanner: scanner)
        guard case .success(let addresses) = scanner.addresses(for: parsed), let address = addresses.first else {
            if case .failure(let failure) = scanner.addresses(for: parsed) {
                StandardStream.error.write("tlsaudit: \(failure.description)\n")
            }
            throw ExitCode(2)
        }
        let diagnostics = enumerator.atsDiagnostics(address, target: parsed, trustStore: store)
        if diagnostics.configurations.allSatisfy({ $0.detail.hasPrefix("connection refused") || $0.detail.hasPrefix("connect timeout") }) {
            StandardStream.error.write("tlsaudit: cannot connect: \(diagnostics.configurations.first?.detail ?? "")\n")
            throw ExitCode(2)
        }
        switch format {
        case .json:
            StandardStream.output.write(try JSONDocumentEncoder.tlsaudit.encode(diagnostics) + Data("\n".utf8))
        case .text:
            var out = "ATS diagnostics for \(diagnostics.target) (\(diagnostics.address))\n"
            for result in diagnostics.configurations + [diagnostics.runtime] {
                let name = result.name == "runtime" ? "runtime (suites current Apple clients offer)" : result.name
                out += "  \(name.padding(toLength: 46, withPad: " ", startingAt: 0)) \(result.pass ? "PASS" : "FAIL")  \(result.detail)\n"
            }
            out += "\nconclusion: \(diagnostics.recommendation)\n"
            if let plist = diagnostics.infoPlist { out += "\n" + plist }
            StandardStream.output.write(out)
        }
        if diagnostics.exitCode != 0 { throw ExitCode(diagnostics.exitCode) }
    }
}
