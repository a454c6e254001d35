public import Foundation

/// How revocation is checked: not at all, soft-fail (an answer that cannot be had is a warning,
/// as browsers and Apple's clients behave) or hard-fail (it is an error).
public enum RevocationMode: String, Codable, Sendable, CaseIterable {
    case off
    case soft
    case hard
}

/// What is known about one certificate of the path: its status and where it came from.
public struct RevocationCheck: Hashable, Codable, Sendable {
    public enum Status: String, Codable, Sendable {
        case good
        case revoked
        /// No definitive answer: see `detail`.
        case unknown
    }

    public enum Source: String, Codable, Sendable {
        /// The OCSP response the server stapled to the handshake.
        case stapledOCSP = "stapled-ocsp"
        /// An OCSP responder named in the certificate's AIA (or a response file given to `verify`).
        case ocsp
        /// A CRL from the certificate's distribution points (or a CRL file given to `verify`).
        case crl
        /// No source was available or none answered.
        case none
    }

    /// Position in the path (0 = leaf).
    public var depth: Int
    public var status: Status
    public var source: Source
    /// The responder or CRL URL the answer came from (a file path offline).
    public var url: String?
    /// RFC 5280 reason (`keyCompromise`, ...) when revoked and given.
    public var reason: String?
    public var revokedAt: Date?
    /// The answer's validity: thisUpdate and nextUpdate of the OCSP response or CRL.
    public var thisUpdate: Date?
    public var nextUpdate: Date?
    /// Why the status is unknown, or what was wrong with a source tried before the one that answered.
    public var detail: String?

    public init(depth: Int, status: Status, source: Source, url: String? = nil, reason: String? = nil, revokedAt: Date? = nil,
                thisUpdate: Date? = nil, nextUpdate: Date? = nil, detail: String? = nil) {
        self.depth = depth
        self.status = status
        self.source = source
        self.url = url
        self.reason = reason
        self.revokedAt = revokedAt
        self.thisUpdate = thisUpdate
        self.nextUpdate = nextUpdate
        self.detail = detail.map { RecordBudget.clamp($0) }
    }
}

/// The revocation facts of one chain, kept with the scan so that it can be judged again later.
public struct RevocationReport: Hashable, Codable, Sendable {
    public var mode: RevocationMode
    /// One per certificate of the path but the anchor, leaf first.
    public var checks: [RevocationCheck]
    /// The leaf carries the TLS feature extension with status_request (OCSP must-staple).
    public var mustStaple: Bool
    /// The server stapled an OCSP response (`nil` when there was no handshake: `verify`).
    public var stapled: Bool?

    public init(mode: RevocationMode, checks: [RevocationCheck], mustStaple: Bool, stapled: Bool?) {
        self.mode = mode
        self.checks = checks
        self.mustStaple = mustStaple
        self.stapled = stapled
    }

    /// The detail of a certificate that names no OCSP responder and no CRL distribution point.
    public static let noSource = "it names no OCSP responder and no CRL distribution point"
}
