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

    /// The first CVE of `reference`, for short labels.
    public var cve: String { String(reference.prefix { $0 != "," }) }

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
