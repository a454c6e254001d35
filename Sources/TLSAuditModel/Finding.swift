/// How much a finding matters.
public enum Severity: String, Codable, Sendable, Comparable, CaseIterable {
    /// Worth knowing; never changes a verdict.
    case info
    /// A weakness that does not, by itself, break ATS or trust.
    case warning
    /// Breaks trust or an ATS rule: a client following the rules refuses the connection.
    case error

    private var rank: Int {
        switch self {
        case .info: 0
        case .warning: 1
        case .error: 2
        }
    }

    public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rank < rhs.rank }
}

/// A stable finding identifier. Users script against these strings: never rename one.
/// Each is described in `FindingCatalog` (title, severity, fix) and documented in `docs/findings.md`.
public struct FindingID: RawRepresentable, Hashable, Codable, CodingKeyRepresentable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral, Comparable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }
    public static func < (lhs: FindingID, rhs: FindingID) -> Bool { lhs.rawValue < rhs.rawValue }
    /// A conformance lint (`lint.*`): a warning about how the certificate is made, never in a verdict.
    public var isLint: Bool { rawValue.hasPrefix("lint.") }
    /// A JSON object keyed by rule id (`ats.rules`) keeps its ids as keys.
    public var codingKey: any CodingKey { RuleKey(stringValue: rawValue) }
    public init?<T: CodingKey>(codingKey: T) { rawValue = codingKey.stringValue }
    private struct RuleKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    // ATS rules (docs/apple-rules.md section 1).
    public static let atsTLSVersion: FindingID = "ats.tls-version"
    public static let atsForwardSecrecy: FindingID = "ats.forward-secrecy"
    public static let atsCipherSuite: FindingID = "ats.cipher-suite"
    public static let atsSignatureHash: FindingID = "ats.signature-hash"
    public static let atsKeySize: FindingID = "ats.key-size"
    public static let atsTrust: FindingID = "ats.trust"
    /// The server refused a ClientHello shaped like an Apple client's.
    public static let atsHandshake: FindingID = "ats.handshake"
    /// An app loads a plain `http://` URL that its ATS rules do not allow (NSURLErrorDomain -1022).
    public static let atsInsecureHTTPLoad: FindingID = "ats.insecure-http-load"

    // An app's own ATS dictionary (`app audit`).
    /// An exception key (an entry's or a global one) that changes no audited host's outcome.
    public static let appExceptionUnneeded: FindingID = "app.exception-unneeded"
    /// A key of NSAppTransportSecurity that is misspelt, of the wrong type or misplaced.
    public static let appPlistProblem: FindingID = "app.plist-problem"

    // Chain trust.
    public static let trustExpired: FindingID = "trust.expired"
    public static let trustNotYetValid: FindingID = "trust.not-yet-valid"
    public static let trustSelfSigned: FindingID = "trust.self-signed"
    public static let trustUntrustedRoot: FindingID = "trust.untrusted-root"
    public static let trustHostnameMismatch: FindingID = "trust.hostname-mismatch"
    public static let trustIncompleteChain: FindingID = "trust.incomplete-chain"
    public static let trustIssuerNotCA: FindingID = "trust.issuer-not-ca"
    public static let trustPathLengthExceeded: FindingID = "trust.path-length-exceeded"
    public static let trustEKU: FindingID = "trust.eku"
    public static let trustKeyUsage: FindingID = "trust.key-usage"
    public static let trustBadSignature: FindingID = "trust.bad-signature"
    public static let trustNameConstraints: FindingID = "trust.name-constraints"
    public static let trustUnknownCriticalExtension: FindingID = "trust.unknown-critical-extension"
    /// No longer raised (a CA:TRUE leaf is `lintLeafIsCA`): kept so that stored findings still read.
    public static let trustLeafIsCA: FindingID = "trust.leaf-is-ca"
    public static let trustEmptySubject: FindingID = "trust.empty-subject"
    public static let trustPolicy: FindingID = "trust.policy"
    public static let trustLifetime: FindingID = "trust.lifetime"
    public static let trustCertificateTransparency: FindingID = "trust.certificate-transparency"
    public static let trustInvalid: FindingID = "trust.invalid"
    public static let trustNoCertificate: FindingID = "trust.no-certificate"
    /// Path building stopped at one of its bounds (depth, paths, signature checks): a warning.
    public static let trustPathSearchLimit: FindingID = "trust.path-search-limit"
    /// A certificate of the path is revoked (OCSP or CRL).
    public static let trustRevoked: FindingID = "trust.revoked"
    /// The path anchors in a root the vendor distrusts for certificates dated after a cut-off, and the leaf is.
    public static let trustDistrustedAfterDate: FindingID = "trust.distrusted-after-date"

    // Revocation checking (revocation: soft | hard).
    /// No definitive revocation answer: warning in soft mode, error in hard mode.
    public static let revocationUnknown: FindingID = "revocation.unknown"
    /// The leaf demands OCSP stapling and the server stapled nothing.
    public static let revocationMustStaple: FindingID = "revocation.must-staple"

    // Pinning.
    public static let pinMismatch: FindingID = "pin.mismatch"
    /// The target's AFNetworking policy accepts any certificate (mode none, invalid certificates allowed, no name check).
    public static let pinAcceptsAnyCertificate: FindingID = "pin.accepts-any-certificate"
    /// The target's AFNetworking policy does not check the host name (validates_domain_name: false).
    public static let pinDomainNameNotValidated: FindingID = "pin.domain-name-not-validated"
    /// AFNetworking refuses the app's AFSecurityPolicy for every server (`app audit`).
    public static let pinAFNetworkingRefused: FindingID = "pin.afnetworking-refused"
    /// A pinning mode whose pinned set is empty: every server fails (`app audit`).
    public static let pinNoPinnedCertificate: FindingID = "pin.no-pinned-certificate"
    /// A bundled `.cer` that is not DER: AFNetworking cannot read it as a pin (`app audit`).
    public static let pinCertificateNotDER: FindingID = "pin.certificate-not-der"
    /// A bundled certificate file AFNetworking's `certificatesInBundle` does not read (not `.cer`).
    public static let pinCertificateFileIgnored: FindingID = "pin.certificate-file-ignored"

    // Handshake observations that are not ATS rules.
    public static let tlsWeakDH: FindingID = "tls.weak-dh"
    public static let tlsClientCertificateRequested: FindingID = "tls.client-certificate-requested"
    /// The server demands a client certificate and the client presented none it accepts.
    public static let tlsClientCertificateRequired: FindingID = "tls.client-certificate-required"
    /// The client presented its certificate and the server refused it.
    public static let tlsClientCertificateRejected: FindingID = "tls.client-certificate-rejected"
    public static let chainOrder: FindingID = "chain.order"
    public static let chainExtraCertificates: FindingID = "chain.extra-certificates"
    public static let chainRootSent: FindingID = "chain.root-sent"
    /// The path needed an intermediate fetched from an AIA caIssuers URL (`aia_fetch`).
    public static let chainAIAFetched: FindingID = "chain.aia-fetched"
    // Conformance lints (warnings; never change a verdict): docs/findings.md gives each one's source.
    public static let lintCommonNameNotInSAN: FindingID = "lint.cn-not-in-san"
    public static let lintSerialNumber: FindingID = "lint.serial-number"
    public static let lintRootEKU: FindingID = "lint.root-eku"
    public static let lintKeyCertSignNotCA: FindingID = "lint.key-cert-sign-not-ca"
    public static let lintNameConstraintsNotCA: FindingID = "lint.name-constraints-not-ca"
    public static let lintNameConstraintsEmpty: FindingID = "lint.name-constraints-empty"
    public static let lintBasicConstraintsNotCritical: FindingID = "lint.basic-constraints-not-critical"
    public static let lintDNSNameUnderscore: FindingID = "lint.dns-name-underscore"
    public static let lintDNSNameLeadingDot: FindingID = "lint.dns-name-leading-dot"
    public static let lintWildcardPublicSuffix: FindingID = "lint.wildcard-public-suffix"
    public static let lintRSAModulus: FindingID = "lint.rsa-modulus"
    public static let lintAKIMissing: FindingID = "lint.aki-missing"
    public static let lintAKIWithoutKeyID: FindingID = "lint.aki-without-key-id"
    public static let lintSKIMissing: FindingID = "lint.ski-missing"
    public static let lintNameConstraintsNotCritical: FindingID = "lint.name-constraints-not-critical"
    public static let lintPolicyConstraintsNotCritical: FindingID = "lint.policy-constraints-not-critical"
    public static let lintSANNotCritical: FindingID = "lint.san-not-critical"
    public static let lintAIAMalformed: FindingID = "lint.aia-malformed"
    public static let lintEKUCritical: FindingID = "lint.eku-critical"
    public static let lintExtensionCritical: FindingID = "lint.extension-critical"
    public static let lintValidityEncoding: FindingID = "lint.validity-encoding"
    public static let lintCommonNameNotExactlyInSAN: FindingID = "lint.cn-not-exactly-in-san"
    public static let lintEKUMissing: FindingID = "lint.eku-missing"
    public static let lintEKUAny: FindingID = "lint.eku-any"
    public static let lintLeafIsCA: FindingID = "lint.leaf-is-ca"
    public static let lintAKIIssuerSerial: FindingID = "lint.aki-issuer-serial"
    public static let lintRootAKIKeyID: FindingID = "lint.root-aki-key-id"
    public static let lintSANCritical: FindingID = "lint.san-critical"
    public static let lintLeafKeyUsageSigning: FindingID = "lint.leaf-key-usage-signing"

    /// The server's chain (or what it made tlsaudit find) exceeds the per-scan record budget.
    public static let chainOversized: FindingID = "chain.oversized"
}

extension FindingID {
    // Enumeration (scan --enumerate): what the server still accepts.
    /// The server accepts SSL 2/3 (error) or TLS 1.0/1.1 (warning).
    public static let tlsLegacyProtocol: FindingID = "tls.legacy-protocol"
    /// With its own order, the server picks a suite without forward secrecy first.
    public static let tlsPrefersWeakSuite: FindingID = "tls.prefers-weak-suite"
    /// Some accepted suite authenticates nobody (aNULL).
    public static let tlsAnonymousSuites: FindingID = "tls.anonymous-suites"
    /// Some accepted suite has no forward secrecy.
    public static let tlsNonForwardSecretSuites: FindingID = "tls.non-forward-secret-suites"
}

extension FindingID {
    // Vulnerabilities (checks: [vulnerabilities]).
    public static let vulnHeartbleed: FindingID = "vuln.heartbleed"
    public static let vulnCCSInjection: FindingID = "vuln.ccs-injection"
    public static let vulnROBOT: FindingID = "vuln.robot"
    // The named verdicts (`Vulnerability.findingID`: "vuln." and the vulnerability's raw value).
    public static let vulnDROWN: FindingID = "vuln.drown"
    public static let vulnPOODLE: FindingID = "vuln.poodle"
    public static let vulnSWEET32: FindingID = "vuln.sweet32"
    public static let vulnFREAK: FindingID = "vuln.freak"
    public static let vulnLOGJAM: FindingID = "vuln.logjam"
    public static let vulnRC4: FindingID = "vuln.rc4"
    public static let vulnBEAST: FindingID = "vuln.beast"
    public static let vulnLUCKY13: FindingID = "vuln.lucky13"
    public static let vulnBREACH: FindingID = "vuln.breach"
    public static let vulnTicketbleed: FindingID = "vuln.ticketbleed"
    public static let vulnClientRenegotiation: FindingID = "vuln.client-renegotiation"
    public static let vulnHelloTolerance: FindingID = "vuln.hello-tolerance"
}

extension FindingID {
    // Mozilla's server-side TLS profiles (policy: mozilla-modern | mozilla-intermediate | mozilla-old).
    public static let mozillaTLSVersions: FindingID = "mozilla.tls-versions"
    public static let mozillaCipherSuites: FindingID = "mozilla.cipher-suites"
    public static let mozillaTLS13Suites: FindingID = "mozilla.tls13-suites"
    public static let mozillaGroups: FindingID = "mozilla.groups"
    public static let mozillaDHSize: FindingID = "mozilla.dh-size"
    public static let mozillaECDHSize: FindingID = "mozilla.ecdh-size"
    public static let mozillaCertificateType: FindingID = "mozilla.certificate-type"
    public static let mozillaCertificateSignature: FindingID = "mozilla.certificate-signature"
    public static let mozillaCertificateCurve: FindingID = "mozilla.certificate-curve"
    public static let mozillaRSAKeySize: FindingID = "mozilla.rsa-key-size"
    public static let mozillaCertificateLifespan: FindingID = "mozilla.certificate-lifespan"
    public static let mozillaTrust: FindingID = "mozilla.trust"
    public static let mozillaCompression: FindingID = "mozilla.compression"
    public static let mozillaFallbackSCSV: FindingID = "mozilla.fallback-scsv"
    public static let mozillaSecureRenegotiation: FindingID = "mozilla.secure-renegotiation"
    public static let mozillaExtendedMasterSecret: FindingID = "mozilla.extended-master-secret"
    public static let mozillaHeartbleed: FindingID = "mozilla.heartbleed"
    public static let mozillaCCSInjection: FindingID = "mozilla.ccs-injection"
    public static let mozillaROBOT: FindingID = "mozilla.robot"
    /// Something the profile needs could not be found out (a probe failed): not compliant until it is.
    public static let mozillaIncomplete: FindingID = "mozilla.incomplete"

    /// Every rule of a Mozilla profile, in reporting order.
    public static let mozillaRules: [FindingID] = [
        mozillaTLSVersions, mozillaCipherSuites, mozillaTLS13Suites, mozillaGroups, mozillaDHSize, mozillaECDHSize,
        mozillaCertificateType, mozillaCertificateSignature, mozillaCertificateCurve, mozillaRSAKeySize, mozillaCertificateLifespan,
        mozillaTrust, mozillaCompression, mozillaFallbackSCSV, mozillaSecureRenegotiation, mozillaExtendedMasterSecret,
        mozillaHeartbleed, mozillaCCSInjection, mozillaROBOT, mozillaIncomplete,
    ]
}

/// One problem (or observation) about a probed address.
public struct Finding: Hashable, Codable, Sendable {
    /// Stable identifier, e.g. `trust.expired`.
    public var id: FindingID
    public var severity: Severity
    /// Position in the certificate path (0 = leaf) when the finding is about one certificate.
    public var depth: Int?
    /// One plain sentence for a human, at most `RecordBudget.messageBytes` long.
    public var message: String

    public init(_ id: FindingID, _ severity: Severity, depth: Int? = nil, _ message: String) {
        self.id = id
        self.severity = severity
        self.depth = depth
        self.message = RecordBudget.clamp(message)
    }

    /// A `trust.*` error: one of the reasons behind `ats.trust`.
    public var isTrustError: Bool { Self.isTrustError(id: id, severity: severity) }

    /// A trust error: a `trust.*` finding of severity error (what fails `ats.trust`).
    public static func isTrustError(id: FindingID, severity: Severity) -> Bool {
        severity == .error && id.rawValue.hasPrefix("trust.")
    }
}

extension Array where Element == Finding {
    /// Most severe first, then by depth and id, so output is stable.
    public func mostSevereFirst() -> [Finding] {
        sorted {
            if $0.severity != $1.severity { return $0.severity > $1.severity }
            if ($0.depth ?? -1) != ($1.depth ?? -1) { return ($0.depth ?? -1) < ($1.depth ?? -1) }
            return $0.id.rawValue < $1.id.rawValue
        }
    }

    /// Appends `finding` unless one with the same id and depth is already present
    /// (two sources, OpenSSL and tlsaudit's own checks, may see the same problem).
    package mutating func appendUnique(_ finding: Finding) {
        guard !contains(where: { $0.id == finding.id && $0.depth == finding.depth }) else { return }
        append(finding)
    }
}

extension Sequence where Element == FindingID {
    /// The ids as text, `separator` between them (as `joined` does for strings).
    public func joined(separator: String) -> String {
        map(\.rawValue).joined(separator: separator)
    }
}
