import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// `scan --enumerate` and the inventory's groups and signature algorithms against servers of three
/// TLS libraries (GnuTLS's gnutls-serv, nginx, openssl s_server): every suite found on the wire with
/// hand-built ClientHellos, RC4 and 3DES included where this libssl cannot offer them, with sslyze
/// (whose own legacy OpenSSL still can) as the referee on each version's suites.
@Suite("wire enumeration: every suite and group, three TLS libraries, sslyze as the referee", .serialized)
struct WireEnumerationTests {
    let lab = ServiceLab.shared
    static let name = InventoryTests.name
    static let rsaLeaf = InventoryTests.rsaLeaf
    /// RC4 and 3DES (which OpenSSL 3 cannot offer) on top of GnuTLS's defaults, RFC 7919 groups for DHE.
    static let legacyPriority = "NORMAL:+ARCFOUR-128:+3DES-CBC:+VERS-TLS1.0:+VERS-TLS1.1:+DHE-RSA:+GROUP-FFDHE2048:+GROUP-FFDHE3072"

    func gnutls(_ priority: String, arguments: [String] = []) throws -> LabGnuTLSServer {
        try LabGnuTLSServer(certificatePEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem,
                            priority: priority, arguments: arguments)
    }

    /// tlsaudit's scan of `port` (JSON, the one address), with `arguments`.
    func scan(_ port: Int, _ arguments: [String]) throws -> [String: Any] {
        let output = try Binary.run(["scan", "--format", "json", "--ca-file", lab.rootFile, "--sni", Self.name,
                                     "--timeout", "3"] + arguments + ["127.0.0.1:\(port)"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        return try #require(((document["targets"] as? [[String: Any]])?.first?["addresses"] as? [[String: Any]])?.first, "\(output.stdout)")
    }

    /// Accepted suites (IANA names) by version, as `scan --enumerate` lists them.
    static func suites(_ address: [String: Any]) -> [String: [String]] {
        let protocols = (address["enumeration"] as? [String: Any])?["protocols"] as? [[String: Any]] ?? []
        return Dictionary(uniqueKeysWithValues: protocols.map { support in
            (support["version"] as? String ?? "", (support["suites"] as? [[String: Any]] ?? []).compactMap { ($0["cipher"] as? [String: Any])?["iana"] as? String })
        })
    }

    /// sslyze's accepted suites by version (our version names).
    static func sslyzeSuites(_ port: Int) throws -> [String: [String]] {
        let plugins = ["sslv3": "SSLv3", "tlsv1": "TLSv1", "tlsv1_1": "TLSv1.1", "tlsv1_2": "TLSv1.2", "tlsv1_3": "TLSv1.3"]
        let results = try InventoryTests.sslyze(port, Array(plugins.keys))
        let keys = ["ssl_3_0_cipher_suites": "SSLv3", "tls_1_0_cipher_suites": "TLSv1", "tls_1_1_cipher_suites": "TLSv1.1",
                    "tls_1_2_cipher_suites": "TLSv1.2", "tls_1_3_cipher_suites": "TLSv1.3"]
        var found: [String: [String]] = [:]
        for (key, version) in keys {
            let result = try #require(results[key], "sslyze has no \(key): \(results["_errors"] ?? [:])")
            found[version] = (result["accepted_cipher_suites"] as? [[String: Any]] ?? []).compactMap { ($0["cipher_suite"] as? [String: Any])?["name"] as? String }
        }
        return found
    }

    /// Ours and sslyze's suites, version by version, as sets.
    func expectSameSuites(_ port: Int, _ ours: [String: [String]], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let theirs = try Self.sslyzeSuites(port)
        for version in ["SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"] {
            #expect(Set(ours[version] ?? []) == Set(theirs[version] ?? []),
                    "\(version): ours \(ours[version] ?? []), sslyze \(theirs[version] ?? [])", sourceLocation: sourceLocation)
        }
    }

    @Test("gnutls-serv with RC4, 3DES and RFC 7919 groups: RC4 and 3DES suites listed (the suites sslyze finds, version by version), ffdhe groups listed, the optional client certificate costs no wait")
    func gnutlsLegacy() throws {
        let server = try gnutls(Self.legacyPriority)
        defer { server.stop() }
        let address = try scan(server.port, ["--enumerate", "--checks", "inventory"])
        let suites = Self.suites(address)
        let tls12 = suites["TLSv1.2"] ?? []
        #expect(tls12.contains("TLS_RSA_WITH_RC4_128_SHA") && tls12.contains("TLS_ECDHE_RSA_WITH_RC4_128_SHA"), "\(tls12)")
        #expect(tls12.contains("TLS_RSA_WITH_3DES_EDE_CBC_SHA") && tls12.contains("TLS_DHE_RSA_WITH_3DES_EDE_CBC_SHA"), "\(tls12)")
        #expect((suites["TLSv1"] ?? []).contains("TLS_RSA_WITH_RC4_128_SHA"), "\(suites)")
        let enumeration = try #require(address["enumeration"] as? [String: Any])
        let detail = ((enumeration["protocols"] as? [[String: Any]])?.first { $0["version"] as? String == "TLSv1.2" }?["detail"] as? String) ?? ""
        #expect(detail.contains("offered by hand-built ClientHellos"), "the list says how it was found: \(detail)")
        // DHE suites name their RFC 7919 group, read from the prime in the ServerKeyExchange.
        let dheGroups = ((enumeration["protocols"] as? [[String: Any]])?.first { $0["version"] as? String == "TLSv1.2" }?["suites"] as? [[String: Any]] ?? [])
            .filter { (($0["cipher"] as? [String: Any])?["iana"] as? String ?? "").hasPrefix("TLS_DHE_") }
            .compactMap { ($0["key_exchange"] as? [String: Any])?["group"] as? String }
        #expect(!dheGroups.isEmpty && dheGroups.allSatisfy { $0.hasPrefix("ffdhe") }, "\(dheGroups)")
        let inventory = try #require(address["inventory"] as? [String: Any])
        let groups = inventory["groups"] as? [String] ?? []
        #expect(groups.contains("ffdhe2048") && groups.contains("ffdhe3072"), "\(groups)")
        // gnutls-serv asks every client for a certificate, optionally: each TLS 1.3 handshake used to
        // wait a second for a refusal that never came (39 s for one enumeration).
        let handshake = try #require(address["handshake"] as? [String: Any])
        #expect(handshake["client_certificate_requested"] as? Bool == true)
        let spent = (enumeration["duration_ms"] as? Int ?? .max) + (inventory["duration_ms"] as? Int ?? .max)
        #expect(spent < 10_000, "far below a second per TLS 1.3 handshake: \(enumeration["probes"] ?? 0) enumeration probes and \(inventory["handshakes"] ?? 0) inventory handshakes in \(spent) ms")
        try expectSameSuites(server.port, suites)
    }

    @Test("gnutls-serv, TLS 1.2 only, DHE with RFC 7919 groups: the groups are found on the wire in TLS 1.2 (DHE suites, the group told by its prime)")
    func gnutlsTLS12Groups() throws {
        let server = try gnutls("NORMAL:-VERS-TLS1.3:+DHE-RSA:+GROUP-FFDHE2048:+GROUP-FFDHE4096")
        defer { server.stop() }
        let inventory = try #require(try scan(server.port, ["--checks", "inventory"])["inventory"] as? [String: Any])
        let groups = inventory["groups"] as? [String] ?? []
        #expect(groups.contains("ffdhe2048") && groups.contains("ffdhe4096"), "\(groups)")
        #expect(groups.contains("x25519") && groups.contains("secp256r1"), "\(groups)")
        let signatures = inventory["signature_algorithms"] as? [String] ?? []
        #expect(signatures.contains("rsa_pkcs1_sha256") && signatures.contains("rsa_pss_rsae_sha256"), "\(signatures)")
        #expect(!signatures.contains { $0.hasPrefix("ecdsa") || $0.hasPrefix("ed") }, "an RSA key signs with RSA only: \(signatures)")
    }

    @Test("nginx (intermediate, TLS 1.2 and 1.3) and openssl s_server (its defaults): the suites sslyze finds, version by version")
    func nginxAndOpenSSL() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: """
                ssl_protocols TLSv1.2 TLSv1.3;
                ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:AES128-SHA;
                ssl_prefer_server_ciphers on;
                """, chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let suites = Self.suites(try scan(nginx.port, ["--enumerate"]))
        #expect(suites["TLSv1.2"] == ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                                      "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA"],
                "nginx's order (DHE without ssl_dhparam is not offered): \(suites)")
        try expectSameSuites(nginx.port, suites)

        let openssl = try LabOpenSSLServer(certificatePEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem)
        defer { openssl.stop() }
        let defaults = Self.suites(try scan(openssl.port, ["--enumerate"]))
        #expect((defaults["TLSv1.2"] ?? []).count >= 10 && defaults["TLSv1"]?.isEmpty != false, "\(defaults)")
        let theirs = try Self.sslyzeSuites(openssl.port)
        #expect(Set(defaults["TLSv1.2"] ?? []) == Set(theirs["TLSv1.2"] ?? []), "ours \(defaults), sslyze \(theirs)")
        #expect(Set(defaults["TLSv1.3"] ?? []) == Set(theirs["TLSv1.3"] ?? []), "ours \(defaults), sslyze \(theirs)")
    }

    @Test("an RSA server that also takes static RSA: no ECDSA or EdDSA signature algorithm (a static-RSA handshake signs nothing); static-RSA suites listed in full in the finding")
    func rsaOnlySignatures() throws {
        let nginx = try LabNginxServer(servers: [
            (directives: """
                ssl_protocols TLSv1.2;
                ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA:AES256-SHA:AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA256:AES256-SHA256:CAMELLIA128-SHA:CAMELLIA256-SHA;
                """, chainPEM: Self.rsaLeaf.pem + lab.intermediate.pem, keyPEM: Self.rsaLeaf.key.pem),
        ])
        defer { nginx.stop() }
        let address = try scan(nginx.port, ["--enumerate", "--checks", "inventory"])
        let signatures = (address["inventory"] as? [String: Any])?["signature_algorithms"] as? [String] ?? []
        #expect(!signatures.isEmpty && !signatures.contains { $0.hasPrefix("ecdsa") || $0 == "ed25519" || $0 == "ed448" },
                "an RSA key: \(signatures)")
        let staticSuites = (Self.suites(address)["TLSv1.2"] ?? []).filter { $0.hasPrefix("TLS_RSA_") }
        #expect(staticSuites.count == 8, "\(staticSuites)")
        let findings = (address["enumeration"] as? [String: Any])?["findings"] as? [[String: Any]] ?? []
        let message = findings.first { $0["id"] as? String == "tls.non-forward-secret-suites" }?["message"] as? String ?? ""
        #expect(staticSuites.allSatisfy(message.contains), "every name, not four: \(message)")
    }

    @Test("a TLS 1.0-only server: the renegotiation detail names the version tested; the fallback status says what its detail says")
    func detailsMatchTheTest() throws {
        let server = try gnutls("NORMAL:-VERS-ALL:+VERS-TLS1.0")
        defer { server.stop() }
        let inventory = try #require(try scan(server.port, ["--checks", "inventory"])["inventory"] as? [String: Any])
        let renegotiation = inventory["secure_renegotiation"] as? [String: Any] ?? [:]
        #expect(renegotiation["status"] as? String == "yes" && (renegotiation["detail"] as? String ?? "").contains("TLSv1 ServerHello"), "\(renegotiation)")
        #expect(!(renegotiation["detail"] as? String ?? "").contains("TLS 1.2"), "\(renegotiation)")
        let fallback = inventory["fallback_scsv"] as? [String: Any] ?? [:]
        #expect(fallback["status"] as? String == "not-tested" && (fallback["detail"] as? String ?? "").contains("no version below"), "\(fallback)")
    }

    @Test("a server that drops ClientHellos over 512 bytes (a lab relay before a real one): the suites are still all found, offered 40 at a time, and the detail says so")
    func intolerantOfLongHellos() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [VulnerabilityTests.leaf, lab.intermediate], maxVersion: .tls1_2))
        defer { server.stop() }
        let relay = try LabVulnerableServer(.helloIntolerance(bytes: 512), backendPort: server.port, keyPEM: VulnerabilityTests.leaf.key.pem)
        defer { relay.stop() }
        let direct = try scan(server.port, ["--enumerate"])
        let relayed = try scan(relay.port, ["--enumerate"])
        let expected = Self.suites(direct)["TLSv1.2"] ?? []
        #expect(expected.count >= 10, "\(expected)")
        #expect(Set(Self.suites(relayed)["TLSv1.2"] ?? []) == Set(expected), "relayed \(Self.suites(relayed)), direct \(expected)")
        let protocols = (relayed["enumeration"] as? [String: Any])?["protocols"] as? [[String: Any]] ?? []
        let detail = protocols.first { $0["version"] as? String == "TLSv1.2" }?["detail"] as? String ?? ""
        #expect(detail.contains("offered 40 at a time"), "\(detail)")
    }

    @Test("a server that closes the connection on every ClientHello without a word: every version refused (a silent close is a refusal, as a failed handshake counted it before the wire enumeration), not 'not tested'")
    func silentCloser() throws {
        let server = try LabHostileServer(.closeAfterClientHello)
        defer { server.stop() }
        let address = try scan(server.port, ["--enumerate"])
        let protocols = (address["enumeration"] as? [String: Any])?["protocols"] as? [[String: Any]] ?? []
        #expect(protocols.count == 6 && protocols.allSatisfy { $0["status"] as? String == "rejected" },
                "\(protocols.map { "\($0["version"] ?? ""): \($0["status"] ?? "") (\($0["detail"] ?? ""))" })")
        let tls12 = protocols.first { $0["version"] as? String == "TLSv1.2" }?["detail"] as? String ?? ""
        #expect(tls12.contains("closed the connection"), "\(tls12)")
    }
}
