/// An application protocol that upgrades a plaintext connection to TLS (STARTTLS and its kin),
/// named as `openssl s_client -starttls` names it.
public enum STARTTLSProtocol: String, Codable, Sendable, CaseIterable, Hashable {
    case smtp
    case imap
    case pop3
    case ftp
    case xmpp
    case xmppServer = "xmpp-server"
    case ldap
    case postgres
    case mysql
    case sieve
    case nntp

    /// The port a target of this protocol gets when it names none.
    public var defaultPort: Int {
        switch self {
        case .smtp: 25
        case .imap: 143
        case .pop3: 110
        case .ftp: 21
        case .xmpp: 5222
        case .xmppServer: 5269
        case .ldap: 389
        case .postgres: 5432
        case .mysql: 3306
        case .sieve: 4190
        case .nntp: 119
        }
    }

    /// The protocol a well-known plaintext port speaks, when it upgrades with STARTTLS: each
    /// protocol's default port, and 587 (SMTP submission). Other ports are never guessed.
    public static func wellKnown(port: Int) -> STARTTLSProtocol? {
        port == submissionPort ? .smtp : allCases.first { $0.defaultPort == port }
    }

    /// The ports `wellKnown(port:)` answers for, ascending (the help lists them).
    public static let wellKnownPorts: [Int] = (allCases.map(\.defaultPort) + [submissionPort]).sorted()

    /// SMTP submission (RFC 6409), the one well-known port that is no protocol's default.
    private static let submissionPort = 587

    /// The service that speaks TLS from the first byte on a well-known port (`465`: `smtps`), for
    /// saying so in the output.
    public static func implicitTLSService(port: Int) -> String? {
        switch port {
        case 465: "smtps (SMTP submission over implicit TLS)"
        case 993: "imaps"
        case 995: "pop3s"
        case 636: "ldaps"
        case 990: "ftps"
        case 5223: "xmpp over implicit TLS"
        case 563: "nntps"
        default: nil
        }
    }

    /// True when the client speaks first (the server waits for the stream header, the
    /// SSLRequest, the extended request) rather than greeting.
    public var clientSpeaksFirst: Bool { [.xmpp, .xmppServer, .ldap, .postgres].contains(self) }

    /// How people call it in prose.
    public var displayName: String {
        switch self {
        case .smtp: "SMTP"
        case .imap: "IMAP"
        case .pop3: "POP3"
        case .ftp: "FTP"
        case .xmpp: "XMPP"
        case .xmppServer: "XMPP server-to-server"
        case .ldap: "LDAP"
        case .postgres: "PostgreSQL"
        case .mysql: "MySQL"
        case .sieve: "ManageSieve"
        case .nntp: "NNTP"
        }
    }
}

/// How a target reaches TLS: from the first byte, or after a STARTTLS dialogue (named by the user
/// or inferred from a well-known port).
public struct STARTTLSUse: Hashable, Codable, Sendable {
    public var `protocol`: STARTTLSProtocol
    /// True when the protocol was not named but inferred from the port.
    public var inferred: Bool

    public init(_ protocol: STARTTLSProtocol, inferred: Bool) {
        self.protocol = `protocol`
        self.inferred = inferred
    }

    /// One phrase for the output: `STARTTLS smtp (inferred from port 25)`.
    public func phrase(port: Int) -> String {
        "STARTTLS \(self.protocol.rawValue)" + (inferred ? " (inferred from port \(port))" : "")
    }
}

/// What the user asked for: a protocol, `auto` (infer from a well-known port: the default), or
/// `none` (TLS from the first byte even on a well-known STARTTLS port).
public enum STARTTLSSetting: Hashable, Sendable {
    case auto
    case none
    case named(STARTTLSProtocol)

    /// `smtp`, ..., `auto` or `none`; nil for anything else.
    public init?(_ text: String) {
        switch text {
        case "auto": self = .auto
        case "none", "off": self = .none
        default:
            guard let named = STARTTLSProtocol(rawValue: text) else { return nil }
            self = .named(named)
        }
    }

    /// The words accepted (`off` is also taken for `none`).
    public static let names = STARTTLSProtocol.allCases.map(\.rawValue) + ["auto", "none"]
    /// The words accepted, for error messages.
    public static let accepted = names.joined(separator: ", ")

    /// What a target on `port` uses under this setting.
    public func use(port: Int) -> STARTTLSUse? {
        switch self {
        case .none: nil
        case .named(let named): STARTTLSUse(named, inferred: false)
        case .auto: STARTTLSProtocol.wellKnown(port: port).map { STARTTLSUse($0, inferred: true) }
        }
    }
}
