public import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe
import TLSAuditService
import TLSAuditSupport

/// `tlsaudit trust`: the trust inputs in force (the CT log list, the distrust table, Apple's root
/// store snapshot) and updating them by hand (air-gapped hosts).
struct TrustCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Show the trust inputs in force, or update one by hand.",
        subcommands: [TrustStatusCommand.self, TrustUpdateCommand.self]
    )
}

/// `tlsaudit trust status`: each input's source, version, publication time and age.
struct TrustStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Each trust input's source, version, publication time and age.",
        discussion: """
            With --config, the service's inputs (ct:, distrust:, apple_roots:; for a URL source, the last \
            known good copy serve keeps); else --ct-log-list, --distrust-list and --apple-roots, else the \
            shipped snapshots. An input older than its max_age is marked stale. A running service shows \
            the same at /api/v1/trust-inputs, with its refresh outcomes.
            """
    ).parsedDirectly(under: "tlsaudit trust")

    @Option(help: "The service's configuration file.")
    var config: String?

    @OptionGroup var trust: TrustInputOptions

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    func run() throws {
        let now = Date()
        let settings = try config.map(loadConfiguration)?.trustInputs
        var inputs: [TrustInputDocument] = []
        for kind in TrustInputKind.allCases {
            let setting = settings?[kind] ?? TrustInputSetting(kind: kind)
            let option: String? = switch kind {
            case .ctLogList: trust.ctLogList
            case .distrust: trust.distrustList
            case .appleRoots: trust.appleRoots
            }
            let (version, note): (TrustInputVersion, String?) = switch kind {
            case .ctLogList: try Self.inForce(CTLogList.self, setting, option: option, shipped: CTLogList.shipped.version)
            case .distrust: try Self.inForce(DistrustTable.self, setting, option: option, shipped: DistrustTable.shipped.version)
            case .appleRoots: try Self.inForce(AppleRootStore.self, setting, option: option, shipped: AppleRootStore.shippedVersion)
            }
            let status = TrustInputStatus(inForce: version, configuredSource: setting.source ?? option, maxAge: setting.maxAge, lastRefreshAt: nil,
                                          lastError: nil, consecutiveFailures: 0, failuresBeforeAlert: TrustInputKeeper.failuresBeforeAlert)
            inputs.append(TrustInputDocument(status: status, now: now, note: note))
        }
        switch format {
        case .json:
            StandardStream.output.write(try jsonStyle.encoder.encodeLine(["inputs": inputs]))
        case .text:
            for input in inputs {
                var line = "\(input.input.rawValue): \(input.source), \(input.entries) \(input.input.entryName)"
                if let version = input.version { line += ", version \(version)" }
                if let published = input.publishedAt { line += ", published \(Timestamp.format(published))" }
                if let age = input.ageDays { line += ", \(age) day\(age == 1 ? "" : "s") old" }
                if input.condition == "stale" { line += ", STALE (max_age \(input.maxAgeDays) days)" }
                if let note = input.note { line += " (\(note))" }
                StandardStream.output.write(line + "\n")
            }
        }
    }

    /// The input a service with `setting` (or a command with `option`) judges with, and a note on where it comes from.
    static func inForce<Input: VerifiableTrustInput>(_ type: Input.Type, _ setting: TrustInputSetting, option: String?,
                                                     shipped: TrustInputVersion) throws -> (TrustInputVersion, String?) {
        let (input, note) = try input(Input.self, setting, option: option)
        return (input?.version ?? shipped, note)
    }

    /// The input itself a service with `setting` (or a command with `option`) judges with (nil: the
    /// shipped snapshot), and a note on where it comes from.
    static func input<Input: VerifiableTrustInput>(_ type: Input.Type, _ setting: TrustInputSetting,
                                                   option: String?) throws -> (Input?, String?) {
        if let source = setting.source {
            if setting.isURL {
                guard let kept = setting.lastKnownGood, let input = TrustInputSource.keptCopy(Input.self)(kept) else {
                    return (nil, "\(source) not fetched yet: serve fetches it when it starts; the shipped snapshot until then")
                }
                return (input, "last known good copy \(kept) of \(source), refreshed every \(Int(setting.refresh / 3_600)) h by serve")
            }
            return (try TrustInputSource.load(Input.self, from: source, lastKnownGood: nil).input, nil)
        }
        if let option {
            do {
                return (try TrustInputSource.load(Input.self, from: option, signature: Input.kind == .ctLogList ? .google(for: option) : nil,
                                                  lastKnownGood: nil).input, nil)
            } catch {
                throw ValidationError("\(option): \(error)")
            }
        }
        return (nil, "shipped with tlsaudit")
    }
}

/// `tlsaudit trust update SOURCE`: fetch or read a trust input, verify it, and replace the kept copy.
struct TrustUpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Verify a trust input (file or URL) and make it the last known good copy the service uses.",
        discussion: """
            The input is refused (exit 1, the kept copy unchanged) when it does not verify: a CT log list \
            not in the v3 schema, with a log_id that is not the SHA-256 of its key, or whose signature \
            (--signature and --public-key; Google's lists always) does not verify; a distrust table that \
            does not parse; an Apple root bundle with a certificate that does not parse or is not a CA, or \
            with fewer than half the roots kept; any input published before the kept copy. The copy is \
            replaced atomically. Where it is kept: --output, else the configuration's last_known_good \
            (default beside the database: ct-log-list.json, distrust.json, apple-roots.pem). serve reads \
            the kept copy when its source cannot be had. Exit status: 0 updated, 1 refused, 2 the source \
            cannot be read, 64 usage.
            """
    ).parsedDirectly(under: "tlsaudit trust")

    @Argument(help: "The input: a file or an http(s) URL.")
    var source: String

    @Option(help: "Which input: ct-log-list, distrust or apple-roots.")
    var input: TrustInputKind = .ctLogList

    @Option(help: "The service's configuration file (where its last known good copy is kept).")
    var config: String?

    @Option(help: "Where to keep the input (instead of the configuration's).")
    var output: String?

    @Option(help: "The CT log list's detached signature, a file or URL (with --public-key).")
    var signature: String?

    @Option(name: .customLong("public-key"), help: "The PEM public key the signature must verify with.")
    var publicKey: String?

    func run() throws {
        var destination = output
        if destination == nil, let config {
            let configuration = try loadConfiguration(config)
            let setting = configuration.trustInputs[input]
            destination = setting.lastKnownGood ?? TrustInputSetting.keptPath(setting.kind, database: configuration.database)
        }
        guard let destination else { throw ValidationError("give --output FILE or --config FILE: where the input is kept") }
        var required = input == .ctLogList ? TrustInputSignature.google(for: source) : nil
        switch (signature, publicKey) {
        case (nil, nil): break
        case (let signature?, let publicKey?):
            let pem = try String(contentsOfFile: publicKey, encoding: .utf8)
            required = TrustInputSignature(source: signature, publicKeyPEM: pem, keyName: "the key in \(publicKey)")
        default: throw ValidationError("--signature and --public-key go together")
        }
        let bytes: [UInt8]
        do { bytes = try TrustInputSource.read(source) } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(2)
        }
        do {
            let version = switch input {
            case .ctLogList: try Self.verify(CTLogList.self, bytes, source: source, signature: required, keptAt: destination)
            case .distrust: try Self.verify(DistrustTable.self, bytes, source: source, signature: required, keptAt: destination)
            case .appleRoots: try Self.verify(AppleRootStore.self, bytes, source: source, signature: required, keptAt: destination)
            }
            try TrustInputSource.writeAtomically(bytes, to: destination)
            StandardStream.output.write("updated \(destination): \(version.source), \(version.entries) \(input.entryName)\n")
        } catch {
            StandardStream.error.write("tlsaudit: refused: \(error); \(destination) is unchanged\n")
            throw ExitCode(1)
        }
    }

    /// Verifies `bytes` as an input of `type`, and that it may replace the copy kept at `path`.
    static func verify<Input: VerifiableTrustInput>(_ type: Input.Type, _ bytes: [UInt8], source: String, signature: TrustInputSignature?,
                                                    keptAt path: String) throws -> TrustInputVersion {
        if let signature { try signature.verify(bytes, of: source) }
        let input = try Input.verified(bytes, source: source)
        if let kept = TrustInputSource.keptCopy(Input.self)(path), let refusal = input.refusal(replacing: kept) {
            throw InputError("\(source): \(refusal)")
        }
        return input.version
    }
}

extension TrustInputKind: NamedArgumentValue {}
