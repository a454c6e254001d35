import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab

/// `scan --enumerate` and `tlsaudit ats` against real loopback servers, through the binary.
@Suite("enumeration and ATS diagnostics")
struct EnumerationTests {
    let pki = TestPKI.shared

    func enumerate(_ configuration: LabServerConfiguration) throws -> (AddressScanResult, EnumerationReport) {
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let output = try CLI.scan(port: server.port, extra: ["--enumerate"])
        let result = try output.report().single
        return (result, try #require(result.enumeration))
    }

    func ats(_ configuration: LabServerConfiguration) throws -> (Int32, ATSDiagnostics) {
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let output = try CLI.run(["ats", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                  "\(TestPKI.hostname):\(server.port)"])
        return (output.status, try JSONDecoder.tlsaudit.decode(ATSDiagnostics.self, from: Data(output.stdout.utf8)))
    }

    func protocols(_ report: EnumerationReport) -> [String: ProtocolSupport.Status] {
        Dictionary(uniqueKeysWithValues: report.protocols.map { ($0.version, $0.status) })
    }

    func passing(_ diagnostics: ATSDiagnostics) -> Set<String> {
        Set(diagnostics.configurations.filter(\.pass).map(\.name))
    }

    @Test("TLS 1.0 only with CBC suites: versions, suites, the ATS matrix, and NSExceptionMinimumTLSVersion TLSv1.0")
    func tls10CBC() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                   cipherList: "ECDHE-RSA-AES128-SHA:AES256-SHA:AES128-SHA")
        let (_, report) = try enumerate(configuration)
        #expect(protocols(report) == ["SSLv2": .rejected, "SSLv3": .rejected, "TLSv1": .accepted, "TLSv1.1": .rejected,
                                      "TLSv1.2": .rejected, "TLSv1.3": .rejected])
        let tls10 = try #require(report.protocols.first { $0.version == "TLSv1" })
        #expect(tls10.suites.map(\.cipher.openssl) == ["ECDHE-RSA-AES128-SHA", "AES256-SHA", "AES128-SHA"])
        #expect(tls10.suites.allSatisfy { !$0.cipher.isAEAD })
        #expect(tls10.preference == "server")
        #expect(tls10.suites.map(\.keyExchange.forwardSecrecy) == [true, false, false])
        #expect(report.findings.contains { $0.id == .tlsLegacyProtocol && $0.severity == .warning })

        let (status, diagnostics) = try ats(configuration)
        #expect(status == 1)
        #expect(passing(diagnostics) == ["TLSv1.0", "TLSv1.0+no-forward-secrecy", "arbitrary-loads", "insecure-http-loads+TLSv1.0",
                                         "insecure-http-loads+TLSv1.0+no-forward-secrecy", "arbitrary-loads+own-trust-evaluation",
                                         "any-openssl-client"])
        #expect(diagnostics.exception == ["NSExceptionMinimumTLSVersion": "TLSv1.0"])
        #expect(diagnostics.infoPlist?.contains("<string>TLSv1.0</string>") == true)
        #expect(diagnostics.infoPlist?.contains("<key>\(TestPKI.hostname)</key>") == true)
    }

    @Test("static RSA only: NSExceptionRequiresForwardSecrecy NO")
    func staticRSA() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "AES256-GCM-SHA384:AES128-GCM-SHA256")
        let (_, report) = try enumerate(configuration)
        let tls12 = try #require(report.protocols.first { $0.version == "TLSv1.2" })
        #expect(Set(tls12.suites.map(\.cipher.iana)) == ["TLS_RSA_WITH_AES_256_GCM_SHA384", "TLS_RSA_WITH_AES_128_GCM_SHA256"])
        #expect(tls12.suites.allSatisfy { !$0.keyExchange.forwardSecrecy && $0.keyExchange.ephemeralKey == nil })
        #expect(report.findings.contains { $0.id == .tlsNonForwardSecretSuites })
        let (status, diagnostics) = try ats(configuration)
        #expect(status == 1)
        #expect(!passing(diagnostics).contains("default"))
        #expect(diagnostics.exception == ["NSExceptionRequiresForwardSecrecy": "NO"])
        #expect(diagnostics.infoPlist?.contains("<key>NSExceptionRequiresForwardSecrecy</key>\n      <false/>") == true)
    }

    @Test("DHE with a 1024-bit group: the DH size, tls.weak-dh, and only arbitrary loads help")
    func weakDHE() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-SHA", dhGroup: .weak1024)
        let (_, report) = try enumerate(configuration)
        let suites = report.protocols.first { $0.version == "TLSv1.2" }?.suites ?? []
        #expect(suites.count == 2)
        #expect(suites.allSatisfy { $0.keyExchange.ephemeralKey?.type == "DH" && $0.keyExchange.ephemeralKey?.bits == 1024 })
        #expect(report.findings.filter { $0.id == .tlsWeakDH }.count >= 2)
        let (status, diagnostics) = try ats(configuration)
        #expect(status == 1)
        // Apple clients never offer DHE: no exception unlocks it (before: "only NSAllowsArbitraryLoads works").
        #expect(passing(diagnostics) == ["any-openssl-client"])
        #expect(diagnostics.exception.isEmpty && diagnostics.infoPlist == nil)
    }

    @Test("CHACHA20 only: off Apple's documented list, but current clients connect")
    func chacha() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "ECDHE-RSA-CHACHA20-POLY1305")
        let (_, report) = try enumerate(configuration)
        #expect(report.protocols.first { $0.version == "TLSv1.2" }?.suites.map(\.cipher.iana) == ["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"])
        let (status, diagnostics) = try ats(configuration)
        #expect(status == 0)
        #expect(passing(diagnostics).contains("default"))
        #expect(!passing(diagnostics).contains("documented-list"))
        #expect(diagnostics.runtime.pass)
    }

    @Test("TLS 1.3 only: only TLS 1.3 accepted; no exception needed")
    func tls13Only() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], minVersion: .tls1_3)
        let (_, report) = try enumerate(configuration)
        #expect(protocols(report)["TLSv1.3"] == .accepted)
        #expect(protocols(report).filter { $0.value == .accepted }.count == 1)
        #expect(Set(report.protocols.first { $0.version == "TLSv1.3" }?.suites.map(\.cipher.iana) ?? [])
                == ["TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"])
        let (status, diagnostics) = try ats(configuration)
        #expect(status == 0)
        #expect(diagnostics.recommendation.hasPrefix("no exception needed"))
        #expect(passing(diagnostics).isSuperset(of: ["default", "TLSv1.3", "TLSv1.2"]))
        #expect(diagnostics.runtime.pass)
    }

    @Test("enumeration text: reasons in words, never OpenSSL's raw error strings; TLS 1.3 key exchange named")
    func enumerationText() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], minVersion: .tls1_2))
        defer { server.stop() }
        let output = try CLI.run(["scan", "--enumerate", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                  "\(TestPKI.hostname):\(server.port)"])
        #expect(output.stdout.contains("TLSv1.3  accepted"), "\(output.stdout)")
        #expect(!output.stdout.contains("routines:") && !output.stdout.contains("error:0"), "\(output.stdout)")
        #expect(!output.stdout.contains("(ANY,"), "TLS 1.3 suites say ECDHE and the group")
        #expect(output.stdout.contains("TLS_AES_128_GCM_SHA256  (ECDHE, x25519"), "\(output.stdout)")
    }

    @Test("a server that prefers a weak suite: its order is reported and flagged")
    func prefersWeak() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256")
        let (_, report) = try enumerate(configuration)
        let tls12 = try #require(report.protocols.first { $0.version == "TLSv1.2" })
        #expect(tls12.suites.map(\.cipher.openssl) == ["AES128-SHA", "ECDHE-RSA-AES128-GCM-SHA256"])
        #expect(tls12.preference == "server")
        #expect(report.findings.contains { $0.id == .tlsPrefersWeakSuite })
        let (status, _) = try ats(configuration)
        #expect(status == 0, "an ATS client offers only ECDHE suites, so it still gets one")
    }

    @Test("anonymous suites are found and flagged")
    func anonymous() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "ECDHE-RSA-AES128-GCM-SHA256:AECDH-AES128-SHA")
        let (_, report) = try enumerate(configuration)
        let suites = report.protocols.first { $0.version == "TLSv1.2" }?.suites.map(\.cipher.iana) ?? []
        #expect(suites.contains("TLS_ECDH_anon_WITH_AES_128_CBC_SHA"))
        #expect(report.findings.contains { $0.id == .tlsAnonymousSuites && $0.severity == .error })
    }

    @Test("a server that follows the client's order is reported as such")
    func clientOrder() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384",
                                                   serverPreference: false)
        let (_, report) = try enumerate(configuration)
        #expect(report.protocols.first { $0.version == "TLSv1.2" }?.preference == "client")
    }

    @Test("only ECDHE-RSA-AES128-SHA256: passes the documented list, exits 1: current clients cannot connect")
    func runtimeOnly() throws {
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "ECDHE-RSA-AES128-SHA256")
        let (status, diagnostics) = try ats(configuration)
        #expect(status == 1, "never 'no exception needed'")
        #expect(passing(diagnostics) == ["documented-list", "any-openssl-client"])
        #expect(!diagnostics.runtime.pass)
        #expect(diagnostics.currentClients.contains("passes Apple's documented ATS list, but current iOS and macOS clients cannot connect"))
    }

    @Test("a server that still speaks SSLv3: the hand-built ClientHello detects it")
    func sslv3() throws {
        let server = try LabHostileServer(.sslv3ServerHello)
        defer { server.stop() }
        let output = try CLI.run(["scan", "--format", "json", "--enumerate", "--timeout", "2", "127.0.0.1:\(server.port)"])
        let report = try #require(try output.report().single.enumeration)
        #expect(protocols(report)["SSLv3"] == .accepted)
        #expect(report.findings.contains { $0.id == .tlsLegacyProtocol && $0.severity == .error })
        #expect(protocols(report)["TLSv1.2"] != .accepted)
    }
}

/// OCSP stapling, recorded from a real stapled response (`openssl ocsp` signs it, `openssl s_server` staples it).
@Suite("OCSP stapling")
struct OCSPStaplingTests {
    @Test("a stapled good response is recorded as successful / good")
    func stapled() throws {
        let pki = TestPKI.shared
        let serial = RevocationTests.randomSerial()
        let leaf = try pki.leaf { $0.serialHex = serial }
        let lab = try LabOCSPResponder(issuer: pki.intermediate, entries: [(serial, .good)])
        let (server, result) = try lab.stapledServerScan(leaf: leaf, staple: try lab.response(for: leaf))
        defer { LabOCSPResponder.kill(server) }
        let handshake = try #require(result?.handshake)
        #expect(handshake.stapledOCSP?.responseStatus == "successful")
        #expect(handshake.stapledOCSP?.certificateStatus == "good")
        #expect(handshake.stapledOCSP?.nextUpdate != nil)
        #expect(handshake.signedCertificateTimestamps == SCTCounts(embedded: 0, tlsExtension: 0, ocsp: 0))
        #expect(result?.chain?.revocation?.checks.first?.source == .stapledOCSP)
    }
}

/// `tlsaudit ats` against the servers the issue names: the conclusion leads with the server-side
/// fix, then the smallest app-side change that a current Apple client would honour.
@Suite("tlsaudit ats conclusions")
struct ATSConclusionTests {
    let pki = TestPKI.shared

    func ats(_ configuration: LabServerConfiguration, extra: [String] = []) throws -> (Int32, ATSDiagnostics, String) {
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let arguments = ["ats", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "\(TestPKI.hostname):\(server.port)"] + extra
        let json = try CLI.run(arguments + ["--format", "json"])
        let text = try CLI.run(arguments)
        #expect(text.status == json.status)
        return (json.status, try JSONDecoder.tlsaudit.decode(ATSDiagnostics.self, from: Data(json.stdout.utf8)), text.stdout)
    }

    func chain(_ leaf: LabCertificate) -> [LabCertificate] { [leaf, pki.intermediate] }

    @Test("a TLS 1.0/1.1-only server: enable TLS 1.2; meanwhile NSExceptionMinimumTLSVersion TLSv1.1")
    func legacyVersions() throws {
        let (status, diagnostics, text) = try ats(LabServerConfiguration(chain: chain(try pki.leaf()), minVersion: .tls1_0,
                                                                         maxVersion: .tls1_1, cipherList: "ECDHE-RSA-AES128-SHA"))
        #expect(status == 1)
        #expect(diagnostics.serverFixes.first?.hasPrefix("enable TLS 1.2 or 1.3") == true, "\(diagnostics.serverFixes)")
        #expect(diagnostics.exception == ["NSExceptionMinimumTLSVersion": "TLSv1.1"])
        #expect(text.contains("fix on the server:\n  - enable TLS 1.2 or 1.3"))
        #expect(text.range(of: "fix on the server")!.lowerBound < text.range(of: "in the app:")!.lowerBound, "the server first")
    }

    @Test("a static-RSA-only server: enable ECDHE; meanwhile NSExceptionRequiresForwardSecrecy NO")
    func staticRSA() throws {
        let (status, diagnostics, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(key: .rsa(bits: 2048))), maxVersion: .tls1_2,
                                                                      cipherList: "AES128-GCM-SHA256"))
        #expect(status == 1)
        #expect(diagnostics.serverFixes.first?.contains("static-RSA key exchange") == true, "\(diagnostics.serverFixes)")
        #expect(diagnostics.exception == ["NSExceptionRequiresForwardSecrecy": "NO"])
    }

    @Test("a server that does not send its intermediate: an Apple client fetches it from the AIA and connects, the server is told to send it; --no-aia-fetch judges without")
    func missingIntermediateFetched() throws {
        let http = try LabHTTPServer()
        defer { http.stop() }
        http.serve(pki.intermediate.der, at: "/int.cer")
        let leaf = try pki.leaf { $0.extraExtensions = [.init(name: "authorityInfoAccess", value: "caIssuers;URI:\(http.url("/int.cer"))")] }
        let (status, diagnostics, text) = try ats(LabServerConfiguration(chain: [leaf]))
        #expect(status == 0, "\(diagnostics.trustProblems) \(diagnostics.serverFixes)")
        #expect(diagnostics.runtime.pass && diagnostics.exception.isEmpty)
        #expect(diagnostics.serverFixes.contains { $0.hasPrefix("send the intermediate CA certificate with the leaf") }, "\(diagnostics.serverFixes)")
        #expect(text.contains("send the intermediate CA certificate with the leaf"), "\(text)")
        #expect(http.requests(to: "/int.cer") >= 1)
        let (offline, judged, _) = try ats(LabServerConfiguration(chain: [leaf]), extra: ["--no-aia-fetch"])
        #expect(offline == 1)
        #expect(judged.trustProblems.contains { $0.contains("issuer") || $0.contains("intermediate") }, "\(judged.trustProblems)")
        #expect(!judged.runtime.pass)

        // A private chain sent whole, judged without its root: the root fetched from the
        // intermediate's AIA anchors nothing, and is no certificate to tell the server to send.
        http.serve(pki.root.der, at: "/root.cer")
        var authority = LabCertificateRequest.authority("aia test intermediate")
        authority.extraExtensions = [.init(name: "authorityInfoAccess", value: "caIssuers;URI:\(http.url("/root.cer"))")]
        let intermediate = try pki.root.issue(authority)
        let privateServer = try LabTLSServer(LabServerConfiguration(chain: [try intermediate.issue(.server([TestPKI.hostname])), intermediate]))
        defer { privateServer.stop() }
        let output = try CLI.run(["ats", "--format", "json", "--connect-to", "127.0.0.1", "\(TestPKI.hostname):\(privateServer.port)"])
        let untrusted = try JSONDecoder.tlsaudit.decode(ATSDiagnostics.self, from: Data(output.stdout.utf8))
        #expect(output.status == 1)
        #expect(http.requests(to: "/root.cer") >= 1, "the root was fetched")
        #expect(!untrusted.serverFixes.contains { $0.hasPrefix("send the intermediate") }, "\(untrusted.serverFixes)")
    }

    @Test("a server whose key signs only with schemes Apple's clients do not offer: the fix is the certificate's key, not the suite",
          arguments: ["P-521", "Ed25519", "RSA-PSS"])
    func unofferedSignature(key: String) throws {
        let leaf: LabCertificate = switch key {
        case "P-521": try pki.leaf(key: .ec(curve: "P-521"))
        case "Ed25519": try pki.leaf(key: .ed25519)
        default: try pki.leaf(key: .rsaPSS(bits: 2048))
        }
        let (status, diagnostics, text) = try ats(LabServerConfiguration(chain: chain(leaf)))
        #expect(status == 1)
        #expect(!diagnostics.runtime.pass)
        let fix = try #require(diagnostics.serverFixes.first, "\(text)")
        #expect(fix.hasPrefix("serve a certificate with an RSA key of 2048 bits or more or an ECDSA P-256 or P-384 key"), "\(fix)")
        #expect(!fix.contains("which current Apple clients do not offer"), "the suite is one they offer: \(fix)")
        #expect(diagnostics.appSide.hasPrefix("no exception makes current Apple clients connect"), "\(diagnostics.appSide)")
    }

    @Test("a server that signs only with SHA-224 (its key is fine): no advice to change the key")
    func unofferedSignatureSetting() throws {
        let (status, diagnostics, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf()), maxVersion: .tls1_2,
                                                                      cipherList: "ECDHE-RSA-AES128-GCM-SHA256", signatureAlgorithms: "RSA+SHA224"))
        #expect(status == 1)
        let fix = try #require(diagnostics.serverFixes.first)
        #expect(fix.hasPrefix("make the server complete a handshake with a current client") && fix.contains("signature algorithms"), "\(fix)")
    }

    @Test("a server whose only key-exchange group is X448: the fix is the group")
    func unofferedGroup() throws {
        let (status, diagnostics, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf()), groups: "X448"))
        #expect(status == 1)
        #expect(diagnostics.serverFixes.first?.hasPrefix("enable X25519 or P-256 for key exchange") == true, "\(diagnostics.serverFixes)")
        #expect(diagnostics.serverFixes.first?.contains("x448") == true, "\(diagnostics.serverFixes)")
    }

    @Test("a DHE-only server: no exception helps; enable ECDHE")
    func dheOnly() throws {
        let (status, diagnostics, text) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(key: .rsa(bits: 2048))), maxVersion: .tls1_2,
                                                                         cipherList: "DHE-RSA-AES128-GCM-SHA256", dhGroup: .automatic))
        #expect(status == 1)
        #expect(diagnostics.serverFixes.first?.contains("Apple clients never offer DHE suites") == true, "\(diagnostics.serverFixes)")
        #expect(diagnostics.exception.isEmpty && diagnostics.infoPlist == nil)
        #expect(diagnostics.appSide.hasPrefix("no exception makes current Apple clients connect"))
        #expect(!text.contains("NSAllowsArbitraryLoads</key>"))
    }

    @Test("an RSA-1024 or SHA-1 leaf, or a self-signed one: no key lifts the trust rules; insecure HTTP loads with own evaluation, risk named",
          arguments: ["rsa-1024", "sha-1", "self-signed"])
    func trustRules(kind: String) throws {
        let leaf: LabCertificate = switch kind {
        case "rsa-1024": try pki.leaf(key: .rsa(bits: 1024))
        case "sha-1": try pki.leaf(key: .rsa(bits: 2048), digest: .sha1)
        default: try LabCertificateAuthority.selfSigned(.server([TestPKI.hostname]))
        }
        let (status, diagnostics, _) = try ats(LabServerConfiguration(chain: kind == "self-signed" ? [leaf] : chain(leaf)))
        #expect(status == 1)
        #expect(!diagnostics.trustProblems.isEmpty)
        let expectedFix = switch kind {
        case "rsa-1024": "RSA key of 2048 bits or more"
        case "sha-1": "signed with SHA-256 or stronger"
        default: "use a certificate the devices trust"
        }
        #expect(diagnostics.serverFixes.contains { $0.contains(expectedFix) }, "\(diagnostics.serverFixes)")
        #expect(diagnostics.appSide.hasPrefix("No Info.plist exception makes the default trust evaluation pass"), "\(diagnostics.appSide)")
        #expect(diagnostics.appSide.contains("anyone on the network path can impersonate the server"))
        #expect(diagnostics.exception == ["NSExceptionAllowsInsecureHTTPLoads": "YES"])
        for name in ["no-forward-secrecy", "TLSv1.0", "arbitrary-loads"] {
            #expect(diagnostics.configurations.first { $0.name == name }?.pass == false, "\(name) cannot lift Apple's trust rules")
        }
        #expect(diagnostics.configurations.first { $0.name == "insecure-http-loads" }?.pass == true)
    }

    @Test("a SHA-224 leaf: ATS refuses it, trustd's rules for all TLS take it (SHA-2), so only ATS off (NSAllowsArbitraryLoads) connects")
    func sha224Leaf() throws {
        let (status, diagnostics, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(digest: .sha224))))
        #expect(status == 1)
        #expect(diagnostics.configurations.first { $0.name == "default" }?.pass == false, "ATS requires SHA-256 or stronger")
        #expect(diagnostics.configurations.first { $0.name == "no-forward-secrecy" }?.pass == false, "no exception but ATS off lifts the digest rule")
        let off = try #require(diagnostics.configurations.first { $0.name == "arbitrary-loads" })
        #expect(off.pass, "\(off.detail)")
        #expect(diagnostics.trustProblems.isEmpty, "a SHA-224 signature breaks no trust rule: \(diagnostics.trustProblems)")
        #expect(diagnostics.serverFixes.contains { $0.contains("SHA-256") }, "the server still gets the fix: \(diagnostics.serverFixes)")
        #expect(diagnostics.exception == ["NSAllowsArbitraryLoads": "YES"], "\(diagnostics.exception)")
        // A SHA-1 leaf still fails with ATS off: trustd refuses SHA-1 for all TLS.
        let (_, sha1, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(digest: .sha1))))
        #expect(sha1.configurations.first { $0.name == "arbitrary-loads" }?.pass == false)
    }

    @Test("a self-signed server: the row NSAllowsArbitraryLoads with the app's own trust evaluation passes; arbitrary loads alone do not")
    func arbitraryLoadsOwnTrust() throws {
        let leaf = try LabCertificateAuthority.selfSigned(.server([TestPKI.hostname]))
        let (status, diagnostics, text) = try ats(LabServerConfiguration(chain: [leaf]))
        #expect(status == 1)
        let row = try #require(diagnostics.configurations.first { $0.name == "arbitrary-loads+own-trust-evaluation" })
        #expect(row.pass, "\(row.detail)")
        #expect(row.exception == ["NSAllowsArbitraryLoads": "YES"])
        #expect(row.ownTrustEvaluation && !row.diagnostic)
        #expect(diagnostics.configurations.first { $0.name == "arbitrary-loads" }?.pass == false, "the system's trust evaluation still refuses it")
        #expect(text.contains("arbitrary-loads+own-trust-evaluation"), "\(text)")
        // A TLS 1.0, static-RSA-only server with a trusted chain: the row has no version or forward-secrecy minimum.
        let (_, legacy, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(key: .rsa(bits: 2048))), minVersion: .tls1_0,
                                                            maxVersion: .tls1_0, cipherList: "AES128-SHA"))
        #expect(legacy.configurations.first { $0.name == "arbitrary-loads+own-trust-evaluation" }?.pass == true)
        // A DHE-only server: current clients offer no DHE suite, whatever the app evaluates.
        let (_, dhe, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(key: .rsa(bits: 2048))), maxVersion: .tls1_2,
                                                         cipherList: "DHE-RSA-AES128-GCM-SHA256", dhGroup: .automatic))
        #expect(dhe.configurations.first { $0.name == "arbitrary-loads+own-trust-evaluation" }?.pass == false)
    }

    @Test("no TLS server (plain HTTP, garbage, nothing listening): exit 2 and says so; plain HTTP names the http:// exception")
    func noTLSServer() throws {
        func run(_ port: Int) throws -> CLI.Output {
            try CLI.run(["ats", "--timeout", "2", "--connect-to", "127.0.0.1", "\(TestPKI.hostname):\(port)"])
        }
        let http = try LabHostileServer(.plainHTTP)
        defer { http.stop() }
        let plain = try run(http.port)
        #expect(plain.status == 2, "\(plain.stdout)")
        #expect(plain.stdout.isEmpty)
        #expect(plain.stderr.contains("no TLS server at \(TestPKI.hostname):\(http.port) (127.0.0.1): not TLS"), "\(plain.stderr)")
        #expect(plain.stderr.contains("the server speaks plain HTTP (GET / answered 400)"), "\(plain.stderr)")
        #expect(plain.stderr.contains("http://\(TestPKI.hostname):\(http.port)/ with NSExceptionAllowsInsecureHTTPLoads = YES for \(TestPKI.hostname)"),
                "\(plain.stderr)")
        #expect(!plain.stderr.contains("no exception makes"))

        let garbage = try LabHostileServer(.garbage)
        defer { garbage.stop() }
        let noise = try run(garbage.port)
        #expect(noise.status == 2)
        #expect(noise.stderr.contains("no TLS server") && noise.stderr.contains("not TLS"), "\(noise.stderr)")
        #expect(!noise.stderr.contains("plain HTTP"), "only an HTTP answer is called HTTP: \(noise.stderr)")

        let refused = try run(try LabPorts.unusedPort())
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("no TLS server") && refused.stderr.contains("connection refused"), "\(refused.stderr)")

        // A TLS server that has nothing in common with any client still exits 1: no exception helps.
        let (status, diagnostics, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(key: .rsa(bits: 2048))), maxVersion: .tls1_2,
                                                                      cipherList: "DHE-RSA-AES128-GCM-SHA256", dhGroup: .automatic))
        #expect(status == 1 && diagnostics.appSide.hasPrefix("no exception makes current Apple clients connect"))
    }

    @Test("only ECDHE-RSA-AES128-SHA256: passes the documented list; current clients cannot connect; no exception helps")
    func cbcSHA256Only() throws {
        let (status, diagnostics, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(key: .rsa(bits: 2048))), maxVersion: .tls1_2,
                                                                      cipherList: "ECDHE-RSA-AES128-SHA256"))
        #expect(status == 1)
        #expect(diagnostics.currentClients.contains("passes Apple's documented ATS list"))
        #expect(diagnostics.serverFixes.first?.contains("no longer offer") == true, "\(diagnostics.serverFixes)")
        #expect(diagnostics.serverFixes.first?.contains("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == true, "\(diagnostics.serverFixes)")
        #expect(diagnostics.exception.isEmpty)
        // With an ECDSA leaf the example suite is one that certificate can serve.
        let (_, ecdsa, _) = try ats(LabServerConfiguration(chain: chain(try pki.leaf(key: .ec(curve: "P-256"))), maxVersion: .tls1_2,
                                                           cipherList: "ECDHE-ECDSA-AES128-SHA256"))
        #expect(ecdsa.serverFixes.first?.contains("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") == true, "\(ecdsa.serverFixes)")
    }

    @Test("a good server: exit 0, no exception, nothing to fix")
    func good() throws {
        let (status, diagnostics, text) = try ats(LabServerConfiguration(chain: chain(try pki.leaf())))
        #expect(status == 0)
        #expect(diagnostics.recommendation.hasPrefix("no exception needed"))
        #expect(diagnostics.serverFixes.isEmpty && diagnostics.exception.isEmpty && diagnostics.infoPlist == nil)
        #expect(!text.contains("fix on the server"))
    }
}
