/// How a policy turns what was observed at an address into its rule findings. Each registered
/// policy has one, in `CompliancePolicy.judges` (the policy's names, rules and flags are its
/// definition in TLSAuditModel).
public protocol PolicyJudge: Sendable {
    /// The rule findings of `policy` for one completed handshake. `trustFindings` come from
    /// `TrustEvaluator`; `atsClientRefusal` is set when the policy's ClientHello was refused and a
    /// permissive one was used; `evidence` is what the opt-in checks found (for policies that
    /// `judgesWholeConfiguration`).
    func findings(under policy: CompliancePolicy, observation: HandshakeObservation, presented: [CertificateSummary],
                  building: PathBuildingResult, trustFindings: [Finding], atsClientRefusal: String?,
                  evidence: ConfigurationEvidence) -> [Finding]
}

/// The judging of each policy (what it checks is in TLSAuditModel).
extension CompliancePolicy {
    /// The judge of each registered policy: a new policy registers its judge here.
    static let judges: [CompliancePolicy: any PolicyJudge] = [
        .ats: AppleATSJudge.documented,
        .atsRuntime: AppleATSJudge.runtime,
        .appleTrust: AppleATSJudge.documented,
        .mozillaModern: MozillaProfile.modern,
        .mozillaIntermediate: MozillaProfile.intermediate,
        .mozillaOld: MozillaProfile.old,
    ]

    /// This policy's judge.
    public var judge: any PolicyJudge {
        guard let judge = Self.judges[self] else { preconditionFailure("policy \(rawValue) has no judge in CompliancePolicy.judges") }
        return judge
    }

    /// The policy a target is judged by when none is named: `default` for HTTPS; for a target
    /// reached with STARTTLS, `apple-trust`. The ATS policies are for an app's traffic, which a
    /// mail, directory or database service does not carry; Apple's trust rules still apply to it.
    public static func `default`(starttls: STARTTLSUse?) -> CompliancePolicy {
        starttls == nil ? .default : .appleTrust
    }

    /// Rule findings for one completed handshake, from the policy's judge (see `PolicyJudge`).
    public func evaluate(observation: HandshakeObservation, presented: [CertificateSummary],
                         building: PathBuildingResult, trustFindings: [Finding], atsClientRefusal: String?,
                         evidence: ConfigurationEvidence = .none) -> [Finding] {
        judge.findings(under: self, observation: observation, presented: presented, building: building,
                       trustFindings: trustFindings, atsClientRefusal: atsClientRefusal, evidence: evidence)
    }

    /// The verdict from all findings of an address.
    public func verdict(from findings: [Finding]) -> PolicyVerdict {
        var outcomes: [FindingID: RuleOutcome] = [:]
        var failed: [FindingID] = []
        for rule in rules {
            let fails = findings.contains { $0.id == rule && $0.severity == .error }
            outcomes[rule] = fails ? .fail : .pass
            if fails { failed.append(rule) }
        }
        return PolicyVerdict(policy: self, compliant: failed.isEmpty, rules: outcomes, failedRules: failed)
    }
}
