public import Foundation

/// A property-list value as Info.plist files hold them (XML or binary), so that readers hand
/// over what they read and judges never see Foundation's `Any`.
public enum PlistValue: Sendable, Hashable {
    case string(String)
    case bool(Bool)
    case integer(Int)
    case real(Double)
    case date(Date)
    case data(Data)
    case array([PlistValue])
    case dictionary([String: PlistValue])

    /// Converts what `PropertyListSerialization.propertyList(from:options:format:)` returns.
    /// Booleans stay booleans (on Linux they come as `Bool`, on Darwin as a CFBoolean `NSNumber`),
    /// integers stay integers. Nil for anything a property list cannot hold (at any depth).
    public init?(propertyList value: Any) {
        switch value {
        case let text as String:
            self = .string(text)
        case let date as Date:
            self = .date(date)
        case let data as Data:
            self = .data(data)
        case let array as [Any]:
            var values: [PlistValue] = []
            for element in array {
                guard let converted = PlistValue(propertyList: element) else { return nil }
                values.append(converted)
            }
            self = .array(values)
        case let dictionary as [String: Any]:
            var values: [String: PlistValue] = [:]
            for (key, element) in dictionary {
                guard let converted = PlistValue(propertyList: element) else { return nil }
                values[key] = converted
            }
            self = .dictionary(values)
        default:
            guard let number = Self.number(value) else { return nil }
            self = number
        }
    }

    /// Booleans, integers and reals, told apart by their dynamic type (a Swift `Bool` casts to
    /// `Int` and an `NSNumber` 1 casts to `Bool`, so casts alone cannot tell them apart).
    private static func number(_ value: Any) -> PlistValue? {
        if type(of: value) == Bool.self, let flag = value as? Bool { return .bool(flag) }
        if type(of: value) == Double.self, let real = value as? Double { return .real(real) }
        if type(of: value) == Int.self, let integer = value as? Int { return .integer(integer) }
        guard let number = value as? NSNumber else { return nil }
        #if canImport(Darwin)
        if CFGetTypeID(number) == CFBooleanGetTypeID() { return .bool(number.boolValue) }
        #endif
        switch String(cString: number.objCType) {
        case "c", "B": return .bool(number.boolValue)
        case "f", "d": return .real(number.doubleValue)
        default: return .integer(number.intValue)
        }
    }

    /// The kind of value in words, for messages: "a string", "a boolean", "an array"...
    public var kindDescription: String {
        switch self {
        case .string: "a string"
        case .bool: "a boolean"
        case .integer: "an integer"
        case .real: "a real number"
        case .date: "a date"
        case .data: "data"
        case .array: "an array"
        case .dictionary: "a dictionary"
        }
    }
}
