import ArgumentParser
import Foundation
import TLSAuditApp
import TLSAuditCore
import TLSAuditProbe

/// `tlsaudit app`: an iOS app's own rules (its Info.plist's NSAppTransportSecurity, its pins)
/// as the policy for the servers it calls.
struct AppCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app",
        abstract: "Judge the servers an iOS app calls by the app's own ATS exceptions and pins.",
        subcommands: [AppAuditCommand.self, AppImportCommand.self]
    )
}

/// `tlsaudit app audit PATH`: each host the app calls, by the rules the app gives it; the
/// exceptions that change nothing; the corrected dictionary.
struct AppAuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Whether a current Apple client running this app connects to each of its hosts, which declared exceptions are unneeded, and the corrected NSAppTransportSecurity.",
        discussion: """
            PATH: an Info.plist (XML or binary), an .app directory or an .ipa. Hosts: every domain the \
            plist names exactly (port 443), and --host / --hosts-file for the hosts the app really calls. \
            Each host is probed once per ATS configuration (as `tlsaudit ats` does) and judged on the \
            configuration that stands for the app's rules for it; a key is unneeded when the probe \
            without it gives every covered host the same outcome.
            Exit status: 0 every host connects and no exception is unneeded, 1 a host fails or an \
            exception is unneeded, 2 a host could not be reached, 64 usage error or unreadable app.
            """
    )

    @Argument(help: "Info.plist, .app directory or .ipa.")
    var path: String

    @OptionGroup var hostOptions: AppHostOptions

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Output format: text or json.")
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func run() throws {
        let bundle: AppBundle
        do { bundle = try AppBundleReader.read(path: path) } catch { throw ValidationError(error.description) }
        let policy = AppTransportSecurityPolicy(bundle.appTransportSecurity)
        let store = try connection.trust.store(caFile: connection.caFile, policy: .atsRuntime)
        var options = ScanOptions(timeout: connection.timeout, trustStore: store)
        options.ctLogs = try connection.trust.logs()
        let scanner = try TLSScanner(options: options, judge: AddressAssessment.judge)
        let enumerator = Enumerator(scanner: scanner)

        var probed: [AppAudit.ProbedHost] = []
        for text in try hostOptions.hosts(for: policy, path: path) {
            let target = try parseSingleTarget(text, connectTo: connection.connectTo, starttls: connection.starttls)
            let name = target.sni ?? target.host
            switch scanner.addresses(for: target) {
            case .failure(let failure):
                probed.append(AppAudit.ProbedHost(host: name, port: target.port, address: nil, probes: nil, failure: failure))
            case .success(let addresses):
                guard let address = addresses.first else { continue }
                probed.append(AppAudit.ProbedHost(host: name, port: target.port, address: address.host,
                                                  probes: enumerator.atsProbes(address, target: target, trustStore: store), failure: nil))
            }
        }
        let report = AppAudit.audit(probed, policy: policy, app: path, bundleIdentifier: bundle.bundleIdentifier,
                                    trustStore: store.label, toolVersion: TLSAuditCommand.version)
        switch format {
        case .json: StandardStream.output.write(try jsonStyle.encoder.encodeLine(report))
        case .text: StandardStream.output.write(Self.text(report))
        }
        if report.exitCode != 0 { throw ExitCode(report.exitCode) }
    }

    static func text(_ report: AppAuditReport) -> String {
        var out = "app \(report.app)\(report.bundleIdentifier.map { " (\($0))" } ?? ""), chains judged against \(report.trustStore)\n"
        for problem in report.problems { out += "  PLIST \(problem)\n" }
        out += "hosts:\n"
        for host in report.hosts {
            let verdict = !host.reachable ? "NOT REACHED" : host.connects ? "CONNECTS" : "FAILS (\(host.reasons.joined(separator: ", ")))"
            out += "  \(host.host):\(host.port)  \(verdict)\n"
            out += "    rule: \(host.rule); probe \(host.probe): \(host.detail)\n"
            if let pin = host.pin { out += "    pins: \(pin)\(host.pinMessage.map { ": \($0)" } ?? "")\n" }
            for fix in host.serverFixes.prefix(2) { out += "    server fix: \(fix)\n" }
            if !host.exceptionNeeded.isEmpty {
                out += "    smallest exception that works: " + host.exceptionNeeded.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: ", ") + "\n"
            }
        }
        if !report.entries.isEmpty { out += "exception domains:\n" }
        for entry in report.entries {
            out += "  \(entry.domain): declares \(entry.declared.joined(separator: ", "))"
            out += entry.unneeded.isEmpty ? "\n" : "; UNNEEDED: \(entry.unneeded.joined(separator: ", "))\n"
            out += "    \(entry.note)\n"
        }
        out += "corrected dictionary (Info.plist):\n" + report.correctedDictionary
        return out
    }
}
