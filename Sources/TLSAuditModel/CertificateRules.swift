public import Foundation

/// Apple's rules that need one certificate of a path and nothing else: one definition, read by the
/// judge (`ATSRequirements.evaluateChain`, `TrustEvaluator` in TLSAuditCore) and by the choice among
/// candidate paths (`PathCandidates.judged(at:)`), so that the path chosen is the one the judge passes.
public enum CertificateRules {
    /// Signature digests ATS accepts ("SHA-256 or stronger"), as certificate summaries write them:
    /// SHA-2 of 256 bits or more. SHA-3 (`SHA3256`, ...) fails: Apple's Security framework has no
    /// SecKeyAlgorithm for it, so trustd cannot verify such a signature (nor may a public CA make one).
    public static let acceptedHashes: Set<String> = ["SHA256", "SHA384", "SHA512"]

    /// The digests trustd takes on every TLS server certificate, ATS or not: SHA-2 (its SSL policy
    /// refuses MD2, MD4, MD5 and SHA-1, `SecPolicyRemoveWeakHashOptions`; SHA-3 it cannot verify).
    /// SHA-224 passes here and fails ATS's "SHA-256 or stronger" (`acceptedHashes`).
    public static let trustAcceptedHashes: Set<String> = acceptedHashes.union(["SHA224"])

    /// Why `hash` (a summary's `signatureHash`) fails, for a message: "ATS requires SHA-256 or stronger",
    /// what is wrong with a SHA-3 digest, which is not weaker, or (`underATS` false) trustd's own rule.
    public static func weakHashReason(_ hash: String?, underATS: Bool = true) -> String {
        if let hash, hash.hasPrefix("SHA3") {
            return "Apple's clients verify certificate signatures made with SHA-2 only (SHA-256, SHA-384, SHA-512), not SHA-3"
        }
        if underATS { return "ATS requires SHA-256 or stronger" }
        return "Apple's clients refuse certificate signatures made with MD2, MD4, MD5 or SHA-1, or with a digest they cannot verify, for all TLS, with or without ATS"
    }

    /// The certificate is signed with a digest ATS refuses (SHA-1, MD5, SHA-224, unknown), or with
    /// `underATS` false, one trustd refuses on any TLS connection (SHA-224 passes). Ed25519 and Ed448
    /// carry no separate digest and are not weak.
    public static func hasWeakSignature(_ certificate: CertificateSummary, underATS: Bool = true) -> Bool {
        if certificate.signatureHash == nil, certificate.signatureAlgorithm.uppercased().hasPrefix("ED") { return false }
        guard let hash = certificate.signatureHash else { return true }
        return !(underATS ? acceptedHashes : trustAcceptedHashes).contains(hash)
    }

    /// The certificate's signature fails ATS's digest rule but not trustd's (SHA-224): an app that
    /// turns ATS off for the host (NSAllowsArbitraryLoads) connects.
    public static func hasATSOnlyWeakSignature(_ certificate: CertificateSummary) -> Bool {
        hasWeakSignature(certificate) && !hasWeakSignature(certificate, underATS: false)
    }

    /// The curves (OpenSSL's names and aliases) of the ECC keys Apple's clients take: the NIST curves
    /// SecKey knows and the TLS groups they offer. Any other curve fails at any size.
    public static let acceptedCurves: Set<String> = ["prime256v1", "secp256r1", "P-256", "secp384r1", "P-384", "secp521r1", "P-521"]

    /// What is wrong with the certificate's key under ATS (RSA at least 2048 bits, ECDSA at least
    /// 256 on P-256, P-384 or P-521, no other type), as a phrase for a message; nil when the key is
    /// accepted. Apple's Security framework makes keys of rsaEncryption and of the three NIST curves
    /// only (`SecKeyCreatePublicFromDER`, `SecECNamedCurve`), so an RSA-PSS key (id-RSASSA-PSS) fails
    /// wherever it is (a leaf's could sign a handshake only with rsa_pss_pss schemes, which Apple's
    /// clients do not offer), and so do EdDSA keys (Ed25519, Ed448), for which they offer no scheme either.
    public static func keyProblem(_ certificate: CertificateSummary) -> String? {
        let key = certificate.publicKey
        if key.isRSAPSS {
            return "an RSA-PSS key (id-RSASSA-PSS); Apple's clients take RSA keys encoded as rsaEncryption only, and offer no rsa_pss_pss signature scheme in TLS"
        }
        if key.isRSA {
            return key.bits < 2048 ? "an RSA key of \(key.bits) bits; ATS requires at least 2048" : nil
        }
        if key.isEC {
            if key.bits < 256 { return "an ECC key of \(key.bits) bits; ATS requires at least 256" }
            guard let curve = key.curve else {
                return "an ECC key on no named curve; Apple's clients take P-256, P-384 and P-521 keys only"
            }
            return acceptedCurves.contains(curve) ? nil : "an ECC key on \(curve); Apple's clients take P-256, P-384 and P-521 keys only"
        }
        if key.isEdDSA {
            return "an \(key.type) key; Apple's clients offer no EdDSA signature in TLS, and ATS accepts RSA (2048+) and ECDSA (256+) keys only"
        }
        return "a \(key.type) key; ATS accepts RSA (2048+) and ECC (256+) keys only"
    }

    /// trustd's extendedKeyUsage check of every TLS server leaf (Security's `set_ssl_ekus`): no
    /// extendedKeyUsage at all, or one holding serverAuth, anyExtendedKeyUsage or a Server Gated
    /// Crypto usage (Microsoft's or Netscape's).
    public static func leafUsageAllowsServer(_ leaf: CertificateSummary) -> Bool {
        guard let usages = leaf.extendedKeyUsage else { return true }
        return usages.contains { ["serverAuth", "anyExtendedKeyUsage", "msSGC", "nsSGC"].contains($0) }
    }

    /// trustd's stricter check (`SecPolicyCheckServerAuthEKU`): the leaf's extendedKeyUsage holds
    /// serverAuth itself (anyExtendedKeyUsage or no extendedKeyUsage is not enough). Enforced on
    /// every chain to Apple's root store, and on chains to an app's own anchors
    /// (`SecTrustSetAnchorCertificates`) for leaves issued after 2019-07-01; a root installed by a
    /// configuration profile is exempt.
    public static func hasServerAuth(_ certificate: CertificateSummary) -> Bool {
        certificate.extendedKeyUsage?.contains("serverAuth") == true
    }

    /// Whether trustd asks a leaf issued at `notBefore` for serverAuth itself (`hasServerAuth`):
    /// always under Apple's root store, after `july2019` under an operator's own anchors.
    public static func requiresServerAuth(notBefore: Date, publicTrust: Bool) -> Bool {
        publicTrust || notBefore > july2019
    }

    /// An intermediate with a non-empty extendedKeyUsage that trustd refuses for a TLS server path.
    /// Under any anchor it must hold anyExtendedKeyUsage or one of the SSL policy's usages
    /// (serverAuth, Microsoft's or Netscape's Server Gated Crypto: `SecPolicyCheckExtendedKeyUsage`'s
    /// sub-CA loop); under Apple's root store serverAuth or anyExtendedKeyUsage itself
    /// (`SecPolicyCheckServerAuthEKU`).
    public static func intermediateUsageExcludesServer(_ certificate: CertificateSummary, publicTrust: Bool = true) -> Bool {
        guard let usages = certificate.extendedKeyUsage, !usages.isEmpty else { return false }
        if publicTrust { return !usages.contains("serverAuth") && !usages.contains("anyExtendedKeyUsage") }
        return !leafUsageAllowsServer(certificate)
    }

    /// The longest validity (notAfter - notBefore, in seconds) Apple accepts for a TLS server leaf
    /// issued at `notBefore` (trustd's `SecPolicyCheckValidityPeriodMaximums`), or nil when none
    /// applies. Under Apple's root store: 60 months before 2016-07-01, 39 months before 2018-03-01,
    /// 825 days before 2020-09-01 (each with an hour's slip), then 398 days (no slip). Under an
    /// operator's own anchors: 825 days and an hour for leaves issued after 2019-07-01.
    public static func maximumValidity(notBefore: Date, publicTrust: Bool) -> (seconds: TimeInterval, rule: String)? {
        let day: TimeInterval = 86_400
        let hour: TimeInterval = 3_600
        guard publicTrust else {
            return notBefore > july2019 ? (825 * day + hour, "825 days (and an hour) for certificates issued after 2019-07-01") : nil
        }
        if notBefore < Date(timeIntervalSince1970: 1_467_331_200) { // 2016-07-01
            return (Double(365 * 5 + 2) * day + hour, "60 months for publicly trusted certificates issued before 2016-07-01")
        }
        if notBefore < Date(timeIntervalSince1970: 1_519_862_400) { // 2018-03-01
            return (Double(365 * 3 + 2 * 31 + 30 + 1) * day + hour, "39 months for publicly trusted certificates issued before 2018-03-01")
        }
        if notBefore < Date(timeIntervalSince1970: 1_598_918_400) { // 2020-09-01
            return (825 * day + hour, "825 days (and an hour) for publicly trusted certificates issued before 2020-09-01")
        }
        return (398 * day, "398 days for publicly trusted certificates issued since 2020-09-01")
    }

    /// The moment after which Apple's rules for leaves under an operator's own anchors apply:
    /// trustd's `jul2019`, 583628400 seconds after 2001-01-01, commented "1 July 2019 00:00:00 UTC"
    /// but in fact 2019-06-30T23:00:00Z; the value is what devices compare with.
    public static let july2019 = Date(timeIntervalSince1970: 1_561_935_600)

    /// Apple's non-empty-subject check (trustd's `SecPolicyCheckCertNonEmptySubject`, part of the SSL
    /// policy), on every certificate of the path: a CA with an empty subject fails; any other
    /// certificate with an empty subject needs a critical subjectAltName. Nil when it passes.
    public static func emptySubjectProblem(_ certificate: CertificateSummary) -> String? {
        guard let profile = certificate.profile, profile.emptySubject else { return nil }
        if certificate.isCA { return "a CA certificate with an empty subject" }
        if !profile.criticalExtensions.contains("subjectAltName") {
            return "an empty subject and a subjectAltName that is not critical (or none)"
        }
        return nil
    }

    /// The positions of `path` whose signature and key ATS judges: the leaf and every issuing CA. The
    /// last certificate is exempt when the path is anchored or ends self-signed (its signature is
    /// not relied on); its key is judged apart (`anchorKeyJudged`).
    public static func signatureJudged(path: [CertificateSummary], anchored: Bool) -> Range<Int> {
        guard path.count > 1, let last = path.last, last.isSelfSigned || anchored else { return path.indices }
        return 0..<(path.count - 1)
    }

    /// Whether `path[depth]` may issue the certificate below it as far as basicConstraints go, as
    /// trustd decides (`SecPVCParentCertificateChecks`, anchors included): a v3 certificate needs
    /// cA TRUE; a v1 or v2 one, which has no extensions to say so, may be the path's last
    /// certificate (the anchor), and an intermediate only when that anchor is v1 or v2 as well.
    public static func actsAsCA(path: [CertificateSummary], depth: Int) -> Bool {
        let certificate = path[depth]
        guard certificate.version < 3 else { return certificate.isCA }
        return depth == path.count - 1 || path[path.count - 1].version < 3
    }

    /// The positions of `path` whose extendedKeyUsage is enforced: all but a trust anchor's own
    /// (it is trusted by configuration).
    public static func extendedKeyUsageJudged(path: [CertificateSummary], anchored: Bool) -> Range<Int> {
        anchored && path.count > 1 ? 0..<(path.count - 1) : path.indices
    }

    /// How many intermediates of `path` restrict their extendedKeyUsage without serverAuth or
    /// anyExtendedKeyUsage (Apple's root store's rule; the Server Gated Crypto usages pass only
    /// under own anchors): path choice ranks it after the rules `failures` counts.
    public static func intermediateUsageFailures(path: [CertificateSummary], anchored: Bool) -> Int {
        extendedKeyUsageJudged(path: path, anchored: anchored).count { $0 > 0 && intermediateUsageExcludesServer(path[$0]) }
    }

    /// How many of Apple's certificate rules `path` fails, beyond what path building reports: each
    /// certificate with a weak signature, a weak key or an empty subject trustd refuses counts one,
    /// and a leaf whose extendedKeyUsage allows no server (`leafUsageAllowsServer`).
    public static func failures(path: [CertificateSummary], anchored: Bool) -> Int {
        guard !path.isEmpty else { return 0 }
        let judged = signatureJudged(path: path, anchored: anchored)
        var count = judged.count { hasWeakSignature(path[$0]) }
        count += path.indices.count { (judged.contains($0) || anchored) && keyProblem(path[$0]) != nil }
        count += leafUsageAllowsServer(path[0]) ? 0 : 1
        count += extendedKeyUsageJudged(path: path, anchored: anchored).count { $0 > 0 && intermediateUsageExcludesServer(path[$0], publicTrust: false) }
        count += path.count { emptySubjectProblem($0) != nil }
        return count
    }
}
