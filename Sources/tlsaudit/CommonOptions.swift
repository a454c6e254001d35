public import ArgumentParser
public import TLSAuditCore
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

/// `--starttls`'s help, the same for every command that takes it.
let starttlsHelp = "Upgrade a plaintext connection first: smtp, imap, pop3, ftp, xmpp, xmpp-server, ldap, postgres, mysql, sieve or nntp (as openssl s_client -starttls); auto (the default) infers it from a well-known port (25, 587, 143, 110, 21, 5222, 5269, 389, 5432, 3306, 4190, 119) and says so; none: TLS from the first byte."

extension STARTTLSSetting: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
    public static var allValueStrings: [String] { names }

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

/// `--connect-to`, `--ca-file` and `--timeout` for commands that reach one server.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("connect-to"), help: "Connect to this ADDRESS[:PORT] instead of resolving the host.")
    var connectTo: String?

    @Option(name: .customLong("ca-file"), help: "PEM trust anchors instead of the system store.")
    var caFile: String?

    @Option(help: "Seconds for each of resolution, connect and handshake.")
    var timeout: Double = SettingBounds.timeout.defaultValue

    @Option(help: ArgumentHelp(starttlsHelp, valueName: "protocol"))
    var starttls: STARTTLSSetting = .auto

    func validate() throws {
        if let problem = SettingBounds.timeout.problem(timeout, name: "--timeout") { throw ValidationError(problem + ".") }
    }
}
