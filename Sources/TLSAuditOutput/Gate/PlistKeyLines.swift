import Foundation

/// The line of a key path in an XML property list, for SARIF locations: each component of the
/// dotted path (`NSAppTransportSecurity.NSExceptionDomains.api.example.com.NSIncludesSubdomains`,
/// where a domain's own dots are part of one component) is the first `<key>` after the one before
/// it whose text is the longest prefix of what remains of the path.
public struct PlistKeyLines: Sendable {
    /// Each `<key>` of the document, in order, with its line (1-based).
    private let keys: [(text: String, line: Int)]

    /// nil when `text` is not an XML property list (a binary one has no lines).
    public init?(_ text: String) {
        guard text.contains("<plist") else { return nil }
        var keys: [(String, Int)] = []
        var line = 1
        var rest = Substring(text)
        while let open = rest.range(of: "<key>") {
            line += Self.lineFeeds(rest[..<open.lowerBound])
            guard let close = rest[open.upperBound...].range(of: "</key>") else { break }
            keys.append((Self.unescaped(String(rest[open.upperBound..<close.lowerBound])), line))
            line += Self.lineFeeds(rest[open.upperBound..<close.lowerBound])
            rest = rest[close.upperBound...]
        }
        self.keys = keys
    }

    /// The line of the path's last component found; nil when not even the first is there.
    public func line(of keyPath: String) -> Int? {
        var remaining = Substring(keyPath)
        var index = 0
        var found: Int?
        while !remaining.isEmpty, index < keys.count {
            // The longest prefix ending at a dot (or the end) that some later key spells.
            var best: (keyIndex: Int, length: Int)?
            for candidate in index..<keys.count {
                let text = keys[candidate].text
                guard remaining.hasPrefix(text), !text.isEmpty else { continue }
                let end = remaining.index(remaining.startIndex, offsetBy: text.count)
                guard end == remaining.endIndex || remaining[end] == "." else { continue }
                if best == nil || text.count > best!.length { best = (candidate, text.count) }
            }
            guard let best else { break }
            found = keys[best.keyIndex].line
            index = best.keyIndex + 1
            remaining = remaining.dropFirst(best.length)
            if remaining.hasPrefix(".") { remaining = remaining.dropFirst() }
        }
        return found
    }

    /// Line feeds counted as bytes: CRLF is one Character, not equal to "\n".
    private static func lineFeeds(_ text: Substring) -> Int {
        text.utf8.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    }

    private static func unescaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
