public import Foundation

/// Encodes `Encodable` values to JSON, byte for byte as Foundation's `JSONEncoder` does with
/// `.sortedKeys` (and, as chosen, snake_case keys, ISO 8601 dates, pretty printing, unescaped
/// slashes), in a fraction of its time: values become a small tree of nodes that is written once
/// into one byte buffer, converted keys are remembered, numbers and dates are formatted without
/// formatters. A scan of 200 targets spent a quarter of its CPU time in `JSONEncoder`.
///
/// Decoding stays with Foundation's `JSONDecoder`; `JSONDocumentEncoderTests` holds the two
/// encoders to the same bytes.
public struct JSONDocumentEncoder: Sendable {
    /// How property names become JSON keys (keys of `[String: V]` dictionaries are never converted,
    /// as with `JSONEncoder`).
    public enum KeyStyle: Sendable { case asIs, snakeCase }
    /// How `Date` values are written.
    public enum DateStyle: Sendable { case iso8601, secondsSince1970 }

    public var keys: KeyStyle
    public var dates: DateStyle
    public var prettyPrinted: Bool
    public var escapesSlashes: Bool

    public init(keys: KeyStyle, dates: DateStyle, prettyPrinted: Bool, escapesSlashes: Bool) {
        self.keys = keys
        self.dates = dates
        self.prettyPrinted = prettyPrinted
        self.escapesSlashes = escapesSlashes
    }

    public func encode<T: Encodable>(_ value: T) throws -> Data {
        ByteSink.joined(try write(value))
    }

    /// The document and a newline, as a command prints it.
    public func encodeLine<T: Encodable>(_ value: T) throws -> Data {
        ByteSink.joined(try lineSegments(value))
    }

    /// The document and a newline in consecutive pieces, for output that writes them one after
    /// the other: the pieces the cores wrote a large array's elements into are not copied into one
    /// buffer (for a 200-target scan, 3 MB copied into pages faulted in for it).
    public func encodeLineSegments<T: Encodable>(_ value: T) throws -> [Data] {
        try lineSegments(value).map { $0.takeData() }
    }

    public func encodeString<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encode(value), as: UTF8.self)
    }

    private func lineSegments<T: Encodable>(_ value: T) throws -> [ByteSink] {
        let segments = try write(value)
        segments[segments.count - 1].append(UInt8(ascii: "\n"))
        return segments
    }

    /// The document's bytes, in order, in one or more buffers (never empty).
    private func write<T: Encodable>(_ value: T) throws -> [ByteSink] {
        let context = EncodingContext(self)
        let root = try context.node(for: value, parent: nil, key: nil, topLevel: true)
        try context.resolvePendingElements()
        context.shareNewKeys()
        var writer = JSONByteWriter(prettyPrinted: prettyPrinted, escapesSlashes: escapesSlashes)
        writer.write(root, depth: 0)
        return writer.segments
    }
}

/// A value whose encoding may run on another thread: in an array of many of them (a scan's
/// targets), `JSONDocumentEncoder` builds and writes the elements on all cores, in chunks, and
/// joins the bytes in order, the same bytes as encoding them one by one. The elements are encoded
/// after the rest of the document, so an element's encoding error surfaces from `encode` itself,
/// not from the container's `encode` call: conform only types whose errors no `encode(to:)`
/// catches (a caller that catches one and encodes something else instead would see the whole
/// document fail), and when several values fail, the error thrown may be another one than
/// `JSONEncoder`'s.
/// Declare a conforming type with `JSONDocumentEncoder.register(concurrent:)`.
public protocol ConcurrentlyEncodable: Encodable, Sendable {}

/// A value that appears many times in one document (the same certificates in every target's
/// chain): `JSONDocumentEncoder` builds its JSON once per distinct value (by `==`), writes it once
/// per indentation depth, and copies those bytes wherever an equal value appears. Conform only
/// types whose encoding depends on nothing but the value itself (not on the coding path). One
/// difference from `JSONEncoder`: a nested container asked for under a key that already holds such
/// a value starts empty instead of adding to the value's object.
/// Declare a conforming type with `JSONDocumentEncoder.register(repeated:)`.
public protocol RepeatedlyEncodable: Encodable, Hashable {}

// MARK: - The tree

/// One JSON value, before writing.
enum JSONNode {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    /// A number already in its JSON form (doubles, floats, decimals).
    case number(String)
    case string(String)
    /// Bytes written as a base64 string (`Data`), without an intermediate `String`.
    case base64(Data)
    case object(JSONObjectNode)
    case array(JSONArrayNode)
    /// What a super encoder recorded, known only once its caller has encoded into it.
    case deferred(NodeEncoder)
    /// An array element left for `EncodingContext.resolvePendingElements` (never written as such).
    case pending(PendingElement)
    /// A `RepeatedlyEncodable` value's node, shared by every equal value of the document.
    case repeated(RepeatedNode)
}

/// The node of a `RepeatedlyEncodable` value; its identity keys the writer's copies of its bytes.
final class RepeatedNode {
    let node: JSONNode
    init(_ node: JSONNode) { self.node = node }
}

/// A `ConcurrentlyEncodable` array element, with what its encoding needs: its parent and index.
final class PendingElement {
    let value: any ConcurrentlyEncodable
    let parent: NodeEncoder
    let key: DictionaryKey

    init(value: any ConcurrentlyEncodable, parent: NodeEncoder, key: DictionaryKey) {
        self.value = value
        self.parent = parent
        self.key = key
    }
}

/// An object's members in the order encoded; sorted when written.
final class JSONObjectNode {
    var members: [(key: String, value: JSONNode)] = []
    /// The first 8 UTF-8 bytes of each key, big-endian, zero-padded: orders keys without
    /// touching the strings, except on a tie.
    var prefixes: [UInt64] = []
    /// Whether some key is not ASCII (then keys equal as `String`s, like é and e + U+0301, are merged
    /// when written: `uniqueMembers`).
    var hasNonASCIIKey = false

    func set(_ key: String, _ value: JSONNode) {
        members.append((key, value))
        let (prefix, ascii) = key.utf8.withContiguousStorageIfAvailable(Self.prefix) ?? Self.prefix(Array(key.utf8))
        if !ascii { hasNonASCIIKey = true }
        prefixes.append(prefix)
    }

    /// A key's sort prefix (its first 8 bytes, big-endian) and whether it is all ASCII, in one pass
    /// over its UTF-8 (iterating `String.UTF8View` byte by byte cost a tenth of the encoding).
    private static func prefix(_ utf8: some Collection<UInt8>) -> (prefix: UInt64, ascii: Bool) {
        var prefix: UInt64 = 0
        var shift: UInt64 = 56
        var high: UInt8 = 0
        for (index, byte) in utf8.enumerated() {
            high |= byte
            if index < 8 {
                prefix |= UInt64(byte) << shift
                shift &-= 8
            }
        }
        return (prefix, high < 0x80)
    }

    /// The members with their prefixes, one per key as `JSONEncoder`'s dictionary keeps them when
    /// keys are equal as Strings but spelled apart: the first spelling, the last value. (Keys
    /// spelled the same are left for the writer, where sorting makes them neighbours.)
    func uniqueMembers() -> (members: [(key: String, value: JSONNode)], prefixes: [UInt64]) {
        guard hasNonASCIIKey else { return (members, prefixes) }
        var positions: [String: Int] = [:]
        var merged: [(key: String, value: JSONNode)] = []
        var mergedPrefixes: [UInt64] = []
        for (index, member) in members.enumerated() {
            if let at = positions[member.key] {
                merged[at].value = member.value
            } else {
                positions[member.key] = merged.count
                merged.append(member)
                mergedPrefixes.append(prefixes[index])
            }
        }
        return (merged, mergedPrefixes)
    }
}

final class JSONArrayNode {
    var items: [JSONNode] = []
    /// Whether some items were `ConcurrentlyEncodable` elements (then they are written in parallel too).
    var concurrent = false
    /// A concurrent array's items as bytes, written where they were built
    /// (`EncodingContext.resolvePendingElements`) for the array's depth; `items` is then emptied
    /// (`count` keeps their number).
    var written: (depth: Int, count: Int, segments: [ByteSink])?
}

// MARK: - Encoding

/// State shared by one `encode` call: the options and the converted keys seen so far.
final class EncodingContext {
    let options: JSONDocumentEncoder
    /// Converted keys: those every encoding has met so far (property names are few and fixed),
    /// plus the ones this encoding added, shared when it ends (`shareNewKeys`).
    private var convertedKeys: [String: String]
    private var newKeys: [String: String] = [:]
    private static let sharedKeys = SleepingLock<[String: String]>([:])

    /// Arrays holding `.pending` elements, resolved after the tree is built. Nil in the contexts
    /// that resolve them (an element's own arrays are built in place).
    var pendingArrays: [JSONArrayNode]?
    /// How many `RepeatedlyEncodable` values are being built around the current one: their arrays
    /// are built in place, since a repeated node may be written at several depths and a concurrent
    /// array's bytes are written for one (`resolvePendingElements`).
    var repeatedNesting = 0

    /// The nodes of the `RepeatedlyEncodable` values met so far, one table per type: built once,
    /// written wherever an equal value appears (nodes are never changed once built).
    private var repeatedNodes: [ObjectIdentifier: RepeatedNodes] = [:]

    /// How each type met is encoded, found once per process: asking the runtime whether a type
    /// conforms to a protocol it does not conform to walks every conformance record of the binary
    /// (statically linked Foundation has tens of thousands), 10 ms of a short scan's CPU when asked
    /// of every type (`as? any RepeatedlyEncodable`). The conformers are known, so they are listed.
    enum ValueKind { case plain, repeated, stringKeyedDictionary, concurrent }
    private var kinds: [ObjectIdentifier: ValueKind]
    private var newKinds: [ObjectIdentifier: ValueKind] = [:]
    private static let sharedKinds = SleepingLock<[ObjectIdentifier: ValueKind]>([:])
    /// The `RepeatedlyEncodable` and `ConcurrentlyEncodable` types given to `JSONDocumentEncoder.register`.
    static let listed = SleepingLock<[ObjectIdentifier: ListedType]>([:])

    init(_ options: JSONDocumentEncoder, defersElements: Bool = true) {
        self.options = options
        convertedKeys = options.keys == .snakeCase ? Self.sharedKeys.withLock { $0 } : [:]
        kinds = Self.sharedKinds.withLock { $0 }
        pendingArrays = defersElements ? [] : nil
    }

    /// How values of type `T` are encoded.
    func kind<T>(of type: T.Type) -> ValueKind {
        let id = ObjectIdentifier(type)
        if let known = kinds[id] { return known }
        // `[String: V]` by its name: a dictionary whose keys are strings is the only such type.
        // (`_typeName`, not `String(reflecting:)`: the latter asks the runtime about protocols too.)
        let kind = Self.listed.withLock { $0[id]?.kind } ?? (_typeName(type, qualified: true).hasPrefix("Swift.Dictionary<Swift.String, ") ? .stringKeyedDictionary : .plain)
        kinds[id] = kind
        newKinds[id] = kind
        return kind
    }

    /// Builds and writes every pending element: on all cores, one context and one writer per chunk
    /// of an array, one element after the other, so that an element's nodes are freed (and their
    /// memory used again) once its bytes are written; only the repeated nodes stay, shared within
    /// the chunk. The bytes are written for the array's depth in the document (the length of its
    /// coding path), and `JSONByteWriter.writeArray` splices them in. (Building all the nodes first
    /// and writing them after, a 200-target scan's tree faulted in some 330 pages and grew the
    /// heaps a page at a time.)
    func resolvePendingElements() throws {
        guard let arrays = pendingArrays, !arrays.isEmpty else { return }
        pendingArrays = nil
        let options = options
        // The deepest first: an array nested in another's (already built) items is in place when
        // the outer one's chunks write it.
        let byDepth = arrays.map { array in
            (array: array, depth: array.items.lazy.compactMap { item -> Int? in
                if case .pending(let element) = item { element.parent.codingPath.count } else { nil }
            }.first ?? 0)
        }.sorted { $0.depth > $1.depth }
        for (array, depth) in byDepth {
            let shared = SharedItems(items: array.items)
            array.items = []
            let chunks = try JSONConcurrency.map(JSONConcurrency.chunks(of: shared.items.count)) { range throws(any Error) in
                let context = EncodingContext(options, defersElements: false)
                defer { context.shareNewKeys() }
                var writer = JSONByteWriter(prettyPrinted: options.prettyPrinted, escapesSlashes: options.escapesSlashes)
                for index in range {
                    var item = shared.items[index]
                    if case .pending(let element) = item {
                        item = try context.node(for: element.value, parent: element.parent, key: element.key)
                    }
                    writer.writeItem(item, at: index, depth: depth)
                }
                return writer.segments
            }
            array.written = (depth, shared.items.count, Array(chunks.joined()))
        }
    }

    func key(_ key: some CodingKey) -> String {
        let name = key.stringValue
        guard options.keys == .snakeCase else { return name }
        // Only ASCII names are looked up and remembered: `String` equality treats é and e + U+0301
        // (or the Kelvin sign and K) alike, and the bytes written must be the name's own.
        let (ascii, hasUppercase) = name.utf8.withContiguousStorageIfAvailable(Self.classify) ?? Self.classify(Array(name.utf8))
        guard ascii else { return SnakeCase.convert(name) }
        // An ASCII name without A-Z is its own snake case (most property names): no look-up.
        guard hasUppercase else { return name }
        if let converted = convertedKeys[name] { return converted }
        let converted = SnakeCase.convert(name)
        convertedKeys[name] = converted
        newKeys[name] = converted
        return converted
    }

    /// Whether a name's bytes are all ASCII, and whether some are A-Z, in one pass.
    private static func classify(_ utf8: some Collection<UInt8>) -> (ascii: Bool, hasUppercase: Bool) {
        var high: UInt8 = 0
        var hasUppercase = false
        for byte in utf8 {
            high |= byte
            if byte &- 0x41 < 26 { hasUppercase = true }
        }
        return (high < 0x80, hasUppercase)
    }

    /// Adds the keys this encoding converted to those later encodings start with (the service
    /// encodes many small documents: alerts, notices).
    func shareNewKeys() {
        if !newKinds.isEmpty {
            let added = newKinds
            Self.sharedKinds.withLock { $0.merge(added) { old, _ in old } }
        }
        guard !newKeys.isEmpty else { return }
        let added = newKeys
        Self.sharedKeys.withLock { $0.merge(added) { old, _ in old } }
    }

    func date(_ date: Date, path: @autoclosure () -> [any CodingKey]) throws -> JSONNode {
        switch options.dates {
        case .iso8601: .string(Timestamp.format(date))
        case .secondsSince1970: try number(date.timeIntervalSince1970, path: path())
        }
    }

    /// The node of any value: the types `JSONEncoder` treats specially, then the value's own encoding.
    func node<T: Encodable>(for value: T, parent: NodeEncoder?, key: (any CodingKey)?, topLevel: Bool = false) throws -> JSONNode {
        if T.self == String.self { return .string(value as! String) }
        if T.self == Int.self { return .int(Int64(value as! Int)) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == Double.self { return try number(value as! Double, path: path(parent, key)) }
        if T.self == Date.self { return try date(value as! Date, path: path(parent, key)) }
        if T.self == Data.self { return .base64(value as! Data) }
        if T.self == URL.self { return .string((value as! URL).absoluteString) }
        if T.self == Decimal.self { return .number((value as! Decimal).description) }
        let kind = kind(of: T.self)
        if kind == .repeated, let nodes = repeatedNodes(of: T.self) {
            if let node = nodes.node(for: value) { return node }
            repeatedNesting += 1
            defer { repeatedNesting -= 1 }
            let node = JSONNode.repeated(RepeatedNode(try encodedNode(for: value, kind: kind, parent: parent, key: key, topLevel: topLevel)))
            nodes.remember(node, for: value)
            return node
        }
        return try encodedNode(for: value, kind: kind, parent: parent, key: key, topLevel: topLevel)
    }

    /// This encoding's table of `T`'s repeated nodes, made by the type's registration.
    private func repeatedNodes<T>(of type: T.Type) -> RepeatedNodes? {
        let id = ObjectIdentifier(type)
        if let nodes = repeatedNodes[id] { return nodes }
        guard let nodes = Self.listed.withLock({ $0[id]?.makeRepeatedNodes })?() else { return nil }
        repeatedNodes[id] = nodes
        return nodes
    }

    /// A `ConcurrentlyEncodable` value as such, by its type's registration.
    static func concurrentElement<T>(_ value: T) -> (any ConcurrentlyEncodable)? {
        listed.withLock { $0[ObjectIdentifier(T.self)]?.asConcurrent }?(value)
    }

    /// The node of a value by its own `encode(to:)`.
    private func encodedNode<T: Encodable>(for value: T, kind: ValueKind, parent: NodeEncoder?, key: (any CodingKey)?, topLevel: Bool) throws -> JSONNode {
        let encoder = NodeEncoder(context: self, parent: parent, key: key)
        if kind == .stringKeyedDictionary, let dictionary = value as? any StringKeyedDictionary {
            try dictionary.encodeMembers(to: encoder)
        } else {
            try value.encode(to: encoder)
        }
        if encoder.result == nil, topLevel {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        return encoder.result ?? .object(JSONObjectNode())
    }

    /// A `Double` or `Float` as `JSONEncoder` writes it (`10.0` as `10`); not finite is an error.
    func number<Number: BinaryFloatingPoint & CustomStringConvertible>(_ value: Number,
                                                                       path: @autoclosure () -> [any CodingKey]) throws -> JSONNode {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: path(), debugDescription: "Unable to encode \(Number.self).\(value) directly in JSON."))
        }
        let text = value.description
        return .number(text.hasSuffix(".0") ? String(text.dropLast(2)) : text)
    }

    func path(_ encoder: NodeEncoder?, _ key: (any CodingKey)?) -> [any CodingKey] {
        (encoder?.codingPath ?? []) + (key.map { [$0] } ?? [])
    }
}

/// `[String: V]` dictionaries: their keys are written as they are, never converted.
protocol StringKeyedDictionary {
    func encodeMembers(to encoder: NodeEncoder) throws
}

extension Dictionary: StringKeyedDictionary where Key == String, Value: Encodable {
    func encodeMembers(to encoder: NodeEncoder) throws {
        let object = JSONObjectNode()
        for (key, value) in self {
            object.set(key, try encoder.context.node(for: value, parent: encoder, key: DictionaryKey(key)))
        }
        encoder.result = .object(object)
    }
}

struct DictionaryKey: CodingKey {
    var stringValue: String
    var intValue: Int? { Int(stringValue) }
    init(_ string: String) { stringValue = string }
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) { stringValue = String(intValue) }
}

/// The `Encoder` handed to `encode(to:)`: it records one node.
final class NodeEncoder: Encoder {
    let context: EncodingContext
    let parent: NodeEncoder?
    let key: (any CodingKey)?
    var result: JSONNode?

    init(context: EncodingContext, parent: NodeEncoder?, key: (any CodingKey)?) {
        self.context = context
        self.parent = parent
        self.key = key
    }

    var codingPath: [any CodingKey] { context.path(parent, key) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: JSONObjectNode
        if case .object(let existing)? = result {
            object = existing
        } else {
            object = JSONObjectNode()
            result = .object(object)
        }
        return KeyedEncodingContainer(KeyedNodeContainer(encoder: self, object: object))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: JSONArrayNode
        if case .array(let existing)? = result {
            array = existing
        } else {
            array = JSONArrayNode()
            result = .array(array)
        }
        return UnkeyedNodeContainer(encoder: self, array: array)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueNodeContainer(encoder: self)
    }
}

struct KeyedNodeContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: NodeEncoder
    let object: JSONObjectNode
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ key: Key, _ node: JSONNode) {
        object.set(encoder.context.key(key), node)
    }

    /// The node already stored under `key`, when it is the kind wanted (a nested container asked
    /// for twice shares one node, as with `JSONEncoder`).
    private func existing(_ key: Key) -> JSONNode? {
        let name = encoder.context.key(key)
        return object.members.last { $0.key == name }?.value
    }

    mutating func encodeNil(forKey key: Key) throws { set(key, .null) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(key, .bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(key, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        set(key, try encoder.context.number(value, path: encoder.codingPath + [key]))
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        set(key, try encoder.context.number(value, path: encoder.codingPath + [key]))
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(key, .int(Int64(value))) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(key, .int(Int64(value))) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(key, .int(Int64(value))) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(key, .int(Int64(value))) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(key, .int(value)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(key, .uint(value)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(key, try encoder.context.node(for: value, parent: encoder, key: key))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = NodeEncoder(context: encoder.context, parent: encoder, key: key)
        if case .object(let object)? = existing(key) { nested.result = .object(object) }
        let container = nested.container(keyedBy: keyType)
        set(key, nested.result!)
        return container
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = NodeEncoder(context: encoder.context, parent: encoder, key: key)
        if case .array(let array)? = existing(key) { nested.result = .array(array) }
        let container = nested.unkeyedContainer()
        set(key, nested.result!)
        return container
    }

    mutating func superEncoder() -> any Encoder {
        // Under the key "super", as `JSONEncoder` does (not converted: it is not a property name).
        let nested = NodeEncoder(context: encoder.context, parent: encoder, key: DictionaryKey("super"))
        object.set("super", .deferred(nested))
        return nested
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let nested = NodeEncoder(context: encoder.context, parent: encoder, key: key)
        set(key, .deferred(nested))
        return nested
    }
}

struct UnkeyedNodeContainer: UnkeyedEncodingContainer {
    let encoder: NodeEncoder
    let array: JSONArrayNode
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { array.items.count }

    private var indexKey: DictionaryKey { DictionaryKey(intValue: array.items.count) }

    mutating func encodeNil() throws { array.items.append(.null) }
    mutating func encode(_ value: Bool) throws { array.items.append(.bool(value)) }
    mutating func encode(_ value: String) throws { array.items.append(.string(value)) }
    mutating func encode(_ value: Double) throws {
        array.items.append(try encoder.context.number(value, path: encoder.codingPath + [indexKey]))
    }
    mutating func encode(_ value: Float) throws {
        array.items.append(try encoder.context.number(value, path: encoder.codingPath + [indexKey]))
    }
    mutating func encode(_ value: Int) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { array.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { array.items.append(.int(value)) }
    mutating func encode(_ value: UInt) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { array.items.append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { array.items.append(.uint(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if encoder.context.pendingArrays != nil, encoder.context.repeatedNesting == 0, encoder.context.kind(of: T.self) == .concurrent,
           let element = EncodingContext.concurrentElement(value) {
            if !array.concurrent {
                array.concurrent = true
                encoder.context.pendingArrays?.append(array)
            }
            array.items.append(.pending(PendingElement(value: element, parent: encoder, key: indexKey)))
            return
        }
        array.items.append(try encoder.context.node(for: value, parent: encoder, key: indexKey))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = NodeEncoder(context: encoder.context, parent: encoder, key: indexKey)
        let container = nested.container(keyedBy: keyType)
        array.items.append(nested.result!)
        return container
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = NodeEncoder(context: encoder.context, parent: encoder, key: indexKey)
        let container = nested.unkeyedContainer()
        array.items.append(nested.result!)
        return container
    }

    mutating func superEncoder() -> any Encoder {
        let nested = NodeEncoder(context: encoder.context, parent: encoder, key: indexKey)
        array.items.append(.deferred(nested))
        return nested
    }
}

struct SingleValueNodeContainer: SingleValueEncodingContainer {
    let encoder: NodeEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { encoder.result = .null }
    mutating func encode(_ value: Bool) throws { encoder.result = .bool(value) }
    mutating func encode(_ value: String) throws { encoder.result = .string(value) }
    mutating func encode(_ value: Double) throws { encoder.result = try encoder.context.number(value, path: encoder.codingPath) }
    mutating func encode(_ value: Float) throws { encoder.result = try encoder.context.number(value, path: encoder.codingPath) }
    mutating func encode(_ value: Int) throws { encoder.result = .int(Int64(value)) }
    mutating func encode(_ value: Int8) throws { encoder.result = .int(Int64(value)) }
    mutating func encode(_ value: Int16) throws { encoder.result = .int(Int64(value)) }
    mutating func encode(_ value: Int32) throws { encoder.result = .int(Int64(value)) }
    mutating func encode(_ value: Int64) throws { encoder.result = .int(value) }
    mutating func encode(_ value: UInt) throws { encoder.result = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { encoder.result = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { encoder.result = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { encoder.result = .uint(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { encoder.result = .uint(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        encoder.result = try encoder.context.node(for: value, parent: encoder.parent, key: encoder.key)
    }
}

// MARK: - Keys

/// `JSONEncoder.KeyEncodingStrategy.convertToSnakeCase`, the same words and the same result:
/// `aURLValue` -> `a_url_value`, `myHTTPServer` -> `my_http_server`, `ABC` -> `a_bc`.
enum SnakeCase {
    static func convert(_ key: String) -> String {
        let bytes = Array(key.utf8)
        if bytes.allSatisfy({ $0 < 0x80 }) {
            // ASCII, as every key of tlsaudit's types: A-Z is the general category Lu and a-z Ll,
            // so bytes answer what the Unicode tables would (those cost 0.7M instructions a run).
            guard bytes.count > 1 else { return key.lowercased() }
            let isUpper = { (index: Int) in (0x41...0x5A).contains(bytes[index]) }
            let words = wordRanges(count: bytes.count, isUpper: isUpper, isLower: { (0x61...0x7A).contains(bytes[$0]) })
            return words.map { range in
                String(decoding: range.map { isUpper($0) ? bytes[$0] + 0x20 : bytes[$0] }, as: UTF8.self)
            }.joined(separator: "_")
        }
        let characters = Array(key)
        guard characters.count > 1 else { return key.lowercased() }
        let words = wordRanges(count: characters.count, isUpper: { characters[$0].isUppercaseLetter },
                               isLower: { characters[$0].isLowercaseLetter })
        return words.map { String(characters[$0]).lowercased() }.joined(separator: "_")
    }

    /// JSONEncoder's split of a key into words: a word starts at an uppercase letter, and a run of
    /// uppercase letters followed by a lowercase one ends before its last letter ("myHTTPServer":
    /// my, HTTP, Server).
    private static func wordRanges(count end: Int, isUpper: (Int) -> Bool, isLower: (Int) -> Bool) -> [Range<Int>] {
        var words: [Range<Int>] = []
        var wordStart = 0
        var searchStart = 1
        while let upper = (searchStart..<end).first(where: isUpper) {
            words.append(wordStart..<upper)
            guard let lower = (upper..<end).first(where: isLower) else {
                wordStart = upper
                break
            }
            if lower == upper + 1 {
                wordStart = upper
            } else {
                words.append(upper..<(lower - 1))
                wordStart = lower - 1
            }
            searchStart = lower + 1
        }
        words.append(wordStart..<end)
        return words
    }
}

private extension Character {
    /// `CharacterSet.uppercaseLetters` (Lu, Lt) for the first scalar, as Foundation searches scalars.
    var isUppercaseLetter: Bool {
        guard let scalar = unicodeScalars.first else { return false }
        return scalar.properties.generalCategory == .uppercaseLetter || scalar.properties.generalCategory == .titlecaseLetter
    }

    /// `CharacterSet.lowercaseLetters` (Ll) for the first scalar.
    var isLowercaseLetter: Bool {
        unicodeScalars.first?.properties.generalCategory == .lowercaseLetter
    }
}

// MARK: - Writing

/// Writes a node tree as `JSONEncoder` formats it: two-space indentation and ` : ` when pretty,
/// members sorted by the UTF-8 bytes of their keys.
struct JSONByteWriter {
    /// Where bytes are written now.
    private(set) var sink = ByteSink()
    /// The buffers filled before `sink`, in order (a concurrent array's chunks are kept as written).
    private var finished: [ByteSink] = []
    let prettyPrinted: Bool
    let escapesSlashes: Bool
    /// Where each repeated node was first written in `sink`, by indentation depth: later ones copy the bytes.
    private var repeatedBytes: [RepeatedPosition: Range<Int>] = [:]

    /// Everything written, in order.
    var segments: [ByteSink] { finished + [sink] }

    private struct RepeatedPosition: Hashable {
        var node: ObjectIdentifier
        var depth: Int
    }

    init(prettyPrinted: Bool, escapesSlashes: Bool) {
        self.prettyPrinted = prettyPrinted
        self.escapesSlashes = escapesSlashes
    }

    mutating func write(_ node: JSONNode, depth: Int) {
        switch node {
        case .null: append("null")
        case .bool(let value): append(value ? "true" : "false")
        case .int(let value): writeInteger(value.magnitude, negative: value < 0)
        case .uint(let value): writeInteger(value, negative: false)
        case .number(let text): append(text)
        case .string(let text): writeString(text)
        case .base64(let data): writeBase64(data)
        case .deferred(let encoder): write(encoder.result ?? .object(JSONObjectNode()), depth: depth)
        case .pending: preconditionFailure("array elements are resolved before writing")
        case .object(let object): writeObject(object, depth: depth)
        case .array(let array): writeArray(array, depth: depth)
        case .repeated(let repeated):
            let position = RepeatedPosition(node: ObjectIdentifier(repeated), depth: depth)
            if let bytes = repeatedBytes[position] {
                sink.appendCopy(of: bytes)
            } else {
                let (start, buffer) = (sink.count, sink)
                write(repeated.node, depth: depth)
                // Unless a concurrent array inside it moved the writing to a new buffer.
                if sink === buffer { repeatedBytes[position] = start..<sink.count }
            }
        }
    }

    private mutating func writeObject(_ object: JSONObjectNode, depth: Int) {
        sink.append(UInt8(ascii: "{"))
        let (members, prefixes) = object.uniqueMembers()
        // Sorted by key, then by position so that a key encoded twice keeps its last value.
        var order = Array(members.indices)
        order.sort { left, right in
            if prefixes[left] != prefixes[right] { return prefixes[left] < prefixes[right] }
            switch Self.compare(members[left].key, members[right].key) {
            case 0: return left < right
            case let difference: return difference < 0
            }
        }
        var first = true
        for (position, index) in order.enumerated() {
            if position + 1 < order.count, prefixes[order[position + 1]] == prefixes[index],
               members[order[position + 1]].key == members[index].key { continue }
            if !first { sink.append(UInt8(ascii: ",")) }
            first = false
            newline(depth + 1)
            writeString(members[index].key)
            append(prettyPrinted ? " : " : ":")
            write(members[index].value, depth: depth + 1)
        }
        closing(depth, empty: first)
        sink.append(UInt8(ascii: "}"))
    }

    /// Orders keys by their UTF-8 bytes (as `JSONEncoder` sorts them): negative, zero or positive.
    static func compare(_ left: String, _ right: String) -> Int {
        var left = left, right = right
        return left.withUTF8 { a in right.withUTF8 { b in a.byteOrder(b) } }
    }

    private mutating func writeArray(_ array: JSONArrayNode, depth: Int) {
        sink.append(UInt8(ascii: "["))
        let count: Int
        if let written = array.written {
            precondition(written.depth == depth, "a concurrent array's elements were written for depth \(written.depth), not \(depth)")
            // The chunks' buffers follow as they are; what comes after them starts a new buffer
            // (and copies no repeated bytes from the ones before).
            finished.append(sink)
            finished += written.segments
            sink = ByteSink()
            repeatedBytes.removeAll()
            count = written.count
        } else {
            for (index, item) in array.items.enumerated() { writeItem(item, at: index, depth: depth) }
            count = array.items.count
        }
        closing(depth, empty: count == 0)
        sink.append(UInt8(ascii: "]"))
    }

    /// The element at `index` of an array written at `depth`, after its separator.
    mutating func writeItem(_ item: JSONNode, at index: Int, depth: Int) {
        if index > 0 { sink.append(UInt8(ascii: ",")) }
        newline(depth + 1)
        write(item, depth: depth + 1)
    }

    private mutating func newline(_ depth: Int) {
        guard prettyPrinted else { return }
        sink.append(UInt8(ascii: "\n"))
        sink.appendSpaces(2 * depth)
    }

    /// Before a closing bracket: an empty collection is `[` newline newline `]` when pretty.
    private mutating func closing(_ depth: Int, empty: Bool) {
        guard prettyPrinted else { return }
        if empty { sink.append(UInt8(ascii: "\n")) }
        newline(depth)
    }

    private mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { sink.append($0) }
    }

    private mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { sink.append($0) }
    }

    private mutating func writeInteger(_ magnitude: UInt64, negative: Bool) {
        if negative { sink.append(UInt8(ascii: "-")) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { scratch in
            var rest = magnitude
            var start = 20
            repeat {
                start -= 1
                scratch[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            sink.append(UnsafeBufferPointer(rebasing: scratch[start...]))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// For each byte: 0 copied as is, 1 escaped (`"`, `\\`, control characters), 2 the slash.
    private static let escapeClass: [UInt8] = (0...255).map { byte in
        switch byte {
        case 0..<0x20, 0x22, 0x5C: 1
        case 0x2F: 2
        default: 0
        }
    }

    private mutating func writeString(_ text: String) {
        sink.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            let limit: UInt8 = escapesSlashes ? 2 : 1
            Self.escapeClass.withUnsafeBufferPointer { classes in
                var runStart = 0
                var index = 0
                while index < utf8.count {
                    let byte = utf8[index]
                    let kind = classes[Int(byte)]
                    if kind == 0 || kind > limit {
                        index += 1
                        continue
                    }
                    sink.append(UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                    writeEscaped(byte)
                    index += 1
                    runStart = index
                }
                sink.append(UnsafeBufferPointer(rebasing: utf8[runStart...]))
            }
        }
        sink.append(UInt8(ascii: "\""))
    }

    private mutating func writeEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): append("\\\"")
        case UInt8(ascii: "\\"): append("\\\\")
        case UInt8(ascii: "/"): append("\\/")
        case 0x08: append("\\b")
        case 0x09: append("\\t")
        case 0x0A: append("\\n")
        case 0x0C: append("\\f")
        case 0x0D: append("\\r")
        default:
            append("\\u00")
            sink.append(Self.hexDigits[Int(byte >> 4)])
            sink.append(Self.hexDigits[Int(byte & 0xF)])
        }
    }

    private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 with padding, as `Data.base64EncodedString()`; `/` escaped when slashes are.
    private mutating func writeBase64(_ data: Data) {
        sink.append(UInt8(ascii: "\""))
        let escapes = escapesSlashes
        // At most 4 characters per 3 bytes, doubled when every one were an escaped slash.
        sink.write(maximumCount: (data.count + 2) / 3 * 4 * (escapes ? 2 : 1)) { output in
            var written = 0
            Self.base64Alphabet.withUnsafeBufferPointer { alphabet in
                func emit(_ sextet: UInt8) {
                    let character = alphabet[Int(sextet)]
                    if escapes, character == UInt8(ascii: "/") {
                        output[written] = UInt8(ascii: "\\")
                        written += 1
                    }
                    output[written] = character
                    written += 1
                }
                data.withUnsafeBytes { (input: UnsafeRawBufferPointer) in
                    var index = 0
                    while index + 3 <= input.count {
                        let a = input[index], b = input[index + 1], c = input[index + 2]
                        emit(a >> 2); emit((a & 0x03) << 4 | b >> 4); emit((b & 0x0F) << 2 | c >> 6); emit(c & 0x3F)
                        index += 3
                    }
                    switch input.count - index {
                    case 1:
                        let a = input[index]
                        emit(a >> 2); emit((a & 0x03) << 4)
                        output[written] = UInt8(ascii: "="); output[written + 1] = UInt8(ascii: "=")
                        written += 2
                    case 2:
                        let a = input[index], b = input[index + 1]
                        emit(a >> 2); emit((a & 0x03) << 4 | b >> 4); emit((b & 0x0F) << 2)
                        output[written] = UInt8(ascii: "=")
                        written += 1
                    default: break
                    }
                }
            }
            return written
        }
        sink.append(UInt8(ascii: "\""))
    }
}

/// A growable byte buffer without the uniqueness checks of `[UInt8]` on every append (the
/// writer appends a few bytes at a time, millions of times for a large scan).
final class ByteSink {
    // malloc'd, so that growing is a realloc (a large buffer's pages are moved by mremap, not
    // copied and faulted in again) and `takeData` can hand the bytes to `Data` without a copy.
    private var storage: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int = 1024) {
        self.capacity = capacity
        storage = Self.resized(nil, to: capacity)
    }

    deinit { free(storage) }

    private static func resized(_ buffer: UnsafeMutablePointer<UInt8>?, to capacity: Int) -> UnsafeMutablePointer<UInt8> {
        guard let raw = realloc(buffer, capacity) else { fatalError("out of memory for a \(capacity)-byte JSON document") }
        return raw.assumingMemoryBound(to: UInt8.self)
    }

    @inline(__always)
    private func reserve(_ extra: Int) {
        guard count + extra > capacity else { return }
        var newCapacity = capacity * 2
        while newCapacity < count + extra { newCapacity *= 2 }
        storage = Self.resized(storage, to: newCapacity)
        capacity = newCapacity
    }

    @inline(__always)
    func append(_ byte: UInt8) {
        reserve(1)
        storage[count] = byte
        count += 1
    }

    func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)
        (storage + count).update(from: base, count: bytes.count)
        count += bytes.count
    }

    /// Appends a copy of bytes already written.
    func appendCopy(of range: Range<Int>) {
        reserve(range.count)
        (storage + count).update(from: storage + range.lowerBound, count: range.count)
        count += range.count
    }

    func append(_ other: ByteSink) {
        append(UnsafeBufferPointer(start: other.storage, count: other.count))
    }

    /// The bytes of `segments` in one `Data` (the only one's buffer when there is one, uncopied).
    static func joined(_ segments: [ByteSink]) -> Data {
        guard segments.count > 1 else { return segments[0].takeData() }
        let whole = ByteSink(capacity: max(16, segments.reduce(0) { $0 + $1.count }))
        for segment in segments { whole.append(segment) }
        return whole.takeData()
    }

    func appendSpaces(_ spaces: Int) {
        reserve(spaces)
        (storage + count).update(repeating: UInt8(ascii: " "), count: spaces)
        count += spaces
    }

    /// Lets `body` write up to `maximumCount` bytes in place; it returns how many it wrote.
    func write(maximumCount: Int, _ body: (UnsafeMutableBufferPointer<UInt8>) -> Int) {
        reserve(maximumCount)
        count += body(UnsafeMutableBufferPointer(start: storage + count, count: maximumCount))
    }

    /// The bytes, handed to `Data` without a copy; the sink is empty afterwards.
    func takeData() -> Data {
        let data = Data(bytesNoCopy: storage, count: count, deallocator: .free)
        capacity = 16
        count = 0
        storage = Self.resized(nil, to: capacity)
        return data
    }
}

/// Hands an array's items to the threads of a parallel phase: each thread reads only its own
/// chunk's items and what they point to, and nothing writes to the tree while the threads run.
struct SharedItems: @unchecked Sendable {
    let items: [JSONNode]
}

/// How the elements of a `ConcurrentlyEncodable` array are split among the cores and worked on.
enum JSONConcurrency {
    /// At least 16 elements per chunk (smaller ones are not worth a thread), at most one chunk per core.
    static func chunks(of count: Int) -> [Range<Int>] {
        let cores = ActiveProcessors.count
        let chunkCount = max(1, min(cores, count / 16))
        return (0..<chunkCount).map { chunk in (count * chunk / chunkCount)..<(count * (chunk + 1) / chunkCount) }
    }

    /// `body` for every chunk, on all cores; the results in chunk order, or the first chunk's error.
    static func map<T, Failure: Error>(_ chunks: [Range<Int>],
                                       _ body: @Sendable (Range<Int>) throws(Failure) -> T) throws(Failure) -> [T] {
        var results = [Result<T, Failure>?](repeating: nil, count: chunks.count)
        results.withUnsafeMutableBufferPointer { slots in
            // Each iteration writes only its own slot, and the slots are read after all are done.
            nonisolated(unsafe) let slots = slots
            DispatchQueue.concurrentPerform(iterations: chunks.count) { index in
                slots[index] = Result { () throws(Failure) in try body(chunks[index]) }
            }
        }
        return try results.map { result throws(Failure) in try result!.get() }
    }
}

extension JSONDocumentEncoder {
    /// Declares a `RepeatedlyEncodable` type: only declared types are encoded once per distinct
    /// value (the encoder never asks the runtime whether a type conforms: see `EncodingContext.kind`).
    public static func register<T: RepeatedlyEncodable>(repeated type: T.Type) {
        let listed = ListedType(kind: .repeated, makeRepeatedNodes: { TypedRepeatedNodes<T>() }, asConcurrent: nil)
        EncodingContext.listed.withLock { $0[ObjectIdentifier(type)] = listed }
    }

    /// Declares a `ConcurrentlyEncodable` type: only declared types are encoded on all cores.
    public static func register<T: ConcurrentlyEncodable>(concurrent type: T.Type) {
        let listed = ListedType(kind: .concurrent, makeRepeatedNodes: nil, asConcurrent: { ($0 as? T).map { $0 as any ConcurrentlyEncodable } })
        EncodingContext.listed.withLock { $0[ObjectIdentifier(type)] = listed }
    }
}

/// What registering a type told the encoder, with closures made where the type's conformance is
/// known: the encoder then never asks the runtime whether a value conforms (each first question
/// of a type walks every conformance record of the binary) nor wraps a value in `AnyHashable`
/// (which asks one).
struct ListedType: Sendable {
    let kind: EncodingContext.ValueKind
    /// A new table of the type's repeated nodes (`RepeatedlyEncodable`).
    let makeRepeatedNodes: (@Sendable () -> RepeatedNodes)?
    /// The value as a `ConcurrentlyEncodable` (`ConcurrentlyEncodable`).
    let asConcurrent: (@Sendable (Any) -> (any ConcurrentlyEncodable)?)?
}

/// One encoding's nodes of one `RepeatedlyEncodable` type, by value.
class RepeatedNodes {
    func node<Value>(for value: Value) -> JSONNode? { nil }
    func remember<Value>(_ node: JSONNode, for value: Value) {}
}

final class TypedRepeatedNodes<T: Hashable>: RepeatedNodes {
    private var nodes: [T: JSONNode] = [:]
    // The value where it is, when it is a `T` (a type comparison, no conformance look-up): neither
    // boxed in `Any` nor copied out of the box (a certificate summary's thirty fields, retained
    // and released, for each certificate of each target).
    override func node<Value>(for value: Value) -> JSONNode? {
        guard Value.self == T.self else { return nil }
        return withUnsafePointer(to: value) { $0.withMemoryRebound(to: T.self, capacity: 1) { nodes[$0.pointee] } }
    }
    override func remember<Value>(_ node: JSONNode, for value: Value) {
        guard Value.self == T.self else { return }
        withUnsafePointer(to: value) { $0.withMemoryRebound(to: T.self, capacity: 1) { nodes[$0.pointee] = node } }
    }
}
