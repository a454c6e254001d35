import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// `scan --checks inventory` against real servers (nginx configured each way, openssl s_server),
/// with sslyze as the referee: on every item both tools test, tlsaudit must say what sslyze says.
@Suite("configuration inventory: nginx and s_server each way, sslyze as the referee", .serialized)
struct InventoryTests {
    let lab = ServiceLab.shared
    static let name = "inventory.lab.tlsaudit.test"
    static let leaf: LabCertificate = try! ServiceLab.shared.intermediate.issue(.server([name]))
    /// An RSA leaf: a TLS 1.2 server with an ECDSA key can only use the curves listed with its own
    /// (sslyze offers one curve at a time and then finds none; tlsaudit lists the key's curve after each).
    static let rsaLeaf: LabCertificate = try! ServiceLab.shared.intermediate.issue(.server([name], key: .rsa(bits: 2048)))
    static let other: LabCertificate = try! LabCertificateAuthority.selfSigned(.server(["default.lab.tlsaudit.test"]))

    /// sslyze from PyPI, in the virtualenv `.ci/run` makes (`.build-sslyze`), or `TLSAUDIT_SSLYZE`.
    static func sslyzeProgram() throws -> String {
        let root = ServiceLab.packageRoot.path
        return try LabPrerequisite.program([ProcessInfo.processInfo.environment["TLSAUDIT_SSLYZE"] ?? "\(root)/.build-sslyze/bin/sslyze",
                                            "\(root)/.build-bench/venv/bin/sslyze"],
                                           package: "sslyze (PyPI: python3 -m venv .build-sslyze && .build-sslyze/bin/pip install sslyze)")
    }

    /// sslyze's results for `port`, plugin name to result.
    /// `oneConnectionServer`: the server takes one connection at a time (`openssl s_server`): sslyze
    /// is told to open few at once (`--slow_connection`), or its parallel probes time out under load.
    /// A plugin that errored (a connection timing out under the test run's load: no verdict) is run
    /// again, up to three times in all; the last error is in the returned results' absence.
    static func sslyze(_ port: Int, _ plugins: [String], oneConnectionServer: Bool = false) throws -> [String: [String: Any]] {
        var results: [String: [String: Any]] = [:]
        for _ in 0..<3 {
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("sslyze-\(UUID().uuidString).json").path
            defer { try? FileManager.default.removeItem(atPath: output) }
            let run = try Binary.run(plugins.map { "--\($0)" } + (oneConnectionServer ? ["--slow_connection"] : [])
                                     + ["--sni", name, "--json_out", output, "127.0.0.1:\(port)"], program: try sslyzeProgram())
            let data = try Data(contentsOf: URL(fileURLWithPath: output))
            let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(run.stdout)")
            results = (document["server_scan_results"] as? [[String: Any]])?.first?["scan_result"] as? [String: [String: Any]] ?? [:]
            let errored = results.values.contains { ($0["status"] as? String).map { $0 != "COMPLETED" && $0 != "NOT_SCHEDULED" } ?? false }
            if !errored && !results.isEmpty { break }
        }
        var verdicts = results.compactMapValues { $0["result"] as? [String: Any] }
        // What went wrong, for the failure message (callers read plugins by name).
        let errors = results.compactMapValues { ($0["error_trace"] as? String).map { String($0.suffix(600)) } }
        if !errors.isEmpty { verdicts["_errors"] = errors }
        return verdicts
    }

    /// tlsaudit's inventory of `port`.
    func inventory(_ port: Int) throws -> [String: Any] {
        let output = try Binary.run(["scan", "--format", "json", "--checks", "inventory", "--ca-file", lab.rootFile, "--sni", Self.name,
                                     "--timeout", "3", "127.0.0.1:\(port)"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        let address = try #require(((document["targets"] as? [[String: Any]])?.first?["addresses"] as? [[String: Any]])?.first)
        return try #require(address["inventory"] as? [String: Any], "\(address)")
    }

    static func status(_ inventory: [String: Any], _ key: String) -> String? {
        (inventory[key] as? [String: Any])?["status"] as? String
    }

    static func yes(_ flag: Bool?) -> String { flag == true ? "yes" : "no" }

    /// Every item both tools test: the same answer.
    func crossCheck(_ port: Int, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let ours = try inventory(port)
        let theirs = try Self.sslyze(port, ["reneg", "compression", "fallback", "resum", "early_data", "elliptic_curves", "ems"])
        let renegotiation = try #require(theirs["session_renegotiation"], sourceLocation: sourceLocation)
        #expect(Self.status(ours, "secure_renegotiation") == Self.yes(renegotiation["supports_secure_renegotiation"] as? Bool), sourceLocation: sourceLocation)
        #expect(Self.status(ours, "client_renegotiation") == Self.yes(renegotiation["is_vulnerable_to_client_renegotiation_dos"] as? Bool),
                sourceLocation: sourceLocation)
        #expect(Self.status(ours, "compression") == Self.yes(theirs["tls_compression"]?["supports_compression"] as? Bool), sourceLocation: sourceLocation)
        // A server with no version below its best has no fallback to refuse: sslyze says "supported", tlsaudit "not tested".
        let fallback = Self.status(ours, "fallback_scsv") == "not-tested" ? "yes" : Self.status(ours, "fallback_scsv")
        #expect(fallback == Self.yes(theirs["tls_fallback_scsv"]?["supports_fallback_scsv"] as? Bool), sourceLocation: sourceLocation)
        #expect(Self.status(ours, "early_data") == Self.yes(theirs["tls_1_3_early_data"]?["supports_early_data"] as? Bool), sourceLocation: sourceLocation)
        #expect(Self.status(ours, "extended_master_secret") == Self.yes(theirs["tls_extended_master_secret"]?["supports_ems_extension"] as? Bool),
                sourceLocation: sourceLocation)
        let resumption = try #require(theirs["session_resumption"], sourceLocation: sourceLocation)
        #expect(Self.status(ours, "resumption_session_id") == (resumption["session_id_resumption_result"] as? String == "FULLY_SUPPORTED" ? "yes" : "no"),
                "sslyze: \(resumption)", sourceLocation: sourceLocation)
        #expect(Self.status(ours, "resumption_ticket") == (resumption["tls_ticket_resumption_result"] as? String == "FULLY_SUPPORTED" ? "yes" : "no"),
                "sslyze: \(resumption)", sourceLocation: sourceLocation)
        let curves = ((theirs["elliptic_curves"]?["supported_curves"] as? [[String: Any]]) ?? []).compactMap { ($0["name"] as? String)?.lowercased() }
        let ourCurves = ((ours["groups"] as? [String]) ?? []).filter { !$0.hasPrefix("ffdhe") && !$0.contains("MLKEM") && !$0.contains("Kyber") }
        #expect(Set(ourCurves.map { $0.lowercased() }) == Set(curves), "ours \(ourCurves), sslyze \(curves)", sourceLocation: sourceLocation)
        return ours
    }

    @Test("nginx, TLS 1.2 and 1.3 with tickets, a session cache, 0-RTT, HTTP/2 and three curves, another certificate for clients without SNI: every item agrees with sslyze; ALPN, groups in the server's order, signature algorithms, the certificate without SNI")
    func modernNginx() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: "", chainPEM: Self.other.pem, keyPEM: Self.other.key.pem),
            (directives: "server_name \(Self.name);", chainPEM: Self.leaf.pem + lab.intermediate.pem, keyPEM: Self.leaf.key.pem),
        ], http: """
            # The handshake's settings are the default server's (SNI picks only the certificate): set for both.
            ssl_protocols TLSv1.2 TLSv1.3;
            ssl_early_data on;
            ssl_session_tickets on;
            ssl_session_cache shared:lab:1m;
            ssl_ecdh_curve X25519:prime256v1:secp384r1;
            ssl_prefer_server_ciphers on;
            """, http2: true)
        defer { nginx.stop() }
        let ours = try crossCheck(nginx.port)
        #expect(Self.status(ours, "secure_renegotiation") == "yes" && Self.status(ours, "early_data") == "yes")
        #expect(Self.status(ours, "resumption_session_id") == "yes" && Self.status(ours, "resumption_ticket") == "yes")
        #expect((ours["ticket_lifetime_seconds"] as? Int ?? 0) > 0)
        #expect(ours["alpn"] as? [String] == ["h2", "http/1.1"] && ours["alpn_preferred"] as? String == "h2", "\(ours)")
        #expect(ours["groups"] as? [String] == ["x25519", "secp256r1", "secp384r1"] && ours["group_order"] as? String == "server", "\(ours)")
        let signatures = ours["signature_algorithms"] as? [String] ?? []
        #expect(signatures.first == "ecdsa_secp256r1_sha256" && signatures.allSatisfy { $0.hasPrefix("ecdsa_") }, "an ECDSA key: \(signatures)")
        let withoutSNI = try #require(ours["certificate_without_sni"] as? [String: Any])
        #expect(withoutSNI["same_as_with_sni"] as? Bool == false && (withoutSNI["subject"] as? String ?? "").contains("default.lab"), "\(withoutSNI)")
        #expect((ours["handshakes"] as? Int ?? 0) <= 60, "bounded: \(ours["handshakes"] ?? 0) handshakes")
    }

    @Test("nginx, TLS 1.2 only, no session cache, no tickets, no extended master secret, HTTP/1.1, one curve: no resumption, no 0-RTT, no EMS, agreeing with sslyze; ALPN http/1.1 only; the same certificate without SNI")
    func plainNginx() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: """
                ssl_protocols TLSv1.2;
                ssl_session_cache off;
                ssl_session_tickets off;
                ssl_ecdh_curve secp384r1;
                ssl_conf_command Options -ExtendedMasterSecret;
                """, chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let ours = try crossCheck(nginx.port)
        #expect(Self.status(ours, "resumption_session_id") == "no" && Self.status(ours, "resumption_ticket") == "no")
        #expect(Self.status(ours, "early_data") == "no")
        #expect(Self.status(ours, "extended_master_secret") == "no", "\(ours["extended_master_secret"] ?? "")")
        #expect(ours["groups"] as? [String] == ["secp384r1"], "\(ours)")
        #expect(ours["alpn"] as? [String] == ["http/1.1"], "\(ours)")
        #expect((ours["certificate_without_sni"] as? [String: Any])?["same_as_with_sni"] as? Bool == true)
        #expect(ours["signature_algorithms"] as? [String] == ["rsa_pss_rsae_sha256", "rsa_pss_rsae_sha384", "rsa_pss_rsae_sha512",
                                                            "rsa_pkcs1_sha256", "rsa_pkcs1_sha384", "rsa_pkcs1_sha512"],
                "an RSA key: PSS and PKCS#1 with SHA-2 (SHA-1 refused by this OpenSSL's security level): \(ours)")
        #expect(Self.status(ours, "fallback_scsv") == "not-tested" && ((ours["fallback_scsv"] as? [String: Any])?["detail"] as? String ?? "").contains("no version below"),
                "the status says what the detail says: nothing to fall back to")
    }

    @Test("serve with checks: [inventory]: the inventory is stored with each scan (history shows it); a target without the check has none")
    func service() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: "ssl_protocols TLSv1.2 TLSv1.3;", chainPEM: Self.leaf.pem + lab.intermediate.pem, keyPEM: Self.leaf.key.pem),
        ])
        defer { nginx.stop() }
        let (service, database) = try lab.service("inventory-serve", sni: Self.name, targets: [
            "{host: \(Self.name), port: \(nginx.port), name: checked, checks: [inventory]}",
            "{host: \(Self.name), port: \(nginx.port), name: plain}",
        ])
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("both targets scanned") { Set(service.storedScans.map(\.target)) == ["checked", "plain"] }
        func latest(_ name: String) throws -> [String: Any] { try ServiceLab.latestHistory(name, database: database) }
        func inventory(_ entry: [String: Any]) -> [String: Any]? {
            (entry["inventory"] ?? (entry["result"] as? [String: Any])?["inventory"]) as? [String: Any]
        }
        let checked = try latest("checked")
        let stored = try #require(inventory(checked), "\(checked.keys.sorted())")
        #expect(Self.status(stored, "resumption_session_id") != nil && (stored["handshakes"] as? Int ?? 0) > 10)
        #expect(inventory(try latest("plain")) == nil)
    }

    @Test("in the service the inventory takes one connection at a time (the scan's slot of the per-host limit), over STARTTLS too")
    func serviceConnections() throws {
        let counter = LabSTARTTLSScript.Counter()
        var configuration = LabServerConfiguration(chain: [Self.leaf, lab.intermediate])
        configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(.smtp, .upgrade, counter: counter)
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let (service, database) = try lab.service("inventory-slot", sni: Self.name, targets: [
            "{host: \(Self.name), port: \(server.port), name: mx, starttls: smtp, checks: [inventory]}",
        ])
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("a scan stored", timeout: 30) { !service.storedScans.isEmpty }
        let stored = try #require(ServiceLab.latestHistory("mx", database: database)["inventory"] as? [String: Any])
        #expect((stored["handshakes"] as? Int ?? 0) > 10)
        #expect(counter.total > 10 && counter.peak == 1, "\(counter.total) dialogues, \(counter.peak) at once")
    }

    @Test("a TLS 1.2 server with an ECDSA key: its ECDHE curve is found (listed with the key's curve)")
    func ecdsaTLS12() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: "ssl_protocols TLSv1.2;\nssl_ecdh_curve secp384r1;", chainPEM: Self.leaf.pem + lab.intermediate.pem, keyPEM: Self.leaf.key.pem),
        ])
        defer { nginx.stop() }
        #expect(try inventory(nginx.port)["groups"] as? [String] == ["secp384r1"])
    }

    @Test("openssl s_server -client_renegotiation: client-initiated renegotiation accepted, as sslyze finds; without the flag, refused")
    func clientRenegotiation() throws {
        for allowed in [true, false] {
            var dos: Bool?
            var theirs: [String: [String: Any]] = [:]
            // s_server takes one connection at a time: under the test run's load sslyze's handshakes
            // timed out three times in a row behind a connection of its own that the server still held
            // (seen in CI). sslyze then gets a fresh server, up to three in all; ours is checked on each.
            for _ in 0..<3 where dos == nil {
                let server = try LabOpenSSLServer(certificatePEM: Self.leaf.pem + lab.intermediate.pem, keyPEM: Self.leaf.key.pem,
                                                  arguments: allowed ? ["-client_renegotiation"] : [])
                defer { server.stop() }
                let ours = try inventory(server.port)
                #expect(Self.status(ours, "client_renegotiation") == (allowed ? "yes" : "no"), "\(ours["client_renegotiation"] ?? "")")
                theirs = try Self.sslyze(server.port, ["reneg"], oneConnectionServer: true)
                dos = theirs["session_renegotiation"]?["is_vulnerable_to_client_renegotiation_dos"] as? Bool
            }
            #expect(dos == allowed, "sslyze: \(theirs)")
        }
    }

    @Test("a post-quantum hybrid this libssl cannot offer: a server answering X25519MLKEM768 in a HelloRetryRequest is found by the hand-built ClientHellos, first in its order")
    func hybridGroup() throws {
        var configuration = LabServerConfiguration(chain: [Self.leaf, lab.intermediate], minVersion: .tls1_3)
        configuration.plaintextDialogue = LabHybridGroupServer.dialogue(group: 0x11EC)
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let ours = try inventory(server.port)
        #expect(ours["post_quantum_groups"] as? [String] == ["X25519MLKEM768"], "\(ours)")
        #expect((ours["groups"] as? [String])?.first == "X25519MLKEM768", "\(ours["groups"] ?? "")")
        #expect((ours["groups"] as? [String] ?? []).contains("x25519"))

        let plain = try LabTLSServer(LabServerConfiguration(chain: [Self.leaf, lab.intermediate], minVersion: .tls1_3))
        defer { plain.stop() }
        #expect(try inventory(plain.port)["post_quantum_groups"] as? [String] == [], "none without the hybrid")
    }
}

/// `scan --checks headers` against nginx with and without HSTS and real port-80 answers (a
/// redirect, a plain 200, nothing), with sslyze's `--http_headers` as the referee on HSTS.
@Suite("HTTP headers: HSTS over HTTPS and the port-80 redirect, sslyze as the referee", .serialized)
struct HeadersTests {
    let lab = ServiceLab.shared
    static let name = InventoryTests.name

    func headers(_ address: String, port: Int, path: String? = nil) throws -> [String: Any] {
        let output = try Binary.run(["scan", "--format", "json", "--checks", "headers", "--ca-file", lab.rootFile, "--sni", Self.name,
                                     "--timeout", "3", "\(address):\(port)"] + (path.map { ["--headers-path", $0] } ?? []))
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        let first = try #require(((document["targets"] as? [[String: Any]])?.first?["addresses"] as? [[String: Any]])?.first)
        return try #require(first["headers"] as? [String: Any], "\(first)")
    }

    func sslyzeHSTS(_ address: String, port: Int) throws -> [String: Any]? {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("sslyze-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        _ = try Binary.run(["--http_headers", "--sni", Self.name, "--json_out", output, "\(address):\(port)"], program: try InventoryTests.sslyzeProgram())
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: output))) as? [String: Any]
        let scan = (document?["server_scan_results"] as? [[String: Any]])?.first?["scan_result"] as? [String: Any]
        let result = (scan?["http_headers"] as? [String: Any])?["result"] as? [String: Any]
        return result?["strict_transport_security_header"] as? [String: Any]
    }

    @Test("HSTS with includeSubDomains and preload, port 80 redirecting to HTTPS: both found, HSTS as sslyze reads it")
    func hstsAndRedirect() throws {
        try LabPrerequisite.root(for: "binds port 80 on 127.0.0.3")
        let nginx = try LabNginxServer(servers: [
            (directives: "add_header Strict-Transport-Security \"max-age=63072000; includeSubDomains; preload\" always;",
             chainPEM: InventoryTests.leaf.pem + lab.intermediate.pem, keyPEM: InventoryTests.leaf.key.pem),
        ], address: "127.0.0.3")
        defer { nginx.stop() }
        let redirect = try LabPlainHTTPAnswer(address: "127.0.0.3", port: 80, status: 301, location: "https://\(Self.name)/")
        defer { redirect.stop() }
        let ours = try headers("127.0.0.3", port: nginx.port)
        let hsts = try #require(ours["hsts"] as? [String: Any], "\(ours)")
        #expect(hsts["max_age"] as? Int == 63_072_000 && hsts["include_sub_domains"] as? Bool == true && hsts["preload"] as? Bool == true)
        #expect(ours["status"] as? Int == 200)
        #expect((ours["plain_http"] as? [String: Any])?["status"] as? String == "yes" && ours["plain_http_location"] as? String == "https://\(Self.name)/")
        let theirs = try #require(try sslyzeHSTS("127.0.0.3", port: nginx.port))
        #expect(theirs["max_age"] as? Int == hsts["max_age"] as? Int)
        #expect(theirs["include_subdomains"] as? Bool == hsts["include_sub_domains"] as? Bool && theirs["preload"] as? Bool == hsts["preload"] as? Bool)
    }

    @Test("no HSTS and port 80 serving plain HTTP: none, not redirected (sslyze finds no HSTS either); port 80 closed: not tested; the path asked for is the one configured")
    func missing() throws {
        try LabPrerequisite.root(for: "binds port 80 on 127.0.0.4")
        let nginx = try LabNginxServer(servers: [
            (directives: "location /health { add_header Strict-Transport-Security \"max-age=300\" always; return 204; }",
             chainPEM: InventoryTests.leaf.pem + lab.intermediate.pem, keyPEM: InventoryTests.leaf.key.pem),
        ], address: "127.0.0.4")
        defer { nginx.stop() }
        let plain = try LabPlainHTTPAnswer(address: "127.0.0.4", port: 80, status: 200, location: nil)
        let ours = try headers("127.0.0.4", port: nginx.port)
        #expect(ours["hsts"] == nil && (ours["detail"] as? String ?? "").contains("no Strict-Transport-Security"), "\(ours)")
        #expect((ours["plain_http"] as? [String: Any])?["status"] as? String == "no", "\(ours)")
        #expect(try sslyzeHSTS("127.0.0.4", port: nginx.port) == nil)
        let health = try headers("127.0.0.4", port: nginx.port, path: "/health")
        #expect((health["hsts"] as? [String: Any])?["max_age"] as? Int == 300 && health["status"] as? Int == 204, "\(health)")
        plain.stop()
        let closed = try headers("127.0.0.4", port: nginx.port)
        #expect((closed["plain_http"] as? [String: Any])?["status"] as? String == "not-tested", "\(closed)")
    }
}
