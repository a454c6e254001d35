/// The outcome of one ATS rule.
public enum RuleOutcome: String, Codable, Sendable {
    case pass
    case fail
}

/// App Transport Security verdict for one address: every rule, and the overall answer.
public struct ATSVerdict: Hashable, Codable, Sendable {
    /// The policy judged against (`ats`, `ats-runtime`, `apple-trust`).
    public var policy: CompliancePolicy
    /// True when an iOS app with default ATS settings would accept this server.
    public var compliant: Bool
    /// `ats.tls-version` etc. to pass / fail.
    public var rules: [FindingID: RuleOutcome]
    /// The failing rule ids, in a fixed order.
    public var failedRules: [FindingID]

    public init(policy: CompliancePolicy, compliant: Bool, rules: [FindingID: RuleOutcome], failedRules: [FindingID]) {
        self.policy = policy
        self.compliant = compliant
        self.rules = rules
        self.failedRules = failedRules
    }
}

/// The policies an address can be judged under. Raw values are stable config and CLI names.
public enum CompliancePolicy: String, Codable, Sendable, CaseIterable {
    /// Apple's App Transport Security as documented (docs/apple-rules.md section 1): TLS 1.2+, a
    /// forward-secret suite from Apple's documented list, SHA-2 signatures and RSA >= 2048 /
    /// ECC >= 256 keys on the leaf and issuing CAs, and a trusted chain with a matching name.
    case ats
    /// ATS with the suites current Apple clients actually offer (no CBC-SHA256/SHA384, plus
    /// CHACHA20): a server whose only TLS 1.2 suite is ECDHE-RSA-AES128-SHA256 passes `ats` but fails here.
    case atsRuntime = "ats-runtime"
    /// Apple's trust rules for all TLS since iOS 13 (an app with ATS exceptions still meets
    /// them): SHA-2 signatures, RSA >= 2048, a trusted chain with the name in a SAN.
    case appleTrust = "apple-trust"
    /// Mozilla's server-side TLS configurations (guidelines 5.7, the data sslyze's `--mozilla_config`
    /// checks against): the whole configuration judged, so a scan under them also enumerates and
    /// runs the inventory and vulnerability checks (docs/findings.md, `mozilla.*`).
    case mozillaModern = "mozilla-modern"
    case mozillaIntermediate = "mozilla-intermediate"
    case mozillaOld = "mozilla-old"

    /// The policy when none is named: what a current iPhone or Mac does (`ats-runtime`). A server
    /// that only passes Apple's documented list is not compliant by default; `ats` judges that list.
    public static let `default`: CompliancePolicy = .atsRuntime

    /// The rules this policy checks, in reporting order.
    public var rules: [FindingID] {
        switch self {
        case .ats, .atsRuntime:
            [.atsTLSVersion, .atsForwardSecrecy, .atsCipherSuite, .atsSignatureHash, .atsKeySize, .atsTrust, .atsHandshake]
        case .appleTrust:
            [.atsSignatureHash, .atsKeySize, .atsTrust]
        case .mozillaModern, .mozillaIntermediate, .mozillaOld:
            FindingID.mozillaRules
        }
    }

    /// Mozilla's profiles judge what enumeration, the inventory and the vulnerability probes find.
    public var judgesWholeConfiguration: Bool {
        switch self {
        case .mozillaModern, .mozillaIntermediate, .mozillaOld: true
        case .ats, .atsRuntime, .appleTrust: false
        }
    }

    /// The ClientHello to try first: the one an app under this policy sends.
    public var clientProfile: ClientProfile {
        switch self {
        case .ats: .ats
        case .atsRuntime: .atsRuntime
        case .appleTrust, .mozillaModern, .mozillaIntermediate, .mozillaOld: .permissive
        }
    }
}
