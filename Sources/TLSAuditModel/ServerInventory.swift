import Foundation
import TLSAuditSupport

/// One answer of the configuration inventory: yes, no, or not tested (with why), each with the
/// evidence in a sentence.
public struct InventoryAnswer: Hashable, Codable, Sendable {
    public enum Status: String, Codable, Sendable {
        case yes
        case no
        case notTested = "not-tested"
    }

    public var status: Status
    public var detail: String

    public init(_ status: Status, _ detail: String) {
        self.status = status
        self.detail = detail
    }

    public static func yes(_ detail: String) -> InventoryAnswer { InventoryAnswer(.yes, detail) }
    public static func no(_ detail: String) -> InventoryAnswer { InventoryAnswer(.no, detail) }
    public static func notTested(_ detail: String) -> InventoryAnswer { InventoryAnswer(.notTested, detail) }

    /// `no`, because the server speaks only TLS 1.3, where the item does not exist (`why` says so).
    public static func tls13Only(_ why: String) -> InventoryAnswer { InventoryAnswer(.no, tls13OnlyPrefix + why) }
    private static let tls13OnlyPrefix = "TLS 1.3 only: "
    /// A `no` that only means the item does not exist in TLS 1.3, not that the server lacks it.
    public var isTLS13Only: Bool { detail.hasPrefix(Self.tls13OnlyPrefix) }
}

/// The certificate a server sends to a client that names no server (no SNI).
public struct CertificateWithoutSNI: Hashable, Codable, Sendable {
    public var sha256Fingerprint: String
    public var subject: String
    /// The same leaf as with SNI.
    public var sameAsWithSNI: Bool

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips.
    enum CodingKeys: String, CodingKey {
        case sha256Fingerprint, subject, sameAsWithSNI = "sameAsWithSni"
    }

    public init(sha256Fingerprint: String, subject: String, sameAsWithSNI: Bool) {
        self.sha256Fingerprint = sha256Fingerprint
        self.subject = subject
        self.sameAsWithSNI = sameAsWithSNI
    }
}

/// How a server is configured beyond its chain and suites (`checks: [inventory]`), every item from
/// real handshakes: renegotiation, compression, downgrade protection, resumption, early data,
/// stapling, ALPN, key-exchange groups (post-quantum hybrids included), signature algorithms, and
/// the certificate sent without SNI.
public struct ServerInventory: Hashable, Codable, Sendable {
    /// RFC 5746 renegotiation_info in a TLS 1.2-or-lower ServerHello.
    public var secureRenegotiation: InventoryAnswer
    /// Whether the server completes a renegotiation the client starts (a DoS lever).
    public var clientRenegotiation: InventoryAnswer
    /// Whether the server picks DEFLATE when offered (CRIME).
    public var compression: InventoryAnswer
    /// RFC 7627 extended master secret in TLS 1.2 (nil in inventories stored before it was taken).
    public var extendedMasterSecret: InventoryAnswer?
    /// Whether a fallback connection (a version below the server's best, with TLS_FALLBACK_SCSV) is refused.
    public var fallbackSCSV: InventoryAnswer
    /// TLS 1.2 resumption by session ID (tickets off).
    public var resumptionSessionID: InventoryAnswer
    /// Resumption by session ticket (TLS 1.2 when spoken, else TLS 1.3).
    public var resumptionTicket: InventoryAnswer
    /// The ticket's lifetime hint, in seconds.
    public var ticketLifetimeSeconds: Int?
    /// TLS 1.3 0-RTT data accepted on resumption.
    public var earlyData: InventoryAnswer
    public var ocspStapling: InventoryAnswer
    /// The ALPN protocols accepted (of h2 and http/1.1), and the one chosen when both are offered.
    public var alpn: [String]
    public var alpnPreferred: String?
    /// Key-exchange groups the server accepts, in its order when it has one.
    public var groups: [String]
    /// `server` (it keeps its preference whatever the client's order) or `client`; nil when fewer than two groups.
    public var groupOrder: String?
    /// Post-quantum hybrid groups accepted (found with hand-built TLS 1.3 ClientHellos).
    public var postQuantumGroups: [String]
    /// Signature algorithms the server signs its handshake with when they are all the client offers.
    public var signatureAlgorithms: [String]
    public var certificateWithoutSNI: CertificateWithoutSNI?
    /// Why the certificate without SNI is missing (the server refused the handshake, ...).
    public var withoutSNIDetail: String?
    /// Handshakes (and hand-built hellos) spent.
    public var handshakes: Int
    public var durationMs: Int

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips.
    enum CodingKeys: String, CodingKey {
        case secureRenegotiation, clientRenegotiation, compression, extendedMasterSecret, fallbackSCSV = "fallbackScsv"
        case resumptionSessionID = "resumptionSessionId", resumptionTicket, ticketLifetimeSeconds, earlyData, ocspStapling
        case alpn, alpnPreferred, groups, groupOrder, postQuantumGroups, signatureAlgorithms
        case certificateWithoutSNI = "certificateWithoutSni", withoutSNIDetail = "withoutSniDetail", handshakes, durationMs
    }

    /// An inventory whose every answer is `answer`, with no lists, nothing found, no handshake spent.
    public static func untested(_ answer: InventoryAnswer) -> ServerInventory {
        ServerInventory(secureRenegotiation: answer, clientRenegotiation: answer, compression: answer, extendedMasterSecret: answer, fallbackSCSV: answer,
                        resumptionSessionID: answer, resumptionTicket: answer, ticketLifetimeSeconds: nil, earlyData: answer,
                        ocspStapling: answer, alpn: [], alpnPreferred: nil, groups: [], groupOrder: nil, postQuantumGroups: [],
                        signatureAlgorithms: [], certificateWithoutSNI: nil, withoutSNIDetail: nil, handshakes: 0, durationMs: 0)
    }

    public init(secureRenegotiation: InventoryAnswer, clientRenegotiation: InventoryAnswer, compression: InventoryAnswer,
                extendedMasterSecret: InventoryAnswer?, fallbackSCSV: InventoryAnswer, resumptionSessionID: InventoryAnswer, resumptionTicket: InventoryAnswer,
                ticketLifetimeSeconds: Int?, earlyData: InventoryAnswer, ocspStapling: InventoryAnswer, alpn: [String],
                alpnPreferred: String?, groups: [String], groupOrder: String?, postQuantumGroups: [String],
                signatureAlgorithms: [String], certificateWithoutSNI: CertificateWithoutSNI?, withoutSNIDetail: String?,
                handshakes: Int, durationMs: Int) {
        self.secureRenegotiation = secureRenegotiation
        self.clientRenegotiation = clientRenegotiation
        self.compression = compression
        self.extendedMasterSecret = extendedMasterSecret
        self.fallbackSCSV = fallbackSCSV
        self.resumptionSessionID = resumptionSessionID
        self.resumptionTicket = resumptionTicket
        self.ticketLifetimeSeconds = ticketLifetimeSeconds
        self.earlyData = earlyData
        self.ocspStapling = ocspStapling
        self.alpn = alpn
        self.alpnPreferred = alpnPreferred
        self.groups = groups
        self.groupOrder = groupOrder
        self.postQuantumGroups = postQuantumGroups
        self.signatureAlgorithms = signatureAlgorithms
        self.certificateWithoutSNI = certificateWithoutSNI
        self.withoutSNIDetail = withoutSNIDetail
        self.handshakes = handshakes
        self.durationMs = durationMs
    }
}

/// A Strict-Transport-Security header, parsed (RFC 6797).
public struct HSTSPolicy: Hashable, Codable, Sendable {
    public var maxAge: Int
    public var includeSubDomains: Bool
    public var preload: Bool
    /// The header as sent (at most 512 bytes).
    public var header: String

    public init(maxAge: Int, includeSubDomains: Bool, preload: Bool, header: String) {
        self.maxAge = maxAge
        self.includeSubDomains = includeSubDomains
        self.preload = preload
        self.header = header
    }

    /// Parses the directives; nil without a valid max-age (the header is then ignored by browsers).
    public static func parse(_ header: String) -> HSTSPolicy? {
        var maxAge: Int?
        var includeSubDomains = false, preload = false
        for directive in header.split(separator: ";") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingWhitespace() }
            switch parts[0].lowercased() {
            case "max-age" where parts.count == 2:
                maxAge = Int(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
            case "includesubdomains": includeSubDomains = true
            case "preload": preload = true
            default: break
            }
        }
        return maxAge.map { HSTSPolicy(maxAge: $0, includeSubDomains: includeSubDomains, preload: preload, header: String(header.prefix(512))) }
    }
}

/// What one bounded GET over HTTPS and one over plain HTTP (port 80) showed (`checks: [headers]`).
public struct HTTPHeadersReport: Hashable, Codable, Sendable {
    /// The path asked for.
    public var path: String
    /// The HTTPS answer's status code; nil when there was no HTTP answer (with `detail` saying why).
    public var status: Int?
    public var hsts: HSTSPolicy?
    /// Why HSTS is missing or ignored (no header, a header without max-age), or where the answer failed.
    public var detail: String
    /// Port 80: whether it answered, and with a redirect to HTTPS.
    public var plainHTTP: InventoryAnswer
    /// The Location of port 80's redirect.
    public var plainHTTPLocation: String?

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips.
    enum CodingKeys: String, CodingKey {
        case path, status, hsts, detail, plainHTTP = "plainHttp", plainHTTPLocation = "plainHttpLocation"
    }

    public init(path: String, status: Int?, hsts: HSTSPolicy?, detail: String, plainHTTP: InventoryAnswer, plainHTTPLocation: String?) {
        self.path = path
        self.status = status
        self.hsts = hsts
        self.detail = detail
        self.plainHTTP = plainHTTP
        self.plainHTTPLocation = plainHTTPLocation
    }
}
