/// The server-side weaknesses `checks: [vulnerabilities]` probes for, each with its finding id,
/// severity and reference. Probes never harm the server: nothing it leaks is kept. The first three
/// are bugs of one implementation; the named verdicts after them (DROWN ... hello tolerance) are
/// weaknesses of a configuration, read from what the server accepts.
public enum Vulnerability: String, Codable, Sendable, CaseIterable {
    case heartbleed
    case ccsInjection = "ccs-injection"
    case robot
    /// SSLv2 spoken (or the same RSA key on an SSLv2 server).
    case drown
    /// SSLv3 with a CBC suite.
    case poodle
    /// A 64-bit block cipher (3DES, DES, IDEA, RC2).
    case sweet32
    /// An export RSA suite.
    case freak
    /// Export DH, a DHE group under 2048 bits.
    case logjam
    case rc4
    /// TLS 1.0 (or SSLv3) with a CBC suite.
    case beast
    /// A CBC suite with HMAC in TLS 1.0-1.2 (informational).
    case lucky13
    /// HTTP compression of the HTTPS answer.
    case breach
    /// A session ID echoed longer than the client's, with a session ticket (CVE-2016-9244).
    case ticketbleed
    /// Client-initiated renegotiation accepted.
    case clientRenegotiation = "client-renegotiation"
    /// A server that fails a ClientHello over 512 bytes or one with GREASE values.
    case helloTolerance = "hello-tolerance"

    /// The finding raised when the server is vulnerable (`docs/findings.md`).
    public var findingID: FindingID { FindingID(rawValue: "vuln." + rawValue) }

    public var title: String {
        switch self {
        case .heartbleed: "Heartbleed"
        case .ccsInjection: "OpenSSL CCS injection"
        case .robot: "ROBOT"
        case .drown: "DROWN"
        case .poodle: "POODLE"
        case .sweet32: "SWEET32"
        case .freak: "FREAK"
        case .logjam: "LOGJAM"
        case .rc4: "RC4"
        case .beast: "BEAST"
        case .lucky13: "LUCKY13"
        case .breach: "BREACH"
        case .ticketbleed: "Ticketbleed"
        case .clientRenegotiation: "Client-initiated renegotiation"
        case .helloTolerance: "ClientHello intolerance"
        }
    }

    /// CVE (or the defining RFC) and where to read about it.
    public var reference: String {
        switch self {
        case .heartbleed: "CVE-2014-0160, https://heartbleed.com"
        case .ccsInjection: "CVE-2014-0224, https://www.openssl.org/news/secadv/20140605.txt"
        case .robot: "CVE-2017-13099 and others, https://robotattack.org"
        case .drown: "CVE-2016-0800, https://drownattack.com"
        case .poodle: "CVE-2014-3566, https://www.openssl.org/~bodo/ssl-poodle.pdf"
        case .sweet32: "CVE-2016-2183, https://sweet32.info"
        case .freak: "CVE-2015-0204, https://freakattack.com"
        case .logjam: "CVE-2015-4000, https://weakdh.org"
        case .rc4: "CVE-2013-2566, CVE-2015-2808, RFC 7465, https://www.rc4nomore.com"
        case .beast: "CVE-2011-3389, https://nvd.nist.gov/vuln/detail/CVE-2011-3389"
        case .lucky13: "CVE-2013-0169, https://www.isg.rhul.ac.uk/tls/Lucky13.html"
        case .breach: "CVE-2013-3587, https://www.breachattack.com"
        case .ticketbleed: "CVE-2016-9244, https://filippo.io/Ticketbleed/"
        case .clientRenegotiation: "CVE-2011-1473, https://nvd.nist.gov/vuln/detail/CVE-2011-1473"
        case .helloTolerance: "RFC 8701 (GREASE), RFC 7685 (padding), https://www.rfc-editor.org/rfc/rfc8701"
        }
    }

    /// The first CVE (or RFC) of `reference`, for short labels.
    public var cve: String { String(reference.prefix { $0 != "," }) }

    /// Error: an attacker reads or forges what the server protects (memory, traffic, its key's
    /// signatures) or the cipher is broken; warning: a weakness that needs much traffic, a
    /// client-side mistake or a denial of service; info: LUCKY13, mitigated in current libraries.
    public var severity: Severity {
        switch self {
        case .heartbleed, .ccsInjection, .robot, .drown, .poodle, .freak, .logjam, .rc4, .ticketbleed: .error
        case .sweet32, .beast, .breach, .clientRenegotiation, .helloTolerance: .warning
        case .lucky13: .info
        }
    }
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

/// What the vulnerability probes found for one address (`checks: [vulnerabilities]`). The named
/// verdicts are optional: scans stored before they existed decode without them.
public struct VulnerabilityReport: Hashable, Codable, Sendable {
    public var heartbleed: VulnerabilityAnswer
    public var ccsInjection: VulnerabilityAnswer
    public var robot: VulnerabilityAnswer
    public var drown: VulnerabilityAnswer?
    public var poodle: VulnerabilityAnswer?
    public var sweet32: VulnerabilityAnswer?
    public var freak: VulnerabilityAnswer?
    public var logjam: VulnerabilityAnswer?
    public var rc4: VulnerabilityAnswer?
    public var beast: VulnerabilityAnswer?
    public var lucky13: VulnerabilityAnswer?
    public var breach: VulnerabilityAnswer?
    public var ticketbleed: VulnerabilityAnswer?
    public var clientRenegotiation: VulnerabilityAnswer?
    public var helloTolerance: VulnerabilityAnswer?
    /// DROWN: the SPKI SHA-256 (base64, as `spki_sha256`) of the certificate this address's SSLv2
    /// SERVER-HELLO carried, so that other addresses with that key are found vulnerable too.
    public var sslv2Key: String?
    /// Connections spent (each one hand-built handshake up to the server's first flight, or one
    /// handshake made by libssl for the ticket, the renegotiation and BREACH's GET).
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

    /// The answer about `vulnerability`, nil when the scan did not ask it (stored before it existed).
    /// Setting nil leaves the first three (always asked) as they are.
    public subscript(vulnerability: Vulnerability) -> VulnerabilityAnswer? {
        get {
            switch vulnerability {
            case .heartbleed: heartbleed
            case .ccsInjection: ccsInjection
            case .robot: robot
            default: Self.namedVerdict(vulnerability).flatMap { self[keyPath: $0] }
            }
        }
        set {
            switch vulnerability {
            case .heartbleed: if let newValue { heartbleed = newValue }
            case .ccsInjection: if let newValue { ccsInjection = newValue }
            case .robot: if let newValue { robot = newValue }
            default: if let field = Self.namedVerdict(vulnerability) { self[keyPath: field] = newValue }
            }
        }
    }

    /// The optional field of a named verdict.
    private static func namedVerdict(_ vulnerability: Vulnerability) -> WritableKeyPath<VulnerabilityReport, VulnerabilityAnswer?>? {
        switch vulnerability {
        case .heartbleed, .ccsInjection, .robot: nil
        case .drown: \.drown
        case .poodle: \.poodle
        case .sweet32: \.sweet32
        case .freak: \.freak
        case .logjam: \.logjam
        case .rc4: \.rc4
        case .beast: \.beast
        case .lucky13: \.lucky13
        case .breach: \.breach
        case .ticketbleed: \.ticketbleed
        case .clientRenegotiation: \.clientRenegotiation
        case .helloTolerance: \.helloTolerance
        }
    }

    /// Each vulnerability asked about with its answer, in a stable order (`Vulnerability.allCases`).
    public var answers: [(vulnerability: Vulnerability, answer: VulnerabilityAnswer)] {
        Vulnerability.allCases.compactMap { vulnerability in self[vulnerability].map { (vulnerability, $0) } }
    }

    /// One finding per vulnerability found, with its severity and reference.
    public var findings: [Finding] {
        answers.filter { $0.answer.status == .vulnerable }.map { vulnerability, answer in
            Finding(vulnerability.findingID, vulnerability.severity,
                    "\(vulnerability.title) (\(vulnerability.reference)): \(answer.detail)")
        }
    }
}

extension AddressScanResult {
    /// DROWN across the addresses of one scan of a target (a name's A and AAAA records, or the
    /// `--connect-to` / `addresses:` list): an address whose TLS leaf has the key another address's
    /// SSLv2 SERVER-HELLO carried is vulnerable too, with a `vuln.drown` finding. Keys seen on other
    /// targets or in earlier scans are not looked for.
    public static func sharingSSLv2Keys(_ addresses: [AddressScanResult]) -> [AddressScanResult] {
        let sslv2 = addresses.compactMap { address in address.vulnerabilities?.sslv2Key.map { (key: $0, at: address) } }
        guard !sslv2.isEmpty else { return addresses }
        return addresses.map { address in
            guard var report = address.vulnerabilities, let drown = report.drown, drown.status != .vulnerable,
                  let key = address.chain?.presented.first?.spkiSHA256,
                  let server = sslv2.first(where: { $0.key == key && $0.at.address + ":\($0.at.port)" != address.address + ":\(address.port)" })?.at else {
                return address
            }
            let shown = server.family == "ipv6" ? "[\(server.address)]:\(server.port)" : "\(server.address):\(server.port)"
            report.drown = .vulnerable("this address speaks no SSLv2, but its certificate's key (SPKI sha256 \(key)) is the one \(shown) sends in an SSLv2 SERVER-HELLO: recorded TLS sessions here can be decrypted through that server")
            var updated = address
            updated.vulnerabilities = report
            updated.findings = (address.findings + report.findings.filter { $0.id == .vulnDROWN }).mostSevereFirst()
            return updated
        }
    }
}
