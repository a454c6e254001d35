import COpenSSL

/// A certificate's RSA public key, for encrypting a block the caller has padded itself (the ROBOT
/// probe's forged key exchanges): raw RSA, no padding added.
package final class RawRSAKey: @unchecked Sendable {
    // @unchecked: the key is never changed after init; each encryption makes its own context.
    private let key: OpaquePointer
    /// The modulus length in bytes: the size of every block and every ciphertext.
    package let modulusBytes: Int

    /// The key of a DER certificate; nil when it is not RSA.
    package init?(certificateDER der: [UInt8]) {
        guard let certificate = try? X509Certificate(der: der), let key = X509_get_pubkey(certificate.pointer) else { return nil }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else {
            EVP_PKEY_free(key)
            return nil
        }
        self.key = key
        modulusBytes = Int(EVP_PKEY_get_size(key))
    }

    deinit { EVP_PKEY_free(key) }

    /// `block`^e mod n; `block` must be `modulusBytes` long and below the modulus.
    package func encrypt(_ block: [UInt8]) -> [UInt8]? {
        guard block.count == modulusBytes, let context = EVP_PKEY_CTX_new(key, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_encrypt_init(context) == 1, EVP_PKEY_CTX_set_rsa_padding(context, RSA_NO_PADDING) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        var output = [UInt8](repeating: 0, count: modulusBytes)
        var length = output.count
        guard EVP_PKEY_encrypt(context, &output, &length, block, block.count) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        return Array(output[..<length])
    }
}
