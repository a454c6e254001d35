extension Array where Element == CChar {
    /// The text before the first NUL of a C character buffer.
    package var nulTerminatedString: String {
        let end = firstIndex(of: 0) ?? endIndex
        return String(decoding: self[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
