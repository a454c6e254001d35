public import Foundation
public import TLSAuditSupport

/// A public key as found in a certificate or a key exchange.
public struct PublicKeyDescription: Hashable, Codable, Sendable {
    /// `RSA`, `EC`, `Ed25519`, `Ed448`, `DSA`, `X25519`, `DH`, ...
    public var type: String
    /// Key size in bits (for EC: the curve's order size, e.g. 256 for P-256).
    public var bits: Int
    /// Curve or group name for EC and finite-field keys (`prime256v1`, `secp384r1`, ...).
    public var curve: String?

    public init(type: String, bits: Int, curve: String? = nil) {
        self.type = type
        self.bits = bits
        self.curve = curve
    }

    public var isRSA: Bool { type == "RSA" || isRSAPSS }
    /// An RSASSA-PSS key (SPKI id-RSASSA-PSS), which signs with RSA-PSS only.
    public var isRSAPSS: Bool { type == "RSA-PSS" }
    public var isEC: Bool { type == "EC" }
    /// Ed25519 or Ed448.
    public var isEdDSA: Bool { type.uppercased().hasPrefix("ED") }

    /// `RSA 2048`, `EC 256 (prime256v1)`.
    public var summary: String {
        if let curve { return "\(type) \(bits) (\(curve))" }
        return "\(type) \(bits)"
    }
}

/// The basicConstraints extension.
public struct BasicConstraints: Hashable, Codable, Sendable {
    public var isCA: Bool
    /// pathLenConstraint; `nil` when absent (unlimited).
    public var pathLength: Int?
    public var critical: Bool

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips (`is_ca`).
    enum CodingKeys: String, CodingKey {
        case isCA = "isCa", pathLength, critical
    }

    public init(isCA: Bool, pathLength: Int?, critical: Bool) {
        self.isCA = isCA
        self.pathLength = pathLength
        self.critical = critical
    }
}

/// The subjectAltName entries tlsaudit uses.
public struct SubjectAlternativeNames: Hashable, Codable, Sendable {
    public var dns: [String] = []
    /// Textual IPv4 / IPv6 addresses.
    public var ip: [String] = []
    public var email: [String] = []
    public var uri: [String] = []
    /// Entries of other kinds (directoryName, otherName, ...), counted, not interpreted.
    public var other: Int = 0

    public init(dns: [String] = [], ip: [String] = [], email: [String] = [], uri: [String] = [], other: Int = 0) {
        self.dns = dns
        self.ip = ip
        self.email = email
        self.uri = uri
        self.other = other
    }

    public var isEmpty: Bool { dns.isEmpty && ip.isEmpty && email.isEmpty && uri.isEmpty && other == 0 }
}

/// What the RFC 5280 profile asks of a certificate's extensions, as read from it.
public struct CertificateProfile: Hashable, Codable, Sendable {
    /// authorityKeyIdentifier present, and with a keyIdentifier.
    public var authorityKeyIdentifier: Bool
    public var authorityKeyIdentifierHasKeyID: Bool
    public var subjectKeyIdentifier: Bool
    /// Short names (or dotted OIDs) of the extensions marked critical.
    public var criticalExtensions: [String]
    /// Short names (or dotted OIDs) of every extension present.
    public var extensions: [String]
    /// authorityInfoAccess entries whose location is not a URI, as `method: location type`.
    public var malformedAccessDescriptions: [String]
    /// The subject is an empty name.
    public var emptySubject: Bool
    /// notBefore or notAfter encoded as X.680 allows but DER or RFC 5280 does not (`notAfter: ...`).
    public var validityEncoding: [String]?
    /// notBefore or notAfter that is no time at all (`notBefore: ...`): such a certificate is never valid.
    public var unreadableValidity: [String]?
    /// Why Apple's clients refuse the certificate itself, whatever the chain: what trustd cannot
    /// parse (Security's `SecCertificateParse`: a validity form, a serial over 37 octets, an explicit
    /// version other than v2 or v3, an empty extensions field, a critical flag not encoded 0xFF, a
    /// critical extension it cannot decode) or its `DuplicateExtension` and `UnparseableExtension`
    /// checks; nil when none.
    public var appleRefusals: [String]?
    /// The authorityKeyIdentifier's fields besides keyIdentifier that are present
    /// (`authorityCertIssuer`, `authorityCertSerialNumber`); nil when not read.
    public var authorityKeyIdentifierExtras: [String]?
    /// Whether the authorityKeyIdentifier's keyIdentifier equals the subjectKeyIdentifier; nil when
    /// either is absent or not read (for a self-signed certificate they must be equal, BR 7.1.2.1.3).
    public var authorityKeyIDMatchesSubjectKeyID: Bool?

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips.
    enum CodingKeys: String, CodingKey {
        case authorityKeyIdentifier, authorityKeyIdentifierHasKeyID = "authorityKeyIdentifierHasKeyId", subjectKeyIdentifier
        case criticalExtensions, extensions, malformedAccessDescriptions, emptySubject, validityEncoding, unreadableValidity, appleRefusals
        case authorityKeyIdentifierExtras, authorityKeyIDMatchesSubjectKeyID = "authorityKeyIdMatchesSubjectKeyId"
    }

    public init(authorityKeyIdentifier: Bool, authorityKeyIdentifierHasKeyID: Bool, subjectKeyIdentifier: Bool,
                criticalExtensions: [String], extensions: [String], malformedAccessDescriptions: [String], emptySubject: Bool) {
        self.authorityKeyIdentifier = authorityKeyIdentifier
        self.authorityKeyIdentifierHasKeyID = authorityKeyIdentifierHasKeyID
        self.subjectKeyIdentifier = subjectKeyIdentifier
        self.criticalExtensions = criticalExtensions
        self.extensions = extensions
        self.malformedAccessDescriptions = malformedAccessDescriptions
        self.emptySubject = emptySubject
    }
}

/// The nameConstraints extension, as far as TLS names go (DNS and IP subtrees).
public struct NameConstraints: Hashable, Codable, Sendable {
    public var permittedDNS: [String] = []
    public var excludedDNS: [String] = []
    /// CIDR text, `10.0.0.0/8`, `2001:db8::/32`.
    public var permittedIP: [String] = []
    public var excludedIP: [String] = []
    /// Subtrees of other name types (directoryName, rfc822Name, URI): left to OpenSSL.
    public var otherTypes: Bool = false

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips (`permitted_dns`).
    enum CodingKeys: String, CodingKey {
        case permittedDNS = "permittedDns", excludedDNS = "excludedDns", permittedIP = "permittedIp", excludedIP = "excludedIp"
        case otherTypes
    }

    public init(permittedDNS: [String] = [], excludedDNS: [String] = [], permittedIP: [String] = [],
                excludedIP: [String] = [], otherTypes: Bool = false) {
        self.permittedDNS = permittedDNS
        self.excludedDNS = excludedDNS
        self.permittedIP = permittedIP
        self.excludedIP = excludedIP
        self.otherTypes = otherTypes
    }
}

/// Distinguished names as `CertificateSummary` writes them (RFC 2253: `CN=a,O=b`).
public enum DistinguishedName {
    /// The first value of `name` in a distinguished name written `CN=a, O=b` (RFC 4514 escapes kept as written).
    public static func attribute(_ name: String, of distinguishedName: String) -> String? {
        var parts: [String] = []
        var current = ""
        var escaped = false
        for character in distinguishedName {
            if escaped { current.append(character); escaped = false; continue }
            if character == "\\" { escaped = true; current.append(character); continue }
            if character == "," { parts.append(current); current = ""; continue }
            current.append(character)
        }
        parts.append(current)
        for part in parts {
            let trimmed = part.trimmingWhitespace()
            if trimmed.uppercased().hasPrefix(name + "=") { return String(trimmed.dropFirst(name.count + 1)) }
        }
        return nil
    }
}

/// Everything tlsaudit reads from one X.509 certificate, with the DER kept.
public struct CertificateSummary: Hashable, Codable, Sendable {
    /// RFC 2253 distinguished names.
    public var subject: String
    public var issuer: String
    /// The subject's commonName, when there is one (for display only: never used for name matching).
    public var commonName: String?
    /// Serial number, uppercase hex.
    public var serial: String
    public var version: Int
    public var notBefore: Date
    public var notAfter: Date
    /// OpenSSL's long name, e.g. `sha256WithRSAEncryption`, `ecdsa-with-SHA384`, `ED25519`.
    public var signatureAlgorithm: String
    /// The signature's digest (`SHA256`, `SHA1`, `MD5`), or `nil` for algorithms without a
    /// separate digest (Ed25519) or when unknown.
    public var signatureHash: String?
    public var publicKey: PublicKeyDescription
    public var basicConstraints: BasicConstraints?
    /// keyUsage bits by RFC 5280 name (`digitalSignature`, `keyCertSign`, ...); `nil` when absent.
    public var keyUsage: [String]?
    /// extendedKeyUsage by short name (`serverAuth`) or dotted OID; `nil` when absent.
    public var extendedKeyUsage: [String]?
    public var subjectAlternativeNames: SubjectAlternativeNames
    /// Object identifiers of critical extensions OpenSSL does not support.
    public var unhandledCriticalExtensions: [String]
    /// nameConstraints, on CA certificates that have it.
    public var nameConstraints: NameConstraints?
    /// Profile facts the conformance lints read (key identifiers, criticality, AIA); nil when not read.
    public var profile: CertificateProfile?
    /// True when subject equals issuer and the certificate's signature verifies with its own key.
    public var isSelfSigned: Bool
    /// SHA-256 of the DER, lowercase hex.
    public var sha256Fingerprint: String
    /// Base64 SHA-256 of the SubjectPublicKeyInfo: the HPKP / NSPinnedDomains pin.
    public var spkiSHA256: String
    public var der: Data
    /// Whole days from the evaluation time to notAfter (negative once expired); set when judged.
    public var daysLeft: Int?

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips (`spki_sha256`).
    enum CodingKeys: String, CodingKey {
        case subject, issuer, commonName, serial, version, notBefore, notAfter, signatureAlgorithm, signatureHash
        case publicKey, basicConstraints, keyUsage, extendedKeyUsage, subjectAlternativeNames
        case unhandledCriticalExtensions, nameConstraints, isSelfSigned, sha256Fingerprint, spkiSHA256 = "spkiSha256", der, daysLeft
        case profile
    }

    public init(subject: String, issuer: String, commonName: String?, serial: String, version: Int,
                notBefore: Date, notAfter: Date, signatureAlgorithm: String, signatureHash: String?,
                publicKey: PublicKeyDescription, basicConstraints: BasicConstraints?, keyUsage: [String]?,
                extendedKeyUsage: [String]?, subjectAlternativeNames: SubjectAlternativeNames,
                unhandledCriticalExtensions: [String], isSelfSigned: Bool, sha256Fingerprint: String,
                spkiSHA256: String, der: Data) {
        self.subject = subject
        self.issuer = issuer
        self.commonName = commonName
        self.serial = serial
        self.version = version
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.signatureAlgorithm = signatureAlgorithm
        self.signatureHash = signatureHash
        self.publicKey = publicKey
        self.basicConstraints = basicConstraints
        self.keyUsage = keyUsage
        self.extendedKeyUsage = extendedKeyUsage
        self.subjectAlternativeNames = subjectAlternativeNames
        self.unhandledCriticalExtensions = unhandledCriticalExtensions
        self.nameConstraints = nil
        self.isSelfSigned = isSelfSigned
        self.sha256Fingerprint = sha256Fingerprint
        self.spkiSHA256 = spkiSHA256
        self.der = der
    }

    /// True when the certificate may act as a CA (basicConstraints cA = TRUE).
    public var isCA: Bool { basicConstraints?.isCA ?? false }

    /// Whole days from `date` until notAfter (negative once expired).
    public func daysLeft(at date: Date) -> Int {
        Timestamp.daysLeft(until: notAfter, at: date)
    }

    /// This summary with `daysLeft` set for `date`.
    public func judged(at date: Date) -> CertificateSummary {
        var copy = self
        copy.daysLeft = daysLeft(at: date)
        return copy
    }

    /// The SHA-256 fingerprint as `AB:CD:...`, the form browsers and `openssl x509 -fingerprint` print.
    public var colonFingerprint: String {
        stride(from: 0, to: sha256Fingerprint.count, by: 2).map { offset in
            let start = sha256Fingerprint.index(sha256Fingerprint.startIndex, offsetBy: offset)
            return sha256Fingerprint[start..<sha256Fingerprint.index(start, offsetBy: min(2, sha256Fingerprint.count - offset))].uppercased()
        }.joined(separator: ":")
    }

    /// A short name for messages: the CN when present, else the subject (at most 200 characters).
    public var displayName: String {
        if let commonName, !commonName.isEmpty { return RecordBudget.clamp(commonName, to: 200) }
        return subject.isEmpty ? "(empty subject)" : RecordBudget.clamp(subject, to: 200)
    }
}

extension CertificateSummary {
    /// Hashes the fingerprint and `daysLeft` only; `==` still compares every field. Every other
    /// field is read from the DER the fingerprint digests, so equal fingerprints are the common case
    /// of equal values, and hashing all 22 fields (the DER byte by byte) was a tenth of a scan
    /// document's encoding, which looks each chain's certificates up by value.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(sha256Fingerprint)
        hasher.combine(daysLeft)
    }
}

// A certificate met again in one document is encoded once (declared in `JSONDocumentEncoder.domain`).
extension CertificateSummary: RepeatedlyEncodable {}
