import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditModel
import TLSAuditSupport

/// Certificate Transparency as Apple clients check it: every SCT's signature verified against a
/// log list, from each channel (embedded, TLS extension, stapled OCSP), with real certificates
/// (cryptography_vectors' Let's Encrypt leaf with SCTs from Google's and Sectigo's logs) and lab
/// logs signing lab certificates; the trust inputs (Apple's store, anchors) the policy follows.
@Suite("Certificate Transparency and trust stores")
struct CertificateTransparencyTests {
    let pki = TestPKI.shared

    /// Writes `data` to a fresh file of the test PKI's directory.
    func file(_ name: String, _ data: Data) throws -> String {
        let url = pki.directory.appendingPathComponent("\(UUID().uuidString.prefix(8))-\(name)")
        try data.write(to: url)
        return url.path
    }

    // MARK: Real SCTs

    /// cryptography_vectors' x509 directory.
    static func vectors() throws -> URL {
        try PKITSTests.pkitsDirectory().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// A log list naming Google's Icarus and Sectigo's Mammoth (keys from the shipped snapshot) as
    /// usable since 2018, as they were when the vector's SCTs were made; `replacing` swaps one key.
    func realLogList(replacingKeyOf replaced: String? = nil) throws -> String {
        func entry(_ id: String) throws -> [String: Any] {
            let log = try #require(CTLogList.shipped.log(id: id))
            let key = id == replaced ? try LabCTLog("other", operator: "x").publicKey : log.key
            return ["description": log.description, "log_id": id, "key": Data(key).base64EncodedString(),
                    "state": ["usable": ["timestamp": "2018-01-01T00:00:00Z"]]]
        }
        let list: [String: Any] = ["version": "test", "operators": [
            ["name": "Google", "email": ["g@test"], "logs": [try entry(Self.icarus)]],
            ["name": "Sectigo", "email": ["s@test"], "logs": [try entry(Self.mammoth)]],
        ]]
        return try file("real-logs.json", JSONSerialization.data(withJSONObject: list))
    }

    static let icarus = "KTxRllTIOWW6qlD8WAfUt2+/WHopctykwwz05UVH9Hg="
    static let mammoth = "b1N2rDHwMRnYmQCkURX/dxUcEdkCwQApBo2yCJo32RM="

    func verifyReal(_ extra: [String]) throws -> (status: Int32, report: VerifyReport, text: String) {
        let x509 = try Self.vectors()
        let base = ["verify", "--chain", x509.appendingPathComponent("cryptography-scts.pem").path,
                    "--chain", x509.appendingPathComponent("letsencryptx3.pem").path, "--at", "2018-10-01T00:00:00Z"] + extra
        let json = try CLI.run(base + ["--format", "json"])
        let text = try CLI.run(base)
        let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(json.stdout.utf8))
        return (json.status, report, text.stdout)
    }

    @Test("real embedded SCTs from two operators verify against the log list; a list with one log's key replaced is refused whole")
    func realEmbeddedSCTs() throws {
        let good = try verifyReal(["--ct-log-list", realLogList()])
        let transparency = try #require(good.report.certificateTransparency)
        #expect(transparency.scts.count == 2)
        #expect(Set(transparency.scts.map(\.logID)) == [Self.icarus, Self.mammoth])
        #expect(transparency.scts.allSatisfy { $0.status == .valid && $0.origin == .embedded }, "\(transparency.scts)")
        #expect(Set(transparency.scts.compactMap(\.operator)) == ["Google", "Sectigo"])
        #expect(transparency.policy.satisfied, "\(transparency.policy.reason)")
        #expect(!transparency.policy.required, "the chain is not anchored here: CT is reported, not required")
        #expect(good.text.contains("SCT") && good.text.contains("embedded") && good.text.contains("valid"), "\(good.text)")

        // A list whose key for a log is not the one its log_id names is refused whole, before any SCT is
        // judged against it (the invalid-signature status is the forged lab SCTs' test below).
        let x509 = try Self.vectors()
        let forged = try CLI.run(["verify", "--chain", x509.appendingPathComponent("cryptography-scts.pem").path,
                                  "--ct-log-list", realLogList(replacingKeyOf: Self.mammoth)])
        #expect(forged.status == 64 && forged.stderr.contains("not the SHA-256 of its key"), "\(forged.stderr)")

        // The shipped snapshot knows both logs as rejected by now: the signatures hold, the logs do not count.
        let shipped = try verifyReal([])
        let judged = try #require(shipped.report.certificateTransparency)
        #expect(judged.scts.allSatisfy { $0.signature == .valid && $0.status == .logNotApprovedAtTime }, "\(judged.scts)")
        #expect(judged.logList.hasPrefix("tlsaudit's snapshot"))
    }

    // MARK: Lab logs, every channel

    @Test("forged embedded SCTs (made-up log ids, garbage signatures) are unknown-log or invalid-signature, never counted")
    func forgedEmbeddedSCTs() throws {
        let log = try LabCTLog("lab log A", operator: "Lab One")
        let leaf = try pki.intermediate.issue(.server([TestPKI.hostname]), embedding: [
            { _ in LabCTLog.forged(logID: (0..<32).map { _ in UInt8.random(in: 0...255) }, at: Date().addingTimeInterval(-60), signature: [0x30, 0x06, 2, 1, 1, 2, 1, 1]) },
            { _ in LabCTLog.forged(logID: (0..<32).map { _ in UInt8.random(in: 0...255) }, at: Date().addingTimeInterval(-60), signature: Array(repeating: 7, count: 70)) },
            { _ in LabCTLog.forged(logID: Array(Data(base64Encoded: log.id)!), at: Date().addingTimeInterval(-60), signature: Array(repeating: 9, count: 70)) },
            { log.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-120)) },
        ])
        let list = try file("lab-list.json", LabCTLog.listFile([(log, "usable", Date(timeIntervalSince1970: 1_600_000_000))]))
        let (server, port) = try labOpenSSLServer(chain: [leaf, pki.intermediate], directory: pki.directory)
        defer { LabOCSPResponder.kill(server) }
        let result = try scanWhenUp(port: port, extra: ["--ct-log-list", list])
        let transparency = try #require(result.handshake?.certificateTransparency)
        #expect(transparency.scts.map(\.status) == [.unknownLog, .unknownLog, .invalidSignature, .valid], "\(transparency.scts)")
        #expect(transparency.scts.allSatisfy { $0.origin == .embedded })
        #expect(!transparency.policy.satisfied, "one valid SCT of one operator is not enough: \(transparency.policy.reason)")
        #expect(result.handshake?.signedCertificateTimestamps?.embedded == 4)
    }

    @Test("SCTs over the TLS extension (s_server -serverinfo) and in a stapled OCSP response verify, each with its origin")
    func deliveredSCTs() throws {
        let first = try LabCTLog("lab log A", operator: "Lab One"), second = try LabCTLog("lab log B", operator: "Lab Two")
        let leaf = try pki.leaf()
        let staple = try pki.intermediate.ocspResponse(for: leaf, carrying: [second.sct(for: leaf)])
        let list = try file("lab-list.json", LabCTLog.listFile([(first, "usable", Date(timeIntervalSince1970: 1_600_000_000)),
                                                                 (second, "qualified", Date(timeIntervalSince1970: 1_600_000_000))]))
        let (server, port) = try labOpenSSLServer(chain: [leaf, pki.intermediate], serverInfo: LabCTLog.serverInfoPEM([first.sct(for: leaf)]),
                                              staple: staple, directory: pki.directory)
        defer { LabOCSPResponder.kill(server) }
        let result = try scanWhenUp(port: port, extra: ["--ct-log-list", list])
        let scts = try #require(result.handshake?.certificateTransparency).scts
        #expect(scts.count == 2, "\(scts)")
        #expect(scts.first { $0.origin == .tlsExtension }?.logID == first.id)
        #expect(scts.first { $0.origin == .tlsExtension }?.status == .valid)
        #expect(scts.first { $0.origin == .ocsp }?.logID == second.id)
        #expect(scts.first { $0.origin == .ocsp }?.status == .valid)
        #expect(scts.first { $0.origin == .ocsp }?.operator == "Lab Two")
        // The same SCTs against the shipped snapshot, which does not know the logs and is older than the SCTs:
        // logs newer than the list, not held against the chain.
        let newer = try scanWhenUp(port: port)
        #expect(try #require(newer.handshake?.certificateTransparency).scts.map(\.status) == [.logNewerThanList, .logNewerThanList])
        // Against a list published after the SCTs that does not know their logs: unknown logs.
        let stranger = try LabCTLog("lab log C", operator: "Lab Three")
        let current = try file("lab-list-current.json", LabCTLog.listFile([(stranger, "usable", Date(timeIntervalSince1970: 1_600_000_000))]))
        let unknown = try scanWhenUp(port: port, extra: ["--ct-log-list", current])
        #expect(try #require(unknown.handshake?.certificateTransparency).scts.map(\.status) == [.unknownLog, .unknownLog])
        // Text output: one line per SCT.
        let text = try CLI.run(["scan", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--timeout", "5",
                                "--ct-log-list", list, "\(TestPKI.hostname):\(port)"])
        #expect(text.stdout.components(separatedBy: "\n").filter { $0.contains("SCT") && $0.contains("valid") }.count == 2, "\(text.stdout)")
    }

    /// Scans `port` until s_server answers.
    func scanWhenUp(port: Int, extra: [String] = []) throws -> AddressScanResult {
        var result: AddressScanResult?
        for _ in 0..<50 where result?.status != .completed {
            Thread.sleep(forTimeInterval: 0.1)
            result = try? CLI.scan(port: port, extra: extra).report().single
        }
        return try #require(result)
    }

    // MARK: Trust stores and anchors

    @Test("Apple's store: the snapshot parses, its size and digest are pinned, and a lab chain is untrusted under it")
    func appleStore() throws {
        let snapshot = TrustStore.appleRoots
        #expect(snapshot.count == 156)
        // The shipped snapshot passes the checks a fetched one must pass.
        #expect(try AppleRootStore.verified(Array(TrustStore.appleSnapshotPEM.utf8), source: "shipped").count == 156)
        #expect(snapshot.sha256 == "fec236e8db8e986252e3f4f4eff3c41e12857c8dbf3c3a3cb5e542f9badf817e")
        // The PEM itself: its digest (as the script took it, with the final newline) and every certificate parsed.
        #expect(Digest.sha256Hex(Array((TrustStore.appleSnapshotPEM + "\n").utf8)) == snapshot.sha256)
        let parsed = try CertificateFile.summaries(path: try file("apple-snapshot.pem", Data(TrustStore.appleSnapshotPEM.utf8)))
        #expect(parsed.count == 156)
        #expect(parsed.contains { $0.subject.contains("ISRG Root X1") })
        // The identities generated with the snapshot (what anchor_in asks, without parsing it) are every certificate's.
        #expect(parsed.filter { !PublicRoots.stores(holding: $0).contains("apple") }.map(\.subject) == [])
        // Debian's copy of a root Apple also trusts: in both stores (found in /etc/ssl/certs by its subject hash);
        // the lab's root in neither.
        let isrg = try #require(try CertificateFile.summaries(path: "/etc/ssl/certs/ISRG_Root_X1.pem").first)
        #expect(PublicRoots.stores(holding: isrg) == ["apple", "system"])
        #expect(PublicRoots.stores(holding: pki.root.summary) == [])
        // Apple's list has one certificate that is not a root: Apple's Developer ID CA, issued by Apple Root CA.
        #expect(parsed.filter { !$0.isSelfSigned }.map(\.commonName) == ["Developer ID Certification Authority"])
        #expect(!snapshot.source.isEmpty && snapshot.fetchedAt.map(Timestamp.format) == "2025-12-28T00:00:00Z")
        #expect(TrustStore.apple.label == "apple")
        let server = try LabTLSServer(LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate]))
        defer { server.stop() }
        let output = try CLI.run(["scan", "--format", "json", "--trust-store", "apple", "--connect-to", "127.0.0.1", "--timeout", "5",
                                  "\(TestPKI.hostname):\(server.port)"])
        let report = try output.report()
        #expect(report.trustStore == "apple")
        let result = try report.single
        #expect(result.chain?.anchored == false)
        #expect(result.errorIDs.contains("trust.untrusted-root") || result.errorIDs.contains("trust.missing-intermediate"), "\(result.errorIDs)")
        #expect(!result.errorIDs.contains("trust.certificate-transparency"), "an untrusted chain gets its trust finding, not a CT one too")
        // The default of the ATS policies is Apple's store; Mozilla's policies judge against Debian's.
        #expect(try CLI.run(["scan", "--format", "json", "--connect-to", "127.0.0.1", "--timeout", "5",
                             "\(TestPKI.hostname):\(server.port)"]).report().trustStore == "apple")
        let text = try CLI.run(["scan", "--connect-to", "127.0.0.1", "--timeout", "5", "\(TestPKI.hostname):\(server.port)"])
        #expect(text.stdout.contains("apple"), "text output names the store that judged: \(text.stdout)")
    }

    @Test("a self-signed server under the system store gets its trust finding and no CT noise")
    func selfSignedNoCTNoise() throws {
        let selfSigned = try LabCertificateAuthority.selfSigned(.server([TestPKI.hostname]))
        let server = try LabTLSServer(LabServerConfiguration(chain: [selfSigned]))
        defer { server.stop() }
        let result = try CLI.run(["scan", "--format", "json", "--trust-store", "system", "--connect-to", "127.0.0.1", "--timeout", "5",
                                  "\(TestPKI.hostname):\(server.port)"]).report().single
        #expect(result.errorIDs.contains("trust.self-signed"), "\(result.errorIDs)")
        #expect(!result.errorIDs.contains("trust.certificate-transparency"))
        #expect(result.handshake?.certificateTransparency?.policy.required == false)
    }

    @Test("any certificate of --ca-file or --roots is an anchor: an intermediate ends the path there")
    func intermediateAsAnchor() throws {
        let leaf = try pki.leaf()
        let anchors = try file("intermediate.pem", Data(pki.intermediate.pem.utf8))
        let (status, report) = try CLI.verify([leaf, pki.intermediate], roots: anchors)
        #expect(status == 0, "\(report.findings)")
        #expect(report.chain.anchored)
        #expect(report.chain.path.count == 2)
        #expect(report.chain.anchorIn == [], "an operator's anchor is not a public root")
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let scanned = try CLI.run(["scan", "--format", "json", "--ca-file", anchors, "--connect-to", "127.0.0.1", "--timeout", "5",
                                   "\(TestPKI.hostname):\(server.port)"]).report().single
        #expect(scanned.chain?.anchored == true)
        #expect(scanned.chain?.path.count == 2)
    }

    @Test("public-trust rules follow the anchor: an Apple root given as --roots is still a public anchor")
    func publicAnchorFollowsTheAnchor() throws {
        let snapshot = TrustStore.appleSnapshotPEM
        let blocks = snapshot.components(separatedBy: "-----END CERTIFICATE-----").dropLast().map { $0 + "-----END CERTIFICATE-----\n" }
        let summaries = try CertificateFile.summaries(path: try file("apple.pem", Data(snapshot.utf8)))
        #expect(summaries.count == blocks.count)
        let index = try #require(summaries.firstIndex { $0.subject.contains("ISRG Root X1") })
        let isrg = try file("isrg.pem", Data(blocks[index].utf8))
        let output = try CLI.run(["verify", "--chain", isrg, "--roots", isrg, "--format", "json"])
        let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(output.stdout.utf8))
        #expect(report.chain.anchored)
        #expect(report.chain.trustStore == "ca-file:\(isrg)")
        #expect(report.chain.anchorIn?.contains("apple") == true, "\(String(describing: report.chain.anchorIn))")
        let lab = try CLI.verify([try pki.leaf(), pki.intermediate])
        #expect(lab.report.chain.anchorIn == [])
    }

    @Test("a certificate's subject and key found by walking its DER (no parse) are the ones OpenSSL's parse gives; damaged DER gives none")
    func certificateFieldsWalk() throws {
        let apple = try CertificateFile.summaries(path: try file("apple-fields.pem", Data(TrustStore.appleSnapshotPEM.utf8)))
        let lab = [pki.root.summary, pki.intermediate.summary, try pki.leaf().summary]
        // Every one of these certificates is DER as OpenSSL writes it back, so the key's bytes as found
        // hash to the summary's digest (of OpenSSL's re-encoding); `PublicRoots` parses when they differ.
        for summary in apple + lab {
            let fields = try #require(CertificateFields(der: Array(summary.der)), "\(summary.subject)")
            #expect(Data(Digest.sha256(Array(fields.subjectPublicKeyInfo))).base64EncodedString() == summary.spkiSHA256, "\(summary.subject)")
            #expect(fields.subject.first == 0x30 && fields.subjectPublicKeyInfo.first == 0x30)
        }
        let der = Array(pki.root.summary.der)
        #expect(CertificateFields(der: Array(der.prefix(der.count / 2))) == nil, "truncated")
        #expect(CertificateFields(der: []) == nil)
        #expect(CertificateFields(der: [0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF, 0x30]) == nil, "a length past the end")
        #expect(CertificateFields(der: Array("-----BEGIN CERTIFICATE-----".utf8)) == nil, "not DER")
    }

    @Test("anchor_in's system store: SSL_CERT_FILE naming the default bundle is answered by the hashed directory; another bundle is searched")
    func systemStoreWithCertFile() throws {
        let snapshot = TrustStore.appleSnapshotPEM
        let blocks = snapshot.components(separatedBy: "-----END CERTIFICATE-----").dropLast().map { $0 + "-----END CERTIFICATE-----\n" }
        let summaries = try CertificateFile.summaries(path: try file("apple.pem", Data(snapshot.utf8)))
        let index = try #require(summaries.firstIndex { $0.subject.contains("ISRG Root X1") })
        let isrg = try file("isrg.pem", Data(blocks[index].utf8))
        for environment in [["SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"], ["SSL_CERT_FILE": "/usr/lib/ssl/cert.pem"]] {
            let output = try CLI.run(["verify", "--chain", isrg, "--roots", isrg, "--format", "json"], environment: environment)
            let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(output.stdout.utf8))
            #expect(report.chain.anchorIn?.contains("system") == true, "\(environment): \(String(describing: report.chain.anchorIn))")
        }
        // A bundle of its own holding the lab root: the lab chain's anchor is in the system store then.
        let bundle = try file("bundle.pem", Data(pki.root.pem.utf8))
        let chain = try file("chain.pem", Data((try pki.leaf().pem + pki.intermediate.pem).utf8))
        let output = try CLI.run(["verify", "--chain", chain, "--roots", pki.rootFile, "--host", TestPKI.hostname, "--format", "json"],
                                 environment: ["SSL_CERT_FILE": bundle])
        let report = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(output.stdout.utf8))
        #expect(report.chain.anchorIn == ["system"], "\(String(describing: report.chain.anchorIn))")
        // A directory of its own (SSL_CERT_DIR), the root under its subject hash as OpenSSL names it,
        // labelled `X509 CERTIFICATE` (which OpenSSL reads as a certificate too), and no bundle.
        let hash = try LabCommand.run(["x509", "-hash", "-noout", "-in", pki.rootFile], program: "/usr/bin/openssl")
        let name = hash.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(hash.status == 0 && name.count == 8, "\(hash.stderr)")
        let directory = pki.directory.appendingPathComponent("certs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let relabelled = pki.root.pem.replacingOccurrences(of: "BEGIN CERTIFICATE", with: "BEGIN X509 CERTIFICATE")
            .replacingOccurrences(of: "END CERTIFICATE", with: "END X509 CERTIFICATE")
        try Data(relabelled.utf8).write(to: directory.appendingPathComponent("\(name).0"))
        let hashed = try CLI.run(["verify", "--chain", chain, "--roots", pki.rootFile, "--host", TestPKI.hostname, "--format", "json"],
                                 environment: ["SSL_CERT_DIR": directory.path, "SSL_CERT_FILE": directory.appendingPathComponent("none.pem").path])
        let hashedReport = try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(hashed.stdout.utf8))
        #expect(hashedReport.chain.anchorIn == ["system"], "\(String(describing: hashedReport.chain.anchorIn)) \(hashed.stderr)")
    }
}
