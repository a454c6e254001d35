public import Foundation

/// A certificate's validity time (notBefore, notAfter) read from its ASN.1 text the way X.680 and
/// X.690 define UTCTime and GeneralizedTime: every form they allow is read (minutes without seconds,
/// fractions of a second, a UTC offset instead of `Z`), and what the DER rules and RFC 5280 4.1.2.5
/// forbid is said. UTCTime years 50-99 are 1950-1999, 00-49 are 2000-2049.
public struct CertificateTime: Hashable, Sendable {
    /// The instant, nil when the text is no time X.680 defines (the certificate cannot be judged).
    public var date: Date?
    /// Why the encoding is not what DER and RFC 5280 require, when it is not.
    public var problem: String?
    /// Why trustd cannot read the time, when X.680 can: Security's
    /// `SecAbsoluteTimeFromDateContentWithError` reads only `YYMMDDhhmmZ`, `YYMMDDhhmmssZ` and
    /// `YYMMDDhhmmss+hhmm` UTCTimes and `YYYYMMDDhhmmssZ` and `YYYYMMDDhhmmss+hhmm` GeneralizedTimes,
    /// and a certificate with any other form is not created at all (Apple's clients refuse it).
    public var appleProblem: String?

    public init(date: Date?, problem: String?, appleProblem: String? = nil) {
        self.date = date
        self.problem = problem
        self.appleProblem = appleProblem
    }

    /// Reads `text` as a UTCTime (`generalized` false) or a GeneralizedTime.
    public static func read(_ text: [UInt8], generalized: Bool) -> CertificateTime {
        let shown = String(decoding: text.prefix(40), as: UTF8.self).debugDescription
        let kind = generalized ? "GeneralizedTime" : "UTCTime"
        func unreadable(_ why: String) -> CertificateTime {
            CertificateTime(date: nil, problem: "\(shown) is not a \(kind): \(why)")
        }
        var cursor = 0
        func number(_ count: Int) -> Int? {
            guard cursor + count <= text.count else { return nil }
            var value = 0
            for byte in text[cursor..<(cursor + count)] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            cursor += count
            return value
        }
        var notes: [String] = []
        guard let yearDigits = number(generalized ? 4 : 2), let month = number(2), let day = number(2),
              let hour = number(2), let minute = number(2) else { return unreadable("the date and time are not all digits") }
        let year = generalized ? yearDigits : (yearDigits >= 50 ? 1900 + yearDigits : 2000 + yearDigits)
        var second = 0
        let hasSeconds = cursor < text.count && (48...57).contains(text[cursor])
        if hasSeconds {
            guard let value = number(2) else { return unreadable("the seconds are cut short") }
            second = value
        } else {
            notes.append("it has no seconds (DER requires them)")
        }
        var fraction = 0.0
        let hasFraction = generalized && cursor < text.count && (text[cursor] == UInt8(ascii: ".") || text[cursor] == UInt8(ascii: ","))
        if hasFraction {
            if text[cursor] == UInt8(ascii: ",") { notes.append("its fraction uses a comma (DER requires a full stop)") }
            cursor += 1
            let start = cursor
            while cursor < text.count, (48...57).contains(text[cursor]) { cursor += 1 }
            guard cursor > start else { return unreadable("a decimal sign without digits") }
            let digits = text[start..<cursor]
            fraction = Double("0." + String(decoding: digits, as: UTF8.self)) ?? 0
            if digits.last == UInt8(ascii: "0") { notes.append("its fraction ends in zero (DER forbids it)") }
            notes.append("it has a fraction of a second (RFC 5280 forbids it)")
        }
        var offset = 0
        let hasOffset = cursor < text.count && (text[cursor] == UInt8(ascii: "+") || text[cursor] == UInt8(ascii: "-"))
        if cursor < text.count, text[cursor] == UInt8(ascii: "Z") {
            cursor += 1
        } else if cursor < text.count, text[cursor] == UInt8(ascii: "+") || text[cursor] == UInt8(ascii: "-") {
            let sign = text[cursor] == UInt8(ascii: "+") ? 1 : -1
            cursor += 1
            guard let hours = number(2), let minutes = number(2), hours < 24, minutes < 60 else {
                return unreadable("its UTC offset is not +hhmm or -hhmm")
            }
            offset = sign * (hours * 3600 + minutes * 60)
            notes.append("it gives a UTC offset instead of Z (DER requires Z)")
        } else if generalized, cursor == text.count {
            return unreadable("it is local time, with neither Z nor a UTC offset")
        } else {
            return unreadable("it does not end in Z or a UTC offset")
        }
        guard cursor == text.count else { return unreadable("characters follow the time") }
        // A leap second (60) is read in any minute, as trustd reads it.
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60, second <= 60 else {
            return unreadable("\(year)-\(month)-\(day) \(hour):\(minute):\(second) is not a calendar date and time")
        }
        if generalized, year < 2050 {
            notes.append("it is a GeneralizedTime for a year before 2050 (RFC 5280 4.1.2.5 requires UTCTime)")
        }
        let days = daysSince1970(year: year, month: month, day: day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offset) + fraction
        let appleProblem: String? = if hasFraction {
            "\(shown) is a GeneralizedTime with a fraction of a second"
        } else if !hasSeconds, generalized || hasOffset {
            "\(shown) is a \(kind) \(hasOffset ? "with a UTC offset " : "")without seconds"
        } else {
            nil
        }
        return CertificateTime(date: Date(timeIntervalSince1970: seconds),
                               problem: notes.isEmpty ? nil : "\(shown): " + notes.joined(separator: "; "),
                               appleProblem: appleProblem.map { "\($0), a form trustd cannot read (it reads YYMMDDhhmm[ss]Z, YYMMDDhhmmss+hhmm, YYYYMMDDhhmmssZ and YYYYMMDDhhmmss+hhmm)" })
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
