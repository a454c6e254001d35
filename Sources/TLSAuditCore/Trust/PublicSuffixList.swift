/// The Public Suffix List, for refusing wildcard names that would cover a whole public suffix
/// (`*.co.uk`): the ICANN section, which clients apply when matching names, and the private section
/// (`s3.amazonaws.com`), which the CA/Browser Forum adds for issuing (BR 3.2.2.6; a lint only).
/// Rules are matched on ASCII labels; suffixes written in Unicode in the list are not matched
/// against punycode (`xn--`) names, and a Unicode name matches a rule only byte for byte (the list
/// is NFC; a dNSName is ASCII by definition).
public enum PublicSuffixList {
    /// One section's rules, searched in place (`PublicSuffixData`).
    struct Rules: Sendable {
        /// The rules' text, one per line, sorted by their bytes.
        private let text: [UInt8]
        /// Where each line starts in `text`: a lookup halves this index, comparing bytes in place.
        /// Built once per process from one pass over the text (parsing the rules into sets took 6 ms
        /// of a short scan's CPU).
        private let lineStarts: [Int]

        init(_ rules: String) {
            text = Array(rules.utf8)
            var starts = [0]
            starts.reserveCapacity(8_192)
            for index in text.indices where text[index] == UInt8(ascii: "\n") { starts.append(index + 1) }
            lineStarts = starts
        }

        /// Whether `rule` is one of the lines, exactly.
        func contains(_ rule: String) -> Bool {
            var rule = rule
            return rule.withUTF8 { wanted in
                text.withUnsafeBufferPointer { text in
                    var low = 0, high = lineStarts.count
                    while low < high {
                        let middle = (low + high) / 2
                        let start = lineStarts[middle]
                        let end = middle + 1 < lineStarts.count ? lineStarts[middle + 1] - 1 : text.count
                        switch Self.compare(UnsafeBufferPointer(rebasing: text[start..<end]), wanted) {
                        case 0: return true
                        case ..<0: low = middle + 1
                        default: high = middle
                        }
                    }
                    return false
                }
            }
        }

        /// Byte order, as `LC_ALL=C sort` orders the lines: negative when `a` comes first.
        private static func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
            for (x, y) in zip(a, b) where x != y { return Int(x) - Int(y) }
            return a.count - b.count
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
