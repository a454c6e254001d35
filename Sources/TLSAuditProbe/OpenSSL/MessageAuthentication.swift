import COpenSSL
import TLSAuditSupport

/// HMAC through OpenSSL (for signing webhook bodies).
public enum MessageAuthentication {
    /// HMAC-SHA256 of `message` under `key`, lowercase hex.
    public static func hmacSHA256Hex(key: [UInt8], message: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &length)
        return Array(out.prefix(Int(length))).hex
    }
}
