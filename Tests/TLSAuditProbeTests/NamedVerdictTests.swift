import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditServiceLab

/// The named verdicts of `scan --checks vulnerabilities` (DROWN ... ClientHello tolerance), each
/// against a server that has the weakness (a real one where this machine has one: `gnutls-serv`
/// with RC4 and 3DES, an OpenSSL server with a 1024-bit DH group, `s_server
/// -client_renegotiation`, nginx with gzip; else `LabVulnerableServer` answering as the weak
/// server did) and against servers that do not.
@Suite("named verdicts: DROWN, POODLE, SWEET32, FREAK, LOGJAM, RC4, BEAST, LUCKY13, BREACH, Ticketbleed, client renegotiation, ClientHello tolerance", .serialized)
struct NamedVerdictTests {
    let lab = ServiceLab.shared
    let scan = VulnerabilityTests()
    static let named = ["drown", "poodle", "sweet32", "freak", "logjam", "rc4", "beast", "lucky13", "breach", "ticketbleed",
                        "client_renegotiation", "hello_tolerance"]

    static func status(_ report: [String: Any], _ key: String) -> String? { VulnerabilityTests.status(report, key) }
    static func detail(_ report: [String: Any], _ key: String) -> String { (report[key] as? [String: Any])?["detail"] as? String ?? "" }

    /// Every verdict `expected` names has that status, the others are not vulnerable; `vuln.<name>`
    /// findings exactly for the vulnerable ones.
    func expect(_ mine: (report: [String: Any], findings: [String], raw: String), vulnerable expected: Set<String>,
                sourceLocation: SourceLocation = #_sourceLocation) {
        for key in Self.named {
            let want = expected.contains(key) ? "vulnerable" : "not-vulnerable"
            #expect(Self.status(mine.report, key) == want, "\(key): \(mine.report[key] ?? "absent")", sourceLocation: sourceLocation)
        }
        let found = Set(mine.findings.filter { $0.hasPrefix("vuln.") }.map { String($0.dropFirst(5)).replacingOccurrences(of: "-", with: "_") })
        #expect(found == expected, "findings \(mine.findings)", sourceLocation: sourceLocation)
    }

    /// nginx with TLS 1.2 and 1.3, the RSA leaf, and `directives`.
    func nginx(_ directives: String) throws -> LabNginxServer {
        try LabNginxServer(servers: [(directives: "ssl_protocols TLSv1.2 TLSv1.3;\n" + directives,
                                      chainPEM: VulnerabilityTests.leaf.pem + lab.intermediate.pem, keyPEM: VulnerabilityTests.leaf.key.pem)])
    }

    @Test("gnutls-serv with RC4, 3DES and TLS 1.0 (Done-when): RC4 and SWEET32 named with their CVEs, BEAST, LUCKY13 and client renegotiation too; DHE on ffdhe2048 is no LOGJAM; nothing else")
    func gnutlsRC4And3DES() throws {
        let server = try LabGnuTLSServer(certificatePEM: VulnerabilityTests.leaf.pem + lab.intermediate.pem, keyPEM: VulnerabilityTests.leaf.key.pem,
                                         priority: "NORMAL:+ARCFOUR-128:+3DES-CBC:+VERS-TLS1.0:+DHE-RSA")
        defer { server.stop() }
        let started = ContinuousClock.now
        let mine = try scan.ours(server.port)
        let elapsed = ContinuousClock.now - started
        // gnutls-serv also completes a renegotiation the client starts (GnuTLS's safe renegotiation).
        expect(mine, vulnerable: ["rc4", "sweet32", "beast", "lucky13", "client_renegotiation"])
        #expect(Self.detail(mine.report, "rc4").contains("TLS_RSA_WITH_RC4_128"), "\(Self.detail(mine.report, "rc4"))")
        #expect(Self.detail(mine.report, "sweet32").contains("3DES"), "\(Self.detail(mine.report, "sweet32"))")
        #expect(mine.raw.contains("CVE-2013-2566") && mine.raw.contains("CVE-2016-2183") && mine.raw.contains("https://sweet32.info"))
        #expect(Self.detail(mine.report, "logjam").contains("ffdhe2048"), "\(Self.detail(mine.report, "logjam"))")
        #expect(elapsed < .seconds(10), "the whole vulnerability scan took \(elapsed)")
    }

    @Test("nginx, TLS 1.2 and 1.3 with AEAD suites only, tickets on, no gzip: not vulnerable to any named verdict, each saying why")
    func modernNginx() throws {
        let nginx = try nginx("ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305;\nssl_session_tickets on;")
        defer { nginx.stop() }
        let mine = try scan.ours(nginx.port)
        expect(mine, vulnerable: [])
        #expect(Self.detail(mine.report, "ticketbleed").contains("echoed the 6-byte session ID as sent"), "\(Self.detail(mine.report, "ticketbleed"))")
        #expect(Self.detail(mine.report, "breach").contains("not compressed"), "\(Self.detail(mine.report, "breach"))")
        #expect(Self.detail(mine.report, "hello_tolerance").contains("GREASE"), "\(Self.detail(mine.report, "hello_tolerance"))")
    }

    @Test("nginx with gzip on: BREACH (the headers GET answered with Content-Encoding: gzip), and only that; the text output says so, verdict by verdict")
    func breachNginx() throws {
        let nginx = try nginx("ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256;\ngzip on;\ngzip_min_length 1;\ngzip_types text/plain;\ndefault_type text/plain;")
        defer { nginx.stop() }
        let mine = try scan.ours(nginx.port)
        expect(mine, vulnerable: ["breach"])
        #expect(Self.detail(mine.report, "breach").contains("Content-Encoding: gzip"), "\(Self.detail(mine.report, "breach"))")
        #expect(mine.raw.contains("CVE-2013-3587"))
        let text = try Binary.run(["scan", "--checks", "vulnerabilities", "--ca-file", lab.rootFile, "--sni", VulnerabilityTests.name,
                                   "--timeout", "3", "127.0.0.1:\(nginx.port)"]).stdout
        let line = { (name: String) in text.split(separator: "\n").first { $0.contains(name) }.map(String.init) ?? "" }
        #expect(line("BREACH (CVE-2013-3587)").contains("VULNERABLE") && line("SWEET32 (CVE-2016-2183)").contains("not vulnerable"), "\(text)")
        #expect(line("ClientHello intolerance (RFC 8701 (GREASE))").contains("not vulnerable"), "\(text)")
    }

    @Test("OpenSSL with a 1024-bit DH group (RFC 2409 group 2) and TLS 1.0: LOGJAM, BEAST, LUCKY13; s_server -client_renegotiation: client renegotiation, as sslyze finds")
    func weakDHAndRenegotiation() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [VulnerabilityTests.leaf, lab.intermediate], minVersion: .tls1_0, maxVersion: .tls1_2,
                                                             cipherList: "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-SHA:@SECLEVEL=0", dhGroup: .weak1024))
        defer { server.stop() }
        let mine = try scan.ours(server.port)
        expect(mine, vulnerable: ["logjam", "beast", "lucky13"])
        #expect(Self.detail(mine.report, "logjam").contains("1024-bit group, a prime many servers share (RFC2409/Oakley Group 2)"),
                "\(Self.detail(mine.report, "logjam"))")

        let renegotiating = try LabOpenSSLServer(certificatePEM: VulnerabilityTests.leaf.pem + lab.intermediate.pem, keyPEM: VulnerabilityTests.leaf.key.pem,
                                                 arguments: ["-client_renegotiation", "-no_tls1_3", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"])
        defer { renegotiating.stop() }
        let reneg = try scan.ours(renegotiating.port)
        expect(reneg, vulnerable: ["client_renegotiation"])
        let sslyze = try InventoryTests.sslyze(renegotiating.port, ["reneg"], oneConnectionServer: true)
        #expect(sslyze["session_renegotiation"]?["is_vulnerable_to_client_renegotiation_dos"] as? Bool == true, "\(sslyze)")
    }

    @Test("emulated DROWN, POODLE, FREAK, LOGJAM (export DH), Ticketbleed and ClientHello intolerance (of size and GREASE, of GREASE alone): each vulnerable, alone; the real server behind them: none; Ticketbleed's leaked bytes not kept")
    func emulated() throws {
        let server = try scan.realServer()
        defer { server.stop() }
        let plain = try scan.ours(server.port)
        for key in ["drown", "poodle", "freak", "logjam", "ticketbleed", "hello_tolerance"] {
            #expect(Self.status(plain.report, key) == "not-vulnerable", "\(key): \(plain.report[key] ?? "absent")")
        }
        // The export suites emulated are DES40 ones: SWEET32 as well, as every export suite is RC4 or a 64-bit block cipher.
        let cases: [(LabVulnerability, String, String, also: Set<String>)] = [
            (.sslv2, "drown", "the same key as the TLS certificate's", []), (.sslv3CBC, "poodle", "SSLv3", []),
            (.exportRSA, "freak", "512-bit temporary RSA key", ["sweet32"]), (.exportDH, "logjam", "EXPORT", ["sweet32"]),
            (.ticketbleed, "ticketbleed", "echoed 32 bytes", []),
            (.helloIntolerance(bytes: 512), "hello_tolerance", "fails on a 700-byte ClientHello (closed the connection without answering the ClientHello) and on GREASE values", []),
            // Only GREASE breaks this one: the answer says so, not the size.
            (.helloIntolerance(bytes: 16_384), "hello_tolerance", "fails on GREASE values (closed the connection without answering the ClientHello): clients", []),
        ]
        for (behaviour, key, evidence, also) in cases {
            let relay = try LabVulnerableServer(behaviour, backendPort: server.port, keyPEM: VulnerabilityTests.leaf.key.pem,
                                                chainDER: [VulnerabilityTests.leaf.der, lab.intermediate.der])
            defer { relay.stop() }
            let mine = try scan.ours(relay.port)
            #expect(Self.status(mine.report, key) == "vulnerable", "\(key): \(mine.report[key] ?? "absent")")
            #expect(Self.detail(mine.report, key).contains(evidence), "\(key): \(Self.detail(mine.report, key))")
            #expect(mine.findings.contains("vuln." + key.replacingOccurrences(of: "_", with: "-")), "\(mine.findings)")
            let others = Self.named.filter { $0 != key && Self.status(plain.report, $0) == "not-vulnerable" }
            for other in others {
                #expect(Self.status(mine.report, other) == (also.contains(other) ? "vulnerable" : "not-vulnerable"), "\(key) relay, \(other): \(mine.report[other] ?? "absent")")
            }
            #expect(!mine.raw.contains("LAB-MEMORY"), "leaked bytes must not be kept")
        }
    }

    @Test("DROWN across a target's addresses (--connect-to twice): the address that speaks no SSLv2 but has the key the other's SSLv2 SERVER-HELLO carries is vulnerable too, with vuln.drown")
    func drownSharedKey() throws {
        let server = try scan.realServer()
        defer { server.stop() }
        let sslv2 = try LabVulnerableServer(.sslv2, backendPort: server.port, keyPEM: VulnerabilityTests.leaf.key.pem,
                                            chainDER: [VulnerabilityTests.leaf.der])
        defer { sslv2.stop() }
        let output = try Binary.run(["scan", "--format", "json", "--checks", "vulnerabilities", "--ca-file", lab.rootFile, "--timeout", "3",
                                     "--connect-to", "127.0.0.1:\(sslv2.port)", "--connect-to", "127.0.0.1:\(server.port)",
                                     "\(VulnerabilityTests.name):443"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        let addresses = try #require((document["targets"] as? [[String: Any]])?.first?["addresses"] as? [[String: Any]])
        let byPort = Dictionary(uniqueKeysWithValues: addresses.map { ($0["port"] as? Int ?? 0, $0) })
        let relay = try #require(byPort[sslv2.port]?["vulnerabilities"] as? [String: Any]), plain = try #require(byPort[server.port]?["vulnerabilities"] as? [String: Any])
        #expect(Self.status(relay, "drown") == "vulnerable" && relay["sslv2_key"] as? String != nil, "\(relay)")
        #expect(Self.status(plain, "drown") == "vulnerable" && plain["sslv2_key"] == nil, "\(plain["drown"] ?? "")")
        #expect(Self.detail(plain, "drown").contains("speaks no SSLv2, but its certificate's key") && Self.detail(plain, "drown").contains(":\(sslv2.port)"),
                "\(Self.detail(plain, "drown"))")
        let findings = (byPort[server.port]?["findings"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        #expect(findings.contains("vuln.drown"), "\(findings)")
        // Alone, the same server is not vulnerable (emulated() checks it): the verdict comes from the other address.
    }

    @Test("a vulnerability report stored before the named verdicts decodes, without them; each verdict's finding is catalogued (docs/findings.md) with the severity its findings carry")
    func oldRowsAndText() throws {
        let old = #"{"heartbleed":{"status":"not-vulnerable","detail":"a"},"ccs_injection":{"status":"not-vulnerable","detail":"b"},"robot":{"status":"vulnerable","detail":"c","oracle":"weak"},"handshakes":13,"duration_ms":5}"#
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let report = try decoder.decode(VulnerabilityReport.self, from: Data(old.utf8))
        #expect(report.answers.map(\.vulnerability) == [.heartbleed, .ccsInjection, .robot])
        #expect(report.sweet32 == nil && report.findings.map(\.id) == [.vulnROBOT])
        for vulnerability in Vulnerability.allCases {
            let entry = FindingCatalog[vulnerability.findingID]
            #expect(entry?.section == .vulnerabilities && entry?.severity == vulnerability.severity, "\(vulnerability): \(String(describing: entry))")
        }
    }
}
