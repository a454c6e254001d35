public import Foundation

/// ISO 8601 UTC timestamps, the only date format tlsaudit prints.
public enum Timestamp {
    /// `2026-11-22T03:10:09Z`.
    /// Whole seconds, rounded down (as `JSONEncoder`'s `.iso8601` writes dates). Calendar arithmetic
    /// on integers for the years 1583 to 9999 (Foundation's calendar is Julian before the Gregorian
    /// reform of 1582: earlier dates go to its formatter): formatters cost more than a handshake's JSON.
    public static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970.rounded(.down)
        guard interval >= -12_212_553_600, interval < 253_402_300_800 else {
            return date.formatted(.iso8601.year().month().day().dateSeparator(.dash)
                .time(includingFractionalSeconds: false).timeSeparator(.colon).timeZone(separator: .omitted))
        }
        let seconds = Int(interval)
        let (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let (day, second) = secondOfDay < 0 ? (days - 1, secondOfDay + 86_400) : (days, secondOfDay)
        let (year, month, dayOfMonth) = civilDate(daysSince1970: day)
        var text = [UInt8]()
        text.reserveCapacity(20)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        digits(year, 4); text.append(UInt8(ascii: "-")); digits(month, 2); text.append(UInt8(ascii: "-")); digits(dayOfMonth, 2)
        text.append(UInt8(ascii: "T"))
        digits(second / 3600, 2); text.append(UInt8(ascii: ":")); digits(second / 60 % 60, 2); text.append(UInt8(ascii: ":"))
        digits(second % 60, 2); text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }

    /// Year, month and day of the proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`).
    static func civilDate(daysSince1970: Int) -> (year: Int, month: Int, day: Int) {
        let z = daysSince1970 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// `2026-11-22T03:10:09.123Z`: milliseconds, rounded down (log lines, where scans of one
    /// second must stay apart).
    public static func formatMilliseconds(_ date: Date) -> String {
        let milliseconds = Int((date.timeIntervalSince1970 * 1000).rounded(.down)) % 1000
        let fraction = String(milliseconds < 0 ? milliseconds + 1000 : milliseconds)
        return format(date).dropLast() + "." + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
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

    /// `seconds` as `seconds(_:)` reads it back, in the largest whole unit: `7d`, `2h`, `90s`.
    public static func text(_ seconds: Double) -> String {
        for (suffix, factor) in [("d", 86_400.0), ("h", 3600), ("m", 60)] where seconds >= factor && seconds.truncatingRemainder(dividingBy: factor) == 0 {
            return "\(Int(seconds / factor))\(suffix)"
        }
        return seconds == seconds.rounded() ? "\(Int(seconds))s" : "\(Int((seconds * 1000).rounded()))ms"
    }
}

extension Duration {
    /// The duration in seconds, fractions included (a `ContinuousClock` interval as a `Double`).
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
