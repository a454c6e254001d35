public import Foundation
public import TLSAuditCore

/// One entry of Apple's NSPinnedDomains, read from an Info.plist.
public struct PinnedDomain: Sendable, Hashable {
    public var domain: String
    /// NSIncludesSubdomains: the pins also apply to every subdomain.
    public var includesSubdomains: Bool
    /// NSPinnedLeafIdentities' SPKI-SHA256-BASE64 values.
    public var leafIdentities: [String]
    /// NSPinnedCAIdentities' SPKI-SHA256-BASE64 values.
    public var caIdentities: [String]

    /// Apple's matching: the domain itself, or with NSIncludesSubdomains a subdomain one label
    /// below it (`AppTransportSecurityPolicy`'s rule, docs/apple-rules.md section 6).
    public func covers(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
        let domain = domain.lowercased()
        return host == domain || (includesSubdomains && AppTransportSecurityPolicy.isChild(host, of: domain))
    }

    public var policy: PinPolicy { PinPolicy(leafIdentities: leafIdentities, caIdentities: caIdentities) }
}

/// Reads NSPinnedDomains from an XML (or binary) property list: a whole Info.plist or just the
/// NSAppTransportSecurity dictionary, with Apple's meaning and Apple's refusals.
public enum PinnedDomainsImport {
    public struct Result: Sendable {
        public var domains: [PinnedDomain]
        /// Advice (a single pin without a backup).
        public var warnings: [String]
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var problems: [String]
        public var description: String { problems.joined(separator: "\n") }
    }

    public static func read(path: String) throws(Failure) -> Result {
        guard let data = FileManager.default.contents(atPath: path) else { throw Failure(problems: ["\(path): cannot read the file"]) }
        return try parse(data, name: path)
    }

    public static func parse(_ data: Data, name: String) throws(Failure) -> Result {
        let root: Any
        do {
            root = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            throw Failure(problems: ["\(name): not a property list: \(error.localizedDescription)"])
        }
        guard let dictionary = root as? [String: Any] else { throw Failure(problems: ["\(name): the property list is not a dictionary"]) }
        let ats = dictionary["NSAppTransportSecurity"] as? [String: Any] ?? dictionary
        guard let pinned = ats["NSPinnedDomains"] else {
            throw Failure(problems: ["\(name): no NSPinnedDomains (looked in NSAppTransportSecurity and at the top level)"])
        }
        guard let domains = pinned as? [String: Any] else { throw Failure(problems: ["\(name): NSPinnedDomains is not a dictionary"]) }
        var problems: [String] = []
        var warnings: [String] = []
        var result: [PinnedDomain] = []
        for domain in domains.keys.sorted() {
            guard let entry = domains[domain] as? [String: Any] else {
                problems.append("\(name): NSPinnedDomains/\(domain) is not a dictionary")
                continue
            }
            let known: Set = ["NSIncludesSubdomains", "NSPinnedLeafIdentities", "NSPinnedCAIdentities"]
            for key in entry.keys.sorted() where !known.contains(key) {
                problems.append("\(name): NSPinnedDomains/\(domain): unknown key \(key) (expected \(known.sorted().joined(separator: ", ")))")
            }
            let leaf = identities(entry["NSPinnedLeafIdentities"], key: "NSPinnedLeafIdentities", domain: domain, name: name, problems: &problems)
            let ca = identities(entry["NSPinnedCAIdentities"], key: "NSPinnedCAIdentities", domain: domain, name: name, problems: &problems)
            if leaf == nil && ca == nil {
                problems.append("\(name): NSPinnedDomains/\(domain) has neither NSPinnedLeafIdentities nor NSPinnedCAIdentities")
            }
            let includes = entry["NSIncludesSubdomains"]
            if includes != nil && !(includes is Bool) {
                problems.append("\(name): NSPinnedDomains/\(domain)/NSIncludesSubdomains must be a boolean")
            }
            let pinned = PinnedDomain(domain: domain, includesSubdomains: includes as? Bool ?? false,
                                      leafIdentities: leaf ?? [], caIdentities: ca ?? [])
            for warning in pinned.policy.warnings { warnings.append("\(domain): \(warning)") }
            result.append(pinned)
        }
        guard problems.isEmpty else { throw Failure(problems: problems) }
        return Result(domains: result, warnings: warnings)
    }

    /// An identity array: each element a dictionary with SPKI-SHA256-BASE64. An empty array is an error.
    private static func identities(_ value: Any?, key: String, domain: String, name: String, problems: inout [String]) -> [String]? {
        guard let value else { return nil }
        let place = "\(name): NSPinnedDomains/\(domain)/\(key)"
        guard let array = value as? [Any] else {
            problems.append("\(place) is not an array")
            return nil
        }
        guard !array.isEmpty else {
            problems.append("\(place) is empty: Apple treats an empty identity array as a configuration error")
            return nil
        }
        var values: [String] = []
        for (index, element) in array.enumerated() {
            guard let identity = element as? [String: Any], let pin = identity["SPKI-SHA256-BASE64"] as? String else {
                problems.append("\(place)[\(index)] must be a dictionary with SPKI-SHA256-BASE64")
                continue
            }
            guard case .spki(let value)? = PinValue.parse(pin) else {
                problems.append("\(place)[\(index)]: '\(pin)' is not a base64 SHA-256 (44 characters)")
                continue
            }
            values.append(value)
        }
        return values
    }

    /// A configuration fragment: one group per pinned domain, with the domain (and every given
    /// host it covers) as targets. Hosts no domain covers are returned apart.
    public static func yaml(for domains: [PinnedDomain], hosts: [String], source: String) -> (yaml: String, uncovered: [String]) {
        var out = "# Imported from \(source) by `tlsaudit pins import`: NSPinnedDomains as tlsaudit groups.\n"
        out += "# Pinning adds to normal trust: a target passes when its chain is trusted and the pins match.\n"
        out += "groups:\n"
        var uncovered = hosts
        for domain in domains {
            // The most specific pinned domain wins (Apple applies the longest match).
            let mine = hosts.filter { host in
                domain.covers(host) && !domains.contains { $0 != domain && $0.covers(host) && $0.domain.count > domain.domain.count }
            }
            uncovered.removeAll { mine.contains($0) }
            out += "  - name: \(quoted("pinned:" + domain.domain))\n"
            out += "    # NSIncludesSubdomains: \(domain.includesSubdomains)"
            out += domain.includesSubdomains ? " (add the names one label below it to this group's targets)\n" : " (the exact name only)\n"
            out += "    pins:\n"
            if !domain.leafIdentities.isEmpty {
                out += "      leaf_identities:\n" + domain.leafIdentities.map { "        - \(quoted($0))\n" }.joined()
            }
            if !domain.caIdentities.isEmpty {
                out += "      ca_identities:\n" + domain.caIdentities.map { "        - \(quoted($0))\n" }.joined()
            }
            out += "    targets:\n"
            for host in [domain.domain] + mine.filter({ $0 != domain.domain }) { out += "      - \(quoted(host))\n" }
        }
        return (out, uncovered)
    }

    private static func quoted(_ text: String) -> String { "\"\(text)\"" }
}
