import Foundation
import TLSAuditCore
import TLSAuditProbe
import Yams
import TLSAuditSupport

/// The values every section reads (strings, choices, numbers, durations, files) and how problems are reported.
extension ConfigurationParser {
    mutating func boolean(_ node: Node) -> Bool? {
        guard case .scalar(let scalar) = node else {
            report(node, "expected true or false")
            return nil
        }
        switch scalar.string.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            report(node, "expected true or false, not '\(scalar.string)'")
            return nil
        }
    }

    /// A path from the file, relative ones taken from the configuration's directory.
    func absolutePath(_ path: String) -> String {
        path.hasPrefix("/") ? path : URL(fileURLWithPath: baseDirectory).appendingPathComponent(path).path
    }

    /// A PEM file's absolute path; reported (and still returned) when it cannot be read.
    /// A `ca_file`'s absolute path; reported (and still returned) when it cannot be read or holds
    /// no certificate, so that a broken file stops the configuration, not a scan or a delivery.
    mutating func certificateFile(_ node: Node) -> String? {
        guard let path = string(node, "a PEM file path").map(absolutePath) else { return nil }
        if !FileManager.default.isReadableFile(atPath: path) {
            report(node, "ca_file \(path) cannot be read")
        } else if (try? CertificateFile.summaries(path: path))?.isEmpty ?? true {
            report(node, "ca_file \(path) holds no certificate (PEM or DER)")
        }
        return path
    }

    // MARK: - Scalars

    mutating func string(_ node: Node, _ expected: String) -> String? {
        guard case .scalar(let scalar) = node, !scalar.string.isEmpty else {
            report(node, "expected \(expected)")
            return nil
        }
        return scalar.string
    }

    /// One of an enumeration's names; another is reported with the names allowed.
    mutating func choice<Value: RawRepresentable & CaseIterable>(_ node: Node, _ key: String, expected: String) -> Value?
    where Value.RawValue == String {
        guard let text = string(node, expected) else { return nil }
        guard let value = Value(rawValue: text) else {
            report(node, "\(key) '\(text)' is not one of \(Value.allCases.map(\.rawValue).joined(separator: ", "))")
            return nil
        }
        return value
    }

    mutating func integer(_ node: Node, in range: ClosedRange<Int>) -> Int? {
        guard case .scalar(let scalar) = node, let value = Int(scalar.string), range.contains(value) else {
            report(node, "expected a whole number from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return value
    }

    /// `30`, `30s`, `5m`, `2h`, `7d` (or `500ms`): seconds.
    /// A duration within `bound`'s range.
    mutating func duration(_ node: Node, _ bound: SettingBounds.Bound<Double>) -> Double? {
        guard let seconds = duration(node, minimum: bound.range.lowerBound) else { return nil }
        guard seconds <= bound.range.upperBound else {
            report(node, "expected a duration \(bound.described)")
            return nil
        }
        return seconds
    }

    mutating func duration(_ node: Node, minimum: Double) -> Double? {
        guard case .scalar(let scalar) = node, let seconds = DurationText.seconds(scalar.string) else {
            report(node, "expected a duration like 30s, 5m, 2h or 7d")
            return nil
        }
        guard seconds >= minimum else {
            report(node, "expected a duration of at least \(minimum < 1 ? "\(Int(minimum * 1000))ms" : "\(Int(minimum))s")")
            return nil
        }
        return seconds
    }

    /// A section that must be a mapping: its entries, keys checked against `allowed` (reported as
    /// in `place`); nil, and `expected` reported, when the node is something else.
    mutating func section(_ node: Node, _ expected: String, allowed: [String], in place: String) -> Node.Mapping? {
        guard case .mapping(let mapping) = node else {
            report(node, expected)
            return nil
        }
        checkKeys(mapping, allowed: allowed, in: place)
        return mapping
    }

    // MARK: - Errors

    mutating func checkKeys(_ mapping: some Sequence<(key: Node, value: Node)>, allowed: [String], in place: String) {
        for (key, _) in mapping {
            let name = key.scalar?.string ?? "?"
            guard !allowed.contains(name) else { continue }
            var message = "unknown key '\(name)' in \(place)"
            if let suggestion = allowed.min(by: { Self.distance($0, name) < Self.distance($1, name) }),
               Self.distance(suggestion, name) <= 2 {
                message += " (did you mean '\(suggestion)'?)"
            }
            report(key, message + "; expected one of: \(allowed.joined(separator: ", "))")
        }
    }

    mutating func report(_ node: Node?, _ message: String) {
        errors.append(ConfigurationError(file: file, line: node?.mark?.line, message: message))
    }

    func yamlMessage(_ error: YamlError) -> String {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _):
            return "line \(mark.line), column \(mark.column): not valid YAML: \(problem)"
        default:
            return "not valid YAML: \(error)"
        }
    }

    /// Levenshtein distance, for "did you mean".
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
