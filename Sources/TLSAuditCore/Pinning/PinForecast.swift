public import Foundation

/// Judges a certificate seen in a Certificate Transparency log before any server presents it:
/// would the pinned clients of a name it covers accept it? The same pin check as a scan's
/// (`AddressAssessment.pinEvaluation`, AFNetworking's order and NSPinnedDomains), on the chain
/// as logged, at the moment the certificate becomes valid.
public enum PinForecast {
    /// A name whose clients pin, and what they pin (the name kept as clients compare it: A-labels, lower case).
    public struct PinnedName: Hashable, Sendable {
        /// The host (`api.example.com`) or, with `includeSubdomains`, the domain.
        public var domain: String
        /// NSIncludesSubdomains: the pins hold for the names one label below `domain` too (Apple's reach).
        public var includeSubdomains: Bool
        public var pins: PinPolicy
        /// Who pins, in words: `target api`, `app com.example.shop (AFSecurityPolicy)`.
        public var pinnedBy: String
        /// The configured target whose pins these are (its key), and its port.
        public var target: String
        public var port: Int

        public init(domain: String, includeSubdomains: Bool = false, pins: PinPolicy, pinnedBy: String, target: String = "", port: Int = 443) {
            self.domain = DomainNameForm.ascii(domain)
            self.includeSubdomains = includeSubdomains
            self.pins = pins
            self.pinnedBy = pinnedBy
            self.target = target
            self.port = port
        }

        /// The host the pinned clients would meet the certificate as, when the certificate
        /// (its DNS SANs, `names`) serves a name they pin: `domain` itself when it names it (a
        /// wildcard covers one label); with `includeSubdomains`, the first name under it (a
        /// wildcard's base name standing for the names it covers). Nil when it serves none.
        public func reaches(_ names: [String]) -> String? {
            PinForecast.reach(domain, subdomains: includeSubdomains ? .oneLabel : .none, names: names)
        }
    }

    /// How far below a domain a rule reaches.
    public enum SubdomainReach: Sendable, Hashable {
        /// The domain itself.
        case none
        /// The names one label below it (Apple's NSIncludesSubdomains).
        case oneLabel
        /// Every name under it (a `ct: watch` entry, as CAA covers a domain's tree).
        case anyDepth
    }

    /// The host a certificate serving `names` (DNS SANs) is met as under `domain`: `domain` itself
    /// when a name covers it (a wildcard covers one label); else, as far as `subdomains` reaches,
    /// the first name under it (a wildcard as it is: `*.domain` stands for the names one label below). Nil when none.
    public static func reach(_ domain: String, subdomains: SubdomainReach, names: [String]) -> String? {
        let valid = names.map(HostnameMatcher.normalize).filter { HostnameMatcher.isValidDNSName($0) }
        if valid.contains(where: { HostnameMatcher.dnsNameMatches(pattern: $0, hostname: domain) }) { return domain }
        guard subdomains != .none else { return nil }
        for name in valid where name.hasSuffix("." + domain) {
            // `*.domain` covers the names one label below: the rule meets it as any of them.
            let labelsBelow = name.dropLast(domain.count + 1).split(separator: ".", omittingEmptySubsequences: false)
            if subdomains == .anyDepth || labelsBelow.count == 1 { return name }
        }
        return nil
    }

    /// The names pinned by `targets`: each target's `pins:` for the name it connects as, and the
    /// AFSecurityPolicy of the app whose rules judge it (an app's NSPinnedDomains become `pins:`
    /// through `pins import`). Once per name and policy.
    public static func pinnedNames(_ targets: [ScanTarget]) -> [PinnedName] {
        var names: [PinnedName] = []
        var seen = Set<PinnedName>()
        for target in targets {
            let host = target.sni ?? target.host
            var candidates: [PinnedName] = []
            if let pins = target.pins, pins.pinsSomething {
                // Pins from an NSPinnedDomains entry (`domain:`) hold for its key and, with NSIncludesSubdomains,
                // the names one label below: when the entry covers the target's host, the entry is the pinned name.
                let scope = pins.pinnedDomain.map { PinnedName(domain: $0.domain, includeSubdomains: $0.includesSubdomains, pins: pins,
                                                               pinnedBy: "target \(target.original)", target: target.original, port: target.port) }
                if let scope, scope.reaches([host]) != nil {
                    // One pinned name per entry, however many of its targets carry the pins.
                    if !names.contains(where: { $0.domain == scope.domain && $0.includeSubdomains == scope.includeSubdomains && $0.pins == pins }) {
                        candidates.append(scope)
                    }
                } else {
                    candidates.append(PinnedName(domain: host, pins: pins, pinnedBy: "target \(target.original)", target: target.original,
                                                 port: target.port))
                }
            }
            if let app = target.app, let pins = app.afnetworking, pins.pinsSomething {
                candidates.append(PinnedName(domain: host, pins: pins, pinnedBy: "app \(app.bundle) (AFSecurityPolicy)",
                                             target: target.original, port: target.port))
            }
            for name in candidates where seen.insert(name).inserted { names.append(name) }
        }
        return names
    }

    /// What a follower's prefilter looks for (`CTLogFollower.needles`) so that no certificate a
    /// pinned or watched name would meet is passed over: each name as ASCII (IDNs as A-labels),
    /// lowercase; for a name of three labels or more, its parent domain, which every name a rule
    /// reaches holds (the wildcard over the name itself, `*.parent`, too; never a bare public
    /// suffix's one label). Each needle once.
    public static func needles(_ names: [PinnedName], watched: [WatchedDomain] = []) -> [[UInt8]] {
        var needles: [String] = []
        for domain in names.map(\.domain) + watched.map(\.domain) {
            let labels = domain.split(separator: ".")
            let needle = labels.count >= 3 ? labels.dropFirst().joined(separator: ".") : domain
            if !needles.contains(needle) { needles.append(needle) }
        }
        return needles.map { Array($0.utf8) }
    }

    /// The pin check of a logged certificate for one pinned name: `presented` is the chain as
    /// logged (the certificate first), `building` the path built from it, `host` the name reached.
    /// Judged when the certificate becomes valid (or now, if later), with no trust error: a log
    /// takes only chains to roots it trusts, and a scan judges trust when the server presents it.
    public static func judge(_ pinned: PinnedName, host: String, presented: [CertificateSummary], building: PathBuildingResult,
                             now: Date, buildWithPinnedAnchors: (([Data]) -> PathBuildingResult?)?) -> PinEvaluation {
        let validFrom = presented.first.map { $0.notBefore.addingTimeInterval(1) } ?? now
        // A wildcard reached is judged as one name it covers (AFNetworking's validatesDomainName checks the name).
        let hostname = host.hasPrefix("*.") ? "wildcard" + host.dropFirst() : host
        let context = TrustContext(hostname: hostname, time: max(now, validFrom), publicTrust: true)
        return AddressAssessment.pinEvaluation(pinned.pins, presented: presented, path: building.path, trustErrors: [],
                                               context: context, buildWithPinnedAnchors: buildWithPinnedAnchors)
    }
}
