/// The server-side vulnerabilities `checks: [vulnerabilities]` probes for, each with its finding id,
/// severity and reference. Probes never harm the server: nothing it leaks is kept.
public enum Vulnerability: String, Codable, Sendable, CaseIterable {
    case heartbleed
    case ccsInjection = "ccs-injection"
    case robot

    /// The finding raised when the server is vulnerable (`docs/findings.md`).
    public var findingID: FindingID {
        switch self {
        case .heartbleed: .vulnHeartbleed
        case .ccsInjection: .vulnCCSInjection
        case .robot: .vulnROBOT
        }
    }

    public var title: String {
        switch self {
        case .heartbleed: "Heartbleed"
        case .ccsInjection: "OpenSSL CCS injection"
        case .robot: "ROBOT"
        }
    }

    /// CVE and where to read about it.
    public var reference: String {
        switch self {
        case .heartbleed: "CVE-2014-0160, https://heartbleed.com"
        case .ccsInjection: "CVE-2014-0224, https://www.openssl.org/news/secadv/20140605.txt"
        case .robot: "CVE-2017-13099 and others, https://robotattack.org"
        }
    }

    /// All three let an attacker read what the server protects (memory, traffic, or sign with its key).
    public var severity: Severity { .error }
}

/// One vulnerability's verdict: vulnerable, not vulnerable, or not tested (with why), each with the
/// evidence in a sentence.
public struct VulnerabilityAnswer: Hashable, Codable, Sendable {
    public enum Status: String, Codable, Sendable {
        case vulnerable
        case notVulnerable = "not-vulnerable"
        case notTested = "not-tested"
    }

    public var status: Status
    public var detail: String
    /// ROBOT only: `strong` or `weak` when vulnerable (as sslyze names them).
    public var oracle: String?

    public init(_ status: Status, _ detail: String, oracle: String? = nil) {
        self.status = status
        self.detail = detail
        self.oracle = oracle
    }

    public static func vulnerable(_ detail: String, oracle: String? = nil) -> VulnerabilityAnswer {
        VulnerabilityAnswer(.vulnerable, detail, oracle: oracle)
    }
    public static func notVulnerable(_ detail: String) -> VulnerabilityAnswer { VulnerabilityAnswer(.notVulnerable, detail) }
    public static func notTested(_ detail: String) -> VulnerabilityAnswer { VulnerabilityAnswer(.notTested, detail) }
}

/// What the vulnerability probes found for one address (`checks: [vulnerabilities]`).
public struct VulnerabilityReport: Hashable, Codable, Sendable {
    public var heartbleed: VulnerabilityAnswer
    public var ccsInjection: VulnerabilityAnswer
    public var robot: VulnerabilityAnswer
    /// Connections spent (each one hand-built handshake up to the server's first flight).
    public var handshakes: Int
    public var durationMs: Int

    public init(heartbleed: VulnerabilityAnswer, ccsInjection: VulnerabilityAnswer, robot: VulnerabilityAnswer,
                handshakes: Int, durationMs: Int) {
        self.heartbleed = heartbleed
        self.ccsInjection = ccsInjection
        self.robot = robot
        self.handshakes = handshakes
        self.durationMs = durationMs
    }

    /// Each vulnerability with its answer, in a stable order.
    public var answers: [(vulnerability: Vulnerability, answer: VulnerabilityAnswer)] {
        [(.heartbleed, heartbleed), (.ccsInjection, ccsInjection), (.robot, robot)]
    }

    /// One finding per vulnerability found, with its severity and reference.
    public var findings: [Finding] {
        answers.filter { $0.answer.status == .vulnerable }.map { vulnerability, answer in
            Finding(vulnerability.findingID, vulnerability.severity,
                    "\(vulnerability.title) (\(vulnerability.reference)): \(answer.detail)")
        }
    }
}

extension FindingID {
    // Vulnerabilities (checks: [vulnerabilities]).
    public static let vulnHeartbleed: FindingID = "vuln.heartbleed"
    public static let vulnCCSInjection: FindingID = "vuln.ccs-injection"
    public static let vulnROBOT: FindingID = "vuln.robot"
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

/// What the opt-in checks of one scan say is wrong, one short phrase each, for reports.
public enum ServerHygiene {
    /// The checks that ran (`inventory`, `headers`, `vulnerabilities`), and the problems they found.
    public static func problems(inventory: ServerInventory?, headers: HTTPHeadersReport?,
                                vulnerabilities: VulnerabilityReport?) -> (checks: [OptionalCheck], problems: [String]) {
        var checks: [OptionalCheck] = []
        var problems: [String] = []
        if let vulnerabilities {
            checks.append(.vulnerabilities)
            for (vulnerability, answer) in vulnerabilities.answers where answer.status == .vulnerable {
                problems.append("\(vulnerability.title)\(answer.oracle.map { " (\($0) oracle)" } ?? "") (\(vulnerability.reference.prefix { $0 != "," }))")
            }
        }
        if let inventory {
            checks.append(.inventory)
            // A TLS 1.3-only server has no renegotiation to secure.
            if inventory.secureRenegotiation.status == .no, !inventory.secureRenegotiation.isTLS13Only {
                problems.append("insecure renegotiation (no RFC 5746)")
            }
            if inventory.clientRenegotiation.status == .yes { problems.append("client-initiated renegotiation accepted") }
            if inventory.compression.status == .yes { problems.append("TLS compression (CRIME)") }
            if inventory.extendedMasterSecret?.status == .no { problems.append("no extended master secret in TLS 1.2") }
            if inventory.fallbackSCSV.status == .no { problems.append("TLS_FALLBACK_SCSV not honoured") }
            if inventory.earlyData.status == .yes { problems.append("0-RTT early data accepted (replayable)") }
        }
        if let headers {
            checks.append(.headers)
            if headers.status != nil, headers.hsts == nil { problems.append("no HSTS") }
            if headers.plainHTTP.status == .no { problems.append("port 80 does not redirect to HTTPS") }
        }
        return (checks, problems)
    }
}
