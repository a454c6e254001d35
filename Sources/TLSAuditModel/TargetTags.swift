/// A target's configured `tags:` as the commands, the API, reports and metrics read them.
public enum TargetTags {
    /// Whether `tags` has every tag of `required` (all of them: `--tag a --tag b` narrows; none required matches all).
    public static func carries(_ tags: [String], every required: [String]) -> Bool {
        required.allSatisfy(tags.contains)
    }

    /// The bundle ids named by `app:BUNDLE_ID` tags, in tag order.
    public static func apps(in tags: [String]) -> [String] {
        tags.filter { $0.hasPrefix(AppHostRules.tagPrefix) && $0.count > AppHostRules.tagPrefix.count }
            .map { String($0.dropFirst(AppHostRules.tagPrefix.count)) }
    }
}

extension AppHostOutcome {
    /// The outcome in words, for tables and reports: "connects, relying on default ATS", or
    /// "does not connect (ats.tls-version)".
    public var verdictText: String {
        connects ? "connects, relying on \(reliance)"
            : "does not connect (\(reasons.isEmpty ? detail : reasons.joined(separator: ", ")))"
                + (error.map { ": the app logs NSURLErrorDomain \($0.code) \($0.name)" } ?? "")
    }
}
