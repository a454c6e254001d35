import Foundation
import Testing
@testable import TLSAuditCore

/// Policies are values in one registry: each known by its name, judged by its registered judge,
/// and encoded as its name (stored data and JSON documents read as before).
@Suite("compliance policies")
struct CompliancePolicyTests {
    @Test("every registered policy is known by its name, once, and has a judge")
    func registry() {
        let names = CompliancePolicy.registered.map(\.rawValue)
        #expect(names == ["ats", "ats-runtime", "apple-trust", "mozilla-modern", "mozilla-intermediate", "mozilla-old"])
        #expect(Set(names).count == names.count)
        for policy in CompliancePolicy.registered {
            #expect(CompliancePolicy(rawValue: policy.rawValue) == policy)
            #expect(CompliancePolicy.judges[policy] != nil, "\(policy) has no judge")
        }
        #expect(CompliancePolicy.judges.count == CompliancePolicy.registered.count)
        #expect(CompliancePolicy(rawValue: "mozilla-future") == nil)
    }

    @Test("a policy encodes and decodes as its name; an unknown name does not decode")
    func codable() throws {
        let encoded = try JSONEncoder().encode([CompliancePolicy.mozillaOld, .atsRuntime])
        #expect(String(decoding: encoded, as: UTF8.self) == #"["mozilla-old","ats-runtime"]"#)
        #expect(try JSONDecoder().decode([CompliancePolicy].self, from: encoded) == [.mozillaOld, .atsRuntime])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(CompliancePolicy.self, from: Data(#""nope""#.utf8)) }
    }
}

/// The docs read the registry too: README's `--policy` row names every registered policy, in
/// its order, and nothing else.
@Suite("compliance policies in the docs")
struct CompliancePolicyDocsTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("README's --policy row lists exactly the registered policies")
    func readmePolicyRow() throws {
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let row = try #require(readme.split(separator: "\n").first { $0.hasPrefix("| `--policy ") })
        let cell = row.dropFirst("| `--policy ".count).prefix { $0 != "`" }
        #expect(cell.components(separatedBy: "\\|") == CompliancePolicy.registered.map(\.rawValue), "\(row)")
    }
}
