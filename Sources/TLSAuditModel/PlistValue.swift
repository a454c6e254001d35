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

extension PlistValue {
    /// The plist element name of the type: `string`, `boolean`, `integer`, `real`, `date`,
    /// `data`, `array`, `dictionary` (what a message about a wrong type should say).
    public var typeName: String {
        switch self {
        case .string: "string"
        case .bool: "boolean"
        case .integer: "integer"
        case .real: "real"
        case .date: "date"
        case .data: "data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }

    /// The value under `key` when this is a dictionary.
    public subscript(key: String) -> PlistValue? {
        if case .dictionary(let dictionary) = self { return dictionary[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let value) = self { value } else { nil } }
    public var boolValue: Bool? { if case .bool(let value) = self { value } else { nil } }
    public var dictionaryValue: [String: PlistValue]? { if case .dictionary(let value) = self { value } else { nil } }
    public var arrayValue: [PlistValue]? { if case .array(let value) = self { value } else { nil } }

    /// Every value under this one with its key path below `path`, depth first, dictionary keys in
    /// sorted order (this value itself first).
    public func descendants(at path: PlistKeyPath) -> [(path: PlistKeyPath, value: PlistValue)] {
        var result = [(path: path, value: self)]
        switch self {
        case .dictionary(let dictionary):
            for key in dictionary.keys.sorted() { result += dictionary[key]!.descendants(at: path.appending(key: key)) }
        case .array(let array):
            for (index, element) in array.enumerated() { result += element.descendants(at: path.appending(index: index)) }
        default:
            break
        }
        return result
    }
}

/// Where a value sits in a property list: `NSAppTransportSecurity.NSExceptionDomains["example.com"].NSIncludesSubdomains`.
/// A key that is not a plain identifier is quoted in brackets, so dots in domain names stay unambiguous.
public struct PlistKeyPath: Sendable, Hashable, CustomStringConvertible {
    public enum Component: Sendable, Hashable {
        case key(String)
        case index(Int)
    }

    public var components: [Component]

    public init(_ components: [Component] = []) { self.components = components }

    /// A path of dictionary keys, from the root: `PlistKeyPath(keys: "NSAppTransportSecurity")`.
    public init(keys: String...) { self.components = keys.map(Component.key) }

    public func appending(key: String) -> PlistKeyPath { PlistKeyPath(components + [.key(key)]) }
    public func appending(index: Int) -> PlistKeyPath { PlistKeyPath(components + [.index(index)]) }

    public var description: String {
        var text = ""
        for component in components {
            switch component {
            case .index(let index):
                text += "[\(index)]"
            case .key(let key) where !key.isEmpty && key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }):
                text += text.isEmpty ? key : ".\(key)"
            case .key(let key):
                let escaped = key.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                text += "[\"\(escaped)\"]"
            }
        }
        return text
    }
}
