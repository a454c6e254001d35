public import Foundation
import TLSAuditSupport

/// A TLS protocol version as negotiated on the wire.
public enum TLSVersion: String, Codable, Sendable, Comparable, CaseIterable {
    case ssl3 = "SSLv3"
    case tls1_0 = "TLSv1"
    case tls1_1 = "TLSv1.1"
    case tls1_2 = "TLSv1.2"
    case tls1_3 = "TLSv1.3"

    /// The version number carried on the wire (0x0303 for TLS 1.2).
    public var wireValue: UInt16 {
        switch self {
        case .ssl3: 0x0300
        case .tls1_0: 0x0301
        case .tls1_1: 0x0302
        case .tls1_2: 0x0303
        case .tls1_3: 0x0304
        }
    }

    /// The version's name (`TLSv1.2`) for a wire value, or the value (`0x7F1C`) when it is none of them.
    public static func name(wireValue: UInt16) -> String {
        TLSVersion(wireValue: Int(wireValue))?.rawValue ?? "0x" + wireValue.hex(width: 4, uppercase: true)
    }

    public init?(wireValue: Int) {
        guard let version = TLSVersion.allCases.first(where: { Int($0.wireValue) == wireValue }) else { return nil }
        self = version
    }

    /// `TLS 1.2`.
    public var displayName: String {
        switch self {
        case .ssl3: "SSL 3.0"
        case .tls1_0: "TLS 1.0"
        case .tls1_1: "TLS 1.1"
        case .tls1_2: "TLS 1.2"
        case .tls1_3: "TLS 1.3"
        }
    }

    public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.wireValue < rhs.wireValue }
}

/// The negotiated cipher suite.
public struct CipherSuiteDescription: Hashable, Codable, Sendable {
    /// IANA / RFC name, e.g. `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`.
    public var iana: String
    /// OpenSSL name, e.g. `ECDHE-RSA-AES128-GCM-SHA256`.
    public var openssl: String
    /// The two-byte suite code, e.g. `0xC02F`.
    public var code: String
    /// Key exchange named by the suite (`ECDHE`, `DHE`, `RSA`, `PSK`, `any` for TLS 1.3).
    public var keyExchange: String
    /// Authentication named by the suite (`RSA`, `ECDSA`, `any` for TLS 1.3).
    public var authentication: String
    public var isAEAD: Bool
    public var strengthBits: Int

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips (`is_aead`).
    enum CodingKeys: String, CodingKey {
        case iana, openssl, code, keyExchange, authentication, isAEAD = "isAead", strengthBits
    }

    public init(iana: String, openssl: String, code: String, keyExchange: String, authentication: String,
                isAEAD: Bool, strengthBits: Int) {
        self.iana = iana
        self.openssl = openssl
        self.code = code
        self.keyExchange = keyExchange
        self.authentication = authentication
        self.isAEAD = isAEAD
        self.strengthBits = strengthBits
    }
}

/// How the session keys were agreed, as read from the handshake itself.
public struct KeyExchangeDescription: Hashable, Codable, Sendable {
    /// Named group (`x25519`, `secp256r1`, `ffdhe2048`), when one was negotiated.
    public var group: String?
    /// The server's ephemeral key, when there was one (none for static RSA key exchange).
    public var ephemeralKey: PublicKeyDescription?
    /// True when an ephemeral key was used and the key exchange is not plain RSA or PSK.
    public var forwardSecrecy: Bool

    public init(group: String?, ephemeralKey: PublicKeyDescription?, forwardSecrecy: Bool) {
        self.group = group
        self.ephemeralKey = ephemeralKey
        self.forwardSecrecy = forwardSecrecy
    }
}

/// A stapled OCSP response (status_request), as received.
public struct OCSPStapling: Hashable, Codable, Sendable {
    /// OCSP response status: `successful`, `tryLater`, `unauthorized`, ...
    public var responseStatus: String
    /// The leaf's status in the first single response: `good`, `revoked`, `unknown`.
    public var certificateStatus: String?
    public var nextUpdate: Date?

    public init(responseStatus: String, certificateStatus: String?, nextUpdate: Date?) {
        self.responseStatus = responseStatus
        self.certificateStatus = certificateStatus
        self.nextUpdate = nextUpdate
    }
}

/// Signed certificate timestamps delivered, by channel.
public struct SCTCounts: Hashable, Codable, Sendable {
    /// Embedded in the leaf (precertificate SCT extension).
    public var embedded: Int
    /// In the TLS signed_certificate_timestamp extension.
    public var tlsExtension: Int
    /// In the stapled OCSP response.
    public var ocsp: Int

    public init(embedded: Int, tlsExtension: Int, ocsp: Int) {
        self.embedded = embedded
        self.tlsExtension = tlsExtension
        self.ocsp = ocsp
    }

    public var total: Int { embedded + tlsExtension + ocsp }
}

/// Which ClientHello produced an observation.
public enum ClientProfile: String, Codable, Sendable {
    /// TLS 1.2 and 1.3 with Apple's documented ATS suites and curves: what an iOS app offers.
    case ats
    /// TLS 1.2 and 1.3 with the suites current Apple clients actually offer.
    case atsRuntime = "ats-runtime"
    /// Every version and suite this libssl can offer, security level 0: used when the ATS
    /// ClientHello is refused, so that what the server does accept is still recorded.
    case permissive
}

/// What one completed handshake showed.
public struct HandshakeObservation: Hashable, Codable, Sendable {
    public var clientProfile: ClientProfile
    public var protocolVersion: TLSVersion
    public var cipher: CipherSuiteDescription
    public var keyExchange: KeyExchangeDescription
    /// The algorithm the server used to sign the key exchange (e.g. `rsa_pss_rsae_sha256`), when known.
    public var serverSignatureHash: String?
    /// The server sent a CertificateRequest.
    public var clientCertificateRequested: Bool
    /// The stapled OCSP response, when the server sent one.
    public var stapledOCSP: OCSPStapling?
    /// SCTs by channel (nil when not read).
    public var signedCertificateTimestamps: SCTCounts?
    /// Every SCT for the leaf, its log and status, and Apple's CT policy's answer, as judged with the
    /// scan (absent in results stored before SCTs were verified).
    public var certificateTransparency: CertificateTransparencyReport?

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips (`stapled_ocsp`).
    enum CodingKeys: String, CodingKey {
        case clientProfile, protocolVersion, cipher, keyExchange, serverSignatureHash, clientCertificateRequested
        case stapledOCSP = "stapledOcsp", signedCertificateTimestamps, certificateTransparency
    }

    public init(clientProfile: ClientProfile, protocolVersion: TLSVersion, cipher: CipherSuiteDescription,
                keyExchange: KeyExchangeDescription, serverSignatureHash: String?,
                clientCertificateRequested: Bool) {
        self.clientProfile = clientProfile
        self.protocolVersion = protocolVersion
        self.cipher = cipher
        self.keyExchange = keyExchange
        self.serverSignatureHash = serverSignatureHash
        self.clientCertificateRequested = clientCertificateRequested
    }
}

/// Why an address could not be scanned. The raw values are stable and documented.
public enum ProbeFailureCategory: String, Codable, Sendable, CaseIterable {
    case dnsFailure = "dns-failure"
    case connectionRefused = "connection-refused"
    case connectTimeout = "connect-timeout"
    case networkUnreachable = "network-unreachable"
    case handshakeTimeout = "handshake-timeout"
    /// STARTTLS: the server does not offer the upgrade (not in its capabilities, or the command unknown).
    case starttlsNotOffered = "starttls-not-offered"
    /// STARTTLS: the server refused the upgrade or the session (its reply code quoted).
    case starttlsRefused = "starttls-refused"
    /// STARTTLS: the server answered with something else than the protocol (HTTP, TLS from the
    /// first byte, another protocol, a reply over the size limits).
    case starttlsUnexpectedReply = "starttls-unexpected-reply"
    /// STARTTLS: the server stalled in the plaintext dialogue (a tarpit, or silent).
    case starttlsTimeout = "starttls-timeout"
    case notTLS = "not-tls"
    case closedDuringHandshake = "closed-during-handshake"
    case tlsAlert = "tls-alert"
    case clientCertificateRequired = "client-certificate-required"
    /// The client presented its certificate and the server refused it (an alert after its CertificateRequest).
    case clientCertificateRejected = "client-certificate-rejected"
    case handshakeFailed = "handshake-failed"
    case internalError = "internal-error"

    /// A plain phrase for humans.
    public var phrase: String {
        switch self {
        case .dnsFailure: "DNS failure"
        case .connectionRefused: "connection refused"
        case .connectTimeout: "connect timeout"
        case .networkUnreachable: "network unreachable"
        case .handshakeTimeout: "handshake timeout"
        case .starttlsNotOffered: "STARTTLS not offered"
        case .starttlsRefused: "STARTTLS refused"
        case .starttlsUnexpectedReply: "unexpected reply before STARTTLS"
        case .starttlsTimeout: "STARTTLS dialogue timeout"
        case .notTLS: "not TLS"
        case .closedDuringHandshake: "closed during handshake"
        case .tlsAlert: "TLS alert from the server"
        case .clientCertificateRequired: "client certificate required"
        case .clientCertificateRejected: "client certificate rejected"
        case .handshakeFailed: "handshake failed"
        case .internalError: "internal error"
        }
    }
}

/// A scan that could not observe a handshake, with what was seen before it failed.
public struct ProbeFailure: Error, Hashable, Codable, Sendable, CustomStringConvertible {
    public var category: ProbeFailureCategory
    /// One plain sentence.
    public var message: String
    /// The TLS alert the server sent, by its RFC name (`handshake_failure`), when there was one.
    public var alert: String?

    public init(_ category: ProbeFailureCategory, _ message: String, alert: String? = nil) {
        self.category = category
        self.message = message
        self.alert = alert
    }

    public var description: String { "\(category.phrase): \(message)" }
}
