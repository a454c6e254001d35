/// Apple's policies (docs/apple-rules.md); judged by TLSAuditCore's `AppleATSJudge`.
extension CompliancePolicy {
    /// Apple's App Transport Security as documented (docs/apple-rules.md section 1): TLS 1.2+, a
    /// forward-secret suite from Apple's documented list, SHA-2 signatures and RSA >= 2048 /
    /// ECC >= 256 keys on the leaf and issuing CAs, and a trusted chain with a matching name.
    public static let ats = CompliancePolicy(name: "ats", summary: "Apple's documented suite list alone", rules: atsRules, clientProfile: .ats,
        isAppTransportSecurity: true, fetchesRevocation: false)

    /// ATS with the suites current Apple clients actually offer (no CBC-SHA256/SHA384, plus
    /// CHACHA20): a server whose only TLS 1.2 suite is ECDHE-RSA-AES128-SHA256 passes `ats` but fails here.
    public static let atsRuntime = CompliancePolicy(
        name: "ats-runtime", summary: "the default: what current iOS and macOS clients offer and accept", rules: atsRules, clientProfile: .atsRuntime,
        isAppTransportSecurity: true, fetchesRevocation: false)

    /// Apple's trust rules for all TLS since iOS 13 (an app with ATS exceptions still meets
    /// them): SHA-2 signatures, RSA >= 2048, a trusted chain with the name in a SAN.
    public static let appleTrust = CompliancePolicy(
        name: "apple-trust", summary: "the certificate rules only; the default for STARTTLS targets", rules: [.atsSignatureHash, .atsKeySize, .atsTrust],
        fetchesRevocation: false)

    private static let atsRules: [FindingID] = [.atsTLSVersion, .atsForwardSecrecy, .atsCipherSuite, .atsSignatureHash, .atsKeySize, .atsTrust, .atsHandshake]
}
