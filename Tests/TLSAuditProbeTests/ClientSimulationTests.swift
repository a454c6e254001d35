import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditServiceLab
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// `scan --checks clients` against real servers (nginx, `openssl s_server`, GnuTLS's gnutls-serv),
/// with the real clients of this machine as referees: curl, `openssl s_client` and Java negotiate
/// for real, and the simulation of their recorded ClientHellos must give the same protocol and suite.
@Suite("client simulation: recorded ClientHellos against real servers, the real clients as referees", .serialized)
struct ClientSimulationTests {
    let lab = ServiceLab.shared
    static let name = "clients.lab.tlsaudit.test"
    static let rsaLeaf: LabCertificate = try! ServiceLab.shared.intermediate.issue(.server([name], key: .rsa(bits: 2048)))
    static let ecdsaLeaf: LabCertificate = try! ServiceLab.shared.intermediate.issue(.server([name], key: .ec(curve: "P-256")))
    /// The table's entries recorded from this machine's clients (scripts/generate-client-table).
    static let recorded = (curl: "curl_7881", openssl: "openssl_3019", java: "java_17015")

    /// tlsaudit's client simulation of `port`, by client short name, and the whole report (the
    /// output checked against docs/scan.schema.json).
    func simulate(_ port: Int) throws -> (clients: [String: [String: Any]], report: [String: Any]) {
        let output = try Binary.run(["scan", "--format", "json", "--checks", "clients", "--ca-file", lab.rootFile, "--sni", Self.name,
                                     "--timeout", "5", "127.0.0.1:\(port)"])
        let schema = ServiceLab.packageRoot.appendingPathComponent("docs/scan.schema.json").path
        let complaint = try LabJSONSchema.complaint(output.stdout, schema: schema)
        #expect(complaint == nil, "\(complaint ?? "")")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        let address = try #require(((document["targets"] as? [[String: Any]])?.first?["addresses"] as? [[String: Any]])?.first)
        let report = try #require(address["clients"] as? [String: Any], "\(address.keys.sorted())")
        let clients = try #require(report["clients"] as? [[String: Any]])
        return (Dictionary(uniqueKeysWithValues: clients.map { ($0["short"] as? String ?? "", $0) }), report)
    }

    /// What a real client negotiated: protocol (`TLSv1.3`) and suite (OpenSSL's name for s_client and curl, IANA's for Java).
    struct Negotiated: Equatable, CustomStringConvertible {
        var protocolVersion: String
        var suite: String
        var description: String { "\(protocolVersion) \(suite)" }
    }

    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// `openssl s_client`: "New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384".
    static func sClient(_ port: Int) throws -> Negotiated? {
        let openssl = try LabPrerequisite.program(["/usr/bin/openssl"], package: "openssl")
        let text = try run(openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", name])
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("New, ") }) else { return nil }
        let parts = line.replacingOccurrences(of: ",", with: "").split(separator: " ")
        return parts.count >= 5 ? Negotiated(protocolVersion: String(parts[1]), suite: String(parts[4])) : nil
    }

    /// curl -v: "SSL connection using TLSv1.3 / TLS_AES_256_GCM_SHA384".
    static func curl(_ port: Int) throws -> Negotiated? {
        let curl = try LabPrerequisite.program(["/usr/bin/curl"], package: "curl")
        let text = try run(curl, ["-skv", "--max-time", "10", "-o", "/dev/null", "--resolve", "\(name):\(port):127.0.0.1", "https://\(name):\(port)/"])
        guard let line = text.split(separator: "\n").first(where: { $0.contains("SSL connection using ") }) else { return nil }
        let parts = line.components(separatedBy: "SSL connection using ")[1].components(separatedBy: " / ")
        return parts.count == 2 ? Negotiated(protocolVersion: parts[0], suite: parts[1].trimmingCharacters(in: .whitespaces)) : nil
    }

    /// Java 17's default SSLContext (scripts/TLSClientProbe.java): "TLSv1.3 TLS_AES_256_GCM_SHA384".
    static func java(_ port: Int) throws -> Negotiated? {
        let java = try LabPrerequisite.program(["/usr/bin/java"], package: "default-jdk-headless")
        let probe = ServiceLab.packageRoot.appendingPathComponent("scripts/TLSClientProbe.java").path
        let text = try run(java, [probe, "127.0.0.1", String(port), name])
        guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("TLS") || $0.hasPrefix("SSL") }) else { return nil }
        let parts = line.split(separator: " ")
        return parts.count == 2 ? Negotiated(protocolVersion: String(parts[0]), suite: String(parts[1])) : nil
    }

    /// The simulation of each recorded client gives what that client negotiates for real.
    func expectAgreement(_ port: Int, server: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let (clients, _) = try simulate(port)
        func simulated(_ short: String, openssl: Bool) -> Negotiated? {
            guard let entry = clients[short], entry["connects"] as? Bool == true else { return nil }
            return Negotiated(protocolVersion: entry["protocol_version"] as? String ?? "",
                              suite: entry[openssl ? "openssl_suite" : "suite"] as? String ?? "")
        }
        let real: [(String, Negotiated?, Bool)] = [(Self.recorded.openssl, try Self.sClient(port), true),
                                                   (Self.recorded.curl, try Self.curl(port), true),
                                                   (Self.recorded.java, try Self.java(port), false)]
        for (short, negotiated, openssl) in real {
            #expect(negotiated != nil, "\(server): the real \(short) did not connect", sourceLocation: sourceLocation)
            #expect(simulated(short, openssl: openssl) == negotiated, "\(server): \(short) simulated \(clients[short] ?? [:])",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("nginx with TLS 1.2 and 1.3 (Mozilla intermediate suites): curl, s_client and Java each negotiate what their simulation says")
    func modernNginx() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: """
                server_name \(Self.name);
                ssl_protocols TLSv1.2 TLSv1.3;
                ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305;
                """, chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        try expectAgreement(nginx.port, server: "nginx TLS 1.2+1.3")
    }

    @Test("openssl s_server with TLS 1.2 and RSA key exchange only: the real clients and their simulations agree")
    func rsaKeyExchangeServer() throws {
        let server = try LabOpenSSLServer(certificatePEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem,
                                          arguments: ["-no_tls1_3", "-cipher", "AES256-GCM-SHA384:AES128-GCM-SHA256:AES128-SHA"])
        defer { server.stop() }
        try expectAgreement(server.port, server: "s_server TLS 1.2 RSA key exchange")
        let (clients, _) = try simulate(server.port)
        #expect(clients[Self.recorded.curl]?["group"] as? String == "RSA key exchange")
    }

    @Test("gnutls-serv (GnuTLS NORMAL with TLS 1.3, and TLS 1.2 only in its own suite order): the real clients and their simulations agree")
    func gnutls() throws {
        for priority in ["NORMAL", "NORMAL:-VERS-TLS1.3:%SERVER_PRECEDENCE"] {
            let server = try LabGnuTLSServer(certificatePEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem,
                                             priority: priority)
            defer { server.stop() }
            try expectAgreement(server.port, server: "gnutls-serv \(priority)")
        }
    }

    @Test("a TLS 1.3-only server: TLS 1.2 clients fail on the protocol, TLS 1.3 ones connect with their group; the SNI is rewritten (the named server's RSA key, not the default server's)")
    func tls13Only() throws {
        let other = try LabCertificateAuthority.selfSigned(.server(["default.lab.tlsaudit.test"], key: .ec(curve: "P-384")))
        let nginx = try LabNginxServer(servers: [
            (directives: "ssl_protocols TLSv1.3;", chainPEM: other.pem, keyPEM: other.key.pem),
            (directives: "server_name \(Self.name);\nssl_protocols TLSv1.3;", chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem,
             keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let started = Date()
        let (clients, report) = try simulate(nginx.port)
        let elapsed = Date().timeIntervalSince(started)
        #expect(clients.count >= 160 && (report["connections"] as? Int ?? 0) == clients.count)
        let android44 = try #require(clients["android_442"])
        #expect(android44["connects"] as? Bool == false)
        #expect((android44["failure"] as? String ?? "").contains("protocol_version"), "\(android44)")
        let chrome = try #require(clients["chrome_101_win10"])
        #expect(chrome["connects"] as? Bool == true && chrome["protocol_version"] as? String == "TLSv1.3", "\(chrome)")
        #expect(chrome["group"] as? String == "x25519", "\(chrome)")
        let curl = try #require(clients[Self.recorded.curl])
        #expect(curl["server_key"] as? String == "RSA 2048", "\(curl)")
        #expect(clients.values.filter { $0["connects"] as? Bool == true }.allSatisfy { $0["protocol_version"] as? String == "TLSv1.3" })
        #expect(elapsed < 30, "the client simulation took \(elapsed) s")
    }

    @Test("TLS 1.3 with secp384r1 only: a client whose key share is x25519 gets a HelloRetryRequest and connects with secp384r1; one that does not offer secp384r1 fails saying so")
    func helloRetryRequest() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: "ssl_protocols TLSv1.3;\nssl_ecdh_curve secp384r1;", chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem,
             keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let (clients, _) = try simulate(nginx.port)
        let chrome = try #require(clients["chrome_101_win10"])
        #expect(chrome["connects"] as? Bool == true && chrome["group"] as? String == "secp384r1", "\(chrome)")
        let refused = clients.values.filter { ($0["failure"] as? String ?? "").contains("HelloRetryRequest") }
        #expect(refused.allSatisfy { ($0["failure"] as? String ?? "").contains("secp384r1") }, "\(refused)")
        // Every TLS 1.3 client either connects with secp384r1 or fails for want of it.
        #expect(clients.values.filter { $0["protocol_version"] as? String == "TLSv1.3" }
            .allSatisfy { $0["group"] as? String == "secp384r1" || $0["connects"] as? Bool == false })
    }

    @Test("over STARTTLS (SMTP): each client's hello after the dialogue, at most 5 connections at a time (scan's per-host limit)")
    func starttls() throws {
        let counter = LabSTARTTLSScript.Counter()
        var configuration = LabServerConfiguration(chain: [Self.rsaLeaf, lab.intermediate])
        configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(.smtp, .upgrade, counter: counter)
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let output = try Binary.run(["scan", "--format", "json", "--checks", "clients", "--starttls", "smtp", "--ca-file", lab.rootFile,
                                     "--sni", Self.name, "--timeout", "5", "127.0.0.1:\(server.port)"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        let address = try #require(((document["targets"] as? [[String: Any]])?.first?["addresses"] as? [[String: Any]])?.first)
        let clients = try #require((address["clients"] as? [String: Any])?["clients"] as? [[String: Any]])
        let curl = try #require(clients.first { $0["short"] as? String == Self.recorded.curl })
        #expect(curl["connects"] as? Bool == true && curl["protocol_version"] as? String == "TLSv1.3", "\(curl)")
        #expect(counter.total > clients.count && counter.peak <= 5, "\(counter.total) dialogues, \(counter.peak) at once")
    }

    @Test("an ECDSA-only TLS 1.2 server: a TLS 1.2 client without ECDSA suites (Chrome 49 on XP) fails on the handshake, TLS 1.0 ones on the protocol; modern ones connect with their curve")
    func ecdsaOnly() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: "ssl_protocols TLSv1.2;\nssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-SHA;\nssl_ecdh_curve prime256v1;",
             chainPEM: Self.ecdsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.ecdsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let (clients, _) = try simulate(nginx.port)
        let xp = try #require(clients["chrome_49_xpsp3"])
        #expect(xp["connects"] as? Bool == false && (xp["failure"] as? String ?? "").contains("handshake_failure"), "\(xp)")
        let android23 = try #require(clients["android_237"])
        #expect(android23["connects"] as? Bool == false && (android23["failure"] as? String ?? "").contains("protocol_version"), "\(android23)")
        let firefox = try #require(clients["firefox_100_win10"])
        #expect(firefox["connects"] as? Bool == true && firefox["suite"] as? String == "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "\(firefox)")
        #expect(firefox["group"] as? String == "secp256r1" && (firefox["server_key"] as? String ?? "").hasPrefix("EC 256"), "\(firefox)")
    }

    @Test("DHE with a 3072-bit group: Java 8 (at most 2048-bit DH) fails with the reason, Java 11 connects with the DH size")
    func dhAboveJava8Maximum() throws {
        let big = try lab.intermediate.issue(.server([Self.name], key: .rsa(bits: 3072)))
        // OpenSSL picks the DH group to match the key: 3072 bits for RSA-3072.
        let server = try LabOpenSSLServer(certificatePEM: big.pem + lab.intermediate.pem, keyPEM: big.key.pem,
                                          arguments: ["-no_tls1_3", "-cipher", "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-SHA"])
        defer { server.stop() }
        let (clients, _) = try simulate(server.port)
        let java8 = try #require(clients["java_8u161"])
        #expect(java8["connects"] as? Bool == false, "\(java8)")
        #expect((java8["failure"] as? String ?? "").contains("above the client's maximum of 2048"), "\(java8)")
        let java11 = try #require(clients["java1102"])
        #expect(java11["connects"] as? Bool == true, "\(java11)")
        #expect(["ffdhe3072", "DH 3072 bits"].contains(java11["group"] as? String ?? ""), "\(java11)")
    }

    @Test("ats: the oldest iOS of the table that connects (iOS 12.2 against a TLS 1.3-only server; older ones listed as failing)")
    func atsOldestIOS() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: "ssl_protocols TLSv1.3;", chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let output = try Binary.run(["ats", "--format", "json", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", "\(Self.name):\(nginx.port)"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        let oldest = try #require(document["oldest_connecting_ios"] as? [String: Any], "\(document.keys.sorted())")
        #expect(oldest["client"] as? String == "Safari 12.1 (iOS 12.2)", "\(oldest)")
        // The typed document reads the new fields back (snake_case keys round-trip).
        let decoded = try JSONDecoder.tlsaudit.decode(ATSDiagnostics.self, from: Data(output.stdout.utf8))
        #expect(decoded.oldestConnectingIos?.client == "Safari 12.1 (iOS 12.2)" && decoded.iosClients?.count == (document["ios_clients"] as? [Any])?.count)
        let ios = try #require(document["ios_clients"] as? [[String: Any]])
        #expect(ios.first?["short"] as? String == "safari_5_ios511" && ios.count >= 9)
        #expect(ios.prefix { $0["short"] as? String != "safari_121_ios_122" }.allSatisfy { $0["connects"] as? Bool == false })
        let text = try Binary.run(["ats", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", "\(Self.name):\(nginx.port)"])
        #expect(text.stdout.contains("oldest iOS that connects: Safari 12.1 (iOS 12.2) (TLSv1.3 "), "\(text.stdout)")
    }

    @Test("serve with checks: [clients]: the simulation is stored with each scan (history shows it); a target without the check has none")
    func service() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: "ssl_protocols TLSv1.2 TLSv1.3;", chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let (service, database) = try lab.service("clients-serve", sni: Self.name, targets: [
            "{host: \(Self.name), port: \(nginx.port), name: checked, checks: [clients]}",
            "{host: \(Self.name), port: \(nginx.port), name: plain}",
        ])
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("both targets scanned", timeout: 60) { Set(service.storedScans.map(\.target)) == ["checked", "plain"] }
        let checked = try ServiceLab.latestHistory("checked", database: database)
        let stored = try #require(checked["clients"] as? [String: Any], "\(checked.keys.sorted())")
        let clients = try #require(stored["clients"] as? [[String: Any]])
        #expect(clients.count >= 160)
        #expect(clients.first { $0["short"] as? String == Self.recorded.curl }?["protocol_version"] as? String == "TLSv1.3")
        #expect(try ServiceLab.latestHistory("plain", database: database)["clients"] == nil)
    }

    @Test("report hygiene: a current TLS 1.2 client that fails is a problem; IE 6 failing (a current reference point without TLS 1.2) is not")
    func hygiene() throws {
        let chrome = try #require(SimulatedClientRegistry.client(short: "chrome_101_win10"))
        let ie6 = try #require(SimulatedClientRegistry.client(short: "ie_6_xp"))
        let android = try #require(SimulatedClientRegistry.client(short: "android_90"))
        func report(_ results: [ClientSimulationResult]) -> [String] {
            ServerHygiene.problems(inventory: nil, headers: nil, vulnerabilities: nil,
                                   clients: ClientSimulationReport(clients: results, connections: results.count, durationMs: 1)).problems
        }
        let connects = ClientSimulationResult(client: android, connects: true, protocolVersion: "TLSv1.3")
        #expect(report([ClientSimulationResult(client: ie6, connects: false, failure: "refused"), connects]).isEmpty)
        #expect(report([ClientSimulationResult(client: chrome, connects: false, failure: "refused"), connects])
                == ["1 current client(s) cannot connect: Chrome 101 (Win 10)"])
        #expect(ServerHygiene.problems(inventory: nil, headers: nil, vulnerabilities: nil,
                                       clients: ClientSimulationReport(clients: [], connections: 0, durationMs: 0)).checks == [.clients])
    }

    @Test("README lists every client of the table with its source (scripts/generate-client-table writes both)")
    func readmeTable() throws {
        let readme = try String(contentsOf: ServiceLab.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let table = readme.components(separatedBy: "<!-- client-table:start -->").last?.components(separatedBy: "<!-- client-table:end -->").first ?? ""
        for client in SimulatedClientRegistry.all {
            #expect(table.contains("| \(client.name) |") && table.contains(client.source), "README lacks \(client.name)")
        }
        #expect(SimulatedClientRegistry.all.filter(\.modelled).allSatisfy { $0.name.contains("modelled") })
    }
}
