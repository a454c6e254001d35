public import Foundation

/// A property-list value with its type kept, so that a reader of `NSAppTransportSecurity` can
/// tell `<true/>` from `<integer>1</integer>` and report a wrong type at its key path.
public enum PlistValue: Sendable, Hashable {
    case string(String)
    case bool(Bool)
    case integer(Int)
    case real(Double)
    case date(Date)
    case data([UInt8])
    case array([PlistValue])
    case dictionary([String: PlistValue])

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

    /// Converts what `PropertyListSerialization` returns. On Linux a boolean comes back as `Bool`
    /// and an integer as an `NSNumber` that also casts to `Bool` (0 and 1), so the number's
    /// type code decides, not a cast. Returns nil for a type a plist cannot hold, or a key that is not a string.
    init?(foundation value: Any) {
        switch value {
        case let string as String:
            self = .string(string)
        case let date as Date:
            self = .date(date)
        case let data as Data:
            self = .data([UInt8](data))
        case let array as [Any]:
            var elements: [PlistValue] = []
            elements.reserveCapacity(array.count)
            for element in array {
                guard let converted = PlistValue(foundation: element) else { return nil }
                elements.append(converted)
            }
            self = .array(elements)
        case let dictionary as [AnyHashable: Any]:
            var converted: [String: PlistValue] = [:]
            for (key, element) in dictionary {
                guard let key = key.base as? String, let element = PlistValue(foundation: element) else { return nil }
                converted[key] = element
            }
            self = .dictionary(converted)
        case let number as NSNumber:
            if type(of: value) == Bool.self {
                self = .bool(number.boolValue)
                return
            }
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "d", "f": self = .real(number.doubleValue)
            default: self = .integer(number.intValue)
            }
        default:
            return nil
        }
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
