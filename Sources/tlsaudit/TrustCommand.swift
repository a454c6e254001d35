import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe
import TLSAuditService

/// `tlsaudit trust`: the trust inputs in force (the CT log list, the distrust table, Apple's root
/// store snapshot) and updating the CT log list by hand (air-gapped hosts).
struct TrustCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Show the trust inputs in force, or update the CT log list by hand.",
        subcommands: [TrustStatusCommand.self, TrustUpdateCommand.self]
    )
}

/// `tlsaudit trust status`: each input's source, version, publication time and age.
struct TrustStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Each trust input's source, version, publication time and age.",
        discussion: "With --config, the service's inputs (ct: {log_list:, last_known_good:}, distrust: {list:}); else the shipped snapshots, or --ct-log-list / --distrust-list."
    )

    @Option(help: "The service's configuration file.")
    var config: String?

    @OptionGroup var trust: TrustInputOptions

    @Option(help: ArgumentHelp(HelpLists.outputFormat))
    var format: OutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    struct Input: Encodable {
        var input: String
        var source: String
        var version: String?
        var publishedAt: Date?
        var ageDays: Int?
        var entries: Int
        var note: String?
    }

    func run() throws {
        let now = Date()
        var inputs: [Input] = []
        // The CT log list: the configuration's (its last known good copy when the source is a URL), else the option's, else the snapshot.
        let configuration = try config.map(loadConfiguration)
        var list = CTLogList.shipped
        var note: String?
        if let source = configuration?.ctLogList {
            if let kept = configuration?.ctLogListLastKnownGood, FileManager.default.fileExists(atPath: kept) {
                list = try CTLogListInput.load(kept, lastKnownGood: nil).list
                note = "last known good copy of \(source), refreshed when serve starts"
            } else {
                let loaded = try CTLogListInput.load(source, lastKnownGood: nil)
                (list, note) = (loaded.list, loaded.note)
            }
        } else {
            list = try trust.logs()
        }
        inputs.append(Input(input: "ct-log-list", source: list.source, version: nil, publishedAt: list.publishedAt,
                            ageDays: list.publishedAt.map { Int(now.timeIntervalSince($0) / 86_400) }, entries: list.logs.count, note: note))
        let optionDistrust = try trust.distrust()
        let distrust = configuration?.distrust ?? optionDistrust ?? DistrustSetting()
        inputs.append(Input(input: "distrust", source: distrust.table.source, version: nil, publishedAt: nil, ageDays: nil,
                            entries: distrust.table.entries.count,
                            note: distrust.vendor.map { "vendor \($0.rawValue) for every target" } ?? "Apple's rows under the Apple policies, Mozilla's under the Mozilla ones"))
        let apple = TrustStore.appleSnapshot
        inputs.append(Input(input: "apple-roots", source: apple.source, version: apple.fetched, publishedAt: nil, ageDays: nil,
                            entries: apple.count, note: "SHA-256 \(apple.sha256)"))
        switch format {
        case .json:
            StandardStream.output.write(try jsonStyle.encoder.encodeLine(["inputs": inputs]))
        case .text:
            for input in inputs {
                var line = "\(input.input): \(input.source), \(input.entries) \(input.input == "apple-roots" ? "roots" : input.input == "distrust" ? "rows" : "logs")"
                if let published = input.publishedAt { line += ", published \(Timestamp.format(published))" }
                if let age = input.ageDays { line += ", \(age) day\(age == 1 ? "" : "s") old" }
                if let version = input.version { line += ", \(version)" }
                if let note = input.note { line += " (\(note))" }
                StandardStream.output.write(line + "\n")
            }
        }
    }
}

/// `tlsaudit trust update SOURCE`: fetch or read a CT log list, verify it, and replace the kept copy.
struct TrustUpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Verify a CT log list (file or URL) and make it the last known good copy the service uses.",
        discussion: """
            The list is refused (exit 1, the kept copy unchanged) when it is not in the v3 schema, a log's \
            log_id is not the SHA-256 of its key, or it was published before the kept copy. The copy is \
            replaced atomically. Where it is kept: --output, else the configuration's ct: {last_known_good:} \
            (default ct-log-list.json beside the database). Exit status: 0 updated, 1 refused, 2 the \
            source cannot be read, 64 usage.
            """
    )

    @Argument(help: "The CT log list: a file or an http(s) URL.")
    var source: String

    @Option(help: "The service's configuration file (where its last known good list is kept).")
    var config: String?

    @Option(help: "Where to keep the list (instead of the configuration's).")
    var output: String?

    func run() throws {
        var destination = output
        if destination == nil, let config {
            let configuration = try loadConfiguration(config)
            destination = configuration.ctLogListLastKnownGood
                ?? ((configuration.database as NSString).deletingLastPathComponent as String) + "/ct-log-list.json"
        }
        guard let destination else { throw ValidationError("give --output FILE or --config FILE: where the list is kept") }
        let bytes: [UInt8]
        do { bytes = try TrustInputSource.read(source) } catch {
            StandardStream.error.write("tlsaudit: \(error)\n")
            throw ExitCode(2)
        }
        do {
            let list = try CTLogListInput.verified(bytes, source: source)
            if let kept = try? CTLogListInput.load(destination, lastKnownGood: nil).list, let old = kept.publishedAt,
               let new = list.publishedAt, new < old {
                throw InputError("\(source) was published \(Timestamp.format(new)), before the kept list (\(Timestamp.format(old)))")
            }
            try TrustInputSource.writeAtomically(bytes, to: destination)
            StandardStream.output.write("updated \(destination): \(list.source), \(list.logs.count) logs\n")
        } catch {
            StandardStream.error.write("tlsaudit: refused: \(error); \(destination) is unchanged\n")
            throw ExitCode(1)
        }
    }
}
