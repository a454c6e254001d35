import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditSupport

/// Conformance lints on generated certificates, one case per rule: a `lint.*` warning that never
/// changes the verdict, the same in `verify` and in `scan`.
@Suite("conformance lints")
struct LintTests {
    let pki = TestPKI.shared

    enum Case: String, CaseIterable, Sendable {
        case cnNotInSAN, serialZero, serialNegative, serialLong, rootEKU, keyCertSignNotCA, nameConstraintsNotCA,
             basicConstraintsNotCritical, emptyNameConstraints, underscore, leadingDot, wildcardPublicSuffix, rsaModulus,
             akiMissing, akiWithoutKeyID, skiMissing, nameConstraintsNotCritical, policyConstraintsNotCritical, sanNotCritical,
             aiaMalformed, ekuCritical, validityEncoding, cnNotExactlyInSAN, ekuMissing, ekuAny, aiaUndecodable, aiaEmpty,
             leafIsCA, akiIssuerSerial, rootAKIIssuerSerial, wildcardPrivateSuffix, sanCritical
    }

    /// The chain (leaf first), the anchors file when not the test root, the expected lint and its depth.
    func chain(_ kind: Case) throws -> (chain: [LabCertificate], roots: String?, lint: FindingID, depth: Int) {
        func leaf(_ adjust: (inout LabCertificateRequest) -> Void) throws -> [LabCertificate] {
            [try pki.leaf(key: .rsa(bits: 2048), adjust: adjust), pki.intermediate]
        }
        switch kind {
        case .cnNotInSAN:
            return (try leaf { $0.commonName = "elsewhere.tlsaudit.test" }, nil, .lintCommonNameNotInSAN, 0)
        case .serialZero:
            return (try leaf { $0.serialHex = "0" }, nil, .lintSerialNumber, 0)
        case .serialNegative:
            return (try leaf { $0.serialHex = "-2A" }, nil, .lintSerialNumber, 0)
        case .serialLong:
            return (try leaf { $0.serialHex = String(repeating: "7F", count: 21) }, nil, .lintSerialNumber, 0)
        case .keyCertSignNotCA:
            return (try leaf { $0.keyUsage = "critical,digitalSignature,keyCertSign" }, nil, .lintKeyCertSignNotCA, 0)
        case .nameConstraintsNotCA:
            return (try leaf { $0.extraExtensions = [.init(name: "nameConstraints", value: "critical,permitted;DNS:tlsaudit.test")] },
                    nil, .lintNameConstraintsNotCA, 0)
        case .underscore:
            return (try leaf { $0.dnsNames.append("_service.tlsaudit.test") }, nil, .lintDNSNameUnderscore, 0)
        case .leadingDot:
            return (try leaf { $0.dnsNames.append(".tlsaudit.test") }, nil, .lintDNSNameLeadingDot, 0)
        case .wildcardPublicSuffix:
            return (try leaf { $0.dnsNames.append("*.co.uk") }, nil, .lintWildcardPublicSuffix, 0)
        case .wildcardPrivateSuffix:
            // The Public Suffix List's private section: a lint (BR 3.2.2.6), not a matching rule.
            return (try leaf { $0.dnsNames.append("*.s3.amazonaws.com") }, nil, .lintWildcardPublicSuffix, 0)
        case .leafIsCA:
            return (try leaf { $0.isCA = true }, nil, .lintLeafIsCA, 0)
        case .akiIssuerSerial:
            return (try leaf { $0.authorityKeyIdentifier = "keyid:always,issuer:always" }, nil, .lintAKIIssuerSerial, 0)
        case .sanCritical:
            return (try leaf {
                $0.dnsNames = []
                $0.extraExtensions = [.init(name: "subjectAltName", value: "critical,DNS:\(TestPKI.hostname)")]
            }, nil, .lintSANCritical, 0)
        case .rsaModulus:
            return ([try pki.leaf(key: .rsa(bits: 2052)), pki.intermediate], nil, .lintRSAModulus, 0)
        case .akiMissing:
            return (try leaf { $0.authorityKeyIdentifier = nil }, nil, .lintAKIMissing, 0)
        case .akiWithoutKeyID:
            return (try leaf { $0.authorityKeyIdentifier = "issuer:always" }, nil, .lintAKIWithoutKeyID, 0)
        case .sanNotCritical:
            return (try leaf { $0.commonName = "" }, nil, .lintSANNotCritical, 0)
        case .ekuCritical:
            return (try leaf { $0.extendedKeyUsage = "critical,serverAuth" }, nil, .lintEKUCritical, 0)
        case .validityEncoding:
            // A UTCTime without seconds: X.680 allows it, DER and RFC 5280 do not; clients read it.
            return (try leaf { $0.rawNotAfter = ("\(Self.utcTime(Date().addingTimeInterval(200 * 86_400)).dropLast(3))Z", false) },
                    nil, .lintValidityEncoding, 0)
        case .aiaMalformed:
            return (try leaf { $0.extraExtensions = [.init(name: "authorityInfoAccess", value: "OCSP;email:ocsp@tlsaudit.test")] },
                    nil, .lintAIAMalformed, 0)
        case .aiaUndecodable, .aiaEmpty:
            // A NULL where the SEQUENCE of AccessDescriptions belongs; an empty SEQUENCE (it takes one or more).
            let value = kind == .aiaEmpty ? "DER:30:00" : "DER:05:00"
            return (try leaf { $0.extraExtensions = [.init(name: "authorityInfoAccess", value: value)] }, nil, .lintAIAMalformed, 0)
        case .cnNotExactlyInSAN:
            return (try leaf { $0.commonName = TestPKI.hostname.uppercased() }, nil, .lintCommonNameNotExactlyInSAN, 0)
        case .ekuMissing:
            return (try leaf { $0.extendedKeyUsage = nil }, nil, .lintEKUMissing, 0)
        case .ekuAny:
            return (try leaf { $0.extendedKeyUsage = "serverAuth,anyExtendedKeyUsage" }, nil, .lintEKUAny, 0)
        case .skiMissing, .nameConstraintsNotCritical, .policyConstraintsNotCritical:
            var request = LabCertificateRequest.authority("lint CA \(kind.rawValue)", key: .rsa(bits: 2048))
            switch kind {
            case .skiMissing: request.subjectKeyIdentifier = nil
            case .nameConstraintsNotCritical: request.extraExtensions = [.init(name: "nameConstraints", value: "permitted;DNS:tlsaudit.test")]
            default: request.extraExtensions = [.init(name: "policyConstraints", value: "requireExplicitPolicy:5")]
            }
            let ca = try pki.root.issue(request)
            var leafRequest = LabCertificateRequest.server([TestPKI.hostname], key: .rsa(bits: 2048))
            // Without the issuer's subjectKeyIdentifier there is no key identifier to point at.
            if kind == .skiMissing { leafRequest.authorityKeyIdentifier = "issuer:always" }
            let leaf = try ca.issue(leafRequest)
            let lint: FindingID = switch kind {
            case .skiMissing: .lintSKIMissing
            case .nameConstraintsNotCritical: .lintNameConstraintsNotCritical
            default: .lintPolicyConstraintsNotCritical
            }
            return ([leaf, ca], nil, lint, 1)
        case .rootEKU, .basicConstraintsNotCritical, .emptyNameConstraints, .rootAKIIssuerSerial:
            var rootRequest = LabCertificateRequest.authority("lint root \(kind.rawValue)", key: .rsa(bits: 2048))
            switch kind {
            case .rootEKU: rootRequest.extendedKeyUsage = "serverAuth"
            case .rootAKIIssuerSerial: rootRequest.authorityKeyIdentifier = "keyid:always,issuer:always"
            case .emptyNameConstraints:
                // NameConstraints ::= SEQUENCE {}: neither permitted nor excluded subtrees.
                rootRequest.extraExtensions = [.init(name: "nameConstraints", value: "critical,DER:30:00")]
            default:
                rootRequest.isCA = nil
                rootRequest.extraExtensions = [.init(name: "basicConstraints", value: "CA:TRUE")]
            }
            let root = try LabCertificateAuthority.selfSigned(rootRequest)
            let leaf = try root.issue(.server([TestPKI.hostname], key: .rsa(bits: 2048)))
            let roots = pki.directory.appendingPathComponent("lint-\(kind.rawValue)-\(UUID().uuidString.prefix(6)).pem").path
            try root.pem.write(toFile: roots, atomically: true, encoding: .utf8)
            let lint: FindingID = switch kind {
            case .rootEKU: .lintRootEKU
            case .emptyNameConstraints: .lintNameConstraintsEmpty
            case .rootAKIIssuerSerial: .lintAKIIssuerSerial
            default: .lintBasicConstraintsNotCritical
            }
            return ([leaf], roots, lint, 1)
        }
    }

    @Test("each lint, in verify and in scan, as a warning that leaves the verdict alone", arguments: Case.allCases)
    func lint(_ kind: Case) throws {
        let (certificates, roots, expected, depth) = try chain(kind)
        let anchors = roots ?? pki.rootFile
        let report = try CLI.verify(certificates, roots: anchors).report
        let lint = try #require(report.findings.first { $0.id == expected }, "\(report.findings.map(\.id))")
        #expect(lint.severity == .warning && lint.depth == depth)
        // One lint per case (the leaf below a CA without SKI can only name its issuer by name and serial).
        let also: [FindingID] = kind == .skiMissing ? [.lintAKIWithoutKeyID] : []
        let lints = report.findings.filter { $0.id.rawValue.hasPrefix("lint.") }
        #expect(Set(lints.map(\.id)) == Set([expected] + also), "\(lints.map(\.id))")

        let server = try LabTLSServer(LabServerConfiguration(chain: certificates))
        defer { server.stop() }
        let scanned = try CLI.run(["scan", "--format", "json", "--ca-file", anchors, "--connect-to", "127.0.0.1",
                                   "\(TestPKI.hostname):\(server.port)"])
        let result = try scanned.report().single
        #expect(result.findings.filter { $0.id.rawValue.hasPrefix("lint.") }.map(\.id) == lints.map(\.id), "scan and verify agree")
        // Lints never decide: the verdict is what it is without them.
        let withoutLints = result.findings.filter { !$0.id.rawValue.hasPrefix("lint.") }
        #expect(result.ats.policy.verdict(from: withoutLints).compliant == result.ats.compliant)
    }

    /// `YYMMDDHHMMSSZ`.
    static func utcTime(_ date: Date) -> String {
        let text = Timestamp.format(date).filter(\.isNumber) // YYYYMMDDHHMMSS
        return String(text.dropFirst(2)) + "Z"
    }

    @Test("a CN in Unicode is the same name as its A-label among the SANs; a different one is not")
    func unicodeCommonName() throws {
        for (commonName, expectLint) in [("bücher.tlsaudit.test", false), ("BÜCHER.tlsaudit.test", false), ("bucher.tlsaudit.test", true)] {
            let leaf = try pki.leaf { request in
                request.commonName = commonName
                request.dnsNames = [TestPKI.hostname, "xn--bcher-kva.tlsaudit.test"]
            }
            let report = try CLI.verify([leaf, pki.intermediate]).report
            #expect(report.findings.contains { $0.id == .lintCommonNameNotInSAN } == expectLint, "\(commonName): \(report.findings.map(\.id))")
        }
    }

    @Test("a CN that names a SAN only as clients compare: IPv6 in upper case, uncompressed, not in RFC 5952 form; DNS in other case")
    func commonNameCharacterForCharacter() throws {
        let cases: [(commonName: String, ip: String?, lint: FindingID?)] = [
            ("2001:db8::1:0:0:1", "2001:db8:0:0:1:0:0:1", nil), // RFC 5952 text of the SAN's address
            ("2001:DB8::1:0:0:1", "2001:db8::1:0:0:1", .lintCommonNameNotExactlyInSAN), // upper case
            ("2001:0db8:0000:0000:0001:0000:0000:0001", "2001:db8::1:0:0:1", .lintCommonNameNotExactlyInSAN), // uncompressed
            ("2001:db8:0:0:1::1", "2001:db8::1:0:0:1", .lintCommonNameNotExactlyInSAN), // the shorter zero run compressed
            ("2001:db8::2", "2001:db8::1", .lintCommonNameNotInSAN), // another address
            ("192.0.2.7", "192.0.2.7", nil),
            (TestPKI.hostname, nil, nil),
            ("Server.TLSaudit.test", nil, .lintCommonNameNotExactlyInSAN),
        ]
        for (commonName, ip, expected) in cases {
            let leaf = try pki.leaf { request in
                request.commonName = commonName
                if let ip { request.ipAddresses = [ip] }
            }
            let report = try CLI.verify([leaf, pki.intermediate]).report
            let lints = report.findings.filter { $0.id.rawValue.hasPrefix("lint.") }
            #expect(lints.map(\.id) == (expected.map { [$0] } ?? []), "\(commonName): \(lints.map(\.message))")
        }
    }

    @Test("validity times: every X.680 form read, DER deviations a lint, an unreadable time never valid")
    func validityTimes() throws {
        func verify(_ adjust: (inout LabCertificateRequest) -> Void) throws -> VerifyReport {
            try CLI.verify([try pki.leaf(adjust: adjust), pki.intermediate]).report
        }
        // A UTC offset is applied: 2 hours east of UTC, a notAfter 1 hour ahead in local time has passed.
        let soon = Date().addingTimeInterval(3_600)
        let local = Self.utcTime(soon.addingTimeInterval(2 * 3_600)).dropLast() + "+0200"
        let offset = try verify { $0.rawNotAfter = (String(local), false) }
        #expect(offset.valid, "\(offset.findings)")
        #expect(offset.findings.contains { $0.id == .lintValidityEncoding })
        #expect(abs(offset.chain.presented[0].notAfter.timeIntervalSince(soon)) < 2)
        // A GeneralizedTime with a fraction of a second, for a year after 2049.
        let fraction = try verify { $0.rawNotAfter = ("20500101000000.5Z", true) }
        #expect(abs(fraction.chain.presented[0].notAfter.timeIntervalSince1970 - 2_524_608_000) < 1) // JSON keeps whole seconds
        #expect(fraction.findings.first { $0.id == .lintValidityEncoding }?.message.contains("fraction") == true)
        // Garbage for a notBefore: never valid (before, it read as the distant past: always valid).
        let garbage = try verify { $0.rawNotBefore = ("not a time", false) }
        #expect(!garbage.valid)
        #expect(garbage.findings.contains { $0.id == .trustInvalid && $0.message.contains("cannot be read") }, "\(garbage.findings)")
        let leapDay = try verify { $0.rawNotBefore = ("230229000000Z", false) } // 2023 had no 29 February
        #expect(!leapDay.valid)
    }

    @Test("a notAfter with a fraction of a second (20301231235959.5Z) is the instant it names, inclusive; Apple's clients refuse it at any time")
    func fractionalNotAfter() throws {
        let leaf = try pki.leaf { request in
            request.rawNotBefore = ("301001000000Z", false) // a lifetime Apple accepts
            request.rawNotAfter = ("20301231235959.5Z", true)
        }
        func verify(at time: String) throws -> VerifyReport { try CLI.verify([leaf, pki.intermediate], extra: ["--at", time]).report }
        let named = 1_924_991_999.5 // 2030-12-31T23:59:59.5Z
        for (time, valid) in [("2030-12-31T23:59:59Z", true), ("2030-12-31T23:59:59.400Z", true),
                              ("2030-12-31T23:59:59.600Z", false), ("2031-01-01T00:00:00Z", false)] {
            let report = try verify(at: time)
            // trustd cannot read a fraction: the certificate is refused whatever the time.
            #expect(!report.valid && report.findings.contains { $0.id == .trustInvalid && $0.message.contains("a form trustd cannot read") },
                    "\(time): \(report.findings)")
            #expect(report.findings.contains { $0.id == .trustExpired } == !valid, "\(time): \(report.findings)")
            #expect(abs(report.chain.presented[0].notAfter.timeIntervalSince1970 - named) < 1, "\(report.chain.presented[0].notAfter)")
        }
    }

    @Test("the report's conformance section lists the lints of the current chains")
    func reportSection() throws {
        let (certificates, _, expected, _) = try chain(.underscore)
        let server = try LabTLSServer(LabServerConfiguration(chain: certificates))
        defer { server.stop() }
        let database = pki.directory.appendingPathComponent("lints-\(UUID().uuidString.prefix(6)).sqlite").path
        _ = try CLI.run(["scan", "--ca-file", pki.rootFile, "--connect-to", "127.0.0.1", "--database", database,
                         "\(TestPKI.hostname):\(server.port)"])
        let text = try CLI.run(["report", "--database", database, "--since", "1h"])
        #expect(text.stdout.contains("CONFORMANCE (1)") && text.stdout.contains(expected.rawValue), "\(text.stdout.suffix(600))")
        let json = try CLI.run(["report", "--database", database, "--since", "1h", "--format", "json"])
        #expect(json.stdout.contains("\"lints\" : [\n") || json.stdout.contains("\"\(expected.rawValue)\""), "\(json.stdout.prefix(300))")
    }

    @Test("a certificate the lab makes by default raises no lint")
    func clean() throws {
        let report = try CLI.verify([try pki.leaf(), pki.intermediate]).report
        #expect(!report.findings.contains { $0.id.rawValue.hasPrefix("lint.") }, "\(report.findings.map(\.id))")
        // The lab's root carries an authorityKeyIdentifier naming its own key: no lint.root-aki-key-id.
        #expect(report.chain.path.last?.certificate.profile?.authorityKeyIDMatchesSubjectKeyID == true)
    }
}
