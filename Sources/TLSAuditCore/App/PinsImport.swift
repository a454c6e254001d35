/// `tlsaudit pins import`: an app's NSPinnedDomains as service groups with pins. The plist is read
/// by the app's ATS model (`AppTransportSecurityPolicy`, with its diagnostics), and each host given
/// is placed under the entry Apple applies to it (`effectivePolicy(for:)`: the most specific entry,
/// NSIncludesSubdomains reaching one label below its domain).
public enum PinsImport {
    /// What a property list pins, and what stands in the way.
    public struct Reading: Sendable {
        /// The model read from the plist: its `pinnedDomains` are the entries to import.
        public var policy: AppTransportSecurityPolicy
        /// What Apple would not read as written in NSPinnedDomains (the import fails on any).
        public var errors: [AppTransportSecurityPolicy.Diagnostic]
        /// Advice on NSPinnedDomains (a single pin without a backup, a key no host matches).
        public var warnings: [AppTransportSecurityPolicy.Diagnostic]
    }

    /// The name the NSAppTransportSecurity dictionary's diagnostics start with.
    static let keyPath = "NSAppTransportSecurity"

    /// Reads NSPinnedDomains from a property list's root: a whole Info.plist (its
    /// NSAppTransportSecurity) or a bare NSAppTransportSecurity dictionary. Only what concerns
    /// NSPinnedDomains is reported; the rest of the ATS dictionary is not this import's business.
    public static func read(_ root: [String: PlistValue]) -> Reading {
        let ats = root[keyPath] ?? .dictionary(root)
        let policy = AppTransportSecurityPolicy(ats, keyPath: keyPath)
        let pinned = keyPath + ".NSPinnedDomains"
        let relevant = policy.diagnostics.filter { $0.keyPath == keyPath || $0.keyPath == pinned || $0.keyPath.hasPrefix(pinned + ".") }
        var errors = relevant.filter { $0.severity == .error }
        if case .dictionary(let dictionary) = ats, dictionary["NSPinnedDomains"] == nil, errors.isEmpty {
            errors.append(.init(keyPath, .error, "no NSPinnedDomains (looked in NSAppTransportSecurity and at the top level)"))
        }
        return Reading(policy: policy, errors: errors, warnings: relevant.filter { $0.severity == .warning })
    }

    /// A configuration fragment: one group per pinned domain, with the domain (and every given
    /// host whose entry it is) as targets. Hosts no entry covers are returned apart.
    public static func yaml(_ policy: AppTransportSecurityPolicy, hosts: [String], source: String) -> (yaml: String, uncovered: [String]) {
        var out = "# Imported from \(source) by `tlsaudit pins import`: NSPinnedDomains as tlsaudit groups.\n"
        out += "# Pinning adds to normal trust: a target passes when its chain is trusted and the pins match.\n"
        out += "groups:\n"
        let entries = hosts.map { policy.effectivePolicy(for: $0).pins?.domain }
        var uncovered = hosts
        for domain in policy.pinnedDomains {
            let mine = zip(hosts, entries).filter { $0.1 == domain.domain }.map { $0.0 }
            uncovered.removeAll { mine.contains($0) }
            out += "  - name: \(AppImport.quotedYAML("pinned:" + domain.domain))\n"
            out += "    # NSIncludesSubdomains: \(domain.includesSubdomains)"
            out += domain.includesSubdomains ? " (add the names one label below it to this group's targets)\n" : " (the exact name only)\n"
            out += "    pins:\n"
            out += "      domain: \(AppImport.quotedYAML(domain.domain))\n"
            if domain.includesSubdomains { out += "      include_subdomains: true\n" }
            if !domain.leafIdentities.isEmpty {
                out += "      leaf_identities:\n" + domain.leafIdentities.map { "        - \(AppImport.quotedYAML($0))\n" }.joined()
            }
            if !domain.caIdentities.isEmpty {
                out += "      ca_identities:\n" + domain.caIdentities.map { "        - \(AppImport.quotedYAML($0))\n" }.joined()
            }
            out += "    targets:\n"
            for host in [domain.domain] + mine.filter({ $0 != domain.domain }) { out += "      - \(AppImport.quotedYAML(host))\n" }
        }
        return (out, uncovered)
    }
}
