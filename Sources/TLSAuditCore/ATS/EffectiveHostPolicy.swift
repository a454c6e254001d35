import Foundation
import TLSAuditSupport

/// The ATS rules one app gives one host (`AppTransportSecurityPolicy.effectivePolicy(for:)`):
/// what an iPhone running the current iOS requires of a connection the app makes there, which
/// entry decided it and why. docs/apple-rules.md section 6.
public struct EffectiveHostPolicy: Sendable, Hashable {
    /// What decided the policy, in Apple's order: an exception entry, then local networking, then
    /// arbitrary loads, else default ATS.
    public enum Source: Sendable, Hashable {
        case exceptionDomain(String)
        case localNetworking
        case arbitraryLoads
        case defaultATS
    }

    /// The host as asked about, lower-cased (brackets of an IPv6 literal removed).
    public var host: String
    /// The lowest TLS version the client accepts (TLS 1.0 when ATS is off: the client offers 1.0 to 1.3).
    public var minimumTLSVersion: TLSVersion
    public var requiresForwardSecrecy: Bool
    /// Plain `http://` is allowed; on HTTPS the app may evaluate server trust itself.
    public var allowsInsecureHTTPLoads: Bool
    /// ATS is off for this host (NSAllowsArbitraryLoads or NSAllowsLocalNetworking): no TLS version
    /// or forward-secrecy minimum, plain HTTP allowed. The default trust evaluation still applies.
    public var arbitraryLoads: Bool
    /// The entry asks for Certificate Transparency (NSRequiresCertificateTransparency = YES).
    public var requiresCertificateTransparency: Bool
    /// The NSPinnedDomains entry that applies, if any (independent of the exception entry).
    public var pins: AppTransportSecurityPolicy.PinnedDomain?
    public var source: Source
    /// Why: the entry or key that applied and how it matched, in a sentence.
    public var reason: String
    /// Why these pins (or why none), in a sentence.
    public var pinReason: String

    /// The NSExceptionDomains key that applied, or nil when none did.
    public var entry: String? {
        if case .exceptionDomain(let domain) = source { return domain }
        return nil
    }
}

extension AppTransportSecurityPolicy {
    /// The rules this app gives `host` (a DNS name as the app's URL holds it, or an IP literal;
    /// no port): the most specific NSExceptionDomains entry that covers it, else
    /// NSAllowsLocalNetworking for local hosts, else NSAllowsArbitraryLoads when in effect, else
    /// default ATS. Pins come from the most specific NSPinnedDomains entry, separately.
    public func effectivePolicy(for host: String) -> EffectiveHostPolicy {
        let host = Self.normalized(host)
        let exception = Self.mostSpecific(exceptionDomains.map { ($0.domain, $0.includesSubdomains, $0) }, for: host)
        // NSPinnedDomains is matched apart, as trustd's parseNSPinnedDomains does: without the host's
        // trailing dot, and ignoring case (NSExceptionDomains keys match as written).
        let pinnedHost = HostText.withoutTrailingDot(host)
        let pinned = Self.mostSpecific(pinnedDomains.map { ($0.domain.lowercased(), $0.includesSubdomains, $0) }, for: pinnedHost)
        var policy = EffectiveHostPolicy(host: host, minimumTLSVersion: .tls1_2, requiresForwardSecrecy: true,
                                         allowsInsecureHTTPLoads: false, arbitraryLoads: false,
                                         requiresCertificateTransparency: false, pins: pinned?.entry, source: .defaultATS,
                                         reason: "", pinReason: "")
        let ignoredArbitraryLoads = allowsArbitraryLoads == true && !arbitraryLoadsInEffect
            ? " (NSAllowsArbitraryLoads is ignored on iOS 10 and later because " + arbitraryLoadsOverriddenBy.joined(separator: " and ")
              + " is present)" : ""
        if let exception {
            let entry = exception.entry
            policy.source = .exceptionDomain(entry.domain)
            policy.minimumTLSVersion = entry.minimumTLSVersion ?? .tls1_2
            policy.requiresForwardSecrecy = entry.requiresForwardSecrecy ?? true
            policy.allowsInsecureHTTPLoads = entry.allowsInsecureHTTPLoads ?? false
            policy.requiresCertificateTransparency = entry.requiresCertificateTransparency ?? false
            policy.reason = "NSExceptionDomains entry '\(entry.domain)' " + exception.how
                + (arbitraryLoadsInEffect ? "; NSAllowsArbitraryLoads does not apply to hosts an entry covers" : "")
        } else if let kind = Self.localKind(host), allowsLocalNetworking == true {
            policy.source = .localNetworking
            policy.turnOffATS()
            policy.reason = "NSAllowsLocalNetworking = YES and the host is \(kind); no NSExceptionDomains entry covers it"
        } else if arbitraryLoadsInEffect {
            policy.source = .arbitraryLoads
            policy.turnOffATS()
            policy.reason = "NSAllowsArbitraryLoads = YES and no NSExceptionDomains entry covers this host"
        } else {
            policy.reason = "default ATS: no NSExceptionDomains entry covers this host" + ignoredArbitraryLoads
                + nearMisses(for: host)
        }
        if let pinned {
            policy.pinReason = "NSPinnedDomains entry '\(pinned.entry.domain)' " + pinned.how
        } else {
            policy.pinReason = pinnedDomains.isEmpty ? "the app pins nothing" : "no NSPinnedDomains entry covers this host"
        }
        return policy
    }

    /// Lower case, IPv6 brackets removed, a Unicode name as its A-label (what the app's URL carries
    /// to the system); a trailing dot is kept (Apple: "example.com." matches only "example.com.").
    static func normalized(_ host: String) -> String {
        var host = DomainNameForm.host(host).lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host
    }

    /// Which local kind `host` is (NSAllowsLocalNetworking's three): an IP address, an unqualified
    /// name (no dot but a trailing one), a `.local` name; nil for any other name.
    static func localKind(_ host: String) -> String? {
        if IPAddress.canonical(host) != nil { return "an IP address" }
        let name = host.hasSuffix(".") ? String(host.dropLast()) : host
        if !name.contains("." as Character) { return "an unqualified name" }
        if name.hasSuffix(".local") { return "a .local name" }
        return nil
    }

    /// The entry that covers `host`, most specific first: for a name, an entry naming it exactly,
    /// else its parent's with NSIncludesSubdomains (one label up: Apple's documented reach); for an
    /// IP literal, an entry naming the same address, else the covering range with the longest prefix.
    static func mostSpecific<Entry>(_ entries: [(key: String, includesSubdomains: Bool, entry: Entry)],
                                    for host: String) -> (entry: Entry, how: String)? {
        if let address = IPAddress.canonical(host) {
            var best: (prefix: Int, entry: Entry, key: String)?
            var ranges = 0
            for candidate in entries {
                switch HostKind(key: candidate.key) {
                case .address(true) where IPAddress.canonical(candidate.key) == address:
                    return (candidate.entry, "names this address exactly")
                case .range(true) where IPAddress.ip(address, within: candidate.key):
                    ranges += 1
                    let prefix = Int(candidate.key.split(separator: "/").last!)!
                    if best == nil || prefix > best!.prefix { best = (prefix, candidate.entry, candidate.key) }
                default:
                    continue
                }
            }
            guard let best else { return nil }
            return (best.entry, "contains this address" + (ranges > 1 ? " (the narrowest of the \(ranges) ranges that do)" : ""))
        }
        if let exact = entries.first(where: { $0.key == host }) {
            let parents = entries.filter { $0.includesSubdomains && Self.isChild(host, of: $0.key) }.map { "'\($0.key)'" }
            return (exact.entry, "names this host exactly" + (parents.isEmpty ? "" :
                ", and an exact entry comes before \(parents.joined(separator: ", "))'s NSIncludesSubdomains"))
        }
        if let parent = entries.first(where: { $0.includesSubdomains && Self.isChild(host, of: $0.key) }) {
            return (parent.entry, "covers this host through NSIncludesSubdomains (one label below it); no entry names the host exactly")
        }
        return nil
    }

    /// `host` is `key` with exactly one more label in front (Apple's NSIncludesSubdomains reach).
    public static func isChild(_ host: String, of key: String) -> Bool {
        guard HostKind(key: key) == .name, host.hasSuffix("." + key) else { return false }
        let label = host.dropLast(key.count + 1)
        return !label.isEmpty && !label.contains("." as Character)
    }

    /// Entries that look as if they were meant for `host` but do not cover it, for the reason.
    private func nearMisses(for host: String) -> String {
        var notes: [String] = []
        for entry in exceptionDomains where HostKind(key: entry.domain) == .name && entry.domain != host {
            if host.hasSuffix("." + entry.domain) {
                notes.append(entry.includesSubdomains
                             ? "'\(entry.domain)' reaches one label below it only (Apple's documented NSIncludesSubdomains)"
                             : "'\(entry.domain)' does not include subdomains")
            } else if entry.domain.lowercased() == host || entry.domain.trimmingCharacters(in: ["."]) == host.trimmingCharacters(in: ["."]) {
                notes.append("'\(entry.domain)' differs from the host in case or a trailing dot, and Apple matches it as written")
            }
        }
        return notes.isEmpty ? "" : "; " + notes.joined(separator: "; ")
    }
}

extension EffectiveHostPolicy {
    mutating func turnOffATS() {
        arbitraryLoads = true
        allowsInsecureHTTPLoads = true
        requiresForwardSecrecy = false
        minimumTLSVersion = .tls1_0
    }
}
