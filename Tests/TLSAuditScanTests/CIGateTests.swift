import Foundation
import Testing
import TLSAuditLab
import TLSAuditModel
import TLSAuditOutput

/// `--format junit`, `--format sarif`, `--baseline` and `--write-baseline` of `app audit`, `scan`,
/// `ats` and `verify` (the CI gate), against lab servers: every document is checked by a real
/// validator (xmllint with the JUnit schema Jenkins reads, Python's jsonschema with the OASIS SARIF
/// 2.1.0 schema), and the exit statuses a pipeline reads are the ones documented.
@Suite("CI gate: JUnit, SARIF and baselines")
struct CIGateTests {
    let pki = TestPKI.shared
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/ci")
    static let junitSchema = fixtures.appendingPathComponent("junit-10.xsd").path
    static let sarifSchema = fixtures.appendingPathComponent("sarif-schema-2.1.0.json").path

    /// The document, after the validator found nothing to say about it.
    @discardableResult
    static func validJUnit(_ output: CLI.Output, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let complaint = try LabXMLSchema.complaint(output.stdout, schema: junitSchema)
        #expect(complaint == nil, "junit-10.xsd: \(complaint ?? "")\n\(output.stdout)", sourceLocation: sourceLocation)
        return output.stdout
    }

    /// The SARIF log's only run, after the validator found nothing to say about it.
    static func validSARIF(_ output: CLI.Output, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let complaint = try LabJSONSchema.complaint(output.stdout, schema: sarifSchema)
        #expect(complaint == nil, "sarif-schema-2.1.0.json: \(complaint ?? "")", sourceLocation: sourceLocation)
        let log = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        let runs = try #require(log["runs"] as? [[String: Any]], sourceLocation: sourceLocation)
        return try #require(runs.first, sourceLocation: sourceLocation)
    }

    static func results(_ run: [String: Any]) -> [[String: Any]] { run["results"] as? [[String: Any]] ?? [] }

    /// The `<testcase>` element named `name` (its text up to `</testcase>`), or nil.
    static func testCase(_ xml: String, named name: String) -> String? {
        guard let start = xml.range(of: "<testcase name=\"\(name)\"") else { return nil }
        guard let end = xml[start.upperBound...].range(of: "</testcase>") else { return nil }
        return String(xml[start.lowerBound..<end.upperBound])
    }

    /// `failures="N"` of the test suite.
    static func failures(_ xml: String) -> Int? {
        guard let range = xml.range(of: "<testsuite name=") , let count = xml[range.upperBound...].range(of: "failures=\"") else { return nil }
        return Int(xml[count.upperBound...].prefix { $0.isNumber })
    }

    /// A lab server for `name` with a leaf from the trusted intermediate.
    func server(_ name: String, adjust: (inout LabCertificateRequest) -> Void = { _ in }) throws -> LabTLSServer {
        let leaf = try pki.leaf(name, adjust: adjust)
        return try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
    }

    func expiredServer(_ name: String) throws -> LabTLSServer {
        try server(name) { request in
            request.notBefore = Date().addingTimeInterval(-90 * 86_400)
            request.notAfter = Date().addingTimeInterval(-86_400)
        }
    }

    /// An Info.plist: an exception that changes nothing for good.gate.test, and a misspelt key.
    func plist() throws -> (path: String, text: String) {
        let text = AppAuditTests.infoPlist("""

            <key>NSExceptionDomains</key>
            <dict>
              <key>good.gate.test</key>
              <dict>
                <key>NSExceptionMinimumTLSVersion</key>
                <string>TLSv1.0</string>
                <key>NSIncludesSubdomain</key>
                <true/>
              </dict>
            </dict>
            """)
        let file = pki.directory.appendingPathComponent("Gate-\(UUID().uuidString.prefix(8)).plist")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return (file.path, text)
    }

    func appAudit(_ plist: String, hosts: [String], _ extra: [String]) throws -> CLI.Output {
        try CLI.run(["app", "audit", plist, "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3"]
                    + hosts.flatMap { ["--host", $0] } + extra, limit: 120)
    }

    @Test("app audit: JUnit and SARIF valid, a case per host and one for the plist, failures with ids and fixes, a host not reached skipped, findings located in the Info.plist")
    func appAuditFormats() throws {
        let good = try server("good.gate.test")
        let expired = try expiredServer("expired.gate.test")
        let gone = try server("gone.gate.test")
        gone.stop()
        defer { good.stop(); expired.stop() }
        let (plist, text) = try plist()
        let hosts = ["good.gate.test:\(good.port)", "expired.gate.test:\(expired.port)", "gone.gate.test:\(gone.port)"]

        let junit = try appAudit(plist, hosts: hosts, ["--format", "junit"])
        #expect(junit.status == 2, "a host not reached: exit 2 (\(junit.stderr))")
        let xml = try Self.validJUnit(junit)
        let goodCase = try #require(Self.testCase(xml, named: hosts[0]), "\(xml)")
        #expect(!goodCase.contains("<failure") && !goodCase.contains("<skipped"), "\(goodCase)")
        let expiredCase = try #require(Self.testCase(xml, named: hosts[1]), "\(xml)")
        #expect(expiredCase.contains("<failure type=\"") && expiredCase.contains("trust.expired") && expiredCase.contains("Fix: "), "\(expiredCase)")
        #expect(expiredCase.contains("The app logs NSURLErrorDomain -12"), "the error the app logs: \(expiredCase)")
        let goneCase = try #require(Self.testCase(xml, named: hosts[2]), "\(xml)")
        #expect(goneCase.contains("<skipped message=\"not reached: "), "\(goneCase)")
        let plistCase = try #require(Self.testCase(xml, named: "NSAppTransportSecurity"), "\(xml)")
        #expect(plistCase.contains("<failure type=\"app.exception-unneeded\""), "\(plistCase)")
        #expect(Self.failures(xml) == 2, "the expired host and the unneeded key")

        let sarif = try appAudit(plist, hosts: hosts, ["--format", "sarif"])
        #expect(sarif.status == 2)
        let run = try Self.validSARIF(sarif)
        let rules = (run["tool"] as? [String: Any]).flatMap { $0["driver"] as? [String: Any] }.flatMap { $0["rules"] as? [[String: Any]] } ?? []
        #expect(rules.count == FindingCatalog.entries.count, "one rule per finding id of the catalog")
        let expiredRule = rules.first { $0["id"] as? String == "trust.expired" }
        #expect((expiredRule?["helpUri"] as? String)?.hasSuffix("docs/findings.md#chain-trust") == true, "\(expiredRule ?? [:])")
        #expect((expiredRule?["defaultConfiguration"] as? [String: Any])?["level"] as? String == "error")
        let results = Self.results(run)
        let unneeded = try #require(results.first { $0["ruleId"] as? String == "app.exception-unneeded" }, "\(results)")
        let location = try #require((unneeded["locations"] as? [[String: Any]])?.first)
        let physical = location["physicalLocation"] as? [String: Any]
        let expectedLine = try #require(text.components(separatedBy: "\n").firstIndex { $0.contains("<key>NSExceptionMinimumTLSVersion</key>") }) + 1
        #expect((physical?["region"] as? [String: Any])?["startLine"] as? Int == expectedLine, "\(location)")
        #expect((physical?["artifactLocation"] as? [String: Any])?["uri"] as? String == plist)
        #expect((location["logicalLocations"] as? [[String: Any]])?.first?["fullyQualifiedName"] as? String
                == "NSAppTransportSecurity.NSExceptionDomains.good.gate.test.NSExceptionMinimumTLSVersion")
        let problem = try #require(results.first { $0["ruleId"] as? String == "app.plist-problem" }, "\(results)")
        #expect(problem["level"] as? String == "warning")
        let problemLine = try #require(text.components(separatedBy: "\n").firstIndex { $0.contains("<key>NSIncludesSubdomain</key>") }) + 1
        #expect((((problem["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any])?["region"] as? [String: Any])?["startLine"] as? Int
                == problemLine, "\(problem)")
        #expect(results.contains { $0["ruleId"] as? String == "trust.expired" && $0["level"] as? String == "error" })
        let invocation = try #require((run["invocations"] as? [[String: Any]])?.first)
        #expect(invocation["exitCode"] as? Int == 2)
        let notes = invocation["toolExecutionNotifications"] as? [[String: Any]] ?? []
        #expect(notes.count == 1 && ((notes.first?["message"] as? [String: Any])?["text"] as? String)?.contains(hosts[2]) == true, "\(notes)")
    }

    @Test("baseline: a second run over the same app exits 0 listing the known findings; a changed server exits 1 with only its new finding failed")
    func baseline() throws {
        let good = try server("good.gate.test")
        let expired = try expiredServer("expired.gate.test")
        defer { expired.stop() }
        let (plist, _) = try plist()
        let baselineFile = pki.directory.appendingPathComponent("baseline-\(UUID().uuidString.prefix(8)).sarif").path
        var hosts = ["good.gate.test:\(good.port)", "expired.gate.test:\(expired.port)"]

        let first = try appAudit(plist, hosts: hosts, ["--format", "junit", "--write-baseline", baselineFile])
        #expect(first.status == 1, "the expired host and the unneeded key fail the first run")
        #expect(Self.failures(try Self.validJUnit(first)) == 2)
        let written = try CLI.Output(status: 0, stdout: String(contentsOfFile: baselineFile, encoding: .utf8), stderr: "", seconds: 0)
        #expect(Self.results(try Self.validSARIF(written)).count >= 3, "the baseline holds today's findings")

        let again = try appAudit(plist, hosts: hosts, ["--format", "junit", "--baseline", baselineFile])
        #expect(again.status == 0, "nothing new: \(again.stderr)")
        let xml = try Self.validJUnit(again)
        #expect(Self.failures(xml) == 0, "\(xml)")
        #expect(Self.testCase(xml, named: hosts[1])?.contains("known (in the baseline): trust.expired") == true, "\(xml)")

        // A JSON output is a baseline too.
        let json = try appAudit(plist, hosts: hosts, ["--format", "json"])
        let jsonFile = pki.directory.appendingPathComponent("baseline-\(UUID().uuidString.prefix(8)).json").path
        try json.stdout.write(toFile: jsonFile, atomically: true, encoding: .utf8)
        let fromJSON = try appAudit(plist, hosts: hosts, ["--format", "sarif", "--baseline", jsonFile])
        #expect(fromJSON.status == 0, "\(fromJSON.stderr)")
        let states = Self.results(try Self.validSARIF(fromJSON)).map { $0["baselineState"] as? String }
        #expect(!states.isEmpty && states.allSatisfy { $0 == "unchanged" }, "\(states)")

        // The good host's server changes to a SHA-1 leaf: that is the one new finding.
        good.stop()
        let changed = try server("good.gate.test") { $0.digest = .sha1 }
        defer { changed.stop() }
        hosts[0] = "good.gate.test:\(changed.port)"
        let sarif = try appAudit(plist, hosts: hosts, ["--format", "sarif", "--baseline", baselineFile])
        #expect(sarif.status == 1, "a new finding: \(sarif.stderr)")
        let results = Self.results(try Self.validSARIF(sarif))
        let new = results.filter { $0["baselineState"] as? String == "new" }
        #expect(!new.isEmpty && new.allSatisfy { (($0["properties"] as? [String: Any])?["case"] as? String) == hosts[0] }, "\(new)")
        #expect(new.contains { ((($0["message"] as? [String: Any])?["text"] as? String) ?? "").contains("sha1WithRSAEncryption") },
                "\(new.map { $0["message"] ?? "" })")
        #expect(results.contains { $0["ruleId"] as? String == "trust.expired" && $0["baselineState"] as? String == "unchanged" })
        let junit = try appAudit(plist, hosts: hosts, ["--format", "junit", "--baseline", baselineFile])
        #expect(junit.status == 1)
        let changedXML = try Self.validJUnit(junit)
        #expect(Self.failures(changedXML) == 1, "\(changedXML)")
        #expect(Self.testCase(changedXML, named: hosts[0])?.contains("<failure") == true, "\(changedXML)")
        #expect(Self.testCase(changedXML, named: hosts[1])?.contains("<failure") == false, "\(changedXML)")
        let text = try appAudit(plist, hosts: hosts, ["--baseline", baselineFile])
        #expect(text.status == 1 && text.stdout.contains("NEW \(hosts[0]): ats.trust")
                && text.stdout.contains("known \(hosts[1]): trust.expired"), "\(text.stdout)")
    }

    @Test("scan, ats and verify: JUnit and SARIF valid; scan's findings located on the targets file's line; exit statuses as without a format")
    func serverCommands() throws {
        let good = try server(TestPKI.hostname)
        let expired = try expiredServer(TestPKI.hostname)
        defer { good.stop(); expired.stop() }
        let targets = pki.directory.appendingPathComponent("targets-\(UUID().uuidString.prefix(8)).txt")
        try "# staging\n\(TestPKI.hostname):\(good.port)\n\(TestPKI.hostname):\(expired.port)\n".write(to: targets, atomically: true, encoding: .utf8)
        let scan = ["scan", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--timeout", "5", "--targets-file", targets.path]

        let junit = try CLI.run(scan + ["--format", "junit"])
        #expect(junit.status == 1, "\(junit.stderr)")
        let xml = try Self.validJUnit(junit)
        #expect(Self.testCase(xml, named: "\(TestPKI.hostname):\(good.port) 127.0.0.1")?.contains("<failure") == false, "\(xml)")
        #expect(Self.testCase(xml, named: "\(TestPKI.hostname):\(expired.port) 127.0.0.1")?.contains("trust.expired") == true, "\(xml)")
        let sarif = try CLI.run(scan + ["--format", "sarif"])
        #expect(sarif.status == 1)
        let expiredResult = try #require(Self.results(try Self.validSARIF(sarif)).first { $0["ruleId"] as? String == "trust.expired" })
        let physical = ((expiredResult["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any])
        #expect((physical?["region"] as? [String: Any])?["startLine"] as? Int == 3, "the expired target's line: \(expiredResult)")
        #expect((physical?["artifactLocation"] as? [String: Any])?["uri"] as? String == targets.path)

        let ats = ["ats", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--timeout", "5", "\(TestPKI.hostname):\(expired.port)"]
        let atsJUnit = try CLI.run(ats + ["--format", "junit"], limit: 120)
        #expect(atsJUnit.status == 1)
        let atsXML = try Self.validJUnit(atsJUnit)
        #expect(Self.testCase(atsXML, named: "\(TestPKI.hostname):\(expired.port) default")?.contains("<failure type=\"ats.trust\"") == true, "\(atsXML)")
        #expect(Self.failures(atsXML) == 1, "only the default configuration decides")
        let atsSARIF = try CLI.run(ats + ["--format", "sarif"], limit: 120)
        #expect(Self.results(try Self.validSARIF(atsSARIF)).map { $0["ruleId"] as? String } == ["ats.trust"])
        let goodATS = try CLI.run(["ats", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--timeout", "5",
                                   "\(TestPKI.hostname):\(good.port)", "--format", "junit"], limit: 120)
        let goodXML = try Self.validJUnit(goodATS)
        #expect(goodATS.status == 0 && Self.failures(goodXML) == 0)

        let chain = pki.directory.appendingPathComponent("expired-\(UUID().uuidString.prefix(8)).pem")
        let expiredLeaf = try pki.leaf { request in
            request.notBefore = Date().addingTimeInterval(-90 * 86_400)
            request.notAfter = Date().addingTimeInterval(-86_400)
        }
        try (expiredLeaf.pem + pki.intermediate.pem).write(to: chain, atomically: true, encoding: .utf8)
        let verify = ["verify", "--chain", chain.path, "--roots", pki.rootFile, "--host", TestPKI.hostname]
        let verifyJUnit = try CLI.run(verify + ["--format", "junit"])
        #expect(verifyJUnit.status == 1)
        #expect(try Self.validJUnit(verifyJUnit).contains("trust.expired"))
        let verifySARIF = try CLI.run(verify + ["--format", "sarif"])
        let verifyResults = Self.results(try Self.validSARIF(verifySARIF))
        #expect(verifyResults.contains { $0["ruleId"] as? String == "trust.expired" }, "\(verifyResults)")
    }

    @Test("exit statuses for CI: 0 nothing to fix, 64 a usage error, 2 an unreadable baseline or one of another command")
    func exitStatuses() throws {
        let good = try server("good.gate.test")
        defer { good.stop() }
        let plain = pki.directory.appendingPathComponent("Plain-\(UUID().uuidString.prefix(8)).plist")
        try AppAuditTests.infoPlist("").write(to: plain, atomically: true, encoding: .utf8)
        let host = ["good.gate.test:\(good.port)"]
        let clean = try appAudit(plain.path, hosts: host, ["--format", "junit"])
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(Self.failures(try Self.validJUnit(clean)) == 0)
        #expect(try appAudit(plain.path, hosts: host, ["--format", "xml"]).status == 64)
        let missing = try appAudit(plain.path, hosts: host, ["--format", "sarif", "--baseline", "/nonexistent/baseline.sarif"])
        #expect(missing.status == 2 && missing.stderr.contains("--baseline"), "\(missing.stderr)")
        let other = pki.directory.appendingPathComponent("other-\(UUID().uuidString.prefix(8)).json")
        try "{\"schema\": \"tlsaudit.scan/1\"}".write(to: other, atomically: true, encoding: .utf8)
        let wrong = try appAudit(plain.path, hosts: host, ["--baseline", other.path])
        #expect(wrong.status == 2 && wrong.stderr.contains("not an output of this command"), "\(wrong.stderr)")
        // Another command's SARIF is not this one's baseline either.
        let verifyLog = pki.directory.appendingPathComponent("verify-\(UUID().uuidString.prefix(8)).sarif")
        try CLI.run(["verify", "--chain", pki.rootFile, "--roots", pki.rootFile, "--format", "sarif"]).stdout
            .write(to: verifyLog, atomically: true, encoding: .utf8)
        let otherSARIF = try appAudit(plain.path, hosts: host, ["--baseline", verifyLog.path])
        #expect(otherSARIF.status == 2 && otherSARIF.stderr.contains("not of tlsaudit app audit"), "\(otherSARIF.stderr)")
        // ats with no server to reach still writes its document: the default configuration, not reached.
        good.stop()
        let unreached = ["ats", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--timeout", "3", "good.gate.test:\(good.port)"]
        let junit = try CLI.run(unreached + ["--format", "junit"])
        #expect(junit.status == 2)
        #expect(try Self.validJUnit(junit).contains("<skipped message=\"not reached: "))
        let sarif = try CLI.run(unreached + ["--format", "sarif"])
        #expect(sarif.status == 2)
        let notes = (try Self.validSARIF(sarif)["invocations"] as? [[String: Any]])?.first?["toolExecutionNotifications"] as? [[String: Any]]
        #expect(notes?.count == 1, "\(notes ?? [])")
    }

    @Test("README's pipelines: the GitHub Actions workflow and the GitLab CI job pass each system's schema, and README shows them as they are")
    func pipelineExamples() throws {
        let repository = Self.fixtures.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: repository.appendingPathComponent("README.md"), encoding: .utf8)
        let python = try LabPrerequisite.program(["python3"], package: "python3")
        try LabPrerequisite.pythonModule("check_jsonschema", install: "python3 -m pip install check-jsonschema")
        for (file, schema) in [("contrib/ci/github-actions.yml", "vendor.github-workflows"), ("contrib/ci/gitlab-ci.yml", "vendor.gitlab-ci")] {
            let path = repository.appendingPathComponent(file).path
            let checked = try CLI.run(["-m", "check_jsonschema", "--builtin-schema", schema, path], program: python)
            #expect(checked.status == 0 && checked.stdout.contains("ok -- validation done"), "\(file): \(checked.stdout)\(checked.stderr)")
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(readme.contains("```yaml\n" + text + "```"), "README shows \(file) as it is")
            #expect(text.contains("--baseline ci/tlsaudit-baseline.sarif --format"), "the job gates on the baseline")
        }
    }

    @Test("the gate's rules: a known finding fails nothing, a new one does, a failed case with nothing to name always fails; the plist's key lines")
    func gateRules() throws {
        let known = GateFinding(id: "trust.expired", severity: .error, message: "expired", location: GateLocation(logical: "a"), fails: true)
        let warning = GateFinding(id: "lint.cn-not-in-san", severity: .warning, message: "lint", fails: false)
        var report = GateReport(command: "scan", subject: "t", toolVersion: "0", cases: [
            GateCase(name: "one", group: "g", outcome: .failed, detail: "", findings: [known, warning]),
            GateCase(name: "two", group: "g", outcome: .passed, detail: "", findings: [warning]),
        ])
        report.apply(GateBaseline(fingerprints: [known.fingerprint(in: "one")]))
        #expect(report.exitCodeAgainstBaseline == 0 && JUnitXML.document(report).contains("failures=\"0\""))
        report.apply(GateBaseline(fingerprints: []))
        #expect(report.exitCodeAgainstBaseline == 1)
        // The same id in another case, or at another key path, is another finding.
        report.apply(GateBaseline(fingerprints: [known.fingerprint(in: "two"), "one|trust.expired|b"]))
        #expect(report.exitCodeAgainstBaseline == 1)
        let unnamed = GateReport(command: "scan", subject: "t", toolVersion: "0", cases: [
            GateCase(name: "three", group: "g", outcome: .failed, detail: "refused", findings: []),
        ])
        #expect(unnamed.exitCodeAgainstBaseline == 1 && JUnitXML.document(unnamed).contains("<failure type=\"failed\" message=\"refused\">"))
        let unreached = GateReport(command: "scan", subject: "t", toolVersion: "0", cases: [
            GateCase(name: "four", group: "g", outcome: .notReached("refused"), detail: "", findings: []),
            GateCase(name: "five", group: "g", outcome: .failed, detail: "", findings: [known]),
        ])
        #expect(unreached.exitCodeAgainstBaseline == 2, "not reached wins over a new finding")
        // The same id at two depths of one chain are two findings.
        let leaf = GateFinding(id: "trust.expired", severity: .error, message: "", qualifier: "depth 0", fails: true)
        let intermediate = GateFinding(id: "trust.expired", severity: .error, message: "", qualifier: "depth 1", fails: true)
        #expect(leaf.fingerprint(in: "c") != intermediate.fingerprint(in: "c"))

        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>NSAppTransportSecurity</key>
            <dict>
              <key>NSExceptionDomains</key>
              <dict>
                <key>example.com</key>
                <dict><key>NSIncludesSubdomains</key><true/></dict>
                <key>api.example.com</key>
                <dict>
                  <key>NSIncludesSubdomains</key><true/>
                </dict>
              </dict>
            </dict>
            </dict></plist>
            """
        let lines = try #require(PlistKeyLines(plist))
        #expect(lines.line(of: "NSAppTransportSecurity.NSExceptionDomains.api.example.com.NSIncludesSubdomains") == 11)
        #expect(lines.line(of: "NSAppTransportSecurity.NSExceptionDomains.example.com.NSIncludesSubdomains") == 8)
        #expect(lines.line(of: "NSAppTransportSecurity.NSExceptionDomains.other.test") == 5, "the deepest key found")
        #expect(PlistKeyLines("bplist00") == nil)
        let crlf = try #require(PlistKeyLines(plist.replacingOccurrences(of: "\n", with: "\r\n")))
        #expect(crlf.line(of: "NSAppTransportSecurity.NSExceptionDomains.api.example.com.NSIncludesSubdomains") == 11, "CRLF lines")
    }
}
