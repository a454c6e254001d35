import Foundation
import Synchronization
import Testing
@testable import TLSAuditSupport

/// `JSONDocumentEncoder` must write the very bytes Foundation's `JSONEncoder` writes with the same
/// options: stored documents are hashed, and scripts compare outputs.
@Suite("JSON documents: the same bytes as JSONEncoder, faster")
struct JSONDocumentEncoderTests {
    /// The options of tlsaudit's documents (`JSONDocumentEncoder.tlsaudit` and `.tlsauditCompact`, in the model).
    static let pretty = JSONDocumentEncoder(keys: .snakeCase, dates: .iso8601, prettyPrinted: true, escapesSlashes: false)
    static let compact = JSONDocumentEncoder(keys: .snakeCase, dates: .iso8601, prettyPrinted: false, escapesSlashes: false)

    struct Inner: Codable {
        var aB: Int
        var emptyList: [Int]
        var emptyObject: [String: Int]
        var dictionaryKeysStayAsTheyAre: [String: Int]
        var nestedOptional: [String?]
    }

    struct Sample: Codable {
        var someValue: Double
        var doubles: [Double]
        var text: String
        var date: Date
        var oldDate: Date
        var data: Data
        var present: Int?
        var absent: Int?
        var optionals: [Int?]
        var inner: Inner
        var nested: [[String]]
        var flags: [Bool]
        var float: Float
        var byte: UInt8
        var smallest: Int64
        var largest: UInt64
        var url: URL
        var aURLValue: Int
        var _under: Int
        var x_y: Int
        var ABC: Int
        var myHTTPServer: Int
        var sha256Pin: String
        var ipV6Address: String
    }

    /// Written by hand: nested containers, a super encoder and a key encoded twice.
    struct Custom: Encodable {
        enum Keys: String, CodingKey { case first, nested, list, again, `super` }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode("one", forKey: .first)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .nested)
            try nested.encode(2, forKey: .again)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode(1.25)
            try list.encodeNil()
            var inner = list.nestedContainer(keyedBy: Keys.self)
            try inner.encode(true, forKey: .first)
            try container.encode("first value", forKey: .again)
            try container.encode("second value", forKey: .again)
            var superContainer = container.superEncoder().container(keyedBy: Keys.self)
            try superContainer.encode("parent", forKey: .first)
        }
    }

    static let sample = Sample(
        someValue: 10.0,
        doubles: [1.5, 0.1, 1e20, 1e-7, -0.0, 123_456_789.125, 1.0 / 3, 1_700_000_000.123, 2e16, 1.2345678901234568e16, -3, .pi],
        text: "a\"b\\c/d\u{0}\u{1}\u{7}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{1b}\u{1f}\u{7f}é€😀\u{2028}\u{202e}<script>",
        date: Date(timeIntervalSince1970: 1_700_000_000.75),
        oldDate: Date(timeIntervalSince1970: -631_152_000.5),
        data: Data([1, 2, 3, 255]),
        present: 5, absent: nil, optionals: [1, nil, 3],
        inner: Inner(aB: 1, emptyList: [], emptyObject: [:], dictionaryKeysStayAsTheyAre: ["someKey": 1, "B": 2, "a": 3, "é": 4, "_x": 5],
                     nestedOptional: [nil, "x"]),
        nested: [[], ["x"]], flags: [true, false], float: 1.1, byte: 255, smallest: .min, largest: .max,
        url: URL(string: "https://example.com/a?b=c")!, aURLValue: 1, _under: 2, x_y: 3, ABC: 4, myHTTPServer: 5,
        sha256Pin: "sha256/AAAA+/=", ipV6Address: "::1")

    static func foundation(snakeCase: Bool, iso8601: Bool, pretty: Bool, escapesSlashes: Bool) -> JSONEncoder {
        let encoder = JSONEncoder()
        if snakeCase { encoder.keyEncodingStrategy = .convertToSnakeCase }
        encoder.dateEncodingStrategy = iso8601 ? .iso8601 : .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        if pretty { encoder.outputFormatting.insert(.prettyPrinted) }
        if !escapesSlashes { encoder.outputFormatting.insert(.withoutEscapingSlashes) }
        return encoder
    }

    @Test("every option combination gives JSONEncoder's bytes", arguments: [false, true], [false, true])
    func sameBytes(snakeCase: Bool, pretty: Bool) throws {
        for iso8601 in [false, true] {
            for escapesSlashes in [false, true] {
                let ours = JSONDocumentEncoder(keys: snakeCase ? .snakeCase : .asIs, dates: iso8601 ? .iso8601 : .secondsSince1970,
                                               prettyPrinted: pretty, escapesSlashes: escapesSlashes)
                let theirs = Self.foundation(snakeCase: snakeCase, iso8601: iso8601, pretty: pretty, escapesSlashes: escapesSlashes)
                #expect(try ours.encodeString(Self.sample) == String(decoding: try theirs.encode(Self.sample), as: UTF8.self))
                #expect(try ours.encodeString(Custom()) == String(decoding: try theirs.encode(Custom()), as: UTF8.self))
                #expect(try ours.encodeString([Self.sample.inner]) == String(decoding: try theirs.encode([Self.sample.inner]), as: UTF8.self))
                #expect(try ours.encodeString("top level") == String(decoding: try theirs.encode("top level"), as: UTF8.self))
                #expect(try ours.encodeString([String: Int]()) == String(decoding: try theirs.encode([String: Int]()), as: UTF8.self))
            }
        }
    }

    @Test("snake_case conversion splits words as JSONEncoder does", arguments: [
        "a", "A", "ab", "aB", "ABC", "aURLValue", "myHTTPServer", "x_y", "_under", "trailing_", "sha256Pin", "ipV6Address",
        "URLs", "allCAPS", "oneTwoThree", "a1B2", "ÉtéÀ", "daysLeft",
    ])
    func snakeCase(key: String) throws {
        struct One: Encodable {
            let key: String
            struct Key: CodingKey {
                var stringValue: String
                var intValue: Int? { nil }
                init(stringValue: String) { self.stringValue = stringValue }
                init?(intValue: Int) { nil }
            }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Key.self)
                try container.encode(1, forKey: Key(stringValue: key))
            }
        }
        let theirs = Self.foundation(snakeCase: true, iso8601: true, pretty: false, escapesSlashes: false)
        #expect(try Self.compact.encodeString(One(key: key)) == String(decoding: try theirs.encode(One(key: key)), as: UTF8.self))
    }

    /// Encoders written by hand in the ways a review found ours differed from JSONEncoder.
    class Base: Encodable {
        var base = 1
    }

    final class Derived: Base {
        var own = 2
        enum Keys: String, CodingKey { case own }
        override func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(own, forKey: .own)
            try super.encode(to: container.superEncoder())
        }
    }

    struct Unusual: Encodable {
        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(_ string: String) { stringValue = string }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            // A super encoder given a single value; one in an array given a string.
            var single = container.superEncoder(forKey: Key("single")).singleValueContainer()
            try single.encode(5)
            var list = container.nestedUnkeyedContainer(forKey: Key("list"))
            var inList = list.superEncoder().singleValueContainer()
            try inList.encode("x")
            // The same nested containers asked for twice.
            var first = container.nestedContainer(keyedBy: Key.self, forKey: Key("twice"))
            try first.encode(1, forKey: Key("x"))
            var second = container.nestedContainer(keyedBy: Key.self, forKey: Key("twice"))
            try second.encode(2, forKey: Key("y"))
            var firstList = container.nestedUnkeyedContainer(forKey: Key("twiceList"))
            try firstList.encode(1)
            var secondList = container.nestedUnkeyedContainer(forKey: Key("twiceList"))
            try secondList.encode(2)
            // Keys equal as Strings but spelled differently: one member.
            try container.encode(1, forKey: Key("caf\u{e9}"))
            try container.encode(2, forKey: Key("cafe\u{301}"))
        }
    }

    struct Nothing: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    @Test("super encoders, containers asked for twice, equivalent keys, values that encode nothing: as JSONEncoder")
    func unusualEncoders() throws {
        for pretty in [false, true] {
            for snakeCase in [false, true] {
                let ours = JSONDocumentEncoder(keys: snakeCase ? .snakeCase : .asIs, dates: .secondsSince1970, prettyPrinted: pretty, escapesSlashes: true)
                let theirs = Self.foundation(snakeCase: snakeCase, iso8601: false, pretty: pretty, escapesSlashes: true)
                #expect(try ours.encodeString(Derived()) == String(decoding: try theirs.encode(Derived()), as: UTF8.self))
                #expect(try ours.encodeString(Unusual()) == String(decoding: try theirs.encode(Unusual()), as: UTF8.self))
                #expect(try ours.encodeString([Nothing()]) == String(decoding: try theirs.encode([Nothing()]), as: UTF8.self))
                #expect(throws: EncodingError.self) { try ours.encode(Nothing()) }
                #expect(throws: EncodingError.self) { try theirs.encode(Nothing()) }
                #expect(throws: EncodingError.self) { try ours.encode([Date(timeIntervalSince1970: .infinity)]) }
            }
        }
        // A non-ASCII name converted once does not change how an equivalent spelling is written later.
        struct Accented: Encodable {
            let name: String
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Unusual.Key.self)
                try container.encode(1, forKey: Unusual.Key(name))
            }
        }
        _ = try Self.compact.encode(Accented(name: "cafe\u{301}"))
        #expect(try Self.compact.encodeString(Accented(name: "caf\u{e9}")) == "{\"caf\u{e9}\":1}")
    }

    /// An array element the encoder may build and write on several threads (as a scan's targets).
    struct Element: ConcurrentlyEncodable {
        var position: Int
        var sample: Sample
        var custom = Custom()
        var inner: [Inner]
    }

    struct Document: Encodable {
        var before: String
        var elements: [Element]
        var nested: [[Element]]
        var zAfter: Int
    }

    @Test("long arrays of ConcurrentlyEncodable elements, built and written in chunks on all cores: JSONEncoder's bytes",
          arguments: [0, 1, 31, 33, 200])
    func concurrentElements(count: Int) throws {
        JSONDocumentEncoder.register(concurrent: Element.self)
        let elements = (0..<count).map { Element(position: $0, sample: Self.sample, inner: [Self.sample.inner]) }
        let document = Document(before: "b", elements: elements, nested: [Array(elements.prefix(40)), []], zAfter: 1)
        for snakeCase in [false, true] {
            for pretty in [false, true] {
                let ours = JSONDocumentEncoder(keys: snakeCase ? .snakeCase : .asIs, dates: .iso8601, prettyPrinted: pretty,
                                               escapesSlashes: false)
                let theirs = Self.foundation(snakeCase: snakeCase, iso8601: true, pretty: pretty, escapesSlashes: false)
                #expect(try ours.encodeString(document) == String(decoding: try theirs.encode(document), as: UTF8.self))
                #expect(try ours.encodeString(elements) == String(decoding: try theirs.encode(elements), as: UTF8.self))
                // In pieces, as commands print it: the chunks are not joined, the bytes are the same.
                let pieces = try ours.encodeLineSegments(document)
                #expect(Data(pieces.joined()) == (try theirs.encode(document)) + Data("\n".utf8))
                #expect(try ours.encodeLine(document) == Data(pieces.joined()))
                if count >= 32, ProcessInfo.processInfo.activeProcessorCount > 1 { #expect(pieces.count > 2) }
            }
        }
    }

    @Test("an element that cannot be encoded fails the whole document, wherever its chunk runs")
    func concurrentElementFailure() {
        struct Measured: ConcurrentlyEncodable { let value: Double }
        JSONDocumentEncoder.register(concurrent: Measured.self)
        for failing in [0, 50, 99] {
            let values = (0..<100).map { Measured(value: $0 == failing ? .nan : Double($0)) }
            #expect(throws: EncodingError.self) { try Self.pretty.encode(values) }
        }
    }

    /// A repeated value holding a long array of concurrent elements: written at two depths.
    struct Batch: RepeatedlyEncodable {
        var label: String
        var elements: [Element]
        static func == (left: Batch, right: Batch) -> Bool { left.label == right.label }
        func hash(into hasher: inout Hasher) { hasher.combine(label) }
    }

    /// Concurrent elements between other items of one unkeyed container.
    struct Mixed: Encodable {
        var elements: [Element]
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encodeNil()
            for element in elements { try container.encode(element) }
            try container.encode("end")
        }
    }

    struct Deep: Encodable {
        var batch: Batch
        var mixed: Mixed
        var wrapped: [String: [Batch]]
    }

    /// Concurrent elements, then an array of them nested in the same unkeyed container, then a
    /// plain value holding more: arrays deferred inside an array deferred before them.
    struct Nesting: Encodable {
        var elements: [Element]
        struct Wrapper: Encodable { var list: [Element] }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(element) }
            var nested = container.nestedUnkeyedContainer()
            for element in elements { try nested.encode(element) }
            try container.encode(Wrapper(list: elements))
        }
    }

    @Test("concurrent elements at any depth, inside a repeated value written at two depths, among other items, and nested in one another's items: JSONEncoder's bytes")
    func concurrentElementsAtDepths() throws {
        JSONDocumentEncoder.register(concurrent: Element.self)
        JSONDocumentEncoder.register(repeated: Batch.self)
        let elements = (0..<40).map { Element(position: $0, sample: Self.sample, inner: [Self.sample.inner]) }
        let batch = Batch(label: "b", elements: elements)
        let deep = Deep(batch: batch, mixed: Mixed(elements: elements), wrapped: ["w": [batch, Batch(label: "c", elements: [])]])
        for pretty in [false, true] {
            let ours = JSONDocumentEncoder(keys: .snakeCase, dates: .iso8601, prettyPrinted: pretty, escapesSlashes: false)
            let theirs = Self.foundation(snakeCase: true, iso8601: true, pretty: pretty, escapesSlashes: false)
            #expect(try ours.encodeString(deep) == String(decoding: try theirs.encode(deep), as: UTF8.self))
            #expect(try ours.encodeString([deep, deep]) == String(decoding: try theirs.encode([deep, deep]), as: UTF8.self))
            for count in [1, 40] {
                let nesting = ["n": Nesting(elements: Array(elements.prefix(count)))]
                #expect(try ours.encodeString(nesting) == String(decoding: try theirs.encode(nesting), as: UTF8.self))
            }
        }
    }

    /// A value met many times in a document; counts its own encodings.
    struct Repeated: RepeatedlyEncodable {
        static let encodings = Mutex(0)
        var name: String
        var fingerprint: [UInt8]
        var inner: Inner

        static func == (left: Repeated, right: Repeated) -> Bool {
            left.name == right.name && left.fingerprint == right.fingerprint && left.inner.aB == right.inner.aB
        }
        func hash(into hasher: inout Hasher) { hasher.combine(fingerprint) }

        enum CodingKeys: String, CodingKey { case name, fingerprint, inner }
        func encode(to encoder: any Encoder) throws {
            Self.encodings.withLock { $0 += 1 }
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(fingerprint, forKey: .fingerprint)
            try container.encode(inner, forKey: .inner)
        }
    }

    struct Holder: Encodable {
        var first: Repeated
        var list: [Repeated]
        var byName: [String: Repeated]
        var optional: Repeated?
    }

    @Test("a RepeatedlyEncodable value is built once per distinct value and written wherever it appears: JSONEncoder's bytes")
    func repeatedValues() throws {
        JSONDocumentEncoder.register(repeated: Repeated.self)
        let a = Repeated(name: "a", fingerprint: [1, 2], inner: Self.sample.inner)
        var sameHash = a // equal hash, different value: must not be merged
        sameHash.name = "not a"
        var b = a
        b.fingerprint = [3]
        b.inner.aB = 7
        let holder = Holder(first: a, list: [a, b, sameHash, a, b, a], byName: ["x": a, "y": b], optional: sameHash)
        for snakeCase in [false, true] {
            for pretty in [false, true] {
                let ours = JSONDocumentEncoder(keys: snakeCase ? .snakeCase : .asIs, dates: .iso8601, prettyPrinted: pretty,
                                               escapesSlashes: false)
                let theirs = Self.foundation(snakeCase: snakeCase, iso8601: true, pretty: pretty, escapesSlashes: false)
                let before = Repeated.encodings.withLock { $0 }
                let written = try ours.encodeString(holder)
                #expect(Repeated.encodings.withLock { $0 } - before == 3) // a, b and sameHash, once each
                #expect(written == String(decoding: try theirs.encode(holder), as: UTF8.self))
            }
        }
    }

    @Test("chunks cover an array's elements once each, in order")
    func chunks() {
        for count in 0...300 {
            let chunks = JSONConcurrency.chunks(of: count)
            #expect(chunks.flatMap { Array($0) } == Array(0..<count))
            #expect(chunks.count <= max(1, ProcessInfo.processInfo.activeProcessorCount))
        }
    }

    @Test("a non-finite number is an error, as with JSONEncoder")
    func nonFinite() {
        #expect(throws: EncodingError.self) { try Self.pretty.encode([Double.infinity]) }
        #expect(throws: EncodingError.self) { try Self.pretty.encode(["x": Double.nan]) }
    }

    @Test("timestamps match Foundation's ISO 8601 style from year 1 to 9999 (Julian before 1582, as Foundation)")
    func timestamps() {
        var generator = SystemRandomNumberGenerator()
        var instants: [Double] = [0, -1, -0.5, 86_399.999, 951_782_400, 4_107_542_400, -62_135_596_800, 253_402_300_799, -2_208_988_800, -12_212_553_600, -12_212_553_601]
        for _ in 0..<2000 { instants.append(Double.random(in: -62_135_596_800...253_402_300_799, using: &generator)) }
        for instant in instants {
            let date = Date(timeIntervalSince1970: instant)
            let foundation = date.formatted(.iso8601.year().month().day().dateSeparator(.dash)
                .time(includingFractionalSeconds: false).timeSeparator(.colon).timeZone(separator: .omitted))
            #expect(Timestamp.format(date) == foundation, "at \(instant)")
        }
    }
}
