/// The outcome of one ATS rule.
public enum RuleOutcome: String, Codable, Sendable {
    case pass
    case fail
}

/// A policy's verdict for one address (ATS, a Mozilla profile, an app's rules): every rule, and the overall answer.
public struct PolicyVerdict: Hashable, Codable, Sendable {
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

    private enum CodingKeys: String, CodingKey { case policy, compliant, rules, failedRules }

    /// The synthesized encoding, with `rules` written through a keyed container of its ids, as
    /// `Dictionary`'s own `encode(to:)` writes it: that one first asks the runtime whether
    /// `FindingID` is `CodingKeyRepresentable`, and each such first question walks every conformance
    /// record of the binary (0.36 ms of a one-target scan's 19).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(policy, forKey: .policy)
        try container.encode(compliant, forKey: .compliant)
        var outcomes = container.nestedContainer(keyedBy: RuleKey.self, forKey: .rules)
        for (rule, outcome) in rules { try outcomes.encode(outcome, forKey: RuleKey(stringValue: rule.rawValue)) }
        try container.encode(failedRules, forKey: .failedRules)
    }

    /// A rule's id as a key (what `FindingID.codingKey` gives `Dictionary`).
    private struct RuleKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// A policy an address can be judged under: a value that names its rules, as swift-certificates
/// composes `VerifierPolicy` values. Each is defined once (the built-in ones in `Policies/`), listed
/// once in `registered` (what decoding, `init?(rawValue:)`, the CLI, the configuration, reports and
/// docs read), and judged by the `PolicyJudge` TLSAuditCore registers for it. Its name (`rawValue`)
/// is the stable config, CLI, database and JSON name.
public struct CompliancePolicy: Sendable, Hashable, RawRepresentable, Codable, CaseIterable, CustomStringConvertible {
    /// The policy's name: `ats`, `mozilla-modern`.
    public let rawValue: String
    /// The rules this policy checks, in reporting order.
    public let rules: [FindingID]
    /// True for policies that judge what enumeration, the inventory and the vulnerability probes
    /// find (Mozilla's profiles): a scan under them runs those checks too.
    public let judgesWholeConfiguration: Bool
    /// The ClientHello to try first: the one a client under this policy sends.
    public let clientProfile: ClientProfile
    /// True for App Transport Security itself (an app's client): its verdict reads "ATS compliant",
    /// and a target judged by an app's rules (`app:`) can be judged under it.
    public let isAppTransportSecurity: Bool
    /// True when the policy's clients trust Apple's root store (when a target names none); false: the system's.
    public let trustsAppleRoots: Bool
    /// What it judges, in a few words (the CLI's `--policy` help).
    public let summary: String
    /// Whether the policy's clients fetch revocation (OCSP responders, CRLs) for an ordinary,
    /// non-EV certificate. Apple's do not (trustd reads stapled responses and Apple's own revocation
    /// data, and asks a responder only for EV certificates): a revocation tlsaudit fetched is then
    /// reported without failing the chain's trust.
    public let fetchesRevocation: Bool

    /// A policy's definition (see `Policies/`); it is known by name once listed in `registered`.
    public init(name: String, summary: String, rules: [FindingID], judgesWholeConfiguration: Bool = false, clientProfile: ClientProfile = .permissive,
                isAppTransportSecurity: Bool = false, trustsAppleRoots: Bool = true, fetchesRevocation: Bool = true) {
        self.rawValue = name
        self.rules = rules
        self.judgesWholeConfiguration = judgesWholeConfiguration
        self.clientProfile = clientProfile
        self.isAppTransportSecurity = isAppTransportSecurity
        self.trustsAppleRoots = trustsAppleRoots
        self.fetchesRevocation = fetchesRevocation
        self.summary = summary
    }

    /// Every policy tlsaudit knows, in the order the CLI, the configuration, the API and docs list
    /// them. A new policy is one line here (and its judge's in TLSAuditCore's `CompliancePolicy.judges`).
    public static let registered: [CompliancePolicy] = [.ats, .atsRuntime, .appleTrust, .mozillaModern, .mozillaIntermediate, .mozillaOld]

    /// The policy when none is named: what a current iPhone or Mac does (`ats-runtime`). A server
    /// that only passes Apple's documented list is not compliant by default; `ats` judges that list.
    public static let `default`: CompliancePolicy = .atsRuntime

    /// The registered policy of this name; nil for a name this tlsaudit does not know.
    public init?(rawValue: String) {
        guard let policy = Self.registered.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = policy
    }

    public static var allCases: [CompliancePolicy] { registered }

    public var description: String { rawValue }

    // A policy is its name: two values of one name are one policy.
    public static func == (lhs: CompliancePolicy, rhs: CompliancePolicy) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    // Encoded as its name, as the enum it was (stored data and JSON documents read the same).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let name = try container.decode(String.self)
        guard let policy = CompliancePolicy(rawValue: name) else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: decoder.codingPath, debugDescription: "Cannot initialize CompliancePolicy from invalid String value \(name)"))
        }
        self = policy
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
