import Foundation
import Testing
import TLSAuditCore
import TLSAuditOutput
import TLSAuditProbe
import TLSAuditLab
import TLSAuditService
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditServiceLab

@Suite("pins")
struct PinTests {
    init() { TestBackends.register() }

    let lab = ServiceLab.shared
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// A workspace and a configuration (scans every 200 ms) whose targets, each a name and the inside
    /// of its `pins:` flow mapping, are all the lab server on `port`.
    func pinnedService(_ name: String, port: Int, targets: [(name: String, pins: String)]) throws -> (URL, String, String) {
        let workspace = try lab.workspace(name)
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try (lab.configuration(database: database, targets: [], interval: "200ms")
             + targets.map { "  - host: \(ServiceLab.hostname)\n    port: \(port)\n    name: \($0.name)\n    pins: {\($0.pins)}\n" }.joined())
            .write(toFile: config, atomically: true, encoding: .utf8)
        return (workspace, database, config)
    }

    @Test("a pin mismatch is not compliant in status, history, every report format and the exit codes")
    func mismatchCounts() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let wrong = ["sha256/" + Data(repeating: 3, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 4, count: 32).base64EncodedString()]
        let (workspace, database, config) = try pinnedService("pin-counts", port: server.port,
                                                              targets: [("pinned", "mode: public-key, pins: [\"\(wrong[0])\", \"\(wrong[1])\"]")])
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("two scans") { service.storedScans.count >= 2 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)

        // Before: COMPLIANT and exit 0 everywhere but `scan --pin`.
        let status = try Binary.run(["status", "--database", database])
        #expect(status.status == 1, "\(status.stdout)\(status.stderr)")
        #expect(status.stdout.contains("NOT COMPLIANT (pin.mismatch)"), "\(status.stdout)")
        #expect(status.stdout.contains("0 compliant, 1 not compliant"))
        let history = try Binary.run(["history", "--database", database, "pinned"])
        #expect(history.stdout.contains("NOT COMPLIANT (pin.mismatch)"), "\(history.stdout)")
        #expect(!history.stdout.contains("  COMPLIANT"), "\(history.stdout)")
        let json = try Binary.run(["report", "--database", database, "--format", "json"])
        let report = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let summary = report?["summary"] as? [String: Any]
        #expect(summary?["compliant"] as? Int == 0 && summary?["not_compliant"] as? Int == 1, "\(String(describing: summary))")
        #expect(json.stdout.contains("\"pin.mismatch\""))
        for format in ["html", "text", "markdown", "csv"] {
            let rendered = try Binary.run(["report", "--database", database, "--format", format])
            #expect(rendered.stdout.contains("pin.mismatch"), "\(format)")
        }
        // Messages as a person writes them: no empty old leaf on a first mismatch, ISO 8601 in log
        // lines, a 10-minute period in minutes.
        let mismatch = try #require(try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).alerts(limit: 10).first { $0.alert.kind == .pinMismatch })
        #expect(mismatch.alert.changes["old_leaf_sha256"] == nil && mismatch.alert.changes["old_leaf_spki"] == nil, "\(mismatch.alert.changes)")
        let stored = try #require(service.lines(containing: "stored scan").first)
        #expect(stored.range(of: #"started_at=20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z"#, options: .regularExpression) != nil, "\(stored)")
        let short = try Binary.run(["report", "--database", database, "--since", "10m"])
        #expect(short.stdout.contains("10 minutes") && !short.stdout.contains("hours"), "\(short.stdout.prefix(400))")

        let scan = try Binary.run(["scan", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", "--pin", wrong[0], "--pin", wrong[1],
                                   "\(ServiceLab.hostname):\(server.port)"])
        #expect(scan.status == 1)
        #expect(scan.stdout.contains("NOT ATS COMPLIANT (pin.mismatch)"), "\(scan.stdout)")
        #expect(scan.stdout.contains("0 ATS compliant, 1 not compliant"), "\(scan.stdout)")
    }

    @Test("pins import: Apple's Info.plist to groups, with NSIncludesSubdomains' meaning")
    func importInfoPlist() throws {
        let output = try Binary.run(["pins", "import", Self.fixtures.appendingPathComponent("Info.plist").path,
                                     "--host", "a.b.example.com", "--host", "www.example.com", "--host", "api.example.com", "--host", "v2.api.example.com",
                                     "--host", "www.static.example.net", "--host", "example.com.evil.test"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stderr.contains("warning: NSAppTransportSecurity.NSPinnedDomains.static.example.net: a single pinned identity and no backup"))
        #expect(output.stderr.contains("no pinned domain covers www.static.example.net"), "NSIncludesSubdomains is false there")
        #expect(output.stderr.contains("no pinned domain covers example.com.evil.test"))
        // Apple's NSIncludesSubdomains page: "subdomains of the domain that have one additional path component".
        #expect(output.stderr.contains("no pinned domain covers v2.api.example.com"),
                "api.example.com does not include subdomains, and example.com reaches one label below it only")
        #expect(output.stderr.contains("no pinned domain covers a.b.example.com"), "two labels below example.com")
        #expect(output.stderr.contains("no pinned domain covers www.example.com") == false, "one label below example.com")
        let configuration = try ServiceConfiguration.parse(yaml: output.stdout, file: "imported.yaml", baseDirectory: "/tmp")
        let byHost = Dictionary(uniqueKeysWithValues: configuration.targets.map { ($0.host, $0) })
        #expect(Set(byHost.keys) == ["example.com", "www.example.com", "api.example.com", "static.example.net"])
        #expect(byHost["api.example.com"]?.pins?.leafIdentities == ["i7WTqTvh0OioIruIfFR4kMPnBqrS2rdiVPl/s2uC/CY=",
                                                                     "klO23nT2ehFDXCfx3eHTDRESMz3asj1muO+4aIdjiuY="])
        #expect(byHost["api.example.com"]?.pins?.caIdentities == [])
        #expect(byHost["www.example.com"]?.pins?.caIdentities.count == 2)
        #expect(byHost["www.example.com"]?.group == "pinned:example.com")
        #expect(byHost["static.example.net"]?.pins?.caIdentities == ["C5+lpZ7tcVwmwQIMcRtPbsQtWLABXhQzejna0wHFr8M="])
        // The entry the pins come from, for the CT pin forecast: NSIncludesSubdomains reaches names no target names.
        #expect(byHost["www.example.com"]?.pins?.pinnedDomain == PinnedDomainScope(domain: "example.com", includesSubdomains: true))
        #expect(byHost["static.example.net"]?.pins?.pinnedDomain == PinnedDomainScope(domain: "static.example.net", includesSubdomains: false))
        let names = PinForecast.pinnedNames(configuration.targets.map(\.scanTarget))
        #expect(names.contains { $0.domain == "example.com" && $0.includeSubdomains && $0.reaches(["cdn.example.com"]) == "cdn.example.com" })
    }

    @Test("pins import: a bare NSAppTransportSecurity dictionary works; an empty identity array is refused")
    func importEdgeCases() throws {
        let bare = try Binary.run(["pins", "import", Self.fixtures.appendingPathComponent("ATS-only.plist").path])
        #expect(bare.status == 0)
        #expect(bare.stdout.contains("pinned:pinned.example.org"))
        let empty = try Binary.run(["pins", "import", Self.fixtures.appendingPathComponent("EmptyIdentities.plist").path])
        #expect(empty.status == 64)
        #expect(empty.stderr.contains("NSPinnedDomains.broken.example.com.NSPinnedLeafIdentities: empty"))
    }

    @Test("pins import --output: a new file in a new directory, a symlink's target, /dev/stdout; an unwritable file exits 2")
    func importOutput() throws {
        let plist = Self.fixtures.appendingPathComponent("ATS-only.plist").path
        let expected = try Binary.run(["pins", "import", plist]).stdout
        #expect(expected.contains("pinned:pinned.example.org"))
        let workspace = try lab.workspace("pins-output")

        let nested = workspace.appendingPathComponent("new/pins.yaml").path
        let written = try Binary.run(["pins", "import", plist, "--output", nested])
        #expect(written.status == 0 && written.stdout.isEmpty, "\(written.stderr)")
        #expect(try String(contentsOfFile: nested, encoding: .utf8) == expected)

        let target = workspace.appendingPathComponent("target.yaml").path
        try "old\n".write(toFile: target, atomically: true, encoding: .utf8)
        let link = workspace.appendingPathComponent("link.yaml").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(try Binary.run(["pins", "import", plist, "--output", link]).status == 0)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == expected, "the link's target is replaced")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target, "the link stays")

        let device = try Binary.run(["pins", "import", plist, "--output", "/dev/stdout"])
        #expect(device.status == 0 && device.stdout == expected, "\(device.stderr)")

        let unwritable = try Binary.run(["pins", "import", plist, "--output", "/proc/tlsaudit-pins.yaml"])
        #expect(unwritable.status == 2)
        #expect(unwritable.stderr.contains("tlsaudit: cannot write /proc/tlsaudit-pins.yaml"), "\(unwritable.stderr)")
    }

    @Test("tlsaudit pin prints both pin forms per certificate; scan --pin checks them")
    func pinCommandAndScan() throws {
        let leaf = try lab.intermediate.issue(.server([ServiceLab.hostname]))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        defer { server.stop() }
        let target = "\(ServiceLab.hostname):\(server.port)"
        let pins = try Binary.run(["pin", target, "--connect-to", "127.0.0.1", "--ca-file", lab.rootFile])
        #expect(pins.status == 0, "\(pins.stderr)")
        for certificate in [leaf, lab.intermediate, lab.root] {
            #expect(pins.stdout.contains("sha256/\(certificate.summary.spkiSHA256)"))
            #expect(pins.stdout.contains(certificate.summary.colonFingerprint))
        }
        #expect(pins.stdout.contains("mode: public-key"))
        #expect(pins.stdout.contains("<key>NSPinnedLeafIdentities</key>"))
        #expect(pins.stdout.contains("<key>\(ServiceLab.hostname)</key>"))
        #expect(pins.stdout.contains("only\n#     certificate.changed"), "says what a CA pin lets through")
        // The snippet pins the leaf key only (a CA key is offered in comments), with a backup slot.
        let snippet = try #require(pins.stdout.components(separatedBy: "mode: public-key").last?.components(separatedBy: "\n\n").first)
        #expect(snippet.contains("- \"sha256/\(leaf.summary.spkiSHA256)\""))
        #expect(snippet.contains("# - \"sha256/BACKUP=\""))
        #expect(!snippet.contains("- \"sha256/\(lab.intermediate.summary.spkiSHA256)\"") || snippet.contains("#   - \"sha256/\(lab.intermediate.summary.spkiSHA256)"))

        // The recommended pins alert on a same-name certificate with another key from the same CA
        // (a CA pin would call it a match).
        let impostor = try lab.intermediate.issue(.server([ServiceLab.hostname]))
        let swapped = try LabTLSServer(LabServerConfiguration(chain: [impostor, lab.intermediate]))
        defer { swapped.stop() }
        let swappedScan = ["scan", "--format", "json", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", "\(ServiceLab.hostname):\(swapped.port)"]
        #expect(try Binary.run(swappedScan + ["--pin", "sha256/\(leaf.summary.spkiSHA256)"]).status == 1)
        #expect(try Binary.run(swappedScan + ["--pin", "sha256/\(lab.intermediate.summary.spkiSHA256)"]).status == 0)

        let base = ["scan", "--format", "json", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", target]
        let match = try Binary.run(base + ["--pin", "sha256/\(lab.intermediate.summary.spkiSHA256)"])
        #expect(match.status == 0)
        let wrong = try Binary.run(base + ["--pin", "sha256/\(Data(repeating: 9, count: 32).base64EncodedString())"])
        #expect(wrong.status == 1)
        #expect(wrong.stdout.contains("\"pin.mismatch\""))
        // Certificate mode: the intermediate's fingerprint, with colons, as users paste it.
        let byCertificate = try Binary.run(base + ["--pin", lab.intermediate.summary.colonFingerprint])
        #expect(byCertificate.status == 0, "\(byCertificate.stdout.suffix(500))")
        let mixed = try Binary.run(base + ["--pin", "sha256/\(leaf.summary.spkiSHA256)", "--pin", leaf.summary.sha256Fingerprint])
        #expect(mixed.status == 64, "mixing SPKI and certificate pins has no AFNetworking mode")

        let file = try lab.workspace("pin").appendingPathComponent("leaf.pem")
        try leaf.pem.write(to: file, atomically: true, encoding: .utf8)
        let fromFile = try Binary.run(["pin", "--cert", file.path])
        #expect(fromFile.status == 0)
        #expect(fromFile.stdout.contains("sha256/\(leaf.summary.spkiSHA256)"))
        #expect(fromFile.stdout.contains("NSPinnedLeafIdentities"))

        // A bundle listing the intermediate first: the leaf is the certificate that issued none of
        // the others, and only its key goes into NSPinnedLeafIdentities.
        let bundle = file.deletingLastPathComponent().appendingPathComponent("bundle.pem")
        try (lab.intermediate.pem + leaf.pem).write(to: bundle, atomically: true, encoding: .utf8)
        let fromBundle = try Binary.run(["pin", "--cert", bundle.path])
        #expect(fromBundle.status == 0, "\(fromBundle.stderr)")
        let leafIdentities = try #require(fromBundle.stdout.components(separatedBy: "<key>NSPinnedLeafIdentities</key>").last?
            .components(separatedBy: "</array>").first)
        #expect(leafIdentities.contains(leaf.summary.spkiSHA256), "\(fromBundle.stdout)")
        #expect(!leafIdentities.contains(lab.intermediate.summary.spkiSHA256), "a CA key pinned as the leaf: \(fromBundle.stdout)")
        #expect(fromBundle.stdout.contains("<key>\(ServiceLab.hostname)</key>"))
        // Only CA certificates: CA pins, never a leaf identity.
        let caFile = file.deletingLastPathComponent().appendingPathComponent("ca.pem")
        try lab.intermediate.pem.write(to: caFile, atomically: true, encoding: .utf8)
        let caOnly = try Binary.run(["pin", "--cert", caFile.path])
        #expect(caOnly.status == 0)
        #expect(!caOnly.stdout.contains("NSPinnedLeafIdentities"), "\(caOnly.stdout)")
        #expect(caOnly.stdout.contains("<key>NSPinnedCAIdentities</key>"))
        #expect(caOnly.stdout.contains("- \"sha256/\(lab.intermediate.summary.spkiSHA256)\""))
        // A root and the leaf, without the intermediate: the root issued nothing given, yet the
        // CA:FALSE leaf is the leaf.
        let rootAndLeaf = file.deletingLastPathComponent().appendingPathComponent("root-leaf.pem")
        try (lab.root.pem + leaf.pem).write(to: rootAndLeaf, atomically: true, encoding: .utf8)
        let split = try Binary.run(["pin", "--cert", rootAndLeaf.path])
        let splitLeaf = try #require(split.stdout.components(separatedBy: "<key>NSPinnedLeafIdentities</key>").last?.components(separatedBy: "</array>").first,
                                     "\(split.stdout)")
        #expect(splitLeaf.contains(leaf.summary.spkiSHA256) && !splitLeaf.contains(lab.root.summary.spkiSHA256), "\(split.stdout)")
        // A self-signed server certificate with CA:TRUE (openssl req -x509's default): on a device its
        // chain is that one certificate, which only a leaf pin matches.
        var request = LabCertificateRequest.server([ServiceLab.hostname])
        request.isCA = true
        let selfSigned = try LabCertificateAuthority.selfSigned(request)
        let selfFile = file.deletingLastPathComponent().appendingPathComponent("self.pem")
        try selfSigned.pem.write(to: selfFile, atomically: true, encoding: .utf8)
        let alone = try Binary.run(["pin", "--cert", selfFile.path])
        #expect(alone.stdout.contains("<key>NSPinnedLeafIdentities</key>") && alone.stdout.contains(selfSigned.summary.spkiSHA256), "\(alone.stdout)")
    }

    @Test("scan --pin takes a bundled certificate file (PEM or DER .cer) as its SPKI pin; pin values still work")
    func scanPinFile() throws {
        let leaf = try lab.intermediate.issue(.server([ServiceLab.hostname]))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        defer { server.stop() }
        let workspace = try lab.workspace("scan-pin-file")
        let pem = workspace.appendingPathComponent("leaf.pem")
        try leaf.pem.write(to: pem, atomically: true, encoding: .utf8)
        let der = workspace.appendingPathComponent("intermediate.cer")
        try Data(lab.intermediate.der).write(to: der)
        let other = workspace.appendingPathComponent("other.der")
        try Data(try lab.intermediate.issue(.server([ServiceLab.hostname])).der).write(to: other)
        let base = ["scan", "--format", "json", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", "\(ServiceLab.hostname):\(server.port)"]

        // The same pin as the value `pin --cert` prints for the file.
        let printed = try Binary.run(["pin", "--cert", pem.path])
        #expect(printed.stdout.contains("sha256/\(leaf.summary.spkiSHA256)"))
        for file in [pem, der] {
            let scan = try Binary.run(base + ["--pin", file.path])
            #expect(scan.status == 0, "\(file.lastPathComponent): \(scan.stderr)\(scan.stdout.suffix(400))")
            #expect(scan.stdout.contains("\"state\" : \"match\""), "\(scan.stdout.suffix(800))")
        }
        // Another key from the same CA: a mismatch, exit 1.
        let mismatch = try Binary.run(base + ["--pin", other.path])
        #expect(mismatch.status == 1, "\(mismatch.stderr)")
        #expect(mismatch.stdout.contains("\"pin.mismatch\""))
        // A file and a pin value together: both SPKI pins, public-key mode.
        let mixed = try Binary.run(base + ["--pin", other.path, "--pin", "sha256/\(leaf.summary.spkiSHA256)"])
        #expect(mixed.status == 0, "\(mixed.stderr)")
        // Neither a pin nor a file; a file that is no certificate.
        let missing = try Binary.run(base + ["--pin", workspace.appendingPathComponent("absent.cer").path])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("nor a certificate file"), "\(missing.stderr)")
        let junk = workspace.appendingPathComponent("junk.pem")
        try "not a certificate\n".write(to: junk, atomically: true, encoding: .utf8)
        let unreadable = try Binary.run(base + ["--pin", junk.path])
        #expect(unreadable.status == 64)
        #expect(unreadable.stderr.contains("--pin \(junk.path)"), "\(unreadable.stderr)")
    }

    @Test("validates_domain_name: false: a pin.domain-name-not-validated warning in check-config, the scan's output and every stored scan")
    func domainNameNotValidated() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let pins = "mode: public-key, pins: [\"sha256/\(lab.good.summary.spkiSHA256)\", \"sha256/\(lab.intermediate.summary.spkiSHA256)\"]"
        let (workspace, database, config) = try pinnedService("no-domain-name", port: server.port,
                                                              targets: [("loose", pins + ", validates_domain_name: false"), ("strict", pins)])

        let check = try Binary.run(["check-config", config])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stderr.contains("validates_domain_name: false") && check.stderr.contains("pin.domain-name-not-validated"), "\(check.stderr)")

        // The scan's own output (text and JSON) for the target as configured.
        let configuration = try ServiceConfiguration.load(path: config)
        let target = try #require(configuration.targets.first(where: { $0.key == "loose" }))
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: lab.rootFile)), judge: AddressAssessment.judge)
        let result = scanner.scan(target.scanTarget)
        let address = try #require(result.addresses.first)
        let finding = try #require(address.findings.first(where: { $0.id.rawValue == "pin.domain-name-not-validated" }))
        #expect(finding.severity == .warning)
        #expect(address.pin?.state == .match, "the warning does not change the pin state")
        let report = ScanReport(toolVersion: "test", generatedAt: Date(), trustStore: "test", timeoutSeconds: 5, targets: [result])
        #expect(ScanTextRenderer(colour: false).render(report).contains("pin.domain-name-not-validated"))

        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans of both targets") { Set(service.storedScans.map(\.target)).count >= 2 && service.storedScans.count >= 4 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        let loose = try Binary.run(["history", "--database", database, "--format", "json", "loose"])
        #expect(loose.stdout.contains("\"pin.domain-name-not-validated\""), "\(loose.stdout.prefix(1500))")
        let strict = try Binary.run(["history", "--database", database, "--format", "json", "strict"])
        #expect(strict.status == 0 && strict.stdout.contains("\"findings\""), "\(strict.stderr)")
        #expect(!strict.stdout.contains("pin.domain-name-not-validated"), "the name is validated by default")
    }

    @Test("configuration: AFNetworking's refusal, file pins, warnings")
    func configuration() throws {
        let workspace = try lab.workspace("pinconfig")
        let certificateFile = workspace.appendingPathComponent("pinned.pem")
        try lab.intermediate.pem.write(to: certificateFile, atomically: true, encoding: .utf8)
        func parse(_ pins: String) throws -> ServiceConfiguration {
            try ServiceConfiguration.parse(yaml: "targets:\n  - host: a.example\n    pins:\n" + pins, file: "t.yaml",
                                           baseDirectory: workspace.path)
        }
        #expect(throws: ConfigurationErrors.self) {
            try parse("      mode: none\n      allow_invalid_certificates: true\n      validates_domain_name: true\n")
        }
        let fromFile = try parse("      mode: certificate\n      pins: [{file: pinned.pem}, \"\(String(repeating: "ab", count: 32))\"]\n")
        #expect(fromFile.targets[0].pins?.pins == [.certificate(lab.intermediate.summary.sha256Fingerprint),
                                                   .certificate(String(repeating: "ab", count: 32))])
        #expect(fromFile.targets[0].pins?.pinnedCertificates == [Data(lab.intermediate.der)], "a file pin keeps the certificate itself")
        let inferred = try parse("      pins: [{file: pinned.pem}]\n")
        #expect(inferred.targets[0].pins?.mode == .publicKey)
        #expect(inferred.targets[0].pins?.pins == [.spki(lab.intermediate.summary.spkiSHA256)])
        #expect(inferred.warnings.count == 1, "a single pin deserves a warning")
        #expect(throws: ConfigurationErrors.self) { try parse("      leaf_identities: []\n") }
        #expect(throws: ConfigurationErrors.self) { try parse("      mode: public-key\n      pins: [\"\(String(repeating: "ab", count: 32))\"]\n") }
    }
}

@Suite("pin evaluation rules")
struct PinEvaluationTests {
    init() { TestBackends.register() }

    static func certificate(_ name: String, spki: String, fingerprint: String) -> CertificateSummary {
        CertificateSummary(subject: "CN=\(name)", issuer: "CN=x", commonName: name, serial: "01", version: 3,
                           notBefore: .distantPast, notAfter: .distantFuture, signatureAlgorithm: "sha256WithRSAEncryption",
                           signatureHash: "SHA256", publicKey: PublicKeyDescription(type: "EC", bits: 256),
                           basicConstraints: nil, keyUsage: nil, extendedKeyUsage: nil,
                           subjectAlternativeNames: SubjectAlternativeNames(dns: [name]), unhandledCriticalExtensions: [],
                           isSelfSigned: false, sha256Fingerprint: fingerprint, spkiSHA256: spki, der: Data())
    }

    static let leaf = certificate("leaf", spki: "LEAF", fingerprint: "leaf-fp")
    static let ca = certificate("ca", spki: "CA", fingerprint: "ca-fp")
    static let root = certificate("root", spki: "ROOT", fingerprint: "root-fp")
    static let path = [PathElement(certificate: leaf, source: .presented, presentedIndex: 0),
                       PathElement(certificate: ca, source: .presented, presentedIndex: 1),
                       PathElement(certificate: root, source: .trustStore, presentedIndex: nil)]
    static let hostnameError = Finding(.trustHostnameMismatch, .error, depth: 0, "x")
    static let expired = Finding(.trustExpired, .error, depth: 0, "x")

    /// `anchorTrusted`: how certificate mode's evaluation with the pinned anchors comes out.
    func evaluate(_ policy: PinPolicy, errors: [Finding] = [], anchorTrusted: Bool = true) -> PinEvaluation.State {
        policy.evaluate(presented: [Self.leaf, Self.ca], path: Self.path, trustErrors: errors) { _ in
            Self.pinnedEvaluation(trusted: anchorTrusted)
        }.state
    }

    static func pinnedEvaluation(trusted: Bool) -> PinnedAnchorEvaluation {
        PinnedAnchorEvaluation(path: trusted ? [leaf, ca] : [leaf],
                               errors: trusted ? [] : [Finding(.trustInvalid, .error, depth: 0, "no pinned anchor")])
    }

    @Test("NSPinnedDomains: leaf identity, CA identity (the trust-store root counts), both, and trust required")
    func apple() {
        #expect(evaluate(PinPolicy(leafIdentities: ["LEAF"])) == .match)
        #expect(evaluate(PinPolicy(leafIdentities: ["CA"])) == .mismatch, "a CA key does not satisfy a leaf identity")
        #expect(evaluate(PinPolicy(caIdentities: ["ROOT"])) == .match)
        #expect(evaluate(PinPolicy(caIdentities: ["LEAF"])) == .mismatch, "the leaf is not a CA")
        #expect(evaluate(PinPolicy(leafIdentities: ["LEAF"], caIdentities: ["NOPE"])) == .mismatch, "both must match")
        #expect(evaluate(PinPolicy(leafIdentities: ["LEAF"]), errors: [Self.expired]) == .mismatch, "pinning adds to trust")
    }

    @Test("an extra certificate the server sends but the path does not use cannot satisfy a pin")
    func extraCertificate() {
        let extra = Self.certificate("pinned but unused", spki: "PINNED", fingerprint: "pinned-fp")
        let evaluate = { (policy: PinPolicy) in
            policy.evaluate(presented: [Self.leaf, Self.ca, extra], path: Self.path, trustErrors: []) { _ in
                // What a real evaluation gives: the chain never reaches the unused extra certificate.
                Self.pinnedEvaluation(trusted: false)
            }.state
        }
        #expect(evaluate(PinPolicy(mode: .publicKey, pins: [.spki("PINNED")])) == .mismatch)
        #expect(evaluate(PinPolicy(caIdentities: ["PINNED"])) == .mismatch)
        #expect(evaluate(PinPolicy(mode: .certificate, pins: [.certificate("pinned-fp")])) == .mismatch)
    }

    @Test("AFNetworking public-key mode: any key of the chain; trust unless allowInvalidCertificates; name per validatesDomainName")
    func publicKey() {
        let policy = PinPolicy(mode: .publicKey, pins: [.spki("ROOT")])
        #expect(evaluate(policy) == .match)
        #expect(evaluate(policy, errors: [Self.expired]) == .mismatch)
        var lenient = policy
        lenient.allowInvalidCertificates = true
        #expect(evaluate(lenient, errors: [Self.expired]) == .match)
        var noName = policy
        noName.validatesDomainName = false
        #expect(evaluate(noName, errors: [Self.hostnameError]) == .match)
        #expect(evaluate(policy, errors: [Self.hostnameError]) == .mismatch)
        #expect(evaluate(PinPolicy(mode: .publicKey, pins: [.spki("OTHER")])) == .mismatch)
    }

    @Test("AFNetworking certificate mode: normal trust first (unless allowInvalidCertificates), then always the pinned anchors")
    func certificateMode() {
        let policy = PinPolicy(mode: .certificate, pins: [.certificate("ca-fp")])
        #expect(evaluate(policy) == .match)
        #expect(evaluate(policy, anchorTrusted: false) == .mismatch)
        #expect(evaluate(policy, errors: [Self.expired]) == .mismatch, "normal trust must pass first")
        var lenient = policy
        lenient.allowInvalidCertificates = true
        #expect(evaluate(lenient, errors: [Self.expired]) == .match, "normal trust is skipped")
        #expect(evaluate(lenient, anchorTrusted: false) == .mismatch, "the pinned-anchor evaluation never is")
        #expect(evaluate(PinPolicy(mode: .certificate, pins: [.certificate("other")])) == .mismatch)
    }

    @Test("without validates_domain_name the trust policy is basic X.509: no name, lifetime, EKU or CT rule")
    func basicX509() {
        let lifetime = Finding(.trustLifetime, .error, depth: 0, "valid for 3650 days")
        var policy = PinPolicy(mode: .publicKey, pins: [.spki("LEAF")], validatesDomainName: false)
        #expect(evaluate(policy, errors: [lifetime, Self.hostnameError]) == .match)
        #expect(evaluate(policy, errors: [Self.expired]) == .mismatch, "dates still count")
        policy.validatesDomainName = true
        #expect(evaluate(policy, errors: [lifetime]) == .mismatch)
    }

    @Test("AFNetworking's refusal and other configuration problems")
    func problems() {
        #expect(!PinPolicy(mode: .none, allowInvalidCertificates: true, validatesDomainName: true).problems.isEmpty)
        #expect(PinPolicy(mode: .none, allowInvalidCertificates: true, validatesDomainName: false).problems.isEmpty)
        #expect(!PinPolicy(mode: .publicKey).problems.isEmpty)
        #expect(PinPolicy(mode: .publicKey, pins: [.spki("A"), .spki("B")]).warnings.isEmpty)
        #expect(PinPolicy(leafIdentities: ["A"]).warnings.count == 1)
    }

    @Test("pin values: SPKI forms and fingerprints with or without colons", arguments: [
        ("sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=", true),
        ("r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=", true),
        (String(repeating: "AB:", count: 31) + "AB", false),
        (String(repeating: "ab", count: 32), false),
    ])
    func values(text: String, isSPKI: Bool) throws {
        let value = try #require(PinValue.parse(text))
        if case .spki = value { #expect(isSPKI) } else { #expect(!isSPKI) }
        #expect(PinValue.parse("not a pin") == nil)
        #expect(PinValue.parse(String(repeating: "ab", count: 31)) == nil)
    }
}
