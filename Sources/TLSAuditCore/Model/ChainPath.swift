public import Foundation

/// Where a certificate of the verified path came from.
public enum CertificateSource: String, Codable, Sendable {
    /// Sent by the server (or given in the chain file).
    case presented
    /// Taken from the trust store (system store or `--ca-file`).
    case trustStore = "trust-store"
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

    public init(path: [PathElement], anchored: Bool, issues: [PathBuildingIssue]) {
        self.path = path
        self.anchored = anchored
        self.issues = issues
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
