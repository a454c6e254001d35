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
    /// A fleet's vantage points see different leaf certificates, keys or verdicts for one target.
    case splitView = "split-view"
    /// A trust input (CT log list, distrust table, Apple's roots) is older than its `max_age`.
    case trustInputStale = "trust-input.stale"
    /// A trust input's refresh failed `TrustInputKeeper.failuresBeforeAlert` times in a row.
    case trustInputRefreshFailing = "trust-input.refresh-failing"
    /// A stale or failing trust input is current again.
    case trustInputCurrent = "trust-input.current"
    /// A certificate in a CT log for a pinned name that the name's pins would refuse (`ct: {follow: true}`).
    case pinForecastBreak = "pin.forecast-break"
    /// A CT log signed a head that forks or rewinds its history, or served entries its tree does not hold.
    case ctLogInconsistent = "ct.log-inconsistent"
    /// A certificate in a CT log for a watched domain from a CA its `ct: watch` entry does not allow.
    case ctUnexpectedIssuer = "ct.unexpected-issuer"

    /// A pin event (`pin.mismatch`, `pin.restored`): what a report's pin section lists.
    public var isPinEvent: Bool { self == .pinMismatch || self == .pinRestored }
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

    /// The document sinks receive and the store keeps: schema `tlsaudit.alert/1` (docs/alerts.md),
    /// the fields above plus `schema` and `text`.
    public static let schemaVersion = "tlsaudit.alert/1"

    enum CodingKeys: String, CodingKey {
        case schema, id, kind, severity, target, host, port, address, createdAt, summary, text, changes
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.schemaVersion, forKey: .schema)
        try container.encode(id, forKey: .id)
        try container.encode(kind, forKey: .kind)
        try container.encode(severity, forKey: .severity)
        try container.encode(target, forKey: .target)
        try container.encode(host, forKey: .host)
        try container.encode(port, forKey: .port)
        try container.encode(address, forKey: .address)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(summary, forKey: .summary)
        try container.encode(text, forKey: .text)
        // Counts as JSON numbers and flags as booleans, not strings (docs/alerts.md).
        var values = container.nestedContainer(keyedBy: ChangeKey.self, forKey: .changes)
        for key in changes.keys.sorted() {
            let value = changes[key]!
            if Self.numericChanges.contains(key), let number = Int(value) {
                try values.encode(number, forKey: ChangeKey(key))
            } else if Self.booleanChanges.contains(key), let flag = Bool(value) {
                try values.encode(flag, forKey: ChangeKey(key))
            } else {
                try values.encode(value, forKey: ChangeKey(key))
            }
        }
    }

    /// `changes` keys whose values are counts, and flags.
    static let numericChanges: Set = ["failures", "days_left", "depth", "age_days"]
    static let booleanChanges: Set = ["same_key"]

    struct ChangeKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try container.decode(String.self, forKey: .id), kind: try container.decode(AlertKind.self, forKey: .kind),
                  severity: try container.decode(AlertSeverity.self, forKey: .severity),
                  target: try container.decode(String.self, forKey: .target), host: try container.decode(String.self, forKey: .host),
                  port: try container.decode(Int.self, forKey: .port), address: try container.decode(String.self, forKey: .address),
                  createdAt: try container.decode(Date.self, forKey: .createdAt),
                  summary: try container.decode(String.self, forKey: .summary),
                  changes: try Self.decodeChanges(try container.nestedContainer(keyedBy: ChangeKey.self, forKey: .changes)))
    }

    /// Values as strings, whether stored as strings (before 2026-11-23), numbers or booleans.
    static func decodeChanges(_ container: KeyedDecodingContainer<ChangeKey>) throws -> [String: String] {
        var changes: [String: String] = [:]
        for key in container.allKeys {
            // A decoder converting from snake_case hands these keys over camelCased: they are snake_case.
            let name = key.stringValue.reduce(into: "") { out, character in
                if character.isUppercase { out += "_" + character.lowercased() } else { out.append(character) }
            }
            if let text = try? container.decode(String.self, forKey: key) {
                changes[name] = text
            } else if let number = try? container.decode(Int.self, forKey: key) {
                changes[name] = String(number)
            } else {
                changes[name] = String(try container.decode(Bool.self, forKey: key))
            }
        }
        return changes
    }
}
