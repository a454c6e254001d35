extension Array where Element == UInt8 {
    /// Lowercase hex, without String(format:) (which boxes every byte: it showed in profiles).
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension UnsignedInteger {
    /// The value in hex, zero-padded to `width` digits: `String(format: "%04X")` without
    /// String(format:), whose CVarArg boxing asks the runtime about protocols at first use (a scan of
    /// every conformance record of the binary) and costs microseconds a call.
    public func hex(width: Int, uppercase: Bool = false) -> String {
        let digits = String(self, radix: 16, uppercase: uppercase)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
