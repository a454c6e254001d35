import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab

/// Chains built to inflate output, memory and time: each stays within `RecordBudget`, and the
/// test measures the process (wall time, peak RSS, bytes written) with generous margins.
@Suite("hostile chains stay small", .serialized)
struct HostileChainTests {
    /// A CA with `permitted` + `excluded` DNS name constraints under the trusted test root, and a
    /// leaf with `names` SANs outside them all (plus the test host name, so that only the
    /// constraints fail it).
    static func constraintBomb(permitted: Int, excluded: Int, names: Int) throws -> (leaf: LabCertificate, ca: LabCertificate) {
        var caRequest = LabCertificateRequest.authority("name-constraint bomb CA")
        let subtrees = (0..<permitted).map { "permitted;DNS:p\($0).allowed.test" } + (0..<excluded).map { "excluded;DNS:x\($0).blocked.test" }
        caRequest.extraExtensions = [.init(name: "nameConstraints", value: "critical," + subtrees.joined(separator: ","))]
        let ca = try TestPKI.shared.root.issue(caRequest)
        var leafRequest = LabCertificateRequest.server([TestPKI.hostname] + (0..<names).map { "n\($0).outside.test" })
        leafRequest.extendedKeyUsage = "serverAuth"
        return (try ca.issue(leafRequest), ca)
    }

    /// Writes `certificates` as one PEM file in the test directory.
    static func chainFile(_ certificates: [LabCertificate], name: String) throws -> String {
        let path = TestPKI.shared.directory.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8)).pem").path
        try certificates.map(\.pem).joined().write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func expectBoundedFindings(_ findings: [Finding], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(findings.count <= RecordBudget.findings, sourceLocation: sourceLocation)
        for finding in findings {
            #expect(finding.message.utf8.count <= RecordBudget.messageBytes, "\(finding.id): \(finding.message.utf8.count) bytes",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("verify: 6,000 names against 6,000 name constraints is quick, small and names a few of each")
    func nameConstraintBombOffline() throws {
        let bomb = try Self.constraintBomb(permitted: 3_000, excluded: 3_000, names: 6_000)
        let file = try Self.chainFile([bomb.leaf, bomb.ca], name: "nc-bomb")
        let inputBytes = bomb.leaf.der.count + bomb.ca.der.count
        // Before the budget: a 43 MB text line, 2.4 s and 203 MiB for a quarter of this.
        let text = try CLI.runMeasured(["verify", "--roots", TestPKI.shared.rootFile, "--host", TestPKI.hostname, "--chain", file])
        #expect(text.output.status == 1, "\(text.output.stderr)")
        #expect(text.stdoutBytes < 8_192, "text output \(text.stdoutBytes) bytes")
        #expect(text.output.seconds < 5, "took \(text.output.seconds) s")
        #expect(text.peakMiB < 150, "peak \(text.peakMiB) MiB")
        #expect(text.output.stdout.contains("6,001 names are outside the permitted DNS subtrees"), "\(text.output.stdout.prefix(3000))")
        #expect(text.output.stdout.contains("and 5,996 more"))

        let json = try CLI.runMeasured(["verify", "--format", "json", "--roots", TestPKI.shared.rootFile,
                                        "--host", TestPKI.hostname, "--chain", file])
        let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(json.output.stdout.utf8))
        Self.expectBoundedFindings(report.findings)
        #expect(report.findings.contains { $0.id == .trustNameConstraints })
        // The document describes the chain (every SAN and subtree, once per listing): linear in the input, never more.
        #expect(json.stdoutBytes < 12 * inputBytes + 65_536, "JSON \(json.stdoutBytes) bytes for \(inputBytes) bytes of certificates")
        #expect(json.output.seconds < 5, "took \(json.output.seconds) s")
        #expect(json.peakMiB < 200, "peak \(json.peakMiB) MiB")
    }

    @Test("scan: a name-constraint bomb server gives bounded findings, and its stored history stays small")
    func nameConstraintBombServer() throws {
        let bomb = try Self.constraintBomb(permitted: 1_500, excluded: 1_500, names: 1_500)
        let server = try LabTLSServer(LabServerConfiguration(chain: [bomb.leaf, bomb.ca]))
        defer { server.stop() }
        let database = TestPKI.shared.directory.appendingPathComponent("bomb-\(UUID().uuidString.prefix(8)).sqlite").path
        let arguments = ["scan", "--format", "json", "--ca-file", TestPKI.shared.rootFile, "--connect-to", "127.0.0.1",
                         "--timeout", "5", "--database", database, "\(TestPKI.hostname):\(server.port)"]
        var sizes: [Int] = []
        for _ in 0..<4 {
            let scan = try CLI.runMeasured(arguments)
            #expect(scan.output.status == 1, "\(scan.output.stderr)")
            #expect(scan.output.seconds < 5, "took \(scan.output.seconds) s")
            #expect(scan.peakMiB < 150, "peak \(scan.peakMiB) MiB")
            let result = try JSONDecoder.tlsaudit.decode(ScanReport.self, from: Data(scan.output.stdout.utf8)).single
            Self.expectBoundedFindings(result.findings)
            #expect(result.errorIDs.contains("trust.name-constraints"))
            sizes.append(Self.databaseBytes(database))
        }
        // The certificates are stored once, by the first scan; each later scan adds its record only.
        for (before, after) in zip(sizes.dropFirst(), sizes.dropFirst(2)) {
            #expect(after - before <= RecordBudget.recordBytes + 32_768, "a scan grew the database by \(after - before) bytes")
        }
        let history = try CLI.runMeasured(["history", "--database", database, "--format", "json", TestPKI.hostname])
        #expect(history.output.status == 0, "\(history.output.stderr)")
        // Before the budget: 373 MB for a service's worth of these scans.
        #expect(history.stdoutBytes < 4 * 65_536, "history wrote \(history.stdoutBytes) bytes")
        let text = try CLI.runMeasured(["history", "--database", database, TestPKI.hostname])
        #expect(text.stdoutBytes < 16_384, "history wrote \(text.stdoutBytes) bytes")
    }

    /// `tlsaudit scan --format json` of `server` as the test host, measured, its findings within the budget.
    static func measuredScan(_ server: LabTLSServer, sourceLocation: SourceLocation = #_sourceLocation) throws -> (CLI.Measured, AddressScanResult) {
        let scan = try CLI.runMeasured(["scan", "--format", "json", "--ca-file", TestPKI.shared.rootFile, "--connect-to", "127.0.0.1",
                                        "--timeout", "5", "\(TestPKI.hostname):\(server.port)"])
        let result = try JSONDecoder.tlsaudit.decode(ScanReport.self, from: Data(scan.output.stdout.utf8)).single
        expectBoundedFindings(result.findings, sourceLocation: sourceLocation)
        return (scan, result)
    }

    /// The database file and its write-ahead log.
    static func databaseBytes(_ path: String) -> Int {
        [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
        }
    }

    @Test("scan: 3,000 SANs that do not match name a few and count the rest")
    func thousandsOfNames() throws {
        let leaf = try TestPKI.shared.leaf("other.tlsaudit.test") { request in
            request.dnsNames += (0..<3_000).map { "name\($0).tlsaudit.test" }
        }
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, TestPKI.shared.intermediate]))
        defer { server.stop() }
        let (scan, result) = try Self.measuredScan(server)
        let mismatch = try #require(result.finding("trust.hostname-mismatch"))
        #expect(mismatch.message.contains("and 2,991 more"), "\(mismatch.message)")
        #expect(scan.output.seconds < 5, "took \(scan.output.seconds) s")
        #expect(scan.peakMiB < 150, "peak \(scan.peakMiB) MiB")
    }

    @Test("scan: a chain of 24 intermediates keeps the first 16 presented certificates and the whole path, and says so")
    func deepChain() throws {
        var issuers = [TestPKI.shared.intermediate]
        for level in 0..<23 {
            issuers.append(try issuers.last!.issue(.authority("deep intermediate \(level)")))
        }
        let leaf = try issuers.last!.leaf()
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf] + issuers.reversed()))
        defer { server.stop() }
        let (scan, result) = try Self.measuredScan(server)
        let chain = try #require(result.chain)
        #expect(chain.presented.count == RecordBudget.presentedCertificates)
        #expect(chain.path.count == 26, "path of \(chain.path.count)") // leaf, 24 intermediates, root
        #expect(chain.anchored)
        let note = try #require(result.finding("chain.oversized"))
        #expect(note.severity == .warning)
        #expect(note.message.contains("the chain has 25 certificates"), "\(note.message)")
        #expect(scan.output.seconds < 5, "took \(scan.output.seconds) s")
    }

    @Test("scan: 40 CAs with the same subject, one of them the issuer, are judged quickly and correctly")
    func sameSubjectCertificates() throws {
        let decoys = try (0..<39).map { _ in try TestPKI.shared.root.issue(.authority("same-subject CA")) }
        let issuer = try TestPKI.shared.root.issue(.authority("same-subject CA"))
        let leaf = try issuer.leaf()
        // The issuer last: beyond the presented certificates the record keeps.
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf] + decoys + [issuer]))
        defer { server.stop() }
        let (scan, result) = try Self.measuredScan(server)
        let chain = try #require(result.chain)
        #expect(chain.anchored, "\(result.findings)")
        #expect(chain.path.map(\.certificate.sha256Fingerprint).dropFirst().first == issuer.summary.sha256Fingerprint)
        #expect(result.errorIDs.isEmpty, "\(result.findings)")
        #expect(result.finding("chain.oversized") != nil)
        #expect(scan.output.seconds < 5, "took \(scan.output.seconds) s")
        #expect(scan.peakMiB < 150, "peak \(scan.peakMiB) MiB")
    }
}

@Suite("big local inputs are bounded")
struct InputLimitTests {
    @Test("verify refuses a certificate file over 4 MiB at once, and reads repeated chains as one")
    func certificateFiles() throws {
        let leaf = try TestPKI.shared.leaf()
        let chain = leaf.pem + TestPKI.shared.intermediate.pem
        // 44-73 MB of repeated chains took 7.3 s and 646 MiB before the limit.
        let large = try HostileChainTests.chainFile([], name: "large")
        try String(repeating: chain, count: 4 * 1024 * 1024 / chain.utf8.count + 1).write(toFile: large, atomically: true, encoding: .utf8)
        let refused = try CLI.runMeasured(["verify", "--roots", TestPKI.shared.rootFile, "--chain", large])
        #expect(refused.output.status == 2)
        #expect(refused.output.stderr.contains("is larger than 4 MiB, the most tlsaudit reads"), "\(refused.output.stderr)")
        #expect(refused.output.seconds < 2, "took \(refused.output.seconds) s")
        #expect(refused.peakMiB < 100, "peak \(refused.peakMiB) MiB")

        let repeated = try HostileChainTests.chainFile([], name: "repeated")
        try String(repeating: chain, count: 500).write(toFile: repeated, atomically: true, encoding: .utf8)
        let verified = try CLI.runMeasured(["verify", "--format", "json", "--roots", TestPKI.shared.rootFile,
                                            "--host", TestPKI.hostname, "--chain", repeated])
        #expect(verified.output.status == 0, "\(verified.output.stderr)")
        let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(verified.output.stdout.utf8))
        #expect(report.chain.presented.count == 2)
        #expect(verified.output.seconds < 3, "took \(verified.output.seconds) s")

        let missing = try CLI.run(["verify", "--chain", TestPKI.shared.directory.appendingPathComponent("absent.pem").path])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("No such file or directory"), "\(missing.stderr)")
    }

    @Test("scan refuses a --targets-file over 4 MiB")
    func targetsFile() throws {
        let file = try HostileChainTests.chainFile([], name: "targets")
        try String(repeating: "a-rather-long-host-name-for-a-target.example:443\n", count: 90_000)
            .write(toFile: file, atomically: true, encoding: .utf8)
        let output = try CLI.run(["scan", "--targets-file", file])
        #expect(output.status == 64)
        #expect(output.stderr.contains("is larger than 4 MiB"), "\(output.stderr)")
        #expect(output.seconds < 2)
    }
}

extension LabCertificate {
    /// A valid server leaf for the test host name, issued by this certificate.
    func leaf() throws -> LabCertificate {
        var request = LabCertificateRequest.server([TestPKI.hostname])
        request.extendedKeyUsage = "serverAuth"
        return try issue(request)
    }
}
