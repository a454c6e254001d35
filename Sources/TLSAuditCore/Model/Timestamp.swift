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

    /// Parses `2027-01-01T00:00:00Z` (also with fractional seconds or an offset).
    public static func parse(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) { return date }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
