import Foundation
import Logging
import TLSAuditCore
import Yams
import TLSAuditSupport

/// One kind of sink: the `type` of an `alerts.sinks` entry. A kind owns its configuration keys
/// (reading and validating them), its delivery of alerts and of scheduled reports, its timeout,
/// and whatever it does beyond one delivery per alert (Alertmanager's clearing and re-sending).
/// Each kind is one file; `AlertSinkKinds.registered` lists them. The dispatcher, the report
/// scheduler and the configuration reader know sinks only through this protocol.
protocol AlertSink: Sendable, Hashable {
    /// The `type` naming this kind in the configuration.
    static var type: String { get }
    /// The keys this kind reads, beyond the ones every sink takes (`AlertSinkKinds.commonKeys`).
    static var keys: [String] { get }
    /// The sink of a configuration entry, its keys validated; nil after reporting what is wrong to `parser`.
    static func configured(_ entry: SinkEntry, parser: inout ConfigurationParser) -> Self?

    /// How long one delivery may take (0: it does not wait on anything).
    var timeout: Double { get }
    /// One attempt at delivering an alert. By default: the alert's JSON document through `send`.
    func deliver(_ alert: Alert, recent: RecentAlerts, logger: Logger) -> Result<Void, SinkDeliveryError>
    /// One attempt at delivering a JSON `body` (alerts and scheduled reports alike) with `headers`;
    /// a sink that writes log lines runs `log` instead.
    func send(_ body: Data, headers: [String: String], log: () -> Void) -> Result<Void, SinkDeliveryError>
    /// Set for a kind that takes alerts and not reports: what it is called in the error (`an Alertmanager sink`).
    var alertsOnly: String? { get }
    /// True for a kind that re-sends what is firing every `AlertDispatcher.resendRound` seconds.
    var resendsFiring: Bool { get }
    /// Re-sends the conditions firing now, by `recent` (failures are logged; the next round retries).
    func resendFiring(recent: [Alert], minimumSeverity: AlertSeverity, sink name: String, logger: Logger)
}

extension AlertSink {
    var alertsOnly: String? { nil }
    var resendsFiring: Bool { false }
    func resendFiring(recent: [Alert], minimumSeverity: AlertSeverity, sink name: String, logger: Logger) {}

    func deliver(_ alert: Alert, recent: RecentAlerts, logger: Logger) -> Result<Void, SinkDeliveryError> {
        let body: Data
        do {
            body = try JSONDocumentEncoder.tlsauditCompact.encode(alert) + Data("\n".utf8)
        } catch {
            return .failure(SinkDeliveryError(description: "cannot encode the alert: \(error)"))
        }
        return send(body, headers: ["X-Tlsaudit-Alert-Id": alert.id]) {
            let level: Logger.Level = switch alert.severity {
            case .critical: .critical
            case .error: .error
            case .warning: .warning
            case .info: .notice
            }
            var metadata: Logger.Metadata = ["alert": "\(alert.id)", "kind": "\(alert.kind.rawValue)", "target": "\(alert.target)",
                                             "address": "\(alert.address)"]
            for (key, value) in alert.changes { metadata[key] = "\(value)" }
            logger.log(level: level, "ALERT \(alert.text)", metadata: metadata)
        }
    }

    /// Equal to `other` when it is the same kind with the same settings.
    func isEqual(to other: any AlertSink) -> Bool { (other as? Self) == self }
}

/// The sink kinds tlsaudit knows: the configuration reads `type` and the known kinds from here.
/// A new kind is one line here.
enum AlertSinkKinds {
    static let registered: [any AlertSink.Type] = [LogSink.self, WebhookSink.self, CommandSink.self, AlertmanagerSink.self]

    /// The keys every sink takes, whatever its kind.
    static let commonKeys = ["name", "type", "timeout", "min_severity"]

    /// Every key a sink entry may have.
    static var keys: [String] {
        registered.flatMap { $0.keys }.reduce(into: commonKeys) { keys, key in if !keys.contains(key) { keys.append(key) } }
    }

    static var types: [String] { registered.map { $0.type } }

    static func kind(_ type: String) -> (any AlertSink.Type)? { registered.first { $0.type == type } }
}

/// A sink entry of the configuration, as a kind reads it: the entry, its keys, and the `timeout` every kind takes.
struct SinkEntry {
    let node: Node
    let mapping: Node.Mapping
    let timeout: Double
}

/// Why one delivery attempt failed.
struct SinkDeliveryError: Error, CustomStringConvertible {
    var description: String
}

/// The alerts most recently stored, read by the sinks that need them (to find what a clearing
/// alert clears): once per delivery round once a read succeeds; a failed read (none) is tried again
/// by the next delivery that asks.
final class RecentAlerts {
    private let load: () -> [Alert]?
    private var alerts: [Alert]?

    init(_ load: @escaping () -> [Alert]?) { self.load = load }

    var all: [Alert] {
        if alerts == nil { alerts = load() }
        return alerts ?? []
    }
}
