import ArgumentParser
import Foundation
import TLSAuditApp
import TLSAuditCore
import TLSAuditProbe
import TLSAuditSupport

/// `tlsaudit app import PATH`: the app's hosts as service targets judged by the app's own rules.
struct AppImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Write service configuration that watches an app's servers by the app's own ATS rules and pins.",
        discussion: """
            PATH: an Info.plist (XML or binary), an .app directory or an .ipa. The hosts are the ones \
            `app audit` judges: every domain the plist names exactly (port 443), and --host / --hosts-file. \
            One group is written, tagged app:BUNDLE_ID; each target carries `app:` (the app's effective ATS \
            rules for its host, so a server the app's exception covers is compliant for that app and the \
            status says which exception it relies on) and, where NSPinnedDomains covers the host, `pins:`. \
            --connect-to becomes each target's `addresses:`, --ca-file / --trust-store its `trust:`; the group \
            has `aia_fetch: true` (a missing intermediate is fetched from the AIA, as on the device and in `app audit`). \
            Serve the file as it is (`tlsaudit serve --config FILE`) or paste the group into tlsaudit.yaml; \
            `tlsaudit status --tag app:BUNDLE_ID` then shows the app's servers.
            Exit status: 0 written, 64 usage error or unreadable app.
            """
    ).parsedDirectly(under: "tlsaudit app")

    @Argument(help: "Info.plist, .app directory or .ipa.")
    var path: String

    @OptionGroup var hostOptions: AppHostOptions

    @Option(name: .customLong("connect-to"), help: "Connect to this ADDRESS instead of resolving each host (written as the targets' addresses:).")
    var connectTo: String?

    @Option(name: .customLong("ca-file"), help: "Your own trust anchors (PEM), written as the group's trust: {ca_file: ...}.")
    var caFile: String?

    @Option(name: .customLong("trust-store"), help: ArgumentHelp("\(HelpLists.trustStores), written as the group's trust: (default: Apple's root store)."))
    var trustStore: String?

    @Option(help: "Seconds for each of resolution, connect and handshake (written as the group's timeout:).")
    var timeout: Double?

    @Option(help: ArgumentHelp("The app's AFSecurityPolicy, as app audit takes it: MODE[,allow-invalid-certificates][,no-domain-validation]; written into each target's app: (with --output, certificate mode saves the bundle's certificates in FILE.certificates/).",
                               valueName: "mode"))
    var afnetworking: String?

    @OptionGroup var identity: ClientIdentityOptions

    @Option(name: .customLong("trust-evaluation"), help: ArgumentHelp(
        "How the app answers the server-trust challenge, written as each target's app: trust_evaluation: system (the default), afnetworking (with --afnetworking) or accept-all.",
        valueName: "how"))
    var trustEvaluation: AppTrustEvaluation?

    @Option(help: "Write the configuration to this file instead of standard output.")
    var output: String?

    func validate() throws {
        if caFile != nil, trustStore != nil { throw ValidationError("--ca-file and --trust-store: give one.") }
        if trustEvaluation == .afnetworking, afnetworking == nil {
            throw ValidationError("--trust-evaluation afnetworking needs --afnetworking MODE (the app's AFSecurityPolicy).")
        }
        if let trustEvaluation, trustEvaluation != .afnetworking, afnetworking != nil {
            throw ValidationError("--afnetworking MODE is the app's trust evaluation: leave out --trust-evaluation \(trustEvaluation.rawValue).")
        }
        if let timeout, let problem = SettingBounds.timeout.problem(timeout, name: "--timeout") { throw ValidationError(problem + ".") }
    }

    func run() throws {
        let bundle: AppBundle
        do { bundle = try AppBundleReader.read(path: path) } catch { throw ValidationError(error.description) }
        let policy = AppTransportSecurityPolicy(bundle.appTransportSecurity)
        guard let identifier = bundle.bundleIdentifier else {
            throw ValidationError("\(path): the Info.plist has no CFBundleIdentifier, which names the app in the targets' tag (app:BUNDLE_ID).")
        }
        var hosts: [AppImport.Host] = []
        for text in try hostOptions.hosts(for: policy, path: path) {
            let target = try parseSingleTarget(text, connectTo: connectTo, starttls: .none)
            hosts.append(AppImport.Host(host: target.sni ?? target.host, port: target.port, addresses: target.connectTo.map(\.host)))
        }
        let absolute = { (file: String) in URL(fileURLWithPath: file).standardizedFileURL.path }
        let trust: String? = if let caFile { "{ca_file: \(AppImport.quotedYAML(absolute(caFile)))}" }
            else if let trustStore { ChainReport.publicStoreNames.contains(trustStore) ? trustStore : "{store: \(AppImport.quotedYAML(absolute(trustStore)))}" }
            else { nil }
        let evaluated = try afnetworking.map { try AppAuditCommand.securityPolicy($0, bundle: bundle) }
        // A policy AFNetworking refuses (or that pins nothing) would make every target fail: not written.
        if let refusal = evaluated?.findings.first(where: { $0.severity == .error }) {
            throw ValidationError("\(path): --afnetworking: \(refusal.id): \(refusal.message)")
        }
        let security = evaluated?.policy
        var certificateFiles: [String] = []
        if let output, let security, security.mode == .certificate {
            // The pinned certificates anchor the chain even when the server does not send them, as in the app.
            let directory = URL(fileURLWithPath: output + ".certificates").standardizedFileURL
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                for (index, certificate) in bundle.certificates.filter(\.isReadByAFNetworking).enumerated() {
                    let name = "\(index)-" + URL(fileURLWithPath: certificate.fileName).lastPathComponent
                    let file = directory.appendingPathComponent(name.hasSuffix(".cer") || name.hasSuffix(".der") ? name : name + ".der")
                    try Data(certificate.der).write(to: file, options: .atomic)
                    certificateFiles.append(file.path)
                }
            } catch {
                throw ValidationError("--output \(output): cannot write the pinned certificates in \(directory.path): \(error.localizedDescription)")
            }
        }
        let yaml = AppImport.configuration(policy, bundle: identifier, source: path, hosts: hosts, trust: trust, timeout: timeout,
                                           afnetworking: security, certificateFiles: certificateFiles,
                                           trustEvaluation: trustEvaluation ?? .system, clientIdentity: clientIdentityYAML(absolute))
        if let output {
            do { try Data(yaml.utf8).write(to: URL(fileURLWithPath: output), options: .atomic) } catch {
                throw ValidationError("--output \(output): cannot write the file: \(error.localizedDescription)")
            }
            StandardStream.error.write("wrote \(hosts.count) target\(hosts.count == 1 ? "" : "s") of \(identifier) to \(output)\n")
        } else {
            StandardStream.output.write(yaml)
        }
    }
}

extension AppImportCommand {
    /// `client_identity:` as a YAML flow mapping of absolute paths (the password stays in its file).
    func clientIdentityYAML(_ absolute: (String) -> String) -> String? {
        if let certificate = identity.clientCert, let key = identity.clientKey {
            return "{certificate: \(AppImport.quotedYAML(absolute(certificate))), key: \(AppImport.quotedYAML(absolute(key)))}"
        }
        guard let pkcs12 = identity.clientP12 else { return nil }
        return "{pkcs12: \(AppImport.quotedYAML(absolute(pkcs12)))"
            + (identity.clientP12PasswordFile.map { ", password_file: \(AppImport.quotedYAML(absolute($0)))" } ?? "") + "}"
    }
}

/// `--host` and `--hosts-file`: the hosts an app calls beyond those its plist names, for `app audit` and `app import`.
struct AppHostOptions: ParsableArguments {
    @Option(name: .customLong("host"), help: "A host the app calls, HOST[:PORT] (repeatable).")
    var hosts: [String] = []

    @Option(name: .customLong("hosts-file"), help: "File with one HOST[:PORT] per line; '#' starts a comment.")
    var hostsFile: String?

    /// `app audit`'s hosts: those given, each requested; the plist's own domains are probed only
    /// when no host is given (then they are the hosts) or with `probePlistDomains` (then they never
    /// change the exit status); otherwise they are listed as not probed.
    func auditHosts(for policy: AppTransportSecurityPolicy, path: String,
                    probePlistDomains: Bool) throws -> (hosts: [(text: String, requested: Bool)], notProbed: [String]) {
        let given = try givenHosts()
        let all = try self.hosts(for: policy, path: path)
        let extra = Array(all.dropFirst(given.count))
        if given.isEmpty { return (all.map { ($0, true) }, []) }
        if probePlistDomains { return (given.map { ($0, true) } + extra.map { ($0, false) }, []) }
        return (given.map { ($0, true) }, extra)
    }

    /// `--host` and `--hosts-file`, in that order.
    func givenHosts() throws -> [String] {
        var list = hosts
        if let hostsFile {
            let bytes: [UInt8]
            do { bytes = try InputLimits.read(hostsFile, limit: InputLimits.configurationBytes, what: "hosts file") } catch {
                throw ValidationError(error.description)
            }
            list += String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline)
                .map { $0.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0].trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
        return list
    }

    /// `--host` and `--hosts-file` first (their ports), then every name the plist gives exactly
    /// (exception and pinned domains; not ranges) on port 443 unless already listed.
    func hosts(for policy: AppTransportSecurityPolicy, path: String) throws -> [String] {
        var list = try givenHosts()
        let named: Set<String>
        do { named = Set(try list.map { try ScanTarget.parse($0, defaultPort: 443).host.lowercased() }) } catch {
            throw ValidationError("\(error)")
        }
        let domains = policy.exceptionDomains.map(\.domain) + policy.pinnedDomains.map(\.domain)
        for domain in domains where !domain.contains("/" as Character) && !named.contains(domain.lowercased()) && !list.contains(domain) {
            list.append(HostText.bracketed(domain))
        }
        guard !list.isEmpty else {
            throw ValidationError("\(path): the app names no exception or pinned domain: give the hosts it calls with --host or --hosts-file.")
        }
        return list
    }
}
