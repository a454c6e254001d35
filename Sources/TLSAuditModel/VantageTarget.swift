/// How a target scanned from several vantage points is stored: one stored target per vantage,
/// `KEY@VANTAGE` (its own status, history, change memory and alerts), beside plain `KEY` for a
/// target scanned from any one vantage.
public enum VantageTarget {
    /// The stored key of `key` scanned from `vantage` (nil: any one vantage, the key itself).
    public static func key(_ key: String, vantage: String?) -> String {
        vantage.map { "\(key)@\($0)" } ?? key
    }

    /// The configured key and the vantage of a stored key (`api@eu` → `api`, `eu`; `api` → `api`, nil).
    public static func split(_ stored: String) -> (key: String, vantage: String?) {
        guard let at = stored.lastIndex(of: "@") else { return (stored, nil) }
        return (String(stored[..<at]), String(stored[stored.index(after: at)...]))
    }

    /// Whether a stored target is one of the configured `keys`, or a vantage of one (`KEY@VANTAGE`).
    public static func isStored(_ stored: String, of keys: Set<String>) -> Bool {
        keys.contains(stored) || keys.contains(split(stored).key)
    }

    /// A `LIKE` pattern (escape character `\\`) matching every vantage of `key`.
    public static func likePattern(_ key: String) -> String {
        key.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "@%"
    }
}
