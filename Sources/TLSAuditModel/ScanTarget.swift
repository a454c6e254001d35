import Foundation
import TLSAuditSupport

/// A target as the user names it: `example.com`, `example.com:8443`, `[2001:db8::1]:443`,
/// a bare IPv6 literal, or an `https://` URL (scheme and path are ignored).
public struct ScanTarget: Hashable, Sendable {
    /// The text as given, for display.
    public var original: String
    public var host: String
    public var port: Int
    /// Server name to send; defaults to `host` unless `host` is an IP literal.
    public var sni: String?
    /// Addresses to connect to instead of resolving `host` (each probed separately).
    public var connectTo: [ConnectAddress]
    /// The policy the target is judged under.
    public var policy: CompliancePolicy = .default
    /// Overrides the scanner's timeout for this target.
    public var timeout: Double?
    /// The target's pins, checked on every handshake.
    public var pins: PinPolicy?
    /// Revocation checking for this target; `nil` takes the scan's (`ScanOptions.revocation`).
    public var revocation: RevocationMode?
    /// Fetch a missing intermediate from the caIssuers URL (as Apple's clients do); `nil` takes the scan's.
    public var aiaFetch: Bool?
    /// The STARTTLS dialogue that comes before the handshake; nil: TLS from the first byte.
    public var starttls: STARTTLSUse?
    /// Opt-in checks run after each completed handshake (`checks: [inventory]`, `scan --checks`).
    public var checks: Set<OptionalCheck> = []
    /// The path `checks: [headers]` asks for (default `/`).
    public var headersPath: String?
    /// Judged by one iOS app's ATS rules for this host (`app:`, written by `tlsaudit app import`), not a generic client's.
    public var app: AppHostRules?
    /// The client identity presented when the server asks for a certificate (`client_identity:`);
    /// nil takes the scan's (`ScanOptions.clientCredentials`).
    public var clientCredentials: ClientCredentials?

    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var description: String

        public init(description: String) { self.description = description }
    }

    /// A Unicode host or server name is kept in its A-label form (`DomainNameForm.host`): what is
    /// resolved, sent as SNI and matched against the certificate, as an Apple client does.
    public init(original: String, host: String, port: Int, sni: String?, connectTo: [ConnectAddress] = []) {
        self.original = original
        self.host = DomainNameForm.host(host)
        self.port = port
        self.sni = sni.map(DomainNameForm.host)
        self.connectTo = connectTo
    }

    /// Parses `host[:port]`.
    public static func parse(_ text: String, defaultPort: Int = SettingBounds.port.defaultValue) throws(ParseError) -> ScanTarget {
        var rest = text.trimmingWhitespace()
        if let scheme = rest.range(of: "://") { rest = String(rest[scheme.upperBound...]) }
        if let slash = rest.firstIndex(of: "/") { rest = String(rest[..<slash]) }
        guard !rest.isEmpty else { throw ParseError(description: "empty target") }
        let (host, port) = try splitHostPort(rest, defaultPort: defaultPort, whole: text)
        let sni = IPAddress.canonical(host) == nil ? host : nil
        return ScanTarget(original: text, host: host, port: port, sni: sni)
    }

    /// Splits `host:port`, `[v6]:port`, `[v6]`, a bare IPv6 literal, or `host`.
    public static func splitHostPort(_ text: String, defaultPort: Int, whole: String? = nil) throws(ParseError) -> (String, Int) {
        let shown = whole ?? text
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw ParseError(description: "\(shown): missing ']'") }
            let host = String(text[text.index(after: text.startIndex)..<close])
            let after = text[text.index(after: close)...]
            if after.isEmpty { return (host, defaultPort) }
            guard after.hasPrefix(":") else { throw ParseError(description: "\(shown): expected ':PORT' after ']'") }
            return (host, try port(String(after.dropFirst()), in: shown))
        }
        let colons = text.filter { $0 == ":" }.count
        if colons == 1, let colon = text.firstIndex(of: ":") {
            let host = String(text[..<colon])
            guard !host.isEmpty else { throw ParseError(description: "\(shown): missing host") }
            return (host, try port(String(text[text.index(after: colon)...]), in: shown))
        }
        if colons > 1, IPAddress.canonical(text) == nil {
            throw ParseError(description: "\(shown): write IPv6 addresses with a port as [ADDRESS]:PORT")
        }
        guard text.allSatisfy({ $0.isLetter || $0.isNumber || "-._:*".contains($0) }) else {
            throw ParseError(description: "\(shown): not a host name or address")
        }
        return (text, defaultPort)
    }

    private static func port(_ text: String, in shown: String) throws(ParseError) -> Int {
        guard let port = Int(text), (1...65535).contains(port) else {
            throw ParseError(description: "\(shown): '\(text)' is not a port (1-65535)")
        }
        return port
    }

    /// `example.com:443`, `[::1]:443`.
    public var displayName: String {
        HostText.withPort(host, port)
    }

    /// Lines of a targets file: one `host[:port]` per line, `#` starts a comment; each target with
    /// its line number (1-based).
    public static func parseNumberedList(_ text: String, defaultPort: Int = SettingBounds.port.defaultValue) throws(ParseError)
        -> [(line: Int, target: ScanTarget)] {
        var targets: [(line: Int, target: ScanTarget)] = []
        for (number, rawLine) in text.fileLines().enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first
                .map(String.init)?.trimmingWhitespace() ?? ""
            guard !line.isEmpty else { continue }
            do {
                targets.append((number + 1, try parse(line, defaultPort: defaultPort)))
            } catch {
                throw ParseError(description: "line \(number + 1): \(error.description)")
            }
        }
        return targets
    }
}

/// An address given with `--connect-to ADDRESS[:PORT]`: an IP literal or a name, and an
/// optional port (the target's port when absent).
public struct ConnectAddress: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int?

    public init(host: String, port: Int? = nil) {
        self.host = host
        self.port = port
    }

    /// Parses `ADDRESS`, `ADDRESS:PORT`, `[IPV6]:PORT` or a bare IPv6 literal.
    public static func parse(_ text: String) throws(ScanTarget.ParseError) -> ConnectAddress {
        let (host, port) = try ScanTarget.splitHostPort(text, defaultPort: 0)
        return ConnectAddress(host: host, port: port == 0 ? nil : port)
    }

    public var description: String {
        port.map { HostText.withPort(host, $0) } ?? host
    }
}
