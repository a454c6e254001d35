import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditSupport

/// The JSON output matches its documented schema (docs/scan.schema.json), checked by an
/// independent validator (Python's jsonschema), on a report mixing every kind of result.
@Suite("scan JSON schema")
struct JSONSchemaTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let schemaPath = repository.appendingPathComponent("docs/scan.schema.json").path

    /// Validates `json` against the schema; returns the validator's complaint, or nil when valid.
    static func validate(_ json: String, schema schemaPath: String = schemaPath) throws -> String? {
        try LabJSONSchema.complaint(json, schema: schemaPath)
    }

    @Test("the compliance report JSON (the golden file the report tests compare against) validates against docs/report.schema.json")
    func complianceReport() throws {
        let golden = Self.repository.appendingPathComponent("Tests/TLSAuditReportTests/Fixtures/report/golden.json")
        let json = try String(contentsOf: golden, encoding: .utf8)
        #expect(json.contains("\"schema\" : \"tlsaudit.report/1\""))
        let complaint = try Self.validate(json, schema: Self.repository.appendingPathComponent("docs/report.schema.json").path)
        #expect(complaint == nil, "\(complaint ?? "")")
        // The validator does reject what breaks the schema.
        let broken = json.replacingOccurrences(of: "\"status\" : \"compliant\"", with: "\"status\" : \"fine\"")
        #expect(try Self.validate(broken, schema: Self.repository.appendingPathComponent("docs/report.schema.json").path) != nil)
    }

    @Test("a report with compliant, non-compliant, failed and unresolvable targets validates")
    func mixedReport() throws {
        let pki = TestPKI.shared
        let good = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        let weak = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(key: .rsa(bits: 1024))], maxVersion: .tls1_0,
                                                           cipherList: "AES128-SHA", dhGroup: nil))
        let mutual = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate],
                                                             clientCertificates: .required(trusting: pki.clientAuthority)))
        let tarpit = try LabHostileServer(.tarpit)
        defer {
            good.stop()
            weak.stop()
            mutual.stop()
            tarpit.stop()
        }
        let output = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                  "--timeout", "1", "\(TestPKI.hostname):\(good.port)", "\(TestPKI.hostname):\(weak.port)",
                                  "\(TestPKI.hostname):\(mutual.port)", "\(TestPKI.hostname):\(tarpit.port)"])
        #expect(output.status == 2)
        let report = try output.report()
        #expect(report.summary == ScanSummary(targets: 4, addresses: 4, compliant: 1, notCompliant: 1, failed: 2))
        #expect(try Self.validate(output.stdout) == nil)

        let unresolved = try CLI.run(["scan", "--format", "json", "--timeout", "1", "no-such-host.invalid"])
        #expect(try Self.validate(unresolved.stdout) == nil)

        let pinned = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                  "--pin", "sha256/\(Data(repeating: 3, count: 32).base64EncodedString())",
                                  "\(TestPKI.hostname):\(good.port)"])
        #expect(pinned.status == 1)
        #expect(try pinned.report().single.pin?.state == .mismatch)
        #expect(try Self.validate(pinned.stdout) == nil)

        let enumerated = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                      "--enumerate", "\(TestPKI.hostname):\(weak.port)"])
        #expect(try enumerated.report().single.enumeration?.protocols.count == 6)
        #expect(try Self.validate(enumerated.stdout) == nil)

        // Mozilla's profile with every opt-in check: enumeration, inventory, headers, vulnerabilities, mozilla.* rules.
        let everything = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                      "--policy", "mozilla-intermediate", "--checks", "inventory,headers,vulnerabilities",
                                      "\(TestPKI.hostname):\(good.port)"])
        let judged = try everything.report().single
        #expect(judged.ats.policy == .mozillaIntermediate && judged.vulnerabilities != nil && judged.enumeration != nil && judged.inventory != nil)
        let complaint = try Self.validate(everything.stdout)
        #expect(complaint == nil, "\(complaint ?? "")")

        // Nothing is lost reading the JSON back (snake_case keys round-trip for every field).
        for output in [output, pinned, enumerated, everything] {
            let reencoded = String(decoding: try JSONDocumentEncoder.tlsaudit.encode(try output.report()), as: UTF8.self)
            #expect(reencoded + "\n" == output.stdout)
            // The same bytes as Foundation's encoder with the same options, on real handshakes.
            let foundation = JSONEncoder()
            foundation.keyEncodingStrategy = .convertToSnakeCase
            foundation.dateEncodingStrategy = .iso8601
            foundation.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            #expect(String(decoding: try foundation.encode(try output.report()), as: UTF8.self) + "\n" == output.stdout)
        }
    }

    @Test("the validator does reject a report that breaks the schema")
    func rejectsDrift() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try TestPKI.shared.leaf(), TestPKI.shared.intermediate]))
        defer { server.stop() }
        let output = try CLI.scan(port: server.port)
        #expect(try Self.validate(output.stdout) == nil)
        let drifted = output.stdout.replacingOccurrences(of: "\"compliant\" : true", with: "\"compliant\" : \"yes\"")
        #expect(drifted != output.stdout)
        #expect(try Self.validate(drifted) != nil)
    }
}
