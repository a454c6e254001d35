import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditSupport
import TLSAuditProcess

extension LabOCSPResponder {
    /// A responder for `issuer` in a directory of the test PKI's.
    convenience init(issuer: LabCertificate, entries: [(serial: String, entry: Entry)], signer: LabCertificate? = nil) throws {
        try self.init(issuer: issuer, entries: entries, signer: signer,
                      directory: TestPKI.shared.directory.appendingPathComponent("ocsp-\(UUID().uuidString.prefix(8))"))
    }

    /// `openssl s_server` sending `leaf` (and the issuer) with `staple` stapled; the caller kills
    /// it. Returns the process and the result of the first completed scan.
    func stapledServerScan(leaf: LabCertificate, staple: [UInt8]) throws -> (server: ChildProcess, result: AddressScanResult?) {
        let (server, port) = try stapledServer(leaf: leaf, staple: staple, connections: 20)
        var result: AddressScanResult?
        for _ in 0..<50 where result?.status != .completed {
            Thread.sleep(forTimeInterval: 0.1)
            result = try? CLI.scan(port: port).report().single
        }
        return (server, result)
    }
}

/// Revocation checking against real responders and CRLs served on loopback.
@Suite("revocation: OCSP and CRLs")
struct RevocationTests {
    let pki = TestPKI.shared

    static func randomSerial() -> String {
        "4" + (0..<15).map { _ in String("0123456789ABCDEF".randomElement()!) }.joined()
    }

    /// A leaf of the test intermediate with `serial`, naming `ocsp` in its AIA and `crl` as its distribution point.
    func leaf(serial: String = randomSerial(), ocsp: String? = nil, crl: String? = nil, mustStaple: Bool = false) throws -> LabCertificate {
        try pki.leaf { request in
            request.serialHex = serial
            if let ocsp { request.extraExtensions.append(.init(name: "authorityInfoAccess", value: "OCSP;URI:\(ocsp)")) }
            if let crl { request.extraExtensions.append(.init(name: "crlDistributionPoints", value: "URI:\(crl)")) }
            if mustStaple { request.extraExtensions.append(.init(name: "tlsfeature", value: "status_request")) }
        }
    }

    /// Scans a server sending `[leaf, intermediate]` with `extra` arguments.
    func scan(_ leaf: LabCertificate, extra: [String] = []) throws -> (status: Int32, result: AddressScanResult, seconds: Double) {
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let started = Date()
        let output = try CLI.scan(port: server.port, extra: extra)
        return (output.status, try output.report().single, Date().timeIntervalSince(started))
    }

    func finding(_ result: AddressScanResult, _ id: FindingID) -> Finding? { result.findings.first { $0.id == id } }

    @Test("OCSP responder in the AIA: good, revoked (with reason and date), unknown to the responder")
    func responder() throws {
        let good = Self.randomSerial(), revoked = Self.randomSerial(), unlisted = Self.randomSerial()
        let lab = try LabOCSPResponder(issuer: pki.intermediate, entries: [(good, .good), (revoked, .revoked(reason: "keyCompromise"))])
        try lab.start()
        defer { lab.stop() }

        let (okStatus, ok, _) = try scan(try leaf(serial: good, ocsp: lab.url))
        #expect(okStatus == 0, "\(ok.findings)")
        let check = try #require(ok.chain?.revocation?.checks.first)
        #expect(check.status == .good && check.source == .ocsp && check.url == lab.url && check.nextUpdate != nil)
        #expect(finding(ok, .revocationUnknown) == nil && finding(ok, .trustRevoked) == nil)

        // Apple's clients ask no OCSP responder for an ordinary certificate: the revocation is told,
        // as a warning, and the ATS verdict (the default policy) stands.
        let (badStatus, bad, _) = try scan(try leaf(serial: revoked, ocsp: lab.url))
        #expect(badStatus == 0, "\(bad.findings)")
        #expect(bad.ats.compliant, "\(bad.ats.failedRules)")
        let finding = try #require(self.finding(bad, .trustRevoked))
        #expect(finding.severity == .warning && finding.depth == 0)
        #expect(finding.message.contains("keyCompromise") && finding.message.contains("since"), "\(finding.message)")
        #expect(finding.message.contains("Apple's clients connect all the same"), "\(finding.message)")
        #expect(bad.chain?.revocation?.checks.first?.revokedAt != nil)
        // Firefox's profile counts it: an error that fails the chain.
        let (browserStatus, browser, _) = try scan(try leaf(serial: revoked, ocsp: lab.url), extra: ["--policy", "mozilla-intermediate"])
        #expect(browserStatus == 1)
        #expect(self.finding(browser, .trustRevoked)?.severity == .error, "\(browser.findings)")
        #expect(browser.ats.failedRules.contains("mozilla.trust"), "\(browser.ats.failedRules)")

        let (unknownStatus, unknown, _) = try scan(try leaf(serial: unlisted, ocsp: lab.url))
        #expect(unknownStatus == 0, "soft-fail: a warning")
        #expect(self.finding(unknown, .revocationUnknown)?.severity == .warning)
        let (hardStatus, hard, _) = try scan(try leaf(serial: unlisted, ocsp: lab.url), extra: ["--revocation", "hard"])
        #expect(hardStatus == 1)
        #expect(self.finding(hard, .revocationUnknown)?.severity == .error)
        #expect(!hard.ats.compliant)
        let (_, off, _) = try scan(try leaf(serial: revoked, ocsp: lab.url), extra: ["--revocation", "off"])
        #expect(off.chain?.revocation == nil && self.finding(off, .trustRevoked) == nil)
    }

    @Test("an answer signed by another CA's key is not believed")
    func wronglySigned() throws {
        let serial = Self.randomSerial()
        let lab = try LabOCSPResponder(issuer: pki.intermediate, entries: [(serial, .revoked(reason: "keyCompromise"))],
                              signer: pki.otherIntermediate)
        try lab.start()
        defer { lab.stop() }
        let (status, result, _) = try scan(try leaf(serial: serial, ocsp: lab.url))
        #expect(status == 0)
        #expect(finding(result, .trustRevoked) == nil)
        let unknown = try #require(finding(result, .revocationUnknown))
        #expect(unknown.message.contains("does not verify"), "\(unknown.message)")
    }

    @Test("an unreachable responder and a tarpit: unknown, and the scan ends within its timeout")
    func unreachableAndTarpit() throws {
        let closedPort = try LabPorts.unusedPort()
        let (status, unreachable, _) = try scan(try leaf(ocsp: "http://127.0.0.1:\(closedPort)/"))
        #expect(status == 0)
        #expect(finding(unreachable, .revocationUnknown)?.message.contains("127.0.0.1:\(closedPort)") == true)

        let tarpit = try LabHTTPServer(tarpit: true)
        defer { tarpit.stop() }
        let (_, stalled, seconds) = try scan(try leaf(ocsp: tarpit.url("/")), extra: ["--timeout", "2"])
        #expect(finding(stalled, .revocationUnknown) != nil)
        #expect(seconds < 4.5, "took \(seconds) s with --timeout 2")
        // A certificate naming a dozen distribution points, all tarpits: still one timeout, three tried.
        let many = try pki.leaf { request in
            request.extraExtensions = [.init(name: "crlDistributionPoints",
                                             value: (0..<12).map { "URI:\(tarpit.url("/crl\($0).crl"))" }.joined(separator: ","))]
        }
        let (_, crowded, crowdedSeconds) = try scan(many, extra: ["--timeout", "2"])
        #expect(crowdedSeconds < 4.5, "took \(crowdedSeconds) s with --timeout 2")
        let detail = crowded.chain?.revocation?.checks.first?.detail ?? ""
        #expect(detail.contains("crl2.crl") && !detail.contains("crl3.crl"), "\(detail)")
    }

    @Test("CRL from the distribution point: revoked, not listed, wrongly signed, expired")
    func distributionPoint() throws {
        let server = try LabHTTPServer()
        defer { server.stop() }
        let revokedLeaf = try leaf(crl: server.url("/revoked.crl"))
        let listed = try pki.intermediate.crl(revoking: [LabRevocation(revokedLeaf, reason: 4)]) // superseded
        server.serve(listed, at: "/revoked.crl")
        let (status, revoked, _) = try scan(revokedLeaf)
        #expect(status == 0, "a warning under the default policy: Apple's clients read no CRL")
        #expect(finding(revoked, .trustRevoked)?.message.contains("superseded") == true, "\(revoked.findings)")
        #expect(finding(revoked, .trustRevoked)?.severity == .warning)
        #expect(revoked.chain?.revocation?.checks.first?.source == .crl)

        server.serve(try pki.intermediate.crl(), at: "/empty.crl")
        let (goodStatus, good, _) = try scan(try leaf(crl: server.url("/empty.crl")))
        #expect(goodStatus == 0)
        #expect(good.chain?.revocation?.checks.first?.status == .good)

        let impostor = try LabPrivateKey(.ec(curve: "P-256"))
        let forgedLeaf = try leaf(crl: server.url("/forged.crl"))
        server.serve(try pki.intermediate.crl(revoking: [LabRevocation(forgedLeaf)], signer: impostor), at: "/forged.crl")
        let (_, forged, _) = try scan(forgedLeaf)
        #expect(finding(forged, .trustRevoked) == nil)
        #expect(finding(forged, .revocationUnknown)?.message.contains("signature") == true, "\(forged.findings)")

        server.serve(try pki.intermediate.crl(thisUpdate: Date().addingTimeInterval(-3 * 86_400),
                                              nextUpdate: Date().addingTimeInterval(-86_400)), at: "/stale.crl")
        let (_, stale, _) = try scan(try leaf(crl: server.url("/stale.crl")))
        #expect(finding(stale, .revocationUnknown)?.message.contains("expired") == true, "\(stale.findings)")
    }

    @Test("a CRL signed by an issuer without cRLSign, and an older CRL number after a newer one, are not believed")
    func crlIssuerAndNumber() throws {
        let server = try LabHTTPServer()
        defer { server.stop() }
        // An intermediate whose keyUsage lacks cRLSign signs its own CRL.
        var request = LabCertificateRequest.authority("revocation no-crlsign CA")
        request.keyUsage = "critical,keyCertSign"
        let ca = try pki.root.issue(request)
        var leafRequest = LabCertificateRequest.server([TestPKI.hostname])
        leafRequest.extraExtensions = [.init(name: "crlDistributionPoints", value: "URI:\(server.url("/nosign.crl"))")]
        let unsignedLeaf = try ca.issue(leafRequest)
        server.serve(try ca.crl(revoking: [LabRevocation(unsignedLeaf)]), at: "/nosign.crl")
        let tlsServer = try LabTLSServer(LabServerConfiguration(chain: [unsignedLeaf, ca]))
        defer { tlsServer.stop() }
        let output = try CLI.scan(port: tlsServer.port)
        let result = try output.report().single
        #expect(finding(result, .trustRevoked) == nil)
        #expect(finding(result, .revocationUnknown)?.message.contains("CRL sign") == true, "\(result.findings)")

        // One process (the service's case): CRL number 5, then, once it expired, number 3.
        let numbered = try leaf(crl: server.url("/numbered.crl"))
        server.serve(try pki.intermediate.crl(nextUpdate: Date().addingTimeInterval(2), number: 5), at: "/numbered.crl")
        let numberedServer = try LabTLSServer(LabServerConfiguration(chain: [numbered, pki.intermediate]))
        defer { numberedServer.stop() }
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: pki.rootFile)), judge: AddressAssessment.judge)
        let target = ScanTarget(original: "t", host: TestPKI.hostname, port: numberedServer.port, sni: TestPKI.hostname,
                                connectTo: [ConnectAddress(host: "127.0.0.1")])
        #expect(scanner.scan(target).addresses[0].chain?.revocation?.checks.first?.status == .good)
        Thread.sleep(forTimeInterval: 2.5)
        server.serve(try pki.intermediate.crl(number: 3), at: "/numbered.crl")
        let replayed = scanner.scan(target).addresses[0]
        #expect(replayed.chain?.revocation?.checks.first?.status == .unknown)
        #expect(finding(replayed, .revocationUnknown)?.message.contains("replayed") == true, "\(replayed.findings)")
    }

    @Test("x509-limbo's CRL cases: no CRL number, a critical CRL number, an issuer without cRLSign are not believed; no keyUsage is")
    func crlProfile() throws {
        // The limbo shape: a root issues the leaf and signs the CRL; verify --crl, hard-fail.
        func check(rootKeyUsage: String?, crl: (LabCertificate) throws -> [UInt8]) throws -> (status: Int32, report: VerifyReport) {
            var request = LabCertificateRequest.authority("revocation limbo root")
            request.keyUsage = rootKeyUsage
            let root = try LabCertificateAuthority.selfSigned(request)
            let leaf = try root.issue(.server([TestPKI.hostname]))
            let directory = pki.directory.appendingPathComponent("limbo-crl-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let roots = directory.appendingPathComponent("root.pem").path, crlFile = directory.appendingPathComponent("root.crl").path
            try root.pem.write(toFile: roots, atomically: true, encoding: .utf8)
            try Data(try crl(root)).write(to: URL(fileURLWithPath: crlFile))
            return try CLI.verify([leaf], roots: roots, extra: ["--crl", crlFile, "--revocation", "hard"])
        }
        let signing = "critical,keyCertSign,cRLSign"
        // Another certificate's serial is listed: a CRL that counts says "good".
        let other = [LabRevocation(try pki.leaf())]
        let (goodStatus, good) = try check(rootKeyUsage: signing) { try $0.crl(revoking: other) }
        #expect(goodStatus == 0, "\(good.findings)")
        #expect(good.chain.revocation?.checks.first?.status == .good)

        let cases: [(String, String?, (LabCertificate) throws -> [UInt8], String)] = [
            ("crlnumber_missing", signing, { try $0.crl(revoking: other, number: nil) }, "no CRL number"),
            ("crlnumber_critical", signing, { try $0.crl(revoking: other, criticalNumber: true) }, "critical"),
            ("issuer_missing_crlsign", "critical,keyCertSign", { try $0.crl(revoking: other) }, "CRL sign"),
        ]
        for (name, keyUsage, crl, reason) in cases {
            let (status, report) = try check(rootKeyUsage: keyUsage, crl: crl)
            #expect(status == 1, "\(name): \(report.findings)")
            #expect(report.chain.revocation?.checks.first?.status == .unknown, "\(name)")
            let unknown = report.findings.first { $0.id == .revocationUnknown }
            #expect(unknown?.severity == .error && unknown?.message.contains(reason) == true, "\(name): \(report.findings)")
        }
        // issuer_no_keyusage_extension: RFC 5280 6.3.3 (f) checks cRLSign only when keyUsage is present.
        let (bareStatus, bare) = try check(rootKeyUsage: nil) { try $0.crl(revoking: other) }
        #expect(bareStatus == 0, "\(bare.findings)")
        #expect(bare.chain.revocation?.checks.first?.status == .good)
    }

    @Test("a stapled revoked answer is used first; must-staple without a staple is flagged")
    func stapling() throws {
        let serial = Self.randomSerial()
        let lab = try LabOCSPResponder(issuer: pki.intermediate, entries: [(serial, .revoked(reason: "keyCompromise"))])
        let revokedLeaf = try leaf(serial: serial)
        let (server, result) = try lab.stapledServerScan(leaf: revokedLeaf, staple: try lab.response(for: revokedLeaf))
        defer { LabOCSPResponder.kill(server) }
        let scanned = try #require(result)
        #expect(scanned.chain?.revocation?.checks.first?.source == .stapledOCSP)
        #expect(finding(scanned, .trustRevoked) != nil, "\(scanned.findings)")
        // ats (and app audit, the same judge): trustd reads a staple always, so no configuration connects.
        let (atsServer, port) = try lab.stapledServer(leaf: revokedLeaf, staple: try lab.response(for: revokedLeaf), connections: nil)
        defer { LabOCSPResponder.kill(atsServer) }
        Thread.sleep(forTimeInterval: 0.3) // s_server's listener
        let ats = try CLI.run(["ats", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "\(TestPKI.hostname):\(port)"])
        let diagnostics = try JSONDecoder.tlsaudit.decode(ATSDiagnostics.self, from: Data(ats.stdout.utf8))
        #expect(ats.status == 1, "\(ats.stdout.prefix(800))")
        #expect(diagnostics.configurations.first { $0.name == "default" }?.pass == false)
        #expect(diagnostics.configurations.first { $0.name == "arbitrary-loads" }?.pass == false, "no exception lifts a revoked certificate")
        #expect(diagnostics.trustProblems.contains { $0.contains("revoked") }, "\(diagnostics.trustProblems)")

        let (_, unstapled, _) = try scan(try leaf(mustStaple: true))
        #expect(unstapled.chain?.revocation?.mustStaple == true)
        #expect(finding(unstapled, .revocationMustStaple)?.severity == .warning)
    }

    @Test("verify --crl and --ocsp-response check offline, the answer's dates included")
    func offline() throws {
        let serial = Self.randomSerial()
        let goodLeaf = try leaf(serial: serial)
        let lab = try LabOCSPResponder(issuer: pki.intermediate, entries: [(serial, .good)])
        let response = lab.path("good.der")
        try Data(try lab.response(for: goodLeaf)).write(to: URL(fileURLWithPath: response))
        let chain = lab.path("chain.pem")
        try (goodLeaf.pem + pki.intermediate.pem).write(toFile: chain, atomically: true, encoding: .utf8)
        let base = ["verify", "--chain", chain, "--roots", pki.rootFile, "--host", TestPKI.hostname, "--format", "json"]
        func verify(_ extra: [String]) throws -> (Int32, VerifyReport) {
            let output = try CLI.run(base + extra)
            return (output.status, try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(output.stdout.utf8)))
        }
        let (goodStatus, good) = try verify(["--ocsp-response", response])
        #expect(goodStatus == 0)
        #expect(good.chain.revocation?.checks.first?.status == .good)
        // Judged three days on, the one-day answer is stale.
        let later = Timestamp.format(Date().addingTimeInterval(3 * 86_400))
        let (staleStatus, stale) = try verify(["--ocsp-response", response, "--at", later])
        #expect(staleStatus == 0)
        #expect(stale.findings.first { $0.id == .revocationUnknown }?.message.contains("stale") == true, "\(stale.findings)")
        let (hardStatus, _) = try verify(["--ocsp-response", response, "--at", later, "--revocation", "hard"])
        #expect(hardStatus == 1)

        let crl = lab.path("revoked.crl")
        try Data(try pki.intermediate.crl(revoking: [LabRevocation(goodLeaf)])).write(to: URL(fileURLWithPath: crl))
        // verify judges as Apple's clients, which read no CRL: the revocation is a warning, the chain trusted.
        let (revokedStatus, revoked) = try verify(["--crl", crl])
        #expect(revokedStatus == 0, "\(revoked.findings)")
        #expect(revoked.findings.contains { $0.id == .trustRevoked && $0.severity == .warning }, "\(revoked.findings)")
        let text = try CLI.run(["verify", "--chain", chain, "--roots", pki.rootFile, "--host", TestPKI.hostname, "--crl", crl]).stdout
        #expect(text.contains("revocation (soft): [0] revoked since") && text.contains(", CRL \(crl)"), "\(text)")
        let (_, plain) = try verify([])
        #expect(plain.chain.revocation == nil, "without files verify stays offline")
    }

    @Test("many endpoints sharing a CA: one OCSP request for their one certificate, the rest from the cache")
    func sharedAnswer() throws {
        let serial = Self.randomSerial()
        let lab = try LabOCSPResponder(issuer: pki.intermediate, entries: [(serial, .good)])
        let http = try LabHTTPServer()
        defer { http.stop() }
        let shared = try leaf(serial: serial, ocsp: http.url("/ocsp"))
        http.serve(try lab.response(for: shared), at: "/ocsp")
        let servers = try (0..<8).map { _ in try LabTLSServer(LabServerConfiguration(chain: [shared, pki.intermediate])) }
        defer { servers.forEach { $0.stop() } }
        let output = try CLI.run(["scan", "--format", "json", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--timeout", "5"]
                                 + servers.map { "\(TestPKI.hostname):\($0.port)" })
        #expect(output.status == 0, "\(output.stderr)")
        let report = try output.report()
        #expect(report.targets.count == 8)
        for target in report.targets {
            #expect(target.addresses.first?.chain?.revocation?.checks.first?.status == .good)
        }
        #expect(http.requests(to: "/ocsp") == 1)
    }
}
