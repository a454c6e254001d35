import COpenSSL
import COpenSSLProbeLibrary
import Foundation
import TLSAuditModel

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

    /// The signature algorithms current Apple clients offer, in their order (the signature_algorithms
    /// extension of Safari 17 and URLSession on iOS 17 and macOS 14; OpenSSL names): ECDSA on P-256
    /// and P-384, RSA-PSS with an rsaEncryption key, PKCS #1, and SHA-1 (below the SHA-2 forms) for TLS 1.2 servers that
    /// sign with nothing else. None for P-521 in TLS 1.3 (ecdsa_secp521r1_sha512), for RSA-PSS keys
    /// (rsa_pss_pss_*) or for EdDSA: a server that can only sign with one of those cannot serve them.
    static let appleSignatureAlgorithms = [
        "ECDSA+SHA256", "rsa_pss_rsae_sha256", "RSA+SHA256", "ECDSA+SHA384", "ECDSA+SHA1",
        "rsa_pss_rsae_sha384", "RSA+SHA384", "rsa_pss_rsae_sha512", "RSA+SHA512", "RSA+SHA1",
    ].joined(separator: ":")

    /// What a client identity may sign its CertificateVerify with: every scheme this libssl has, as
    /// before the Apple list above was set (OpenSSL would otherwise sign only with that list, and a
    /// P-521, RSA-PSS or EdDSA client key would find no scheme). What an iPhone signs with is not
    /// modelled.
    static let clientAuthenticationSignatureAlgorithms = [
        "ECDSA+SHA256", "ECDSA+SHA384", "ECDSA+SHA512", "ed25519", "ed448",
        "rsa_pss_pss_sha256", "rsa_pss_pss_sha384", "rsa_pss_pss_sha512", "rsa_pss_rsae_sha256", "rsa_pss_rsae_sha384",
        "rsa_pss_rsae_sha512", "RSA+SHA256", "RSA+SHA384", "RSA+SHA512", "ECDSA+SHA224", "RSA+SHA224", "ECDSA+SHA1", "RSA+SHA1",
    ].joined(separator: ":")

    /// The key-exchange groups current Apple clients offer, in their order.
    static let appleGroups = "X25519:P-256:P-384:P-521"

    init(profile: ClientProfile, credentials: ClientCredentials?) throws {
        // The probe's library context decodes certificate keys with a fraction of OpenSSL 3.0's
        // per-certificate cost; a client identity's private key, PEM or PKCS#12, needs the default
        // context's other decoders, so a context that presents one is made there.
        let library = credentials == nil ? tlsaudit_probe_library_context() : nil
        guard let context = SSL_CTX_new_ex(library, nil, TLS_client_method()) else { throw OpenSSLFailure("cannot create a TLS client context") }
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
        // Each read takes what the socket holds (the server's whole first flight, most often),
        // not a record header and then its body: 3 reads a handshake instead of 13. Every
        // reader goes through SSL_read or SSL_do_handshake, which empty the buffer before they
        // ask for the socket (WANT_READ), so no wait misses a buffered record.
        tlsaudit_SSL_CTX_set_read_ahead(context, 1)
        _ = tlsaudit_SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION)
        // A server without secure renegotiation (RFC 5746) is connected to, as Apple's clients
        // (BoringSSL's) and every browser do; OpenSSL 3 alone refuses it.
        SSL_CTX_set_options(context, tlsaudit_SSL_OP_LEGACY_SERVER_CONNECT)
        let ok: Bool
        switch profile {
        case .ats, .atsRuntime:
            let suites = profile == .ats ? Self.atsCipherList : Self.atsRuntimeCipherList
            ok = tlsaudit_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1
                && SSL_CTX_set_cipher_list(context, suites + ":@SECLEVEL=0") == 1
                && SSL_CTX_set_ciphersuites(context, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") == 1
                && tlsaudit_SSL_CTX_set1_groups_list(context, Self.appleGroups) == 1
                && tlsaudit_SSL_CTX_set1_sigalgs_list(context, Self.appleSignatureAlgorithms) == 1
        case .permissive:
            ok = tlsaudit_SSL_CTX_set_min_proto_version(context, TLS1_VERSION) == 1
                && SSL_CTX_set_cipher_list(context, "ALL:COMPLEMENTOFALL:@SECLEVEL=0") == 1
                && tlsaudit_SSL_CTX_set1_groups_list(context, "X25519:P-256:P-384:P-521:X448:ffdhe2048:ffdhe3072:ffdhe4096") == 1
        }
        // Every stored property is set: a throw from here on runs deinit, which frees the context.
        // The client identity signs with any scheme, whatever signature_algorithms the hello sends
        // (the Apple list here, or set per connection on the permissive context by app audit's probes).
        guard ok, tlsaudit_SSL_CTX_set1_client_sigalgs_list(context, Self.clientAuthenticationSignatureAlgorithms) == 1 else { throw OpenSSLFailure("cannot configure the \(profile.rawValue) client profile") }
        // Ask for a stapled OCSP response and for SCTs (as Apple clients do); permissive CT
        // validation only collects them, it never fails a handshake.
        _ = SSL_CTX_enable_ct(context, Int32(SSL_CT_VALIDATION_PERMISSIVE))
        _ = tlsaudit_SSL_CTX_set_tlsext_status_type(context, TLSEXT_STATUSTYPE_ocsp)
        OpenSSLErrors.clear()
        if let credentials { try Self.load(credentials, into: context) }
    }

    /// Installs the client identity: a PEM certificate chain and key, or a PKCS#12 file as an app
    /// bundles its identity for URLSession's client-certificate challenge (`SecPKCS12Import`).
    static func load(_ credentials: ClientCredentials, into context: OpaquePointer) throws {
        if let pkcs12Path = credentials.pkcs12Path {
            try loadPKCS12(pkcs12Path, password: credentials.password ?? "", into: context)
            return
        }
        guard let certificatePath = credentials.certificatePath, let keyPath = credentials.keyPath else {
            throw OpenSSLFailure("a client identity needs a certificate and a key, or a PKCS#12 file")
        }
        for (path, what) in [(certificatePath, "client certificate"), (keyPath, "client key")] {
            do { _ = try InputLimits.read(path, limit: InputLimits.certificateFileBytes, what: what) } catch {
                throw OpenSSLFailure("cannot read \(what) \(path): \(error)")
            }
        }
        guard SSL_CTX_use_certificate_chain_file(context, certificatePath) == 1 else {
            throw OpenSSLFailure("cannot load client certificate \(certificatePath): \(OpenSSLErrors.drain().last?.text ?? "not a PEM certificate")")
        }
        guard SSL_CTX_use_PrivateKey_file(context, keyPath, SSL_FILETYPE_PEM) == 1, SSL_CTX_check_private_key(context) == 1 else {
            throw OpenSSLFailure("cannot load client key \(keyPath) (or it does not match the certificate)")
        }
    }

    /// A PKCS#12 file: its key, its certificate and the CA certificates it carries (sent as the
    /// chain). Files encrypted with the legacy algorithms (RC2, 3DES: older exports, macOS Keychain)
    /// need OpenSSL 3's legacy provider, which is loaded when the default one cannot read the file.
    static func loadPKCS12(_ path: String, password: String, into context: OpaquePointer) throws {
        let bytes: [UInt8]
        do { bytes = try InputLimits.read(path, limit: InputLimits.certificateFileBytes, what: "PKCS#12 file") } catch {
            throw OpenSSLFailure("cannot read client identity \(path): \(error)")
        }
        func parse() -> (OpaquePointer, OpaquePointer, OpaquePointer?)? {
            var cursor: UnsafePointer<UInt8>? = nil
            return bytes.withUnsafeBufferPointer { buffer -> (OpaquePointer, OpaquePointer, OpaquePointer?)? in
                cursor = buffer.baseAddress
                guard let p12 = d2i_PKCS12(nil, &cursor, buffer.count) else { return nil }
                defer { PKCS12_free(p12) }
                var key: OpaquePointer? = nil
                var certificate: OpaquePointer? = nil
                var chain: OpaquePointer? = nil
                guard PKCS12_parse(p12, password, &key, &certificate, &chain) == 1, let key, let certificate else {
                    if let key { EVP_PKEY_free(key) }
                    if let certificate { X509_free(certificate) }
                    return nil
                }
                return (key, certificate, chain)
            }
        }
        OpenSSLErrors.clear()
        var parsed = parse()
        if parsed == nil, OpenSSLLegacyProvider.load() { parsed = parse() }
        guard let (key, certificate, chain) = parsed else {
            throw OpenSSLFailure("cannot read client identity \(path): not a PKCS#12 file, a wrong password (--client-p12-password-file), or no key and certificate in it (\(OpenSSLErrors.drain().last?.text ?? "PKCS12_parse failed"))")
        }
        defer {
            EVP_PKEY_free(key)
            X509_free(certificate)
            if let chain { tlsaudit_sk_X509_pop_free(chain) }
        }
        guard SSL_CTX_use_certificate(context, certificate) == 1, SSL_CTX_use_PrivateKey(context, key) == 1,
              SSL_CTX_check_private_key(context) == 1 else {
            throw OpenSSLFailure("cannot use client identity \(path): its key does not match its certificate")
        }
        if let chain {
            for index in 0..<tlsaudit_sk_X509_num(chain) {
                guard let ca = tlsaudit_sk_X509_value(chain, index) else { continue }
                _ = tlsaudit_SSL_CTX_add1_chain_cert(context, ca)
            }
        }
    }

    deinit { SSL_CTX_free(pointer) }
}

/// OpenSSL 3's legacy provider (RC2, 3DES-era PKCS#12 encryption), loaded once beside the default
/// provider when a file needs it.
enum OpenSSLLegacyProvider {
    private static let loaded: Bool = {
        // The default provider stays available: loading another one explicitly would otherwise replace it.
        _ = OSSL_PROVIDER_load(nil, "default")
        return OSSL_PROVIDER_load(nil, "legacy") != nil
    }()

    /// Loads it (once); false when this libcrypto has none.
    static func load() -> Bool { loaded }
}
