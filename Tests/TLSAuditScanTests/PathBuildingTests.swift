import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab

/// Path building that backtracks: when the first candidate issuer leads to an invalid path and
/// another leads to a valid one, the valid one counts (webpki, Go, BoringSSL, Apple), in `verify`
/// and in a scan alike; and the search stays bounded on hostile chains.
@Suite("path building tries every candidate issuer")
struct PathBuildingTests {
    let pki = TestPKI.shared

    /// A root that only trusts `anchors`, written to a file of its own.
    func rootsFile(_ anchors: [LabCertificate]) throws -> String {
        let file = pki.directory.appendingPathComponent("roots-\(UUID().uuidString.prefix(8)).pem")
        try anchors.map(\.pem).joined().write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// `verify` through the binary, and a scan of a server sending the same chain, against the same roots.
    func verifyAndScan(_ chain: [LabCertificate], roots: String) throws -> (verify: VerifyReport, scan: AddressScanResult) {
        let report = try CLI.verify(chain, roots: roots).report
        let server = try LabTLSServer(LabServerConfiguration(chain: chain))
        defer { server.stop() }
        let scanned = try CLI.run(["scan", "--format", "json", "--ca-file", roots, "--connect-to", "127.0.0.1", "--timeout", "5",
                                   "\(TestPKI.hostname):\(server.port)"])
        return (report, try scanned.report().single)
    }

    func trustIDs(_ findings: [Finding]) -> Set<String> {
        Set(findings.filter { $0.id.rawValue.hasPrefix("trust.") }.map(\.id.rawValue))
    }

    /// A new root's key, self-signed and cross-signed by an old root (once expired, once valid).
    struct CrossSigned {
        let oldRoot: LabCertificate
        let newRoot: LabCertificate
        let expiredCrossSign: LabCertificate
        let validCrossSign: LabCertificate
        let intermediate: LabCertificate
    }

    func crossSigned() throws -> CrossSigned {
        let oldRoot = try LabCertificateAuthority.selfSigned(.authority("path old root"))
        let newRoot = try LabCertificateAuthority.selfSigned(.authority("path new root"))
        var expired = LabCertificateRequest.authority("path new root")
        expired.existingKey = newRoot.key
        expired.notBefore = Date().addingTimeInterval(-400 * 86_400)
        expired.notAfter = Date().addingTimeInterval(-30 * 86_400)
        var valid = LabCertificateRequest.authority("path new root")
        valid.existingKey = newRoot.key
        return CrossSigned(oldRoot: oldRoot, newRoot: newRoot, expiredCrossSign: try oldRoot.issue(expired),
                           validCrossSign: try oldRoot.issue(valid),
                           intermediate: try newRoot.issue(.authority("path intermediate")))
    }

    @Test("an expired cross-sign sent before a valid one: the valid one is used, by verify and by a scan")
    func expiredCrossSignFirst() throws {
        let pki = try crossSigned()
        let leaf = try pki.intermediate.issue(.server([TestPKI.hostname]))
        let (verified, scanned) = try verifyAndScan([leaf, pki.intermediate, pki.expiredCrossSign, pki.validCrossSign],
                                                    roots: try rootsFile([pki.oldRoot]))
        #expect(verified.valid, "\(verified.findings)")
        #expect(!trustIDs(verified.findings).contains("trust.expired"))
        #expect(verified.chain.path.map(\.presentedIndex) == [0, 1, 3, nil])
        #expect(scanned.chain?.path.map(\.presentedIndex) == [0, 1, 3, nil])
        #expect(trustIDs(scanned.findings) == trustIDs(verified.findings), "\(scanned.findings)")
        #expect(scanned.ats.compliant, "\(scanned.findings)")
    }

    @Test("a cross-sign that fails a policy rule (EKU without serverAuth, SHA-1) sent before a good one: the good path counts, as trustd keeps looking; alone, its EKU is only warned of under own anchors",
          arguments: ["eku", "sha1", "both"])
    func policyFailingCrossSignFirst(rule: String) throws {
        let pki = try crossSigned()
        var bad = LabCertificateRequest.authority("path new root")
        bad.existingKey = pki.newRoot.key
        if rule != "sha1" { bad.extendedKeyUsage = "emailProtection" }
        if rule != "eku" { bad.digest = .sha1 }
        let badCrossSign = try pki.oldRoot.issue(bad)
        let leaf = try pki.intermediate.issue(.server([TestPKI.hostname]))
        let roots = try rootsFile([pki.oldRoot])
        let (verified, scanned) = try verifyAndScan([leaf, pki.intermediate, badCrossSign, pki.validCrossSign], roots: roots)
        #expect(verified.valid, "\(verified.findings)")
        #expect(verified.chain.path.map(\.presentedIndex) == [0, 1, 3, nil])
        #expect(scanned.chain?.path.map(\.presentedIndex) == [0, 1, 3, nil])
        #expect(scanned.ats.compliant, "\(scanned.findings)")

        // Only the bad cross-sign: it fails every path, and that failure is reported (trustd
        // enforces an intermediate's EKU under every anchor, SecPolicyCheckExtendedKeyUsage).
        let alone = try CLI.verify([leaf, pki.intermediate, badCrossSign], roots: roots).report
        #expect(!alone.valid, "\(alone.findings)")
        let failures = Set(alone.findings.filter { $0.severity == .error }.map(\.id.rawValue))
        #expect(failures.contains("trust.eku") == (rule != "sha1"), "\(failures)")
        #expect(failures.contains("ats.signature-hash") == (rule != "eku"), "\(failures)")
    }

    @Test("own anchors: a SHA-1 cross-sign sent before one restricted to emailProtection: both paths fail, and the report names the failure of the path judged")
    func restrictedCrossSignBeatsSHA1() throws {
        let pki = try crossSigned()
        var restricted = LabCertificateRequest.authority("path new root")
        restricted.existingKey = pki.newRoot.key
        restricted.extendedKeyUsage = "emailProtection"
        var sha1 = LabCertificateRequest.authority("path new root")
        sha1.existingKey = pki.newRoot.key
        sha1.digest = .sha1
        let leaf = try pki.intermediate.issue(.server([TestPKI.hostname]))
        let report = try CLI.verify([leaf, pki.intermediate, try pki.oldRoot.issue(sha1), try pki.oldRoot.issue(restricted)],
                                    roots: try rootsFile([pki.oldRoot])).report
        #expect(!report.valid, "\(report.findings)")
        let errors = Set(report.findings.filter { $0.severity == .error }.map(\.id.rawValue))
        #expect(errors.contains("trust.eku") || errors.contains("ats.signature-hash"), "\(errors)")
    }

    @Test("only the expired cross-sign: the path through it is reported expired")
    func onlyExpiredCrossSign() throws {
        let pki = try crossSigned()
        let leaf = try pki.intermediate.issue(.server([TestPKI.hostname]))
        let (verified, scanned) = try verifyAndScan([leaf, pki.intermediate, pki.expiredCrossSign], roots: try rootsFile([pki.oldRoot]))
        #expect(!verified.valid)
        #expect(trustIDs(verified.findings).contains("trust.expired"))
        #expect(trustIDs(scanned.findings) == trustIDs(verified.findings), "\(scanned.findings)")
    }

    @Test("cross-signed root also trusted itself: the shorter path to the new root, whatever is sent")
    func crossSignedRootTrusted() throws {
        let pki = try crossSigned()
        let leaf = try pki.intermediate.issue(.server([TestPKI.hostname]))
        let (verified, scanned) = try verifyAndScan([leaf, pki.intermediate, pki.expiredCrossSign],
                                                    roots: try rootsFile([pki.oldRoot, pki.newRoot]))
        #expect(verified.valid, "\(verified.findings)")
        #expect(verified.chain.path.count == 3)
        #expect(verified.chain.path.last?.certificate.sha256Fingerprint == pki.newRoot.summary.sha256Fingerprint)
        #expect(scanned.ats.compliant, "\(scanned.findings)")
    }

    /// x509-limbo's cve-2024-0567 mesh, with lab certificates: leaf -> A1 -> A, where A, B and C
    /// each cross-sign the other two and B and C have subordinates B1 and C1; only A's
    /// self-signed certificate is trusted.
    struct Mesh {
        let rootA: LabCertificate
        /// B's and C's self-signed certificates (not sent, not trusted in limbo's case).
        let rootB: LabCertificate
        let rootC: LabCertificate
        let leaf: LabCertificate
        /// A1, A by B, A by C, B1, B by A, B by C, C1, C by A, C by B (limbo's order).
        let intermediates: [LabCertificate]
    }

    func mesh() throws -> Mesh {
        let rootA = try LabCertificateAuthority.selfSigned(.authority("mesh Root A"))
        let rootB = try LabCertificateAuthority.selfSigned(.authority("mesh Root B"))
        let rootC = try LabCertificateAuthority.selfSigned(.authority("mesh Root C"))
        func crossSign(_ subject: LabCertificate, by issuer: LabCertificate) throws -> LabCertificate {
            var request = LabCertificateRequest.authority(subject.summary.commonName ?? "")
            request.existingKey = subject.key
            return try issuer.issue(request)
        }
        let a1 = try rootA.issue(.authority("mesh Intermediate A1"))
        let intermediates = [a1, try crossSign(rootA, by: rootB), try crossSign(rootA, by: rootC),
                             try rootB.issue(.authority("mesh Intermediate B1")), try crossSign(rootB, by: rootA),
                             try crossSign(rootB, by: rootC),
                             try rootC.issue(.authority("mesh Intermediate C1")), try crossSign(rootC, by: rootA),
                             try crossSign(rootC, by: rootB)]
        return Mesh(rootA: rootA, rootB: rootB, rootC: rootC, leaf: try a1.issue(.server([TestPKI.hostname])),
                    intermediates: intermediates)
    }

    @Test("x509-limbo cve-2024-0567: a mesh of cross-signed roots around the trusted one is anchored, in every order sent")
    func crossSignedMesh() throws {
        let mesh = try mesh()
        let roots = try rootsFile([mesh.rootA])
        for intermediates in [mesh.intermediates, mesh.intermediates.reversed()] {
            let (verified, scanned) = try verifyAndScan([mesh.leaf] + intermediates, roots: roots)
            #expect(verified.valid, "\(verified.findings)")
            #expect(verified.chain.path.count == 3, "leaf, A1, Root A: \(verified.chain.path.map(\.certificate.subject))")
            // The loops through B and C no longer exhaust the search's bounds.
            #expect(!verified.findings.contains { $0.id == .trustPathSearchLimit }, "\(verified.findings)")
            #expect(scanned.ats.compliant, "\(scanned.findings)")
            #expect(trustIDs(scanned.findings) == trustIDs(verified.findings), "\(scanned.findings)")
        }
        // Only C trusted: the short way to it is A's cross-sign by C.
        let onlyC = try CLI.verify([mesh.leaf] + mesh.intermediates, roots: try rootsFile([mesh.rootC])).report
        #expect(onlyC.valid, "\(onlyC.findings)")
        #expect(onlyC.chain.path.map(\.presentedIndex) == [0, 1, 3, nil], "\(onlyC.chain.path.map(\.certificate.subject))")
        #expect(!onlyC.findings.contains { $0.id == .trustPathSearchLimit }, "\(onlyC.findings)")
    }

    @Test("root and intermediate sent in swapped order: the path is built, and the order is said")
    func swappedRootAndIntermediate() throws {
        let leaf = try pki.leaf()
        let (verified, scanned) = try verifyAndScan([leaf, pki.root, pki.intermediate], roots: pki.rootFile)
        #expect(verified.valid, "\(verified.findings)")
        #expect(verified.chain.path.map(\.presentedIndex) == [0, 2, 1])
        #expect(scanned.ats.compliant, "\(scanned.findings)")
        #expect(scanned.chain?.path.map(\.presentedIndex) == [0, 2, 1])
        #expect(scanned.findings.contains { $0.id == .chainOrder }, "\(scanned.findings.map(\.id))")
    }

    @Test("two intermediates with one name and key, the first name-constrained away from the host: the other one is used")
    func nameConstraintsExcludeOnePath() throws {
        let root = try LabCertificateAuthority.selfSigned(.authority("path nc root"))
        let open = try root.issue(.authority("path nc intermediate"))
        var constrainedRequest = LabCertificateRequest.authority("path nc intermediate")
        constrainedRequest.existingKey = open.key
        constrainedRequest.extraExtensions = [.init(name: "nameConstraints", value: "critical,permitted;DNS:elsewhere.test")]
        let constrained = try root.issue(constrainedRequest)
        let leaf = try open.issue(.server([TestPKI.hostname]))
        let roots = try rootsFile([root])
        let (verified, scanned) = try verifyAndScan([leaf, constrained, open], roots: roots)
        #expect(verified.valid, "\(verified.findings)")
        #expect(verified.chain.path.map(\.presentedIndex) == [0, 2, nil])
        #expect(trustIDs(scanned.findings) == trustIDs(verified.findings), "\(scanned.findings)")
        // With only the constrained one, the violation stands.
        let (alone, _) = try verifyAndScan([leaf, constrained], roots: roots)
        #expect(trustIDs(alone.findings).contains("trust.name-constraints"), "\(alone.findings)")
    }

    @Test("an intermediate whose key signed the leaf but which is no CA, beside a real CA of the same name: the CA is used")
    func leafSignerBesideRealCA() throws {
        let root = try LabCertificateAuthority.selfSigned(.authority("path ca root"))
        let real = try root.issue(.authority("path shared name"))
        var notCA = LabCertificateRequest(commonName: "path shared name", isCA: false)
        notCA.existingKey = real.key
        let impostor = try root.issue(notCA)
        let leaf = try real.issue(.server([TestPKI.hostname]))
        let roots = try rootsFile([root])
        let (verified, _) = try verifyAndScan([leaf, impostor, real], roots: roots)
        #expect(verified.valid, "\(verified.findings)")
        let (alone, _) = try verifyAndScan([leaf, impostor], roots: roots)
        #expect(trustIDs(alone.findings).contains("trust.issuer-not-ca"), "\(alone.findings)")
    }

    @Test("a loop of two CAs naming each other ends; the chain is untrusted, not hung")
    func loop() throws {
        let yFirst = try LabCertificateAuthority.selfSigned(.authority("path loop y"))
        let x = try yFirst.issue(.authority("path loop x"))
        var yAgain = LabCertificateRequest.authority("path loop y")
        yAgain.existingKey = yFirst.key
        let y = try x.issue(yAgain)
        let leaf = try x.issue(.server([TestPKI.hostname]))
        let started = Date()
        let (verified, scanned) = try verifyAndScan([leaf, x, y], roots: pki.rootFile)
        #expect(!verified.valid)
        #expect(!scanned.ats.compliant)
        #expect(Date().timeIntervalSince(started) < 30)
    }

    @Test("aia_fetch: a missing intermediate fetched from the caIssuers URL (DER or PKCS#7), only when asked")
    func aiaFetch() throws {
        let http = try LabHTTPServer()
        defer { http.stop() }
        let leaf = try pki.leaf { $0.extraExtensions = [.init(name: "authorityInfoAccess", value: "caIssuers;URI:\(http.url("/int.cer"))")] }
        http.serve(pki.intermediate.der, at: "/int.cer")
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf]))
        defer { server.stop() }
        let base = ["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--timeout", "5",
                    "\(TestPKI.hostname):\(server.port)"]
        let plain = try CLI.run(base).report().single
        #expect(plain.findings.contains { $0.id == .trustIncompleteChain })
        #expect(http.requests(to: "/int.cer") == 0, "nothing fetched unless asked")
        let fetched = try CLI.run(base + ["--aia-fetch"]).report().single
        #expect(fetched.ats.compliant, "\(fetched.findings)")
        #expect(fetched.chain?.path.map(\.source) == [.presented, .aiaFetched, .trustStore])
        #expect(fetched.findings.first { $0.id == .chainAIAFetched }?.severity == .warning)

        // verify, with the intermediate served as a certs-only PKCS#7 (.p7c).
        let directory = pki.directory.appendingPathComponent("aia-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let intermediatePEM = directory.appendingPathComponent("int.pem").path, p7c = directory.appendingPathComponent("int.p7c").path
        try pki.intermediate.pem.write(toFile: intermediatePEM, atomically: true, encoding: .utf8)
        try LabOCSPResponder.openssl(["crl2pkcs7", "-nocrl", "-certfile", intermediatePEM, "-outform", "DER", "-out", p7c])
        let p7Leaf = try pki.leaf { $0.extraExtensions = [.init(name: "authorityInfoAccess", value: "caIssuers;URI:\(http.url("/int.p7c"))")] }
        http.serve(Array(try Data(contentsOf: URL(fileURLWithPath: p7c))), at: "/int.p7c")
        let chain = directory.appendingPathComponent("leaf.pem").path
        try p7Leaf.pem.write(toFile: chain, atomically: true, encoding: .utf8)
        let output = try CLI.run(["verify", "--chain", chain, "--roots", pki.rootFile, "--host", TestPKI.hostname, "--format", "json", "--aia-fetch"])
        let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(output.stdout.utf8))
        #expect(report.valid, "\(report.findings)")
        #expect(report.chain.path.count == 3)
    }

    @Test("a chain of 120 certificates: judged quickly, refused, and the search's bound said")
    func deepChain() throws {
        var issuer = pki.root
        var chain: [LabCertificate] = []
        for index in 0..<119 {
            issuer = try issuer.issue(.authority("path deep \(index)"))
            chain.insert(issuer, at: 0)
        }
        let leaf = try issuer.issue(.server([TestPKI.hostname]))
        let started = Date()
        let report = try CLI.verify([leaf] + chain).report
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(!report.valid, "OpenSSL's depth limit (100) refuses it")
        #expect(report.findings.contains { $0.id == .trustPathSearchLimit })
    }

    @Test("many certificates with the issuer's name, none the issuer: the search stops at its bound and says so")
    func manyCandidates() throws {
        let hidden = try LabCertificateAuthority.selfSigned(.authority("path crowded name"))
        let leaf = try hidden.issue(.server([TestPKI.hostname]))
        var decoys: [LabCertificate] = []
        for _ in 0..<70 { decoys.append(try LabCertificateAuthority.selfSigned(.authority("path crowded name"))) }
        let (status, report) = try CLI.verify([leaf] + decoys, roots: try rootsFile([pki.root]))
        #expect(status == 1)
        #expect(!report.valid)
        let limit = try #require(report.findings.first { $0.id == .trustPathSearchLimit }, "\(report.findings)")
        #expect(limit.severity == .warning)
    }
}
