import Foundation
import TLSAuditCore

/// Where scan results the store could not take wait for the next start, in order of preference:
/// beside the database (`DATABASE.unstored-MILLISECONDS.jsonl`), then each fallback directory
/// (`spill_directory:`, `$RUNTIME_DIRECTORY`, the state directory), whose files are named after the
/// database and a hash of its path (`NAME-HASH.unstored-MILLISECONDS.jsonl`), so that databases
/// sharing a directory never take each other's. A disk full under the database leaves the others.
public struct SpillLocations: Sendable, Equatable {
    /// The database's path (for PostgreSQL, `tlsaudit-postgres` in the state directory).
    public var base: String
    /// Directories to use when the file beside the database cannot be written.
    public var fallbacks: [String]

    public init(base: String, fallbacks: [String] = []) {
        self.base = base
        let own = URL(fileURLWithPath: base).deletingLastPathComponent().standardizedFileURL.path
        var seen: Set<String> = [own]
        self.fallbacks = fallbacks.map { URL(fileURLWithPath: $0).standardizedFileURL.path }.filter { seen.insert($0).inserted }
    }

    /// The prefix of this database's files in a fallback directory.
    private var fallbackPrefix: String {
        let url = URL(fileURLWithPath: base).standardizedFileURL
        return url.lastPathComponent + "-" + String(StableHash.fnv1a(url.path) & 0xFFFF_FFFF, radix: 16) + ".unstored-"
    }

    /// Where a new spill goes, in order of preference (one name per location, stamped now).
    func newFiles() -> [String] {
        let stamp = "\(Int(Date().timeIntervalSince1970 * 1000)).jsonl"
        return [besideDatabase(stamped: stamp)] + fallbacks.map { URL(fileURLWithPath: $0).appendingPathComponent(fallbackPrefix + stamp).path }
    }

    /// Where the next start reads `file` (a spill file of this database from any location): beside
    /// the database, under its stamp.
    public func besideDatabase(_ file: String) -> String {
        besideDatabase(stamped: Self.stamp(of: file))
    }

    /// The file beside the database with the stamp `stamp` (`MILLISECONDS.jsonl`).
    private func besideDatabase(stamped stamp: String) -> String { base + ".unstored-" + stamp }

    /// A spill file's stamp (`MILLISECONDS.jsonl`), whichever location it is in.
    private static func stamp(of file: String) -> String { file.components(separatedBy: ".unstored-").last ?? file }

    /// Every spill file waiting, in every location, oldest first by its stamp.
    public func waiting() -> [String] {
        let own = URL(fileURLWithPath: base)
        var files = Self.files(in: own.deletingLastPathComponent().path, prefix: own.lastPathComponent + ".unstored-")
        for directory in fallbacks { files += Self.files(in: directory, prefix: fallbackPrefix) }
        return files.sorted { (Self.stamp(of: $0), $0) < (Self.stamp(of: $1), $1) }
    }

    /// Whether `file` is one of `waiting()`'s (compared as absolute paths: a database named by a
    /// relative path writes its spill files by a relative one).
    public func holds(_ file: String) -> Bool {
        let path = Self.absolute(file)
        return waiting().contains { Self.absolute($0) == path }
    }

    /// `path` as an absolute, standardized path (how spill files are compared).
    public static func absolute(_ path: String) -> String { URL(fileURLWithPath: path).standardizedFileURL.path }

    private static func files(in directory: String, prefix: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".jsonl") }.sorted()
            .map { URL(fileURLWithPath: directory).appendingPathComponent($0).path }
    }
}
