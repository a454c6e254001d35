public import Foundation
import TLSAuditSupport

/// What trust evaluation needs to know besides the path.
public struct TrustContext: Sendable {
    /// The name the client asked for (SNI or the target host); `nil` skips the name check.
    public var hostname: String?
    /// The moment the chain is judged at.
    public var time: Date
    /// The anchors are the public web PKI (the system store), where Apple's 398-day limit and
    /// Certificate Transparency apply; false for an operator's own CA.
    public var publicTrust: Bool
    /// The chain comes from files (`verify`), not from a server: messages speak of the input.
    public var fromFiles: Bool
    /// Date-bounded distrust: the table and vendor in force, and the leaf's SCT times (for vendors
    /// that date a certificate by its earliest SCT). Nil: not checked.
    public var distrust: DistrustCheck?

    public init(hostname: String?, time: Date, publicTrust: Bool = false, fromFiles: Bool = false) {
        self.hostname = hostname
        self.time = time
        self.publicTrust = publicTrust
        self.fromFiles = fromFiles
    }
}

/// tlsaudit's own chain checks on top of OpenSSL's path building. OpenSSL alone accepts
/// too much (CN fallback, partial wildcards, missing serverAuth, exclusive notAfter), so
/// every rule Apple and RFC 5280 apply is checked here again on the built path.
public enum TrustEvaluator {
    /// All trust findings for a presented chain and the path built from it.
    public static func evaluate(presented: [CertificateSummary], building: PathBuildingResult,
                                context: TrustContext) -> [Finding] {
        var findings: [Finding] = []
        let path = building.path.map(\.certificate)
        guard let leaf = path.first ?? presented.first else {
            findings.append(Finding(.trustNoCertificate, .error, "The server sent no certificate."))
            return findings
        }

        // DNS and IP name constraints are checked here, on SANs only; OpenSSL's verdict on them is
        // kept only where a CA also constrains other name types (directory names, e-mail).
        let onlyTLSNameConstraints = path.allSatisfy { !($0.nameConstraints?.otherTypes ?? false) }
        for issue in building.issues where !(issue.kind == .nameConstraintViolation && onlyTLSNameConstraints) {
            findings.appendUnique(finding(for: issue, path: path, fromFiles: context.fromFiles))
        }
        checkNameConstraints(path, into: &findings)
        checkAppleRefusals(path.isEmpty ? [leaf] : path, into: &findings)
        checkDates(path, at: context.time, into: &findings)
        if building.anchored, let check = context.distrust, let distrusted = DateBoundedDistrust.finding(path: path, check: check) {
            findings.append(distrusted)
        }
        checkIssuers(path, into: &findings)
        checkSubjects(path, into: &findings)
        checkExtendedKeyUsage(path, anchored: building.anchored, publicTrust: context.publicTrust, into: &findings)
        if let hostname = context.hostname {
            checkHostname(hostname, leaf: leaf, into: &findings)
        }
        for (depth, certificate) in path.enumerated() where !certificate.unhandledCriticalExtensions.isEmpty {
            findings.appendUnique(Finding(.trustUnknownCriticalExtension, .error, depth: depth,
                "\(certificate.displayName) has critical extensions no client understands: \(RecordBudget.list(certificate.unhandledCriticalExtensions))."))
        }
        checkAppleLeafRules(leaf, publicTrust: context.publicTrust, leafIsAnchor: building.anchored && path.count == 1, into: &findings)
        if !building.anchored, !findings.contains(where: { $0.severity == .error }) {
            findings.append(Finding(.trustInvalid, .error, depth: 0, "The chain could not be verified to a trust anchor."))
        }
        checkPresentation(presented: presented, building: building, into: &findings)
        return findings
    }

    /// Apple's rules for TLS server leaves (trustd's `SecPolicyCheckServerAuthEKU` and
    /// `SecPolicyCheckValidityPeriodMaximums`, iOS 13 and later). Under Apple's root store the leaf
    /// holds serverAuth itself and is valid at most 398 days (825, 39 or 60 months when issued
    /// earlier). Under an operator's own anchors the verdict is that of an app that sets them with
    /// `SecTrustSetAnchorCertificates` (as AFNetworking's pinning does): serverAuth and at most 825
    /// days for leaves issued after 2019-07-01; the message says when a root installed by a
    /// configuration profile (MDM) is exempt, as trustd exempts it.
    static func checkAppleLeafRules(_ leaf: CertificateSummary, publicTrust: Bool, leafIsAnchor: Bool, into findings: inout [Finding]) {
        if CertificateRules.requiresServerAuth(notBefore: leaf.notBefore, publicTrust: publicTrust), !CertificateRules.hasServerAuth(leaf) {
            let usages = leaf.extendedKeyUsage.map { $0.isEmpty ? "an empty extendedKeyUsage" : "extendedKeyUsage \(RecordBudget.list($0))" } ?? "no extendedKeyUsage"
            let rule = publicTrust
                ? "Apple requires serverAuth itself in the leaf of a chain to its root store (anyExtendedKeyUsage is not enough)."
                : "Apple requires serverAuth itself in certificates issued after 2019-07-01 under an app's own anchors (SecTrustSetAnchorCertificates, as certificate pinning does). A device that trusts the root through a configuration profile (MDM) does not require it."
            findings.appendUnique(Finding(.trustEKU, .error, depth: 0, "\(leaf.displayName) has \(usages); \(rule)"))
        }
        guard let maximum = CertificateRules.maximumValidity(notBefore: leaf.notBefore, publicTrust: publicTrust) else { return }
        let validity = leaf.notAfter.timeIntervalSince(leaf.notBefore)
        guard validity > maximum.seconds else { return }
        let exemption = !publicTrust && leafIsAnchor
            ? " A device that trusts this certificate itself through a configuration profile (MDM) does not apply the limit." : ""
        findings.appendUnique(Finding(.trustLifetime, .error, depth: 0,
            "\(leaf.displayName) is valid for \(Self.duration(validity)); Apple accepts at most \(maximum.rule).\(exemption)"))
    }

    /// A validity period as days, and the hours and minutes past the last whole day.
    static func duration(_ seconds: TimeInterval) -> String {
        let total = Int(seconds.rounded(.down))
        let days = total / 86_400
        let minutes = (total % 86_400) / 60
        let rest = minutes == 0 ? "" : minutes % 60 == 0 ? " \(minutes / 60) h" : " \(minutes / 60) h \(minutes % 60) min"
        return "\(days) days\(rest)"
    }

    static func finding(for issue: PathBuildingIssue, path: [CertificateSummary], fromFiles: Bool = false) -> Finding {
        let name = issue.depth < path.count ? path[issue.depth].displayName : "certificate at depth \(issue.depth)"
        switch issue.kind {
        case .selfSignedLeaf:
            return Finding(.trustSelfSigned, .error, depth: issue.depth,
                           "\(name) is self-signed and is not a trusted anchor.")
        case .untrustedRoot:
            return Finding(.trustUntrustedRoot, .error, depth: issue.depth,
                           "The chain ends in \(name), a root that is not trusted.")
        case .missingIssuer where issue.depth == 0:
            let issuer = path.first?.issuer ?? "its issuer"
            return Finding(.trustIncompleteChain, .error, depth: 0, fromFiles
                ? "The issuer of \(name) (\(issuer)) is not among the certificates given and is not a trusted anchor: add the intermediate certificate to the input (or --roots), or the issuer is unknown."
                : "The issuer of \(name) (\(issuer)) was not sent and is not a trusted anchor: the server does not send its intermediate certificate, or the issuer is unknown.")
        case .missingIssuer:
            let issuer = issue.depth < path.count ? path[issue.depth].issuer : "its issuer"
            return Finding(.trustUntrustedRoot, .error, depth: issue.depth,
                           "The chain ends at \(name), whose issuer (\(issuer)) is not a trusted root.")
        case .badSignature:
            return Finding(.trustBadSignature, .error, depth: issue.depth,
                           "The signature on \(name) does not verify with its issuer's key.")
        case .issuerNotCA where issue.depth < path.count && path[issue.depth].isCA:
            // OpenSSL's X509_V_ERR_INVALID_CA for a CA whose keyUsage lacks keyCertSign.
            return keyUsageWithoutCertSign(depth: issue.depth, name: name)
        case .issuerNotCA:
            return issue.depth < path.count ? issuerNotCA(path: path, depth: issue.depth)
                : Finding(.trustIssuerNotCA, .error, depth: issue.depth, "\(name) issued the certificate below it but is not a CA.")
        case .pathLengthExceeded:
            return Finding(.trustPathLengthExceeded, .error, depth: issue.depth,
                           "\(name) has a pathLenConstraint that the certificates below it exceed.")
        case .nameConstraintViolation:
            return Finding(.trustNameConstraints, .error, depth: issue.depth,
                           "A name in the chain violates a CA's name constraints: \(issue.detail).")
        case .unknownCriticalExtension:
            let unknown = issue.depth < path.count ? path[issue.depth].unhandledCriticalExtensions : []
            return Finding(.trustUnknownCriticalExtension, .error, depth: issue.depth, unknown.isEmpty
                ? "\(name) has a critical extension no client understands."
                : "\(name) has critical extensions no client understands: \(RecordBudget.list(unknown)).")
        case .keyUsage:
            return keyUsageWithoutCertSign(depth: issue.depth, name: name)
        case .policy:
            return Finding(.trustPolicy, .error, depth: issue.depth,
                           "Certificate policy processing fails: \(issue.detail).")
        case .searchLimit:
            return Finding(.trustPathSearchLimit, .warning,
                           "Path building stopped at its bound (\(issue.detail)): the chain offers more candidate issuers than a client tries, and a valid path may exist that was not tried.")
        case .other where issue.code == 1 && path.contains(where: { $0.nameConstraints != nil }):
            // OpenSSL's X509_V_ERR_UNSPECIFIED from name-constraint checking: more than 2^20 name and subtree pairs.
            return Finding(.trustInvalid, .error, depth: issue.depth,
                           "OpenSSL refuses to check \(name)'s names against this many name constraints (verify error 1); clients built on it refuse the chain.")
        case .other:
            return Finding(.trustInvalid, .error, depth: issue.depth,
                           "\(name): \(issue.detail) (OpenSSL verify error \(issue.code)).")
        }
    }

    private static func issuerNotCA(path: [CertificateSummary], depth: Int) -> Finding {
        let certificate = path[depth]
        let why = certificate.version >= 3 ? "basicConstraints cA is not TRUE"
            : "an X.509 v\(certificate.version) certificate as an intermediate under a v3 anchor; trustd accepts a v1 or v2 CA only as the anchor or under a v1 or v2 one"
        return Finding(.trustIssuerNotCA, .error, depth: depth, "\(certificate.displayName) issued the certificate below it but is not a CA (\(why)).")
    }

    private static func keyUsageWithoutCertSign(depth: Int, name: String) -> Finding {
        Finding(.trustKeyUsage, .error, depth: depth, "\(name) may not sign certificates (keyUsage lacks keyCertSign).")
    }

    /// Certificates Apple's clients refuse whatever the chain (`CertificateProfile.appleRefusals`):
    /// trustd cannot parse them, or they hold an extension twice or one that does not decode.
    static func checkAppleRefusals(_ path: [CertificateSummary], into findings: inout [Finding]) {
        for (depth, certificate) in path.enumerated() {
            guard let refusals = certificate.profile?.appleRefusals, !refusals.isEmpty else { continue }
            findings.appendUnique(Finding(.trustInvalid, .error, depth: depth,
                "\(certificate.displayName) is refused by Apple's clients: \(RecordBudget.list(refusals, limit: 3, separator: "; "))."))
        }
    }

    /// notBefore <= now <= notAfter for every certificate of the path (notAfter inclusive, RFC 5280).
    static func checkDates(_ path: [CertificateSummary], at time: Date, into findings: inout [Finding]) {
        for (depth, certificate) in path.enumerated() {
            if let unreadable = certificate.profile?.unreadableValidity, !unreadable.isEmpty {
                // No client can tell when such a certificate is valid: it never is.
                findings.appendUnique(Finding(.trustInvalid, .error, depth: depth,
                    "\(certificate.displayName) has a validity time that cannot be read (\(RecordBudget.list(unreadable, limit: 2))): no client accepts it."))
                continue
            }
            if time < certificate.notBefore {
                findings.appendUnique(Finding(.trustNotYetValid, .error, depth: depth,
                    "\(certificate.displayName) is not valid before \(Timestamp.format(certificate.notBefore))."))
            }
            if time > certificate.notAfter {
                findings.appendUnique(Finding(.trustExpired, .error, depth: depth,
                    "\(certificate.displayName) expired on \(Timestamp.format(certificate.notAfter)) (\(-certificate.daysLeft(at: time)) days ago)."))
            }
        }
    }

    /// Every issuer is a CA that may sign certificates, and pathLen constraints hold.
    static func checkIssuers(_ path: [CertificateSummary], into findings: inout [Finding]) {
        for depth in path.indices.dropFirst() {
            let issuer = path[depth]
            if !CertificateRules.actsAsCA(path: path, depth: depth) {
                findings.appendUnique(issuerNotCA(path: path, depth: depth))
            }
            if let usage = issuer.keyUsage, !usage.contains("keyCertSign") {
                findings.appendUnique(keyUsageWithoutCertSign(depth: depth, name: issuer.displayName))
            }
            if let limit = issuer.basicConstraints?.pathLength {
                // Intermediate CAs between this CA and the leaf, self-issued ones excepted.
                let following = path[1..<depth].filter { $0.subject != $0.issuer }.count
                if following > limit {
                    findings.appendUnique(Finding(.trustPathLengthExceeded, .error, depth: depth,
                        "\(issuer.displayName) allows \(limit) intermediate CA(s) below it (pathLenConstraint) but \(following) follow."))
                }
            }
        }
    }

    /// Apple's non-empty-subject rule on every certificate of the path (`CertificateRules.emptySubjectProblem`).
    static func checkSubjects(_ path: [CertificateSummary], into findings: inout [Finding]) {
        for (depth, certificate) in path.enumerated() {
            guard let problem = CertificateRules.emptySubjectProblem(certificate) else { continue }
            findings.appendUnique(Finding(.trustEmptySubject, .error, depth: depth,
                "\(certificate.displayName) has \(problem); Apple's SSL policy refuses it (RFC 5280 4.1.2.6, 4.2.1.6)."))
        }
    }

    /// Every CA's name constraints against the SANs of every certificate below it.
    static func checkNameConstraints(_ path: [CertificateSummary], into findings: inout [Finding]) {
        for (caDepth, ca) in path.enumerated() {
            guard let constraints = ca.nameConstraints else { continue }
            let checker = NameConstraintChecker(constraints)
            // RFC 5280 6.1.4: a self-issued intermediate (subject = issuer) below the CA is not checked.
            for depth in 0..<caDepth where depth == 0 || path[depth].subject != path[depth].issuer {
                let violations = checker.violations(in: path[depth])
                guard !violations.isEmpty else { continue }
                findings.appendUnique(Finding(.trustNameConstraints, .error, depth: depth,
                    "\(path[depth].displayName) violates the name constraints of \(ca.displayName): \(checker.describe(violations))."))
            }
        }
    }

    /// trustd's extendedKeyUsage checks beside the leaf rules: the leaf's extendedKeyUsage, when it
    /// has one, allows a TLS server (`CertificateRules.leafUsageAllowsServer`); an intermediate that
    /// restricts its usage keeps one that allows it, under any anchor (`SecPolicyCheckExtendedKeyUsage`),
    /// and under Apple's root store serverAuth or anyExtendedKeyUsage itself. A trust anchor's own
    /// is not judged.
    static func checkExtendedKeyUsage(_ path: [CertificateSummary], anchored: Bool, publicTrust: Bool, into findings: inout [Finding]) {
        for depth in CertificateRules.extendedKeyUsageJudged(path: path, anchored: anchored) {
            let certificate = path[depth]
            let refused = depth == 0 ? !CertificateRules.leafUsageAllowsServer(certificate)
                : CertificateRules.intermediateUsageExcludesServer(certificate, publicTrust: publicTrust)
            guard refused else { continue }
            let usages = certificate.extendedKeyUsage ?? []
            let listed = usages.isEmpty ? "an empty list" : RecordBudget.list(usages)
            findings.appendUnique(Finding(.trustEKU, .error, depth: depth,
                "\(certificate.displayName) restricts extendedKeyUsage to \(listed), without serverAuth."))
        }
    }

    static func checkHostname(_ hostname: String, leaf: CertificateSummary, into findings: inout [Finding]) {
        let names = leaf.subjectAlternativeNames
        if names.dns.isEmpty && names.ip.isEmpty {
            var cn = leaf.commonName.map { " (the CN \"\($0)\" is not used for name matching)" } ?? ""
            if HostnameMatcher.namedOnlyByCommonName(host: hostname, leaf: leaf), let commonName = leaf.commonName {
                cn = " (the CN \"\(commonName)\" names \(hostname), but only iOS 12 and earlier match a name in the CN)"
            }
            findings.appendUnique(Finding(.trustHostnameMismatch, .error, depth: 0,
                "The leaf has no DNS or IP subjectAltName\(cn), so it matches no host name."))
            return
        }
        guard !HostnameMatcher.matches(host: hostname, names: names) else { return }
        // An IP address written as a DNS name: clients compare an address with iPAddress entries only.
        let isAddress = HostnameMatcher.appleAddressBytes(hostname) != nil
        var why = isAddress && names.dns.contains { $0.caseInsensitiveCompare(hostname) == .orderedSame }
            ? "; \(hostname) is there as a DNS name, and an address matches only an iPAddress entry (subjectAltName IP:\(hostname))" : ""
        if isAddress, let bad = names.ip.first(where: { IPAddress.canonical($0) == nil }) {
            why += "; the iPAddress entry \(RecordBudget.clamp(bad, to: 40)) is not 4 or 16 bytes, and trustd then reads no iPAddress entry at all"
        }
        if !isAddress, let notUTF8 = names.dns.first(where: { !HostnameMatcher.isUTF8($0) }) {
            why += "; the dNSName \(RecordBudget.clamp(notUTF8, to: 80)) is not UTF-8, and trustd then reads no DNS name at all"
        }
        if !isAddress, let numeric = names.dns.first(where: { !HostnameMatcher.rightmostLabelHasLetter($0) && HostnameMatcher.isValidDNSName($0) }) {
            why += "; \(RecordBudget.clamp(numeric, to: 80)) is no DNS name to trustd (its last label has no letter)"
        }
        findings.appendUnique(Finding(.trustHostnameMismatch, .error, depth: 0,
            "\(hostname) does not match the leaf's subjectAltNames (\(RecordBudget.list(names.dns + names.ip, limit: 10)))\(why)."))
    }

    /// How the server presents its chain: order, extras, a root sent along.
    static func checkPresentation(presented: [CertificateSummary], building: PathBuildingResult,
                                  into findings: inout [Finding]) {
        let pathFingerprints = building.path.map(\.certificate.sha256Fingerprint)
        let presentedInPath = presented.filter { pathFingerprints.contains($0.sha256Fingerprint) }.map(\.sha256Fingerprint)
        let expectedOrder = pathFingerprints.filter { presentedInPath.contains($0) }
        if presentedInPath != expectedOrder {
            findings.append(Finding(.chainOrder, .warning,
                "The server sends its chain out of order; some clients fail to build the path."))
        }
        let extras = presented.enumerated().filter { !pathFingerprints.contains($0.element.sha256Fingerprint) }
        if !extras.isEmpty, building.anchored {
            let names = RecordBudget.list(extras.map { "#\($0.offset) \($0.element.displayName)" })
            findings.append(Finding(.chainExtraCertificates, .info,
                "The server sends certificates that are not part of the path: \(names)."))
        }
        let toSend = building.fetchedIntermediatesToSend
        for (depth, element) in building.path.enumerated() where element.source == .aiaFetched {
            let advice = toSend.contains(element) ? "; send it with the leaf" : ""
            findings.append(Finding(.chainAIAFetched, .warning, depth: depth,
                "\(element.certificate.displayName) was not sent and was fetched from the caIssuers URL of the certificate below it: Apple's clients do the same, but Android, Firefox, curl and most other clients refuse the chain\(advice)."))
        }
        if building.anchored, presented.count > 1, let root = building.path.last,
           root.presentedIndex != nil, root.certificate.isSelfSigned {
            findings.append(Finding(.chainRootSent, .info, depth: building.path.count - 1,
                "The server sends the root certificate \(root.certificate.displayName); clients ignore it."))
        }
    }
}
