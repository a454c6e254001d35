import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditMonitoring
import TLSAuditProbe
import TLSAuditReport
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditSupport
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// Tags as a dimension: `status --tag`, `report --tag` with its Apps section, the API's
/// `?tag=` and the app info metric, over real stores, the binary and the service's listener.
@Suite("tags: status, reports, the API and metrics by tag", .serialized)
struct TagTests {
    let lab = ServiceLab.shared
    static let end = "2026-11-20T12:00:00Z"
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let connects = AppHostOutcome(bundle: "com.example.shop", entry: "api.example.com", reliesOn: ["NSExceptionMinimumTLSVersion"],
                                         configuration: "ats-tls12", connects: true, reasons: [], detail: "TLS 1.2 as the app's client")
    static let refused = AppHostOutcome(bundle: "com.example.shop", entry: nil, reliesOn: [], configuration: "ats-default", connects: false,
                                        reasons: ["ats.tls-version"], detail: "TLS 1.0 only")

    /// A SQLite store of four targets: two of the shop app's (one it connects to, one not), one
    /// tagged `prod` only, one without tags.
    func store() throws -> String {
        let path = try lab.workspace("tags").appendingPathComponent("tlsaudit.sqlite").path
        let store = try SQLiteScanStore(path: path, sha256: Digest.sha256Hex)
        let at = try #require(Timestamp.parse(Self.end)).addingTimeInterval(-3_600)
        func scan(_ target: String, tags: [String], app: AppHostOutcome?) -> StoredScan {
            var result = AddressScanResult(
                address: "127.0.0.1", family: "IPv4", port: 443, status: .completed, startedAt: at, durationMs: 12,
                handshake: nil, error: nil, chain: nil, findings: [],
                ats: PolicyVerdict(policy: .atsRuntime, compliant: true, rules: [:], failedRules: []))
            result.app = app
            var scan = StoredScan(target: target, host: "\(target).example", port: 443, sni: nil, result: result)
            scan.tags = tags
            return scan
        }
        _ = try store.record([scan("shop-api", tags: ["app:com.example.shop", "prod"], app: Self.connects),
                              scan("shop-legacy", tags: ["app:com.example.shop"], app: Self.refused),
                              scan("intranet", tags: ["prod"], app: nil), scan("plain", tags: [], app: nil)],
                             decide: AlertSettings.decision(nil))
        return path
    }

    static func statusTargets(_ output: Binary.Output) throws -> [[String: Any]] {
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        return try #require(document["targets"] as? [[String: Any]])
    }

    @Test("status --tag: only the targets carrying every tag given, in text and JSON; rows carry tags and the app outcome; the table says what an app's verdict relies on")
    func statusByTag() throws {
        let database = try store()
        let shop = try Self.statusTargets(try Binary.run(["status", "--database", database, "--format", "json", "--tag", "app:com.example.shop"]))
        #expect(shop.compactMap { $0["target"] as? String } == ["shop-api", "shop-legacy"])
        #expect(shop.first?["tags"] as? [String] == ["app:com.example.shop", "prod"])
        let app = try #require(shop.first?["app"] as? [String: Any], "\(shop)")
        #expect(app["relies_on"] as? [String] == ["NSExceptionMinimumTLSVersion"] && app["connects"] as? Bool == true)
        let both = try Self.statusTargets(try Binary.run(["status", "--database", database, "--format", "json",
                                                          "--tag", "app:com.example.shop", "--tag", "prod"]))
        #expect(both.compactMap { $0["target"] as? String } == ["shop-api"], "every tag given, not any")
        let all = try Self.statusTargets(try Binary.run(["status", "--database", database, "--format", "json"]))
        #expect(all.count == 4 && all.first { $0["target"] as? String == "plain" }?["tags"] as? [String] == [])

        let text = try Binary.run(["status", "--database", database, "--tag", "prod"]).stdout
        let lines = text.split(separator: "\n")
        #expect(lines.first?.hasSuffix("TAGS") == true, "\(text)")
        #expect(lines.contains { $0.hasPrefix("intranet") } && lines.contains { $0.hasPrefix("shop-api") } && !text.contains("plain"), "\(text)")
        #expect(text.contains("shop-api 127.0.0.1: app com.example.shop connects, relying on NSExceptionDomains 'api.example.com' (NSExceptionMinimumTLSVersion)"),
                "\(text)")
        let legacy = try Binary.run(["status", "--database", database, "--tag", "app:com.example.shop"]).stdout
        #expect(legacy.contains("shop-legacy 127.0.0.1: app com.example.shop does not connect (ats.tls-version)"), "\(legacy)")
        let none = try Binary.run(["status", "--database", database, "--tag", "app:com.example.other"])
        #expect(none.status == 0 && none.stdout == "no target carries 'app:com.example.other'\n", "\(none.stdout)")
    }

    @Test("a result kept in a spill file before tags existed (no tags key) reads back with none; one with tags keeps them")
    func spilledWithoutTags() throws {
        var scan = StoredScan(target: "t", host: "h", port: 443, sni: nil, result: AddressScanResult(
            address: "127.0.0.1", family: "IPv4", port: 443, status: .completed, startedAt: Date(timeIntervalSince1970: 1_800_000_000),
            durationMs: 1, handshake: nil, error: nil, chain: nil, findings: [],
            ats: PolicyVerdict(policy: .atsRuntime, compliant: true, rules: [:], failedRules: [])))
        scan.tags = ["prod"]
        let line = try JSONEncoder().encode(scan)
        #expect(try JSONDecoder().decode(StoredScan.self, from: line).tags == ["prod"])
        var old = try #require(try JSONSerialization.jsonObject(with: line) as? [String: Any])
        #expect(old.removeValue(forKey: "tags") != nil)
        let decoded = try JSONDecoder().decode(StoredScan.self, from: try JSONSerialization.data(withJSONObject: old))
        #expect(decoded.tags == [] && decoded.target == "t" && decoded.result.address == "127.0.0.1")
    }

    @Test("status JSON with tags and an app outcome is valid against the OpenAPI document's Status schema")
    func statusSchema() throws {
        let directory = try lab.workspace("tags-schema")
        try APIDocument.json().write(to: directory.appendingPathComponent("openapi.json"))
        let output = try Binary.run(["status", "--database", try store(), "--format", "json"])
        #expect(output.stdout.contains("\"relies_on\""))
        try output.stdout.write(to: directory.appendingPathComponent("status.json"), atomically: true, encoding: .utf8)
        let validated = try Binary.run(["python3", "-c", """
            import json, jsonschema
            spec = json.load(open('openapi.json'))
            schema = dict({'$ref': '#/components/schemas/Status'}, components=spec['components'])
            jsonschema.validate(json.load(open('status.json')), schema, cls=jsonschema.Draft202012Validator)
            broken = json.load(open('status.json')); next(t for t in broken['targets'] if 'app' in t)['app']['connects'] = 'yes'
            try:
                jsonschema.validate(broken, schema, cls=jsonschema.Draft202012Validator); print('broken accepted')
            except jsonschema.ValidationError:
                print('valid')
            """], program: "/usr/bin/env", directory: directory.path)
        #expect(validated.status == 0 && validated.stdout == "valid\n", "\(validated.stdout)\(validated.stderr)")
    }

    @Test("report --tag: only the tagged targets; the Apps section in every format says what each server's verdict relies on or why the app does not connect; the JSON validates against docs/report.schema.json")
    func reportByTag() throws {
        let database = try store()
        let common = ["report", "--database", database, "--at", Self.end, "--since", "1d"]
        let json = try Binary.run(common + ["--format", "json", "--tag", "app:com.example.shop"])
        #expect(json.status == 0, "\(json.stderr)")
        let report = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(json.stdout.utf8))
        #expect(report.targets.map(\.target) == ["shop-api", "shop-legacy"] && report.summary.targets == 2)
        #expect(report.targets.first?.tags == ["app:com.example.shop", "prod"])
        let app = try #require(report.apps?.first)
        #expect(report.apps?.count == 1 && app.bundle == "com.example.shop" && app.targets == 2 && app.compliant == 1)
        #expect(app.addresses.map(\.status) == ["compliant", "not-compliant"])
        #expect(app.addresses.first?.reliesOn == "NSExceptionDomains 'api.example.com' (NSExceptionMinimumTLSVersion)")
        #expect(app.addresses.last?.reliesOn == nil && app.addresses.last?.reasons == ["ats.tls-version"])

        // Another tag: the app's section covers the app's targets among those reported only.
        let prod = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(
            try Binary.run(common + ["--format", "json", "--tag", "prod"]).stdout.utf8))
        #expect(prod.targets.map(\.target) == ["intranet", "shop-api"])
        #expect(prod.apps?.first?.targets == 1 && prod.apps?.first?.compliant == 1)
        #expect(prod.targets.first { $0.target == "intranet" }?.tags == ["prod"])

        let schema = Self.repository.appendingPathComponent("docs/report.schema.json").path
        #expect(try LabJSONSchema.complaint(json.stdout, schema: schema) == nil)
        // Every target is compliant by its own policy: "not-compliant" is the app entry's status only.
        let broken = json.stdout.replacingOccurrences(of: "\"not-compliant\"", with: "\"fine\"")
        #expect(broken != json.stdout, "the app entry as written: \(json.stdout)")
        #expect(try LabJSONSchema.complaint(broken, schema: schema) != nil, "an app status the schema does not know is refused")

        for format in ["text", "markdown", "html"] {
            let rendered = try Binary.run(common + ["--format", format, "--tag", "app:com.example.shop"]).stdout
            #expect(rendered.contains("com.example.shop") && rendered.contains("1 of 2 targets compliant for the app"), "\(format)")
            #expect(rendered.contains("api.example.com") && rendered.contains("NSExceptionMinimumTLSVersion") && rendered.contains("ats.tls-version"),
                    "\(format): \(rendered)")
        }
        let csv = try Binary.run(common + ["--format", "csv"]).stdout.split(separator: "\r\n")
        #expect(csv.first?.hasSuffix(",fix_rank,fix,tags,apps,app_status,app_detail") == true, "\(csv.first ?? "")")
        let api = try #require(csv.first { $0.hasPrefix("shop-api,") })
        #expect(api.hasSuffix(",app:com.example.shop prod,com.example.shop,compliant,\"NSExceptionDomains 'api.example.com' (NSExceptionMinimumTLSVersion)\""),
                "\(api)")
        #expect(csv.first { $0.hasPrefix("plain,") }?.hasSuffix(",,,,") == true)
    }

}
