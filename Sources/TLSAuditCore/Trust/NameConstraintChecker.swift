import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// RFC 5280 name constraints for the names TLS uses: dNSName and iPAddress subtrees, applied to
/// subjectAltNames only (never to the CN, which OpenSSL also checks when no DNS SAN exists).
enum NameConstraintChecker {
    /// The names of `certificate` that `constraints` forbid, with the reason.
    static func violations(of constraints: NameConstraints, in certificate: CertificateSummary) -> [String] {
        var problems: [String] = []
        let names = certificate.subjectAlternativeNames
        for name in names.dns {
            if !constraints.permittedDNS.isEmpty, !constraints.permittedDNS.contains(where: { dnsName(name, within: $0) }) {
                problems.append("\(name) is outside the permitted DNS subtrees (\(constraints.permittedDNS.joined(separator: ", ")))")
            }
            if let excluded = constraints.excludedDNS.first(where: { dnsName(name, within: $0) || wildcard(name, covers: $0) }) {
                problems.append("\(name) is inside the excluded DNS subtree \(excluded)")
            }
        }
        for address in names.ip {
            let sameFamily = { (cidr: String) in cidr.contains(":") == address.contains(":") }
            // Any permitted IP range constrains every address: one of the other family matches none.
            let permitted = constraints.permittedIP
            if !permitted.isEmpty, !permitted.contains(where: { HostnameMatcher.ip(address, within: $0) }) {
                problems.append("\(address) is outside the permitted IP ranges (\(permitted.joined(separator: ", ")))")
            }
            if let excluded = constraints.excludedIP.filter(sameFamily).first(where: { HostnameMatcher.ip(address, within: $0) }) {
                problems.append("\(address) is inside the excluded IP range \(excluded)")
            }
        }
        return problems
    }

    /// `example.com` covers itself and its subdomains; `.example.com` only its subdomains.
    static func dnsName(_ name: String, within constraint: String) -> Bool {
        let name = HostnameMatcher.normalize(name)
        let constraint = HostnameMatcher.normalize(constraint)
        guard !constraint.isEmpty else { return true }
        if constraint.hasPrefix(".") { return name.hasSuffix(constraint) }
        return name == constraint || name.hasSuffix("." + constraint)
    }

    /// A wildcard SAN reaches into an excluded subtree below its base (`*.example.com` can
    /// stand for `secret.example.com`).
    static func wildcard(_ name: String, covers constraint: String) -> Bool {
        let name = HostnameMatcher.normalize(name)
        guard name.hasPrefix("*.") else { return false }
        let base = String(name.dropFirst(2))
        let constraint = HostnameMatcher.normalize(constraint).trimmingCharacters(in: CharacterSet(charactersIn: "."))
        guard let dot = constraint.firstIndex(of: ".") else { return false }
        return String(constraint[constraint.index(after: dot)...]) == base
    }
}
