/// SHA-256 of some bytes, lowercase hex. The one implementation is OpenSSL's, in the probe
/// (`Digest.sha256Hex`): modules that do not link OpenSSL (the store) are handed it.
public typealias SHA256Hex = @Sendable ([UInt8]) -> String
