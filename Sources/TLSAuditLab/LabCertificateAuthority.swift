import COpenSSL
public import Foundation
import TLSAuditProbe
public import TLSAuditModel

/// Key types the lab can generate.
public enum LabKeyType: Sendable, Hashable {
    case rsa(bits: Int)
    /// OpenSSL curve name: `P-256`, `P-384`, `P-521`, `secp224r1`, ...
    case ec(curve: String)
    case ed25519
    /// An RSASSA-PSS key (SPKI id-RSASSA-PSS), signing only with RSA-PSS.
    case rsaPSS(bits: Int)
    /// For testing that DSA keys are refused.
    case dsa(bits: Int)
}

/// Digests the lab can sign with (SHA-1 and MD5 exist to make bad certificates).
public enum LabDigest: String, Sendable {
    case sha1, sha224, sha256, sha384, sha512, md5
    case sha3_256 = "sha3-256"
}

/// A private key generated in the lab. Immutable after init.
public final class LabPrivateKey: @unchecked Sendable {
    // @unchecked: the EVP_PKEY is never modified after generation.
    let pointer: OpaquePointer
    public let type: LabKeyType

    public init(_ type: LabKeyType) throws {
        let key: OpaquePointer? = switch type {
        case .rsa(let bits): tlsaudit_generate_rsa(UInt32(bits))
        case .ec(let curve): tlsaudit_generate_ec(curve)
        case .ed25519: tlsaudit_generate_ed25519()
        case .rsaPSS(let bits): tlsaudit_generate_rsa_pss(Int32(bits))
        case .dsa(let bits): tlsaudit_generate_dsa(Int32(bits))
        }
        guard let key else { throw OpenSSLFailure("cannot generate a \(type) key") }
        pointer = key
        self.type = type
    }

    deinit { EVP_PKEY_free(pointer) }

    /// PKCS#8 PEM, unencrypted.
    public var pem: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil)
        return MemoryBIO.string(bio)
    }
}

/// What to put in a lab certificate. Defaults make a valid one-year TLS server leaf.
public struct LabCertificateRequest: Sendable {
    public var commonName: String
    public var dnsNames: [String]
    public var ipAddresses: [String]
    public var notBefore: Date
    public var notAfter: Date
    /// `nil` leaves basicConstraints out entirely.
    public var isCA: Bool?
    public var pathLength: Int?
    /// OpenSSL extension syntax, e.g. `critical,keyCertSign,cRLSign`; `nil` leaves it out.
    public var keyUsage: String?
    /// e.g. `serverAuth`, `clientAuth`; `nil` leaves it out.
    public var extendedKeyUsage: String?
    public var digest: LabDigest
    public var key: LabKeyType
    /// Further extensions as (OID or short name, OpenSSL value syntax), e.g. `("1.2.3.4", "critical,DER:05:00")`.
    public var extraExtensions: [ExtraExtension]
    /// Certify this key instead of generating one (a renewal that keeps the key).
    public var existingKey: LabPrivateKey?
    /// The serial number in hex (`-1`, `0`, 42 hex digits...) instead of a random positive one.
    public var serialHex: String?
    /// OpenSSL syntax for the key identifier extensions; nil leaves one out.
    public var subjectKeyIdentifier: String? = "hash"
    /// Validity times written as given instead of from the dates (bad certificates): the ASN.1
    /// text and whether it is a GeneralizedTime (else a UTCTime).
    public var rawNotBefore: (text: String, generalized: Bool)?
    public var rawNotAfter: (text: String, generalized: Bool)?
    public var authorityKeyIdentifier: String? = "keyid:always"
    /// The X.509 version (1, 2 or 3); a v1 or v2 certificate has no extensions.
    public var version: Int = 3

    public struct ExtraExtension: Sendable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(commonName: String, dnsNames: [String] = [], ipAddresses: [String] = [],
                notBefore: Date = Date().addingTimeInterval(-86_400), notAfter: Date = Date().addingTimeInterval(365 * 86_400),
                isCA: Bool? = false, pathLength: Int? = nil, keyUsage: String? = "critical,digitalSignature,keyEncipherment",
                extendedKeyUsage: String? = "serverAuth", digest: LabDigest = .sha256, key: LabKeyType = .ec(curve: "P-256"),
                extraExtensions: [ExtraExtension] = []) {
        self.commonName = commonName
        self.dnsNames = dnsNames
        self.ipAddresses = ipAddresses
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.isCA = isCA
        self.pathLength = pathLength
        self.keyUsage = keyUsage
        self.extendedKeyUsage = extendedKeyUsage
        self.digest = digest
        self.key = key
        self.extraExtensions = extraExtensions
    }

    /// A CA certificate (root or intermediate).
    public static func authority(_ commonName: String, pathLength: Int? = nil, key: LabKeyType = .ec(curve: "P-256"),
                                 digest: LabDigest = .sha256) -> LabCertificateRequest {
        LabCertificateRequest(commonName: commonName, notBefore: Date().addingTimeInterval(-30 * 86_400),
                              notAfter: Date().addingTimeInterval(10 * 365 * 86_400), isCA: true, pathLength: pathLength,
                              keyUsage: "critical,keyCertSign,cRLSign", extendedKeyUsage: nil, digest: digest, key: key)
    }

    /// A TLS server leaf for `names` (DNS names; IP literals go to iPAddress SANs).
    public static func server(_ names: [String], key: LabKeyType = .ec(curve: "P-256"),
                              digest: LabDigest = .sha256) -> LabCertificateRequest {
        let ips = names.filter { IPAddress.canonical($0) != nil }
        let dns = names.filter { IPAddress.canonical($0) == nil }
        return LabCertificateRequest(commonName: names.first ?? "server", dnsNames: dns, ipAddresses: ips, digest: digest, key: key)
    }
}

/// A certificate made in the lab, with its private key.
public final class LabCertificate: @unchecked Sendable {
    // @unchecked: immutable after issuance.
    let certificate: X509Certificate
    public let key: LabPrivateKey

    init(certificate: X509Certificate, key: LabPrivateKey) {
        self.certificate = certificate
        self.key = key
    }

    public var der: [UInt8] { certificate.der }

    public var pem: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        PEM_write_bio_X509(bio, certificate.pointer)
        return MemoryBIO.string(bio)
    }

    public var summary: CertificateSummary { certificate.summary() }

    /// Issues a certificate signed by this one (which need not be a CA: the lab makes bad chains too).
    public func issue(_ request: LabCertificateRequest) throws -> LabCertificate {
        try LabCertificateAuthority.issue(request, issuer: self)
    }
}

/// Makes certificates with OpenSSL, for tests, the demo and benchmarks.
public enum LabCertificateAuthority {
    /// A self-signed certificate.
    public static func selfSigned(_ request: LabCertificateRequest) throws -> LabCertificate {
        try issue(request, issuer: nil)
    }

    static func issue(_ request: LabCertificateRequest, issuer: LabCertificate?) throws -> LabCertificate {
        let key = try request.existingKey ?? LabPrivateKey(request.key)
        guard let x509 = X509_new() else { throw OpenSSLFailure("cannot allocate a certificate") }
        let certificate = X509Certificate(takingOwnershipOf: x509)
        X509_set_version(x509, Int(request.version - 1))
        ASN1_INTEGER_set(X509_get_serialNumber(x509), Int.random(in: 1..<Int.max))
        if let serialHex = request.serialHex {
            var number: OpaquePointer?
            guard BN_hex2bn(&number, serialHex) > 0, let number else { throw OpenSSLFailure("bad serial \(serialHex)") }
            defer { BN_free(number) }
            BN_to_ASN1_INTEGER(number, X509_get_serialNumber(x509))
        }
        ASN1_TIME_set(X509_getm_notBefore(x509), time_t(request.notBefore.timeIntervalSince1970))
        ASN1_TIME_set(X509_getm_notAfter(x509), time_t(request.notAfter.timeIntervalSince1970))
        for (raw, setter) in [(request.rawNotBefore, X509_set1_notBefore), (request.rawNotAfter, X509_set1_notAfter)] {
            guard let raw, let time = ASN1_STRING_type_new(raw.generalized ? V_ASN1_GENERALIZEDTIME : V_ASN1_UTCTIME) else { continue }
            ASN1_STRING_set(time, raw.text, Int32(raw.text.utf8.count))
            _ = setter(x509, time)
            ASN1_STRING_free(time)
        }
        X509_set_pubkey(x509, key.pointer)

        guard let name = X509_NAME_new() else { throw OpenSSLFailure("cannot allocate a name") }
        defer { X509_NAME_free(name) }
        if !request.commonName.isEmpty { X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, request.commonName, -1, -1, 0) }
        X509_set_subject_name(x509, name)
        X509_set_issuer_name(x509, issuer.map { X509_get_subject_name($0.certificate.pointer) } ?? name)

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.certificate.pointer ?? x509, x509, nil, nil, 0)
        var extensions: [(String, String)] = []
        if let isCA = request.isCA {
            var value = isCA ? "critical,CA:TRUE" : "critical,CA:FALSE"
            if isCA, let pathLength = request.pathLength { value += ",pathlen:\(pathLength)" }
            extensions.append(("basicConstraints", value))
        }
        if let keyUsage = request.keyUsage { extensions.append(("keyUsage", keyUsage)) }
        if let eku = request.extendedKeyUsage { extensions.append(("extendedKeyUsage", eku)) }
        let sans = request.dnsNames.map { "DNS:\($0)" } + request.ipAddresses.map { "IP:\($0)" }
        if !sans.isEmpty { extensions.append(("subjectAltName", sans.joined(separator: ","))) }
        if let ski = request.subjectKeyIdentifier { extensions.append(("subjectKeyIdentifier", ski)) }
        if let aki = request.authorityKeyIdentifier { extensions.append(("authorityKeyIdentifier", aki)) }
        extensions += request.extraExtensions.map { ($0.name, $0.value) }
        for (extensionName, value) in extensions where request.version >= 3 {
            guard let ext = X509V3_EXT_nconf(nil, &context, extensionName, value) else {
                throw OpenSSLFailure("cannot build extension \(extensionName)=\(value)")
            }
            X509_add_ext(x509, ext, -1)
            X509_EXTENSION_free(ext)
        }

        let signingKey = issuer?.key ?? key
        let digest: OpaquePointer? = if case .ed25519 = signingKey.type { nil } else {
            switch request.digest {
            case .sha1: EVP_sha1()
            case .sha224: EVP_sha224()
            case .sha256: EVP_sha256()
            case .sha384: EVP_sha384()
            case .sha512: EVP_sha512()
            case .md5: EVP_md5()
            case .sha3_256: EVP_sha3_256()
            }
        }
        guard X509_sign(x509, signingKey.pointer, digest) > 0 else { throw OpenSSLFailure("cannot sign \(request.commonName)") }
        return LabCertificate(certificate: certificate, key: key)
    }
}

/// A certificate listed in a lab CRL.
public struct LabRevocation: Sendable {
    public var certificate: LabCertificate
    /// RFC 5280 CRLReason code (1 = keyCompromise, ...); nil leaves the reason out.
    public var reason: Int?
    public var date: Date

    public init(_ certificate: LabCertificate, reason: Int? = 1, date: Date = Date().addingTimeInterval(-3_600)) {
        self.certificate = certificate
        self.reason = reason
        self.date = date
    }
}

extension LabCertificate {
    /// A DER CRL issued by this certificate's name, listing `revoked`, signed with `signer`
    /// (default: this certificate's key; another key makes a badly signed CRL). A nil `number`
    /// leaves the CRL number out; `criticalNumber` marks it critical (both against RFC 5280 5.2.3).
    public func crl(revoking revoked: [LabRevocation] = [], thisUpdate: Date = Date().addingTimeInterval(-3_600),
                    nextUpdate: Date = Date().addingTimeInterval(86_400), number: Int? = 1, criticalNumber: Bool = false,
                    signer: LabPrivateKey? = nil) throws -> [UInt8] {
        guard let crl = X509_CRL_new() else { throw OpenSSLFailure("cannot allocate a CRL") }
        defer { X509_CRL_free(crl) }
        X509_CRL_set_version(crl, 1)
        X509_CRL_set_issuer_name(crl, X509_get_subject_name(certificate.pointer))
        let last = ASN1_TIME_set(nil, time_t(thisUpdate.timeIntervalSince1970))
        let next = ASN1_TIME_set(nil, time_t(nextUpdate.timeIntervalSince1970))
        defer { ASN1_TIME_free(last); ASN1_TIME_free(next) }
        X509_CRL_set1_lastUpdate(crl, last)
        X509_CRL_set1_nextUpdate(crl, next)
        for entry in revoked {
            guard let item = X509_REVOKED_new() else { throw OpenSSLFailure("cannot allocate a CRL entry") }
            X509_REVOKED_set_serialNumber(item, X509_get_serialNumber(entry.certificate.certificate.pointer))
            let date = ASN1_TIME_set(nil, time_t(entry.date.timeIntervalSince1970))
            X509_REVOKED_set_revocationDate(item, date)
            ASN1_TIME_free(date)
            if let reason = entry.reason, let code = ASN1_ENUMERATED_new() {
                ASN1_ENUMERATED_set(code, reason)
                X509_REVOKED_add1_ext_i2d(item, NID_crl_reason, code, 0, 0)
                ASN1_ENUMERATED_free(code)
            }
            X509_CRL_add0_revoked(crl, item)
        }
        if let number, let crlNumber = ASN1_INTEGER_new() {
            ASN1_INTEGER_set(crlNumber, number)
            X509_CRL_add1_ext_i2d(crl, NID_crl_number, crlNumber, criticalNumber ? 1 : 0, 0)
            ASN1_INTEGER_free(crlNumber)
        }
        X509_CRL_sort(crl)
        guard X509_CRL_sign(crl, (signer ?? key).pointer, EVP_sha256()) > 0 else { throw OpenSSLFailure("cannot sign the CRL") }
        let length = i2d_X509_CRL(crl, nil)
        var bytes = [UInt8](repeating: 0, count: Int(max(0, length)))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_X509_CRL(crl, &cursor)
        }
        OpenSSLErrors.clear()
        return bytes
    }
}
