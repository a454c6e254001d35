public import Foundation

/// A domain watched in Certificate Transparency for what is issued for it (`ct: {watch:}`, and the
/// hosts of configured targets): every certificate logged for it is recorded, and when `issuers`
/// names the CAs allowed to issue for it (as a CAA record would), one from another CA is
/// `ct.unexpected-issuer`.
public struct WatchedDomain: Hashable, Sendable {
    /// The domain, as clients compare it (A-labels, lower case).
    public var domain: String
    /// Whether names under `domain` are watched too (`ct: watch:` entries: yes unless told; a target's host: no).
    public var includeSubdomains: Bool
    /// The CAs allowed to issue for it; empty: any.
    public var issuers: [AllowedIssuer]
    /// Who watches, in words: `ct: watch`, `target api`.
    public var watchedBy: String

    public init(domain: String, includeSubdomains: Bool = true, issuers: [AllowedIssuer] = [], watchedBy: String) {
        self.domain = DomainNameForm.ascii(domain)
        self.includeSubdomains = includeSubdomains
        self.issuers = issuers
        self.watchedBy = watchedBy
    }

    /// The host a certificate for `names` (its DNS SANs) is met as under this domain, or nil.
    public func reaches(_ names: [String]) -> String? {
        PinForecast.reach(domain, subdomains: includeSubdomains ? .anyDepth : .none, names: names)
    }

    /// Whether a CA of `chain` (the certificates above the first, as logged or as built) is one
    /// `issuers` allows; true when `issuers` is empty.
    public func allows(_ chain: [CertificateSummary]) -> Bool {
        issuers.isEmpty || chain.contains { ca in issuers.contains { $0.matches(ca) } }
    }

    /// The domains of `ct: watch` and the hosts of `targets` they do not already cover (each host
    /// once, its subdomains not included).
    public static func all(_ configured: [WatchedDomain], targets: [ScanTarget]) -> [WatchedDomain] {
        var watched = configured
        for target in targets {
            let host = DomainNameForm.ascii(target.sni ?? target.host)
            let covered = watched.contains { $0.domain == host || ($0.includeSubdomains && host.hasSuffix("." + $0.domain)) }
            guard HostnameMatcher.isValidDNSName(host), !covered else { continue }
            watched.append(WatchedDomain(domain: host, includeSubdomains: false, watchedBy: "target \(target.original)"))
        }
        return watched
    }
}

/// A CA allowed to issue for a watched domain: by the SHA-256 of its key (`sha256/BASE64`, the
/// form pins take), or by name (its organization or common name, compared without case: `Let's
/// Encrypt`, `DigiCert Inc`). A rule matches any CA of the chain, so a root's covers its intermediates.
public enum AllowedIssuer: Hashable, Sendable, CustomStringConvertible {
    case key(String)
    case name(String)

    /// `sha256/` and 44 characters of base64 (32 bytes) is a key; other text a name; nil for an empty
    /// text or a `sha256/` that is not 32 bytes.
    public init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("sha256/") {
            let value = String(trimmed.dropFirst(7))
            guard Data(base64Encoded: value)?.count == 32 else { return nil }
            self = .key(value)
        } else {
            guard !trimmed.isEmpty else { return nil }
            self = .name(trimmed)
        }
    }

    public func matches(_ ca: CertificateSummary) -> Bool {
        switch self {
        case .key(let spki): return ca.spkiSHA256 == spki
        case .name(let name):
            return ["O", "CN"].contains { attribute in
                DistinguishedName.attribute(attribute, of: ca.subject)?.caseInsensitiveCompare(name) == .orderedSame
            }
        }
    }

    public var description: String {
        switch self {
        case .key(let spki): "sha256/\(spki)"
        case .name(let name): name
        }
    }
}
