public import Foundation

/// The fleet at a glance for the status page (`/api/v1/summary`): the compliance report's summary,
/// trend and expiring certificates, computed by the same code as `tlsaudit report --format json`
/// (its `summary`, `trend` and `expiring` sections, unchanged).
public struct SummaryDocument: Codable, Sendable {
    public static let schemaVersion = "tlsaudit.summary/1"

    public var schema = SummaryDocument.schemaVersion
    public var generatedAt: Date
    public var period: ComplianceReport.Period
    public var policy: String
    public var summary: ComplianceReport.Summary
    public var trend: [ComplianceReport.TrendPoint]
    public var expiring: [ComplianceReport.ExpiringCertificate]
    public var expiringWithinDays: Int
    public var goal: Double

    /// The report's sections the overview shows.
    public init(_ report: ComplianceReport) {
        generatedAt = report.generatedAt
        period = report.period
        policy = report.policy
        summary = report.summary
        trend = report.trend
        expiring = report.expiring
        expiringWithinDays = report.expiringWithinDays
        goal = report.goal
    }
}
