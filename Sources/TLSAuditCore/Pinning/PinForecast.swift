public import Foundation

/// Judges a certificate seen in a Certificate Transparency log before any server presents it:
/// would the pinned clients of a name it covers accept it? The same pin check as a scan's
/// (`AddressAssessment.pinEvaluation`, AFNetworking's order and NSPinnedDomains), on the chain
/// as logged, at the moment the certificate becomes valid.
public enum PinForecast {
    /// A name whose clients pin, and what they pin.
    public struct PinnedName: Hashable, Sendable {
        /// The host (`api.example.com`) or, with `includeSubdomains`, the domain.
        public var domain: String
        /// NSIncludesSubdomains (or a target's `pins:` for a wildcard host): the pins hold for every name under `domain` too.
        public var includeSubdomains: Bool
        public var pins: PinPolicy
        /// Who pins: the target's name, or the app's bundle and its rule (`app com.example.shop, NSPinnedDomains example.com`).
        public var pinnedBy: String

        public init(domain: String, includeSubdomains: Bool = false, pins: PinPolicy, pinnedBy: String) {
            self.domain = HostnameMatcher.normalize(domain)
            self.includeSubdomains = includeSubdomains
            self.pins = pins
            self.pinnedBy = pinnedBy
        }

        /// The host the pinned clients would meet the certificate as, when the certificate
        /// (its DNS SANs, `names`) serves a name they pin: `domain` itself when it names it (a
        /// wildcard covers one label); with `includeSubdomains`, the first name under it (a
        /// wildcard's base name standing for the names it covers). Nil when it serves none.
        public func reaches(_ names: [String]) -> String? {
            let valid = names.map(HostnameMatcher.normalize).filter { HostnameMatcher.isValidDNSName($0) }
            if valid.contains(where: { HostnameMatcher.dnsNameMatches(pattern: $0, hostname: domain) }) { return domain }
            guard includeSubdomains else { return nil }
            for name in valid {
                let bare = name.hasPrefix("*.") ? String(name.dropFirst(2)) : name
                if bare == domain || bare.hasSuffix("." + domain) { return bare }
            }
            return nil
        }
    }

    /// The pin check of a logged certificate for one pinned name: `presented` is the chain as
    /// logged (the certificate first), `building` the path built from it, `host` the name reached.
    /// Judged when the certificate becomes valid (or now, if later), with no trust error: a log
    /// takes only chains to roots it trusts, and a scan judges trust when the server presents it.
    public static func judge(_ pinned: PinnedName, host: String, presented: [CertificateSummary], building: PathBuildingResult,
                             now: Date, buildWithPinnedAnchors: (([Data]) -> PathBuildingResult?)?) -> PinEvaluation {
        let validFrom = presented.first.map { $0.notBefore.addingTimeInterval(1) } ?? now
        let context = TrustContext(hostname: host, time: max(now, validFrom), publicTrust: true)
        return AddressAssessment.pinEvaluation(pinned.pins, presented: presented, path: building.path, trustErrors: [],
                                               context: context, buildWithPinnedAnchors: buildWithPinnedAnchors)
    }
}
