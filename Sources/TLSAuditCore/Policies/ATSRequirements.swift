/// What ATS requires beyond the rule list: Apple's suite lists and the certificate checks every
/// policy shares (the policies themselves are `CompliancePolicy`).
public enum ATSRequirements {
    /// Apple's documented forward-secret TLS 1.2 suites (IANA names).
    public static let documentedTLS12Suites: Set<String> = [
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    ]

    /// The TLS 1.2 suites current Apple clients offer (Security source, about iOS 18.4).
    public static let runtimeTLS12Suites: Set<String> = [
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    ]

    /// The rules that need only the chain: signature hashes and key sizes of the leaf and issuing
    /// CAs (the anchor exempt), and trust. What `verify` judges offline. With `underATS` false (the
    /// `apple-trust` policy: trustd's rules for all TLS), a digest only ATS refuses (SHA-224) is a warning.
    public static func evaluateChain(presented: [CertificateSummary], building: PathBuildingResult,
                                     trustFindings: [Finding], underATS: Bool = true) -> [Finding] {
        var findings: [Finding] = []
        let judged = certificatesToJudge(presented: presented, building: building)
        for (depth, certificate) in judged {
            checkSignatureHash(certificate, depth: depth, underATS: underATS, into: &findings)
            checkKeySize(certificate, depth: depth, into: &findings)
        }
        // The anchor's own signature is not relied on, but its key signs what is below it: a weak
        // anchor key fails too, from the system store or a ca_file alike.
        if building.anchored, building.path.count > 1, let anchor = building.path.last {
            checkKeySize(anchor.certificate, depth: building.path.count - 1, into: &findings, role: "The trust anchor")
        }
        let trustErrors = trustFindings.filter { $0.severity == .error }
        if !trustErrors.isEmpty {
            let ids = Set(trustErrors.map(\.id.rawValue)).sorted().joined(separator: ", ")
            findings.append(Finding(.atsTrust, .error, "The chain is not trusted: \(ids)."))
        }
        return findings
    }

    /// The leaf and every issuing CA; the trust anchor's signature is exempt (it is not relied on),
    /// its key is not (see `evaluateChain`).
    static func certificatesToJudge(presented: [CertificateSummary], building: PathBuildingResult) -> [(Int, CertificateSummary)] {
        let certificates = building.path.isEmpty ? presented : building.path.map(\.certificate)
        return CertificateRules.signatureJudged(path: certificates, anchored: building.anchored).map { ($0, certificates[$0]) }
    }

    static func checkSignatureHash(_ certificate: CertificateSummary, depth: Int, underATS: Bool = true, into findings: inout [Finding]) {
        guard CertificateRules.hasWeakSignature(certificate) else { return }
        let role = depth == 0 ? "The leaf" : "The CA certificate"
        if !underATS, !CertificateRules.hasWeakSignature(certificate, underATS: false) {
            findings.appendUnique(Finding(.atsSignatureHash, .warning, depth: depth,
                "\(role) \(certificate.displayName) is signed with \(certificate.signatureAlgorithm): Apple's trust rules for all TLS take it (SHA-2), but ATS requires SHA-256 or stronger, so an app connects only where ATS is off for the host (NSAllowsArbitraryLoads)."))
            return
        }
        findings.appendUnique(Finding(.atsSignatureHash, .error, depth: depth,
            "\(role) \(certificate.displayName) is signed with \(certificate.signatureAlgorithm); \(CertificateRules.weakHashReason(certificate.signatureHash, underATS: underATS))."))
    }

    static func checkKeySize(_ certificate: CertificateSummary, depth: Int, into findings: inout [Finding], role: String? = nil) {
        guard let problem = CertificateRules.keyProblem(certificate) else { return }
        let role = role ?? (depth == 0 ? "The leaf" : "The CA certificate")
        findings.appendUnique(Finding(.atsKeySize, .error, depth: depth, "\(role) \(certificate.displayName) has \(problem)."))
    }
}
