/// The ICANN section of the Public Suffix List, for refusing wildcard names that would cover a
/// whole public suffix (`*.co.uk`). Rules are matched on ASCII labels; suffixes written in Unicode
/// in the list are not matched against punycode (`xn--`) names.
public enum PublicSuffixList {
    private struct Rules: Sendable {
        var exact: Set<String> = []
        var wildcards: Set<String> = []   // "ck" for "*.ck"
        var exceptions: Set<String> = []  // "www.ck" for "!www.ck"
    }

    private static let rules: Rules = {
        var rules = Rules()
        // Parsed once per process, with the standard library alone: Foundation's trimming took 17 ms
        // of a 200-target scan's CPU (the lines carry no spaces; a few have capitals).
        for line in PublicSuffixData.icannRules.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            let rule = trimmed.utf8.contains { (65...90).contains($0) } ? trimmed.lowercased() : String(trimmed)
            if rule.hasPrefix("!") {
                rules.exceptions.insert(String(rule.dropFirst()))
            } else if rule.hasPrefix("*.") {
                rules.wildcards.insert(String(rule.dropFirst(2)))
            } else if !rule.isEmpty {
                rules.exact.insert(rule)
            }
        }
        return rules
    }()

    /// True when `domain` itself is a public suffix (`com`, `co.uk`, `anything.ck`), so no
    /// certificate may cover all of its subdomains with one wildcard.
    public static func isPublicSuffix(_ domain: String) -> Bool {
        let name = HostnameMatcher.normalize(domain)
        guard !name.isEmpty else { return false }
        if rules.exceptions.contains(name) { return false }
        if rules.exact.contains(name) { return true }
        if let dot = name.firstIndex(of: "."), rules.wildcards.contains(String(name[name.index(after: dot)...])) { return true }
        // The implicit "*" rule: every top-level label is a public suffix.
        return !name.contains(".")
    }
}
