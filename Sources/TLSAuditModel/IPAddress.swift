#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import TLSAuditSupport
#endif

/// IP address literals: their canonical text, their bytes, CIDR membership.
public enum IPAddress {
    /// The canonical text form of an IPv4 or IPv6 literal (brackets allowed), or `nil` for a name.
    public static func canonical(_ text: String) -> String? {
        var literal = text
        if literal.hasPrefix("["), literal.hasSuffix("]") { literal = String(literal.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            return format(family: AF_INET, &v4, length: INET_ADDRSTRLEN)
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, literal, &v6) == 1 {
            return format(family: AF_INET6, &v6, length: INET6_ADDRSTRLEN)
        }
        return nil
    }

    /// Whether an IP address lies in a CIDR range (`10.0.0.0/8`, `fd00::/8`); false for a name,
    /// a malformed range or a range of the other family.
    public static func ip(_ address: String, within cidr: String) -> Bool {
        let parts = cidr.split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let prefix = Int(parts[1]), let base = bytes(String(parts[0])), let value = bytes(address),
              base.count == value.count, (0...base.count * 8).contains(prefix) else { return false }
        for bit in 0..<prefix {
            let byte = bit / 8
            let mask = UInt8(0x80) >> UInt8(bit % 8)
            if base[byte] & mask != value[byte] & mask { return false }
        }
        return true
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 literal (no brackets), or `nil`.
    public static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    private static func format<T>(family: Int32, _ address: inout T, length: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(length))
        let formatted = withUnsafeMutableBytes(of: &address) { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(length)) }
        guard formatted != nil else { return nil }
        return buffer.nulTerminatedString
    }
}
