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
            Each host is probed under every ATS configuration (as `tlsaudit ats` does) and judged on the \
            configuration that stands for the app's rules for it; a key is unneeded when the probe \
            without it gives every covered host the same outcome. The global keys are judged the same \
            way over every audited host (NSAllowsArbitraryLoadsForMedia and ...InWebContent are not \
            judged: they affect AV Foundation and WKWebView loads only). A handshake must also reach \
            the TLS version the app's exception asks for, and meet Apple's Certificate Transparency \
            policy where it applies (publicly trusted chains; any trusted chain of an entry with \
            NSRequiresCertificateTransparency = YES; SCTs checked against --ct-log-list).
            --afnetworking MODE[,allow-invalid-certificates][,no-domain-validation], MODE certificate, \
            public-key or none: the app's AFSecurityPolicy for every host, its pinned set the bundle's \
            .cer certificates (AFNetworking's certificatesInBundle; other certificate files are reported \
            as ignored), evaluated in AFNetworking's order as `scan` evaluates pins:; a mismatch fails \
            the host with pin.mismatch. The app then evaluates server trust itself where ATS lets it \
            (insecure HTTP loads, ATS off).
            --trust-evaluation: how the app answers the server-trust challenge. system (the default): \
            no Info.plist key bypasses the default trust evaluation, so a self-signed, expired or \
            untrusted server fails even with NSExceptionAllowsInsecureHTTPLoads. afnetworking: with \
            --afnetworking. accept-all: a delegate that accepts every certificate where ATS lets it \
            decide (a pin.accepts-any-certificate warning). Each failing host names the error the app \
            logs (NSURLErrorDomain code, and the kCFStreamErrorDomainSSL code where Apple's logs show one). \
            An http:// host is judged as a plain HTTP load (-1022 unless its rules allow insecure loads).
            --client-cert/--client-key or --client-p12: the app's client identity, presented where a \
            server asks for a certificate (URLSession's client-certificate challenge); without it such a \
            server fails with tls.client-certificate-required (-1206), with it refused with \
            tls.client-certificate-rejected (-1205).
            Exit status: 0 every host connects and no exception is unneeded, 1 a host fails, an \
            exception (entry key or global key) is unneeded, or an app finding is an error (AFNetworking's \
            refusal of its policy, nothing pinned, a .cer that is not DER), 2 a host could not be reached \
            or an input (the app, the client identity) could not be read, 64 usage error. Plist domains probed by --probe-plist-domains \
            never change it. \
            With --baseline FILE (an earlier --format sarif or json output): 0 nothing new, 1 a finding not in the baseline, 2 a host was not reached or an input could not be read; the known findings are listed as such. --format junit and sarif: docs/ci.md.
            """
    ).parsedDirectly(under: "tlsaudit app")

    @Argument(help: "Info.plist, .app directory or .ipa.")
    var path: String

    @OptionGroup var hostOptions: AppHostOptions

    @Option(help: ArgumentHelp("The app's AFSecurityPolicy for every host: MODE[,allow-invalid-certificates][,no-domain-validation], MODE certificate, public-key or none; the pinned set is the bundle's .cer certificates.",
                               valueName: "mode"))
    var afnetworking: String?

    @Option(name: .customLong("trust-evaluation"), help: ArgumentHelp(
        "How the app answers the server-trust challenge: system (the default: no delegate of its own, or performDefaultHandling), afnetworking (AFSecurityPolicy, with --afnetworking) or accept-all (a delegate that accepts every certificate).",
        valueName: "how"))
    var trustEvaluation: AppTrustEvaluation?

    @Flag(name: .customLong("probe-plist-domains"), help: "With --host or --hosts-file: also probe the domains the plist names that were not given (port 443); their outcomes never change the exit status.")
    var probePlistDomains = false

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var deviceChain: DeviceChainOptions

    @OptionGroup var identity: ClientIdentityOptions

    @Option(help: ArgumentHelp(GateOptions.formatHelp))
    var format: GateOutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    @OptionGroup var gate: GateOptions

    func validate() throws {
        switch (trustEvaluation, afnetworking) {
        case (.afnetworking?, nil):
            throw ValidationError("--trust-evaluation afnetworking needs --afnetworking MODE (the app's AFSecurityPolicy).")
        case (.system?, _?), (.acceptAll?, _?):
            throw ValidationError("--afnetworking MODE is the app's trust evaluation: leave out --trust-evaluation \(trustEvaluation!.rawValue), or give afnetworking.")
        default:
            break
        }
    }

    func run() throws {
        let bundle: AppBundle
        do { bundle = try AppBundleReader.read(path: path) } catch {
            // Unreadable input is exit 2 (64 is for wrong flags): CI can tell the two apart.
            StandardStream.error.write("tlsaudit: \(error.description)\n")
            throw ExitCode(2)
        }
        let policy = AppTransportSecurityPolicy(bundle.appTransportSecurity)
        let pinning = try afnetworking.map { try Self.securityPolicy($0, bundle: bundle) }
        let store = try connection.trust.store(caFile: connection.caFile, policy: .atsRuntime)
        var options = ScanOptions(timeout: connection.timeout, trustStore: store)
        try connection.trust.apply(to: &options)
        options.clientCredentials = try identity.credentials()
        options.aiaFetch = !deviceChain.noAIAFetch
        let scanner = try makeScanner(options)
        let enumerator = Enumerator(scanner: scanner)

        let selection = try hostOptions.auditHosts(for: policy, path: path, probePlistDomains: probePlistDomains)
        var probed: [AppAudit.ProbedHost] = []
        for (text, requested) in selection.hosts {
            let plainTarget = try parsePlainHTTPTarget(text, connectTo: connection.connectTo)
            let plainHTTP = plainTarget != nil
            let target = try plainTarget ?? parseSingleTarget(text, connectTo: connection.connectTo, starttls: connection.starttls)
            let name = target.sni ?? target.host
            var host: AppAudit.ProbedHost
            switch scanner.addresses(for: target) {
            case .failure(let failure):
                host = AppAudit.ProbedHost(host: name, port: target.port, address: nil, probes: nil, failure: failure)
            case .success(let addresses):
                guard let address = addresses.first else { continue }
                if plainHTTP {
                    host = AppAudit.ProbedHost(host: name, port: target.port, address: address.host, probes: nil, failure: nil)
                    // Only a load ATS lets through reaches the server.
                    if policy.effectivePolicy(for: name).allowsInsecureHTTPLoads {
                        host.plainHTTPAnswer = enumerator.plainHTTPAnswer(address, target: target)
                    }
                } else {
                    host = AppAudit.ProbedHost(host: name, port: target.port, address: address.host,
                                               probes: enumerator.atsProbes(address, target: target, trustStore: store), failure: nil)
                }
            }
            host.plainHTTP = plainHTTP
            host.requested = requested
            probed.append(host)
        }
        var report = AppAudit.audit(probed, policy: policy, app: path, bundleIdentifier: bundle.bundleIdentifier,
                                    trustStore: store.label, toolVersion: TLSAuditCommand.version,
                                    afnetworking: pinning?.policy, afnetworkingSettings: pinning?.settings,
                                    trustEvaluation: trustEvaluation ?? .system, findings: pinning?.findings ?? [],
                                    privateAnchors: probed.contains { $0.probes?.privateAnchors == true })
        report.notProbed = selection.notProbed
        try gate.finish(GateReports.app(report, plist: .init(bundle)), commandExit: report.exitCode, format: format,
                        json: { try jsonStyle.encoder.encodeLineSegments(report) }, text: { Self.text(report) },
                        fromJSON: { data in
                            try GateOptions.decode(AppAuditReport.self, data, schema: AppAuditReport.schemaVersion)
                                .map { GateReports.app($0, plist: GateReports.PlistSource(file: $0.app)) }
                        })
    }

    /// `--afnetworking`: AFSecurityPolicy with the bundle's `.cer` files as its pinned set (DER, as
    /// AFNetworking's `certificatesInBundle` reads them). Usage errors (exit 64): an unknown mode or
    /// flag. What AFNetworking itself would make of the app (its refusal of allowInvalidCertificates
    /// with domain validation and nothing pinned, a pinning mode with no usable certificate, a `.cer`
    /// that is not DER, certificate files it never reads, no domain validation) are findings.
    static func securityPolicy(_ text: String, bundle: AppBundle) throws
        -> (policy: PinPolicy, settings: AppAuditReport.AFNetworkingSettings, findings: [Finding]) {
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
        var findings: [Finding] = []
        var pinned: [String] = []
        if mode != .none {
            for certificate in bundle.certificates {
                guard certificate.isReadByAFNetworking else {
                    findings.append(Finding(.pinCertificateFileIgnored, .warning,
                        "\(certificate.fileName) is not a pin: AFNetworking's certificatesInBundle reads only files with the extension cer"
                        + (certificate.isPEM ? "; it is PEM, so convert it as well: openssl x509 -in \(certificate.fileName) -outform der -out \(Self.cerName(certificate.fileName))"
                                             : "; rename it to \(Self.cerName(certificate.fileName)) if it is meant as one")))
                    continue
                }
                let summary: CertificateSummary
                do { summary = try CertificateFile.summary(der: certificate.der) } catch {
                    findings.append(Finding(.pinCertificateNotDER, .error, certificate.isPEM
                        ? "\(certificate.fileName) is PEM, not DER: AFNetworking cannot read it, so it pins nothing. Convert it: openssl x509 -in \(certificate.fileName) -outform der -out \(certificate.fileName).der && mv \(certificate.fileName).der \(certificate.fileName)"
                        : "\(certificate.fileName) is not a DER certificate: AFNetworking cannot read it, so it pins nothing"))
                    continue
                }
                pinned.append(certificate.fileName)
                policy.pins.append(mode == .certificate ? .certificate(summary.sha256Fingerprint) : .spki(summary.spkiSHA256))
                if mode == .certificate { policy.pinnedCertificates.append(summary.der) }
            }
        }
        if let refusal = AFNetworkingPolicy.refusalFinding(policy, bundle: bundle.path) { findings.append(refusal) }
        findings += policy.policyFindings
        let settings = AppAuditReport.AFNetworkingSettings(mode: mode, allowInvalidCertificates: policy.allowInvalidCertificates,
                                                          validatesDomainName: policy.validatesDomainName, certificates: pinned)
        return (policy, settings, findings)
    }

    /// `api.pem` -> `api.cer`.
    static func cerName(_ fileName: String) -> String {
        ((fileName as NSString).deletingPathExtension as String) + ".cer"
    }

    static func text(_ report: AppAuditReport) -> String {
        var out = "app \(report.app)\(report.bundleIdentifier.map { " (\($0))" } ?? ""), chains judged against \(report.trustStore)\n"
        for problem in report.problems { out += "  PLIST \(problem)\n" }
        if let settings = report.afnetworking {
            out += "AFNetworking: AFSSLPinningMode \(settings.mode.rawValue), allowInvalidCertificates \(settings.allowInvalidCertificates ? "YES" : "NO"), validatesDomainName \(settings.validatesDomainName ? "YES" : "NO")"
                + (settings.certificates.isEmpty ? "" : ", pinned: \(settings.certificates.joined(separator: ", "))") + "\n"
        }
        out += "trust evaluation: \(report.trustEvaluation.phrase) (--trust-evaluation \(report.trustEvaluation.rawValue))\n"
        if let anchors = report.anchors { out += "anchors: \(anchors)\n" }
        for finding in report.findings { out += "  \(finding.severity.rawValue.uppercased()) \(finding.id): \(finding.message)\n" }
        out += "hosts:\n"
        for host in report.hosts {
            let verdict = !host.reachable ? "NOT REACHED" : host.connects ? "CONNECTS" : "FAILS (\(host.reasons.joined(separator: ", ")))"
            let scheme = host.scheme.map { "\($0)://" } ?? ""
            out += "  \(scheme)\(host.host):\(host.port)  \(verdict)\(host.requested ? "" : "  (plist domain, not counted in the exit status)")\n"
            if let error = host.error { out += "    the app logs: \(error)\n" }
            out += "    rule: \(host.rule); probe \(host.probe): \(host.detail)\n"
            if let pin = host.pin { out += "    pins: \(pin)\(host.pinMessage.map { ": \($0)" } ?? "")\n" }
            if let pin = host.afnetworking { out += "    afnetworking: \(pin.state.rawValue): \(pin.message)\n" }
            if let oldest = host.oldestConnectingIos { out += "    oldest iOS that connects: \(oldest)\n" }
            for fix in host.serverFixes.prefix(2) { out += "    server fix: \(fix)\n" }
            if !host.exceptionNeeded.isEmpty {
                out += "    smallest exception that works: " + host.exceptionNeeded.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: ", ") + "\n"
            }
        }
        if !report.notProbed.isEmpty {
            out += "not probed (named in the plist, not given with --host; --probe-plist-domains probes them): \(report.notProbed.joined(separator: ", "))\n"
        }
        if !report.entries.isEmpty { out += "exception domains:\n" }
        for entry in report.entries {
            out += "  \(entry.domain): declares \(entry.declared.joined(separator: ", "))"
            if let harmful = entry.harmful { out += "; HARMFUL: \(harmful.joined(separator: ", "))" }
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
