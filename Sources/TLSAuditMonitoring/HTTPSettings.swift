import Foundation
import TLSAuditModel

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
                guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
                host = text[..<colon].isEmpty ? "0.0.0.0" : text[..<colon]
                port = text[text.index(after: colon)...]
            }
            guard !host.isEmpty, let number = Int(port), (0...65_535).contains(number) else { return nil }
            return Listen(host: String(host), port: number)
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
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

    public init() {}

    public var enabled: Bool { !listen.isEmpty }
}
