/// A piece of SQL and the values bound to its `?` placeholders, in order. Interpolating one
/// fragment into another carries its values along at the place its text goes, so a dialect's
/// piece (`SQLDialect.isIn`, `.clock`) and what it binds cannot fall out of step with the
/// statement around it. GRDB's `SQL` literal is the model:
///
///     let recent: SQLFragment = "SELECT id FROM observation WHERE started_at >= \(.time(since)) AND \(dialect.isIn("target", .texts(names)))"
///
/// `\(value)` (an `SQLValue`) binds a value; `\(fragment)` inserts a fragment with its values;
/// `\(raw: text)` inserts SQL text written by the code (identifiers, fixed expressions), never data.
public struct SQLFragment: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The statement text, with a `?` for each value.
    public private(set) var text: String
    /// The values, in the order of their placeholders.
    public private(set) var values: [SQLValue]

    /// SQL text written by the code and the values of its `?`s, in order.
    public init(_ text: String, _ values: [SQLValue] = []) {
        self.text = text
        self.values = values
    }

    public init(stringLiteral text: String) {
        self.init(text)
    }

    public init(stringInterpolation: StringInterpolation) {
        self.init(stringInterpolation.text, stringInterpolation.values)
    }

    public var description: String { text }

    /// This fragment followed by `other` (with a space between).
    public func appending(_ other: SQLFragment) -> SQLFragment {
        SQLFragment(text + " " + other.text, values + other.values)
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var text = ""
        var values: [SQLValue] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            text.reserveCapacity(literalCapacity + interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { text += literal }

        /// A value bound to a `?` here.
        public mutating func appendInterpolation(_ value: SQLValue) {
            text += "?"
            values.append(value)
        }

        /// A fragment and its values.
        public mutating func appendInterpolation(_ fragment: SQLFragment) {
            text += fragment.text
            values += fragment.values
        }

        /// SQL text the code wrote (an identifier, a dialect's fixed spelling): never data.
        public mutating func appendInterpolation(raw text: String) { self.text += text }
    }
}
