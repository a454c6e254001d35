/// Bytes as a dictionary key, hashed as one buffer. `[UInt8]`'s own `hash(into:)` feeds the hasher
/// one byte at a time: keying a cache by a certificate's DER cost some 29k instructions a look-up
/// (a scan looks up every certificate it is sent).
public struct BytesKey: Hashable, Sendable {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
