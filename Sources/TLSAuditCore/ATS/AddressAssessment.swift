public import Foundation

/// Turns what was observed at one address into findings and a verdict. Pure: the same
/// observation judged at the same time always gives the same answer, so stored
/// observations can be judged again later.
public enum AddressAssessment {
    /// Findings for a completed handshake, most severe first, and the ATS verdict.
    public static func assess(observation: HandshakeObservation, presented: [CertificateSummary],
                              building: PathBuildingResult, revocation: RevocationReport? = nil, context: TrustContext,
                              policy: CompliancePolicy, atsClientRefusal: String?,
                              evidence: ConfigurationEvidence? = nil,
                              checkFindings: [Finding] = []) -> (findings: [Finding], verdict: PolicyVerdict) {
        var trust = trustFindings(presented: presented, building: building, revocation: revocation, context: context,
                                  clientFetchesRevocation: policy.fetchesRevocation)
        if let finding = certificateTransparency(observation, leaf: presented.first, anchored: building.anchored, context: context) {
            trust.append(finding)
        }
        var findings = policy.evaluate(observation: observation, presented: presented, building: building,
                                       trustFindings: trust, atsClientRefusal: atsClientRefusal,
                                       evidence: evidence ?? .none)
        findings += evidence?.vulnerabilities?.findings ?? []
        findings += checkFindings
        findings += trust
        findings += handshakeFindings(observation)
        findings += lints(presented: presented, building: building)
        let sorted = sort(findings)
        return (sorted, policy.verdict(from: sorted))
    }

    /// Findings for a chain seen without a completed handshake (e.g. before the server asked
    /// for a client certificate). The verdict is never compliant: the scan did not complete.
    public static func assessChainOnly(presented: [CertificateSummary], building: PathBuildingResult,
                                       revocation: RevocationReport? = nil, context: TrustContext) -> [Finding] {
        guard !presented.isEmpty else { return [] }
        return sort(trustFindings(presented: presented, building: building, revocation: revocation, context: context)
            + lints(presented: presented, building: building))
    }

    /// The trust findings of a chain: the path's (`TrustEvaluator`) and its revocation status's
    /// (`clientFetchesRevocation`: see `RevocationReport.findings(names:clientFetches:)`).
    public static func trustFindings(presented: [CertificateSummary], building: PathBuildingResult,
                                     revocation: RevocationReport?, context: TrustContext,
                                     clientFetchesRevocation: Bool = true) -> [Finding] {
        let names = building.path.isEmpty ? presented.map(\.displayName) : building.path.map(\.certificate.displayName)
        return TrustEvaluator.evaluate(presented: presented, building: building, context: context)
            + (revocation?.findings(names: names, clientFetches: clientFetchesRevocation) ?? [])
    }

    /// Conformance lints of the path as built (else the chain as presented): the same in `scan` and `verify`.
    public static func lints(presented: [CertificateSummary], building: PathBuildingResult) -> [Finding] {
        ConformanceLints.findings(path: building.path.isEmpty ? presented : building.path.map(\.certificate))
    }

    /// Judges a stored result again, under `policy` at `time`, from its raw observations
    /// (handshake, chain as presented, path as built, path-building issues): no rescan.
    /// The name checked is the one the scan sent (`sni`, else `host`).
    public static func rejudge(_ result: AddressScanResult, hostname: String, policy: CompliancePolicy,
                               at time: Date) -> (findings: [Finding], verdict: PolicyVerdict) {
        // Public-trust rules (CT, certificate lifetime) follow the anchor, as in a scan; results stored
        // without it follow the store (a public store's anchors are public).
        let context = TrustContext(hostname: hostname, time: time, publicTrust: result.chain?.judgedAsPublic ?? false)
        let presented = result.chain?.presented ?? []
        let building = result.chain?.building ?? PathBuildingResult(path: [], anchored: false, issues: [])
        var (findings, verdict) = result.handshake.flatMap { handshake in
            result.error == nil ? assess(observation: handshake, presented: presented, building: building,
                                         revocation: result.chain?.revocation, context: context,
                                         policy: policy, atsClientRefusal: result.atsClientRefusal,
                                         evidence: ConfigurationEvidence(enumeration: result.enumeration, inventory: result.inventory,
                                                                         vulnerabilities: result.vulnerabilities),
                                         checkFindings: CheckReport.findings(of: result.checkReports)) : nil
        } ?? (assessChainOnly(presented: presented, building: building, revocation: result.chain?.revocation, context: context),
              notScanned(policy))
        // A target judged by an app's rules: as that app's client found it when scanned.
        if let app = result.app, result.handshake != nil, result.error == nil {
            (findings, verdict, _) = applying(app, to: findings, policy: policy)
        }
        // Reports judge history again: the same per-scan budget as the scan itself.
        var chain = result.chain
        RecordBudget.bound(chain: &chain, findings: &findings)
        return (findings, verdict)
    }

    /// The verdict of an address that could not be scanned.
    public static func notScanned(_ policy: CompliancePolicy) -> PolicyVerdict {
        PolicyVerdict(policy: policy, compliant: false, rules: [:], failedRules: [])
    }

    /// Apple's Certificate Transparency policy for publicly trusted chains, from the SCTs verified
    /// with the scan (`AppleCTPolicy`): the finding says which requirement failed.
    static func certificateTransparency(_ observation: HandshakeObservation, leaf: CertificateSummary?, anchored: Bool,
                                        context: TrustContext) -> Finding? {
        if let report = observation.certificateTransparency {
            return transparencyFinding(report.policy)
        }
        // Results stored before SCTs were verified: their counts, by the rule of the time (a chain
        // that anchors nowhere gets its trust finding and no CT finding on top).
        guard anchored, context.publicTrust, let leaf, let scts = observation.signedCertificateTimestamps else { return nil }
        let lifetime = leaf.notAfter.timeIntervalSince(leaf.notBefore) / 86_400
        let embeddedNeeded = lifetime <= 180 ? 2 : 3
        if scts.embedded >= embeddedNeeded { return nil }
        if scts.total >= 2, scts.tlsExtension + scts.ocsp >= 1 { return nil }
        return Finding(.trustCertificateTransparency, .error, depth: 0,
            "Not enough signed certificate timestamps for Apple's CT policy: \(scts.embedded) embedded, \(scts.tlsExtension) via TLS, \(scts.ocsp) via OCSP (needs \(embeddedNeeded) embedded, or 2 with one via TLS or OCSP).")
    }

    /// The finding for Apple's CT policy as judged: an error when it is not met; a warning when it
    /// is met only by counting SCTs from logs newer than the log list, whose signatures could not
    /// be checked (`AppleCTPolicy.countingLogsNewerThanList`): not a silent pass.
    static func transparencyFinding(_ policy: CertificateTransparencyReport.Policy) -> Finding? {
        guard policy.required else { return nil }
        if !policy.satisfied {
            return Finding(.trustCertificateTransparency, .error, "Apple's Certificate Transparency policy is not met: \(policy.reason).")
        }
        guard policy.listOutdated == true else { return nil }
        return Finding(.trustCertificateTransparency, .warning,
            "Apple's Certificate Transparency policy is only \(policy.reason). Those SCTs' signatures could not be checked: a device whose log list has no such log refuses the chain.")
    }

    /// Whether Apple's CT policy applies to a chain: anchored in a public root store, and issued
    /// since Apple requires CT; otherwise why not.
    public static func ctApplicability(leaf: CertificateSummary, building: PathBuildingResult, publicTrust: Bool) -> AppleCTPolicy.Applicability {
        if !building.anchored { return .notRequired("the chain is not trusted (its trust finding says why), so CT is not evaluated for it") }
        if !publicTrust { return .notRequired("the chain anchors in the operator's own anchors, not a public root store: Apple's CT policy covers publicly trusted certificates only") }
        if leaf.notBefore < AppleCTPolicy.enforcedFrom { return .notRequired("the certificate was issued before 2018-10-16, when Apple began to require CT") }
        return .required
    }

    /// The CT report of a chain judged at `time`: every SCT's status, and the policy's answer.
    public static func certificateTransparencyReport(_ scts: [SignedCertificateTimestamp], leaf: CertificateSummary,
                                                     building: PathBuildingResult, publicTrust: Bool, logs: CTLogList,
                                                     at time: Date) -> CertificateTransparencyReport {
        AppleCTPolicy.evaluate(scts, leaf: leaf, logs: logs, at: time,
                               applicability: ctApplicability(leaf: leaf, building: building, publicTrust: publicTrust))
    }

    static func handshakeFindings(_ observation: HandshakeObservation) -> [Finding] {
        var findings: [Finding] = []
        if let key = observation.keyExchange.ephemeralKey, key.type == "DH", key.bits < 2048 {
            findings.append(Finding(.tlsWeakDH, .warning,
                "The server's ephemeral Diffie-Hellman group has \(key.bits) bits; below 2048 it is within reach of precomputation (Logjam)."))
        }
        if observation.clientCertificateRequested {
            findings.append(Finding(.tlsClientCertificateRequested, .info,
                "The server asks for a client certificate (mutual TLS)."))
        }
        return findings
    }

    /// Most severe first, then by depth and id, so output is stable.
    public static func sort(_ findings: [Finding]) -> [Finding] { findings.mostSevereFirst() }
}
