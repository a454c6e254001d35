import ArgumentParser
import Foundation
import TLSAuditApp
import TLSAuditCore
import TLSAuditReport

/// `tlsaudit pins`: pin utilities.
struct PinsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pins",
        abstract: "Pin utilities.",
        subcommands: [PinsImportCommand.self]
    )
}

/// `tlsaudit pins import`: NSPinnedDomains from an Info.plist to tlsaudit groups.
struct PinsImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Turn an Info.plist's NSPinnedDomains (or a bare NSAppTransportSecurity dictionary) into tlsaudit groups with pins.",
        discussion: "An empty identity array is an error (exit 64); a single pin without a backup is a warning."
    ).parsedDirectly(under: "tlsaudit pins")

    @Argument(help: "The property list (XML or binary).")
    var plist: String

    @Option(name: .customLong("host"), help: "Hosts to place under the pinned domain that covers them (Apple's NSIncludesSubdomains meaning: one label below the domain); repeatable.")
    var hosts: [String] = []

    @Option(help: "Write the YAML here instead of standard output.")
    var output: String?

    func run() throws {
        let reading: PinsImport.Reading
        do {
            reading = PinsImport.read(try AppBundleReader.readPropertyList(path: plist))
        } catch {
            StandardStream.error.write(error.description + "\n")
            throw ExitCode(64)
        }
        guard reading.errors.isEmpty else {
            StandardStream.error.write(reading.errors.map { "\(plist): \($0)\n" }.joined())
            throw ExitCode(64)
        }
        for warning in reading.warnings { StandardStream.error.write("warning: \(warning)\n") }
        let (yaml, uncovered) = PinsImport.yaml(reading.policy, hosts: hosts, source: plist)
        for host in uncovered {
            StandardStream.error.write("note: no pinned domain covers \(host); it is left out (NSIncludesSubdomains reaches one label below its domain only)\n")
        }
        if let output {
            do {
                try OutputFile.write(yaml, to: output)
            } catch {
                StandardStream.error.write("tlsaudit: cannot write \(output): \(error.localizedDescription)\n")
                throw ExitCode(2)
            }
        } else {
            StandardStream.output.write(yaml)
        }
    }
}
