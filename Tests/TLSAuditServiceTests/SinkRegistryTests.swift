import Foundation
import Testing
@testable import TLSAuditService

/// Sink kinds are registered in one place (`AlertSinkKinds`): the configuration reads them from
/// there, and docs/alerts.md's table of sinks documents exactly those.
@Suite("sink kinds")
struct SinkRegistryTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("docs/alerts.md's sink table has a row for every registered kind, in order, and no other")
    func documentedKinds() throws {
        let text = try String(contentsOf: Self.repository.appendingPathComponent("docs/alerts.md"), encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Sinks\n").dropFirst().first)
        let rows = section.split(separator: "\n").prefix { $0.hasPrefix("|") }.dropFirst(2)
        let types = rows.map { row in String(row.dropFirst("| `".count).prefix { $0 != "`" }) }
        #expect(types == AlertSinkKinds.types)
        #expect(Set(AlertSinkKinds.types).count == AlertSinkKinds.types.count, "a kind registered twice")
    }
}
