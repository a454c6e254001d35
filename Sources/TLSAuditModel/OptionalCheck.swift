public import TLSAuditSupport

/// The name of an opt-in check (`checks:` in the configuration, `scan --checks`). The checks
/// themselves, and which names exist, are the probe's (`AddressChecks.shipped`).
public struct OptionalCheck: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (lhs: OptionalCheck, rhs: OptionalCheck) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The configuration inventory (`ServerInventory`).
    public static let inventory = OptionalCheck(rawValue: "inventory")
    /// HTTP security headers over HTTPS and the redirect from plain HTTP (`HTTPHeadersReport`).
    public static let headers = OptionalCheck(rawValue: "headers")
    /// Heartbleed, CCS injection and ROBOT probes, and the named verdicts (`VulnerabilityReport`).
    public static let vulnerabilities = OptionalCheck(rawValue: "vulnerabilities")
    /// Client simulation: which real clients connect, with what (`ClientSimulationReport`).
    public static let clients = OptionalCheck(rawValue: "clients")
}

/// What an opt-in check without a field of its own on `AddressScanResult` found at one address:
/// its findings (judged with the scan's, in its verdict) and its report, kept as JSON.
public struct CheckReport: Hashable, Codable, Sendable {
    /// What the check found wrong (or worth saying), with the scan's other findings too.
    public var findings: [Finding]
    /// The check's own report, as it made it (nil when it has nothing more than its findings).
    public var report: JSONValue?
    /// How long the check took; not part of what makes two scans the same.
    public var durationMs: Int

    public init(findings: [Finding], report: JSONValue? = nil, durationMs: Int) {
        self.findings = findings
        self.report = report
        self.durationMs = durationMs
    }
}

extension CheckReport {
    /// The findings of `reports`, in the order of their checks' names.
    public static func findings(of reports: [String: CheckReport]?) -> [Finding] {
        (reports ?? [:]).sorted { $0.key < $1.key }.flatMap(\.value.findings)
    }
}
