public import Foundation

/// Where a certificate of the verified path came from.
public enum CertificateSource: String, Codable, Sendable {
    /// Sent by the server (or given in the chain file).
    case presented
    /// Taken from the trust store (system store or `--ca-file`).
    case trustStore = "trust-store"
    /// Fetched from the caIssuers URL in the AIA of the certificate below it (`aia_fetch`), as
    /// Apple's clients do for a server that does not send its intermediate.
    case aiaFetched = "aia-fetched"
}

/// One certificate of the path as built, leaf first.
public struct PathElement: Hashable, Codable, Sendable {
    public var certificate: CertificateSummary
    public var source: CertificateSource
    /// Index in the presented chain when the server sent this certificate.
    public var presentedIndex: Int?

    public init(certificate: CertificateSummary, source: CertificateSource, presentedIndex: Int?) {
        self.certificate = certificate
        self.source = source
        self.presentedIndex = presentedIndex
    }
}

/// A problem the path builder (OpenSSL's X509_verify_cert) reported, already classified.
public struct PathBuildingIssue: Hashable, Codable, Sendable {
    public enum Kind: String, Codable, Sendable {
        /// A self-signed leaf that is not a trust anchor.
        case selfSignedLeaf
        /// The path ends in a self-signed certificate that is not a trust anchor.
        case untrustedRoot
        /// The issuer of the certificate at `depth` was neither sent nor trusted.
        case missingIssuer
        case badSignature
        case issuerNotCA
        case pathLengthExceeded
        case nameConstraintViolation
        case unknownCriticalExtension
        case keyUsage
        /// RFC 5280 certificate policy processing failed (an explicit policy is required and none is valid).
        case policy
        /// Anything else OpenSSL reports, with its code.
        case other
        /// Not OpenSSL's: the search for another path stopped at a bound (`code` 0), so a valid
        /// path may exist that was not tried.
        case searchLimit
    }

    public var kind: Kind
    public var depth: Int
    /// OpenSSL's X509_V_ERR_* code.
    public var code: Int
    /// OpenSSL's description of the code.
    public var detail: String

    public init(kind: Kind, depth: Int, code: Int, detail: String) {
        self.kind = kind
        self.depth = depth
        self.code = code
        self.detail = detail
    }
}

/// What path building against the anchors gave: the path (possibly partial) and the problems met.
public struct PathBuildingResult: Hashable, Codable, Sendable {
    /// Leaf first. When building failed this is the longest partial path found.
    public var path: [PathElement]
    /// True when the path ends in a trust anchor and OpenSSL found no signature or structure error.
    public var anchored: Bool
    public var issues: [PathBuildingIssue]
    /// Set by the pinned-anchor builder (AFNetworking's certificate mode): whether the pinned
    /// certificate the path reaches is one of Apple's roots, whose rules trustd then applies to the
    /// leaf (serverAuth itself, 398 days); nil elsewhere.
    public var anchorIsPublic: Bool?

    public init(path: [PathElement], anchored: Bool, issues: [PathBuildingIssue]) {
        self.path = path
        self.anchored = anchored
        self.issues = issues
    }

    /// The certificates the server should have sent: intermediates of a trusted path that were
    /// fetched from caIssuers URLs (a fetched root, or a path that reaches no anchor, is no fix).
    public var fetchedIntermediatesToSend: [PathElement] {
        anchored ? path.filter { $0.source == .aiaFetched && !$0.certificate.isSelfSigned } : []
    }

    /// This result with every path certificate's `daysLeft` set for `date` (a built path is shared
    /// across scans and carries none).
    public func judged(at date: Date) -> PathBuildingResult {
        var copy = self
        for index in copy.path.indices {
            copy.path[index].certificate = copy.path[index].certificate.judged(at: date)
        }
        return copy
    }
}

/// Every path built from one presented chain, OpenSSL's own choice first (last when it loops
/// through a subject and key twice, as the search's paths never do). Which one counts depends
/// on the moment it is judged at (a cross-sign may have expired since), so the choice is made there.
public struct PathCandidates: Hashable, Sendable {
    /// Never empty.
    public var candidates: [PathBuildingResult]
    /// The search stopped at a bound before trying every candidate issuer.
    public var searchLimitReached: Bool

    public init(_ candidates: [PathBuildingResult], searchLimitReached: Bool = false) {
        self.candidates = candidates.isEmpty ? [PathBuildingResult(path: [], anchored: false, issues: [])] : candidates
        self.searchLimitReached = searchLimitReached
    }

    /// The path a client that backtracks would use at `date`: the first with the fewest problems
    /// (`problems(at:)`), with `daysLeft` set for `date`. Where every path fails, the one that fails least.
    public func judged(at date: Date) -> PathBuildingResult {
        var best = candidates[0]
        var fewest = best.problems(at: date)
        for candidate in candidates.dropFirst() where fewest > 0 {
            let problems = candidate.problems(at: date)
            if problems < fewest { (best, fewest) = (candidate, problems) }
        }
        if searchLimitReached {
            best.issues.append(PathBuildingIssue(kind: .searchLimit, depth: 0, code: 0,
                                                 detail: "the search for a trusted path stopped at its bound"))
        }
        return best.judged(at: date)
    }
}

extension PathBuildingResult {
    /// How far this path is from valid at `date`, for choosing among candidates as trustd does
    /// (it keeps looking when a path fails a policy check): not anchored outweighs everything; then
    /// each path-building issue, certificate out of its validity period and certificate failing one
    /// of Apple's certificate rules (`CertificateRules.failures`); last, intermediates restricted
    /// without serverAuth (`CertificateRules.intermediateUsageFailures`), which fail only under
    /// Apple's root store.
    func problems(at date: Date) -> Int {
        let certificates = path.map(\.certificate)
        let outOfDate = certificates.count { date < $0.notBefore || date > $0.notAfter }
        let failures = issues.count + outOfDate + CertificateRules.failures(path: certificates, anchored: anchored)
        return (anchored ? 0 : 1_000_000) + 1_000 * failures + CertificateRules.intermediateUsageFailures(path: certificates, anchored: anchored)
    }
}
