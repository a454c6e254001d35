import CZlib
import Foundation
import TLSAuditModel
#if canImport(Glibc)
import Glibc
#endif

/// One entry of a zip's central directory: what the archive says about a file before any of it is read.
struct ZipEntry: Sendable {
    var name: String
    var method: UInt16
    var flags: UInt16
    var crc32: UInt32
    var compressedSize: UInt64
    var uncompressedSize: UInt64
    var localHeaderOffset: UInt64
    /// The Unix mode in the upper half of the external attributes, when the archive was made on Unix.
    var unixMode: UInt32?

    var isDirectory: Bool { name.hasSuffix("/") }
    var isSymbolicLink: Bool { unixMode.map { $0 & 0o170000 == 0o120000 } ?? false }
}

/// A zip archive read in place (pread on the file, nothing written anywhere): the central
/// directory is parsed whole (bounded by ``AppBundleLimits/centralDirectoryBytes``), an entry is
/// inflated only when asked, into memory, stopping at the size its header declares.
final class ZipArchive {
    let path: String
    let entries: [ZipEntry]
    private let file: ReadOnlyFile
    /// Where the central directory starts: no entry's data may reach into it.
    private let centralDirectoryOffset: UInt64

    init(path: String) throws(AppBundleError) {
        self.path = path
        let file = try ReadOnlyFile(path: path)
        self.file = file
        let corrupt = { (message: String) in AppBundleError(.corruptArchive, file: path, message) }
        let size = file.size
        // End of central directory record: 22 bytes plus a comment of up to 65,535 bytes, at the end.
        let tailLength = Int(min(size, 22 + 65_535))
        let tail = try file.read(at: size - UInt64(tailLength), count: tailLength)
        guard let end = stride(from: tailLength - 22, through: 0, by: -1).first(where: {
            tail.uint32(at: $0) == 0x0605_4b50 && $0 + 22 + Int(tail.uint16(at: $0 + 20)) <= tailLength
        }) else {
            throw corrupt("not a zip archive, or truncated: no end-of-central-directory record in its last \(tailLength) bytes")
        }
        let endOffset = size - UInt64(tailLength) + UInt64(end)
        guard tail.uint16(at: end + 4) == 0, tail.uint16(at: end + 6) == 0 else {
            throw corrupt("a multi-part (split) zip archive; tlsaudit reads single-file archives only")
        }
        var count = UInt64(tail.uint16(at: end + 10))
        var directorySize = UInt64(tail.uint32(at: end + 12))
        var directoryOffset = UInt64(tail.uint32(at: end + 16))
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || directoryOffset == 0xFFFF_FFFF {
            // ZIP64: a locator just before the record points at the ZIP64 end record.
            guard endOffset >= 20 else { throw corrupt("a ZIP64 archive without its ZIP64 locator") }
            let locator = try file.read(at: endOffset - 20, count: 20)
            guard locator.uint32(at: 0) == 0x0706_4b50 else { throw corrupt("a ZIP64 archive without its ZIP64 locator") }
            let recordOffset = locator.uint64(at: 8)
            guard recordOffset <= endOffset, endOffset - recordOffset >= 56 else { throw corrupt("a ZIP64 end record outside the archive") }
            let record = try file.read(at: recordOffset, count: 56)
            guard record.uint32(at: 0) == 0x0606_4b50 else { throw corrupt("no ZIP64 end record where its locator points") }
            count = record.uint64(at: 32)
            directorySize = record.uint64(at: 40)
            directoryOffset = record.uint64(at: 48)
        }
        guard directorySize <= UInt64(AppBundleLimits.centralDirectoryBytes) else {
            throw AppBundleError(.tooLarge, file: path,
                                 "the archive's central directory is \(directorySize) bytes, more than the \(InputLimits.describe(bytes: AppBundleLimits.centralDirectoryBytes)) tlsaudit reads")
        }
        guard directoryOffset <= endOffset, directorySize <= endOffset - directoryOffset else {
            throw corrupt("truncated or damaged: the central directory (\(directorySize) bytes at offset \(directoryOffset)) is not inside the \(size)-byte file")
        }
        centralDirectoryOffset = directoryOffset
        let directory = try file.read(at: directoryOffset, count: Int(directorySize))
        var entries: [ZipEntry] = []
        var names = Set<String>()
        var position = 0
        while position < directory.count {
            guard position + 46 <= directory.count, directory.uint32(at: position) == 0x0201_4b50 else {
                throw corrupt("damaged central directory: no entry header at offset \(directoryOffset + UInt64(position))")
            }
            let nameLength = Int(directory.uint16(at: position + 28))
            let extraLength = Int(directory.uint16(at: position + 30))
            let commentLength = Int(directory.uint16(at: position + 32))
            let next = position + 46 + nameLength + extraLength + commentLength
            guard next <= directory.count else { throw corrupt("damaged central directory: an entry runs past its end") }
            let nameBytes = directory[(position + 46)..<(position + 46 + nameLength)]
            let name = String(decoding: nameBytes, as: UTF8.self)
            var entry = ZipEntry(
                name: name, method: directory.uint16(at: position + 10), flags: directory.uint16(at: position + 8),
                crc32: directory.uint32(at: position + 16),
                compressedSize: UInt64(directory.uint32(at: position + 20)),
                uncompressedSize: UInt64(directory.uint32(at: position + 24)),
                localHeaderOffset: UInt64(directory.uint32(at: position + 42)),
                unixMode: directory.uint16(at: position + 4) >> 8 == 3 ? directory.uint32(at: position + 38) >> 16 : nil)
            try Self.applyZIP64(extra: Array(directory[(position + 46 + nameLength)..<(position + 46 + nameLength + extraLength)]),
                                to: &entry, corrupt: corrupt)
            try Self.checkName(entry.name, nameBytes: nameBytes, archive: path)
            guard names.insert(entry.name).inserted else { throw corrupt("entry \"\(entry.name)\" appears twice") }
            entries.append(entry)
            position = next
        }
        guard UInt64(entries.count) == count else {
            throw corrupt("damaged: the central directory lists \(entries.count) entries, its end record says \(count)")
        }
        self.entries = entries
    }

    /// Refuses a name that would land outside a directory it were extracted to: an absolute path
    /// (`/x`, `\x`, `C:x`), a `..` component, or a NUL byte.
    static func checkName(_ name: String, nameBytes: ArraySlice<UInt8>, archive: String) throws(AppBundleError) {
        let refuse = { (why: String) in
            AppBundleError(.unsafeEntryName, file: archive, "entry \"\(name)\" \(why); refused (an archive that could write outside its directory)")
        }
        if nameBytes.contains(0) { throw refuse("has a NUL byte in its name") }
        if name.hasPrefix("/") || name.hasPrefix("\\") { throw refuse("is an absolute path") }
        let scalars = Array(name.unicodeScalars.prefix(2))
        if scalars.count == 2, scalars[1] == ":", scalars[0].properties.isAlphabetic { throw refuse("is an absolute path (a drive letter)") }
        if name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).contains("..") { throw refuse("has a '..' component") }
    }

    /// Sizes and offset that do not fit 32 bits are in the ZIP64 extra field (id 1), in this order,
    /// each present only when its 32-bit field is 0xFFFFFFFF.
    private static func applyZIP64(extra: [UInt8], to entry: inout ZipEntry,
                                   corrupt: (String) -> AppBundleError) throws(AppBundleError) {
        guard entry.uncompressedSize == 0xFFFF_FFFF || entry.compressedSize == 0xFFFF_FFFF || entry.localHeaderOffset == 0xFFFF_FFFF else { return }
        var position = 0
        while position + 4 <= extra.count {
            let id = extra.uint16(at: position)
            let length = Int(extra.uint16(at: position + 2))
            guard position + 4 + length <= extra.count else { break }
            if id == 1 {
                var field = position + 4
                func next() throws(AppBundleError) -> UInt64 {
                    guard field + 8 <= position + 4 + length else { throw corrupt("entry \"\(entry.name)\" has a short ZIP64 field") }
                    defer { field += 8 }
                    return extra.uint64(at: field)
                }
                if entry.uncompressedSize == 0xFFFF_FFFF { entry.uncompressedSize = try next() }
                if entry.compressedSize == 0xFFFF_FFFF { entry.compressedSize = try next() }
                if entry.localHeaderOffset == 0xFFFF_FFFF { entry.localHeaderOffset = try next() }
                return
            }
            position += 4 + length
        }
        throw corrupt("entry \"\(entry.name)\" has 32-bit sizes marked ZIP64 but no ZIP64 field")
    }

    /// Refuses an entry whose header declares more than `limit` uncompressed bytes.
    func checkDeclaredSize(of entry: ZipEntry, limit: Int, what: String) throws(AppBundleError) {
        guard entry.uncompressedSize <= UInt64(limit) else {
            throw AppBundleError(.tooLarge, file: path,
                                 "entry \"\(entry.name)\" is \(entry.uncompressedSize) bytes uncompressed, more than the \(InputLimits.describe(bytes: limit)) \(what) may be; refused")
        }
    }

    /// The entry's bytes, refused when its header declares more than `limit` (before anything is
    /// inflated) and when it inflates past what its header declares; the CRC-32 is checked.
    /// `what` names the kind of file in messages ("an Info.plist").
    func contents(of entry: ZipEntry, limit: Int, what: String) throws(AppBundleError) -> [UInt8] {
        let corrupt = { (message: String) in AppBundleError(.corruptArchive, file: self.path, "entry \"\(entry.name)\" \(message)") }
        try checkDeclaredSize(of: entry, limit: limit, what: what)
        if entry.flags & 1 != 0 { throw corrupt("is encrypted; tlsaudit reads unencrypted archives only") }
        if entry.isSymbolicLink { throw corrupt("is a symbolic link, not a file; refused") }
        guard entry.method == 0 || entry.method == 8 else {
            throw corrupt("uses compression method \(entry.method); tlsaudit reads stored (0) and deflated (8) entries")
        }
        guard entry.localHeaderOffset <= centralDirectoryOffset, centralDirectoryOffset - entry.localHeaderOffset >= 30 else {
            throw corrupt("has its local header outside the archive's data (truncated or damaged)")
        }
        let header = try file.read(at: entry.localHeaderOffset, count: 30)
        guard header.uint32(at: 0) == 0x0403_4b50 else { throw corrupt("has no local header where the central directory says (damaged)") }
        let dataOffset = entry.localHeaderOffset + 30 + UInt64(header.uint16(at: 26)) + UInt64(header.uint16(at: 28))
        guard dataOffset <= centralDirectoryOffset, entry.compressedSize <= centralDirectoryOffset - dataOffset else {
            throw corrupt("runs past the archive's data (truncated or damaged)")
        }
        let expected = Int(entry.uncompressedSize)
        let bytes: [UInt8]
        if entry.method == 0 {
            guard entry.compressedSize == entry.uncompressedSize else { throw corrupt("is stored with two different sizes (damaged)") }
            bytes = try file.read(at: dataOffset, count: expected)
        } else {
            bytes = try inflate(entry, from: dataOffset, expected: expected, corrupt: corrupt)
        }
        let crc = bytes.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
        guard crc == entry.crc32 else { throw corrupt("fails its CRC-32 check (damaged)") }
        return bytes
    }

    /// Raw-inflates at most `expected + 1` bytes from the entry's compressed data, 64 KiB of
    /// input at a time: memory is bounded by the declared size, time by the compressed size read.
    private func inflate(_ entry: ZipEntry, from offset: UInt64, expected: Int,
                         corrupt: (String) -> AppBundleError) throws(AppBundleError) -> [UInt8] {
        var stream = z_stream()
        guard CZlib_inflateInitRaw(&stream) == Z_OK else { throw corrupt("cannot be inflated (zlib failed to start)") }
        defer { inflateEnd(&stream) }
        // One byte more than declared, so that an entry that inflates past its header is caught.
        let capacity = expected + 1
        let output = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        defer { output.deallocate() }
        var produced = 0
        var consumed: UInt64 = 0
        var status = Z_OK
        while status != Z_STREAM_END {
            guard consumed < entry.compressedSize else { throw corrupt("ends before its deflate stream does (truncated or damaged)") }
            var chunk = try file.read(at: offset + consumed, count: Int(min(entry.compressedSize - consumed, 64 << 10)))
            consumed += UInt64(chunk.count)
            chunk.withUnsafeMutableBufferPointer { input in
                stream.next_in = input.baseAddress
                stream.avail_in = uInt(input.count)
                repeat {
                    stream.next_out = output + produced
                    stream.avail_out = uInt(capacity - produced)
                    status = CZlib.inflate(&stream, Z_NO_FLUSH)
                    produced = capacity - Int(stream.avail_out)
                } while status == Z_OK && stream.avail_in > 0 && produced < capacity
            }
            if produced > expected {
                throw AppBundleError(.tooLarge, file: path, "entry \"\(entry.name)\" inflates to more than the \(expected) bytes its header declares; refused (a deflate bomb or a damaged archive)")
            }
            guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                throw corrupt("is not valid deflate data (damaged)")
            }
        }
        guard produced == expected else { throw corrupt("inflates to \(produced) bytes, its header declares \(expected) (damaged)") }
        return Array(UnsafeBufferPointer(start: output, count: produced))
    }
}

/// A file opened read-only, read with pread at absolute offsets (EINTR retried, short reads refused).
private final class ReadOnlyFile {
    let path: String
    let size: UInt64
    private let descriptor: Int32

    init(path: String) throws(AppBundleError) {
        self.path = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw AppBundleError(.unreadable, file: path, "cannot open: \(String(cString: strerror(errno)))") }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw AppBundleError(.unreadable, file: path, "cannot read: \(reason)")
        }
        size = UInt64(max(status.st_size, 0))
    }

    deinit { close(descriptor) }

    func read(at offset: UInt64, count: Int) throws(AppBundleError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            if result < 0 {
                if errno == EINTR { continue }
                throw AppBundleError(.unreadable, file: path, "cannot read: \(String(cString: strerror(errno)))")
            }
            if result == 0 {
                throw AppBundleError(.corruptArchive, file: path, "truncated: \(count) bytes expected at offset \(offset), the file ends at \(size)")
            }
            done += result
        }
        return bytes
    }
}

/// Little-endian integers, as zip stores them.
extension Array where Element == UInt8 {
    func uint16(at index: Int) -> UInt16 { UInt16(self[index]) | UInt16(self[index + 1]) << 8 }
    func uint32(at index: Int) -> UInt32 { UInt32(uint16(at: index)) | UInt32(uint16(at: index + 2)) << 16 }
    func uint64(at index: Int) -> UInt64 { UInt64(uint32(at: index)) | UInt64(uint32(at: index + 4)) << 32 }
}
