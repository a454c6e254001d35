import COpenSSL
import Foundation
import TLSAuditModel
import TLSAuditSupport

// OpenSSL's side of revocation checking: where a certificate says to ask, OCSP requests and
// responses, CRLs, and RFC 5280 CRL processing through X509_verify_cert. The order of sources,
// fetching and caching are `RevocationChecker`'s.

extension X509Certificate {
    /// OCSP responder URLs from the authority information access extension.
    var ocspURLs: [String] {
        guard let stack = X509_get1_ocsp(pointer) else {
            OpenSSLErrors.clear()
            return []
        }
        defer { X509_email_free(stack) }
        return (0..<tlsaudit_sk_OPENSSL_STRING_num(stack)).compactMap { tlsaudit_sk_OPENSSL_STRING_value(stack, $0).map(String.init(cString:)) }
    }

    /// caIssuers URIs from the authority information access extension: where the issuer's
    /// certificate can be fetched.
    var caIssuersURLs: [String] {
        accessDescriptions().filter { $0.nid == NID_ad_ca_issuers }.compactMap(\.uri)
    }

    /// The certificates in a caIssuers answer: DER, PEM, or a certs-only PKCS#7 (`.p7c`).
    static func fromIssuerAnswer(_ bytes: [UInt8]) -> [X509Certificate] {
        if let certificates = try? CertificateFile.parse(bytes, name: "caIssuers answer") { return certificates }
        defer { OpenSSLErrors.clear() }
        let parsed: UnsafeMutablePointer<PKCS7>? = bytes.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PKCS7(nil, &cursor, buffer.count)
        }
        guard let pkcs7 = parsed else { return [] }
        defer { PKCS7_free(pkcs7) }
        guard let stack = tlsaudit_PKCS7_certificates(pkcs7) else { return [] }
        return (0..<tlsaudit_sk_X509_num(stack)).compactMap { index in
            tlsaudit_sk_X509_value(stack, index).map { X509Certificate(borrowing: $0) }
        }
    }

    /// URI full names of the CRL distribution points.
    var crlURLs: [String] {
        guard let raw = X509_get_ext_d2i(pointer, NID_crl_distribution_points, nil, nil) else {
            OpenSSLErrors.clear()
            return []
        }
        let points = OpaquePointer(raw)
        defer { tlsaudit_CRL_DIST_POINTS_free(points) }
        var urls: [String] = []
        for index in 0..<tlsaudit_sk_DIST_POINT_num(points) {
            guard let names = tlsaudit_DIST_POINT_fullname(points, index) else { continue }
            for nameIndex in 0..<tlsaudit_sk_GENERAL_NAME_num(names) {
                guard let name = tlsaudit_sk_GENERAL_NAME_value(names, nameIndex), tlsaudit_GENERAL_NAME_type(name) == GEN_URI,
                      let string = tlsaudit_GENERAL_NAME_string(name) else { continue }
                urls.append(ASN1Text.latin1(string))
            }
        }
        return urls
    }

    /// The TLS feature extension (RFC 7633) lists status_request (5): OCSP must-staple.
    var requiresStapling: Bool {
        guard let raw = X509_get_ext_d2i(pointer, NID_tlsfeature, nil, nil) else {
            OpenSSLErrors.clear()
            return false
        }
        let features = OpaquePointer(raw)
        defer { tlsaudit_TLS_FEATURE_free(features) }
        return (0..<tlsaudit_sk_ASN1_INTEGER_num(features)).contains { index in
            tlsaudit_sk_ASN1_INTEGER_value(features, index).map { ASN1_INTEGER_get($0) } == 5
        }
    }
}

/// OCSP (RFC 6960) requests and responses.
enum OCSPExchange {
    /// A DER OCSPRequest for `certificate` (SHA-1 CertID, as responders expect), without a nonce
    /// (responders serve pre-signed answers).
    static func request(for certificate: X509Certificate, issuer: X509Certificate) -> [UInt8]? {
        guard let request = OCSP_REQUEST_new() else { return nil }
        defer { OCSP_REQUEST_free(request) }
        guard let id = OCSP_cert_to_id(nil, certificate.pointer, issuer.pointer), OCSP_request_add0_id(request, id) != nil else {
            OpenSSLErrors.clear()
            return nil
        }
        let length = i2d_OCSP_REQUEST(request, nil)
        guard length > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_OCSP_REQUEST(request, &cursor)
        }
        return bytes
    }

    /// What a response says about `certificate`, every part verified but its dates (the answer's
    /// `judged(at:)`): the response status, the signature, that the signer is the issuer or a
    /// responder the issuer delegated to (OCSP signing EKU) with a chain to `anchor`, and the
    /// certificate's entry.
    static func verify(_ der: [UInt8], certificate: X509Certificate, issuer: X509Certificate, path: [X509Certificate],
                       anchor: X509Certificate) -> OCSPAnswer {
        defer { OpenSSLErrors.clear() }
        var cursor: UnsafePointer<UInt8>? = nil
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            cursor = buffer.baseAddress
            return d2i_OCSP_RESPONSE(nil, &cursor, buffer.count)
        }
        guard let response = parsed else { return .failed("the response is not a readable OCSP response") }
        defer { OCSP_RESPONSE_free(response) }
        let status = OCSP_response_status(response)
        guard status == OCSP_RESPONSE_STATUS_SUCCESSFUL else {
            return .failed("the responder answered \(String(cString: OCSP_response_status_str(Int(status))))")
        }
        guard let basic = OCSP_response_get1_basic(response) else { return .failed("the response holds no basic response") }
        defer { OCSP_BASICRESP_free(basic) }

        guard let store = X509_STORE_new(), let untrusted = tlsaudit_sk_X509_new_null() else { return .failed("out of memory") }
        defer {
            X509_STORE_free(store)
            tlsaudit_sk_X509_free(untrusted)
        }
        X509_STORE_add_cert(store, anchor.pointer)
        X509_STORE_set_flags(store, UInt(X509_V_FLAG_PARTIAL_CHAIN))
        for member in path { _ = tlsaudit_sk_X509_push(untrusted, member.pointer) }
        guard OCSP_basic_verify(basic, untrusted, store, 0) == 1 else {
            return .failed("the response's signature or signer does not verify (\(OpenSSLErrors.describeAndClear("no detail"))): it is not signed by the issuer or a responder it delegated to")
        }

        var found = false
        var certificateStatus: Int32 = -1, reason: Int32 = -1
        var revokedAt: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        var nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        for digest in [EVP_sha1(), EVP_sha256()] where !found {
            guard let id = OCSP_cert_to_id(digest, certificate.pointer, issuer.pointer) else { continue }
            defer { OCSP_CERTID_free(id) }
            found = OCSP_resp_find_status(basic, id, &certificateStatus, &reason, &revokedAt, &thisUpdate, &nextUpdate) == 1
        }
        guard found else { return .failed("the response does not cover the certificate") }
        let issued = X509Certificate.date(thisUpdate.map { UnsafePointer($0) })
        let expires = nextUpdate.map { X509Certificate.date(UnsafePointer($0)) }
        switch certificateStatus {
        case V_OCSP_CERTSTATUS_GOOD:
            return OCSPAnswer(status: .good, thisUpdate: issued, nextUpdate: expires)
        case V_OCSP_CERTSTATUS_REVOKED:
            return OCSPAnswer(status: .revoked, reason: reason >= 0 ? String(cString: OCSP_crl_reason_str(Int(reason))) : nil,
                              revokedAt: revokedAt.map { X509Certificate.date(UnsafePointer($0)) },
                              thisUpdate: issued, nextUpdate: expires)
        default:
            return OCSPAnswer(status: .unknown, thisUpdate: issued, nextUpdate: expires,
                              detail: "the responder does not know the certificate (status unknown)")
        }
    }
}

extension OCSPExchange {
    /// A response as received, unverified: its status, and its first entry's status and nextUpdate
    /// (what a handshake records of a stapled response, and how long a cache may keep a fetched one).
    static func summary(of der: [UInt8]) -> OCSPStapling {
        defer { OpenSSLErrors.clear() }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_OCSP_RESPONSE(nil, &cursor, buffer.count)
        }
        guard let response = parsed else { return OCSPStapling(responseStatus: "malformed", certificateStatus: nil, nextUpdate: nil) }
        defer { OCSP_RESPONSE_free(response) }
        let status = OCSP_response_status(response)
        let statusName = String(cString: OCSP_response_status_str(Int(status)))
        guard status == OCSP_RESPONSE_STATUS_SUCCESSFUL, let basic = OCSP_response_get1_basic(response) else {
            return OCSPStapling(responseStatus: statusName, certificateStatus: nil, nextUpdate: nil)
        }
        defer { OCSP_BASICRESP_free(basic) }
        guard OCSP_resp_count(basic) > 0, let single = OCSP_resp_get0(basic, 0) else {
            return OCSPStapling(responseStatus: statusName, certificateStatus: nil, nextUpdate: nil)
        }
        var reason: Int32 = 0
        var revoked: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?, thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        var nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        let certificateStatus = OCSP_single_get0_status(single, &reason, &revoked, &thisUpdate, &nextUpdate)
        return OCSPStapling(responseStatus: statusName,
                            certificateStatus: String(cString: OCSP_cert_status_str(Int(certificateStatus))),
                            nextUpdate: nextUpdate.map { X509Certificate.date(UnsafePointer($0)) })
    }
}

/// One OCSP answer, verified, or why there is none.
struct OCSPAnswer: Sendable {
    var status: RevocationCheck.Status
    var reason: String?
    var revokedAt: Date?
    var thisUpdate: Date?
    var nextUpdate: Date?
    var detail: String?

    /// Good or revoked: no other source needs asking.
    var isDefinitive: Bool { status != .unknown }

    /// This answer at `time`: unknown when its thisUpdate is in the future or its nextUpdate has
    /// passed (five minutes of clock skew allowed either way).
    func judged(at time: Date) -> OCSPAnswer {
        let skew: TimeInterval = 300
        if let thisUpdate, thisUpdate > time.addingTimeInterval(skew) {
            return .failed("the response's thisUpdate (\(Timestamp.format(thisUpdate))) is in the future")
        }
        if let nextUpdate, nextUpdate < time.addingTimeInterval(-skew) {
            return .failed("the response is stale: its nextUpdate was \(Timestamp.format(nextUpdate))")
        }
        return self
    }

    static func failed(_ detail: String) -> OCSPAnswer { OCSPAnswer(status: .unknown, detail: detail) }
}

/// A certificate revocation list, parsed once (a CRL may hold hundreds of thousands of entries).
final class RevocationList: @unchecked Sendable {
    // @unchecked: immutable after parsing; OpenSSL reads a CRL from many threads at once.
    let pointer: OpaquePointer
    /// Where it came from (a URL, or a file offline).
    let origin: String
    let byteCount: Int
    /// Why RFC 5280 5.2.3 forbids relying on it, when it does: every CRL carries a CRL number,
    /// never marked critical (x509-limbo's crlnumber_missing and crlnumber_critical refuse such a CRL).
    let profileProblem: String?

    /// Parses DER or PEM.
    init(_ bytes: [UInt8], origin: String) throws {
        var parsed: OpaquePointer?
        if bytes.starts(with: Array("-----BEGIN".utf8)) {
            if let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) {
                parsed = PEM_read_bio_X509_CRL(bio, nil, nil, nil)
                BIO_free(bio)
            }
        } else {
            parsed = bytes.withUnsafeBufferPointer { buffer in
                var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_X509_CRL(nil, &cursor, buffer.count)
            }
        }
        OpenSSLErrors.clear()
        guard let parsed else { throw OpenSSLFailure("\(origin) is not a readable CRL (DER or PEM)") }
        pointer = parsed
        self.origin = origin
        byteCount = bytes.count
        let numberIndex = X509_CRL_get_ext_by_NID(parsed, NID_crl_number, -1)
        if numberIndex < 0 {
            profileProblem = "it has no CRL number (RFC 5280 5.2.3 requires one)"
        } else if let number = X509_CRL_get_ext(parsed, numberIndex), X509_EXTENSION_get_critical(number) == 1 {
            profileProblem = "its CRL number is marked critical (RFC 5280 5.2.3 forbids it)"
        } else {
            profileProblem = nil
        }
        OpenSSLErrors.clear()
    }

    deinit { X509_CRL_free(pointer) }

    var thisUpdate: Date { X509Certificate.date(X509_CRL_get0_lastUpdate(pointer)) }
    /// The issuer's name, RFC 2253.
    var issuerName: String { X509Certificate.rfc2253(X509_CRL_get_issuer(pointer)) }
    var nextUpdate: Date? { X509_CRL_get0_nextUpdate(pointer).map { X509Certificate.date($0) } }

    /// The CRL number extension, as hex; nil when absent.
    var number: String? {
        guard let raw = X509_CRL_get_ext_d2i(pointer, NID_crl_number, nil, nil) else {
            OpenSSLErrors.clear()
            return nil
        }
        let integer = raw.assumingMemoryBound(to: ASN1_INTEGER.self)
        defer { ASN1_INTEGER_free(integer) }
        return ASN1Text.hex(integer)
    }

    /// The entry for `certificate` when this CRL lists it as revoked: its reason and date.
    func entry(for certificate: X509Certificate) -> (reason: String?, date: Date)? {
        var revoked: OpaquePointer?
        guard X509_CRL_get0_by_cert(pointer, &revoked, certificate.pointer) == 1, let revoked else {
            OpenSSLErrors.clear()
            return nil
        }
        var reason: String?
        if let raw = X509_REVOKED_get_ext_d2i(revoked, NID_crl_reason, nil, nil) {
            let code = raw.assumingMemoryBound(to: ASN1_ENUMERATED.self)
            reason = String(cString: OCSP_crl_reason_str(ASN1_ENUMERATED_get(code)))
            ASN1_ENUMERATED_free(code)
        }
        OpenSSLErrors.clear()
        return (reason, X509Certificate.date(X509_REVOKED_get0_revocationDate(revoked)))
    }
}

/// RFC 5280 CRL processing of a path by OpenSSL (signature and issuer of each CRL, the issuer's
/// cRLSign key usage, dates at the evaluation time, critical extensions, scope through the
/// issuing distribution point, indirect and delta CRLs).
enum CRLValidation {
    /// What the CRLs say about each certificate of `path` (leaf first, the anchor last and not
    /// judged), at `time`: revoked (with the entry), good, or why no CRL answers. `others` are
    /// certificates that may have signed a CRL without being in the path (a CA's separate CRL
    /// key, an indirect CRL issuer).
    static func check(path: [X509Certificate], others: [X509Certificate], crls: [RevocationList], time: Date) -> [Int: CRLOutcome] {
        guard path.count > 1 else { return [:] }
        // OpenSSL builds its own chain: it must be `path`, else the answer is about another one.
        if let outcomes = run(path: path, others: others, crls: crls, time: time) { return outcomes }
        return run(path: path, others: [], crls: crls, time: time) ?? [:]
    }

    private static func run(path: [X509Certificate], others: [X509Certificate], crls: [RevocationList], time: Date) -> [Int: CRLOutcome]? {
        guard let store = X509_STORE_new() else { return nil }
        defer { X509_STORE_free(store) }
        PathBuilder.linkIssuersAsTrustd(store)
        X509_STORE_add_cert(store, path[path.count - 1].pointer)
        guard let context = X509_STORE_CTX_new(), let untrusted = tlsaudit_sk_X509_new_null(),
              let stack = tlsaudit_sk_X509_CRL_new_null() else { return nil }
        defer {
            X509_STORE_CTX_free(context)
            tlsaudit_sk_X509_free(untrusted)
            tlsaudit_sk_X509_CRL_free(stack)
        }
        let members = Set(path.map(\.pointer))
        for certificate in path.dropFirst().dropLast() + others.filter({ !members.contains($0.pointer) }) {
            _ = tlsaudit_sk_X509_push(untrusted, certificate.pointer)
        }
        for crl in crls { _ = tlsaudit_sk_X509_CRL_push(stack, crl.pointer) }
        guard X509_STORE_CTX_init(context, store, path[0].pointer, untrusted) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        X509_STORE_CTX_set0_crls(context, stack)
        X509_STORE_CTX_set_flags(context, UInt(X509_V_FLAG_CRL_CHECK) | UInt(X509_V_FLAG_CRL_CHECK_ALL)
                                 | UInt(X509_V_FLAG_EXTENDED_CRL_SUPPORT) | UInt(X509_V_FLAG_USE_DELTAS)
                                 | UInt(X509_V_FLAG_PARTIAL_CHAIN))
        X509_STORE_CTX_set_time(context, 0, time_t(time.timeIntervalSince1970))
        let collector = VerifyErrorCollector()
        _ = collector.verify(context)
        guard let chain = X509_STORE_CTX_get0_chain(context), Int(tlsaudit_sk_X509_num(chain)) == path.count,
              path.indices.allSatisfy({ X509_cmp(tlsaudit_sk_X509_value(chain, Int32($0)), path[$0].pointer) == 0 }) else {
            return nil
        }
        var outcomes: [Int: CRLOutcome] = [:]
        for depth in 0..<(path.count - 1) {
            let codes = collector.issues.filter { Int($0.depth) == depth }.map(\.code)
            // The verify callback lets OpenSSL go on past a CRL it found bad, so a "revoked" may
            // come from that very CRL: a CRL problem wins.
            if let problem = codes.first(where: { crlProblems.contains($0) }) {
                outcomes[depth] = .unavailable(String(cString: X509_verify_cert_error_string(Int(problem))))
            } else if codes.contains(X509_V_ERR_CERT_REVOKED) {
                let entry = crls.lazy.compactMap { $0.entry(for: path[depth]) }.first
                outcomes[depth] = .revoked(reason: entry?.reason, date: entry?.date)
            } else {
                outcomes[depth] = .good
            }
        }
        return outcomes
    }

    /// Verify errors that say no valid CRL covers a certificate (certificate errors are the path's business).
    static let crlProblems: Set<Int32> = [
        X509_V_ERR_UNABLE_TO_GET_CRL, X509_V_ERR_CRL_SIGNATURE_FAILURE, X509_V_ERR_UNABLE_TO_DECRYPT_CRL_SIGNATURE,
        X509_V_ERR_CRL_NOT_YET_VALID, X509_V_ERR_CRL_HAS_EXPIRED, X509_V_ERR_ERROR_IN_CRL_LAST_UPDATE_FIELD,
        X509_V_ERR_ERROR_IN_CRL_NEXT_UPDATE_FIELD, X509_V_ERR_UNABLE_TO_GET_CRL_ISSUER, X509_V_ERR_KEYUSAGE_NO_CRL_SIGN,
        X509_V_ERR_UNHANDLED_CRITICAL_CRL_EXTENSION, X509_V_ERR_DIFFERENT_CRL_SCOPE, X509_V_ERR_CRL_PATH_VALIDATION_ERROR,
    ]
}

/// What the CRLs say about one certificate.
enum CRLOutcome: Equatable {
    case good
    case revoked(reason: String?, date: Date?)
    /// No CRL in scope, or the one in scope fails verification: OpenSSL's reason.
    case unavailable(String)
}
