public import Foundation
public import TLSAuditCore
public import TLSAuditStore

/// What a compliance report covers.
public struct ReportQuery: Sendable, Hashable {
    /// The period: scans with `start < started_at <= end`. `end` is also the report's "now".
    public var start: Date
    public var end: Date
    /// Judge every scan under this policy, re-judged from the stored observations; nil: each scan's
    /// verdict under the policy it was scanned with.
    public var policy: CompliancePolicy?
    /// Only these target keys (nil: every target the database has a current state for).
    public var targets: Set<String>?
    /// Only the targets carrying every one of these tags (`report --tag`; empty: no restriction).
    public var tags: [String] = []
    /// Seconds between the trend's samples.
    public var step: TimeInterval

    /// Whether a stored target is in the report: one of `targets`, or a vantage of one (`KEY@VANTAGE`).
    public func includes(stored target: String) -> Bool {
        guard let targets else { return true }
        return VantageTarget.isStored(target, of: targets)
    }

    /// Whether a stored address is in the report: its target is included and carries every tag asked for.
    public func includes(_ address: StoredAddress) -> Bool {
        includes(stored: address.key.target) && TargetTags.carries(address.tags, every: tags)
    }

    /// Whether the report covers only some of the stored targets (their scans are then counted apart).
    var restricted: Bool { targets != nil || !tags.isEmpty }

    public init(start: Date, end: Date, policy: CompliancePolicy? = nil, targets: Set<String>? = nil, tags: [String] = [],
                step: TimeInterval) {
        self.start = start
        self.end = end
        self.policy = policy
        self.targets = targets
        self.tags = tags
        self.step = step
    }
}

/// Judges a stored result again under a policy at a time (`AddressAssessment.rejudge`; the
/// report's tests pass their own).
public typealias Rejudging = @Sendable (_ result: AddressScanResult, _ hostname: String, _ policy: CompliancePolicy,
                                        _ time: Date) -> (findings: [Finding], verdict: PolicyVerdict)

/// One scan's verdict, as a report needs it.
public struct ReportVerdict: Sendable, Hashable {
    public var condition: AddressCondition
    public var policy: CompliancePolicy
    public var failedRules: [FindingID]
    /// Ids of the trust errors (`trust.expired`, ...); empty when the chain is trusted.
    public var trustErrors: [FindingID]
    /// Ids of the conformance lints of the scan (`lint.serial-number`, ...), for the current state.
    public var lints: [FindingID] = []

    public init(condition: AddressCondition, policy: CompliancePolicy, failedRules: [FindingID], trustErrors: [FindingID]) {
        self.condition = condition
        self.policy = policy
        self.failedRules = failedRules
        self.trustErrors = trustErrors
    }
}

/// A certificate of an address's current chain (path as built, else as presented).
public typealias ReportCertificate = ChainCertificate

/// One target address as of the report's end.
public struct ReportAddress: Sendable {
    public var target: String
    public var address: String
    public var host: String
    public var port: Int
    public var lastScanAt: Date
    public var verdict: ReportVerdict
    /// `none`, `match`, `mismatch`, ... (the pin check of the last scan that reached the server).
    public var pinState: PinEvaluation.State
    public var pinMessage: String?
    public var protocolVersion: TLSVersion?
    public var cipher: String?
    public var failureCategory: ProbeFailureCategory?
    public var failureMessage: String?
    /// The last scan that reached the server (nil: never, as far as the history goes).
    public var lastReachableAt: Date?
    public var chain: [ReportCertificate]
    /// The opt-in checks' reports of the last scan that reached the server.
    public var inventory: ServerInventory? = nil
    public var headers: HTTPHeadersReport? = nil
    public var vulnerabilities: VulnerabilityReport? = nil
    public var clients: ClientSimulationReport? = nil
    /// The reports of the opt-in checks without a field of their own, by check name.
    public var checkReports: [String: CheckReport]? = nil
    /// The target's configured tags as of its latest scan.
    public var tags: [String] = []
    /// The latest scan's outcome for the app whose rules judge the target (nil: none, or not stored).
    public var app: AppHostOutcome? = nil
}

/// The fleet's counts at one instant.
public struct ReportTrendSample: Sendable, Hashable {
    public var at: Date
    public var compliant: Int
    public var notCompliant: Int
    public var unreachable: Int
}

/// A change of verdict between two scans of an address that reached the server.
public struct ReportTransition: Sendable, Hashable {
    public enum Kind: String, Sendable, Codable {
        /// Was compliant, or failed fewer rules, and now fails (the rules listed are the new ones).
        case newFailure = "new-failure"
        /// Was not compliant and now is.
        case fix
    }

    public var kind: Kind
    public var target: String
    public var address: String
    public var at: Date
    public var policy: CompliancePolicy
    /// For a new failure: the rules failing now that did not before. For a fix: the rules that failed.
    public var rules: [FindingID]
}

/// An alert as a report lists it.
public typealias ReportAlert = AlertSummary

/// Everything a report is computed from: the stored facts, with the trend and transitions
/// computed from them by `ReportReader`.
public struct ReportData: Sendable {
    public var query: ReportQuery
    public var addresses: [ReportAddress]
    /// One sample at the start, one per step, one at the end.
    public var trend: [ReportTrendSample]
    public var transitions: [ReportTransition]
    /// Alerts raised in the period, oldest first.
    public var alerts: [ReportAlert]
    /// Scans stored in the period for the targets reported on (all their addresses), and how many failed.
    public var scans: Int
    public var failedScans: Int
    /// Distinct observations re-judged under `query.policy` (0 without `--policy`).
    public var rejudged: Int
}
