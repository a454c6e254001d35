import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The most tlsaudit reads from a local file: a mistaken path (a 70 MB bundle of repeated chains,
/// a million-line target list, /dev/zero) gets a clear error instead of minutes and gigabytes
/// (README, "How it behaves").
public enum InputLimits {
    /// A certificate file given to `verify`, `pin`, `--ca-file` checks or a pin file.
    public static let certificateFileBytes = 4 << 20
    /// Certificates read from one file (a system CA bundle holds about 150).
    public static let certificatesPerFile = 2_000
    /// A configuration file or a `--targets-file`.
    public static let configurationBytes = 4 << 20
    /// Targets in one configuration or target list.
    public static let targets = 100_000

    /// The bytes of `path`, refused beyond `limit` without reading further. `what` names the
    /// file in errors ("certificate file"); errors carry the system's reason.
    public static func read(_ path: String, limit: Int, what: String) throws(InputError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw InputError("cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw InputError("cannot read \(what) \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
            if bytes.count > limit {
                throw InputError("\(what) \(path) is larger than \(describe(bytes: limit)), the most tlsaudit reads; is it the right file?")
            }
        }
    }

    /// `4 MiB`, `512 KiB`.
    public static func describe(bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
    }
}

/// A local input tlsaudit refuses to read, with the reason in one sentence.
public struct InputError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
