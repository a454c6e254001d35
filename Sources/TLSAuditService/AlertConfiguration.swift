import Foundation
import Logging
import Synchronization
public import TLSAuditCore
import TLSAuditProbe
public import TLSAuditStore

/// Where alerts go: a named sink of one kind (`AlertSink`). Names are the keys of delivery state in the database.
public struct SinkConfiguration: Sendable, Hashable {
    public var name: String
    /// The kind and its settings.
    var kind: any AlertSink
    public var minimumSeverity: AlertSeverity

    /// How long one delivery may take.
    var timeout: Double { kind.timeout }

    init(name: String, kind: any AlertSink, minimumSeverity: AlertSeverity = .info) {
        self.name = name
        self.kind = kind
        self.minimumSeverity = minimumSeverity
    }

    public static func == (lhs: SinkConfiguration, rhs: SinkConfiguration) -> Bool {
        lhs.name == rhs.name && lhs.minimumSeverity == rhs.minimumSeverity && lhs.kind.isEqual(to: rhs.kind)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(minimumSeverity)
        hasher.combine(kind)
    }
}

/// The `alerts:` section: when to raise alerts and where to send them.
public struct AlertConfiguration: Sendable, Hashable {
    public var rules: AlertRules
    public var sinks: [SinkConfiguration]

    /// `sinks` nil: one log sink.
    public init(rules: AlertRules = AlertRules(), sinks: [SinkConfiguration]? = nil) {
        self.rules = rules
        self.sinks = sinks ?? [SinkConfiguration(name: LogSink.type, kind: LogSink())]
    }

    var settings: AlertSettings {
        AlertSettings(rules: rules, sinks: sinks.map { AlertSettings.Sink(name: $0.name, minimumSeverity: $0.minimumSeverity) })
    }
}

extension AlertSettings {
    /// What a store calls inside its write: the alert detector with these rules, and the sinks
    /// each alert goes to (`nil`: the default rules and no sink, as `scan --database` stores).
    public static func decision(_ settings: AlertSettings?) -> AlertDecision {
        { previous, scan, observationID in
            let (alerts, memory) = decide(settings, previous: previous, result: scan.result, target: scan.target,
                                          host: scan.host, port: scan.port, observationID: observationID)
            return AlertOutcome(alerts: alerts, memory: memory)
        }
    }
}
