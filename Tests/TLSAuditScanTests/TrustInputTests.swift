import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel

/// The CT log list as a trust input: fetched from a local HTTP server, verified (schema, log_id =
/// SHA-256 of the key, never older than the kept copy), kept atomically, and used.
@Suite("trust inputs")
struct TrustInputTests {
    let pki = TestPKI.shared

    func path(_ name: String) -> String { pki.directory.appendingPathComponent("\(UUID().uuidString.prefix(6))-\(name)").path }

    @Test("a list served over HTTP is fetched, verified, kept and used; tampered, truncated, invalid, older and oversized lists are refused with the reason and the kept copy stays")
    func fetchedVerifiedKept() throws {
        let first = try LabCTLog("lab log A", operator: "Lab One"), second = try LabCTLog("lab log B", operator: "Lab Two")
        let entries = [(first, "usable", Date(timeIntervalSince1970: 1_600_000_000)), (second, "usable", Date(timeIntervalSince1970: 1_600_000_000))]
        let good = try LabCTLog.listFile(entries, published: Date().addingTimeInterval(-3_600))
        let older = try LabCTLog.listFile(entries, published: Date().addingTimeInterval(-86_400))
        let tampered = try LabCTLog.listFile(entries, replacingKeyOf: second)
        let web = try LabHTTPServer(routes: ["/list.json": Array(good), "/older.json": Array(older), "/tampered.json": Array(tampered),
                                             "/truncated.json": Array(good.prefix(good.count / 2)), "/invalid.json": Array("<html>".utf8),
                                             "/huge.json": [UInt8](repeating: 0x20, count: 10 << 20)])
        defer { web.stop() }
        let base = "http://127.0.0.1:\(web.port)"
        let kept = path("ct-log-list.json")
        let updated = try CLI.run(["trust", "update", base + "/list.json", "--output", kept])
        #expect(updated.status == 0 && updated.stdout.contains("2 logs"), "\(updated.stdout)\(updated.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == good, "kept byte for byte")
        for (name, status, reason) in [("tampered", Int32(1), "not the SHA-256 of its key"), ("truncated", 1, "not a CT log list"),
                                       ("invalid", 1, "not a CT log list"), ("older", 1, "before the CT log list in force or kept"),
                                       ("huge", 2, "\(base)/huge.json")] {
            let refused = try CLI.run(["trust", "update", "\(base)/\(name).json", "--output", kept])
            #expect(refused.status == status && refused.stderr.contains(reason), "\(name): \(refused.status) \(refused.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == good, "\(name): the kept copy is unchanged")
        }
        let down = try CLI.run(["trust", "update", "http://127.0.0.1:\(try LabPorts.unusedPort())/list.json", "--output", kept])
        #expect(down.status == 2, "\(down.stderr)")
        // --ct-log-list takes the URL: the lab SCTs verify against the fetched list.
        let leaf = try pki.leaf()
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let scan = try CLI.scan(port: server.port, extra: ["--ct-log-list", base + "/list.json"])
        #expect(scan.status == 0 && !scan.stderr.contains("No such file"), "\(scan.stderr)")
        let status = try CLI.run(["trust", "status", "--ct-log-list", kept])
        #expect(status.stdout.contains("ct-log-list: \(kept) (version lab") && status.stdout.contains("2 logs") && status.stdout.contains("0 days old"),
                "\(status.stdout)")
        #expect(status.stdout.contains("distrust: tlsaudit's snapshot") && status.stdout.contains("apple-roots:"), "\(status.stdout)")
    }
}
