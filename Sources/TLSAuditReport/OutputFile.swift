import Foundation

/// An output file named on the command line or in the configuration: a report (`report --out`, the
/// scheduled reports) or the YAML of `pins import --output`.
public enum OutputFile {
    /// Writes `content` to `path` atomically (a temporary file renamed into place): a reader never
    /// sees half a file, and a full disk leaves the previous file as it was. Missing parent
    /// directories are created. A symlink is followed (its target is replaced, the link stays); a
    /// device or FIFO (`/dev/stdout`, a pipe) is written in place, appending, since renaming over it
    /// would replace it.
    public static func write(_ content: String, to path: String) throws {
        let url = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        let type = (try? FileManager.default.attributesOfItem(atPath: url.path)[.type]) as? FileAttributeType
        if path.hasPrefix("/dev/") || path.hasPrefix("/proc/") || (type != nil && type != .typeRegular && type != .typeDirectory) {
            var descriptor = open(path, O_WRONLY | O_APPEND)
            // A container without /dev/stdout (ENOENT), or a descriptor that is a socket, which Linux
            // does not reopen through /proc (ENXIO): the name still means the open descriptor.
            if descriptor < 0, errno == ENOENT || errno == ENXIO, let standard = standardDescriptor(path) { descriptor = dup(standard) }
            guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            try handle.write(contentsOf: Data(content.utf8))
            return
        }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(content.utf8).write(to: url, options: .atomic)
    }

    /// The descriptor `/dev/stdout`, `/dev/stderr` or `/dev/fd/N` names; nil for any other path.
    static func standardDescriptor(_ path: String) -> Int32? {
        switch path {
        case "/dev/stdout": 1
        case "/dev/stderr": 2
        default: path.hasPrefix("/dev/fd/") ? Int32(path.dropFirst("/dev/fd/".count)) : nil
        }
    }
}
