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
            without it gives every covered host the same outcome. The global keys are judged the same \
            way over every audited host (NSAllowsArbitraryLoadsForMedia and ...InWebContent are not \
            judged: they affect AV Foundation and WKWebView loads only). A handshake must also reach \
            the TLS version the app's exception asks for, and meet Apple's Certificate Transparency \
            policy where it applies (publicly trusted chains; any trusted chain of an entry with \
            NSRequiresCertificateTransparency = YES; SCTs checked against --ct-log-list).
            --afnetworking MODE[,allow-invalid-certificates][,no-domain-validation], MODE certificate, \
            public-key or none: the app's AFSecurityPolicy for every host, its pinned set the bundle's \
            .cer/.der certificates (AFNetworking's certificatesInBundle), evaluated in AFNetworking's \
            order as `scan` evaluates pins:; a mismatch fails the host with pin.mismatch. The app then \
            evaluates server trust itself where ATS lets it (insecure HTTP loads, ATS off). A bundle \
            without certificates in certificate or public-key mode is a usage error: AFNetworking would \
            refuse every server.
            Exit status: 0 every host connects and no exception is unneeded, 1 a host fails or an \
            exception (entry key or global key) is unneeded, 2 a host could not be reached, 64 usage \
            error or unreadable app.
            """
    )

    @Argument(help: "Info.plist, .app directory or .ipa.")
    var path: String

    @OptionGroup var hostOptions: AppHostOptions

    @Option(help: ArgumentHelp("The app's AFSecurityPolicy for every host: MODE[,allow-invalid-certificates][,no-domain-validation], MODE certificate, public-key or none; the pinned set is the bundle's certificates.",
                               valueName: "mode"))
    var afnetworking: String?

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func run() throws {
        let bundle: AppBundle
        do { bundle = try AppBundleReader.read(path: path) } catch { throw ValidationError(error.description) }
        let policy = AppTransportSecurityPolicy(bundle.appTransportSecurity)
        let pinning = try afnetworking.map { try Self.securityPolicy($0, bundle: bundle) }
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
                                    trustStore: store.label, toolVersion: TLSAuditCommand.version,
                                    afnetworking: pinning?.policy, afnetworkingSettings: pinning?.settings)
        switch format {
        case .json: StandardStream.output.write(try jsonStyle.encoder.encodeLine(report))
        case .text: StandardStream.output.write(Self.text(report))
        }
        if report.exitCode != 0 { throw ExitCode(report.exitCode) }
    }

    /// `--afnetworking`: AFSecurityPolicy with the bundle's certificates as its pinned set (every
    /// `.cer`/`.der`, DER as AFNetworking reads them). Usage errors: an unknown mode or flag, a
    /// bundled file that is not a DER certificate, no certificate at all in a pinning mode
    /// (AFNetworking would refuse every server), and AFNetworking's own refusal of
    /// allowInvalidCertificates with domain validation and nothing pinned.
    static func securityPolicy(_ text: String, bundle: AppBundle) throws -> (policy: PinPolicy, settings: AppAuditReport.AFNetworkingSettings) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let mode = PinMode(rawValue: parts[0]) else {
            throw ValidationError("--afnetworking: '\(parts[0])' is not an AFSSLPinningMode: use certificate, public-key or none")
        }
        var policy = PinPolicy(mode: mode)
        for flag in parts.dropFirst() {
            switch flag {
            case "allow-invalid-certificates": policy.allowInvalidCertificates = true
            case "no-domain-validation": policy.validatesDomainName = false
            default: throw ValidationError("--afnetworking: unknown flag '\(flag)': use allow-invalid-certificates and/or no-domain-validation")
            }
        }
        if mode != .none {
            for certificate in bundle.certificates {
                let summary: CertificateSummary
                do { summary = try CertificateFile.summary(der: certificate.der) } catch {
                    throw ValidationError("\(bundle.path): \(certificate.fileName) is not a DER certificate, which AFNetworking's pinned set needs")
                }
                policy.pins.append(mode == .certificate ? .certificate(summary.sha256Fingerprint) : .spki(summary.spkiSHA256))
                if mode == .certificate { policy.pinnedCertificates.append(summary.der) }
            }
            guard !policy.pins.isEmpty else {
                throw ValidationError("\(bundle.path): --afnetworking \(mode.rawValue) pins the bundle's .cer/.der certificates, and it has none: AFNetworking would refuse every server (give an .app or .ipa that bundles them)")
            }
        }
        if let problem = policy.problems.first { throw ValidationError("--afnetworking: \(problem)") }
        let settings = AppAuditReport.AFNetworkingSettings(mode: mode, allowInvalidCertificates: policy.allowInvalidCertificates,
                                                          validatesDomainName: policy.validatesDomainName,
                                                          certificates: mode == .none ? [] : bundle.certificates.map(\.fileName))
        return (policy, settings)
    }

    static func text(_ report: AppAuditReport) -> String {
        var out = "app \(report.app)\(report.bundleIdentifier.map { " (\($0))" } ?? ""), chains judged against \(report.trustStore)\n"
        for problem in report.problems { out += "  PLIST \(problem)\n" }
        if let settings = report.afnetworking {
            out += "AFNetworking: AFSSLPinningMode \(settings.mode.rawValue), allowInvalidCertificates \(settings.allowInvalidCertificates ? "YES" : "NO"), validatesDomainName \(settings.validatesDomainName ? "YES" : "NO")"
                + (settings.certificates.isEmpty ? "" : ", pinned: \(settings.certificates.joined(separator: ", "))") + "\n"
        }
        out += "hosts:\n"
        for host in report.hosts {
            let verdict = !host.reachable ? "NOT REACHED" : host.connects ? "CONNECTS" : "FAILS (\(host.reasons.joined(separator: ", ")))"
            out += "  \(host.host):\(host.port)  \(verdict)\n"
            out += "    rule: \(host.rule); probe \(host.probe): \(host.detail)\n"
            if let pin = host.pin { out += "    pins: \(pin)\(host.pinMessage.map { ": \($0)" } ?? "")\n" }
            if let pin = host.afnetworking { out += "    afnetworking: \(pin.state.rawValue): \(pin.message)\n" }
            if let oldest = host.oldestConnectingIos { out += "    oldest iOS that connects: \(oldest)\n" }
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
        if !report.global.isEmpty { out += "global keys:\n" }
        for key in report.global {
            let status = key.status == .unneeded ? "UNNEEDED" : key.status == .needed ? "needed" : "not judged"
            out += "  \(key.key) = \(key.value): \(status)\n    \(key.note)\n"
        }
        out += "corrected dictionary (Info.plist):\n" + report.correctedDictionary
        return out
    }
}
