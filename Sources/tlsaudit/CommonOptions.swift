import ArgumentParser
import TLSAuditCore
import TLSAuditOutput
import TLSAuditProbe

/// Anchors from a PEM file, or the system store; an unreadable file is a usage error (exit 64).
func loadTrustStore(caFile: String?) throws -> TrustStore {
    do {
        return try caFile.map { try TrustStore(caFile: $0) } ?? TrustStore.system()
    } catch {
        throw ValidationError("\(error)")
    }
}

/// One `HOST[:PORT]` target, connected to through `--connect-to ADDRESS[:PORT]` when given.
func parseSingleTarget(_ text: String, connectTo: String?) throws -> ScanTarget {
    do {
        var target = try ScanTarget.parse(text)
        if let connectTo { target.connectTo = [try ConnectAddress.parse(connectTo)] }
        return target
    } catch {
        throw ValidationError(error.description)
    }
}

/// How `--format json` documents are laid out: indented (the default, every command alike) or on one line.
struct JSONStyleOptions: ParsableArguments {
    @Flag(help: "With --format json: the whole document on one line, no indentation (default: indented).")
    var compact = false

    var encoder: JSONDocumentEncoder { compact ? .tlsauditCompact : .tlsaudit }
}

/// `--connect-to`, `--ca-file` and `--timeout` for commands that reach one server.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("connect-to"), help: "Connect to this ADDRESS[:PORT] instead of resolving the host.")
    var connectTo: String?

    @Option(name: .customLong("ca-file"), help: "PEM trust anchors instead of the system store.")
    var caFile: String?

    @Option(help: "Seconds for each of resolution, connect and handshake.")
    var timeout: Double = SettingBounds.timeout.defaultValue

    func validate() throws {
        if let problem = SettingBounds.timeout.problem(timeout, name: "--timeout") { throw ValidationError(problem + ".") }
    }
}
