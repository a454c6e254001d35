import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel
import TLSAuditProcess

/// What the iPhone does, error code included: the app's trust evaluation as an input (the system's
/// by default), the NSURLError each failing host logs, AFNetworking's own faults as findings, plain
/// HTTP loads, and `ats`'s advice checked by `app audit` on the same server (one judge).
extension AppAuditTests {
    static let deviceNames = ["device.app.test"]

    func expiredLeaf() throws -> LabCertificate {
        var request = LabCertificateRequest.server(Self.deviceNames, key: .rsa(bits: 2048))
        request.notBefore = Date().addingTimeInterval(-400 * 86_400)
        request.notAfter = Date().addingTimeInterval(-2 * 86_400)
        return try pki.intermediate.issue(request)
    }

    func insecureEntry(_ domain: String = "device.app.test") -> String {
        "<key>NSExceptionDomains</key><dict><key>\(domain)</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict></dict>"
    }

    @Test("NSExceptionAllowsInsecureHTTPLoads alone does not bypass the system's trust evaluation: self-signed, expired and untrusted fail with the error an app logs; the corrected dictionary drops the key")
    func insecureLoadsUnderSystemEvaluation() throws {
        let selfSigned = try LabCertificateAuthority.selfSigned(.server(Self.deviceNames))
        let untrusted = try pki.otherIntermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let servers = [("self-signed", try LabTLSServer(LabServerConfiguration(chain: [selfSigned]))),
                       ("expired", try LabTLSServer(LabServerConfiguration(chain: [try expiredLeaf(), pki.intermediate]))),
                       ("untrusted", try LabTLSServer(LabServerConfiguration(chain: [untrusted, pki.otherIntermediate])))]
        defer { servers.forEach { $0.1.stop() } }
        let file = try plist(insecureEntry())
        for (kind, server) in servers {
            let run = try audit(file, hosts: ["device.app.test:\(server.port)"])
            #expect(run.status == 1, "\(kind): \(run.text)")
            let host = try #require(run.report.hosts.first)
            #expect(!host.connects && host.reasons.allSatisfy { $0.hasPrefix("trust.") }, "\(kind): \(host)")
            #expect(run.report.trustEvaluation == .system)
            // Under ATS the chain fails the strict evaluation: -1200 with -9802 (docs/apple-rules.md section 7).
            #expect(host.error?.code == -1200 && host.error?.sslCode == -9802, "\(kind): \(String(describing: host.error))")
            #expect(run.text.contains("the app logs: NSURLErrorDomain -1200 NSURLErrorSecureConnectionFailed (kCFStreamErrorDomainSSL -9802 errSSLFatalAlert)"), "\(run.text)")
            #expect(run.report.entries.first?.unneeded == ["NSExceptionAllowsInsecureHTTPLoads"], "\(kind): the key changes nothing")
            #expect(!run.report.correctedDictionary.contains("NSExceptionAllowsInsecureHTTPLoads"), "\(run.report.correctedDictionary)")
            #expect(host.exceptionNeeded.isEmpty, "no exception works under the system's evaluation: \(host.exceptionNeeded)")
            // A delegate that accepts everything connects where ATS lets it decide, and is named as the hazard.
            let reckless = try audit(file, hosts: ["device.app.test:\(server.port)"], extra: ["--trust-evaluation", "accept-all"])
            #expect(reckless.report.hosts.first?.connects == true, "\(kind): \(reckless.text)")
            #expect(reckless.report.findings.contains { $0.id == .pinAcceptsAnyCertificate && $0.message.contains("device.app.test") },
                    "\(reckless.report.findings)")
        }
    }

    @Test("an expired server: AFNetworking's public-key mode (invalid certificates allowed) connects; certificate mode fails on the dates (-999)")
    func expiredUnderAFNetworking() throws {
        let leaf = try expiredLeaf()
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let publicKey = try audit(try app(insecureEntry(), certificates: [("server.cer", leaf)]), hosts: ["device.app.test:\(server.port)"],
                                  extra: ["--afnetworking", "public-key,allow-invalid-certificates"])
        #expect(publicKey.status == 0 && publicKey.report.hosts.first?.connects == true, "\(publicKey.text)")
        let certificate = try audit(try app(insecureEntry(), certificates: [("server.cer", leaf)]), hosts: ["device.app.test:\(server.port)"],
                                    extra: ["--afnetworking", "certificate,allow-invalid-certificates"])
        let host = try #require(certificate.report.hosts.first)
        #expect(!host.connects && host.afnetworking?.state == .mismatch && host.error?.code == -999, "\(host)")
    }

    @Test("a server that demands a client certificate: tls.client-certificate-required and -1206 everywhere, no suite advice, no oldest-iOS claim")
    func clientCertificateRequired() throws {
        let leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], clientCertificates: .required(trusting: pki.clientAuthority)))
        defer { server.stop() }
        let run = try audit(try plist(""), hosts: ["device.app.test:\(server.port)"])
        let host = try #require(run.report.hosts.first)
        #expect(run.status == 1 && host.reasons == ["tls.client-certificate-required"] && host.error?.code == -1206, "\(host)")
        #expect(host.serverFixes.isEmpty && host.exceptionNeeded.isEmpty, "\(host)")
        let ats = try CLI.run(["ats", "device.app.test:\(server.port)", "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3"])
        #expect(ats.status == 1)
        #expect(ats.stdout.contains("demands a client certificate") && ats.stdout.contains("-1206"), "\(ats.stdout)")
        #expect(!ats.stdout.contains("fix on the server") && !ats.stdout.contains("oldest iOS that connects: Safari"), "\(ats.stdout)")
    }

    /// `openssl pkcs12 -export` of the test client identity (`legacy`: RC2/3DES, as older exports and Keychain write it).
    func pkcs12(legacy: Bool) throws -> (file: String, passwordFile: String) {
        let file = pki.directory.appendingPathComponent("client-\(legacy ? "legacy" : "modern")-\(UUID().uuidString.prefix(6)).p12").path
        let passwordFile = file + ".password"
        try "s3cret pass\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["pkcs12", "-export", "-in", pki.clientCertificateFile, "-inkey", pki.clientKeyFile, "-out", file,
                             "-passout", "file:" + passwordFile] + (legacy ? ["-legacy"] : [])
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "openssl pkcs12 -export")
        return (file, passwordFile)
    }

    @Test("the app's client identity (PEM, PKCS#12, legacy PKCS#12) is presented and the server accepts it; one it does not trust is rejected (-1205)",
          arguments: [TLSVersion.tls1_2, .tls1_3])
    func clientIdentity(version: TLSVersion) throws {
        let leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: version, maxVersion: version,
                                                             clientCertificates: .required(trusting: pki.clientAuthority)))
        defer { server.stop() }
        let host = ["device.app.test:\(server.port)"]
        let modern = try pkcs12(legacy: false)
        let legacy = try pkcs12(legacy: true)
        for identity in [["--client-cert", pki.clientCertificateFile, "--client-key", pki.clientKeyFile],
                         ["--client-p12", modern.file, "--client-p12-password-file", modern.passwordFile],
                         ["--client-p12", legacy.file, "--client-p12-password-file", legacy.passwordFile]] {
            let run = try audit(try plist(""), hosts: host, extra: identity)
            #expect(run.status == 0 && run.report.hosts.first?.connects == true, "\(identity): \(run.text)")
            let ats = try CLI.run(["ats", host[0], "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3"] + identity)
            #expect(ats.status == 0, "\(identity): \(ats.stdout)")
        }
        // A client certificate from a CA the server does not trust: presented, and refused.
        var request = LabCertificateRequest(commonName: "stranger client")
        request.extendedKeyUsage = "clientAuth"
        let stranger = try pki.otherRoot.issue(request)
        let certificate = pki.directory.appendingPathComponent("stranger-\(version.rawValue).pem").path
        let key = certificate + ".key"
        try stranger.pem.write(toFile: certificate, atomically: true, encoding: .utf8)
        try stranger.key.pem.write(toFile: key, atomically: true, encoding: .utf8)
        let refused = try audit(try plist(""), hosts: host, extra: ["--client-cert", certificate, "--client-key", key])
        let refusedHost = try #require(refused.report.hosts.first)
        #expect(refused.status == 1 && refusedHost.reasons == ["tls.client-certificate-rejected"] && refusedHost.error?.code == -1205,
                "\(refusedHost)")
        // A wrong PKCS#12 password is unreadable input: exit 2, naming the file.
        let wrong = pki.directory.appendingPathComponent("wrong-password-\(version.rawValue)").path
        try "not it\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        let badPassword = try CLI.run(["app", "audit", try plist(""), "--host", host[0], "--connect-to", "127.0.0.1",
                                       "--client-p12", modern.file, "--client-p12-password-file", wrong])
        #expect(badPassword.status == 2 && badPassword.stderr.contains(modern.file) && badPassword.stderr.contains("wrong password"),
                "\(badPassword.stderr)")
    }

    @Test("anchors said plainly: a chain judged against --ca-file says it is judged as an app's own anchors, and what a profile-installed root changes; a SHA-1 self-signed anchor is not judged on its own signature")
    func anchorsSaidPlainly() throws {
        let root = try LabCertificateAuthority.selfSigned(.authority("sha1 private root", key: .rsa(bits: 2048), digest: .sha1))
        let leaf = try root.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf]))
        defer { server.stop() }
        let anchors = pki.directory.appendingPathComponent("sha1-root-\(UUID().uuidString.prefix(6)).pem").path
        try root.pem.write(toFile: anchors, atomically: true, encoding: .utf8)
        let target = "device.app.test:\(server.port)"
        let json = try CLI.run(["app", "audit", try plist(""), "--host", target, "--connect-to", "127.0.0.1", "--ca-file", anchors,
                                "--timeout", "3", "--format", "json"])
        let report = try JSONDecoder.tlsaudit.decode(AppAuditReport.self, from: Data(json.stdout.utf8))
        #expect(json.status == 0 && report.hosts.first?.connects == true, "the anchor's own SHA-1 signature is not judged: \(json.stdout)")
        #expect(report.anchors?.contains("as an app's own anchors (SecTrustSetAnchorCertificates)") == true, "\(String(describing: report.anchors))")
        #expect(report.anchors?.contains("configuration profile") == true, "\(String(describing: report.anchors))")
        let ats = try CLI.run(["ats", target, "--connect-to", "127.0.0.1", "--ca-file", anchors, "--timeout", "3"])
        #expect(ats.status == 0 && ats.stdout.contains("anchors: chains were judged against the anchors of --ca-file"), "\(ats.stdout)")
    }

    @Test("an RSA-1024 server: oldest iOS that connects is none, the chain failing the trust rules every iOS with ATS applies")
    func rsa1024OldestIOS() throws {
        let leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 1024)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let ats = try CLI.run(["ats", "device.app.test:\(server.port)", "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3"])
        #expect(ats.status == 1)
        #expect(ats.stdout.contains("oldest iOS that connects: none (the chain fails ATS's certificate rules, which every iOS with ATS applies (iOS 9 and later))"),
                "\(ats.stdout)")
        let run = try audit(try plist(""), hosts: ["device.app.test:\(server.port)"])
        #expect(run.report.hosts.first?.oldestConnectingIos == nil, "\(run.report.hosts)")
    }

    @Test("an RSA-1024 issuing CA under a good leaf: iOS before 13 connects (issuing CAs are judged from iOS 13, HT210176), not every iOS with ATS")
    func rsa1024IntermediateOldestIOS() throws {
        let weak = try pki.root.issue(.authority("device weak intermediate", key: .rsa(bits: 1024)))
        let leaf = try weak.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, weak]))
        defer { server.stop() }
        let ats = try CLI.run(["ats", "device.app.test:\(server.port)", "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3"])
        #expect(ats.status == 1, "current clients refuse the 1024-bit CA: \(ats.stdout)")
        #expect(!ats.stdout.contains("which every iOS with ATS applies"), "\(ats.stdout)")
        let line = ats.stdout.split(separator: "\n").first { $0.hasPrefix("oldest iOS that connects: ") }.map(String.init) ?? ""
        let version = line.firstMatch(of: /iOS (\d+)/).flatMap { Int($0.1) }
        #expect(version.map { $0 >= 9 && $0 < 13 } == true, "an iOS from 9 to 12 connects: \(line)")
    }

    @Test("a leaf named only in its CN: current clients refuse it, iOS 12 and earlier matched the CN (HT210176), so one of them is the oldest that connects")
    func commonNameOnlyOldestIOS() throws {
        var request = LabCertificateRequest.server(Self.deviceNames, key: .rsa(bits: 2048))
        request.dnsNames = []
        let leaf = try pki.intermediate.issue(request)
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let ats = try CLI.run(["ats", "device.app.test:\(server.port)", "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3"])
        #expect(ats.status == 1, "\(ats.stdout)")
        #expect(ats.stdout.contains("only iOS 12 and earlier match a name in the CN"), "\(ats.stdout)")
        let line = ats.stdout.split(separator: "\n").first { $0.hasPrefix("oldest iOS that connects: ") }.map(String.init) ?? ""
        let version = line.firstMatch(of: /iOS (\d+)/).flatMap { Int($0.1) }
        #expect(version.map { $0 >= 9 && $0 < 13 } == true, "an iOS from 9 to 12 connects: \(line)")
    }

    @Test("http:// hosts are plain HTTP loads: allowed by NSAllowsArbitraryLoads, -1022 without; ats takes an http:// URL the same way")
    func plainHTTPLoads() throws {
        let web = try LabHTTPServer(routes: ["/": Array("hello".utf8)])
        defer { web.stop() }
        let url = "http://device.app.test:\(web.port)"
        let allowed = try audit(try plist("<key>NSAllowsArbitraryLoads</key><true/>"), hosts: [url])
        let host = try #require(allowed.report.hosts.first)
        #expect(allowed.status == 0 && host.connects && host.scheme == "http" && host.probe == "plain-http", "\(allowed.text)")
        let blocked = try audit(try plist(""), hosts: [url])
        let refused = try #require(blocked.report.hosts.first)
        #expect(blocked.status == 1 && !refused.connects && refused.reasons == ["ats.insecure-http-load"], "\(blocked.text)")
        #expect(refused.error?.code == -1022 && refused.exceptionNeeded == ["NSExceptionAllowsInsecureHTTPLoads": "YES"], "\(refused)")
        #expect(blocked.report.correctedDictionary.contains("<key>device.app.test</key>"), "\(blocked.report.correctedDictionary)")
        let ats = try CLI.run(["ats", url, "--connect-to", "127.0.0.1", "--timeout", "3"])
        #expect(ats.status == 1 && ats.stdout.contains("-1022") && ats.stdout.contains("NSExceptionAllowsInsecureHTTPLoads"), "\(ats.stdout)")
    }

    @Test("a plain http:// load that gets no HTTP answer logs what URLSession would: a TLS server closes (-1005), garbage (-1017), a closed port (-1004)")
    func plainHTTPWithoutAnswer() throws {
        let file = try plist("<key>NSAllowsArbitraryLoads</key><true/>")
        let leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let tls = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { tls.stop() }
        let garbage = try LabHostileServer(.garbage)
        defer { garbage.stop() }
        let tarpit = try LabHostileServer(.tarpit)
        defer { tarpit.stop() }
        let closedPort = try LabPorts.unusedPort()
        let cases: [(port: Int, reason: String, code: Int, reached: Bool)] = [
            (tls.port, "http.no-answer", -1005, true), (garbage.port, "http.not-http", -1017, true), (tarpit.port, "http.timeout", -1001, true),
            (closedPort, "failure.connection-refused", -1004, false),
        ]
        for (port, reason, code, reached) in cases {
            let audited = try audit(file, hosts: ["http://device.app.test:\(port)"], extra: ["--timeout", "2"])
            let host = try #require(audited.report.hosts.first)
            #expect(!host.connects && host.reasons == [reason], "\(port): \(host.reasons) \(host.detail)")
            #expect(host.error?.code == code, "\(port): \(String(describing: host.error))")
            #expect(host.reachable == reached, "\(port): a server that took the connection was reached")
        }
    }

    @Test("plist domains not given are listed as not probed, and probed ones never change the exit status")
    func plistDomainsNotProbed() throws {
        let leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let file = try plist("<key>NSExceptionDomains</key><dict><key>parent.invalid</key><dict><key>NSIncludesSubdomains</key><true/></dict></dict>")
        let given = try audit(file, hosts: ["device.app.test:\(server.port)"])
        #expect(given.status == 0 && given.report.notProbed == ["parent.invalid"] && given.report.hosts.count == 1, "\(given.text)")
        let probed = try audit(file, hosts: ["device.app.test:\(server.port)"], extra: ["--probe-plist-domains"])
        #expect(probed.status == 0, "the unreachable plist domain does not turn 0 into 2: \(probed.text)")
        #expect(probed.report.hosts.contains { $0.host == "parent.invalid" && !$0.requested && !$0.reachable }, "\(probed.report.hosts)")
    }

    @Test("AFNetworking faults are findings (exit 1): a .der-only bundle, a PEM named .cer (with the conversion), the refused combination (-999)")
    func afnetworkingFaults() throws {
        let leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let host = ["device.app.test:\(server.port)"]
        let derOnly = try audit(try app("", certificates: [("server.der", leaf)]), hosts: host, extra: ["--afnetworking", "public-key"])
        #expect(derOnly.status == 1, "\(derOnly.text)")
        #expect(derOnly.report.findings.contains { $0.id == .pinCertificateFileIgnored && $0.message.contains("server.der") }, "\(derOnly.report.findings)")
        #expect(derOnly.report.findings.contains { $0.id == .pinNoPinnedCertificate }, "\(derOnly.report.findings)")
        #expect(derOnly.report.hosts.first?.error?.code == -999, "\(derOnly.report.hosts)")

        let directory = try app("", certificates: [])
        try Data(leaf.pem.utf8).write(to: URL(fileURLWithPath: directory + "/server.cer"))
        let pem = try audit(directory, hosts: host, extra: ["--afnetworking", "public-key"])
        #expect(pem.status == 1)
        let finding = try #require(pem.report.findings.first { $0.id == .pinCertificateNotDER }, "\(pem.report.findings)")
        #expect(finding.message.contains("openssl x509 -in server.cer -outform der"), "\(finding.message)")

        let refused = try audit(try plist(""), hosts: host, extra: ["--afnetworking", "none,allow-invalid-certificates"])
        #expect(refused.status == 1 && refused.report.findings.contains { $0.id == .pinAFNetworkingRefused }, "\(refused.text)")
        #expect(refused.report.hosts.first?.reasons == ["pin.afnetworking-refused"] && refused.report.hosts.first?.error?.code == -999)

        let unvalidated = try audit(try app("", certificates: [("server.cer", leaf)]), hosts: host, extra: ["--afnetworking", "public-key,no-domain-validation"])
        #expect(unvalidated.report.findings.contains { $0.id == .pinDomainNameNotValidated }, "\(unvalidated.report.findings)")
    }

    @Test("one judge: every app-side change ats recommends, applied to an app, makes app audit say CONNECTS on the same server",
          arguments: ["tls10", "static-rsa", "expired", "self-signed", "rsa-1024"])
    func atsAdviceConnects(scenario: String) throws {
        let leaf: LabCertificate
        var configuration: LabServerConfiguration
        switch scenario {
        case "tls10":
            leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
            configuration = LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0, cipherList: "ECDHE-RSA-AES128-SHA")
        case "static-rsa":
            leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 2048)))
            configuration = LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2, cipherList: "AES128-GCM-SHA256")
        case "expired":
            leaf = try expiredLeaf()
            configuration = LabServerConfiguration(chain: [leaf, pki.intermediate])
        case "rsa-1024":
            leaf = try pki.intermediate.issue(.server(Self.deviceNames, key: .rsa(bits: 1024)))
            configuration = LabServerConfiguration(chain: [leaf, pki.intermediate])
        default:
            leaf = try LabCertificateAuthority.selfSigned(.server(Self.deviceNames))
            configuration = LabServerConfiguration(chain: [leaf])
        }
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let target = "device.app.test:\(server.port)"
        let json = try CLI.run(["ats", target, "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3", "--format", "json"])
        #expect(json.status == 1, "\(json.stderr)")
        let advice = try JSONDecoder.tlsaudit.decode(ATSDiagnostics.self, from: Data(json.stdout.utf8))
        #expect(!advice.exception.isEmpty, "\(scenario): \(advice.appSide)")
        #expect(advice.error != nil, "\(scenario): an app with default ATS fails, and the error is named")
        if scenario == "tls10" {
            // Apple's deprecation of TLS 1.0/1.1 travels with the advice and the dictionary.
            #expect(advice.appSide.contains("deprecated since iOS 15") && advice.infoPlist?.contains("<!-- TLSv1.0: deprecated since iOS 15") == true,
                    "\(advice.appSide)\n\(advice.infoPlist ?? "")")
            let bare = try audit(try plist(""), hosts: [target])
            #expect(bare.report.correctedDictionary.contains("<!-- TLSv1.0: deprecated since iOS 15"), "\(bare.report.correctedDictionary)")
        }
        if scenario == "expired" {
            #expect(advice.appTrustEvaluation == "afnetworking public-key,allow-invalid-certificates" && !advice.appSide.contains("certificate pinned"),
                    "public-key mode, never certificate mode, for an expired server: \(advice.appSide)")
        }
        // Apply the advice: its keys in the Info.plist, its trust evaluation (with the server's certificate bundled for the pin).
        let keys = advice.exception.keys.sorted().map { key in
            "<key>\(key)</key>" + (advice.exception[key] == "YES" ? "<true/>" : advice.exception[key] == "NO" ? "<false/>" : "<string>\(advice.exception[key]!)</string>")
        }.joined()
        let ats = advice.exception["NSAllowsArbitraryLoads"] != nil ? keys
            : "<key>NSExceptionDomains</key><dict><key>device.app.test</key><dict>\(keys)</dict></dict>"
        var extra: [String] = []
        if let evaluation = advice.appTrustEvaluation {
            #expect(evaluation.hasPrefix("afnetworking "), "\(evaluation)")
            extra = ["--afnetworking", String(evaluation.dropFirst("afnetworking ".count))]
        }
        let applied = try audit(try app(ats, certificates: [("server.cer", leaf)]), hosts: [target], extra: extra)
        let host = try #require(applied.report.hosts.first)
        if scenario == "tls10" {
            // Old iOS under the app's TLS 1.0 exception: the oldest client with ATS (iOS 9) that negotiates TLS 1.0 or newer.
            #expect(host.oldestConnectingIos?.contains("iOS 9") == true, "\(String(describing: host.oldestConnectingIos))")
        }
        #expect(host.connects, "\(scenario): ats advised \(advice.exception) \(advice.appTrustEvaluation ?? "with the system's evaluation"), app audit says \(applied.text)")
    }
}
