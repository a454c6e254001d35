public import Foundation
public import TLSAuditCore
import TLSAuditStore

/// A compliance report: the fleet at the end of a period, how it got there, and what needs doing.
/// Its JSON form (`schema` = `tlsaudit.report/1`) is documented in docs/report.md and
/// docs/report.schema.json; fields are only ever added within a schema version.
public struct ComplianceReport: Codable, Sendable {
    public static let schemaVersion = "tlsaudit.report/1"

    public var schema: String
    public var generatedAt: Date
    public var period: Period
    /// The policy every verdict was judged under, or `as-scanned` (each scan's own policy).
    public var policy: String
    public var summary: Summary
    /// The fleet's counts from the start of the period to its end, at a fixed step.
    public var trend: [TrendPoint]
    public var targets: [TargetEntry]
    public var changes: Changes
    /// Every certificate of every current chain expiring within `expiringWithinDays` (or expired),
    /// soonest first.
    public var expiring: [ExpiringCertificate]
    public var expiringWithinDays: Int
    public var unreachable: [UnreachableEntry]
    /// What to fix first: the failing (and soon-expiring) addresses, most urgent first, each
    /// with its one-line fix. Added in tlsaudit.report/1 on 2026-11-23.
    public var fixFirst: [FixItem] = []
    /// The compliance the trend is coloured against, in percent (`report --goal`).
    public var goal: Double = ComplianceReport.defaultGoal
    /// `goal` unless `report --goal` (or a request) says otherwise.
    public static let defaultGoal = SettingBounds.goal.defaultValue
    /// One entry per app named by an `app:BUNDLE_ID` tag among the targets, by bundle id; absent
    /// when no target carries one. Part of tlsaudit.report/1.
    public var apps: [AppEntry]?

    /// The targets of one app (those tagged `app:BUNDLE_ID`), judged as that app's client judges them.
    public struct AppEntry: Codable, Sendable, Hashable {
        public var bundle: String
        /// How many targets carry the app's tag, and how many the app's client connects to at every address.
        public var targets: Int
        public var compliant: Int
        public var addresses: [AppAddress]
    }

    /// One address of an app's target: whether the app connects, on which exception, or why not.
    public struct AppAddress: Codable, Sendable, Hashable {
        public var target: String
        public var address: String
        /// `compliant` (the app's client connects), `not-compliant`, `unreachable`, or `not-judged`
        /// (no outcome for the app stored with the latest scan).
        public var status: String
        /// What the compliant verdict relies on: "NSExceptionDomains 'a.example' (NSExceptionMinimumTLSVersion)", "default ATS".
        public var reliesOn: String?
        /// Why the app's client does not connect (finding ids).
        public var reasons: [String]
        /// What the app logs when it does not connect: `NSURLErrorDomain -1202 NSURLErrorServerCertificateUntrusted (...)`.
        public var error: String?
    }

    /// One address to fix, in the order `ReportBuilder.fixFirst` gives.
    public struct FixItem: Codable, Sendable, Hashable {
        /// `expired`, `untrusted`, `pin-mismatch`, `expiring`, `protocol`, `handshake` (reached, but
        /// the handshake failed: a client certificate required, say), `certificate`, `unreachable`.
        public var category: String
        public var target: String
        public var address: String
        /// What is wrong, in a few words (`trust.expired`, `expires in 5 days`, ...).
        public var problem: String
        /// The one-line fix.
        public var fix: String
    }

    public struct Period: Codable, Sendable, Hashable {
        public var start: Date
        public var end: Date
        /// Seconds between trend points.
        public var step: Int
    }

    public struct Summary: Codable, Sendable, Hashable {
        public var targets: Int
        public var addresses: Int
        public var compliant: Int
        public var notCompliant: Int
        public var unreachable: Int
        /// Compliant addresses as a percentage of those reached (nil when none was), at the end
        /// and at the start of the period.
        public var compliance: Double?
        public var complianceAtStart: Double?
        /// `up`, `down`, `flat`, or `unknown` (no data at the start).
        public var trend: String
        /// Scans stored in the period for these targets (all their addresses), and how many reached nothing.
        public var scans: Int
        public var failedScans: Int
        /// Distinct observations judged again under `policy` (0 when each scan's own verdict is used).
        public var rejudgedObservations: Int
    }

    public struct TrendPoint: Codable, Sendable, Hashable {
        public var at: Date
        public var compliant: Int
        public var notCompliant: Int
        public var unreachable: Int
        /// Percentage of reached addresses that were compliant; nil when none was reached.
        public var compliance: Double?
    }

    public struct TargetEntry: Codable, Sendable {
        public var target: String
        public var host: String
        public var port: Int
        /// The worst status of its addresses.
        public var status: AddressCondition
        public var addresses: [AddressEntry]
        /// The target's configured tags; absent when it has none.
        public var tags: [String]?
    }

    public struct AddressEntry: Codable, Sendable {
        public var address: String
        public var status: AddressCondition
        public var policy: CompliancePolicy
        public var failedRules: [FindingID]
        /// Nil when the address was never reached.
        public var trusted: Bool?
        public var trustErrors: [FindingID]
        /// Conformance lints of the latest scan (`lint.*`: warnings, never in the verdict).
        public var lints: [FindingID] = []
        /// `none` (no pins), `match` or `mismatch`.
        public var pinState: PinEvaluation.State
        public var pinMessage: String?
        /// The earliest notAfter over the current chain, and the whole days left until it at the report's end.
        public var earliestExpiry: Date?
        public var daysLeft: Int?
        public var protocolVersion: TLSVersion?
        public var cipher: String?
        public var lastScanAt: Date
        public var failureCategory: ProbeFailureCategory?
        public var failureMessage: String?
        /// The opt-in checks of the last scan that reached the server, and what they found wrong
        /// (absent when it ran none).
        public var hygiene: Hygiene?
    }

    public struct Hygiene: Codable, Sendable, Hashable {
        public var checks: [OptionalCheck]
        /// One short phrase per problem (`Heartbleed (CVE-2014-0160)`, `no HSTS`); empty: none found.
        public var problems: [String]
    }

    public struct Changes: Codable, Sendable {
        /// New leaf certificates (from `certificate.changed` alerts).
        public var certificates: [CertificateChange]
        public var newFailures: [RuleChange]
        public var fixes: [RuleChange]
        /// `pin.mismatch` and `pin.restored` alerts.
        public var pinEvents: [AlertEntry]
        /// Every alert raised in the period.
        public var alerts: [AlertEntry]
    }

    public struct CertificateChange: Codable, Sendable, Hashable {
        public var at: Date
        public var target: String
        public var address: String
        public var oldFingerprint: String
        public var newFingerprint: String
        /// True when the new certificate has the old one's key (a renewal; public-key pins still hold).
        public var sameKey: Bool
        public var summary: String
    }

    public struct RuleChange: Codable, Sendable, Hashable {
        public var at: Date
        public var target: String
        public var address: String
        public var policy: CompliancePolicy
        /// New failures: the rules failing now that did not before. Fixes: the rules that failed.
        public var rules: [FindingID]
    }

    public struct AlertEntry: Codable, Sendable, Hashable {
        public var id: String
        public var at: Date
        public var kind: AlertKind
        public var severity: AlertSeverity
        public var target: String
        public var address: String
        public var summary: String
    }

    public struct ExpiringCertificate: Codable, Sendable, Hashable {
        public var fingerprint: String
        public var subject: String
        public var commonName: String?
        public var issuer: String
        public var notAfter: Date
        /// Negative once expired.
        public var daysLeft: Int
        /// 0 for a leaf; the smallest depth it was seen at.
        public var depth: Int
        /// `target (address)` for every address whose chain has it.
        public var usedBy: [String]
    }

    public struct UnreachableEntry: Codable, Sendable, Hashable {
        public var target: String
        public var address: String
        public var lastScanAt: Date
        /// The last scan that reached the server, nil when none in the stored history did.
        public var lastReachableAt: Date?
        public var failureCategory: ProbeFailureCategory?
        public var failureMessage: String?
    }
}
