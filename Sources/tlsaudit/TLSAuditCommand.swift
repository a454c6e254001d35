import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditSQLite
import TLSAuditStore

/// The `tlsaudit` root command.
@main
struct TLSAuditCommand: AsyncParsableCommand {
    static let version = TLSAuditVersion.current

    static let configuration = CommandConfiguration(
        commandName: "tlsaudit",
        abstract: "TLS handshake inspector and certificate auditor: what each handshake really shows, judged against App Transport Security.",
        version: version,
        subcommands: [ScanCommand.self, ATSCommand.self, VerifyCommand.self, ServeCommand.self, CheckConfigCommand.self, StatusCommand.self,
                      HistoryCommand.self, ReportCommand.self, AlertsCommand.self, CTCommand.self, PinCommand.self, PinsCommand.self, FleetCommand.self, StoreCommand.self,
                      AppCommand.self, TrustCommand.self, DemoCommand.self]
    )

    /// Prepares the standard streams (`StandardStream.prepare`), then parses and runs the command:
    /// straight from the subcommand the arguments name when they parse as it (`DirectRoute`), else
    /// through ArgumentParser's root parse, which answers help, versions, completions and errors.
    static func main() async {
        OpenSSLLibrary.initializeWithoutCleanupAtExit()
        StandardStream.prepare()
        StoreBackends.registerShipped()
        if let command = await DirectRoute.parse(Array(CommandLine.arguments.dropFirst()), root: Self.self) {
            do {
                try await runLeaf(command)
            } catch let code as ExitCode {
                // A verdict's exit status: what ArgumentParser's `exit(withError:)` does with it (no
                // message), without the usage text it builds first for any error (a reflection of
                // the whole command tree: 0.36% of a 200-target scan's CPU, paid by every run
                // that finds something).
                Foundation.exit(code.rawValue)
            } catch {
                exit(withError: error) // As ArgumentParser's own main reports a run's error.
            }
            return
        }
        await runParsed(Self.self)
    }
}

/// A way past ArgumentParser's root parse for the commands people run by hand and time. Parsing
/// `tlsaudit verify ...` from the root builds the subcommand's argument set (a Mirror over it and
/// every option group) three times, besides the root's: 8M of a `verify`'s 60M instructions. When the
/// arguments start with subcommand names down to a leaf command and the rest parses as that leaf,
/// the leaf is parsed once on its own. Anything else (help, `--version`, completions, a parse or
/// validation error) returns nil, and the root parse runs as before, with its messages.
enum DirectRoute {
    /// The leaf command parsed from `arguments`, or nil when the root parse must answer.
    static func parse(_ arguments: [String], root: any ParsableCommand.Type) async -> (any ParsableCommand)? {
        // A leaf parsed on its own does not look for `--generate-completion-script`: the root does.
        guard !arguments.contains(where: { $0.contains("generate-completion-script") }),
              let (leaf, rest) = leaf(of: root, in: arguments[...])
        else { return nil }
        let parsed: (any ParsableCommand)?
        if let asyncLeaf = leaf as? any AsyncParsableCommand.Type {
            parsed = try? await asyncLeaf.asyncParseAsRoot(Array(rest))
        } else {
            parsed = try? leaf.parseAsRoot(Array(rest))
        }
        // Help requests parse as ArgumentParser's own help command (its usage would name the leaf
        // alone): only the leaf itself is taken.
        guard let parsed, type(of: parsed) == leaf else { return nil }
        return parsed
    }

    /// The command the leading arguments name (subcommand names and aliases, down to a command
    /// without subcommands) and the arguments after them; nil when they name none.
    /// Only a leaf marked `parsedDirectly(under:)` with the names above it is taken.
    static func leaf(of root: any ParsableCommand.Type, in arguments: ArraySlice<String>) -> (any ParsableCommand.Type, ArraySlice<String>)? {
        var command = root
        var path = root._commandName
        var rest = arguments
        while !command.configuration.subcommands.isEmpty {
            guard let name = rest.first,
                  let next = command.configuration.subcommands.first(where: { $0._commandName == name || $0.configuration.aliases.contains(name) })
            else { return nil }
            if next.configuration.subcommands.isEmpty, next.configuration._superCommandName != path { return nil }
            path += " " + next._commandName
            command = next
            rest = rest.dropFirst()
        }
        return command == root ? nil : (command, rest)
    }
}

extension CommandConfiguration {
    /// A leaf command's configuration that names the commands above it (`"tlsaudit"`,
    /// `"tlsaudit app"`), so that `DirectRoute` parses the leaf on its own, as ArgumentParser parses a
    /// plugin's pseudo-command: without the two extra argument sets (Mirrors and conformance look-ups
    /// over `GenerateCompletions` and its twin) of its check for `--generate-completion-script`,
    /// which the root parse answers. (They cost 11.6M instructions of a one-target scan's 73.5M,
    /// mostly first uses the leaf's own parse then pays: the scan saves 2.1M.) Only the
    /// usage text of a leaf parsed as the root reads the name, and `DirectRoute` never shows one.
    func parsedDirectly(under parents: String) -> CommandConfiguration {
        var configuration = self
        configuration._superCommandName = parents
        return configuration
    }
}

/// Runs a parsed command, asynchronously when it is an async one. (Opened from the existential, so
/// that the cast asks the runtime about the command's own type, which `DirectRoute` already asked
/// about, and not about `any ParsableCommand`: a second walk of every conformance record.)
private func runLeaf(_ command: some ParsableCommand) async throws {
    var command = command
    if var asyncCommand = command as? any AsyncParsableCommand { try await asyncCommand.run() } else { try command.run() }
}

/// ArgumentParser's own `main` (a protocol extension method, so a generic call reaches it rather
/// than the override above).
private func runParsed<Command: AsyncParsableCommand>(_: Command.Type) async {
    await Command.main()
}

extension StoreBackends {
    /// The store backends tlsaudit ships, registered before any command runs: PostgreSQL's URLs,
    /// then SQLite's paths. A new backend is its module and one line here.
    static func registerShipped() {
        register(PostgresBackend(sha256: Digest.sha256Hex))
        register(SQLiteBackend(sha256: Digest.sha256Hex))
    }
}
