import Foundation
import TLSAuditModel
import TLSAuditSupport

/// The service's HTTP listener (`http:` in the configuration): off unless `listen` names an address.
public struct HTTPSettings: Sendable, Hashable {
    /// One address to listen on: an IPv4 or IPv6 literal (or a host name) and a port (0: any free one).
    public struct Listen: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `HOST:PORT`, `[IPV6]:PORT` or `:PORT` (every IPv4 address); nil when it is none of these.
        public static func parse(_ text: String) -> Listen? {
            let host: Substring, port: Substring
            if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
                host = text[text.index(after: text.startIndex)..<close]
                port = text[text.index(close, offsetBy: 2)...]
            } else {
                guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":" as Character) else { return nil }
                host = text[..<colon].isEmpty ? "0.0.0.0" : text[..<colon]
                port = text[text.index(after: colon)...]
            }
            guard !host.isEmpty, let number = Int(port), (0...65_535).contains(number) else { return nil }
            return Listen(host: String(host), port: number)
        }

        public var description: String { HostText.withPort(host, port) }
    }

    /// Addresses to listen on; empty: no listener.
    public var listen: [Listen] = []
    /// A file holding the token every request but the health checks must present as
    /// `Authorization: Bearer TOKEN` (nil: no token asked for).
    public var bearerTokenFile: String?
    /// An htpasswd file of users with bcrypt password hashes (`htpasswd -B`) who may present
    /// `Authorization: Basic` instead (nil: none). With both, either is accepted.
    public var basicAuthFile: String?
    /// The PEM certificate chain (leaf first) and PEM private key of an HTTPS listener.
    public struct TLSFiles: Sendable, Hashable {
        public var certificate: String
        public var key: String

        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }

    /// Serve HTTPS (TLS 1.2 and later) with these files; nil: plain HTTP.
    public var tls: TLSFiles?
    /// Most connections open at once per listener; more wait in the kernel's backlog.
    public var maxConnections = Int(SettingBounds.httpConnections.defaultValue)
    /// Seconds a connection may stay idle (no request, or a request stalled mid-way) before it is closed.
    public var idleTimeout = SettingBounds.httpIdleTimeout.defaultValue
    /// Names a request's `Host` may give besides the listener's own address and `localhost`
    /// (`allowed_hosts`). The `Host` rule applies when no credentials are asked for, or when this is set.
    public var allowedHosts: [String] = []
    /// Reverse proxies (`trusted_proxies`: addresses or CIDR ranges, held as `ADDRESS/PREFIX`) whose
    /// `Forwarded` / `X-Forwarded-For` names the client a password budget is kept for; from any
    /// other address those headers are ignored.
    public var trustedProxies: [String] = []

    /// `GET /probe?target=HOST:PORT[&module=NAME]`: scans a target on request, as ssl_exporter's
    /// and blackbox_exporter's `/probe` do (`http: probe:`).
    public struct ProbeSettings: Sendable, Hashable {
        /// Off (`probe: off`): `/probe` answers 404.
        public var enabled = true
        /// Host patterns a request may name: `example.com`, `*.example.com` (any name below it), an IP
        /// address, or `*` (any host, the default).
        public var allowedTargets: [String] = ["*"]
        /// Seconds a probe may take at most; Prometheus' `X-Prometheus-Scrape-Timeout-Seconds` less half a second when shorter.
        public var timeout = SettingBounds.probeTimeout.defaultValue
        /// Probes scanning at once; more wait for a slot until their timeout.
        public var concurrency = SettingBounds.probeConcurrency.defaultValue

        public init() {}

        /// Whether a request may name `host` (a name or an IP address, without brackets).
        public func allows(host: String) -> Bool {
            let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
            let canonical = IPAddress.canonical(name)
            return allowedTargets.contains { pattern in
                let pattern = pattern.lowercased()
                if pattern == "*" { return true }
                if let canonical { return IPAddress.canonical(pattern) == canonical }
                if pattern.hasPrefix("*.") { return name.hasSuffix(pattern.dropFirst()) }
                return name == pattern
            }
        }

        /// Whether `pattern` can be in `allowed_targets`.
        public static func isPattern(_ pattern: String) -> Bool {
            pattern == "*" || HTTPSettings.isAllowedHost(pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern)
        }
    }

    /// The `/probe` endpoint's settings.
    public var probe = ProbeSettings()

    public init() {}

    /// Whether `name` can be in `allowed_hosts`: a host name (letters, digits, '-', '_', dots
    /// between labels) or an IP address, without a port, a scheme or a wildcard.
    public static func isAllowedHost(_ name: String) -> Bool {
        if IPAddress.canonical(name) != nil { return true }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        return name.utf8.count <= 253 && labels.allSatisfy { label in
            (1...63).contains(label.utf8.count) && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }
        }
    }

    public var enabled: Bool { !listen.isEmpty }

    /// `10.0.0.0/8`, `fd00::/8` or a single address (`192.0.2.7`, `::1`) as `ADDRESS/PREFIX` in
    /// canonical form; nil when it is neither.
    public static func proxyRange(_ text: String) -> String? {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let address = IPAddress.canonical(parts[0]), let bytes = IPAddress.bytes(address) else { return nil }
        guard parts.count == 2 else { return "\(address)/\(bytes.count * 8)" }
        guard let prefix = Int(parts[1]), (0...bytes.count * 8).contains(prefix) else { return nil }
        return "\(address)/\(prefix)"
    }
}
