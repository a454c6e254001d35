import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditSupport

/// Certificates trustd judges otherwise than OpenSSL: what Security's `SecCertificateParse` refuses
/// to read, what its SSL policy refuses besides (duplicate and undecodable extensions), how it links
/// a certificate to its issuer (key identifier only) and how it takes v1 CAs. Each through the
/// binary, on chains the lab signs; the reissued-intermediate and unreadable-time cases also over
/// a real handshake.
@Suite("Apple's certificate rules: what trustd refuses to read, issuer links, v1 CAs")
struct AppleCertificateRulesTests {
    let pki = TestPKI.shared

    func verify(_ certificates: [LabCertificate], roots: String? = nil) throws -> (Int32, VerifyReport) {
        try CLI.verify(certificates, roots: roots ?? pki.rootFile)
    }

    /// The finding that says Apple's clients refuse the certificate at `depth`, if any.
    func refusal(_ report: VerifyReport, depth: Int = 0) -> Finding? {
        report.findings.first { $0.id == .trustInvalid && $0.depth == depth && $0.message.contains("refused by Apple's clients") }
    }

    @Test("validity times: the forms trustd cannot read (a fraction, a GeneralizedTime or an offset without seconds) refuse the certificate; those it reads stay a lint")
    func validityForms() throws {
        let year = Calendar(identifier: .gregorian).component(.year, from: Date()) + 1
        let short = String(year % 100)
        let refused: [(String, (String, Bool))] = [
            ("fraction", ("\(year)0601000000.5Z", true)),
            ("GeneralizedTime without seconds", ("\(year)06010000Z", true)),
            ("GeneralizedTime, offset, no seconds", ("\(year)06010000+0100", true)),
            ("UTCTime, offset, no seconds", ("\(short)06010000+0100", false)),
        ]
        for (label, raw) in refused {
            let leaf = try pki.leaf { $0.rawNotAfter = raw }
            let (status, report) = try verify([leaf, pki.intermediate])
            #expect(status == 1, "\(label): \(report.findings)")
            let finding = try #require(refusal(report), "\(label): \(report.findings)")
            #expect(finding.message.contains("notAfter") && finding.message.contains("a form trustd cannot read"), "\(label): \(finding.message)")
        }
        // Read by trustd: a UTCTime without seconds, with Z; with seconds and an offset. A lint, a valid chain.
        for (label, raw) in [("UTCTime without seconds", ("\(short)06010000Z", false)), ("UTCTime with an offset", ("\(short)0601000000+0100", false))] {
            let leaf = try pki.leaf { $0.rawNotAfter = raw }
            let (status, report) = try verify([leaf, pki.intermediate])
            #expect(status == 0 && refusal(report) == nil, "\(label): \(report.findings)")
            #expect(report.findings.contains { $0.id == .lintValidityEncoding }, "\(label)")
        }
        // A leap second in any minute is read, as trustd reads it.
        let leap = try pki.leaf { $0.rawNotAfter = ("\(short)0601003060Z", false) }
        #expect(try verify([leap, pki.intermediate]).0 == 0)
    }

    @Test("a server whose certificate has a fractional notAfter: scan, ats and app audit say Apple's clients refuse it")
    func validityOverTLS() throws {
        let year = Calendar(identifier: .gregorian).component(.year, from: Date()) + 1
        let leaf = try pki.leaf { $0.rawNotAfter = ("\(year)0601000000.5Z", true) }
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let output = try CLI.scan(port: server.port)
        #expect(output.status == 1)
        let result = try output.report().single
        #expect(!result.ats.compliant && result.ats.failedRules == ["ats.trust"], "\(result.findings)")
        #expect(result.findings.contains { $0.id == .trustInvalid && $0.message.contains("refused by Apple's clients") }, "\(result.findings)")
        let plist = pki.directory.appendingPathComponent("default-\(UUID().uuidString.prefix(6)).plist")
        try "<?xml version=\"1.0\" encoding=\"UTF-8\"?><plist version=\"1.0\"><dict></dict></plist>".write(to: plist, atomically: true, encoding: .utf8)
        let audit = try CLI.run(["app", "audit", plist.path, "--host", "\(TestPKI.hostname):\(server.port)", "--connect-to", "127.0.0.1",
                                 "--ca-file", pki.rootFile, "--timeout", "3", "--format", "json"])
        #expect(audit.status == 1, "\(audit.stdout.prefix(1500))")
        let report = try JSONDecoder.tlsaudit.decode(AppAuditReport.self, from: Data(audit.stdout.utf8))
        #expect(report.hosts.first?.connects == false && report.hosts.first?.reasons.contains("trust.invalid") == true, "\(audit.stdout.prefix(1500))")
    }

    @Test("serial numbers: 37 octets read (a lint), 38 refused")
    func serialLength() throws {
        let longest = try pki.leaf { $0.serialHex = "7F" + String(repeating: "AB", count: 36) }
        let (status, report) = try verify([longest, pki.intermediate])
        #expect(status == 0 && refusal(report) == nil, "\(report.findings)")
        #expect(report.findings.contains { $0.id == .lintSerialNumber })
        let tooLong = try pki.leaf { $0.serialHex = "7F" + String(repeating: "AB", count: 37) }
        let (refusedStatus, refused) = try verify([tooLong, pki.intermediate])
        #expect(refusedStatus == 1)
        #expect(refusal(refused)?.message.contains("38 octets") == true, "\(refused.findings)")
    }

    @Test("an extension twice, and one trustd parses that does not decode (not critical): refused, saying which; an unknown one that does not decode: accepted")
    func extensionRefusals() throws {
        let twice = try pki.leaf { $0.extraExtensions = [.init(name: "subjectAltName", value: "DNS:\(TestPKI.hostname)")] }
        let (twiceStatus, twiceReport) = try verify([twice, pki.intermediate])
        #expect(twiceStatus == 1)
        #expect(refusal(twiceReport)?.message.contains("subjectAltName extension twice") == true, "\(twiceReport.findings)")
        let undecodable = try pki.leaf { $0.extraExtensions = [.init(name: "certificatePolicies", value: "DER:05:00")] }
        let (badStatus, badReport) = try verify([undecodable, pki.intermediate])
        #expect(badStatus == 1)
        #expect(refusal(badReport)?.message.contains("certificatePolicies extension is not a SEQUENCE") == true, "\(badReport.findings)")
        let unknown = try pki.leaf { $0.extraExtensions = [.init(name: "1.3.6.1.4.1.55555.1", value: "DER:05:00")] }
        let (unknownStatus, unknownReport) = try verify([unknown, pki.intermediate])
        #expect(unknownStatus == 0 && refusal(unknownReport) == nil, "\(unknownReport.findings)")
    }

    @Test("trustd's own parsers, not OpenSSL's decoders: a cA flag of 0x01, a keyUsage of three bytes, an empty extendedKeyUsage, an AKI issuer without serial refused; an undecodable IssuerAltName and a critical extension in Apple's arc accepted")
    func appleParsers() throws {
        let refused: [(String, LabCertificateRequest.ExtraExtension, String)] = [
            ("cA 0x01", .init(name: "basicConstraints", value: "critical,DER:30:03:01:01:01"), "cA flag other than 0x00 or 0xFF"),
            ("keyUsage of three bytes", .init(name: "keyUsage", value: "critical,DER:03:04:00:80:00:00"), "BIT STRING of one or two bytes"),
            ("empty EKU", .init(name: "extendedKeyUsage", value: "DER:30:00"), "holds no purpose"),
            ("AKI issuer, no serial", .init(name: "authorityKeyIdentifier", value: "DER:30:06:A1:04:A4:02:30:00"), "without the other"),
        ]
        for (label, ext, reason) in refused {
            let leaf = try pki.leaf { request in
                switch ext.name {
                case "basicConstraints": request.isCA = nil
                case "keyUsage": request.keyUsage = nil
                case "extendedKeyUsage": request.extendedKeyUsage = nil
                default: request.authorityKeyIdentifier = nil
                }
                request.extraExtensions = [ext]
            }
            let (status, report) = try verify([leaf, pki.intermediate])
            #expect(status == 1, "\(label): \(report.findings)")
            #expect(refusal(report)?.message.contains(reason) == true, "\(label): \(report.findings)")
        }
        let accepted: [(String, LabCertificateRequest.ExtraExtension)] = [
            ("undecodable IssuerAltName", .init(name: "issuerAltName", value: "DER:05:00")),
            ("critical extension in Apple's arc", .init(name: "1.2.840.113635.100.6.99", value: "critical,DER:05:00")),
        ]
        for (label, ext) in accepted {
            let leaf = try pki.leaf { $0.extraExtensions = [ext] }
            let (status, report) = try verify([leaf, pki.intermediate])
            #expect(status == 0 && refusal(report) == nil, "\(label): \(report.findings)")
        }
        // An unknown critical extension still fails, as trustd's CriticalExtensions check does.
        let unknown = try pki.leaf { $0.extraExtensions = [.init(name: "1.3.6.1.4.1.55555.2", value: "critical,DER:05:00")] }
        #expect(try verify([unknown, pki.intermediate]).1.findings.contains { $0.id == .trustUnknownCriticalExtension })
    }

    @Test("SANs as trustd reads them: an iPAddress of 6 bytes beside a good one hides both; a dNSName test.123 is no DNS name")
    func subjectAltNamesAsTrustdReadsThem() throws {
        // 192.0.2.1 and a 6-byte iPAddress, in one subjectAltName.
        let mixed = try pki.leaf("192.0.2.1") { request in
            request.ipAddresses = []
            request.dnsNames = []
            request.extraExtensions = [.init(name: "subjectAltName", value: "DER:30:0E:87:04:C0:00:02:01:87:06:01:02:03:04:05:06")]
        }
        let (mixedStatus, mixedReport) = try CLI.verify([mixed, pki.intermediate], host: "192.0.2.1")
        #expect(mixedStatus == 1 && mixedReport.findings.contains { $0.id == .trustHostnameMismatch }, "\(mixedReport.findings)")
        let good = try pki.leaf("192.0.2.1")
        #expect(try CLI.verify([good, pki.intermediate], host: "192.0.2.1").status == 0)
        let numeric = try pki.leaf("test.123")
        let (numericStatus, numericReport) = try CLI.verify([numeric, pki.intermediate], host: "test.123")
        #expect(numericStatus == 1 && numericReport.findings.contains { $0.id == .trustHostnameMismatch }, "\(numericReport.findings)")
    }

    @Test("extensions OpenSSL cannot decode and trustd reads: a subjectAltName with an undecodable otherName or ediPartyName still names the host (as with an x400Address or a constructed URI, which OpenSSL reads); an intermediate whose pathLenConstraint is zero-length is a CA without a limit; both link and verify")
    func extensionsOpenSSLRefuses() throws {
        let subjectAltNames: [(String, String)] = [
            ("an empty otherName", "DER:30:18:A0:00:82:14:73:65:72:76:65:72:2E:74:6C:73:61:75:64:69:74:2E:74:65:73:74"),
            ("an x400Address that is no ORAddress", "DER:30:1B:A3:03:02:01:01:82:14:73:65:72:76:65:72:2E:74:6C:73:61:75:64:69:74:2E:74:65:73:74"),
            ("an ediPartyName without its partyName", "DER:30:18:A5:00:82:14:73:65:72:76:65:72:2E:74:6C:73:61:75:64:69:74:2E:74:65:73:74"),
            ("a URI written as a constructed [6]", "DER:30:37:A6:1F:16:1D:68:74:74:70:73:3A:2F:2F:73:65:72:76:65:72:2E:74:6C:73:61:75:64:69:74:2E:74:65:73:74:2F:82:14:73:65:72:76:65:72:2E:74:6C:73:61:75:64:69:74:2E:74:65:73:74"),
        ]
        for (label, value) in subjectAltNames {
            let leaf = try pki.leaf { request in
                request.dnsNames = []
                request.extraExtensions = [.init(name: "subjectAltName", value: value)]
            }
            let (status, report) = try verify([leaf, pki.intermediate])
            #expect(status == 0, "\(label): \(report.findings)")
            #expect(!report.findings.contains { $0.id == .trustHostnameMismatch || $0.id == .trustIncompleteChain }, "\(label): \(report.findings)")
            let names = try #require(report.chain.presented.first?.subjectAlternativeNames, "\(label)")
            #expect(names.dns == [TestPKI.hostname], "\(label)")
            // What the leaf's other extensions say is still read: its keyUsage, its key identifiers.
            #expect(report.chain.presented.first?.keyUsage == ["digitalSignature", "keyEncipherment"], "\(label)")
            #expect(!report.findings.contains { $0.id.rawValue.hasPrefix("lint.aki") || $0.id == .lintLeafKeyUsageSigning }, "\(label): \(report.findings)")
        }
        // basicConstraints SEQUENCE { cA TRUE, pathLenConstraint INTEGER of no octets }.
        let unlimited = try pki.root.issue(.authority("zero-length pathLen CA").with { request in
            request.isCA = nil
            request.extraExtensions = [.init(name: "basicConstraints", value: "critical,DER:30:05:01:01:FF:02:00")]
        })
        let below = try unlimited.issue(.authority("CA below it"))
        let leaf = try below.issue(.server([TestPKI.hostname]))
        let (status, report) = try verify([leaf, below, unlimited])
        #expect(status == 0, "\(report.findings)")
        #expect(report.chain.anchored, "\(report.findings)")
        let constraints = try #require(report.chain.presented.last?.basicConstraints)
        #expect(constraints.isCA && constraints.pathLength == nil)
    }

    @Test("a leaf whose subjectAltName holds a dNSName that is not UTF-8 beside the host's: trustd reads no DNS name (hostname mismatch, said why); one in valid UTF-8 that is no DNS name is skipped alone (verified)")
    func dnsNameNotUTF8() throws {
        // SEQUENCE { dNSName "server.tlsaudit.test", dNSName 7 bytes }: "a", 0xFF, ".test" / UTF-8 "é.test".
        let host = "82:14:73:65:72:76:65:72:2E:74:6C:73:61:75:64:69:74:2E:74:65:73:74"
        for (label, second, verifies) in [("0xFF", "82:07:61:FF:2E:74:65:73:74", false), ("é in UTF-8", "82:07:C3:A9:2E:74:65:73:74", true)] {
            let leaf = try pki.leaf { request in
                request.dnsNames = []
                request.extraExtensions = [.init(name: "subjectAltName", value: "DER:30:1F:\(host):\(second)")]
            }
            let (status, report) = try verify([leaf, pki.intermediate])
            let mismatch = report.findings.first { $0.id == .trustHostnameMismatch }
            #expect((status == 0) == verifies && (mismatch == nil) == verifies, "\(label): \(report.findings)")
            if !verifies { #expect(mismatch?.message.contains("is not UTF-8, and trustd then reads no DNS name at all") == true, "\(label): \(String(describing: mismatch))") }
            #expect(report.chain.presented.first?.subjectAlternativeNames.dns.first == TestPKI.hostname, "\(label)")
        }
    }

    @Test("an intermediate OpenSSL refuses, read as trustd reads it: keyCertSign only in a keyUsage's unused bits is no usage (refused); a non-critical keyUsage with no bit is absent (accepted); a policyConstraints on it is not skipped (refused)")
    func refusedIntermediatesAsTrustdReadsThem() throws {
        // SEQUENCE { otherName [0] (empty), dNSName }: OpenSSL cannot decode it, trustd reads it by tag.
        let undecodableSAN = LabCertificateRequest.ExtraExtension(
            name: "subjectAltName", value: "DER:30:0A:A0:00:82:06:63:61:2E:74:73:74")
        let cases: [(String, Int32, (inout LabCertificateRequest) -> Void)] = [
            ("keyCertSign in the unused bits", 1, { request in
                request.keyUsage = nil
                request.extraExtensions = [.init(name: "keyUsage", value: "critical,DER:03:02:03:04")]
            }),
            ("a non-critical keyUsage with no bit", 0, { request in
                request.keyUsage = nil
                request.extraExtensions = [.init(name: "keyUsage", value: "DER:03:02:07:00")]
            }),
            ("requireExplicitPolicy 0 and no policy", 1, { request in
                request.extraExtensions = [undecodableSAN, .init(name: "policyConstraints", value: "critical,requireExplicitPolicy:0")]
            }),
        ]
        for (label, expected, adjust) in cases {
            let intermediate = try pki.root.issue(.authority("refused CA: \(label)").with(adjust))
            let leaf = try intermediate.issue(.server([TestPKI.hostname]))
            let (status, report) = try verify([leaf, intermediate])
            #expect(status == expected, "\(label): \(report.findings)")
            #expect(report.chain.presented.count == 2 && !report.findings.contains { $0.id == .trustIncompleteChain }, "\(label): \(report.findings)")
        }
    }

    @Test("a leaf naming its intermediate's issuer and serial in the AKI chains to that intermediate reissued with the same key (trustd reads the keyIdentifier only); a wrong keyIdentifier still fails")
    func reissuedIntermediate() throws {
        var original = LabCertificateRequest.authority("reissued intermediate")
        let old = try pki.root.issue(original)
        original.existingKey = old.key
        let reissued = try pki.root.issue(original) // same name and key, a new serial
        let leaf = try old.issue(LabCertificateRequest.server([TestPKI.hostname]).with { $0.authorityKeyIdentifier = "keyid:always,issuer:always" })
        let (status, report) = try verify([leaf, reissued])
        #expect(status == 0, "\(report.findings)")
        #expect(report.findings.contains { $0.id == .lintAKIIssuerSerial })
        #expect(report.chain.path.map(\.certificate.sha256Fingerprint).dropFirst().first == Digest.sha256(reissued.der).hex)
        // Over a real handshake: scan and app audit agree.
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, reissued]))
        defer { server.stop() }
        let scanned = try CLI.scan(port: server.port)
        #expect(scanned.status == 0, "\(scanned.stdout.prefix(2000))")
        // A keyIdentifier that is not the issuer's: no link (trustd's IdLinkage fails it as well).
        let stranger = try pki.root.issue(.authority("reissued intermediate"))
        let (strangerStatus, _) = try verify([leaf, stranger])
        #expect(strangerStatus == 1)
    }

    @Test("v1 CAs: a v1 root is an anchor, a v1 intermediate passes under it, and fails under a v3 root; a CA:TRUE intermediate without keyCertSign is a key-usage error, not 'not a CA'")
    func versionOneAuthorities() throws {
        var rootRequest = LabCertificateRequest.authority("v1 root")
        rootRequest.version = 1
        let v1Root = try LabCertificateAuthority.selfSigned(rootRequest)
        let roots = pki.directory.appendingPathComponent("v1-root-\(UUID().uuidString.prefix(6)).pem").path
        try v1Root.pem.write(toFile: roots, atomically: true, encoding: .utf8)
        // A v1 root has no subjectKeyIdentifier to name.
        let v3Intermediate = try v1Root.issue(LabCertificateRequest.authority("v3 under v1").with { $0.authorityKeyIdentifier = nil })
        let (underV1Status, underV1) = try verify([try v3Intermediate.issue(.server([TestPKI.hostname])), v3Intermediate], roots: roots)
        #expect(underV1Status == 0, "\(underV1.findings)")
        var intermediateRequest = LabCertificateRequest.authority("v1 intermediate")
        intermediateRequest.version = 1
        let v1Intermediate = try v1Root.issue(intermediateRequest)
        let v1Leaf = try v1Intermediate.issue(LabCertificateRequest.server([TestPKI.hostname]).with { $0.authorityKeyIdentifier = nil })
        let (v1Status, v1Report) = try verify([v1Leaf, v1Intermediate], roots: roots)
        #expect(v1Status == 0, "\(v1Report.findings)")
        let underV3 = try pki.root.issue(intermediateRequest)
        let (v3Status, v3Report) = try verify([try underV3.issue(LabCertificateRequest.server([TestPKI.hostname]).with { $0.authorityKeyIdentifier = nil }), underV3])
        #expect(v3Status == 1)
        let notCA = try #require(v3Report.findings.first { $0.id == .trustIssuerNotCA }, "\(v3Report.findings)")
        #expect(notCA.depth == 1 && notCA.message.contains("v1"), "\(notCA.message)")

        let noCertSign = try pki.root.issue(LabCertificateRequest.authority("no keyCertSign").with { $0.keyUsage = "critical,cRLSign,digitalSignature" })
        let (kuStatus, kuReport) = try verify([try noCertSign.issue(.server([TestPKI.hostname])), noCertSign])
        #expect(kuStatus == 1)
        #expect(kuReport.findings.contains { $0.id == .trustKeyUsage && $0.depth == 1 }, "\(kuReport.findings)")
        #expect(!kuReport.findings.contains { $0.id == .trustIssuerNotCA }, "\(kuReport.findings)")
    }

    @Test("an ECDSA leaf whose keyUsage leaves out digitalSignature: lint.leaf-key-usage-signing")
    func leafKeyUsage() throws {
        let agreement = try pki.leaf(key: .ec(curve: "P-256")) { $0.keyUsage = "critical,keyAgreement" }
        let (status, report) = try verify([agreement, pki.intermediate])
        #expect(status == 0, "a lint, not a verdict: \(report.findings)")
        #expect(report.findings.first { $0.id == .lintLeafKeyUsageSigning }?.message.contains("BoringSSL") == true, "\(report.findings)")
        let signing = try pki.leaf(key: .ec(curve: "P-256")) { $0.keyUsage = "critical,digitalSignature" }
        #expect(!(try verify([signing, pki.intermediate]).1.findings.contains { $0.id == .lintLeafKeyUsageSigning }))
    }
}

extension LabCertificateRequest {
    /// This request changed by `adjust`.
    func with(_ adjust: (inout LabCertificateRequest) -> Void) -> LabCertificateRequest {
        var copy = self
        adjust(&copy)
        return copy
    }
}
