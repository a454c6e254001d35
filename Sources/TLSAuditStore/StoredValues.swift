import Foundation
package import TLSAuditModel
import TLSAuditSupport

/// How every backend writes and reads the values it keeps: JSON documents byte for byte alike
/// (so stored rule lists compare as text), enumeration values checked as they are read, never a
/// silent default.
package enum StoredValues {
    /// A stored `anchor_in` back as `ChainReport.anchorIn`: nil when not kept, [] for '' (an operator's own anchor).
    package static func anchorIn(_ text: String?) -> [String]? {
        text.map { $0.isEmpty ? [] : $0.split(separator: ",").map(String.init) }
    }

    /// Stored documents: property names as they are, dates in seconds, one line, sorted keys.
    private static let encoder = JSONDocumentEncoder.domain(keys: .asIs, dates: .secondsSince1970, prettyPrinted: false, escapesSlashes: true)

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }()

    package static func json<T: Encodable>(_ value: T) throws -> String {
        try encoder.encodeString(value)
    }

    /// A list; `[]` without the encoder when it is empty (most scans' failed rules, findings and
    /// path issues: an encoder call costs some 30,000 instructions, whatever the value).
    package static func json<Element: Encodable>(_ list: [Element]) throws -> String {
        list.isEmpty ? "[]" : try encoder.encodeString(list)
    }

    /// A stored enumeration value. One this version does not know (written by a newer tlsaudit, or
    /// damaged) is an error naming where it was read, never a silent default.
    package static func known<Value: RawRepresentable>(_ raw: String?, _ what: String, in place: String) throws -> Value
    where Value.RawValue == String {
        guard let raw, let value = Value(rawValue: raw) else {
            throw StoreError(.unreadable, "\(place): the \(what) \(raw.map { "'\($0)'" } ?? "is missing and") is not one this tlsaudit knows (written by a newer version, or damaged)")
        }
        return value
    }

    /// `known`, for a column that may be NULL.
    package static func known<Value: RawRepresentable>(_ raw: String?, _ what: String, in place: String, optional: Bool) throws -> Value?
    where Value.RawValue == String {
        guard let raw else { return nil }
        return try known(raw, what, in: place) as Value
    }

    /// A stored document; one this version cannot read is an error naming where it was read.
    package static func stored<T: Decodable>(_ type: T.Type, _ text: String?, _ what: String, in place: String) throws -> T? {
        do {
            return try decode(type, text)
        } catch {
            throw StoreError(.unreadable, "\(place): the stored \(what) cannot be read (written by a newer version, or damaged): \(error)")
        }
    }

    package static func decode<T: Decodable>(_ type: T.Type, _ text: String?) throws -> T? {
        guard let text else { return nil }
        return try decoder.decode(type, from: Data(text.utf8))
    }

    /// An alert's stored `changes` (JSON), every value as text: strings as they are, counts and
    /// flags (JSON numbers and booleans since 2026-11-23, strings before) as their text.
    package static func changes(_ text: String?) throws -> [String: String] {
        try decode([String: ChangeValue].self, text)?.mapValues(\.text) ?? [:]
    }

    private struct ChangeValue: Decodable {
        let text: String

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let string = try? container.decode(String.self) {
                text = string
            } else if let flag = try? container.decode(Bool.self) {
                text = String(flag)
            } else if let number = try? container.decode(Int.self) {
                text = String(number)
            } else {
                text = String(try container.decode(Double.self))
            }
        }
    }

    /// A target's stored tags (JSON); `[]` without a decoder.
    package static func tags(_ text: String?, in place: String) throws -> [String] {
        guard let text, text != "[]" else { return [] }
        return try stored([String].self, text, "tags", in: place) ?? []
    }

    /// A stored list of failed rules (JSON); `[]`, by far the most common, without a decoder.
    package static func rules(_ text: String?) throws -> [FindingID] {
        guard let text, text != "[]" else { return [] }
        return try decode([FindingID].self, text) ?? []
    }

    /// The summary without its DER (kept once, in its own column) and without evaluation-time data.
    package static func stripped(_ certificate: CertificateSummary) -> CertificateSummary {
        var copy = certificate
        copy.der = Data()
        copy.daysLeft = nil
        return copy
    }
}
