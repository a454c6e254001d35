import TLSAuditSupport

/// The Public Suffix List, for refusing wildcard names that would cover a whole public suffix
/// (`*.co.uk`): the ICANN section, which clients apply when matching names, and the private section
/// (`s3.amazonaws.com`), which the CA/Browser Forum adds for issuing (BR 3.2.2.6; a lint only).
/// Rules are matched on ASCII labels; suffixes written in Unicode in the list are not matched
/// against punycode (`xn--`) names, and a Unicode name matches a rule only byte for byte (the list
/// is NFC; a dNSName is ASCII by definition).
public enum PublicSuffixList {
    /// One section's rules, searched in place (`PublicSuffixData`).
    struct Rules: Sendable {
        /// The rules' text, one per line, sorted by their bytes: the string literal itself, searched
        /// by halves of its bytes, each step from the middle back to its line's start. (Copying the
        /// text and indexing its lines cost the first look-up of each process 0.9M instructions, 1.3%
        /// of a one-target scan; parsing the rules into sets, earlier, 6 ms.)
        private let text: String

        init(_ rules: String) { text = rules }

        /// Whether `rule` is one of the lines, exactly.
        func contains(_ rule: String) -> Bool {
            var rule = rule
            var text = text
            return rule.withUTF8 { wanted in text.withUTF8 { Self.search($0, for: wanted) } }
        }

        private static func search(_ text: UnsafeBufferPointer<UInt8>, for wanted: UnsafeBufferPointer<UInt8>) -> Bool {
            let newline = UInt8(ascii: "\n")
            // [low, high) holds whole lines: low starts one, high ends one (at a newline or the end).
            var low = 0, high = text.count
            while low < high {
                var start = (low + high) / 2
                while start > low, text[start - 1] != newline { start -= 1 }
                var end = start
                while end < high, text[end] != newline { end += 1 }
                switch UnsafeBufferPointer(rebasing: text[start..<end]).byteOrder(wanted) {
                case 0: return true
                case ..<0: low = end + 1
                default: high = start
                }
            }
            return false
        }

        /// The section's answer for a normalized name: true (a suffix), false (an exception) or nil (no rule).
        func isSuffix(_ name: String) -> Bool? {
            if contains("!" + name) { return false }
            if contains(name) { return true }
            if let dot = name.firstIndex(of: "."), contains("*." + String(name[name.index(after: dot)...])) { return true }
            return nil
        }
    }

    /// Each section read at its first use, once per process.
    static let icann = Rules(PublicSuffixData.icannRules)
    static let privateDomains = Rules(PublicSuffixData.privateRules)

    /// True when `domain` itself is a public suffix (`com`, `co.uk`, `anything.ck`; with
    /// `includingPrivate`, also `s3.amazonaws.com`), so no certificate may cover all of its
    /// subdomains with one wildcard.
    public static func isPublicSuffix(_ domain: String, includingPrivate: Bool = false) -> Bool {
        let name = HostnameMatcher.normalize(domain)
        guard !name.isEmpty else { return false }
        if let answer = icann.isSuffix(name) { return answer }
        if includingPrivate, privateDomains.isSuffix(name) == true { return true }
        // The implicit "*" rule: every top-level label is a public suffix.
        return !name.contains("." as Character)
    }
}
