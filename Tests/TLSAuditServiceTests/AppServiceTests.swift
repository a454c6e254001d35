import Foundation
import Testing
import TLSAuditLab
import TLSAuditModel
import TLSAuditService
import TLSAuditServiceLab

/// An app watched by the service: `app import` writes the targets, `serve` scans them, and
/// `status --tag app:BUNDLE_ID` answers host by host what `app audit` answers.
@Suite("app import + serve")
struct AppServiceTests {
    init() { TestBackends.register() }

    static let bundle = "test.tlsaudit.shop"
    static let names = ["modern.shop.test", "legacy.shop.test", "nofs.shop.test", "plain.shop.test", "swapped.shop.test"]

    @Test("the same per-host answers from app audit and from app import + serve in status --tag (ATS exceptions, NSPinnedDomains, AFNetworking pins of the bundle's certificate), with the exception each compliant host relies on")
    func importThenServe() throws {
        let lab = ServiceLab.shared
        let leaf = try lab.intermediate.issue(.server(Self.names, key: .rsa(bits: 2048)))
        let modern = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        let legacy = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "ECDHE-RSA-AES128-SHA"))
        let noForwardSecrecy = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate], minVersion: .tls1_2, maxVersion: .tls1_2,
                                                                       cipherList: "AES128-GCM-SHA256"))
        // The same names under another key: the app's AFNetworking pin on the bundled leaf refuses it.
        let swappedLeaf = try lab.intermediate.issue(.server(Self.names, key: .rsa(bits: 2048)))
        let swapped = try LabTLSServer(LabServerConfiguration(chain: [swappedLeaf, lab.intermediate]))
        defer { modern.stop(); legacy.stop(); noForwardSecrecy.stop(); swapped.stop() }
        let workspace = try lab.workspace("app-import")
        let app = workspace.appendingPathComponent("Shop.app")
        try FileManager.default.createDirectory(at: app, withIntermediateDirectories: true)
        try Data(leaf.der).write(to: app.appendingPathComponent("server.cer"))
        let plist = app.appendingPathComponent("Info.plist").path
        try """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>
            <key>CFBundleIdentifier</key><string>\(Self.bundle)</string>
            <key>NSAppTransportSecurity</key><dict>
              <key>NSExceptionDomains</key><dict>
                <key>legacy.shop.test</key><dict><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string></dict>
                <key>nofs.shop.test</key><dict><key>NSExceptionRequiresForwardSecrecy</key><false/></dict>
              </dict>
              <key>NSPinnedDomains</key><dict>
                <key>modern.shop.test</key><dict><key>NSPinnedLeafIdentities</key><array>
                  <dict><key>SPKI-SHA256-BASE64</key><string>\(leaf.summary.spkiSHA256)</string></dict></array></dict>
              </dict>
            </dict></dict></plist>
            """.write(toFile: plist, atomically: true, encoding: .utf8)
        let hosts = ["modern.shop.test:\(modern.port)", "legacy.shop.test:\(legacy.port)", "nofs.shop.test:\(noForwardSecrecy.port)",
                     "plain.shop.test:\(legacy.port)", "swapped.shop.test:\(swapped.port)"].flatMap { ["--host", $0] }
        let common = ["--connect-to", "127.0.0.1", "--ca-file", lab.rootFile, "--timeout", "3", "--afnetworking", "certificate"]

        let audit = try Binary.run(["app", "audit", app.path, "--format", "json"] + hosts + common)
        let report = try #require((try? JSONSerialization.jsonObject(with: Data(audit.stdout.utf8))) as? [String: Any], "\(audit.status): \(audit.stderr)")
        let audited = try #require(report["hosts"] as? [[String: Any]])
        var connects: [String: Bool] = [:]
        for host in audited { connects["\(host["host"]!):\(host["port"]!)"] = host["connects"] as? Bool }
        #expect(connects == ["modern.shop.test:\(modern.port)": true, "legacy.shop.test:\(legacy.port)": true,
                             "nofs.shop.test:\(noForwardSecrecy.port)": true, "plain.shop.test:\(legacy.port)": false,
                             "swapped.shop.test:\(swapped.port)": false], "\(audit.stdout)")

        let imported = workspace.appendingPathComponent("app.yaml").path
        let written = try Binary.run(["app", "import", app.path, "--output", imported] + hosts + common)
        #expect(written.status == 0, "\(written.stderr)")
        let yaml = try String(contentsOfFile: imported, encoding: .utf8)
        let configuration = try ServiceConfiguration.parse(yaml: yaml, file: imported, baseDirectory: workspace.path)
        let targets = Dictionary(uniqueKeysWithValues: configuration.targets.map { ($0.host, $0) })
        #expect(Set(targets.keys) == Set(Self.names))
        #expect(targets.values.allSatisfy { $0.tags == ["app:\(Self.bundle)"] && $0.app?.bundle == Self.bundle && $0.trust == .caFile(lab.rootFile) })
        #expect(targets["legacy.shop.test"]?.app?.configuration == "TLSv1.0")
        #expect(targets["nofs.shop.test"]?.app?.configuration == "no-forward-secrecy")
        #expect(targets["plain.shop.test"]?.app?.entry == nil && targets["plain.shop.test"]?.app?.configuration == "default")
        #expect(targets["modern.shop.test"]?.pins?.leafIdentities == [leaf.summary.spkiSHA256], "NSPinnedDomains become the target's pins")
        let afnetworking = try #require(targets["legacy.shop.test"]?.app?.afnetworking, "the AFSecurityPolicy goes into app:")
        #expect(afnetworking.mode == .certificate && afnetworking.pinnedCertificates == [Data(leaf.der)], "the bundled certificate itself, saved beside the file")

        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let config = workspace.appendingPathComponent("serve.yaml").path
        try ("database: \(database)\n" + yaml).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 20) }
        var rows: [[String: Any]] = []
        try service.wait("five app targets in status --tag", timeout: 60) {
            let status = try Binary.run(["status", "--database", database, "--tag", "app:\(Self.bundle)", "--format", "json"])
            let document = (try? JSONSerialization.jsonObject(with: Data(status.stdout.utf8))) as? [String: Any]
            rows = document?["targets"] as? [[String: Any]] ?? []
            return rows.count == 5
        }
        for row in rows {
            let target = try #require(row["target"] as? String)
            #expect(row["compliant"] as? Bool == connects[target], "\(target): status says \(row["compliant"] ?? "nil"), app audit says \(connects[target] ?? false)")
            let app = try #require(row["app"] as? [String: Any], "\(row)")
            #expect(app["connects"] as? Bool == connects[target])
            #expect((row["tags"] as? [String]) == ["app:\(Self.bundle)"])
        }
        let byTarget = Dictionary(uniqueKeysWithValues: rows.map { ($0["target"] as! String, $0["app"] as! [String: Any]) })
        #expect(byTarget["swapped.shop.test:\(swapped.port)"]?["reasons"] as? [String] == ["pin.mismatch"], "\(rows)")
        #expect(byTarget["legacy.shop.test:\(legacy.port)"]?["relies_on"] as? [String] == ["NSExceptionMinimumTLSVersion"])
        #expect(byTarget["nofs.shop.test:\(noForwardSecrecy.port)"]?["relies_on"] as? [String] == ["NSExceptionRequiresForwardSecrecy"])
        #expect(byTarget["legacy.shop.test:\(legacy.port)"]?["entry"] as? String == "legacy.shop.test")
        #expect(byTarget["modern.shop.test:\(modern.port)"]?["relies_on"] as? [String] == [], "a generic client connects too: nothing relied on")
        let text = try Binary.run(["status", "--database", database, "--tag", "app:\(Self.bundle)"])
        #expect(text.stdout.contains("NSExceptionDomains 'legacy.shop.test' (NSExceptionMinimumTLSVersion)"), "\(text.stdout)")
        let other = try Binary.run(["status", "--database", database, "--tag", "app:some.other.app", "--format", "json"])
        #expect(other.stdout.contains("\"targets\" : [\n\n  ]") || other.stdout.contains("\"targets\":[]") || !other.stdout.contains("shop.test"),
                "\(other.stdout)")
    }

    @Test("app import + serve with the system's trust evaluation and the app's client identity: an mTLS server connects with the identity (client_identity:), an expired one under NSExceptionAllowsInsecureHTTPLoads does not, and status carries the error the app logs")
    func importThenServeDeviceTrue() throws {
        let lab = ServiceLab.shared
        let names = ["mtls.bank.test", "expired.bank.test"]
        let clientCA = try LabCertificateAuthority.selfSigned(.authority("bank client CA"))
        var clientRequest = LabCertificateRequest(commonName: "bank app")
        clientRequest.extendedKeyUsage = "clientAuth"
        let client = try clientCA.issue(clientRequest)
        let leaf = try lab.intermediate.issue(.server(names, key: .rsa(bits: 2048)))
        var expiredRequest = LabCertificateRequest.server(names, key: .rsa(bits: 2048))
        expiredRequest.notBefore = Date().addingTimeInterval(-90 * 86_400)
        expiredRequest.notAfter = Date().addingTimeInterval(-86_400)
        let expiredLeaf = try lab.intermediate.issue(expiredRequest)
        let mtls = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate], clientCertificates: .required(trusting: clientCA)))
        let expired = try LabTLSServer(LabServerConfiguration(chain: [expiredLeaf, lab.intermediate]))
        defer { mtls.stop(); expired.stop() }
        let workspace = try lab.workspace("app-device-true")
        let certificate = workspace.appendingPathComponent("client.pem").path
        let key = workspace.appendingPathComponent("client-key.pem").path
        try client.pem.write(toFile: certificate, atomically: true, encoding: .utf8)
        try client.key.pem.write(toFile: key, atomically: true, encoding: .utf8)
        let plist = workspace.appendingPathComponent("Info.plist").path
        try """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>CFBundleIdentifier</key><string>test.tlsaudit.bank</string>
            <key>NSAppTransportSecurity</key><dict><key>NSExceptionDomains</key><dict>
              <key>expired.bank.test</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            </dict></dict></dict></plist>
            """.write(toFile: plist, atomically: true, encoding: .utf8)
        let hosts = ["--host", "mtls.bank.test:\(mtls.port)", "--host", "expired.bank.test:\(expired.port)"]
        let common = ["--connect-to", "127.0.0.1", "--ca-file", lab.rootFile, "--timeout", "3", "--client-cert", certificate, "--client-key", key]
        let imported = workspace.appendingPathComponent("bank.yaml").path
        let written = try Binary.run(["app", "import", plist, "--output", imported] + hosts + common)
        #expect(written.status == 0, "\(written.stderr)")
        let yaml = try String(contentsOfFile: imported, encoding: .utf8)
        #expect(yaml.contains("client_identity: {certificate: \"\(certificate)\", key: \"\(key)\"}"), "\(yaml)")
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let config = workspace.appendingPathComponent("serve.yaml").path
        try ("database: \(database)\n" + yaml).write(toFile: config, atomically: true, encoding: .utf8)
        let checked = try Binary.run(["check-config", config])
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 20) }
        var rows: [[String: Any]] = []
        try service.wait("two app targets in status --tag", timeout: 60) {
            let status = try Binary.run(["status", "--database", database, "--tag", "app:test.tlsaudit.bank", "--format", "json"])
            rows = ((try? JSONSerialization.jsonObject(with: Data(status.stdout.utf8))) as? [String: Any])?["targets"] as? [[String: Any]] ?? []
            return rows.count == 2
        }
        let byTarget = Dictionary(uniqueKeysWithValues: rows.map { ($0["target"] as! String, $0) })
        let mtlsRow = try #require(byTarget["mtls.bank.test:\(mtls.port)"], "\(rows)")
        #expect(mtlsRow["compliant"] as? Bool == true && (mtlsRow["app"] as? [String: Any])?["connects"] as? Bool == true, "\(mtlsRow)")
        let expiredApp = try #require(byTarget["expired.bank.test:\(expired.port)"]?["app"] as? [String: Any], "\(rows)")
        #expect(expiredApp["connects"] as? Bool == false, "the system's evaluation refuses the expired chain: \(expiredApp)")
        #expect((expiredApp["error"] as? [String: Any])?["code"] as? Int == -1200, "\(expiredApp)")
        // The same error in status's text, the app's report section and the alert raised for it.
        let text = try Binary.run(["status", "--database", database, "--tag", "app:test.tlsaudit.bank"])
        #expect(text.stdout.contains("the app logs NSURLErrorDomain -1200 NSURLErrorSecureConnectionFailed"), "\(text.stdout)")
        let report = try Binary.run(["report", "--database", database, "--tag", "app:test.tlsaudit.bank", "--format", "json"])
        #expect(report.stdout.contains("NSURLErrorDomain -1200 NSURLErrorSecureConnectionFailed (kCFStreamErrorDomainSSL -9802 errSSLFatalAlert)"),
                "\(report.stdout.prefix(3000))")
        let alerts = try Binary.run(["alerts", "--database", database, "--format", "json"])
        #expect(alerts.stdout.contains("app test.tlsaudit.bank fails with NSURLErrorDomain -1200"), "\(alerts.stdout.prefix(3000))")

        // A client_identity whose file is gone stops the configuration.
        let broken = workspace.appendingPathComponent("broken.yaml").path
        try yaml.replacingOccurrences(of: key, with: key + ".gone").write(toFile: broken, atomically: true, encoding: .utf8)
        let refused = try Binary.run(["check-config", broken])
        #expect(refused.status != 0 && (refused.stdout + refused.stderr).contains("client_identity key"), "\(refused.stdout)\(refused.stderr)")
    }

    @Test("app import: the YAML on standard output is a valid configuration (hostile names stay text); usage errors exit 64 naming what is wrong")
    func importEdges() throws {
        let workspace = try ServiceLab.shared.workspace("app-import-edges")
        let plist = workspace.appendingPathComponent("Info.plist").path
        func write(_ bundle: String?) throws {
            try """
                <?xml version="1.0" encoding="UTF-8"?>
                <plist version="1.0"><dict>
                \(bundle.map { "<key>CFBundleIdentifier</key><string>\($0)</string>" } ?? "")
                <key>NSAppTransportSecurity</key><dict><key>NSAllowsArbitraryLoads</key><true/>
                  <key>NSExceptionDomains</key><dict><key>old.example</key><dict>
                    <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.1</string><key>NSIncludesSubdomains</key><true/></dict></dict>
                </dict></dict></plist>
                """.write(toFile: plist, atomically: true, encoding: .utf8)
        }
        try write("com.example.\"quoted\": yes")
        let output = try Binary.run(["app", "import", plist, "--host", "api.old.example:8443", "--host", "open.example"])
        #expect(output.status == 0, "\(output.stderr)")
        let configuration = try ServiceConfiguration.parse(yaml: output.stdout, file: "stdout", baseDirectory: workspace.path)
        let targets = Dictionary(uniqueKeysWithValues: configuration.targets.map { ($0.host, $0) })
        #expect(Set(targets.keys) == ["api.old.example", "open.example", "old.example"])
        #expect(targets["api.old.example"]?.port == 8443)
        #expect(targets["api.old.example"]?.app?.reliesOn == ["NSIncludesSubdomains", "NSExceptionMinimumTLSVersion"], "reached through the parent's NSIncludesSubdomains")
        #expect(targets["api.old.example"]?.app?.configuration == "TLSv1.1")
        #expect(targets["old.example"]?.app?.reliesOn == ["NSExceptionMinimumTLSVersion"], "the entry's own name needs no subdomain reach")
        #expect(targets["open.example"]?.app?.configuration == "arbitrary-loads" && targets["open.example"]?.app?.reliesOn == ["NSAllowsArbitraryLoads"])
        #expect(targets["open.example"]?.tags == ["app:com.example.\"quoted\": yes"], "a hostile bundle identifier is quoted, not YAML")

        let badMode = try Binary.run(["app", "import", plist, "--host", "a.example", "--afnetworking", "pinned"])
        #expect(badMode.status == 64 && badMode.stderr.contains("'pinned' is not an AFSSLPinningMode"), "\(badMode.stderr)")
        let noCertificates = try Binary.run(["app", "import", plist, "--host", "a.example", "--afnetworking", "certificate"])
        #expect(noCertificates.status == 64 && noCertificates.stderr.contains("has none"), "\(noCertificates.stderr)")
        try write(nil)
        let anonymous = try Binary.run(["app", "import", plist, "--host", "a.example"])
        #expect(anonymous.status == 64 && anonymous.stderr.contains("CFBundleIdentifier"), "\(anonymous.stderr)")
        let missing = try Binary.run(["app", "import", "/nonexistent/Shop.ipa"])
        #expect(missing.status == 64 && missing.stderr.contains("/nonexistent/Shop.ipa"), "\(missing.stderr)")
    }
}
