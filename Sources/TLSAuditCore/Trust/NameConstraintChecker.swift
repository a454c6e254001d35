import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// RFC 5280 name constraints for the names TLS uses: dNSName and iPAddress subtrees, applied to
/// subjectAltNames only (never to the CN, which OpenSSL also checks when no DNS SAN exists).
///
/// DNS subtrees are indexed by name, so checking a name costs its number of labels whatever the
/// number of subtrees (a hostile CA may carry thousands). IP ranges are compared pairwise, within
/// `RecordBudget.nameConstraintComparisons`.
struct NameConstraintChecker {
    /// What one certificate's names did wrong against one CA's constraints.
    struct Violations {
        var outsidePermittedDNS: [String] = []
        var excludedDNS: [(name: String, subtree: String)] = []
        var outsidePermittedIP: [String] = []
        var excludedIP: [(address: String, range: String)] = []
        /// Set when the names and ranges were too many to compare.
        var tooMany: (addresses: Int, ranges: Int)?

        var isEmpty: Bool {
            outsidePermittedDNS.isEmpty && excludedDNS.isEmpty && outsidePermittedIP.isEmpty && excludedIP.isEmpty && tooMany == nil
        }
    }

    let constraints: NameConstraints
    /// `example.com`: the name and its subdomains. Normalized form to the subtree as written.
    private let permittedWithSelf: [String: String]
    /// `.example.com`, kept as `example.com`: its subdomains only.
    private let permittedBelow: [String: String]
    private let excludedWithSelf: [String: String]
    private let excludedBelow: [String: String]
    /// An empty subtree (as written) covers every name.
    private let permittedAnyName: String?
    private let excludedAnyName: String?
    /// The parent of each excluded subtree (`example.com` for `secret.example.com`): a wildcard
    /// `*.example.com` reaches into it.
    private let excludedParents: [String: String]

    init(_ constraints: NameConstraints) {
        self.constraints = constraints
        func index(_ subtrees: [String]) -> (withSelf: [String: String], below: [String: String], any: String?) {
            var withSelf: [String: String] = [:], below: [String: String] = [:], any: String?
            for subtree in subtrees {
                let normalized = HostnameMatcher.normalize(subtree)
                if normalized.isEmpty { any = any ?? subtree } else if normalized.hasPrefix(".") {
                    below[String(normalized.dropFirst()), default: subtree] = subtree
                } else {
                    withSelf[normalized, default: subtree] = subtree
                }
            }
            return (withSelf, below, any)
        }
        (permittedWithSelf, permittedBelow, permittedAnyName) = index(constraints.permittedDNS)
        (excludedWithSelf, excludedBelow, excludedAnyName) = index(constraints.excludedDNS)
        var parents: [String: String] = [:]
        // Only a subtree that includes its own name (`secret.example.com`, not `.secret.example.com`)
        // is reached by a wildcard one label above it.
        for subtree in constraints.excludedDNS where !HostnameMatcher.normalize(subtree).hasPrefix(".") {
            let trimmed = HostnameMatcher.normalize(subtree).trimmingCharacters(in: CharacterSet(charactersIn: "."))
            guard let dot = trimmed.firstIndex(of: ".") else { continue }
            parents[String(trimmed[trimmed.index(after: dot)...]), default: subtree] = subtree
        }
        excludedParents = parents
    }

    /// The names of `certificate` that the constraints forbid.
    func violations(in certificate: CertificateSummary) -> Violations {
        var found = Violations()
        let names = certificate.subjectAlternativeNames
        for name in names.dns {
            // Lower case only: a SAN with a trailing dot (`www.example.com.`) is inside no subtree
            // written without one, permitted or excluded, as in trustd (`SecDNSNameConstraintsMatch`).
            let normalized = name.lowercased()
            // A name that is not a valid DNS name is permitted by no subtree (webpki, Go).
            if !constraints.permittedDNS.isEmpty, !HostnameMatcher.isValidDNSName(name)
                || (permittedAnyName == nil && Self.subtree(covering: normalized, withSelf: permittedWithSelf, below: permittedBelow) == nil) {
                found.outsidePermittedDNS.append(name)
            }
            if let subtree = excludedSubtree(covering: normalized) {
                found.excludedDNS.append((name, subtree))
            }
        }
        let ranges = constraints.permittedIP.count + constraints.excludedIP.count
        if names.ip.count * ranges > RecordBudget.nameConstraintComparisons {
            found.tooMany = (names.ip.count, ranges)
            return found
        }
        for address in names.ip {
            let sameFamily = { (cidr: String) in cidr.contains(":" as Character) == address.contains(":" as Character) }
            // Any permitted IP range constrains every address: one of the other family matches none.
            let permitted = constraints.permittedIP
            if !permitted.isEmpty, !permitted.contains(where: { IPAddress.ip(address, within: $0) }) {
                found.outsidePermittedIP.append(address)
            }
            if let excluded = constraints.excludedIP.filter(sameFamily).first(where: { IPAddress.ip(address, within: $0) }) {
                found.excludedIP.append((address, excluded))
            }
        }
        return found
    }

    /// The excluded subtree that covers `name`, or that a wildcard `name` reaches into.
    private func excludedSubtree(covering name: String) -> String? {
        if let excludedAnyName { return excludedAnyName }
        if let subtree = Self.subtree(covering: name, withSelf: excludedWithSelf, below: excludedBelow) { return subtree }
        if name.hasPrefix("*.") { return excludedParents[String(name.dropFirst(2))] }
        return nil
    }

    /// The subtree covering the normalized `name`: the name itself in `withSelf`, or any of its
    /// parent domains in `withSelf` or `below`.
    private static func subtree(covering name: String, withSelf: [String: String], below: [String: String]) -> String? {
        if let subtree = withSelf[name] { return subtree }
        var rest = name[...]
        while let dot = rest.firstIndex(of: ".") {
            rest = rest[rest.index(after: dot)...]
            let parent = String(rest)
            if let subtree = withSelf[parent] ?? below[parent] { return subtree }
        }
        return nil
    }

    /// One sentence for a finding, naming a few names and subtrees and counting the rest.
    func describe(_ found: Violations) -> String {
        var parts: [String] = []
        if !found.outsidePermittedDNS.isEmpty {
            parts.append("\(Self.count(found.outsidePermittedDNS.count, "name")) outside the permitted DNS subtrees (\(RecordBudget.list(constraints.permittedDNS))): \(RecordBudget.list(found.outsidePermittedDNS))")
        }
        if !found.excludedDNS.isEmpty {
            parts.append("\(Self.count(found.excludedDNS.count, "name")) inside excluded DNS subtrees: \(RecordBudget.list(found.excludedDNS.map { "\($0.name) (in \($0.subtree))" }))")
        }
        if !found.outsidePermittedIP.isEmpty {
            parts.append("\(Self.count(found.outsidePermittedIP.count, "address", "addresses")) outside the permitted IP ranges (\(RecordBudget.list(constraints.permittedIP))): \(RecordBudget.list(found.outsidePermittedIP))")
        }
        if !found.excludedIP.isEmpty {
            parts.append("\(Self.count(found.excludedIP.count, "address", "addresses")) inside excluded IP ranges: \(RecordBudget.list(found.excludedIP.map { "\($0.address) (in \($0.range))" }))")
        }
        if let tooMany = found.tooMany {
            parts.append("\(tooMany.addresses.grouped) IP addresses against \(tooMany.ranges.grouped) IP ranges are too many to check (more than \(RecordBudget.nameConstraintComparisons.grouped) comparisons; OpenSSL refuses such a chain too)")
        }
        return parts.joined(separator: "; ")
    }

    private static func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        number == 1 ? "1 \(singular) is" : "\(number.grouped) \(plural ?? singular + "s") are"
    }
}
