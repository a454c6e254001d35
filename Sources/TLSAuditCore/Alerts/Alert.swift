public import Foundation

/// What an alert is about. Raw values are stable: receivers route on them.
public enum AlertKind: String, Codable, Sendable, CaseIterable {
    case pinMismatch = "pin.mismatch"
    case pinRestored = "pin.restored"
    case certificateChanged = "certificate.changed"
    case atsRegressed = "ats.regressed"
    case atsRecovered = "ats.recovered"
    case trustBroken = "trust.broken"
    case trustRestored = "trust.restored"
    case certificateExpiring = "certificate.expiring"
    case certificateExpired = "certificate.expired"
    case unreachable = "target.unreachable"
    case reachable = "target.recovered"
}

/// How urgent an alert is.
public enum AlertSeverity: String, Codable, Sendable, Comparable, CaseIterable {
    case info, warning, error, critical

    private var rank: Int { Self.allCases.firstIndex(of: self)! }
    public static func < (lhs: AlertSeverity, rhs: AlertSeverity) -> Bool { lhs.rank < rhs.rank }
}

/// One alert: a transition seen at one target address. `id` is stable and unique, so a
/// receiver that gets an alert twice (at-least-once delivery) can drop the repeat.
public struct Alert: Hashable, Codable, Sendable {
    public var id: String
    public var kind: AlertKind
    public var severity: AlertSeverity
    public var target: String
    public var host: String
    public var port: Int
    public var address: String
    public var createdAt: Date
    /// One sentence for humans.
    public var summary: String
    /// What changed: old and new fingerprints, pins, rules, days left (keys documented in docs/alerts.md).
    public var changes: [String: String]

    public init(id: String, kind: AlertKind, severity: AlertSeverity, target: String, host: String, port: Int,
                address: String, createdAt: Date, summary: String, changes: [String: String]) {
        self.id = id
        self.kind = kind
        self.severity = severity
        self.target = target
        self.host = host
        self.port = port
        self.address = address
        self.createdAt = createdAt
        self.summary = summary
        self.changes = changes
    }

    /// `[CRITICAL] api.example.com:443 (10.0.0.1) pin.mismatch: ...`: the line Slack-compatible receivers show.
    public var text: String {
        "[\(severity.rawValue.uppercased())] \(target) (\(address)) \(kind.rawValue): \(summary)"
    }
}

/// The JSON document sinks receive (schema `tlsaudit.alert/1`).
public struct AlertDocument: Codable, Sendable {
    public var schema = "tlsaudit.alert/1"
    public var id: String
    public var kind: AlertKind
    public var severity: AlertSeverity
    public var target: String
    public var host: String
    public var port: Int
    public var address: String
    public var createdAt: Date
    public var summary: String
    /// For Slack-compatible receivers.
    public var text: String
    public var changes: [String: String]

    public init(_ alert: Alert) {
        id = alert.id
        kind = alert.kind
        severity = alert.severity
        target = alert.target
        host = alert.host
        port = alert.port
        address = alert.address
        createdAt = alert.createdAt
        summary = alert.summary
        text = alert.text
        changes = alert.changes
    }
}
