import CZlib

/// gzip (RFC 1952) as HTTP answers carry it (`Content-Encoding: gzip`): inflated into memory, never
/// past a bound, so that a small answer cannot become a large allocation.
enum Gzip {
    /// The bytes `compressed` inflates to (members one after another, as RFC 1952 allows), at most
    /// `maximum`; nil when they are not gzip, are truncated, or inflate past `maximum` (then
    /// `tooLarge` is set).
    static func inflate(_ compressed: [UInt8], maximum: Int) -> (bytes: [UInt8]?, tooLarge: Bool) {
        var output: [UInt8] = []
        var consumed = 0
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while consumed < compressed.count {
            var stream = z_stream()
            guard CZlib_inflateInitGzip(&stream) == Z_OK else { return (nil, false) }
            defer { inflateEnd(&stream) }
            var status = Z_OK
            let total = compressed.count - consumed
            compressed.withUnsafeBufferPointer { input in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress! + consumed)
                stream.avail_in = uInt(total)
                buffer.withUnsafeMutableBufferPointer { out in
                    repeat {
                        stream.next_out = out.baseAddress
                        stream.avail_out = uInt(out.count)
                        status = CZlib.inflate(&stream, Z_NO_FLUSH)
                        output += out[..<(out.count - Int(stream.avail_out))]
                    } while status == Z_OK && output.count <= maximum
                }
            }
            if output.count > maximum { return (nil, true) }
            guard status == Z_STREAM_END else { return (nil, false) }
            consumed += total - Int(stream.avail_in)
        }
        return (output, false)
    }
}
