public import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditOutput
import TLSAuditReport
import TLSAuditProbe
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditService
import Logging
import TLSAuditSupport

/// `tlsaudit scan`: probe targets and judge them against ATS.
struct ScanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Handshake with every address of each target and judge what it shows against ATS.",
        discussion: """
            Exit status: 0 every address is ATS compliant, 1 some address is not, 2 some address \
            or name could not be scanned (2 wins over 1), 64 usage error. Interrupted with --database \
            (Ctrl-C, SIGTERM, or SIGHUP when the terminal closes), no further address is begun, the probes in flight finish, \
            every target done is stored, and the command ends by that signal (130, 143, 129); a second Ctrl-C or SIGTERM ends it at once (further SIGHUPs are ignored). \
            With --baseline FILE (an earlier --format sarif or json output): 0 nothing new, 1 a finding not in the baseline, 2 an address or name could not be scanned or the baseline could not be read; the known findings are listed as such. --format junit and sarif: docs/ci.md.
            """
    ).parsedDirectly(under: "tlsaudit")

    @Argument(help: "Targets: HOST, HOST:PORT, [IPV6]:PORT or https://HOST[:PORT].")
    var targets: [String] = []

    @Option(name: .customLong("targets-file"), help: "File with one HOST[:PORT] per line; '#' starts a comment.")
    var targetsFile: String?

    @Option(help: "Server name to send (SNI) and to check the certificate against, instead of the target's host.")
    var sni: String?

    @Option(name: .customLong("connect-to"), help: ArgumentHelp(
        "Connect to this ADDRESS[:PORT] instead of resolving the host; SNI and name checks still use the host.",
        discussion: "Repeat it to probe several addresses, as if the name resolved to all of them."))
    var connectTo: [String] = []

    @Option(name: .customLong("ca-file"), help: "Your own trust anchors (PEM) instead of a root store: any certificate in it is an anchor, a root, an intermediate or a leaf.")
    var caFile: String?

    @OptionGroup var trust: TrustInputOptions

    @Option(help: "Seconds allowed for each of name resolution, TCP connect and TLS handshake.")
    var timeout: Double = SettingBounds.timeout.defaultValue

    @Option(help: ArgumentHelp(GateOptions.formatHelp))
    var format: GateOutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    @OptionGroup var gate: GateOptions

    @Option(help: ArgumentHelp("Policy to judge against: \(HelpLists.policies)."))
    var policy: CompliancePolicy?

    @Option(help: ArgumentHelp(starttlsHelp, valueName: "protocol"))
    var starttls: STARTTLSSetting = .auto

    @Option(help: "Addresses probed at once, at most (threads are added while all wait on the network).")
    var concurrency: Int = SettingBounds.concurrency.defaultValue

    @Option(help: "Which resolved addresses to probe: all, ipv4 or ipv6.")
    var addresses: AddressSelection = .all

    @OptionGroup var identity: ClientIdentityOptions

    @Option(help: ArgumentHelp("Pin to check (repeatable): sha256/BASE64= SPKI pins (public-key mode), SHA-256 certificate fingerprints (certificate mode), or a certificate file (.cer/.der DER or .pem, as an app bundles it: the SPKI pin of each certificate in it, as pin --cert prints).",
                               discussion: "A mismatch is a pin.mismatch finding and exit status 1.", valueName: "pin-or-file"))
    var pin: [String] = []

    @Option(help: "Judge certificate dates at this ISO 8601 time instead of now (e.g. 2027-01-01T00:00:00Z).")
    var at: String?

    @Option(help: "Revocation checking: off, soft (the default: an answer that cannot be had is a warning) or hard (it is an error). OCSP (stapled, then the responder in the leaf's AIA), then CRLs.")
    var revocation: RevocationMode = SettingBounds.revocation

    @Flag(name: .customLong("aia-fetch"), help: "Fetch an intermediate the server does not send from the caIssuers URL in the AIA, as Apple's clients do (a chain.aia-fetched warning says so).")
    var aiaFetch = false

    @Option(help: "Also store the results in this SQLite database (the service's format: status and history read it).")
    var database: String?

    @Flag(help: "Also enumerate every protocol version (SSLv2 to TLS 1.3) and suite each address accepts, with the server's order, and take the configuration inventory (--checks inventory).")
    var enumerate = false

    @Option(help: ArgumentHelp("Opt-in checks, comma-separated: \(HelpLists.checks).",
                               valueName: "checks"))
    var checks: [String] = []

    @Option(name: .customLong("headers-path"), help: "The path --checks headers asks for (default /).")
    var headersPath: String?

    @Flag(name: .customLong("no-color"), help: "Never colour the text output (also: NO_COLOR set).")
    var noColor = false

    func validate() throws {
        guard !targets.isEmpty || targetsFile != nil else {
            throw ValidationError("Give at least one target, or --targets-file.")
        }
        if let problem = SettingBounds.timeout.problem(timeout, name: "--timeout") { throw ValidationError(problem + ".") }
        if let problem = SettingBounds.concurrency.problem(concurrency, name: "--concurrency") { throw ValidationError(problem + ".") }
        if let problem = pinPolicy.problem { throw ValidationError(problem) }
        for name in requestedChecks.unknown {
            throw ValidationError("--checks: '\(name)' is not a check (\(AddressChecks.names))")
        }
        if let headersPath, !headersPath.hasPrefix("/") || headersPath.contains(where: { $0.isWhitespace || $0.isNewline }) {
            throw ValidationError("--headers-path '\(headersPath)': a path starting with / and without spaces")
        }
        if let at, Timestamp.parse(at) == nil {
            throw ValidationError("--at: '\(at)' is not an ISO 8601 time like 2027-01-01T00:00:00Z.")
        }
    }

    func run() throws {
        ProcessMemory.tuneForScan()
        let (parsedTargets, targetLines) = try loadTargets()
        let trustStore = try trust.store(caFile: caFile, policy: policy ?? .default)
        let credentials = try identity.credentials()
        var options = ScanOptions(timeout: timeout, concurrency: concurrency, trustStore: trustStore,
                                  clientCredentials: credentials, addresses: addresses,
                                  evaluationTime: at.flatMap(Timestamp.parse), revocation: revocation)
        options.aiaFetch = aiaFetch
        try trust.apply(to: &options)
        let scanner: TLSScanner
        do {
            scanner = try TLSScanner(options: options, judge: AddressAssessment.judge)
        } catch {
            throw ValidationError("\(error)")
        }
        let progress = ProgressLine(enabled: parsedTargets.count > 1 && Terminal.isTTY(STDERR_FILENO))
        let started = Date()
        // Results are stored as targets finish, while the others are still being scanned
        // (after the enumeration when there is one, since it adds to them).
        let writer = database.map { path in
            ResultWriter(openStore: { try SQLiteScanStore(path: path, sha256: Digest.sha256Hex) },
                         alerting: AlertSettings(rules: AlertRules(), sinks: []),
                         logger: Logger(label: "tlsaudit.scan", factory: { _ in SwiftLogNoOpLogHandler() }),
                         failureHandling: .stop)
        }
        // A name given twice is stored once at the end (the store makes each batch a target's
        // current address set: two batches of one name would keep only the later one's addresses).
        let namesUnique = Set(parsedTargets.map(\.original)).count == parsedTargets.count
        let storeWhileScanning = !enumerate && namesUnique
        var storeEach: (@Sendable (Int, TargetScanResult) -> Void)?
        if let writer, storeWhileScanning {
            storeEach = { index, result in writer.submit(StoredScan.all(of: result, target: parsedTargets[index])) }
        }
        // With a database, an interruption stores what is done instead of losing it (ScanInterruption).
        let interruption = database == nil ? nil : ScanInterruption(timeout: timeout, clearLine: progress.enabled)
        var interrupted: (@Sendable () -> Bool)?
        if let interruption { interrupted = { interruption.requested } }
        // A target is nil when the interruption came before all of its addresses were probed.
        var scanned = scanner.scan(parsedTargets, progress: { done, total in progress.update(done: done, total: total) },
                                   completed: storeEach, until: interrupted)
        progress.finish()
        // Addresses stored without their enumeration: the interruption came before it.
        var unenumerated = 0
        if enumerate {
            let enumerator = Enumerator(scanner: scanner)
            for targetIndex in scanned.indices {
                guard var target = scanned[targetIndex] else { continue }
                for addressIndex in target.addresses.indices {
                    let result = target.addresses[addressIndex]
                    // A Mozilla policy has enumerated already.
                    guard result.enumeration == nil, let address = Resolver.numericAddress(result.address, port: result.port) else { continue }
                    guard interrupted?() != true else {
                        unenumerated += 1
                        continue
                    }
                    target.addresses[addressIndex].enumeration = enumerator.enumerate(address, target: parsedTargets[targetIndex]).judged()
                }
                scanned[targetIndex] = target
            }
        }
        // Stored at the end: each name whose every occurrence was scanned (one batch is a name's
        // whole current address set).
        let unfinishedNames = Set(zip(parsedTargets, scanned).filter { $0.1 == nil }.map(\.0.original))
        if !storeWhileScanning {
            writer?.submit(zip(parsedTargets, scanned).flatMap { target, result in
                guard let result, !unfinishedNames.contains(target.original) else { return [StoredScan]() }
                return StoredScan.all(of: result, target: target)
            })
        }
        // The handler keeps counting while the last results are committed: a signal now loses nothing.
        let storeFailure = database.flatMap { writer?.finish(spill: SpillLocations(base: $0)).stoppedBy }
        // A database that failed does not take the results with it: the failure is told first (a
        // closed output must not swallow it), the report printed, then the command exits 2.
        if let storeFailure { StandardStream.error.write("tlsaudit: cannot store the results: \(storeFailure)\n") }
        // A target left unscanned or unenumerated means the interruption came (nothing else stops them).
        if let interruption, let database, !unfinishedNames.isEmpty || unenumerated > 0 {
            if storeFailure != nil { throw ExitCode(2) }
            let stored = zip(parsedTargets, scanned).count { target, result in
                result.map { !$0.addresses.isEmpty && !unfinishedNames.contains(target.original) } ?? false
            }
            Self.tellInterrupted(stored: stored, of: scanned.count, unenumerated: unenumerated, database: database)
            interruption.endBySignal()
        }
        // An interruption after the last address began changes nothing: the report is whole.
        interruption?.end()
        let report = ScanReport(toolVersion: TLSAuditCommand.version, generatedAt: options.evaluationTime ?? started,
                                trustStore: trustStore.label, timeoutSeconds: timeout, targets: scanned.map { $0! })
        let colour = !noColor && ProcessInfo.processInfo.environment["NO_COLOR"] == nil && Terminal.isTTY(STDOUT_FILENO)
        let printed = Result {
            try gate.finish(GateReports.scan(report, targetsFile: targetsFile, lines: targetLines), commandExit: report.exitCode, format: format,
                            json: { try jsonStyle.encoder.encodeLineSegments(report) }, text: { ScanTextRenderer(colour: colour).render(report) },
                            fromJSON: { data in
                                try GateOptions.decode(ScanReport.self, data, schema: ScanReport.schemaVersion)
                                    .map { GateReports.scan($0, targetsFile: nil, lines: [:]) }
                            })
        }
        if storeFailure != nil { throw ExitCode(2) }
        try printed.get()
    }

    /// What an interrupted `scan --database` stored, on stderr. No report is printed: it would look
    /// whole to a script.
    private static func tellInterrupted(stored: Int, of total: Int, unenumerated: Int, database: String) {
        var text = "tlsaudit: interrupted: the results of \(stored) of \(total) targets are stored in \(database) "
            + "(tlsaudit status --database \(database) lists them)"
        if stored < total { text += "; the other \(total - stored) were not scanned, not finished or had no address" }
        if unenumerated > 0 { text += "; \(unenumerated) address(es) were stored without their enumeration" }
        StandardStream.error.write(text + ". No report is printed.\n")
    }

    /// `--checks` split on commas: the checks named, and the words that name none.
    private var requestedChecks: (known: Set<OptionalCheck>, unknown: [String]) {
        let words = checks.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }.filter { !$0.isEmpty }
        return (Set(words.compactMap { AddressChecks.named($0)?.name }), words.filter { AddressChecks.named($0) == nil })
    }

    /// `--pin` values as an AFNetworking policy (mode from the values), or the reason they do not make one.
    /// A value that is no pin is read as a certificate file: the SPKI pin of each certificate in it.
    private var pinPolicy: (policy: PinPolicy?, problem: String?) {
        guard !pin.isEmpty else { return (nil, nil) }
        var values: [PinValue] = []
        for text in pin {
            if let value = PinValue.parse(text) {
                values.append(value)
                continue
            }
            guard FileManager.default.fileExists(atPath: text) else {
                return (nil, "--pin '\(text)' is neither sha256/BASE64 (44 characters), a SHA-256 hex fingerprint nor a certificate file")
            }
            do {
                values += try CertificateFile.summaries(path: text).map { .spki($0.spkiSHA256) }
            } catch {
                return (nil, "--pin \(text): \(error)")
            }
        }
        let allSPKI = values.allSatisfy { if case .spki = $0 { true } else { false } }
        let policy = PinPolicy(mode: allSPKI ? .publicKey : .certificate, pins: values)
        return (policy, policy.problems.first.map { "--pin: \($0)" })
    }

    /// The targets to scan, and each `--targets-file` target's line by its name (for SARIF locations).
    private func loadTargets() throws -> (targets: [ScanTarget], fileLines: [String: Int]) {
        var parsed: [ScanTarget] = []
        var fileLines: [String: Int] = [:]
        do {
            for text in targets { parsed.append(try ScanTarget.parse(text, defaultPort: starttls.defaultPort)) }
            if let targetsFile {
                let bytes: [UInt8]
                do { bytes = try InputLimits.read(targetsFile, limit: InputLimits.configurationBytes, what: "--targets-file") } catch {
                    throw ValidationError(error.description)
                }
                guard let contents = String(validating: bytes, as: UTF8.self) else {
                    throw ValidationError("--targets-file \(targetsFile) is not UTF-8 text")
                }
                for (line, target) in try ScanTarget.parseNumberedList(contents, defaultPort: starttls.defaultPort) {
                    var target = target
                    target.original = target.displayName
                    parsed.append(target)
                    if fileLines[target.displayName] == nil { fileLines[target.displayName] = line }
                }
            }
        } catch let error as ScanTarget.ParseError {
            throw ValidationError(error.description)
        }
        guard !parsed.isEmpty else { throw ValidationError("no targets (the targets file is empty)") }
        guard parsed.count <= InputLimits.targets else {
            throw ValidationError("\(parsed.count) targets; tlsaudit scans at most \(InputLimits.targets) in one run")
        }
        let destinations: [ConnectAddress]
        do {
            destinations = try connectTo.map { text throws(ScanTarget.ParseError) in try ConnectAddress.parse(text) }
        } catch {
            throw ValidationError("--connect-to: \(error.description)")
        }
        let pins = pinPolicy.policy
        let checks = requestedChecks.known.union(enumerate ? [.inventory] : [])
        return (parsed.map { target in
            var target = target
            if let sni { target.sni = sni }
            target.starttls = starttls.use(port: target.port)
            target.policy = policy ?? CompliancePolicy.default(starttls: target.starttls)
            target.pins = pins
            // --enumerate shows everything: the inventory too.
            target.checks = checks
            target.headersPath = headersPath
            target.connectTo = destinations
            return target
        }, fileLines)
    }
}

enum OutputFormat: String, NamedArgumentValue {
    case text
    case json
}

/// An option value named by its raw value, one of all its cases. Its value lists are built here with
/// closures: ArgumentParser's defaults build them with a key path and a generic `reduce`, whose first
/// use makes the runtime look up the type's conformances, at every command's start.
protocol NamedArgumentValue: ExpressibleByArgument, CaseIterable, RawRepresentable where RawValue == String {}

extension NamedArgumentValue {
    static var allValueStrings: [String] { allCases.map { $0.rawValue } }
    /// No value has a description apart from its name (ArgumentParser lists only those that do).
    static var allValueDescriptions: [String: String] { [:] }
}

extension AddressSelection: NamedArgumentValue {}
extension CompliancePolicy: NamedArgumentValue {}
extension LogFormat: NamedArgumentValue {}
extension RevocationMode: NamedArgumentValue {}
extension ReportFormat: NamedArgumentValue {}
extension AppTrustEvaluation: NamedArgumentValue {}
extension DistrustVendor: NamedArgumentValue {}

extension StoredScan {
    /// One stored scan per probed address of a target.
    static func all(of result: TargetScanResult, target: ScanTarget) -> [StoredScan] {
        result.addresses.map { StoredScan(target: target.original, host: target.host, port: target.port, sni: target.sni, result: $0) }
    }
}
