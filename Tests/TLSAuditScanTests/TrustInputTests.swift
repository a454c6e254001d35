import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel
import TLSAuditProbe

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
        // An endless body: cut at the size limit, at once.
        let began = Date()
        let cut = try CLI.run(["trust", "update", base + "/endless", "--output", kept])
        #expect(cut.status == 2 && Date().timeIntervalSince(began) < 20, "\(cut.status) \(cut.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == good, "endless: the kept copy is unchanged")
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

    @Test("a signed list: its detached signature verifies with the given key, a wrong one is refused; Google's list URLs take Google's signature and key")
    func signedLists() throws {
        let log = try LabCTLog("lab log A", operator: "Lab One")
        let good = try LabCTLog.listFile([(log, "usable", Date(timeIntervalSince1970: 1_600_000_000))], published: Date().addingTimeInterval(-3_600))
        let other = try LabCTLog.listFile([(log, "usable", Date(timeIntervalSince1970: 1_600_000_000))], published: Date().addingTimeInterval(-60))
        let key = path("signing-key.pem"), publicKey = path("signing-pub.pem"), goodFile = path("good.json"), otherFile = path("other.json")
        try good.write(to: URL(fileURLWithPath: goodFile))
        try other.write(to: URL(fileURLWithPath: otherFile))
        let openssl = "/usr/bin/openssl"
        #expect(try CLI.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key], program: openssl).status == 0)
        #expect(try CLI.run(["pkey", "-in", key, "-pubout", "-out", publicKey], program: openssl).status == 0)
        #expect(try CLI.run(["dgst", "-sha256", "-sign", key, "-out", goodFile + ".sig", goodFile], program: openssl).status == 0)
        #expect(try CLI.run(["dgst", "-sha256", "-sign", key, "-out", otherFile + ".sig", otherFile], program: openssl).status == 0)
        let web = try LabHTTPServer(routes: ["/list.json": Array(good), "/list.sig": Array(try Data(contentsOf: URL(fileURLWithPath: goodFile + ".sig"))),
                                             "/wrong.sig": Array(try Data(contentsOf: URL(fileURLWithPath: otherFile + ".sig")))])
        defer { web.stop() }
        let kept = path("signed-kept.json")
        let signed = try CLI.run(["trust", "update", web.url("/list.json"), "--signature", web.url("/list.sig"), "--public-key", publicKey, "--output", kept])
        #expect(signed.status == 0, "\(signed.stderr)")
        let wrong = try CLI.run(["trust", "update", web.url("/list.json"), "--signature", web.url("/wrong.sig"), "--public-key", publicKey,
                                 "--output", path("wrong-kept.json")])
        #expect(wrong.status == 1 && wrong.stderr.contains("does not verify with the key in \(publicKey)"), "\(wrong.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path("wrong-kept.json")))
        // Google's lists: the .sig beside the list and Google's key; other URLs carry no required signature.
        let google = try #require(TrustInputSignature.google(for: "https://www.gstatic.com/ct/log_list/v3/log_list.json"))
        #expect(google.source == "https://www.gstatic.com/ct/log_list/v3/log_list.sig")
        #expect(TrustInputSignature.google(for: web.url("/list.json")) == nil)
        // The shipped Google key is a public key: a lab signature is refused for not verifying, not for the key.
        let googleKeyed = TrustInputSignature(source: goodFile + ".sig", publicKeyPEM: TrustInputSignature.googleLogListKeyPEM, keyName: "Google's log list key")
        #expect(throws: InputError.self) { try googleKeyed.verify(Array(good), of: goodFile) }
        do { try googleKeyed.verify(Array(good), of: goodFile) } catch {
            #expect("\(error)".contains("does not verify with Google's log list key"), "\(error)")
        }
    }

    @Test("Apple's roots from a file: verified (every block a CA certificate, none cut off) and used by --trust-store apple; trust update keeps them")
    func appleRootsFromFile() throws {
        let leaf = try pki.leaf()
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        func scan(_ extra: [String]) throws -> CLI.Output {
            try CLI.run(["scan", "--format", "json", "--trust-store", "apple", "--connect-to", "127.0.0.1", "--timeout", "5",
                         "\(TestPKI.hostname):\(server.port)"] + extra)
        }
        let anchored = /"anchored"\s*:\s*true/
        let bundle = path("apple-roots.pem")
        try (pki.root.pem + TrustStore.appleSnapshotPEM).write(toFile: bundle, atomically: true, encoding: .utf8)
        let withLab = try scan(["--apple-roots", bundle])
        #expect(withLab.stdout.contains(anchored), "\(withLab.stdout.prefix(2000))\(withLab.stderr)")
        let shipped = try scan([])
        #expect(!shipped.stdout.contains(anchored), "the lab root is not Apple's")
        let cut = path("apple-roots-cut.pem")
        try (pki.root.pem + String(pki.intermediate.pem.prefix(300))).write(toFile: cut, atomically: true, encoding: .utf8)
        let refusedCut = try scan(["--apple-roots", cut])
        #expect(refusedCut.status == 64 && refusedCut.stderr.contains("do not parse"), "\(refusedCut.stderr)")
        let withLeaf = path("apple-roots-leaf.pem")
        try (pki.root.pem + leaf.pem).write(toFile: withLeaf, atomically: true, encoding: .utf8)
        let refusedLeaf = try scan(["--apple-roots", withLeaf])
        #expect(refusedLeaf.status == 64 && refusedLeaf.stderr.contains("is not a CA certificate"), "\(refusedLeaf.stderr)")
        // Kept by hand; a bundle with fewer than half the kept roots is refused.
        let kept = path("kept-apple-roots.pem")
        #expect(try CLI.run(["trust", "update", "--input", "apple-roots", bundle, "--output", kept]).status == 0)
        let few = path("few.pem")
        try pki.root.pem.write(toFile: few, atomically: true, encoding: .utf8)
        let refusedFew = try CLI.run(["trust", "update", "--input", "apple-roots", few, "--output", kept])
        #expect(refusedFew.status == 1 && refusedFew.stderr.contains("fewer than half"), "\(refusedFew.stderr)")
        let status = try CLI.run(["trust", "status", "--apple-roots", kept])
        #expect(status.stdout.contains("apple-roots: \(kept), 157 roots"), "\(status.stdout)")
    }
}
