/// The judge of Apple's policies (`ats`, `ats-runtime`, `apple-trust`): the ATS rules on the
/// handshake and chain, kept to the rules the policy names (`apple-trust` names the chain's only).
public struct AppleATSJudge: PolicyJudge {
    /// The TLS 1.2 suites accepted (IANA names); TLS 1.3 suites always pass.
    let tls12Suites: Set<String>
    /// The `ats.handshake` finding when the policy's ClientHello was refused (the reason given).
    let refusedHello: @Sendable (_ reason: String) -> String
    /// The `ats.cipher-suite` finding for a forward-secret TLS 1.2 suite not in `tls12Suites`.
    let unlistedSuite: @Sendable (_ suite: String) -> String

    /// Apple's documented list (`ats`, `apple-trust`).
    public static let documented = AppleATSJudge(
        tls12Suites: ATSRequirements.documentedTLS12Suites,
        refusedHello: { "The server refused a ClientHello like an iOS app's (TLS 1.2-1.3, Apple's documented ATS suites, the groups and signature algorithms Apple clients offer): \($0). The values below come from a permissive client." },
        unlistedSuite: { "\($0) is forward secret but not on Apple's documented ATS suite list." })

    /// What current Apple clients offer (`ats-runtime`).
    public static let runtime = AppleATSJudge(
        tls12Suites: ATSRequirements.runtimeTLS12Suites,
        refusedHello: { "Current Apple clients cannot connect: the server refused a ClientHello like theirs (TLS 1.2-1.3 with the suites, groups and signature algorithms iOS and macOS offer today): \($0). The values below come from a permissive client." },
        unlistedSuite: { suite in
            ATSRequirements.documentedTLS12Suites.contains(suite)
                ? "\(suite) is on Apple's documented ATS list, but current iOS and macOS clients no longer offer it: they cannot connect (the `ats` policy, the documented list alone, passes it)."
                : "\(suite) is forward secret but not among the suites current iOS and macOS clients offer: they cannot connect."
        })

    public func findings(under policy: CompliancePolicy, observation: HandshakeObservation, presented: [CertificateSummary],
                         building: PathBuildingResult, trustFindings: [Finding], atsClientRefusal: String?,
                         evidence: ConfigurationEvidence) -> [Finding] {
        var findings: [Finding] = []
        if let refusal = atsClientRefusal {
            findings.append(Finding(.atsHandshake, .error, refusedHello(refusal)))
        }
        if observation.protocolVersion < .tls1_2 {
            findings.append(Finding(.atsTLSVersion, .error,
                "Negotiated \(observation.protocolVersion.displayName); ATS requires TLS 1.2 or later."))
        }
        if !observation.keyExchange.forwardSecrecy {
            findings.append(Finding(.atsForwardSecrecy, .error,
                "No forward secrecy: \(observation.cipher.iana) uses the server's static \(observation.cipher.keyExchange) key, with no ephemeral key exchange."))
        } else if observation.protocolVersion != .tls1_3, !tls12Suites.contains(observation.cipher.iana) {
            findings.append(Finding(.atsCipherSuite, .error, unlistedSuite(observation.cipher.iana)))
        }
        findings += ATSRequirements.evaluateChain(presented: presented, building: building, trustFindings: trustFindings,
                                                  underATS: policy.isAppTransportSecurity)
        let applicable = Set(policy.rules)
        return findings.filter { applicable.contains($0.id) }
    }
}
