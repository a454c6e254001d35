public import Foundation
public import TLSAuditCore
public import TLSAuditStore

/// What to report on; shared by `tlsaudit report` and the service's scheduled reports.
public struct ReportRequest: Sendable, Hashable {
    /// The period's length in seconds, ending at `end`.
    public var since: TimeInterval
    public var end: Date
    public var policy: CompliancePolicy?
    /// Only these target keys (e.g. the configured ones); nil: every target in the database.
    public var targets: Set<String>?
    public var expiringWithinDays: Int

    public init(since: TimeInterval, end: Date, policy: CompliancePolicy? = nil, targets: Set<String>? = nil,
                expiringWithinDays: Int = 30) {
        self.since = since
        self.end = end
        self.policy = policy
        self.targets = targets
        self.expiringWithinDays = expiringWithinDays
    }
}

public enum ReportGenerator {
    /// Reads the store and builds the report.
    public static func report(from store: any ScanStore, _ request: ReportRequest) throws -> ComplianceReport {
        let query = ReportBuilder.query(end: request.end, since: request.since, policy: request.policy, targets: request.targets)
        return ReportBuilder.build(try store.reportData(query), expiringWithinDays: request.expiringWithinDays)
    }

    /// Writes `content` to `path` atomically (a temporary file renamed into place): a reader never
    /// sees half a report, and a full disk leaves the previous file as it was. A symlink is
    /// followed (its target is replaced, the link stays); a device or FIFO (`/dev/stdout`, a pipe)
    /// is written in place, appending, since renaming over it would replace it.
    public static func write(_ content: String, to path: String) throws {
        let url = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        let type = (try? FileManager.default.attributesOfItem(atPath: url.path)[.type]) as? FileAttributeType
        if path.hasPrefix("/dev/") || path.hasPrefix("/proc/") || (type != nil && type != .typeRegular && type != .typeDirectory) {
            let descriptor = open(path, O_WRONLY | O_APPEND)
            guard descriptor >= 0 else { throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path]) }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            try handle.write(contentsOf: Data(content.utf8))
            return
        }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(content.utf8).write(to: url, options: .atomic)
    }
}
