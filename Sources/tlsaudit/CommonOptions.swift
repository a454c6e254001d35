public import ArgumentParser
public import TLSAuditCore
import TLSAuditProbe
import TLSAuditSupport

/// What a chain is judged with: the root store (`--trust-store`) and the CT log list (`--ct-log-list`).
struct TrustInputOptions: ParsableArguments {
    @Option(name: .customLong("trust-store"), help: ArgumentHelp(
        "Root store to judge against: \(HelpLists.trustStores).",
        discussion: HelpLists.trustStoreDefaults + " Certificate Transparency and the 398-day limit apply when the path anchors in Apple's or Debian's store, whichever store judged.",
        valueName: "store"))
    var trustStore: String?

    @Option(name: .customLong("ct-log-list"), help: ArgumentHelp(
        "CT log list (v3 JSON schema, e.g. Apple's current_log_list.json), a file or an http(s) URL, to verify SCTs against instead of the shipped snapshot; refused unless every log_id is the SHA-256 of its key.",
        valueName: "file-or-url"))
    var ctLogList: String?

    @Option(name: .customLong("apple-roots"), help: ArgumentHelp(
        "Apple's root store (a PEM bundle of CA certificates), a file or an http(s) URL, for --trust-store apple and the Apple policies instead of the shipped snapshot.",
        valueName: "file-or-url"))
    var appleRoots: String?

    @Option(name: .customLong("distrust-list"), help: ArgumentHelp(
        "Table of roots distrusted for certificates issued after a date (JSON, docs/apple-rules.md section 9), a file or an http(s) URL, instead of the shipped one.",
        valueName: "file-or-url"))
    var distrustList: String?

    @Option(name: .customLong("distrust-vendor"), help: ArgumentHelp(
        "Whose date-bounded distrust applies: apple, mozilla or chrome (default: Apple's under the Apple policies, Mozilla's under the Mozilla ones).",
        valueName: "vendor"))
    var distrustVendor: DistrustVendor?

    /// The date-bounded distrust setting (nil: the shipped table, by the policy). A bad file exits 2 naming it.
    func distrust() throws -> DistrustSetting? {
        guard distrustList != nil || distrustVendor != nil else { return nil }
        var setting = DistrustSetting(vendor: distrustVendor)
        if let distrustList {
            do { setting.table = try TrustInputSource.load(DistrustTable.self, from: distrustList, lastKnownGood: nil).input } catch {
                StandardStream.error.write("tlsaudit: --distrust-list: \(error)\n")
                throw ExitCode(2)
            }
        }
        return setting
    }

    /// The store: `caFile` (the operator's own anchors; `caFileFlag` names its option) else `--trust-store`,
    /// else the policy's. A file that cannot be read is a usage error (exit 64).
    func store(caFile: String?, caFileFlag: String = "--ca-file", policy: CompliancePolicy) throws -> TrustStore {
        if caFile != nil, trustStore != nil {
            throw ValidationError("\(caFileFlag) and --trust-store: give one (\(caFileFlag) FILE names your own anchors, --trust-store a root store).")
        }
        do {
            try installAppleRoots()
            if let caFile { return try TrustStore(caFile: caFile) }
            let name = trustStore ?? (policy.trustsAppleRoots ? "apple" : "system")
            return try TrustStore.publicStore(named: name) ?? TrustStore(caFile: name, label: "file:\(name)")
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// Sets `options`' CT log list and date-bounded distrust from these options (`scan`, `ats`, `app audit`).
    func apply(to options: inout ScanOptions) throws {
        options.ctLogs = try logs()
        options.distrust = try distrust()
    }

    /// Makes `--apple-roots` the Apple root store in force (a bad bundle is a usage error, exit 64).
    func installAppleRoots() throws {
        guard let appleRoots else { return }
        do { try TrustStore.installAppleRoots(TrustInputSource.load(AppleRootStore.self, from: appleRoots, lastKnownGood: nil).input) } catch {
            throw ValidationError("--apple-roots: \(error)")
        }
    }

    /// The CT log list: `--ct-log-list` (Google's lists verified against their signature), else the
    /// shipped snapshot. A bad file is a usage error (exit 64).
    func logs() throws -> CTLogList {
        guard let ctLogList else { return .shipped }
        do {
            return try TrustInputSource.load(CTLogList.self, from: ctLogList, signature: .google(for: ctLogList), lastKnownGood: nil).input
        } catch {
            throw ValidationError("--ct-log-list: \(error)")
        }
    }
}

/// One `HOST[:PORT]` target, connected to through `--connect-to ADDRESS[:PORT]` when given, with
/// the STARTTLS dialogue `starttls` gives (named, or inferred from a well-known port).
func parseSingleTarget(_ text: String, connectTo: String?, starttls: STARTTLSSetting = .auto) throws -> ScanTarget {
    do {
        var target = try ScanTarget.parse(text, defaultPort: starttls.defaultPort)
        if let connectTo { target.connectTo = [try ConnectAddress.parse(connectTo)] }
        target.starttls = starttls.use(port: target.port)
        return target
    } catch {
        throw ValidationError(error.description)
    }
}

/// An `http://HOST[:PORT]` URL as a plain HTTP target (`ats`, `app audit`): port 80 unless it
/// names one, no STARTTLS; nil for any other text.
func parsePlainHTTPTarget(_ text: String, connectTo: String?) throws -> ScanTarget? {
    guard text.lowercased().hasPrefix("http://") else { return nil }
    do {
        var target = try ScanTarget.parse(text, defaultPort: 80)
        if let connectTo { target.connectTo = [try ConnectAddress.parse(connectTo)] }
        return target
    } catch {
        throw ValidationError(error.description)
    }
}

/// `--starttls`'s help, the same for every command that takes it.
let starttlsHelp = "Upgrade a plaintext connection first: \(HelpLists.values(of: STARTTLSProtocol.self)) (as openssl s_client -starttls); auto (the default) infers it from a well-known port (\(HelpLists.starttlsPorts)) and says so; none: TLS from the first byte."

extension STARTTLSSetting: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
    public static var allValueStrings: [String] { names }
    /// The word for the value (ArgumentParser's default prints it by reflection, asking the runtime
    /// about four protocols at every start).
    public var defaultValueDescription: String {
        switch self {
        case .auto: "auto"
        case .none: "none"
        case .named(let named): named.rawValue
        }
    }

    /// The port of a target that names none: the named protocol's, else HTTPS's.
    var defaultPort: Int {
        if case .named(let named) = self { return named.defaultPort }
        return SettingBounds.port.defaultValue
    }
}

/// How `--format json` documents are laid out: indented (the default, every command alike) or on one line.
struct JSONStyleOptions: ParsableArguments {
    @Flag(help: "With --format json: the whole document on one line, no indentation (default: indented).")
    var compact = false

    var encoder: JSONDocumentEncoder { compact ? .tlsauditCompact : .tlsaudit }
}

/// The client identity presented to servers that ask for a certificate, as an app answers
/// URLSession's client-certificate challenge: `--client-cert` and `--client-key` (PEM), or
/// `--client-p12` (PKCS#12, with `--client-p12-password-file`).
struct ClientIdentityOptions: ParsableArguments {
    @Option(name: .customLong("client-cert"), help: ArgumentHelp("PEM client certificate (and chain) for servers that ask for one (mutual TLS).", valueName: "file"))
    var clientCert: String?

    @Option(name: .customLong("client-key"), help: ArgumentHelp("PEM private key of --client-cert.", valueName: "file"))
    var clientKey: String?

    @Option(name: .customLong("client-p12"), help: ArgumentHelp("The client identity as a PKCS#12 file (.p12/.pfx: key, certificate and chain), as an app bundles it; instead of --client-cert/--client-key.", valueName: "file"))
    var clientP12: String?

    @Option(name: .customLong("client-p12-password-file"), help: ArgumentHelp("File whose first line is the --client-p12 password (default: no password).", valueName: "file"))
    var clientP12PasswordFile: String?

    func validate() throws {
        guard (clientCert == nil) == (clientKey == nil) else { throw ValidationError("--client-cert and --client-key go together.") }
        if clientP12 != nil, clientCert != nil { throw ValidationError("--client-p12 or --client-cert/--client-key: give one identity.") }
        if clientP12PasswordFile != nil, clientP12 == nil { throw ValidationError("--client-p12-password-file goes with --client-p12.") }
    }

    /// The identity given, nil when none; a password file that cannot be read exits 2 naming it.
    func credentials() throws -> ClientCredentials? {
        if let clientCert, let clientKey { return ClientCredentials(certificatePath: clientCert, keyPath: clientKey) }
        guard let clientP12 else { return nil }
        var password = ""
        if let clientP12PasswordFile {
            do {
                let bytes = try InputLimits.read(clientP12PasswordFile, limit: 4096, what: "password file")
                password = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            } catch {
                StandardStream.error.write("tlsaudit: \(error.description)\n")
                throw ExitCode(2)
            }
        }
        return ClientCredentials(pkcs12Path: clientP12, password: password)
    }
}

/// The scanner for a command that reaches servers: an input it cannot read (a client identity)
/// exits 2 naming the file.
func makeScanner(_ options: ScanOptions) throws -> TLSScanner {
    do {
        return try TLSScanner(options: options, judge: AddressAssessment.judge)
    } catch {
        StandardStream.error.write("tlsaudit: \(error)\n")
        throw ExitCode(2)
    }
}

/// `ats` and `app audit`: whether a chain the server sends without its intermediate is completed
/// from the caIssuers URL in the AIA, as an iPhone's trust evaluation (trustd) does.
struct DeviceChainOptions: ParsableArguments {
    @Flag(name: .customLong("no-aia-fetch"), help: "Do not fetch a missing intermediate from the caIssuers URL in the AIA. By default it is fetched (within --timeout), as an iPhone's trust evaluation does; ats then tells the server to send it, since Android, Firefox and Java clients do not fetch.")
    var noAIAFetch = false
}

/// `--connect-to`, `--ca-file` and `--timeout` for commands that reach one server.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("connect-to"), help: "Connect to this ADDRESS[:PORT] instead of resolving the host.")
    var connectTo: String?

    @Option(name: .customLong("ca-file"), help: "Your own trust anchors (PEM): any certificate in it is an anchor, a root, an intermediate or a leaf.")
    var caFile: String?

    @OptionGroup var trust: TrustInputOptions

    @Option(help: "Seconds for each of resolution, connect and handshake.")
    var timeout: Double = SettingBounds.timeout.defaultValue

    @Option(help: ArgumentHelp(starttlsHelp, valueName: "protocol"))
    var starttls: STARTTLSSetting = .auto

    func validate() throws {
        if let problem = SettingBounds.timeout.problem(timeout, name: "--timeout") { throw ValidationError(problem + ".") }
    }
}
