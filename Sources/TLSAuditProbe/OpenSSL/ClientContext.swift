import COpenSSL
import Foundation
import TLSAuditModel

/// A client certificate and key for servers that require mutual TLS.
public struct ClientCredentials: Sendable, Hashable {
    /// PEM file with the certificate (and its chain).
    public var certificatePath: String
    /// PEM file with the private key.
    public var keyPath: String

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }
}

/// One configured `SSL_CTX` per client profile, shared by every probe.
final class ClientContext: @unchecked Sendable {
    // @unchecked: configured in init and never changed; OpenSSL allows SSL_new from many threads.
    let pointer: OpaquePointer
    let profile: ClientProfile
    let presentsClientCertificate: Bool

    /// Apple's documented ATS suites, by OpenSSL name (TLS 1.2).
    static let atsCipherList = [
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-SHA384", "ECDHE-RSA-AES256-SHA384",
        "ECDHE-ECDSA-AES256-SHA", "ECDHE-RSA-AES128-SHA256",
        "ECDHE-ECDSA-AES128-SHA256", "ECDHE-RSA-AES128-SHA",
        "ECDHE-ECDSA-AES128-SHA",
    ].joined(separator: ":")

    /// The TLS 1.2 suites current Apple clients offer, by OpenSSL name.
    static let atsRuntimeCipherList = [
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-ECDSA-AES256-SHA", "ECDHE-RSA-AES256-SHA",
        "ECDHE-ECDSA-AES128-SHA", "ECDHE-RSA-AES128-SHA",
    ].joined(separator: ":")

    init(profile: ClientProfile, credentials: ClientCredentials?) throws {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw OpenSSLFailure("cannot create a TLS client context") }
        pointer = context
        self.profile = profile
        presentsClientCertificate = credentials != nil
        // tlsaudit judges keys, digests and groups itself: OpenSSL must let every handshake complete.
        SSL_CTX_set_security_level(context, 0)
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        // tlsaudit builds and verifies the path itself after the handshake (PathBuilder, against
        // the chosen anchors, every error collected). OpenSSL would otherwise run X509_verify_cert
        // during every handshake too, against the context's empty store, only to have it ignored.
        SSL_CTX_set_cert_verify_callback(context, { _, _ in 1 }, nil)
        _ = tlsaudit_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))
        _ = tlsaudit_SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION)
        let ok: Bool
        switch profile {
        case .ats, .atsRuntime:
            let suites = profile == .ats ? Self.atsCipherList : Self.atsRuntimeCipherList
            ok = tlsaudit_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1
                && SSL_CTX_set_cipher_list(context, suites + ":@SECLEVEL=0") == 1
                && SSL_CTX_set_ciphersuites(context, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") == 1
                && tlsaudit_SSL_CTX_set1_groups_list(context, "X25519:P-256:P-384:P-521") == 1
        case .permissive:
            SSL_CTX_set_options(context, tlsaudit_SSL_OP_LEGACY_SERVER_CONNECT)
            ok = tlsaudit_SSL_CTX_set_min_proto_version(context, TLS1_VERSION) == 1
                && SSL_CTX_set_cipher_list(context, "ALL:COMPLEMENTOFALL:@SECLEVEL=0") == 1
                && tlsaudit_SSL_CTX_set1_groups_list(context, "X25519:P-256:P-384:P-521:X448:ffdhe2048:ffdhe3072:ffdhe4096") == 1
        }
        guard ok else {
            SSL_CTX_free(context)
            throw OpenSSLFailure("cannot configure the \(profile.rawValue) client profile")
        }
        // Ask for a stapled OCSP response and for SCTs (as Apple clients do); permissive CT
        // validation only collects them, it never fails a handshake.
        _ = SSL_CTX_enable_ct(context, Int32(SSL_CT_VALIDATION_PERMISSIVE))
        _ = tlsaudit_SSL_CTX_set_tlsext_status_type(context, TLSEXT_STATUSTYPE_ocsp)
        OpenSSLErrors.clear()
        if let credentials {
            guard SSL_CTX_use_certificate_chain_file(context, credentials.certificatePath) == 1 else {
                SSL_CTX_free(context)
                throw OpenSSLFailure("cannot load client certificate \(credentials.certificatePath)")
            }
            guard SSL_CTX_use_PrivateKey_file(context, credentials.keyPath, SSL_FILETYPE_PEM) == 1,
                  SSL_CTX_check_private_key(context) == 1 else {
                SSL_CTX_free(context)
                throw OpenSSLFailure("cannot load client key \(credentials.keyPath) (or it does not match the certificate)")
            }
        }
    }

    deinit { SSL_CTX_free(pointer) }
}
