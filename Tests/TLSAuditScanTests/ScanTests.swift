import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditSupport
import TLSAuditProcess

/// End-to-end: real OpenSSL servers on 127.0.0.1 port 0, scanned by the built `tlsaudit` binary.
@Suite("tlsaudit scan against loopback servers")
struct ScanTests {
    let pki = TestPKI.shared

    /// Starts a server with `chain`, scans it, stops it.
    func scan(_ configuration: LabServerConfiguration, host: String = TestPKI.hostname,
              extra: [String] = []) throws -> (CLI.Output, AddressScanResult) {
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let output = try CLI.scan(port: server.port, host: host, extra: extra)
        let result = try output.report().single
        return (output, result)
    }

    // MARK: Compliant servers

    @Test("good RSA-2048 chain: compliant, exit 0, everything recorded")
    func goodRSAChain() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 0, "stderr: \(output.stderr)")
        #expect(result.status == .completed)
        #expect(result.ats.compliant)
        #expect(result.errorIDs.isEmpty, "\(result.findings)")
        let handshake = try #require(result.handshake)
        #expect(handshake.protocolVersion == .tls1_3)
        #expect(handshake.keyExchange.forwardSecrecy)
        #expect(handshake.keyExchange.group == "x25519")
        #expect(handshake.clientProfile == .atsRuntime, "the default policy sends what current Apple clients send")
        #expect(result.ats.policy == .atsRuntime)
        let chain = try #require(result.chain)
        #expect(chain.presented.count == 2)
        #expect(chain.path.count == 3)
        #expect(chain.anchored)
        #expect(chain.path.last?.source == .trustStore)
        let recorded = chain.presented[0]
        #expect(recorded.publicKey.type == "RSA" && recorded.publicKey.bits == 2048)
        #expect(recorded.signatureHash == "SHA256")
        #expect(recorded.subjectAlternativeNames.dns == [TestPKI.hostname])
        #expect(recorded.extendedKeyUsage == ["serverAuth"])
        #expect(recorded.basicConstraints?.isCA == false)
        #expect(recorded.der == Data(leaf.der))
        #expect(recorded.sha256Fingerprint.count == 64)
        #expect(recorded.spkiSHA256.count == 44)
        #expect(chain.presented[1].basicConstraints?.isCA == true)
    }

    @Test("ECDSA P-256 and P-384 leaves: compliant, curve recorded", arguments: [("P-256", 256), ("P-384", 384)])
    func ecdsaLeaves(curve: String, bits: Int) throws {
        let leaf = try pki.leaf(key: .ec(curve: curve))
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 0)
        #expect(result.ats.compliant)
        let key = try #require(result.chain?.presented.first?.publicKey)
        #expect(key.type == "EC" && key.bits == bits)
        #expect(key.curve == (bits == 256 ? "prime256v1" : "secp384r1"))
    }

    @Test("TLS 1.3 only: compliant, TLS 1.3 recorded")
    func tls13Only() throws {
        let leaf = try pki.leaf(key: .ec(curve: "P-256"))
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_3))
        #expect(output.status == 0)
        #expect(result.handshake?.protocolVersion == .tls1_3)
        #expect(result.handshake?.cipher.iana.hasPrefix("TLS_AES_") == true || result.handshake?.cipher.iana.hasPrefix("TLS_CHACHA20") == true)
        #expect(result.ats.compliant)
    }

    @Test("TLS 1.2 ECDHE-RSA-AES128-GCM: compliant, suite names recorded")
    func tls12ECDHE() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2,
                                                               cipherList: "ECDHE-RSA-AES128-GCM-SHA256"))
        #expect(output.status == 0)
        let handshake = try #require(result.handshake)
        #expect(handshake.protocolVersion == .tls1_2)
        #expect(handshake.cipher.iana == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
        #expect(handshake.cipher.openssl == "ECDHE-RSA-AES128-GCM-SHA256")
        #expect(handshake.cipher.code == "0xC02F")
        #expect(handshake.keyExchange.ephemeralKey?.type == "X25519")
        #expect(result.ats.compliant)
    }

    // MARK: Apple's signature algorithms

    @Test("P-521 leaf: TLS 1.3 fails ats.handshake (Apple's clients offer no ecdsa_secp521r1_sha512); TLS 1.2 passes")
    func p521Leaf() throws {
        let leaf = try pki.leaf(key: .ec(curve: "P-521"))
        let (tls13, refused) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(tls13.status == 1)
        #expect(refused.errorIDs == ["ats.handshake"], "\(refused.findings)")
        #expect(refused.finding("ats.handshake")?.message.contains("signature algorithms") == true)
        #expect(refused.handshake?.clientProfile == .permissive && refused.handshake?.protocolVersion == .tls1_3)
        #expect(refused.chain?.presented.first?.publicKey.curve == "secp521r1")
        // In TLS 1.2 an ECDSA scheme does not name the curve: ECDSA with SHA-256 serves, as on an iPhone.
        let (tls12, passed) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2))
        #expect(tls12.status == 0, "\(passed.findings)")
        #expect(passed.ats.compliant && passed.handshake?.clientProfile == .atsRuntime)
    }

    @Test("RSA-PSS leaf key (id-RSASSA-PSS): ats.key-size and ats.handshake, the Apple hello has no rsa_pss_pss scheme")
    func rsaPSSLeaf() throws {
        let leaf = try pki.leaf(key: .rsaPSS(bits: 2048))
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 1)
        #expect(result.chain?.presented.first?.publicKey.type == "RSA-PSS")
        #expect(result.errorIDs == ["ats.key-size", "ats.handshake"], "\(result.findings)")
        #expect(result.finding("ats.key-size")?.message.contains("rsa_pss_pss") == true)
        #expect(result.handshake?.clientProfile == .permissive)
    }

    @Test("a TLS 1.2 server that signs with SHA-1 only: Apple's clients offer rsa_pkcs1_sha1 last, so they connect")
    func sha1HandshakeSignature() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2,
                                                               cipherList: "ECDHE-RSA-AES128-GCM-SHA256", signatureAlgorithms: "RSA+SHA1"))
        #expect(output.status == 0, "\(result.findings)")
        #expect(result.ats.compliant && result.handshake?.clientProfile == .atsRuntime)
        // With only PSS schemes, which need TLS 1.2 and an rsaEncryption key, the Apple hello still connects.
        let (pss, pssResult) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2,
                                                               cipherList: "ECDHE-RSA-AES128-GCM-SHA256", signatureAlgorithms: "rsa_pss_rsae_sha512"))
        #expect(pss.status == 0 && pssResult.ats.compliant, "\(pssResult.findings)")
        // A server that signs only with SHA-224, which no Apple client offers, refuses it.
        let (sha224, refused) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2,
                                                                cipherList: "ECDHE-RSA-AES128-GCM-SHA256", signatureAlgorithms: "RSA+SHA224"))
        #expect(sha224.status == 1)
        #expect(refused.errorIDs == ["ats.handshake"], "\(refused.findings)")
    }

    @Test("a TLS 1.2 server without secure renegotiation (RFC 5746, gnutls-serv): Apple's clients connect, so the ATS hello does")
    func noSecureRenegotiation() throws {
        let leaf = try pki.leaf()
        let server = try LabGnuTLSServer(certificatePEM: leaf.pem + pki.intermediate.pem, keyPEM: leaf.key.pem,
                                         priority: "NORMAL:-VERS-TLS1.3:%DISABLE_SAFE_RENEGOTIATION")
        defer { server.stop() }
        let output = try CLI.scan(port: server.port)
        let result = try output.report().single
        #expect(output.status == 0, "\(output.stdout) \(output.stderr)")
        #expect(result.ats.compliant && result.handshake?.clientProfile == .atsRuntime && result.handshake?.protocolVersion == .tls1_2)
    }

    // MARK: Weak keys, digests, protocols

    @Test("RSA-1024 leaf: ats.key-size at depth 0")
    func rsa1024Leaf() throws {
        let leaf = try pki.leaf(key: .rsa(bits: 1024))
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 1)
        #expect(!result.ats.compliant)
        #expect(result.ats.failedRules == ["ats.key-size"])
        #expect(result.finding("ats.key-size")?.depth == 0)
    }

    @Test("SHA-1-signed leaf: ats.signature-hash at depth 0")
    func sha1Leaf() throws {
        let leaf = try pki.leaf(digest: .sha1)
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 1)
        #expect(result.ats.failedRules == ["ats.signature-hash"])
        #expect(result.finding("ats.signature-hash")?.depth == 0)
        #expect(result.chain?.presented.first?.signatureHash == "SHA1")
    }

    @Test("TLS 1.0/1.1 only: ats.tls-version, recorded through the permissive fallback")
    func oldProtocolsOnly() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0,
                                                               maxVersion: .tls1_1,
                                                               cipherList: "ECDHE-RSA-AES128-SHA:AES128-SHA"))
        #expect(output.status == 1)
        #expect(result.handshake?.protocolVersion == .tls1_1)
        #expect(result.handshake?.clientProfile == .permissive)
        #expect(result.errorIDs == ["ats.tls-version", "ats.handshake"])
    }

    @Test("static RSA key exchange only: ats.forward-secrecy, no ephemeral key")
    func staticRSAOnly() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2,
                                                               cipherList: "AES128-GCM-SHA256:AES256-SHA"))
        #expect(output.status == 1)
        let handshake = try #require(result.handshake)
        #expect(handshake.keyExchange.forwardSecrecy == false)
        #expect(handshake.keyExchange.ephemeralKey == nil)
        #expect(handshake.cipher.keyExchange == "RSA")
        #expect(result.errorIDs == ["ats.forward-secrecy", "ats.handshake"])
    }

    @Test("DHE with a 1024-bit group: tls.weak-dh, DHE is not an ATS suite")
    func weakDHE() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2,
                                                               cipherList: "DHE-RSA-AES128-GCM-SHA256", dhGroup: .weak1024))
        #expect(output.status == 1)
        let handshake = try #require(result.handshake)
        #expect(handshake.keyExchange.ephemeralKey?.type == "DH")
        #expect(handshake.keyExchange.ephemeralKey?.bits == 1024)
        #expect(handshake.keyExchange.forwardSecrecy)
        #expect(result.finding("tls.weak-dh")?.severity == .warning)
        #expect(result.errorIDs == ["ats.cipher-suite", "ats.handshake"])
    }

    // MARK: Policies

    @Test("only ECDHE-RSA-AES128-SHA256: not compliant by default (current clients cannot connect); passes --policy ats")
    func runtimeSuites() throws {
        let leaf = try pki.leaf()
        let configuration = LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_2,
                                                   cipherList: "ECDHE-RSA-AES128-SHA256")
        let (runtime, runtimeResult) = try scan(configuration)
        #expect(runtime.status == 1)
        #expect(runtimeResult.ats.policy == .atsRuntime)
        #expect(runtimeResult.errorIDs == ["ats.cipher-suite", "ats.handshake"])
        #expect(runtimeResult.finding("ats.handshake")?.message.contains("Current Apple clients cannot connect") == true)
        #expect(runtimeResult.finding("ats.cipher-suite")?.message.contains("no longer offer it") == true)
        let (documented, result) = try scan(configuration, extra: ["--policy", "ats"])
        #expect(documented.status == 0)
        #expect(result.ats.policy == .ats && result.ats.compliant)
        let (_, explicit) = try scan(configuration, extra: ["--policy", "ats-runtime"])
        #expect(explicit.errorIDs == runtimeResult.errorIDs)
    }

    @Test("apple-trust ignores protocol and suite rules but not the chain")
    func appleTrustPolicy() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate], maxVersion: .tls1_0,
                                                               cipherList: "AES128-SHA"), extra: ["--policy", "apple-trust"])
        #expect(output.status == 0, "\(result.findings)")
        #expect(result.ats.policy == .appleTrust)
        #expect(result.ats.rules.keys.sorted() == ["ats.key-size", "ats.signature-hash", "ats.trust"])
        #expect(result.handshake?.clientProfile == .permissive)
        let weak = try pki.leaf(key: .rsa(bits: 1024))
        let (weakOutput, weakResult) = try scan(LabServerConfiguration(chain: [weak, pki.intermediate]),
                                                extra: ["--policy", "apple-trust"])
        #expect(weakOutput.status == 1)
        #expect(weakResult.ats.failedRules == ["ats.key-size"])
    }

    // MARK: Trust

    @Test("expired leaf: trust.expired at depth 0 and ats.trust")
    func expired() throws {
        let leaf = try pki.leaf { request in
            request.notBefore = Date().addingTimeInterval(-100 * 86_400)
            request.notAfter = Date().addingTimeInterval(-2 * 86_400)
        }
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.expired", "ats.trust"])
        #expect(result.finding("trust.expired")?.depth == 0)
        #expect(result.ats.failedRules == ["ats.trust"])
    }

    @Test("not yet valid leaf: trust.not-yet-valid")
    func notYetValid() throws {
        let leaf = try pki.leaf { request in
            request.notBefore = Date().addingTimeInterval(5 * 86_400)
            request.notAfter = Date().addingTimeInterval(100 * 86_400)
        }
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.not-yet-valid", "ats.trust"])
        #expect(result.finding("trust.not-yet-valid")?.depth == 0)
    }

    @Test("--at moves the evaluation time: a valid leaf judged after its notAfter is expired")
    func evaluationTime() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]),
                                        extra: ["--at", Timestamp.format(Date().addingTimeInterval(400 * 86_400))])
        #expect(output.status == 1)
        #expect(result.finding("trust.expired")?.depth == 0)
    }

    @Test("self-signed leaf: trust.self-signed; trusted when it is the --ca-file anchor")
    func selfSigned() throws {
        var request = LabCertificateRequest.server([TestPKI.hostname], key: .rsa(bits: 2048))
        request.isCA = nil
        let leaf = try LabCertificateAuthority.selfSigned(request)
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf]))
        defer { server.stop() }
        let output = try CLI.scan(port: server.port)
        let result = try output.report().single
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.self-signed", "ats.trust"])
        #expect(result.finding("trust.self-signed")?.depth == 0)

        // The operator's own anchor for a self-signed deployment.
        let anchorFile = pki.directory.appendingPathComponent("self-signed-\(server.port).pem").path
        try leaf.pem.write(toFile: anchorFile, atomically: true, encoding: .utf8)
        let pinned = try CLI.run(["scan", "--format", "json", "--ca-file", anchorFile, "--connect-to", "127.0.0.1",
                                  "\(TestPKI.hostname):\(server.port)"])
        #expect(pinned.status == 0, "\(pinned.stdout)")
        #expect(try pinned.report().single.ats.compliant)
    }

    @Test("wrong host name: trust.hostname-mismatch")
    func wrongHostname() throws {
        let leaf = try pki.leaf("other.tlsaudit.test")
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.hostname-mismatch", "ats.trust"])
        #expect(result.finding("trust.hostname-mismatch")?.message.contains("other.tlsaudit.test") == true)
    }

    @Test("no SAN, name only in the CN: no CN fallback")
    func commonNameOnly() throws {
        let leaf = try pki.leaf { request in request.dnsNames = [] }
        let (_, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(result.errorIDs.contains("trust.hostname-mismatch"))
        #expect(result.finding("trust.hostname-mismatch")?.message.contains("CN") == true)
    }

    @Test("wildcard: covers exactly one label", arguments: [
        ("a.wild.tlsaudit.test", true), ("b.a.wild.tlsaudit.test", false), ("wild.tlsaudit.test", false),
    ])
    func wildcard(host: String, matches: Bool) throws {
        let leaf = try pki.leaf("*.wild.tlsaudit.test")
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]), host: host)
        #expect(output.status == (matches ? 0 : 1))
        #expect(result.errorIDs.contains("trust.hostname-mismatch") == !matches)
    }

    @Test("partial wildcard f*.example is never honoured")
    func partialWildcard() throws {
        let leaf = try pki.leaf("f*.wild.tlsaudit.test")
        let (_, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]), host: "foo.wild.tlsaudit.test")
        #expect(result.errorIDs.contains("trust.hostname-mismatch"))
    }

    @Test("leaf sent without its intermediate: trust.incomplete-chain at depth 0")
    func missingIntermediate() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf]))
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.incomplete-chain", "ats.trust"])
        #expect(result.finding("trust.incomplete-chain")?.depth == 0)
        #expect(result.chain?.anchored == false)
    }

    @Test("leaf signed by a CA:FALSE certificate: trust.issuer-not-ca at depth 1")
    func leafSignedByLeaf() throws {
        let signer = try pki.leaf("signer.tlsaudit.test") { request in request.keyUsage = nil }
        let victim = try signer.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048)))
        let (output, result) = try scan(LabServerConfiguration(chain: [victim, signer, pki.intermediate]))
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.issuer-not-ca", "ats.trust"])
        #expect(result.finding("trust.issuer-not-ca")?.depth == 1)
        #expect(result.chain?.path.count == 4)
    }

    @Test("pathLen 0 violated by a sub-CA: trust.path-length-exceeded at depth 2")
    func pathLengthViolation() throws {
        let constrained = try pki.root.issue(.authority("constrained CA", pathLength: 0, key: .rsa(bits: 2048)))
        let subCA = try constrained.issue(.authority("sub CA beyond pathLen", key: .rsa(bits: 2048)))
        let leaf = try subCA.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048)))
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, subCA, constrained]))
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.path-length-exceeded", "ats.trust"])
        #expect(result.finding("trust.path-length-exceeded")?.depth == 2)
    }

    @Test("untrusted root sent along: trust.untrusted-root at the root's depth")
    func untrustedRootSent() throws {
        let leaf = try pki.otherIntermediate.issue(.server([TestPKI.hostname]))
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.otherIntermediate, pki.otherRoot]))
        #expect(output.status == 1)
        #expect(result.errorIDs == ["trust.untrusted-root", "ats.trust"])
        #expect(result.finding("trust.untrusted-root")?.depth == 2)
    }

    @Test("untrusted root not sent: trust.untrusted-root at the last intermediate")
    func untrustedRootNotSent() throws {
        let leaf = try pki.otherIntermediate.issue(.server([TestPKI.hostname]))
        let (_, result) = try scan(LabServerConfiguration(chain: [leaf, pki.otherIntermediate]))
        #expect(result.errorIDs == ["trust.untrusted-root", "ats.trust"])
        #expect(result.finding("trust.untrusted-root")?.depth == 1)
    }

    @Test("leaf whose EKU is clientAuth only: trust.eku")
    func wrongEKU() throws {
        let leaf = try pki.leaf { request in request.extendedKeyUsage = "clientAuth" }
        let (_, result) = try scan(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        #expect(result.errorIDs == ["trust.eku", "ats.trust"])
        #expect(result.finding("trust.eku")?.depth == 0)
    }

    @Test("chain sent out of order and with an extra certificate: still trusted, reported")
    func disorderedChain() throws {
        let leaf = try pki.leaf()
        let (output, result) = try scan(LabServerConfiguration(chain: [leaf, pki.otherRoot, pki.intermediate]))
        #expect(output.status == 0)
        #expect(result.finding("chain.extra-certificates") != nil)
        #expect(result.chain?.presented.count == 3)
        #expect(result.chain?.path.count == 3)
    }

    // MARK: Mutual TLS

    @Test("client certificate required: named, chain still recorded", arguments: [TLSVersion.tls1_2, .tls1_3])
    func clientCertificateRequired(version: TLSVersion) throws {
        let leaf = try pki.leaf()
        let configuration = LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: version, maxVersion: version,
                                                   clientCertificates: .required(trusting: pki.clientAuthority))
        let (output, result) = try scan(configuration)
        #expect(output.status == 2)
        #expect(result.status == .failed)
        #expect(result.error?.category == .clientCertificateRequired, "\(String(describing: result.error))")
        #expect(result.chain?.presented.count == 2, "the server's chain is recorded even though the scan failed")
        // TLS 1.3's alert 116 by its name (OpenSSL 3.0 does not name it: "alert alert 116" before).
        #expect(result.error.map { !$0.message.contains("alert alert") && !$0.message.contains("alert 116") } == true,
                "\(String(describing: result.error))")
        if version == .tls1_3 { #expect(result.error?.alert == "certificate_required", "\(String(describing: result.error))") }

        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let withCertificate = try CLI.scan(port: server.port, extra: ["--client-cert", pki.clientCertificateFile,
                                                                      "--client-key", pki.clientKeyFile])
        let completed = try withCertificate.report().single
        #expect(withCertificate.status == 0, "\(withCertificate.stdout)")
        #expect(completed.status == .completed)
        #expect(completed.handshake?.clientCertificateRequested == true)
    }

    @Test("a P-521 client identity under TLS 1.3: signs with ecdsa_secp521r1_sha512, which the Apple server-side list leaves out")
    func p521ClientIdentity() throws {
        var request = LabCertificateRequest(commonName: "P-521 test client")
        request.extendedKeyUsage = "clientAuth"
        request.key = .ec(curve: "P-521")
        let client = try pki.clientAuthority.issue(request)
        let certificateFile = pki.directory.appendingPathComponent("client-p521-\(UUID().uuidString.prefix(6)).pem")
        let keyFile = pki.directory.appendingPathComponent("client-p521-key-\(UUID().uuidString.prefix(6)).pem")
        try client.pem.write(to: certificateFile, atomically: true, encoding: .utf8)
        try client.key.pem.write(to: keyFile, atomically: true, encoding: .utf8)
        let server = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], minVersion: .tls1_3,
                                                             clientCertificates: .required(trusting: pki.clientAuthority)))
        defer { server.stop() }
        let output = try CLI.scan(port: server.port, extra: ["--client-cert", certificateFile.path, "--client-key", keyFile.path])
        let result = try output.report().single
        #expect(output.status == 0, "\(output.stdout) \(output.stderr)")
        #expect(result.handshake?.clientProfile == .atsRuntime && result.handshake?.clientCertificateRequested == true)
        // app audit's exception probes (TLS 1.0 allowed: the permissive context with Apple's list set per connection) sign too.
        let ats = try CLI.run(["ats", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--client-cert", certificateFile.path,
                               "--client-key", keyFile.path, "\(TestPKI.hostname):\(server.port)"])
        let diagnostics = try JSONDecoder.tlsaudit.decode(ATSDiagnostics.self, from: Data(ats.stdout.utf8))
        for name in ["default", "TLSv1.0", "arbitrary-loads"] {
            #expect(diagnostics.configurations.first { $0.name == name }?.pass == true, "\(name): \(diagnostics.configurations)")
        }
    }

    // MARK: IPv6 and several targets

    @Test("IPv6 loopback: [::1]:PORT is scanned over IPv6")
    func ipv6() throws {
        let leaf = try pki.leaf()
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], bindAddress: "::1"))
        defer { server.stop() }
        let output = try CLI.scan(port: server.port, connectTo: "::1")
        let result = try output.report().single
        #expect(output.status == 0, "\(output.stdout) \(output.stderr)")
        #expect(result.family == "ipv6")
        #expect(result.address == "::1")
    }

    @Test("a targets file with comments, scanned concurrently; text output with a summary")
    func targetsFile() throws {
        let good = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        let weak = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(key: .rsa(bits: 1024)), pki.intermediate]))
        defer {
            good.stop()
            weak.stop()
        }
        let file = pki.directory.appendingPathComponent("targets-\(good.port).txt")
        try """
            # the fleet
            \(TestPKI.hostname):\(good.port)   # good

            \(TestPKI.hostname):\(weak.port)
            """.write(to: file, atomically: true, encoding: .utf8)
        let output = try CLI.run(["scan", "--targets-file", file.path, "--ca-file", pki.rootFile,
                                  "--connect-to", "127.0.0.1", "--concurrency", "2"])
        #expect(output.status == 1)
        #expect(output.stdout.contains("ATS COMPLIANT"))
        #expect(output.stdout.contains("NOT ATS COMPLIANT (ats.key-size)"))
        #expect(output.stdout.contains("2 target(s), 2 address(es): 1 ATS compliant, 1 not compliant, 0 could not be scanned"))
        #expect(!output.stdout.contains("\u{1B}["), "no colour when stdout is not a terminal")
        // TLS 1.3 names no key exchange in its suites: the text says ECDHE and the group, never "ANY".
        #expect(output.stdout.contains("key exchange ECDHE, group x25519"), "\(output.stdout)")
        #expect(!output.stdout.contains("key exchange ANY"))
    }

    @Test("a targets file saved with Windows line ends (CR LF): every line a target, numbered as in the file")
    func targetsFileWithWindowsLineEnds() throws {
        let good = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        defer { good.stop() }
        let file = pki.directory.appendingPathComponent("targets-crlf-\(good.port).txt")
        try "# the fleet\r\n\(TestPKI.hostname):\(good.port)\r\n\r\nsecond.\(TestPKI.hostname):\(good.port)\r\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let output = try CLI.run(["scan", "--targets-file", file.path, "--ca-file", pki.rootFile,
                                  "--connect-to", "127.0.0.1", "--concurrency", "2"])
        #expect(output.stdout.contains("2 target(s), 2 address(es)"), "\(output.stdout)\(output.stderr)")
        // A line that does not parse is named by its number in the file.
        try "\(TestPKI.hostname):\(good.port)\r\nnot a target:x\r\n".write(to: file, atomically: true, encoding: .utf8)
        let broken = try CLI.run(["scan", "--targets-file", file.path, "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1"])
        #expect(broken.status == 64, "\(broken.status)")
        #expect(broken.stderr.contains("line 2:"), "\(broken.stderr)")
    }

    @Test("servers that keep every worker waiting get the concurrency asked for: silent targets, four times the threads a scan starts with, all probed together")
    func waitingWorkersGrow() throws {
        let tarpit = try LabHostileServer(.tarpit)
        defer { tarpit.stop() }
        // A scan starts twice the cores; four times that many silent targets need the pool to grow.
        let count = 4 * max(2, 2 * ProcessInfo.processInfo.activeProcessorCount)
        let file = pki.directory.appendingPathComponent("tarpits-\(tarpit.port).txt")
        try (1...count).map { "silent\($0).test:\(tarpit.port)" }.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let output = try CLI.run(["scan", "--format", "json", "--targets-file", file.path, "--ca-file", pki.rootFile,
                                  "--connect-to", "127.0.0.1", "--concurrency", "\(count)", "--timeout", "2"])
        #expect(output.status == 2, "\(output.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
        let addresses = (document?["targets"] as? [[String: Any]] ?? []).flatMap { $0["addresses"] as? [[String: Any]] ?? [] }
        #expect(addresses.count == count)
        // Every probe began before the first one's 2 s timeout ended: with the pool stuck at its
        // first threads, the later ones would begin only as earlier ones time out.
        let starts = addresses.compactMap { ($0["started_at"] as? String).flatMap { try? Date($0, strategy: .iso8601) } }
        #expect(starts.count == count)
        if let first = starts.min(), let last = starts.max() {
            #expect(last.timeIntervalSince(first) < 1.5, "probes began over \(last.timeIntervalSince(first)) s")
        }
        #expect(tarpit.totalConnections >= count)
    }

    @Test("a name is resolved through the system resolver")
    func systemResolver() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf("localhost"), pki.intermediate]))
        defer { server.stop() }
        let output = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--addresses", "ipv4",
                                  "localhost:\(server.port)"])
        let result = try output.report().single
        #expect(output.status == 0, "\(output.stdout)")
        #expect(result.address == "127.0.0.1")
    }

    @Test("several addresses behind one name are each probed: a stale backend is not hidden")
    func everyAddress() throws {
        let good = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        defer { good.stop() }
        let expiredLeaf = try pki.leaf { request in
            request.notBefore = Date().addingTimeInterval(-100 * 86_400)
            request.notAfter = Date().addingTimeInterval(-1 * 86_400)
        }
        // The stale backend listens on the same port on ::1.
        let stale = try LabTLSServer(LabServerConfiguration(chain: [expiredLeaf, pki.intermediate], bindAddress: "::1",
                                                            port: good.port))
        defer { stale.stop() }
        let output = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                  "--connect-to", "::1", "\(TestPKI.hostname):\(good.port)"])
        let addresses = try #require(try output.report().targets.first?.addresses)
        #expect(output.status == 1)
        #expect(addresses.count == 2)
        #expect(addresses.first { $0.address == "127.0.0.1" }?.ats.compliant == true)
        let backend = try #require(addresses.first { $0.address == "::1" })
        #expect(backend.ats.compliant == false)
        #expect(backend.errorIDs.contains("trust.expired"))

        let v4only = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                  "--connect-to", "::1", "--addresses", "ipv4", "\(TestPKI.hostname):\(good.port)"])
        #expect(v4only.status == 0)
        #expect(try v4only.report().targets.first?.addresses.count == 1)
    }

    @Test("scan --database stores the results where status and history read them")
    func storeScan() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        defer { server.stop() }
        let database = pki.directory.appendingPathComponent("scan-\(UUID().uuidString.prefix(6)).sqlite").path
        let output = try CLI.scan(port: server.port, extra: ["--database", database])
        #expect(output.status == 0)
        let status = try CLI.run(["status", "--database", database])
        #expect(status.status == 0, "\(status.stdout)\(status.stderr)")
        #expect(status.stdout.contains("\(TestPKI.hostname):\(server.port)"))
        #expect(status.stdout.contains("COMPLIANT"))
        let history = try CLI.run(["history", "--database", database, "\(TestPKI.hostname):\(server.port)"])
        #expect(history.status == 0)
        #expect(history.stdout.contains("TLSv1.3"))
    }

    @Test("scan --database stores each target as it finishes: every address of every target, each once")
    func storeWhileScanning() throws {
        let good = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        defer { good.stop() }
        let stale = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf { $0.notAfter = Date().addingTimeInterval(-86_400) },
                                                                    pki.intermediate], bindAddress: "::1", port: good.port))
        defer { stale.stop() }
        // 40 names, each behind both addresses (one target's two addresses must land in one batch:
        // the store makes a target's latest batch its current set of addresses).
        let names = (0..<40).map { "n\($0).\(TestPKI.hostname):\(good.port)" }
        let list = pki.directory.appendingPathComponent("targets-\(UUID().uuidString.prefix(6)).txt")
        try names.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
        let database = pki.directory.appendingPathComponent("batches-\(UUID().uuidString.prefix(6)).sqlite").path
        let scan = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                "--connect-to", "::1", "--targets-file", list.path, "--concurrency", "16", "--database", database])
        #expect(scan.status == 1, "\(scan.stderr)")
        #expect(try scan.report().targets.count == 40)
        let status = try CLI.run(["status", "--database", database, "--format", "json"])
        struct Row: Decodable { var target: String; var address: String; var lastObservationId: Int }
        struct Rows: Decodable { var targets: [Row] }
        let rows = try JSONDecoder.tlsaudit.decode(Rows.self, from: Data(status.stdout.utf8)).targets
        #expect(rows.count == 80)
        #expect(Set(rows.map(\.target)) == Set(names))
        for name in names {
            #expect(Set(rows.filter { $0.target == name }.map(\.address)) == ["127.0.0.1", "::1"], "\(name)")
        }
        // One stored scan per address: the newest observation ids are 1...80.
        #expect(Set(rows.map(\.lastObservationId)) == Set(1...80))

        // A database that cannot be created: exit 2 and the reason, after the scan.
        let unwritable = try CLI.scan(port: good.port, extra: ["--database", "/proc/tlsaudit-test/scan.sqlite"])
        #expect(unwritable.status == 2)
        #expect(unwritable.stderr.contains("cannot store the results: cannot create the directory /proc/tlsaudit-test (No such file or directory)"),
                "\(unwritable.stderr)")
        #expect(try unwritable.report().targets.count == 1, "the results are printed all the same")
    }

    @Test("output into a pipe nobody reads ends by SIGPIPE with the results stored; a full disk behind > exits 2")
    func closedOrFullOutput() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        defer { server.stop() }
        // Twenty names: about 200 KiB of JSON, more than a pipe holds, so the write meets the closed pipe.
        let names = (0..<20).map { "p\($0).\(TestPKI.hostname):\(server.port)" }
        let list = pki.directory.appendingPathComponent("pipe-\(UUID().uuidString.prefix(6)).txt")
        try names.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
        let database = pki.directory.appendingPathComponent("pipe-\(UUID().uuidString.prefix(6)).sqlite").path
        let errors = pki.directory.appendingPathComponent("pipe-\(UUID().uuidString.prefix(6)).err").path
        let scan = "'\(CLI.binary)' scan --format json --ca-file '\(pki.rootFile)' --connect-to 127.0.0.1 --timeout 5 "
            + "--targets-file '\(list.path)' --database '\(database)'"
        let piped = try bash("\(scan) 2> '\(errors)' | true; echo \"${PIPESTATUS[0]}\"")
        let stderr = try String(contentsOfFile: errors, encoding: .utf8)
        #expect(piped.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "141", "exit status; stderr: \(stderr)")
        #expect(!stderr.contains("Fatal error"), "\(stderr)")
        let status = try CLI.run(["status", "--database", database, "--format", "json"])
        struct Row: Decodable { var target: String }
        struct Rows: Decodable { var targets: [Row] }
        let rows = try JSONDecoder.tlsaudit.decode(Rows.self, from: Data(status.stdout.utf8)).targets
        #expect(Set(rows.map(\.target)) == Set(names), "\(status.stderr)")

        let full = try bash("\(scan) > /dev/full")
        #expect(full.status == 2, "\(full.stderr)")
        #expect(full.stderr.contains("tlsaudit: cannot write the output: No space left on device"), "\(full.stderr)")
        // The text tables too (they were written with `print`, whose failures went unnoticed).
        let table = try bash("'\(CLI.binary)' status --database '\(database)' > /dev/full")
        #expect(table.status == 2, "\(table.stderr)")
        #expect(table.stderr.contains("cannot write the output: No space left on device"), "\(table.stderr)")
        // Started without a standard output: nothing opened later takes its place.
        let closed = try bash("'\(CLI.binary)' status --database '\(database)' >&-")
        #expect(closed.status == 2, "\(closed.stderr)")
        #expect(closed.stderr.contains("cannot write the output: Bad file descriptor"), "\(closed.stderr)")
    }

    @Test("scan --database interrupted: the probes in flight finish, every target done is stored, no report, ended by the signal; a second signal ends it at once")
    func interruptedScanKeepsWhatIsDone() throws {
        let good = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        defer { good.stop() }
        let tarpit = try LabHostileServer(.tarpit)
        defer { tarpit.stop() }
        // Two workers: the six good targets are done at once, then two silent servers hold both
        // workers until the timeout (6 s); the interruption comes while they do.
        let goodNames = (0..<6).map { "g\($0).\(TestPKI.hostname):\(good.port)" }
        let silentNames = (0..<12).map { "s\($0).\(TestPKI.hostname):\(tarpit.port)" }
        let list = pki.directory.appendingPathComponent("interrupted-\(UUID().uuidString.prefix(6)).txt")
        try (goodNames + silentNames).joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)

        func storedTargets(_ database: String) -> Set<String> {
            // Exit 2 also means an unreachable address; no database yet prints no JSON.
            guard let status = try? CLI.run(["status", "--database", database, "--format", "json"]) else { return [] }
            struct Row: Decodable { var target: String }
            struct Rows: Decodable { var targets: [Row] }
            return Set((try? JSONDecoder.tlsaudit.decode(Rows.self, from: Data(status.stdout.utf8)))?.targets.map(\.target) ?? [])
        }
        /// Starts the scan, waits until the good targets are stored, sends `signals` (0.3 s apart);
        /// its stderr, stdout, the seconds from the first signal to its end, and the process.
        func interrupt(with signals: [Int32]) throws -> (stderr: String, stdout: String, seconds: Double, process: ChildProcess) {
            let name = "interrupted-\(UUID().uuidString.prefix(6))"
            let database = pki.directory.appendingPathComponent("\(name).sqlite").path
            let errors = pki.directory.appendingPathComponent("\(name).err")
            let output = pki.directory.appendingPathComponent("\(name).out")
            FileManager.default.createFile(atPath: errors.path, contents: nil)
            FileManager.default.createFile(atPath: output.path, contents: nil)
            let scan = ChildProcess()
            scan.executableURL = URL(fileURLWithPath: CLI.binary)
            scan.arguments = ["scan", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--targets-file", list.path,
                              "--concurrency", "2", "--timeout", "6", "--database", database]
            scan.standardOutput = try FileHandle(forWritingTo: output)
            scan.standardError = try FileHandle(forWritingTo: errors)
            try scan.run()
            let deadline = Date().addingTimeInterval(60)
            while scan.isRunning, Date() < deadline, !storedTargets(database).isSuperset(of: goodNames) { usleep(100_000) }
            #expect(scan.isRunning, "still waiting for the silent servers when interrupted")
            let interrupted = ContinuousClock.now
            for (index, signal) in signals.enumerated() {
                if index > 0 { usleep(300_000) }
                scan.signal(signal)
            }
            scan.waitUntilExit()
            let waited = ContinuousClock.now - interrupted
            #expect(storedTargets(database).isSuperset(of: goodNames), "the targets done before the interruption are kept")
            return (try String(contentsOf: errors, encoding: .utf8), try String(contentsOf: output, encoding: .utf8),
                    Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18, scan)
        }

        // One SIGINT: the two probes in flight end (handshake-timeout) and are stored with the six;
        // then the process ends by the SIGINT (a shell running it in a loop stops too).
        let once = try interrupt(with: [SIGINT])
        #expect(once.process.terminationReason == .uncaughtSignal && once.process.terminationStatus == SIGINT, "\(once.stderr)")
        #expect(once.stderr.contains("tlsaudit: interrupted: no further address is begun"), "\(once.stderr)")
        #expect(once.stderr.contains("the results of 8 of 18 targets are stored in "), "\(once.stderr)")
        #expect(once.stdout.isEmpty, "no report: it would look whole")
        #expect(once.seconds < 12, "the probes in flight end within their timeout: \(once.seconds) s")

        // SIGHUP (the terminal closed) then SIGTERM: the first interrupts as Ctrl-C does, the second
        // ends the process at once (its default action).
        let twice = try interrupt(with: [SIGHUP, SIGTERM])
        #expect(twice.process.terminationReason == .uncaughtSignal && twice.process.terminationStatus == SIGTERM, "\(twice.stderr)")
        #expect(twice.stderr.contains("tlsaudit: interrupted: no further address is begun"), "\(twice.stderr)")

        // A closing ssh session sends SIGHUP twice (the shell, then the kernel): the second changes
        // nothing, and the probes in flight still finish and are stored.
        let hangups = try interrupt(with: [SIGHUP, SIGHUP])
        #expect(hangups.process.terminationReason == .uncaughtSignal && hangups.process.terminationStatus == SIGHUP, "\(hangups.stderr)")
        #expect(hangups.stderr.contains("the results of 8 of 18 targets are stored in "), "\(hangups.stderr)")
        #expect(twice.seconds < 3, "not waiting for the silent servers: \(twice.seconds) s")
    }

    /// Runs a bash command line, killed after two minutes; its exit status and what it printed.
    private func bash(_ command: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let shell = ChildProcess()
        shell.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        shell.arguments = ["-s", "KILL", "120", "/bin/bash", "-c", command]
        let out = Pipe()
        let err = Pipe()
        shell.standardOutput = out
        shell.standardError = err
        try shell.run()
        // Small outputs only: a pipe holds them while the other is read.
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        shell.waitUntilExit()
        return (shell.terminationStatus, printed, errors)
    }

    // MARK: Usage

    @Test("usage errors exit 64")
    func usageErrors() throws {
        #expect(try CLI.run(["scan"]).status == 64)
        #expect(try CLI.run(["scan", "--timeout", "0", "example.test"]).status == 64)
        #expect(try CLI.run(["scan", "bad host name!"]).status == 64)
        #expect(try CLI.run(["scan", "host:99999"]).status == 64)
        let missing = try CLI.run(["scan", "--ca-file", "/nonexistent/anchors.pem", "example.test"])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("/nonexistent/anchors.pem"))
    }

    @Test("a target with a trailing dot sends its name in SNI without the dot (RFC 6066), and its certificate matches")
    func sniWithoutTrailingDot() throws {
        // s_server gives the named certificate only to a ClientHello whose SNI is exactly the name.
        let named = try pki.leaf()
        let fallback = try pki.leaf("fallback.tlsaudit.test")
        let tag = UUID().uuidString.prefix(6)
        let namedFile = pki.directory.appendingPathComponent("sni-\(tag).pem"), keyFile = pki.directory.appendingPathComponent("sni-\(tag).key")
        try (named.pem + pki.intermediate.pem).write(to: namedFile, atomically: true, encoding: .utf8)
        try named.key.pem.write(to: keyFile, atomically: true, encoding: .utf8)
        let server = try LabOpenSSLServer(certificatePEM: fallback.pem + pki.intermediate.pem, keyPEM: fallback.key.pem,
                                          arguments: ["-servername", TestPKI.hostname, "-cert2", namedFile.path, "-key2", keyFile.path])
        defer { server.stop() }
        let output = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1",
                                  "\(TestPKI.hostname).:\(server.port)"])
        let address = try #require(try output.report().targets.first?.addresses.first)
        // (s_server's -cert2 sends no chain: the intermediate is missing, whatever the SNI.)
        #expect(address.chain?.presented.first?.sha256Fingerprint == named.summary.sha256Fingerprint,
                "the server chose its certificate by the SNI sent: \(address.chain?.presented.first?.subject ?? "none")")
        #expect(!address.errorIDs.contains("trust.hostname-mismatch"), "\(address.errorIDs)")
    }
}
