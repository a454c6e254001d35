import Foundation
import Testing
import TLSAuditCore
import TLSAuditSupport

/// `CertificateSummary` hashes its fingerprint and `daysLeft` only, while `==` compares every field:
/// values that collide in the hash must still be told apart, in sets and in the JSON documents
/// that look certificates up by value.
@Suite("certificate summaries: hash by fingerprint, equal by every field")
struct CertificateSummaryHashTests {
    static let leaf = TrustEvaluatorTests.certificate("leaf.test", issuer: "ca", ca: false)

    @Test("summaries differing outside the hashed fields hash alike, are unequal, and are both kept")
    func collisionsStayDistinct() {
        var stripped = Self.leaf
        stripped.der = Data([0x30, 0x00])
        var renamed = Self.leaf
        renamed.subject = "CN=other"
        #expect(stripped.hashValue == Self.leaf.hashValue)
        #expect(stripped != Self.leaf && renamed != Self.leaf)
        #expect(Set([Self.leaf, stripped, renamed, Self.leaf]).count == 3)
        var later = Self.leaf
        later.daysLeft = 5
        #expect(later != Self.leaf)
    }

    @Test("a document holding colliding summaries is written as JSONEncoder writes it")
    func documentsKeepEachValue() throws {
        var stripped = Self.leaf
        stripped.der = Data([0x30, 0x00])
        var renamed = Self.leaf
        renamed.subject = "CN=other"
        let document = [Self.leaf, stripped, renamed, Self.leaf, stripped]
        let foundation = JSONEncoder()
        foundation.keyEncodingStrategy = .convertToSnakeCase
        foundation.dateEncodingStrategy = .iso8601
        foundation.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let ours = try JSONDocumentEncoder.tlsaudit.encode(document)
        #expect(ours == (try foundation.encode(document)))
        let decoded = try JSONDecoder.tlsaudit.decode([CertificateSummary].self, from: ours)
        #expect(decoded.map(\.subject) == document.map(\.subject))
        #expect(decoded.map(\.der) == document.map(\.der))
    }
}
