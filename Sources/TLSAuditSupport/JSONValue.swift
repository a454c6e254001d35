import Foundation

/// Any JSON document, kept as a value: what a check outside the shipped ones reports, stored and
/// encoded as it was made. Objects encode with their keys sorted (as every tlsaudit document does).
public enum JSONValue: Hashable, Codable, Sendable {
    case null
    case bool(Bool)
    /// A number with no fraction that fits 64 bits (signed).
    case integer(Int64)
    /// A number with no fraction above `Int64.max` that fits 64 bits unsigned (a hash, a serial).
    case unsigned(UInt64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// `value` as JSON, as tlsaudit writes every document (snake_case keys, ISO 8601 dates): how
    /// a check's own report type becomes one. Keys of dictionaries stay as they are.
    public init(encoding value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.keyEncodingStrategy = .convertToSnakeCase
        self = try JSONDecoder().decode(JSONValue.self, from: encoder.encode(value))
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(UInt64.self) {
            self = .unsigned(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .unsigned(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The member `key` of an object (nil for anything else).
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The text of a string value.
    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}
