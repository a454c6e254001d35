/// The section of `docs/findings.md` that documents a finding: its raw value is the heading's
/// anchor (`docs/findings.md#chain-trust`).
public enum FindingSection: String, Sendable, CaseIterable {
    case atsRules = "ats-rules"
    case chainTrust = "chain-trust"
    case revocation
    case enumeration
    case pins
    case handshake = "handshake-and-presentation"
    case vulnerabilities
    case mozillaProfiles = "mozilla-profiles"
    case conformanceLints = "conformance-lints"
    case appRules = "app-rules"
}

/// What to change so that a finding goes away, in the words tlsaudit's outputs use.
public struct FindingFix: Hashable, Sendable {
    /// One clause for the report's "fix first" list ("reissue with extendedKeyUsage serverAuth").
    public var short: String?
    /// The advice `ats` (and `app`) give as a server fix, before the finding's message. `{certificate}`
    /// stands for the certificate concerned: "the leaf", "the CA certificate at depth 2", "the chain".
    public var detailed: String?
    /// `detailed` when the chain was judged against the operator's own CA (`--ca-file`), where it differs.
    public var detailedForPrivateAnchors: String?

    public init(short: String? = nil, detailed: String? = nil, detailedForPrivateAnchors: String? = nil) {
        self.short = short
        self.detailed = detailed
        self.detailedForPrivateAnchors = detailedForPrivateAnchors
    }

    /// `detailed` (or its private-anchor form) with `{certificate}` replaced.
    public func detailed(certificate: String, privateAnchors: Bool) -> String? {
        let text = privateAnchors ? detailedForPrivateAnchors ?? detailed : detailed
        return text?.replacing(Self.certificatePlaceholder, with: certificate)
    }

    public static let certificatePlaceholder = "{certificate}"
}

/// One finding id described: its severity, a title in words, why it matters, what fixes it and
/// where `docs/findings.md` documents it.
public struct FindingDescription: Hashable, Sendable {
    public var id: FindingID
    /// The severity it is raised at by default (scan, default settings; the first one docs/findings.md names).
    public var severity: Severity
    /// The severities it is raised at in other cases or modes (`revocation: hard`, `verify`, ...).
    public var otherSeverities: [Severity]
    /// A few words for a person ("Certificate expired").
    public var title: String
    /// Why it matters, when the title does not say it.
    public var why: String?
    /// What to change; nil when the finding is a consequence of others (`ats.trust`) or has no single fix.
    public var fix: FindingFix?
    /// The section of docs/findings.md that documents it.
    public var section: FindingSection

    public init(id: FindingID, severity: Severity, otherSeverities: [Severity] = [], title: String, why: String? = nil,
                fix: FindingFix? = nil, section: FindingSection) {
        self.id = id
        self.severity = severity
        self.otherSeverities = otherSeverities
        self.title = title
        self.why = why
        self.fix = fix
        self.section = section
    }

    /// Every severity it can carry, the default first.
    public var severities: [Severity] { [severity] + otherSeverities }
    /// Where it is documented, relative to the repository: `docs/findings.md#chain-trust`.
    public var docsAnchor: String { "docs/findings.md#" + section.rawValue }
}

/// Every finding id tlsaudit emits, described once: `ats`'s server fixes and the report's fix-first
/// list read their advice here, and a test checks `docs/findings.md` against it (every id documented
/// under its section with the same severities, and nothing documented that is not here).
public enum FindingCatalog {
    public static subscript(id: FindingID) -> FindingDescription? { byID[id] }

    private static let byID: [FindingID: FindingDescription] =
        Dictionary(entries.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })

    private static func entry(_ id: FindingID, _ severity: Severity, _ title: String, _ section: FindingSection,
                              also otherSeverities: [Severity] = [], why: String? = nil, fix: FindingFix? = nil) -> FindingDescription {
        FindingDescription(id: id, severity: severity, otherSeverities: otherSeverities, title: title, why: why, fix: fix,
                           section: section)
    }

    private static let untrustedFix = FindingFix(
        short: "use a certificate from a CA the clients trust",
        detailed: "use a certificate from a publicly trusted CA, or a private CA whose root every device installs (configuration profile or MDM)",
        detailedForPrivateAnchors: "use a certificate the devices trust")
    private static let stapleFix =
        "staple an OCSP response on the server (or make the responder in the certificate's AIA answer)"

    /// In the order of docs/findings.md.
    public static let entries: [FindingDescription] = atsRules + chainTrust + revocation + enumeration + pins + handshake
        + vulnerabilities + mozillaProfiles + conformanceLints + appRules

    static let atsRules: [FindingDescription] = [
        entry(.atsTLSVersion, .error, "Protocol older than TLS 1.2", .atsRules),
        entry(.atsForwardSecrecy, .error, "No forward secrecy", .atsRules),
        entry(.atsCipherSuite, .error, "Cipher suite outside the policy's list", .atsRules),
        entry(.atsSignatureHash, .error, "Signed with less than SHA-256", .atsRules, also: [.warning],
              fix: FindingFix(detailed: "reissue {certificate} signed with SHA-256 or stronger")),
        entry(.atsKeySize, .error, "Key too small or of a type ATS refuses", .atsRules,
              fix: FindingFix(detailed: "reissue {certificate} with an RSA key of 2048 bits or more, or an ECDSA P-256 key")),
        entry(.atsTrust, .error, "Chain not trusted", .atsRules,
              why: "The trust.* errors behind it say what to change."),
        entry(.atsHandshake, .error, "Apple client's handshake refused", .atsRules),
        entry(.atsInsecureHTTPLoad, .error, "Plain HTTP load blocked by ATS", .atsRules,
              why: "The app's load fails with NSURLErrorDomain -1022.",
              fix: FindingFix(short: "serve the host over HTTPS and load https:// URLs (or declare NSExceptionAllowsInsecureHTTPLoads for it)")),
    ]

    static let chainTrust: [FindingDescription] = [
        entry(.trustExpired, .error, "Certificate expired", .chainTrust,
              fix: FindingFix(short: "renew the expired certificate and install it with its intermediate", detailed: "renew {certificate}")),
        entry(.trustNotYetValid, .error, "Certificate not yet valid", .chainTrust,
              fix: FindingFix(short: "check the server's clock and the certificate's notBefore",
                              detailed: "serve a certificate that is already valid in place of {certificate} (check its notBefore and the server's clock)")),
        entry(.trustSelfSigned, .error, "Self-signed leaf", .chainTrust, fix: untrustedFix),
        entry(.trustUntrustedRoot, .error, "Untrusted root", .chainTrust, fix: untrustedFix),
        entry(.trustIncompleteChain, .error, "Intermediate certificate not sent", .chainTrust,
              fix: FindingFix(short: "send the intermediate certificate with the leaf",
                              detailed: "send the intermediate certificate(s) with the leaf")),
        entry(.trustHostnameMismatch, .error, "Host name not in the certificate", .chainTrust,
              fix: FindingFix(short: "reissue with the host name in subjectAltName",
                              detailed: "reissue the leaf with the host name in subjectAltName (the CN is not used)")),
        entry(.trustIssuerNotCA, .error, "Issuer is not a CA", .chainTrust),
        entry(.trustPathLengthExceeded, .error, "Path length constraint exceeded", .chainTrust),
        entry(.trustEKU, .error, "No serverAuth extended key usage", .chainTrust,
              fix: FindingFix(short: "reissue with extendedKeyUsage serverAuth",
                              detailed: "reissue {certificate} with extendedKeyUsage serverAuth")),
        entry(.trustCertificateTransparency, .error, "Certificate Transparency policy not met", .chainTrust, also: [.warning],
              fix: FindingFix(short: "get a certificate with embedded SCTs",
                              detailed: "get a certificate with embedded SCTs (Certificate Transparency)")),
        entry(.trustLifetime, .error, "Validity period too long", .chainTrust,
              fix: FindingFix(short: "reissue with a validity of at most 398 days",
                              detailed: "reissue the leaf with a validity of at most 398 days (825 under a private CA)",
                              detailedForPrivateAnchors: "reissue the leaf with a validity of at most 825 days")),
        entry(.trustKeyUsage, .error, "Issuer without keyCertSign", .chainTrust),
        entry(.trustBadSignature, .error, "Signature does not verify", .chainTrust),
        entry(.trustNameConstraints, .error, "Name constraints violated", .chainTrust),
        entry(.trustUnknownCriticalExtension, .error, "Unknown critical extension", .chainTrust),
        entry(.trustPolicy, .error, "Certificate policy processing fails", .chainTrust),
        entry(.trustInvalid, .error, "Chain invalid", .chainTrust,
              fix: FindingFix(detailed: untrustedFix.detailed, detailedForPrivateAnchors: untrustedFix.detailedForPrivateAnchors)),
        entry(.trustNoCertificate, .error, "No certificate sent", .chainTrust),
        entry(.trustRevoked, .error, "Certificate revoked", .chainTrust, also: [.warning],
              fix: FindingFix(short: "replace the revoked certificate with one on a new key",
                              detailed: "replace {certificate} with a new certificate on a new key (no exception accepts a revoked one)")),
        entry(.trustDistrustedAfterDate, .error, "Root distrusted for certificates issued after a date", .chainTrust,
              why: "The root stays in the store, but the vendor no longer trusts its new certificates.",
              fix: FindingFix(short: "reissue from a CA the vendor still trusts",
                              detailed: "reissue {certificate} from a CA the vendor still trusts for new certificates")),
        entry(.trustPathSearchLimit, .warning, "Path building stopped at a bound", .chainTrust),
        entry(.trustLeafIsCA, .error, "Leaf marked as a CA (no longer raised: lint.leaf-is-ca)", .chainTrust),
        entry(.trustEmptySubject, .error, "Empty subject Apple refuses", .chainTrust,
              fix: FindingFix(short: "reissue with a subject (a CA) or a critical subjectAltName (an empty-subject leaf)",
                              detailed: "reissue {certificate} with a non-empty subject, or (a leaf only) with the subjectAltName extension marked critical")),
    ]

    static let revocation: [FindingDescription] = [
        entry(.revocationUnknown, .warning, "Revocation status unknown", .revocation, also: [.error],
              fix: FindingFix(short: "staple OCSP, or make the certificate's OCSP responder or CRL answer", detailed: stapleFix)),
        entry(.revocationMustStaple, .warning, "Must-staple without a stapled OCSP response", .revocation, also: [.error],
              fix: FindingFix(short: "staple OCSP", detailed: stapleFix)),
    ]

    static let enumeration: [FindingDescription] = [
        entry(.tlsLegacyProtocol, .error, "Obsolete protocol version accepted", .enumeration, also: [.warning]),
        entry(.tlsPrefersWeakSuite, .warning, "Prefers a suite without forward secrecy", .enumeration),
        entry(.tlsAnonymousSuites, .error, "Anonymous suites accepted", .enumeration,
              why: "No server authentication: anyone in the middle can answer."),
        entry(.tlsNonForwardSecretSuites, .info, "Suites without forward secrecy accepted", .enumeration),
    ]

    static let pins: [FindingDescription] = [
        entry(.pinMismatch, .error, "Pin mismatch", .pins,
              fix: FindingFix(short: "find out why the key changed (an unplanned reissue, or interception); update the pins only for a change you made")),
        entry(.pinAcceptsAnyCertificate, .warning, "Pinning policy accepts any certificate", .pins,
              why: "Anyone on the path can impersonate the server."),
        entry(.pinDomainNameNotValidated, .warning, "Pinning policy skips the host name check", .pins),
        entry(.pinAFNetworkingRefused, .error, "AFNetworking refuses the app's security policy", .pins,
              why: "Every server trust challenge is cancelled (NSURLErrorDomain -999).",
              fix: FindingFix(short: "pin a certificate or key (bundle .cer files) or turn allowInvalidCertificates off")),
        entry(.pinNoPinnedCertificate, .error, "Pinning mode with nothing pinned", .pins,
              why: "AFNetworking refuses every server (NSURLErrorDomain -999).",
              fix: FindingFix(short: "bundle the pinned certificates as DER files named *.cer at the top of the app bundle")),
        entry(.pinCertificateNotDER, .error, "Pinned certificate file is not DER", .pins,
              why: "AFNetworking cannot read it, so it pins nothing.",
              fix: FindingFix(short: "convert it: openssl x509 -in FILE.cer -outform der -out FILE.cer")),
        entry(.pinCertificateFileIgnored, .warning, "Certificate file not read by AFNetworking", .pins,
              why: "certificatesInBundle reads only files with the extension cer."),
    ]

    static let handshake: [FindingDescription] = [
        entry(.tlsWeakDH, .warning, "Diffie-Hellman group under 2048 bits", .handshake, why: "Logjam."),
        entry(.tlsClientCertificateRequested, .info, "Client certificate requested", .handshake),
        entry(.tlsClientCertificateRequired, .error, "Client certificate required", .handshake,
              why: "An app without the identity fails with NSURLErrorDomain -1206.",
              fix: FindingFix(short: "give the app's client identity (--client-cert and --client-key, or --client-p12)")),
        entry(.tlsClientCertificateRejected, .error, "Client certificate rejected", .handshake,
              why: "The app's load fails with NSURLErrorDomain -1205.",
              fix: FindingFix(short: "present a certificate the server's client CA issued, valid now, with clientAuth")),
        entry(.chainOrder, .warning, "Chain sent out of order", .handshake),
        entry(.chainExtraCertificates, .info, "Certificates outside the path sent", .handshake),
        entry(.chainRootSent, .info, "Root certificate sent", .handshake),
        entry(.chainAIAFetched, .warning, "Intermediate fetched from the AIA URL", .handshake,
              why: "Apple's clients fetch it too; Android, Firefox, curl and most others refuse the chain."),
        entry(.chainOversized, .warning, "Scan over the record budget", .handshake),
    ]

    static let vulnerabilities: [FindingDescription] = [
        entry(.vulnHeartbleed, .error, "Heartbleed (CVE-2014-0160)", .vulnerabilities),
        entry(.vulnCCSInjection, .error, "OpenSSL CCS injection (CVE-2014-0224)", .vulnerabilities),
        entry(.vulnROBOT, .error, "ROBOT oracle", .vulnerabilities),
        entry(.vulnDROWN, .error, "DROWN: SSLv2 (CVE-2016-0800)", .vulnerabilities),
        entry(.vulnPOODLE, .error, "POODLE: SSLv3 with CBC (CVE-2014-3566)", .vulnerabilities),
        entry(.vulnSWEET32, .warning, "SWEET32: 64-bit block cipher (CVE-2016-2183)", .vulnerabilities),
        entry(.vulnFREAK, .error, "FREAK: export RSA (CVE-2015-0204)", .vulnerabilities),
        entry(.vulnLOGJAM, .error, "LOGJAM: export or weak DH (CVE-2015-4000)", .vulnerabilities),
        entry(.vulnRC4, .error, "RC4 accepted (CVE-2013-2566, RFC 7465)", .vulnerabilities),
        entry(.vulnBEAST, .warning, "BEAST: TLS 1.0 with CBC (CVE-2011-3389)", .vulnerabilities),
        entry(.vulnLUCKY13, .info, "LUCKY13: CBC with HMAC (CVE-2013-0169)", .vulnerabilities),
        entry(.vulnBREACH, .warning, "BREACH: HTTP compression (CVE-2013-3587)", .vulnerabilities),
        entry(.vulnTicketbleed, .error, "Ticketbleed (CVE-2016-9244)", .vulnerabilities),
        entry(.vulnClientRenegotiation, .warning, "Client-initiated renegotiation (CVE-2011-1473)", .vulnerabilities),
        entry(.vulnHelloTolerance, .warning, "ClientHello intolerance (GREASE, large hello)", .vulnerabilities),
    ]

    static let mozillaProfiles: [FindingDescription] = [
        entry(.mozillaTLSVersions, .error, "Protocol version outside the profile", .mozillaProfiles),
        entry(.mozillaCipherSuites, .error, "Cipher suite outside the profile", .mozillaProfiles),
        entry(.mozillaTLS13Suites, .error, "TLS 1.3 suite outside the profile", .mozillaProfiles),
        entry(.mozillaGroups, .error, "Key-exchange group outside the profile", .mozillaProfiles),
        entry(.mozillaDHSize, .error, "DHE group too small for the profile", .mozillaProfiles),
        entry(.mozillaECDHSize, .error, "ECDHE curve under 256 bits", .mozillaProfiles),
        entry(.mozillaCertificateType, .error, "Certificate key type outside the profile", .mozillaProfiles),
        entry(.mozillaCertificateSignature, .error, "Certificate signature outside the profile", .mozillaProfiles),
        entry(.mozillaCertificateCurve, .error, "Certificate curve not P-256 or P-384", .mozillaProfiles),
        entry(.mozillaRSAKeySize, .error, "RSA key under 2048 bits", .mozillaProfiles),
        entry(.mozillaCertificateLifespan, .error, "Certificate lifespan too long for the profile", .mozillaProfiles),
        entry(.mozillaTrust, .error, "Chain not trusted", .mozillaProfiles),
        entry(.mozillaCompression, .error, "TLS compression on", .mozillaProfiles),
        entry(.mozillaFallbackSCSV, .error, "TLS_FALLBACK_SCSV not honoured", .mozillaProfiles),
        entry(.mozillaSecureRenegotiation, .error, "No secure renegotiation", .mozillaProfiles),
        entry(.mozillaExtendedMasterSecret, .error, "No extended master secret", .mozillaProfiles),
        entry(.mozillaHeartbleed, .error, "Vulnerable to Heartbleed", .mozillaProfiles),
        entry(.mozillaCCSInjection, .error, "Vulnerable to CCS injection", .mozillaProfiles),
        entry(.mozillaROBOT, .error, "Strong ROBOT oracle", .mozillaProfiles),
        entry(.mozillaIncomplete, .error, "Profile check incomplete", .mozillaProfiles),
    ]

    static let appRules: [FindingDescription] = [
        entry(.appExceptionUnneeded, .warning, "ATS exception that changes nothing", .appRules,
              why: "Each exception weakens what ATS guarantees, and App Review asks for a reason for it.",
              fix: FindingFix(short: "remove the key from the Info.plist (app audit prints the corrected dictionary)")),
        entry(.appPlistProblem, .warning, "NSAppTransportSecurity key misspelt or of the wrong type", .appRules,
              why: "iOS ignores such a key: the app runs with the setting it does not name.",
              fix: FindingFix(short: "spell the key as Apple documents it, with a value of its type, where it belongs")),
    ]

    static let conformanceLints: [FindingDescription] = [
        entry(.lintCommonNameNotInSAN, .warning, "CN not among the subjectAltNames", .conformanceLints),
        entry(.lintSerialNumber, .warning, "Serial number zero, negative or too long", .conformanceLints),
        entry(.lintRootEKU, .warning, "Root with extendedKeyUsage", .conformanceLints),
        entry(.lintKeyCertSignNotCA, .warning, "keyCertSign on a certificate that is not a CA", .conformanceLints),
        entry(.lintNameConstraintsNotCA, .warning, "nameConstraints in an end-entity certificate", .conformanceLints),
        entry(.lintNameConstraintsEmpty, .warning, "nameConstraints without subtrees", .conformanceLints),
        entry(.lintBasicConstraintsNotCritical, .warning, "basicConstraints not critical in a CA", .conformanceLints),
        entry(.lintDNSNameUnderscore, .warning, "Underscore in a DNS name", .conformanceLints),
        entry(.lintDNSNameLeadingDot, .warning, "DNS name starting with a dot", .conformanceLints),
        entry(.lintWildcardPublicSuffix, .warning, "Wildcard over a public suffix", .conformanceLints),
        entry(.lintRSAModulus, .warning, "RSA modulus not a multiple of 8 bits", .conformanceLints),
        entry(.lintAKIMissing, .warning, "authorityKeyIdentifier missing", .conformanceLints),
        entry(.lintAKIWithoutKeyID, .warning, "authorityKeyIdentifier without keyIdentifier", .conformanceLints),
        entry(.lintSKIMissing, .warning, "subjectKeyIdentifier missing in a CA", .conformanceLints),
        entry(.lintNameConstraintsNotCritical, .warning, "nameConstraints not critical", .conformanceLints),
        entry(.lintPolicyConstraintsNotCritical, .warning, "policyConstraints not critical", .conformanceLints),
        entry(.lintSANNotCritical, .warning, "subjectAltName not critical with an empty subject", .conformanceLints),
        entry(.lintAIAMalformed, .warning, "authorityInfoAccess malformed", .conformanceLints),
        entry(.lintEKUCritical, .warning, "extendedKeyUsage marked critical", .conformanceLints),
        entry(.lintExtensionCritical, .warning, "A key identifier or access extension marked critical", .conformanceLints),
        entry(.lintValidityEncoding, .warning, "Validity time not in DER or RFC 5280 form", .conformanceLints),
        entry(.lintCommonNameNotExactlyInSAN, .warning, "CN not written as its subjectAltName", .conformanceLints),
        entry(.lintEKUMissing, .warning, "extendedKeyUsage missing in the leaf", .conformanceLints),
        entry(.lintEKUAny, .warning, "anyExtendedKeyUsage in the leaf", .conformanceLints),
        entry(.lintLeafIsCA, .warning, "Leaf marked as a CA", .conformanceLints),
        entry(.lintAKIIssuerSerial, .warning, "authorityKeyIdentifier with issuer and serial", .conformanceLints),
        entry(.lintRootAKIKeyID, .warning, "Root's authorityKeyIdentifier is not its own key", .conformanceLints),
        entry(.lintSANCritical, .warning, "subjectAltName critical beside a subject", .conformanceLints),
        entry(.lintLeafKeyUsageSigning, .warning, "Server key not allowed to sign", .conformanceLints),
    ]
}
