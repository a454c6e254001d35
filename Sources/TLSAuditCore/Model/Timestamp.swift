public import Foundation

/// ISO 8601 UTC timestamps, the only date format tlsaudit prints.
public enum Timestamp {
    /// `2026-11-22T03:10:09Z`.
    public static func format(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().dateSeparator(.dash)
            .time(includingFractionalSeconds: false).timeSeparator(.colon).timeZone(separator: .omitted))
    }

    /// `2026-11-22`.
    public static func formatDay(_ date: Date) -> String {
        String(format(date).prefix(10))
    }

    /// Whole days from `date` until `end`, rounded down (negative once `end` has passed): how
    /// `status`, scans, alerts and reports all count a certificate's days left.
    public static func daysLeft(until end: Date, at date: Date) -> Int {
        Int((end.timeIntervalSince(date) / 86_400).rounded(.down))
    }

    /// Parses `2027-01-01T00:00:00Z` (also with fractional seconds or an offset).
    public static func parse(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) { return date }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

/// Durations as the configuration and the command line write them.
public enum DurationText {
    /// The longest duration accepted: 100 years.
    public static let maximum: Double = 100 * 365 * 86_400

    /// `30`, `30s`, `500ms`, `5m`, `2h`, `7d`, `2w` in seconds; nil when not a duration (negative,
    /// not finite, e.g. `inf` or `nan`, or longer than `maximum`).
    public static func seconds(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]
        var value = Double(text)
        // "ms" comes before "s" and "m" so that "500ms" is not read as "500m" + "s".
        for (suffix, factor) in units where value == nil && text.hasSuffix(suffix) {
            value = Double(text.dropLast(suffix.count)).map { $0 * factor }
        }
        guard let value, value.isFinite, value >= 0, value <= maximum else { return nil }
        return value
    }
}
