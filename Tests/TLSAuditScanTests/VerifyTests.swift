import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditSupport
import TLSAuditProcess

/// `tlsaudit verify` on generated chains, one case per rule plain OpenSSL gets wrong, through the binary.
@Suite("tlsaudit verify")
struct VerifyTests {
    let pki = TestPKI.shared

    /// Writes PEMs (in the order given) to one file and verifies it.
    func verify(_ certificates: [LabCertificate], host: String? = TestPKI.hostname, extra: [String] = [],
                roots: String? = nil) throws -> (Int32, VerifyReport) {
        try CLI.verify(certificates, roots: roots ?? pki.rootFile, host: host, extra: extra)
    }

    func errors(_ report: VerifyReport) -> Set<String> {
        Set(report.findings.filter { $0.severity == .error }.map(\.id.rawValue))
    }

    @Test("a good chain in any order with an extra certificate: presented order and built path reported apart")
    func anyOrder() throws {
        let leaf = try pki.leaf()
        let (status, report) = try verify([pki.otherRoot, pki.intermediate, leaf])
        #expect(status == 0)
        #expect(report.valid)
        #expect(report.leafIndex == 2)
        #expect(report.chain.presented.map(\.commonName) == ["untrusted test root", "tlsaudit test intermediate", TestPKI.hostname])
        #expect(report.chain.path.map(\.presentedIndex) == [2, 1, nil])
        #expect(report.chain.path.last?.source == .trustStore)
    }

    @Test("a command parsed straight from its subcommand names keeps the root parse's messages: help, bad options, validation and run errors")
    func directRouteMessages() throws {
        // Help of a nested command names the whole command, as the root parse writes it.
        let help = try CLI.run(["app", "audit", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("USAGE: tlsaudit app audit"), "\(help.stdout.prefix(300))")
        // An unknown option: the root parse's error and usage, exit 64.
        let unknown = try CLI.run(["verify", "--chain", pki.rootFile, "--no-such-option"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("Unknown option '--no-such-option'") && unknown.stderr.contains("tlsaudit verify"), "\(unknown.stderr)")
        // A value the command's validation refuses: its message under the whole command's usage.
        let invalid = try CLI.run(["verify", "--chain", pki.rootFile, "--at", "yesterday"])
        #expect(invalid.status == 64)
        #expect(invalid.stderr.contains("--at: 'yesterday'") && invalid.stderr.contains("tlsaudit verify"), "\(invalid.stderr)")
        // An error of the run itself (a chain file that does not exist): reported as before, exit 1.
        let missing = try CLI.run(["verify", "--chain", "/nonexistent/chain.pem", "--roots", pki.rootFile])
        #expect(missing.status != 0 && missing.status != 64)
        #expect(missing.stderr.contains("/nonexistent/chain.pem"), "\(missing.stderr)")
        // The parsed command runs: the same verdict as through the root (the chain verifies).
        let leaf = try pki.leaf()
        let (status, report) = try verify([leaf, pki.intermediate])
        #expect(status == 0 && report.valid)
        // Not a subcommand name: the root parse answers (its help).
        let root = try CLI.run(["help", "verify"])
        #expect(root.stdout.contains("USAGE: tlsaudit verify"), "\(root.stdout.prefix(300))")
    }

    @Test("a lone leaf, offline: the missing intermediate is described as missing from the input, not from a server")
    func loneLeaf() throws {
        let (status, report) = try verify([try pki.leaf()])
        #expect(status == 1)
        let incomplete = try #require(report.findings.first { $0.id == .trustIncompleteChain })
        #expect(incomplete.message.contains("is not among the certificates given"), "\(incomplete.message)")
        #expect(!incomplete.message.contains("the server"), "\(incomplete.message)")
    }

    @Test("JSON is indented by every command, and on one line with --compact")
    func jsonStyle() throws {
        let file = pki.directory.appendingPathComponent("style-\(UUID().uuidString.prefix(8)).pem")
        try ([try pki.leaf(), pki.intermediate].map(\.pem).joined()).write(to: file, atomically: true, encoding: .utf8)
        let base = ["verify", "--chain", file.path, "--roots", pki.rootFile, "--host", TestPKI.hostname, "--format", "json"]
        let indented = try CLI.run(base)
        let compact = try CLI.run(base + ["--compact"])
        #expect(indented.stdout.split(separator: "\n").count > 10)
        #expect(compact.stdout.split(separator: "\n").count == 1, "\(compact.stdout.prefix(200))")
        let one = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(indented.stdout.utf8))
        let other = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(compact.stdout.utf8))
        #expect(one.findings == other.findings && one.valid == other.valid)
        for command in [["scan"], ["status"], ["history"], ["alerts"], ["ats"], ["report"]] {
            #expect(try CLI.run(command + ["--help"]).stdout.contains("--compact"), "\(command)")
        }
    }

    @Test("DER input")
    func der() throws {
        let leaf = try pki.leaf()
        let leafFile = pki.directory.appendingPathComponent("leaf-\(UUID().uuidString.prefix(6)).cer")
        let intermediateFile = pki.directory.appendingPathComponent("int-\(UUID().uuidString.prefix(6)).der")
        try Data(leaf.der).write(to: leafFile)
        try Data(pki.intermediate.der).write(to: intermediateFile)
        let output = try CLI.run(["verify", "--chain", leafFile.path, "--chain", intermediateFile.path, "--roots", pki.rootFile,
                                  "--host", TestPKI.hostname])
        #expect(output.status == 0, "\(output.stdout)\(output.stderr)")
        #expect(output.stdout.hasPrefix("VALID"))
    }

    @Test("weak keys and signatures anywhere below the root", arguments: [
        ("RSA-1024 intermediate", "ats.key-size", 1), ("P-224 leaf", "ats.key-size", 0),
        ("SHA-1 intermediate", "ats.signature-hash", 1), ("MD5 leaf", "ats.signature-hash", 0),
        ("DSA leaf", "ats.key-size", 0), ("Ed25519 leaf", "ats.key-size", 0),
        ("brainpoolP256r1 leaf", "ats.key-size", 0), ("secp256k1 intermediate", "ats.key-size", 1),
        ("brainpoolP512r1 leaf", "ats.key-size", 0), ("RSA-PSS leaf", "ats.key-size", 0),
        ("RSA-PSS intermediate", "ats.key-size", 1), ("SHA3-256 leaf", "ats.signature-hash", 0),
    ])
    func weakBelowRoot(name: String, finding: String, depth: Int) throws {
        var chain: [LabCertificate]
        switch name {
        case "RSA-1024 intermediate":
            let weak = try pki.root.issue(.authority("weak intermediate", key: .rsa(bits: 1024)))
            chain = [try weak.issue(.server([TestPKI.hostname])), weak]
        case "P-224 leaf":
            chain = [try pki.leaf(key: .ec(curve: "P-224")), pki.intermediate]
        case "SHA-1 intermediate":
            let weak = try pki.root.issue(.authority("sha1 intermediate", digest: .sha1))
            chain = [try weak.issue(.server([TestPKI.hostname])), weak]
        case "DSA leaf":
            chain = [try pki.leaf(key: .dsa(bits: 1024)), pki.intermediate]
        case "brainpoolP256r1 leaf", "brainpoolP512r1 leaf":
            // Apple's clients take ECC keys on P-256, P-384 and P-521 only, whatever the size.
            chain = [try pki.leaf(key: .ec(curve: String(name.prefix { $0 != " " }))), pki.intermediate]
        case "secp256k1 intermediate":
            let other = try pki.root.issue(.authority("secp256k1 intermediate", key: .ec(curve: "secp256k1")))
            chain = [try other.issue(.server([TestPKI.hostname])), other]
        case "RSA-PSS intermediate":
            // Apple's Security framework makes RSA keys from rsaEncryption only: the CA's key cannot be made to verify.
            let other = try pki.root.issue(.authority("RSA-PSS intermediate", key: .rsaPSS(bits: 2048)))
            chain = [try other.issue(.server([TestPKI.hostname])), other]
        case "SHA3-256 leaf":
            // Apple's clients have no SecKeyAlgorithm for SHA-3 signatures.
            chain = [try pki.leaf(digest: .sha3_256), pki.intermediate]
        case "RSA-PSS leaf":
            // It signs a handshake only with the rsa_pss_pss schemes, which Apple's clients do not offer.
            chain = [try pki.leaf(key: .rsaPSS(bits: 2048)), pki.intermediate]
        case "Ed25519 leaf":
            // Apple's clients offer no EdDSA signature scheme: a server with this key cannot serve them.
            chain = [try pki.leaf(key: .ed25519), pki.intermediate]
        default:
            chain = [try pki.leaf(digest: .md5), pki.intermediate]
        }
        let (status, report) = try verify(chain)
        #expect(status == 1)
        #expect(errors(report) == [finding])
        #expect(report.findings.first { $0.id.rawValue == finding }?.depth == depth)
    }

    @Test("SHA-224: trustd's rules for all TLS take it (verify's apple-trust verdict passes, with a warning); a SHA-224 intermediate too; SHA-1 still fails")
    func sha224() throws {
        let (status, report) = try verify([try pki.leaf(digest: .sha224), pki.intermediate])
        #expect(status == 0)
        let warning = try #require(report.findings.first { $0.id.rawValue == "ats.signature-hash" })
        #expect(warning.severity == .warning && warning.depth == 0)
        #expect(warning.message.contains("ATS requires SHA-256") && warning.message.contains("NSAllowsArbitraryLoads"), "\(warning.message)")
        let intermediate = try pki.root.issue(.authority("sha224 intermediate", digest: .sha224))
        let (caStatus, caReport) = try verify([try intermediate.issue(.server([TestPKI.hostname])), intermediate])
        #expect(caStatus == 0)
        #expect(caReport.findings.contains { $0.id.rawValue == "ats.signature-hash" && $0.severity == .warning && $0.depth == 1 })
        #expect(try verify([try pki.leaf(digest: .sha1), pki.intermediate]).0 == 1)
    }

    @Test("no CN fallback, with or without SANs; wildcards never over a public suffix")
    func names() throws {
        let cnOnly = try pki.leaf { $0.dnsNames = [] }
        #expect(errors(try verify([cnOnly, pki.intermediate]).1) == ["trust.hostname-mismatch", "ats.trust"])
        let otherSAN = try pki.leaf("www.tlsaudit.test") // CN and SAN www..., host is the CN of nothing
        #expect(errors(try verify([otherSAN, pki.intermediate]).1).contains("trust.hostname-mismatch"))
        let suffixWildcard = try pki.leaf("*.co.uk")
        #expect(errors(try verify([suffixWildcard, pki.intermediate], host: "shop.co.uk").1).contains("trust.hostname-mismatch"))
        let fine = try pki.leaf("*.example.co.uk")
        #expect(try verify([fine, pki.intermediate], host: "shop.example.co.uk").0 == 0)
    }

    @Test("serverAuth EKU under own anchors: anyExtendedKeyUsage alone fails (serverAuth itself, as trustd wants it), an empty EKU fails")
    func extendedKeyUsage() throws {
        let any = try pki.leaf { $0.extendedKeyUsage = "anyExtendedKeyUsage" }
        let (anyStatus, anyReport) = try verify([any, pki.intermediate])
        #expect(anyStatus == 1)
        #expect(errors(anyReport) == ["trust.eku", "ats.trust"])
        let message = anyReport.findings.first { $0.id == .trustEKU }?.message ?? ""
        #expect(message.contains("SecTrustSetAnchorCertificates") && message.contains("configuration profile"), "\(message)")
        let both = try pki.leaf { $0.extendedKeyUsage = "serverAuth,anyExtendedKeyUsage" }
        #expect(try verify([both, pki.intermediate]).0 == 0)
        let empty = try pki.leaf { request in
            request.extendedKeyUsage = nil
            request.extraExtensions = [.init(name: "extendedKeyUsage", value: "DER:30:00")]
        }
        let (status, report) = try verify([empty, pki.intermediate])
        #expect(status == 1)
        // trustd's parser refuses an empty list outright (ExtKeyUsageSyntax takes one or more): UnparseableExtension.
        #expect(errors(report) == ["trust.eku", "trust.invalid", "ats.trust"])
        #expect(report.findings.contains { $0.id == .trustInvalid && $0.message.contains("holds no purpose") }, "\(report.findings)")
    }

    @Test("notAfter is inclusive (RFC 5280)")
    func notAfterInclusive() throws {
        let notAfter = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 30 * 86_400).rounded(.down))
        let leaf = try pki.leaf { $0.notAfter = notAfter }
        #expect(try verify([leaf, pki.intermediate], extra: ["--at", Timestamp.format(notAfter)]).0 == 0)
        let later = try verify([leaf, pki.intermediate], extra: ["--at", Timestamp.format(notAfter.addingTimeInterval(1))])
        #expect(later.0 == 1)
        #expect(errors(later.1) == ["trust.expired", "ats.trust"])
    }

    @Test("a leaf marked CA:TRUE is accepted, as Apple's SSL policy accepts it, with the BR rule as a lint")
    func leafIsCA() throws {
        let leaf = try pki.leaf { $0.isCA = true }
        let (status, report) = try verify([leaf, pki.intermediate])
        #expect(status == 0, "\(report.findings.map(\.id))")
        #expect(errors(report) == [])
        #expect(report.findings.contains { $0.id == .lintLeafIsCA && $0.severity == .warning && $0.depth == 0 })
    }

    @Test("Apple's non-empty-subject rule: a CA with an empty subject fails, a leaf needs a critical subjectAltName", arguments: [
        ("CA", false, false), ("leaf, subjectAltName not critical", false, false), ("leaf, subjectAltName critical", true, true),
    ])
    func emptySubject(which: String, criticalSAN: Bool, valid: Bool) throws {
        let chain: [LabCertificate]
        if which == "CA" {
            let ca = try pki.root.issue(.authority("", key: .rsa(bits: 2048)))
            chain = [try ca.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048))), ca]
        } else {
            chain = [try pki.leaf {
                $0.commonName = ""
                if criticalSAN {
                    $0.dnsNames = []
                    $0.extraExtensions = [.init(name: "subjectAltName", value: "critical,DNS:\(TestPKI.hostname)")]
                }
            }, pki.intermediate]
        }
        let (status, report) = try verify(chain)
        #expect(status == (valid ? 0 : 1), "\(report.findings.map(\.id))")
        #expect(errors(report).contains("trust.empty-subject") == !valid)
        if !valid {
            #expect(report.findings.first { $0.id == .trustEmptySubject }?.depth == (which == "CA" ? 1 : 0))
        }
    }

    @Test("name constraints: permitted and excluded DNS and IP subtrees, applied to SANs", arguments: [
        ("permitted;DNS:allowed.test", [TestPKI.hostname], false),
        ("permitted;DNS:tlsaudit.test", [TestPKI.hostname], true),
        ("excluded;DNS:tlsaudit.test", [TestPKI.hostname], false),
        ("permitted;IP:10.0.0.0/255.0.0.0", ["192.168.1.1"], false),
        ("excluded;IP:192.168.0.0/255.255.0.0", ["192.168.1.1"], false),
        ("permitted;IP:192.168.0.0/255.255.0.0,permitted;DNS:tlsaudit.test", ["192.168.1.1"], true),
        ("permitted;IP:10.0.0.0/255.0.0.0", ["2001:db8::1"], false),
    ])
    func nameConstraints(constraint: String, names: [String], valid: Bool) throws {
        var request = LabCertificateRequest.authority("constrained CA", key: .rsa(bits: 2048))
        request.extraExtensions = [.init(name: "nameConstraints", value: "critical,\(constraint)")]
        let constrained = try pki.root.issue(request)
        let leaf = try constrained.issue(.server(names, key: .rsa(bits: 2048)))
        let (status, report) = try verify([leaf, constrained], host: names[0])
        #expect(status == (valid ? 0 : 1), "\(report.findings)")
        #expect(errors(report).contains("trust.name-constraints") == !valid)
    }

    @Test("name constraints skip a self-issued intermediate (RFC 5280 6.1.4), as OpenSSL and webpki do")
    func selfIssuedIntermediate() throws {
        var request = LabCertificateRequest.authority("constrained CA", key: .rsa(bits: 2048))
        request.extraExtensions = [.init(name: "nameConstraints", value: "critical,permitted;DNS:tlsaudit.test")]
        let constrained = try pki.root.issue(request)
        // A key rollover: the same name, a new key, certified by the old one, with a name outside the subtree.
        var rollover = LabCertificateRequest.authority("constrained CA", key: .rsa(bits: 2048))
        rollover.dnsNames = ["elsewhere.example"]
        let selfIssued = try constrained.issue(rollover)
        let leaf = try selfIssued.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048)))
        let (status, report) = try verify([leaf, selfIssued, constrained])
        #expect(status == 0, "before: trust.name-constraints on the self-issued certificate; \(report.findings)")
        #expect(report.chain.path.count == 4)
    }

    @Test("a SAN that is not a valid DNS name is neither matched nor permitted by a constraint")
    func invalidDNSNames() throws {
        var request = LabCertificateRequest.authority("constrained CA", key: .rsa(bits: 2048))
        request.extraExtensions = [.init(name: "nameConstraints", value: "critical,permitted;DNS:tlsaudit.test")]
        let constrained = try pki.root.issue(request)
        let leaf = try constrained.issue(.server([TestPKI.hostname, "bad..name.tlsaudit.test"], key: .rsa(bits: 2048)))
        let (status, report) = try verify([leaf, constrained])
        #expect(status == 1)
        #expect(report.findings.first { $0.id == .trustNameConstraints }?.message.contains("bad..name.tlsaudit.test") == true,
                "\(report.findings)")
        // The host name check skips it too: a leaf whose only SAN is malformed matches nothing.
        let malformed = try pki.leaf("exa mple.tlsaudit.test")
        let (_, named) = try verify([malformed, pki.intermediate], host: "exa mple.tlsaudit.test")
        #expect(errors(named).contains("trust.hostname-mismatch"), "\(named.findings)")
        #expect(HostnameMatcher.isValidDNSName("*.tlsaudit.test") && HostnameMatcher.isValidDNSName("_srv.tlsaudit.test"))
        #expect(!HostnameMatcher.isValidDNSName("-a.test") && !HostnameMatcher.isValidDNSName("a..test") && !HostnameMatcher.isValidDNSName("a.*.test"))
    }

    @Test("a trust anchor with a weak key fails ats.key-size, from a ca_file as from the system store")
    func weakAnchor() throws {
        let weakRoot = try LabCertificateAuthority.selfSigned(.authority("weak root", key: .rsa(bits: 1024)))
        let intermediate = try weakRoot.issue(.authority("strong intermediate", key: .rsa(bits: 2048)))
        let leaf = try intermediate.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048)))
        let roots = pki.directory.appendingPathComponent("weak-root-\(UUID().uuidString.prefix(8)).pem").path
        try weakRoot.pem.write(toFile: roots, atomically: true, encoding: .utf8)
        let (status, report) = try verify([leaf, intermediate], roots: roots)
        #expect(status == 1, "before: valid; the anchor's key was never judged")
        let weak = try #require(report.findings.first { $0.id == .atsKeySize }, "\(report.findings)")
        #expect(weak.depth == 2 && weak.message.hasPrefix("The trust anchor weak root has an RSA key of 1024 bits"), "\(weak.message)")
        // A scan against the same anchors says the same.
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, intermediate]))
        defer { server.stop() }
        let scan = try CLI.run(["scan", "--format", "json", "--ca-file", roots, "--connect-to", "127.0.0.1", "\(TestPKI.hostname):\(server.port)"])
        let result = try scan.report().single
        #expect(result.ats.failedRules.contains("ats.key-size") && result.findings.contains { $0.id == .atsKeySize && $0.depth == 2 })
    }

    @Test("basicConstraints and pathLen along the whole path")
    func pathConstraints() throws {
        let constrained = try pki.root.issue(.authority("pathlen 1 CA", pathLength: 1, key: .rsa(bits: 2048)))
        let middle = try constrained.issue(.authority("middle CA", key: .rsa(bits: 2048)))
        let lowest = try middle.issue(.authority("lowest CA", key: .rsa(bits: 2048)))
        let leaf = try lowest.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048)))
        let (status, report) = try verify([leaf, lowest, middle, constrained])
        #expect(status == 1)
        #expect(report.findings.first { $0.id == .trustPathLengthExceeded }?.depth == 3)
        let notCA = try pki.intermediate.issue(LabCertificateRequest(commonName: "no basicConstraints", isCA: nil, keyUsage: nil,
                                                                    extendedKeyUsage: nil, key: .rsa(bits: 2048)))
        let signed = try notCA.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048)))
        let second = try verify([signed, notCA, pki.intermediate])
        #expect(errors(second.1) == ["trust.issuer-not-ca", "ats.trust"])
        #expect(second.1.findings.first { $0.id == .trustIssuerNotCA }?.depth == 1)
    }

    @Test("an unknown critical extension is refused")
    func unknownCriticalExtension() throws {
        let leaf = try pki.leaf { $0.extraExtensions = [.init(name: "1.3.6.1.4.1.55555.1", value: "critical,DER:05:00")] }
        let (status, report) = try verify([leaf, pki.intermediate])
        #expect(status == 1)
        #expect(errors(report).contains("trust.unknown-critical-extension"))
        // Extensions trustd parses pass when critical (OpenSSL's list lacks these); the TLS feature
        // (must-staple), which trustd does not parse, fails.
        let parsed = try pki.leaf { $0.extraExtensions = [.init(name: "issuerAltName", value: "critical,email:ca@tlsaudit.test"),
                                                          .init(name: "authorityInfoAccess", value: "critical,caIssuers;URI:http://127.0.0.1:1/int.cer")] }
        let (parsedStatus, parsedReport) = try verify([parsed, pki.intermediate])
        #expect(parsedStatus == 0 && !errors(parsedReport).contains("trust.unknown-critical-extension"), "\(parsedReport.findings)")
        let feature = try pki.leaf { $0.extraExtensions = [.init(name: "tlsfeature", value: "critical,status_request")] }
        #expect(errors(try verify([feature, pki.intermediate]).1).contains("trust.unknown-critical-extension"))
    }

    @Test("unreadable input exits 2; no roots means Apple's store (apple-trust's), --trust-store system Debian's")
    func inputs() throws {
        let missing = try CLI.run(["verify", "--chain", "/nonexistent.pem"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("cannot read"))
        let leaf = try pki.leaf()
        let file = pki.directory.appendingPathComponent("sys-\(UUID().uuidString.prefix(6)).pem")
        try (leaf.pem + pki.intermediate.pem).write(to: file, atomically: true, encoding: .utf8)
        let system = try CLI.run(["verify", "--chain", file.path, "--format", "json"])
        #expect(system.status == 1)
        let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(system.stdout.utf8))
        #expect(report.chain.trustStore == "apple")
        #expect(errors(report).contains("trust.untrusted-root"))
        let debian = try CLI.run(["verify", "--chain", file.path, "--trust-store", "system", "--format", "json"])
        #expect(debian.status == 1)
        #expect(try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(debian.stdout.utf8)).chain.trustStore == "system")
        let both = try CLI.run(["verify", "--chain", file.path, "--trust-store", "system", "--roots", pki.rootFile])
        #expect(both.status == 64, "--roots and --trust-store name two different anchors: a usage error")
    }
}

/// NIST's PKITS path-validation suite (from the cryptography_vectors package on PyPI), revocation
/// included: every CRL of the suite is given offline (`verify --crl`) and revocation is hard-fail,
/// as PKITS expects (a certificate whose status cannot be determined is not valid).
@Suite("PKITS")
struct PKITSTests {
    /// Where OpenSSL (path building, X509_verify_cert's CRL processing) cannot give PKITS's answer,
    /// each with its reason; kept explicit so that a change shows.
    static let knownGaps: Set<String> = [
        "ValidDSAParameterInheritanceTest5EE.crt", // DSA parameters inherited from the issuer: OpenSSL cannot verify it
        // The indirect CRL's issuer is itself covered by a CRL it signs: OpenSSL's CRL path
        // validation fails on it ("CRL path validation error"; plain `openssl verify -crl_check_all
        // -extended_crl` gives the same).
        "ValidcRLIssuerTest30EE.crt",
    ]

    static func pkitsDirectory() throws -> URL {
        try vectorsPackage.get().appendingPathComponent("x509/PKITS_data/certs")
    }

    /// The cryptography_vectors package's directory, asked of Python once for the whole run (PKITS
    /// and the CT tests read it); the answer comes back in a file the child writes.
    static let vectorsPackage: Result<URL, HarnessMessage> = {
        let answer = FileManager.default.temporaryDirectory.appendingPathComponent("vectors-\(getpid())-\(UUID().uuidString.prefix(6))")
        defer { try? FileManager.default.removeItem(at: answer) }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import cryptography_vectors, os, sys; open(sys.argv[1], 'w').write(os.path.dirname(cryptography_vectors.__file__))",
                             answer.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return .failure(HarnessMessage("cannot run python3")) }
        process.waitUntilExit()
        guard process.terminationStatus == 0, let path = try? String(contentsOf: answer, encoding: .utf8) else {
            return .failure(HarnessMessage("the PyPI package cryptography_vectors is not installed (.ci/run installs it)"))
        }
        return .success(URL(fileURLWithPath: path.trimmingCharacters(in: .whitespacesAndNewlines)))
    }()

    struct HarnessMessage: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    @Test("path validation and revocation agree with PKITS on every test but the known OpenSSL gaps")
    func pkits() throws {
        let directory = try Self.pkitsDirectory()
        let crlDirectory = directory.deletingLastPathComponent().appendingPathComponent("crls")
        let crls = try FileManager.default.contentsOfDirectory(atPath: crlDirectory.path).filter { $0.hasSuffix(".crl") }
            .sorted().map { crlDirectory.appendingPathComponent($0).path }
        #expect(crls.count >= 100)
        let evidence = try OfflineRevocationEvidence(crlFiles: crls, ocspResponseFiles: [])
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        let rootDER = try Data(contentsOf: directory.appendingPathComponent("TrustAnchorRootCertificate.crt"))
        let rootFile = TestPKI.shared.directory.appendingPathComponent("pkits-root.der")
        try rootDER.write(to: rootFile)
        // TrustStore reads PEM or DER.
        let roots = try TrustStore(caFile: rootFile.path)
        let pool = files.filter { !$0.hasSuffix("EE.crt") && $0 != "TrustAnchorRootCertificate.crt" && $0.hasSuffix(".crt") }
            .map { directory.appendingPathComponent($0).path }
        let tests = files.filter { ($0.hasPrefix("Valid") || $0.hasPrefix("Invalid")) && $0.hasSuffix("EE.crt") }
        #expect(tests.count >= 190)
        var disagreements: Set<String> = []
        for test in tests {
            let probed = try ChainVerifier.probe(files: [directory.appendingPathComponent(test).path] + pool, roots: roots,
                                                 host: nil, at: Date(timeIntervalSince1970: 1_800_000_000), leafIndex: 0,
                                                 revocation: .hard, evidence: evidence)
            let report = AddressAssessment.judge(probed, toolVersion: "test")
            // RFC 5280 path validity: trust and revocation errors (a CA:TRUE end entity is a lint, as for Apple),
            // and a revocation whatever its severity (verify judges as Apple's clients, which read no CRL: a warning).
            let valid = !report.findings.contains {
                ($0.severity == .error && ($0.id.rawValue.hasPrefix("trust.") || $0.id == .revocationUnknown)) || $0.id == .trustRevoked
            }
            if valid != test.hasPrefix("Valid") { disagreements.insert(test) }
        }
        #expect(disagreements == Self.knownGaps, "agreement \(tests.count - disagreements.count)/\(tests.count): \(disagreements.sorted())")
    }
}
