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
    /// Only the targets carrying every one of these tags (empty: no restriction).
    public var tags: [String] = []
    public var expiringWithinDays: Int
    /// The compliance goal in percent the trend is coloured against.
    public var goal: Double

    public init(since: TimeInterval, end: Date, policy: CompliancePolicy? = nil, targets: Set<String>? = nil,
                expiringWithinDays: Int = SettingBounds.expiringWithinDays, goal: Double = ComplianceReport.defaultGoal) {
        self.since = since
        self.end = end
        self.policy = policy
        self.targets = targets
        self.expiringWithinDays = expiringWithinDays
        self.goal = goal
    }
}

public enum ReportGenerator {
    /// Reads the store and builds the report.
    public static func report(from store: any ScanStore, _ request: ReportRequest) throws -> ComplianceReport {
        var query = ReportBuilder.query(end: request.end, since: request.since, policy: request.policy, targets: request.targets)
        query.tags = request.tags
        return ReportBuilder.build(try ReportData.read(query, from: store, rejudge: AddressAssessment.rejudge), expiringWithinDays: request.expiringWithinDays, goal: request.goal)
    }
}
