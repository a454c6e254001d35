import CZlib

/// gzip (RFC 1952) as HTTP answers carry it (`Content-Encoding: gzip`): inflated into memory, never
/// past a bound, so that a small answer cannot become a large allocation.
enum Gzip {
    /// The bytes `compressed` inflates to (members one after another, as RFC 1952 allows; zero
    /// bytes after the last, a tape's padding, ignored as gzip(1) ignores them), at most `maximum`;
    /// nil when they are empty, not gzip, truncated, or inflate past `maximum` (then `tooLarge` is set).
    static func inflate(_ compressed: [UInt8], maximum: Int) -> (bytes: [UInt8]?, tooLarge: Bool) {
        guard !compressed.isEmpty else { return (nil, false) }
        var output: [UInt8] = []
        var consumed = 0
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while consumed < compressed.count, compressed[consumed...].contains(where: { $0 != 0 }) {
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
