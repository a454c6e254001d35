import COpenSSL

/// Verifies a SHA-256 signature (RSA PKCS#1 v1.5 or ECDSA) over bytes with a public key: an SCT's
/// log signature, or a log list's detached signature (Google's `log_list.sig`).
enum DetachedSignature {
    /// Whether `signature` over `data` verifies with the DER SubjectPublicKeyInfo `key`.
    static func verifySHA256(_ signature: [UInt8], over data: [UInt8], keyDER key: [UInt8]) -> Bool {
        let publicKey: OpaquePointer? = key.withUnsafeBufferPointer { buffer in
            var start = buffer.baseAddress
            return d2i_PUBKEY(nil, &start, buffer.count)
        }
        guard let publicKey else { OpenSSLErrors.clear(); return false }
        defer { EVP_PKEY_free(publicKey) }
        return verify(signature, over: data, key: publicKey)
    }

    /// Whether `signature` over `data` verifies with the PEM public key `pem`; nil when `pem` holds no public key.
    static func verifySHA256(_ signature: [UInt8], over data: [UInt8], keyPEM pem: String) -> Bool? {
        let bytes = Array(pem.utf8)
        guard let bio = bytes.withUnsafeBufferPointer({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else { return nil }
        defer { BIO_free(bio) }
        guard let publicKey = PEM_read_bio_PUBKEY(bio, nil, nil, nil) else { OpenSSLErrors.clear(); return nil }
        defer { EVP_PKEY_free(publicKey) }
        return verify(signature, over: data, key: publicKey)
    }

    private static func verify(_ signature: [UInt8], over data: [UInt8], key: OpaquePointer) -> Bool {
        guard !signature.isEmpty, let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            OpenSSLErrors.clear()
        }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, data, data.count) == 1
    }
}
