#if canImport(Glibc)
import Glibc
#endif

extension Array where Element == UInt8 {
    /// Where `needle` first occurs in these bytes at or after `from` (memchr for its first byte, then
    /// memcmp); nil for an empty needle.
    public func firstOffset(of needle: [UInt8], from: Int = 0) -> Int? {
        guard let first = needle.first, from <= count - needle.count else { return nil }
        return withUnsafeBufferPointer { hay in
            needle.withUnsafeBufferPointer { pin in
                guard let base = hay.baseAddress, let pinBase = pin.baseAddress else { return nil }
                var offset = from
                let last = hay.count - pin.count
                while offset <= last {
                    guard let hit = memchr(base + offset, Int32(first), last - offset + 1) else { return nil }
                    let index = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                    if memcmp(base + index, pinBase, pin.count) == 0 { return index }
                    offset = index + 1
                }
                return nil
            }
        }
    }
}

extension UnsafeBufferPointer where Element == UInt8 {
    /// These bytes against `other` in byte order (as `LC_ALL=C sort` orders lines and `JSONEncoder`
    /// sorts keys; a prefix first): negative when these come first, zero when equal.
    public func byteOrder(_ other: UnsafeBufferPointer<UInt8>) -> Int {
        let common = Swift.min(count, other.count)
        if common > 0, let left = baseAddress, let right = other.baseAddress {
            let order = memcmp(left, right, common)
            if order != 0 { return Int(order) }
        }
        return count - other.count
    }
}
