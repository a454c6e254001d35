import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe
@testable import tlsaudit
import ArgumentParser

/// What an operator reads about the commands, through the binary: every `--help` lists every value
/// its options accept, and `scripts/generate-docs` makes man pages `man` renders and completions
/// the shells load.
@Suite("help, man pages and completions")
struct DocumentationTests {
    /// One option of one command, as `tlsaudit --experimental-dump-help` describes it.
    struct DocumentedOption {
        var command: [String]
        var name: String
        /// The values the parser accepts (empty for a free-form value such as `--trust-store`).
        var values: [String]
    }

    /// Every option of every command, walking `--experimental-dump-help` (what generate-manual reads).
    static func documentedOptions() throws -> [DocumentedOption] {
        let output = try CLI.run(["--experimental-dump-help"])
        try #require(output.status == 0, "\(output.stderr)")
        let tool = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        var options: [DocumentedOption] = []
        func walk(_ command: [String: Any], path: [String]) {
            for argument in command["arguments"] as? [[String: Any]] ?? [] where argument["kind"] as? String == "option" {
                guard let preferred = argument["preferredName"] as? [String: Any], preferred["kind"] as? String == "long",
                      let name = preferred["name"] as? String else { continue }
                options.append(DocumentedOption(command: path, name: name, values: argument["allValues"] as? [String] ?? []))
            }
            for subcommand in command["subcommands"] as? [[String: Any]] ?? [] {
                walk(subcommand, path: path + [subcommand["commandName"] as? String ?? ""])
            }
        }
        walk(try #require(tool["command"] as? [String: Any]), path: [])
        return options
    }

    /// The entry of `--NAME` in `tlsaudit COMMAND --help`, its lines joined (values are never split).
    static func helpEntry(of name: String, in command: [String]) throws -> String {
        let output = try CLI.run(command + ["--help"])
        try #require(output.status == 0, "\(output.stderr)")
        var entry: [Substring] = []
        // An option's first line is indented by two spaces; its wrapped lines and discussion by more.
        for line in output.stdout.split(separator: "\n") {
            let startsEntry = line.hasPrefix("  -") || line.first != " "
            if startsEntry {
                if !entry.isEmpty { break }
                if line.hasPrefix("  --\(name) ") || line == "  --\(name)" { entry.append(line.drop { $0 == " " }) }
            } else if !entry.isEmpty {
                entry.append(line.drop { $0 == " " })
            }
        }
        return entry.joined(separator: " ")
    }

    @Test("every command's --help lists every policy, root store, format, check and STARTTLS protocol its options accept")
    func helpListsEveryValue() throws {
        let options = try Self.documentedOptions()
        let policies = CompliancePolicy.registered.map(\.rawValue)
        var checked: [String: [String]] = [:]
        for option in options where ["policy", "trust-store", "format", "log-format", "checks", "starttls"].contains(option.name) {
            let entry = try Self.helpEntry(of: option.name, in: option.command)
            let listed: [String] = switch option.name {
            case "policy": policies
            case "trust-store": ChainReport.publicStoreNames + ["PEM FILE"]
            case "checks": AddressChecks.shipped.map(\.name.rawValue)
            case "starttls": STARTTLSSetting.names + ["587"]
            default: option.values
            }
            #expect(!listed.isEmpty, "\(option.command) --\(option.name): no values known")
            if option.name == "policy" { #expect(option.values == policies, "\(option.command): --policy accepts \(option.values)") }
            for value in listed {
                #expect(entry.contains(value), "tlsaudit \(option.command.joined(separator: " ")) --help: --\(option.name) does not list \(value): \(entry)")
            }
            checked[option.name, default: []].append(option.command.joined(separator: " "))
        }
        // Each root store the help lists is one `--trust-store NAME` opens (not a file of that name).
        for name in ChainReport.publicStoreNames {
            #expect(try TrustStore.publicStore(named: name)?.label == name)
        }
        // The commands known to take each (a command that stops taking one is a change to see here).
        #expect(Set(checked["policy"] ?? []) == ["scan", "report"])
        #expect(Set(checked["trust-store"] ?? []).isSuperset(of: ["scan", "ats", "verify", "pin", "app audit", "app import"]))
        #expect(Set(checked["format"] ?? []).isSuperset(of: ["scan", "ats", "verify", "status", "history", "report", "alerts", "app audit"]))
        #expect(Set(checked["log-format"] ?? []) == ["serve", "demo"])
        #expect(checked["checks"] == ["scan"])
        #expect(Set(checked["starttls"] ?? []).isSuperset(of: ["scan", "ats", "pin"]))
    }

    /// Every leaf command below `command`, with the names of the commands above it.
    static func leaves(of command: any ParsableCommand.Type, under path: String = "") -> [(command: any ParsableCommand.Type, parents: String)] {
        let name = path.isEmpty ? command._commandName : path + " " + command._commandName
        let subcommands = command.configuration.subcommands
        return subcommands.isEmpty ? [(command, path)] : subcommands.flatMap { leaves(of: $0, under: name) }
    }

    @Test("every leaf command is parsed on its own; a completion request or a usage error after a leaf's name is answered as from the root")
    func leavesParsedDirectly() throws {
        let leaves = Self.leaves(of: TLSAuditCommand.self)
        #expect(leaves.count >= 20)
        for (leaf, parents) in leaves {
            // Marked with the commands above it, so DirectRoute takes it (and skips ArgumentParser's completion check).
            #expect(leaf.configuration._superCommandName == parents, "\(parents) \(leaf._commandName)")
            let names = parents.split(separator: " ").dropFirst().map(String.init) + [leaf._commandName]
            #expect(DirectRoute.leaf(of: TLSAuditCommand.self, in: (names + ["x"])[...]).map { $0.0 == leaf } == true, "\(names)")
        }
        // The completion scripts come from the root parse, wherever the flag is.
        let root = try CLI.run(["--generate-completion-script", "bash"])
        for arguments in [["scan", "--generate-completion-script", "bash"], ["app", "audit", "--generate-completion-script=bash"]] {
            let script = try CLI.run(arguments)
            #expect(script.status == 0 && script.stdout == root.stdout && script.stdout.contains("complete -"), "\(arguments): \(script.stderr)")
        }
        // A leaf's usage error names the whole command, as the root parse writes it.
        let wrong = try CLI.run(["app", "audit", "--no-such-option"])
        #expect(wrong.status == 64)
        #expect(wrong.stderr.contains("Usage: tlsaudit app audit"), "\(wrong.stderr)")
        let help = try CLI.run(["verify", "--help"])
        #expect(help.stdout.contains("USAGE: tlsaudit verify"), "\(help.stdout.prefix(300))")
        #expect(!help.stdout.contains("tlsaudit tlsaudit"))
    }

    @Test("scripts/generate-docs: man renders tlsaudit-scan with its options; the completions load")
    func manPagesAndCompletions() throws {
        let repository = JSONSchemaTests.repository
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-docs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let generated = try Self.shell(repository.appendingPathComponent("scripts/generate-docs").path,
                                       ["--binary", CLI.binary, output.path], limit: 600)
        try #require(generated.status == 0, "\(generated.stderr)")

        // One page per command, named as `man tlsaudit-scan` looks it up.
        let manDirectory = output.appendingPathComponent("man")
        let pages = try FileManager.default.contentsOfDirectory(atPath: manDirectory.appendingPathComponent("man1").path)
        for page in ["tlsaudit.1", "tlsaudit-scan.1", "tlsaudit-report.1", "tlsaudit-app-audit.1", "tlsaudit-fleet-apply.1"] {
            #expect(pages.contains(page), "\(pages.sorted())")
        }
        let man = try LabPrerequisite.program(["man"], package: "man-db")
        let environment = ["MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "1000", "LANG": "C.UTF-8"]
        let located = try Self.shell(man, ["-M", manDirectory.path, "-w", "tlsaudit-scan"], environment: environment)
        #expect(located.stdout.hasSuffix("man1/tlsaudit-scan.1\n"), "\(located.stdout) \(located.stderr)")
        // mandb's whatis entry (what apropos lists) names the page as man looks it up.
        let lexgrog = try LabPrerequisite.program(["lexgrog"], package: "man-db")
        let whatis = try Self.shell(lexgrog, [manDirectory.appendingPathComponent("man1/tlsaudit-scan.1").path])
        #expect(whatis.status == 0 && whatis.stdout.contains("\"tlsaudit-scan - "), "\(whatis.stdout) \(whatis.stderr)")
        let rendered = try Self.shell(man, ["-l", manDirectory.appendingPathComponent("man1/tlsaudit-scan.1").path], environment: environment)
        #expect(rendered.status == 0, "\(rendered.stderr)")
        // Plain text without overstriking (lines 1000 wide: no word is hyphenated at a line end).
        let text = rendered.stdout.replacingOccurrences(of: ".\u{8}", with: "", options: .regularExpression)
        for expected in ["--enumerate", "--checks", "--policy", "--trust-store", "--format"] + CompliancePolicy.registered.map(\.rawValue) {
            #expect(text.contains(expected), "man tlsaudit-scan does not show \(expected)")
        }
        #expect(!rendered.stderr.contains("warning"), "\(rendered.stderr)")

        // bash: the script parses, and loaded, it completes tlsaudit.
        let completions = output.appendingPathComponent("completions")
        let bashScript = completions.appendingPathComponent("tlsaudit.bash").path
        #expect(try Self.shell("/bin/bash", ["-n", bashScript]).status == 0)
        let loaded = try Self.shell("/bin/bash", ["-c", "source \"$1\" && complete -p tlsaudit", "bash", bashScript])
        #expect(loaded.status == 0 && loaded.stdout.contains("tlsaudit"), "\(loaded.stdout) \(loaded.stderr)")
        // zsh and fish: a syntax check where the shell is installed (the test does not install them).
        if let zsh = try? LabPrerequisite.program(["zsh"], package: "zsh") {
            let checked = try Self.shell(zsh, ["-n", completions.appendingPathComponent("_tlsaudit").path])
            #expect(checked.status == 0, "\(checked.stderr)")
        }
        if let fish = try? LabPrerequisite.program(["fish"], package: "fish") {
            let checked = try Self.shell(fish, ["--no-execute", completions.appendingPathComponent("tlsaudit.fish").path])
            #expect(checked.status == 0, "\(checked.stderr)")
        }
    }

    /// Runs a program other than tlsaudit, with `environment` over the test's.
    static func shell(_ program: String, _ arguments: [String], environment: [String: String] = [:], limit: Double = 60) throws -> CLI.Output {
        try CLI.run(arguments, limit: limit, environment: environment, program: program)
    }
}
