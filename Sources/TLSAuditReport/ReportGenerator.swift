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
    /// sees half a report, and a full disk leaves the previous file as it was.
    /// A path that exists and is not a regular file (`/dev/stdout`, a FIFO) is written in place:
    /// renaming over a device would replace it.
    public static func write(_ content: String, to path: String) throws {
        let url = URL(fileURLWithPath: path)
        if let type = try? FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType,
           type != .typeRegular {
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            try handle.write(contentsOf: Data(content.utf8))
            return
        }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(content.utf8).write(to: url, options: .atomic)
    }
}
