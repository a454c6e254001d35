/// What a certificate does wrong against the CA/Browser Forum Baseline Requirements and the RFC 5280
/// profile while clients still accept it: `lint.*` findings, severity warning, that never change a
/// verdict. Each id, with its source, is in docs/findings.md ("Conformance lints").
public enum ConformanceLints {
    /// The lints of every certificate of the path (leaf first), or of the presented chain when no
    /// path was built.
    public static func findings(path: [CertificateSummary]) -> [Finding] {
        var findings: [Finding] = []
        for (depth, certificate) in path.enumerated() {
            findings += lint(certificate, depth: depth, isLeaf: depth == 0 && !certificate.isCA)
        }
        // BR 7.1.2.7.8: a subscriber certificate is no CA. Apple's SSL policy accepts one as the leaf
        // (RFC 5280 puts no CA/EE rule on the end of a path); webpki and the CA/Browser Forum refuse it.
        // A self-signed certificate trusted as its own anchor is exempt.
        if path.count > 1, let leaf = path.first, leaf.isCA {
            findings.append(Finding(.lintLeafIsCA, .warning, depth: 0,
                "\(leaf.displayName): the leaf is marked CA:TRUE; a subscriber certificate must not be a CA (BR 7.1.2.7.8; webpki refuses it, Apple's clients do not)."))
        }
        // BR 7.1.2.1.3: a root's authorityKeyIdentifier, when present, names its own key. (OpenSSL
        // does not call such a certificate self-signed: it reads the mismatch as another issuer.)
        if let root = path.last, root.subject == root.issuer, root.profile?.authorityKeyIDMatchesSubjectKeyID == false {
            findings.append(Finding(.lintRootAKIKeyID, .warning, depth: path.count - 1,
                "\(root.displayName): the root's authorityKeyIdentifier is not its own subjectKeyIdentifier (BR 7.1.2.1.3)."))
        }
        return findings
    }

    static func lint(_ certificate: CertificateSummary, depth: Int, isLeaf: Bool) -> [Finding] {
        var findings: [Finding] = []
        func add(_ id: FindingID, _ message: String) {
            findings.append(Finding(id, .warning, depth: depth, "\(certificate.displayName): \(message)"))
        }
        let names = certificate.subjectAlternativeNames

        // BR 7.1.4.3: a CN, when present, is one of the SANs (compared as clients compare names:
        // case, IP forms, a Unicode CN against its A-label SAN), and a character-for-character copy
        // of it: a dNSName as written, an address in RFC 5952 text (the form `names.ip` holds).
        if isLeaf, let commonName = certificate.commonName, !commonName.isEmpty, !names.isEmpty {
            let asIP = IPAddress.canonical(commonName)
            let sameName = asIP.map { address in names.ip.first { IPAddress.canonical($0) == address } }
                ?? names.dns.first { DomainNameForm.ascii($0) == DomainNameForm.ascii(commonName) }
            if sameName == nil {
                add(.lintCommonNameNotInSAN, "the CN \"\(commonName)\" is not among the subjectAltNames (BR 7.1.4.3).")
            } else if let san = sameName, san != commonName {
                add(.lintCommonNameNotExactlyInSAN, "the CN \"\(commonName)\" names the subjectAltName \"\(san)\" but is not "
                    + "a character-for-character copy of it (BR 7.1.4.3\(asIP == nil ? "" : ", RFC 5952 section 4")).")
            }
        }
        // BR 7.1.2.7.10: a subscriber certificate has extKeyUsage, and never anyExtendedKeyUsage.
        if isLeaf {
            if certificate.extendedKeyUsage == nil {
                add(.lintEKUMissing, "no extendedKeyUsage extension (BR 7.1.2.7.10).")
            } else if certificate.extendedKeyUsage?.contains("anyExtendedKeyUsage") == true {
                add(.lintEKUAny, "extendedKeyUsage holds anyExtendedKeyUsage (BR 7.1.2.7.10).")
            }
        }
        // RFC 8446 4.4.2.2, RFC 5480 3: a server key signs the handshake (TLS 1.3, ECDHE): digitalSignature.
        if isLeaf, let usage = certificate.keyUsage, !usage.contains("digitalSignature"), certificate.publicKey.isEC || certificate.publicKey.isRSA {
            let consequence = certificate.publicKey.isEC
                ? "clients built on BoringSSL refuse an ECDSA server key without it"
                : "it allows only RSA key exchange, which TLS 1.3 and every forward-secret suite lack"
            add(.lintLeafKeyUsageSigning, "keyUsage \(RecordBudget.list(usage)) leaves out digitalSignature: \(consequence) (RFC 8446 4.4.2.2, RFC 5480 3).")
        }
        // RFC 5280 4.1.2.2: a positive serial number of at most 20 octets.
        let serial = certificate.serial
        if serial.hasPrefix("-") {
            add(.lintSerialNumber, "the serial number is negative (RFC 5280 4.1.2.2).")
        } else if serial.isEmpty || serial.allSatisfy({ $0 == "0" }) {
            add(.lintSerialNumber, "the serial number is zero (RFC 5280 4.1.2.2).")
        } else {
            // DER octets: two hex digits each, plus a leading zero octet when the top bit is set.
            let signOctet = serial.count % 2 == 0 && (serial.first?.hexDigitValue ?? 0) >= 8 ? 1 : 0
            if (serial.count + 1) / 2 + signOctet > 20 {
                add(.lintSerialNumber, "the serial number takes more than 20 octets (RFC 5280 4.1.2.2).")
            }
        }
        // BR 7.1.2.1: a root CA has no extendedKeyUsage.
        if certificate.isCA, certificate.isSelfSigned, certificate.extendedKeyUsage != nil {
            add(.lintRootEKU, "a root certificate with an extendedKeyUsage extension (BR 7.1.2.1).")
        }
        // RFC 5280 4.2.1.3: keyCertSign only with cA = TRUE.
        if !certificate.isCA, certificate.keyUsage?.contains("keyCertSign") == true {
            add(.lintKeyCertSignNotCA, "keyUsage keyCertSign on a certificate that is not a CA (RFC 5280 4.2.1.3).")
        }
        // RFC 5280 4.2.1.10: nameConstraints only in CA certificates, and never empty.
        if let constraints = certificate.nameConstraints {
            if !certificate.isCA {
                add(.lintNameConstraintsNotCA, "nameConstraints in a certificate that is not a CA (RFC 5280 4.2.1.10).")
            }
            if constraints.permittedDNS.isEmpty, constraints.excludedDNS.isEmpty, constraints.permittedIP.isEmpty,
               constraints.excludedIP.isEmpty, !constraints.otherTypes {
                add(.lintNameConstraintsEmpty, "nameConstraints with no subtree (RFC 5280 4.2.1.10).")
            }
        }
        // RFC 5280 4.2.1.9: basicConstraints critical in a CA certificate.
        if let constraints = certificate.basicConstraints, constraints.isCA, !constraints.critical {
            add(.lintBasicConstraintsNotCritical, "basicConstraints is not marked critical in a CA certificate (RFC 5280 4.2.1.9).")
        }
        // BR 7.1.4.2.1 / RFC 5280 4.2.1.6: preferred name syntax; no wildcard over a public suffix.
        for name in names.dns {
            if name.contains("_" as Character) {
                add(.lintDNSNameUnderscore, "the SAN \(RecordBudget.clamp(name, to: 200)) contains an underscore (BR 7.1.4.2.1).")
            }
            if name.hasPrefix(".") {
                add(.lintDNSNameLeadingDot, "the SAN \(RecordBudget.clamp(name, to: 200)) starts with a dot (RFC 5280 4.2.1.6).")
            }
            let normalized = HostnameMatcher.normalize(name)
            if normalized.hasPrefix("*."), PublicSuffixList.isPublicSuffix(String(normalized.dropFirst(2)), includingPrivate: true) {
                add(.lintWildcardPublicSuffix, "the SAN \(RecordBudget.clamp(name, to: 200)) is a wildcard over a public suffix (BR 3.2.2.6).")
            }
        }
        if let profile = certificate.profile {
            // RFC 5280 4.2.1.1 and 4.2.1.2: key identifiers.
            if !certificate.isSelfSigned, !profile.authorityKeyIdentifier {
                add(.lintAKIMissing, "no authorityKeyIdentifier (RFC 5280 4.2.1.1).")
            } else if profile.authorityKeyIdentifier, !profile.authorityKeyIdentifierHasKeyID {
                add(.lintAKIWithoutKeyID, "an authorityKeyIdentifier without keyIdentifier (RFC 5280 4.2.1.1).")
            }
            // BR 7.1.2.1.3 and 7.1.2.11.1: the keyIdentifier alone; a root's is its own subjectKeyIdentifier.
            // (Without a keyIdentifier beside them, lint.aki-without-key-id says it already.)
            if profile.authorityKeyIdentifierHasKeyID, let extras = profile.authorityKeyIdentifierExtras, !extras.isEmpty {
                add(.lintAKIIssuerSerial, "an authorityKeyIdentifier with \(extras.joined(separator: " and ")) (BR 7.1.2.1.3, 7.1.2.11.1).")
            }
            if certificate.isCA, !profile.subjectKeyIdentifier {
                add(.lintSKIMissing, "a CA certificate without subjectKeyIdentifier (RFC 5280 4.2.1.2).")
            }
            // Criticality the profile requires.
            func notCritical(_ name: String) -> Bool { profile.extensions.contains(name) && !profile.criticalExtensions.contains(name) }
            if notCritical("nameConstraints") {
                add(.lintNameConstraintsNotCritical, "nameConstraints is not marked critical (RFC 5280 4.2.1.10).")
            }
            if notCritical("policyConstraints") {
                add(.lintPolicyConstraintsNotCritical, "policyConstraints is not marked critical (RFC 5280 4.2.1.11).")
            }
            if profile.emptySubject, notCritical("subjectAltName") {
                add(.lintSANNotCritical, "an empty subject with a subjectAltName not marked critical (RFC 5280 4.2.1.6).")
            } else if !profile.emptySubject, profile.criticalExtensions.contains("subjectAltName") {
                add(.lintSANCritical, "a subjectAltName marked critical beside a non-empty subject (BR 7.1.2.7.12, RFC 5280 4.2.1.6).")
            }
            // BR 7.1.2.7.6 and 7.1.2.10.6: extKeyUsage is not critical in subscriber and subordinate
            // CA certificates; RFC 5280 4.2.1.12: never critical beside anyExtendedKeyUsage.
            if profile.criticalExtensions.contains("extendedKeyUsage") {
                if certificate.extendedKeyUsage?.contains("anyExtendedKeyUsage") == true {
                    add(.lintEKUCritical, "extendedKeyUsage is marked critical with anyExtendedKeyUsage (RFC 5280 4.2.1.12).")
                } else if !certificate.isSelfSigned {
                    add(.lintEKUCritical, "extendedKeyUsage is marked critical (BR 7.1.2.7.6, 7.1.2.10.6).")
                }
            }
            // RFC 5280 4.2.1.1, 4.2.1.2, 4.2.2.1, 4.2.2.2: never critical. trustd parses them and accepts
            // them critical; OpenSSL-based clients, Chrome and webpki refuse the chain.
            let mustNotBeCritical = ["authorityKeyIdentifier", "subjectKeyIdentifier", "authorityInfoAccess", "subjectInfoAccess"]
                .filter { profile.criticalExtensions.contains($0) }
            if !mustNotBeCritical.isEmpty {
                add(.lintExtensionCritical, "\(RecordBudget.list(mustNotBeCritical)) marked critical (RFC 5280 4.2.1.1, 4.2.1.2, 4.2.2.1, 4.2.2.2): Apple's clients accept it, OpenSSL-based clients and Chrome refuse the chain.")
            }
            // X.690 11.7 and 11.8 (DER), RFC 5280 4.1.2.5: validity times in UTC with seconds, UTCTime through 2049.
            if let problems = profile.validityEncoding, !problems.isEmpty {
                add(.lintValidityEncoding, "\(RecordBudget.list(problems, limit: 2)) (X.690 11.7-11.8, RFC 5280 4.1.2.5).")
            }
            // RFC 5280 4.2.2.1: access locations are URIs.
            if !profile.malformedAccessDescriptions.isEmpty {
                add(.lintAIAMalformed, "authorityInfoAccess has \(RecordBudget.list(profile.malformedAccessDescriptions, limit: 3)) (RFC 5280 4.2.2.1).")
            }
        }
        // BR 6.1.5: an RSA modulus whose length is a multiple of 8 bits.
        if certificate.publicKey.isRSA, certificate.publicKey.bits % 8 != 0 {
            add(.lintRSAModulus, "an RSA modulus of \(certificate.publicKey.bits) bits, not a multiple of 8 (BR 6.1.5).")
        }
        return findings
    }
}
