import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif
import TLSAuditCore
import TLSAuditStore
import TLSAuditSupport

/// The spill files' format and their durable writes: one stored scan per JSON line; a new file is
/// written beside its final name, synced and renamed, an appended one cut back to whole lines
/// when a write fails, and each directory entry synced (`SpillLocations` says where they go).
enum SpillFiles {
    /// Why no location took a spill: each location's failure, in order.
    struct SpillFailures: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `write` on each of `paths` in turn until one succeeds: that path, or every failure.
    static func writeToFirst(of paths: [String], _ write: (String) throws -> Void) -> Result<String, SpillFailures> {
        var failures: [String] = []
        for path in paths {
            do {
                try write(path)
                return .success(path)
            } catch {
                failures.append("\(error)")
            }
        }
        return .failure(SpillFailures(description: failures.joined(separator: "; ")))
    }

    /// One stored scan per line, as the spill files hold them.
    static func encodeLines(_ scans: [StoredScan]) throws -> Data {
        let encoder = JSONEncoder()
        var data = Data()
        for scan in scans {
            data += try encoder.encode(scan)
            data.append(0x0A)
        }
        return data
    }

    /// Appends `data` to `path` in one write and syncs it (and, when the file is new, its directory).
    /// A write that fails part-way is cut back off (`ftruncate`), so the file holds whole lines only.
    static func appendDurably(_ data: Data, to path: String) throws {
        let existed = FileManager.default.fileExists(atPath: path)
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StoreError(.other, "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let size = lseek(descriptor, 0, SEEK_END)
        if let failure = writeAndSync(data, to: descriptor) {
            if size >= 0 { _ = ftruncate(descriptor, size) }
            throw StoreError(failure == ENOSPC ? .full : .other, "cannot write \(path): \(String(cString: strerror(failure)))")
        }
        if !existed { syncDirectory(of: path) }
    }

    /// Writes `data` to a temporary file beside `path`, syncs it and renames it over `path`.
    static func writeDurably(_ data: Data, to path: String) throws {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StoreError(.other, "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let failure = writeAndSync(data, to: descriptor)
        close(descriptor)
        if let failure {
            unlink(temporary)
            throw StoreError(failure == ENOSPC ? .full : .other, "cannot write \(temporary): \(String(cString: strerror(failure)))")
        }
        guard rename(temporary, path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw StoreError(.other, "cannot rename \(temporary) to \(path): \(String(cString: strerror(failure)))")
        }
        syncDirectory(of: path)
    }

    /// Writes all of `data` to `descriptor` (again after EINTR and short writes), then `fsync`s it;
    /// the errno of the first failure, nil when all of it is on disk.
    private static func writeAndSync(_ data: Data, to descriptor: Int32) -> Int32? {
        if let failure = data.withUnsafeBytes({ DescriptorWrites.writeAll($0, to: descriptor) }) { return failure }
        return fsync(descriptor) == 0 ? nil : errno
    }

    /// Syncs the directory holding `path`, so that a rename or an unlink in it survives a crash.
    static func syncDirectory(of path: String) {
        let directory = open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return }
        fsync(directory)
        close(directory)
    }

    /// The scans a spill file holds, and the bytes of a last line cut by a crash (skipped: that
    /// result was never logged as kept; the whole lines before it were).
    static func read(_ path: String) throws -> (scans: [StoredScan], cutBytes: Int) {
        var bytes = try InputLimits.read(path, limit: Int.max, what: "unstored results file")
        var cutBytes = 0
        if let last = bytes.last, last != 0x0A {
            let cut = (bytes.lastIndex(of: 0x0A).map { $0 + 1 }) ?? 0
            cutBytes = bytes.count - cut
            bytes = Array(bytes[..<cut])
        }
        let decoder = JSONDecoder()
        return (try bytes.split(separator: 0x0A).map { try decoder.decode(StoredScan.self, from: Data($0)) }, cutBytes)
    }

    /// Stores the results of the spill file at `path` in `store`, in batches of 500, and removes
    /// the file once all of it is stored (in the file at the database's path: checked before each
    /// batch and after the last); the alerts the results raised. Throws, leaving the file for the
    /// next start, when any of it cannot be stored.
    /// A scan taken after a clock step back is stored by its time here, not in arrival order:
    /// newer scans of its address may have been stored since it was kept.
    static func replay(_ path: String, into store: any ScanStore, decide: AlertDecision, logger: Logger) throws -> [Alert] {
        var (scans, cutBytes) = try read(path)
        for index in scans.indices { scans[index].afterClockStepBack = false }
        if cutBytes > 0 {
            logger.warning("\(path) ends in an incomplete line (\(cutBytes) bytes, cut by a crash); it is skipped")
        }
        var alerts: [Alert] = []
        var leaseLost = 0
        for start in stride(from: 0, to: scans.count, by: 500) {
            try (store as? any FileBackedStore)?.checkFileIdentity()
            let outcome = try store.record(Array(scans[start..<min(start + 500, scans.count)]), decide: decide)
            alerts += outcome.alerts
            leaseLost += outcome.leaseLost.count
        }
        if leaseLost > 0 {
            logger.warning("results kept from an earlier run not stored: their fleet leases were lost meanwhile (other nodes scanned those targets since)",
                           metadata: ["results": "\(leaseLost)", "file": "\(path)"])
        }
        try (store as? any FileBackedStore)?.checkFileIdentity()
        guard unlink(path) == 0 || errno == ENOENT else {
            throw StoreError(.other, "cannot remove \(path): \(String(cString: strerror(errno)))")
        }
        syncDirectory(of: path)
        logger.notice("stored the scan results an earlier run could not store", metadata: [
            "stored": "\(scans.count - leaseLost)", "file": "\(path)",
        ])
        return alerts
    }
}
