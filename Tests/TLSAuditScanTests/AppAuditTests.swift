import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel

/// `tlsaudit app audit`: an app's Info.plist as the policy, against real lab servers that need an
/// exception and servers that do not.
@Suite("app audit")
struct AppAuditTests {
    let pki = TestPKI.shared
    static let names = ["modern.app.test", "legacy.app.test", "plain.app.test"]

    /// An Info.plist (XML) whose NSAppTransportSecurity is `ats` (plist XML of the dictionary's content).
    func plist(_ ats: String) throws -> String {
        let file = pki.directory.appendingPathComponent("Info-\(UUID().uuidString.prefix(8)).plist")
        try Self.infoPlist(ats).write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// An `.app` directory: the Info.plist of `plist(_:)` and `certificates` (file name, DER) at its top.
    func app(_ ats: String, certificates: [(String, LabCertificate)]) throws -> String {
        let directory = try AppFixture.directory() + "/Demo.app"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.infoPlist(ats).write(toFile: directory + "/Info.plist", atomically: true, encoding: .utf8)
        for (name, certificate) in certificates { try Data(certificate.der).write(to: URL(fileURLWithPath: directory + "/" + name)) }
        return directory
    }

    static func infoPlist(_ ats: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict>
        <key>CFBundleIdentifier</key><string>test.tlsaudit.demo</string>
        <key>NSAppTransportSecurity</key><dict>\(ats)</dict>
        </dict></plist>
        """
    }

    func audit(_ plist: String, hosts: [String], extra: [String] = []) throws -> (status: Int32, report: AppAuditReport, text: String) {
        let base = ["app", "audit", plist, "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3"]
            + hosts.flatMap { ["--host", $0] } + extra
        let json = try CLI.run(base + ["--format", "json"], limit: 120)
        let complaint = try JSONSchemaTests.validate(json.stdout, schema: JSONSchemaTests.repository.appendingPathComponent("docs/app.schema.json").path)
        #expect(complaint == nil, "docs/app.schema.json: \(complaint ?? "")")
        let report = try JSONDecoder.tlsaudit.decode(AppAuditReport.self, from: Data(json.stdout.utf8))
        return (json.status, report, try CLI.run(base, limit: 120).stdout)
    }

    @Test("each exception against a server that needs it and one that does not: connects, the entry that applied, unneeded keys, the missing exception, pins")
    func exceptionsNeededAndNot() throws {
        let leaf = try pki.intermediate.issue(.server(Self.names, key: .rsa(bits: 2048)))
        let modern = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        let legacy = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "ECDHE-RSA-AES128-SHA"))
        defer { modern.stop(); legacy.stop() }
        let file = try plist("""
            <key>NSExceptionDomains</key><dict>
              <key>modern.app.test</key><dict>
                <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>
                <key>NSExceptionRequiresForwardSecrecy</key><false/>
              </dict>
              <key>legacy.app.test</key><dict>
                <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>
              </dict>
            </dict>
            <key>NSPinnedDomains</key><dict>
              <key>modern.app.test</key><dict>
                <key>NSPinnedLeafIdentities</key><array><dict><key>SPKI-SHA256-BASE64</key><string>\(leaf.summary.spkiSHA256)</string></dict></array>
              </dict>
            </dict>
            """)
        let (status, report, text) = try audit(file, hosts: ["modern.app.test:\(modern.port)", "legacy.app.test:\(legacy.port)",
                                                              "plain.app.test:\(legacy.port)"])
        #expect(status == 1, "a host fails and two keys are unneeded")
        #expect(report.schema == "tlsaudit.app/1" && report.bundleIdentifier == "test.tlsaudit.demo")
        let hosts = Dictionary(uniqueKeysWithValues: report.hosts.map { ($0.host, $0) })
        let modernHost = try #require(hosts["modern.app.test"])
        #expect(modernHost.connects && modernHost.entry == "modern.app.test" && modernHost.pin == "match", "\(modernHost)")
        // The oldest iOS of the client table that connects (README, Client simulation), in JSON and text.
        let oldest = try #require(modernHost.oldestConnectingIos, "\(modernHost)")
        #expect(oldest.contains("iOS") && text.contains("    oldest iOS that connects: \(oldest)\n"), "\(text)")
        let legacyHost = try #require(hosts["legacy.app.test"])
        #expect(legacyHost.connects && legacyHost.entry == "legacy.app.test" && legacyHost.probe == "TLSv1.0", "\(legacyHost)")
        let plainHost = try #require(hosts["plain.app.test"])
        #expect(!plainHost.connects && plainHost.entry == nil && plainHost.reasons == ["ats.handshake"], "\(plainHost)")
        #expect(plainHost.exceptionNeeded["NSExceptionMinimumTLSVersion"] == "TLSv1.0", "\(plainHost.exceptionNeeded)")
        let entries = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.domain, $0) })
        #expect(entries["modern.app.test"]?.unneeded == ["NSExceptionMinimumTLSVersion", "NSExceptionRequiresForwardSecrecy"],
                "the modern server connects with default ATS: both keys change nothing")
        #expect(entries["legacy.app.test"]?.unneeded == [], "the TLS 1.0 server needs its exception")
        // The corrected dictionary: the legacy entry kept, the modern one gone, the plain host's exception added.
        #expect(report.correctedDictionary.contains("<key>legacy.app.test</key>"))
        #expect(!report.correctedDictionary.contains("<key>modern.app.test</key>"))
        #expect(report.correctedDictionary.contains("<key>plain.app.test</key>"))
        #expect(text.contains("UNNEEDED: NSExceptionMinimumTLSVersion, NSExceptionRequiresForwardSecrecy"), "\(text)")
        #expect(text.contains("plain.app.test:\(legacy.port)  FAILS (ats.handshake)"), "\(text)")
    }

    @Test("every host connects with exactly the exceptions it needs: exit 0; a wrong pin fails the host")
    func cleanAndWrongPin() throws {
        let leaf = try pki.intermediate.issue(.server(Self.names, key: .rsa(bits: 2048)))
        let legacy = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "ECDHE-RSA-AES128-SHA"))
        let modern = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { legacy.stop(); modern.stop() }
        let clean = try plist("""
            <key>NSExceptionDomains</key><dict><key>legacy.app.test</key><dict>
              <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string></dict></dict>
            """)
        let ok = try audit(clean, hosts: ["legacy.app.test:\(legacy.port)", "modern.app.test:\(modern.port)"])
        #expect(ok.status == 0, "\(ok.text)")
        #expect(ok.report.hosts.allSatisfy { $0.connects })
        let modernHost = ok.report.hosts.first(where: { $0.host == "modern.app.test" })
        #expect(modernHost != nil && modernHost?.entry == nil, "no entry covers it: default ATS")

        let wrongPin = try plist("""
            <key>NSPinnedDomains</key><dict><key>modern.app.test</key><dict>
              <key>NSPinnedLeafIdentities</key><array><dict><key>SPKI-SHA256-BASE64</key>
              <string>\(String(repeating: "A", count: 43))=</string></dict></array></dict></dict>
            """)
        let pinned = try audit(wrongPin, hosts: ["modern.app.test:\(modern.port)"])
        #expect(pinned.status == 1)
        let host = try #require(pinned.report.hosts.first)
        #expect(!host.connects && host.pin == "mismatch" && host.reasons == ["pin.mismatch"], "\(host)")
    }

    @Test("a server without its intermediate: the app connects (trustd fetches it from the AIA), unless --no-aia-fetch; an error the app logs then")
    func missingIntermediate() throws {
        let http = try LabHTTPServer()
        defer { http.stop() }
        http.serve(pki.intermediate.der, at: "/int.cer")
        var request = LabCertificateRequest.server(Self.names, key: .rsa(bits: 2048))
        request.extraExtensions = [.init(name: "authorityInfoAccess", value: "caIssuers;URI:\(http.url("/int.cer"))")]
        let leaf = try pki.intermediate.issue(request)
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf]))
        defer { server.stop() }
        let file = try plist("")
        let device = try audit(file, hosts: ["modern.app.test:\(server.port)"])
        #expect(device.status == 0, "\(device.text)")
        #expect(device.report.hosts.first?.connects == true, "\(device.report.hosts)")
        #expect(device.report.hosts.first?.serverFixes.first?.hasPrefix("send the intermediate CA certificate with the leaf") == true,
                "the device fetches it, other clients do not: \(device.report.hosts)")
        #expect(device.text.contains("server fix: send the intermediate CA certificate"), "\(device.text)")
        let offline = try audit(file, hosts: ["modern.app.test:\(server.port)"], extra: ["--no-aia-fetch"])
        #expect(offline.status == 1)
        let host = try #require(offline.report.hosts.first)
        #expect(!host.connects && host.reasons.contains("trust.incomplete-chain"), "\(host)")
    }

    @Test("an .ipa with a binary Info.plist: the same answers as its XML plist; a hostile archive exits 2 naming the entry")
    func ipaWithBinaryPlist() throws {
        let leaf = try pki.intermediate.issue(.server(Self.names, key: .rsa(bits: 2048)))
        let legacy = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "ECDHE-RSA-AES128-SHA"))
        defer { legacy.stop() }
        let directory = try AppFixture.directory()
        let plist = try AppFixture.plist("""
            {'CFBundleIdentifier': 'test.tlsaudit.ipa', 'NSAppTransportSecurity': {'NSExceptionDomains': {
                'legacy.app.test': {'NSExceptionMinimumTLSVersion': 'TLSv1.0', 'NSIncludesSubdomains': True}}}}
            """, format: "FMT_BINARY", at: directory + "/Info.plist")
        try Data(leaf.der).write(to: URL(fileURLWithPath: directory + "/leaf.der"))
        let ipa = try AppFixture.zip(at: directory + "/Demo.ipa", entries: [
            .init("Payload/Demo.app/Info.plist", file: plist), .init("Payload/Demo.app/server.cer", file: directory + "/leaf.der"),
        ])
        let (status, report, _) = try audit(ipa, hosts: ["legacy.app.test:\(legacy.port)"])
        #expect(report.bundleIdentifier == "test.tlsaudit.ipa")
        let host = try #require(report.hosts.first)
        #expect(host.connects && host.entry == "legacy.app.test" && host.probe == "TLSv1.0", "\(host)")
        #expect(report.entries.first?.unneeded == ["NSIncludesSubdomains"], "the audited host is the entry's own name: the subdomain reach changes nothing")
        #expect(status == 1, "an unneeded key exits 1")
        let hostile = try AppFixture.zip(at: directory + "/Evil.ipa", entries: [.init("Payload/Demo.app/../../evil", text: "x")])
        let refused = try CLI.run(["app", "audit", hostile, "--host", "a.test"])
        #expect(refused.status == 2, "unreadable input, not a usage error")
        #expect(refused.stderr.contains("Payload/Demo.app/../../evil"), "\(refused.stderr)")
    }

    @Test("unreadable input exits 2 naming the file (the app, a client identity); an unreachable host exits 2")
    func inputsAndUnreachable() throws {
        let missing = try CLI.run(["app", "audit", "/nonexistent/Info.plist", "--host", "a.test"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("/nonexistent/Info.plist") && !missing.stderr.contains("Usage:"), "\(missing.stderr)")
        let garbage = try plist("")
        let identity = pki.directory.appendingPathComponent("garbage-\(UUID().uuidString.prefix(8)).p12").path
        try Data("not a PKCS#12 file".utf8).write(to: URL(fileURLWithPath: identity))
        let badIdentity = try CLI.run(["app", "audit", garbage, "--host", "a.test", "--client-p12", identity])
        #expect(badIdentity.status == 2 && badIdentity.stderr.contains(identity), "\(badIdentity.stderr)")
        let file = try plist("<key>NSAllowsArbitraryLoads</key><false/>")
        let port = try LabPorts.unusedPort()
        let (status, report, _) = try audit(file, hosts: ["gone.app.test:\(port)"])
        #expect(status == 2)
        #expect(report.hosts.first?.reachable == false)
    }
}
