import Foundation
import Logging
import TLSAuditCore
import TLSAuditStore
import TLSAuditSupport

/// tlsaudit's alerts as Alertmanager alerts (its API v2, `POST /api/v2/alerts`).
///
/// Alertmanager identifies an alert by its labels, so the labels name the condition, not the
/// occurrence: `alertname` (from the alert's kind), `target`, `address`, `severity` and `finding`
/// (the condition: `pin`, `ats`, `trust`, `reachability`, `expiry`, `split-view`, `certificate`).
/// A condition raised (pin.mismatch, ats.regressed, trust.broken, target.unreachable,
/// certificate.expiring/expired, split-view) fires from its `startsAt` and is sent again every
/// `AlertDispatcher.resendRound` seconds while it is the latest word on its condition
/// (Alertmanager resolves alerts not re-sent within its `resolve_timeout`); the alert that clears
/// it (pin.restored, ats.recovered, trust.restored, target.recovered, or a renewed certificate for
/// expiry) sends it once more with `endsAt`. A changed certificate is an event: it fires for an hour.
///
/// `type: alertmanager`: Alertmanager's API v2 at `url` (its base, like `http://127.0.0.1:9093`).
struct AlertmanagerSink: AlertSink {
    static let type = "alertmanager"
    static let keys = ["url", "ca_file"]

    /// The API's base URL (like `http://127.0.0.1:9093`), the timeout and `ca_file`: posted to as a
    /// webhook without a secret, at `endpoint(base.url)`.
    var base: WebhookSink

    var timeout: Double { base.timeout }

    static func configured(_ entry: SinkEntry, parser: inout ConfigurationParser) -> AlertmanagerSink? {
        guard let url = parser.httpURL(entry.mapping["url"]) else {
            parser.report(entry.node, "an alertmanager sink needs a 'url': Alertmanager's base address, like http://127.0.0.1:9093")
            return nil
        }
        if let secret = entry.mapping["secret"] { parser.report(secret, "an alertmanager sink takes no 'secret' (Alertmanager does not check signatures)") }
        let caFile = entry.mapping["ca_file"].flatMap { parser.certificateFile($0) }
        return AlertmanagerSink(base: WebhookSink(url: url, secret: nil, timeout: entry.timeout, caFile: caFile))
    }

    var alertsOnly: String? { "an Alertmanager sink" }

    /// Reports are not Alertmanager alerts.
    func send(_ body: Data, headers: [String: String], log: () -> Void) -> Result<Void, SinkDeliveryError> {
        .failure(SinkDeliveryError(description: "an Alertmanager sink takes alerts, not reports"))
    }

    /// An alert that clears a condition ends it; one that clears nothing posts nothing.
    func deliver(_ alert: Alert, recent: RecentAlerts, logger: Logger) -> Result<Void, SinkDeliveryError> {
        let documents = Self.documents(delivering: alert, recent: recent.all)
        return documents.isEmpty ? .success(()) : post(documents)
    }

    /// Alertmanager resolves an alert not re-sent within its resolve_timeout (5 min by default).
    var resendsFiring: Bool { true }

    func resendFiring(recent: [Alert], minimumSeverity: AlertSeverity, sink name: String, logger: Logger) {
        let documents = Self.firing(recent).filter { $0.severity >= minimumSeverity }.map { Self.document(for: $0) }
        guard !documents.isEmpty else { return }
        if case .failure(let error) = post(documents) {
            logger.warning("cannot re-send the firing alerts to Alertmanager; next try in \(Int(AlertDispatcher.resendRound)) s",
                           metadata: ["sink": "\(name)", "firing": "\(documents.count)", "error": "\(error.description)"])
        }
    }

    private func post(_ documents: [[String: Any]]) -> Result<Void, SinkDeliveryError> {
        do {
            return WebhookSink.post(url: Self.endpoint(base.url), body: try Self.body(documents), secret: nil,
                                    headers: [:], timeout: base.timeout, caFile: base.caFile)
        } catch {
            return .failure(SinkDeliveryError(description: "cannot encode the alerts: \(error)"))
        }
    }

    /// How long an event (a changed certificate) shows as firing.
    static let eventDuration: Double = 3_600

    /// What an alert kind is to Alertmanager.
    enum Role {
        /// Raises the condition `finding`.
        case raises(finding: String)
        /// Clears the condition `finding` (whose raising kinds are `cleared`).
        case clears(finding: String, cleared: [AlertKind])
        /// An event: fires for `eventDuration`.
        case event(finding: String)
    }

    static func role(of kind: AlertKind) -> Role {
        switch kind {
        case .pinMismatch: .raises(finding: "pin")
        case .pinRestored: .clears(finding: "pin", cleared: [.pinMismatch])
        case .atsRegressed: .raises(finding: "ats")
        case .atsRecovered: .clears(finding: "ats", cleared: [.atsRegressed])
        case .trustBroken: .raises(finding: "trust")
        case .trustRestored: .clears(finding: "trust", cleared: [.trustBroken])
        case .unreachable: .raises(finding: "reachability")
        case .reachable: .clears(finding: "reachability", cleared: [.unreachable])
        case .certificateExpiring, .certificateExpired: .raises(finding: "expiry")
        case .splitView: .raises(finding: "split-view")
        case .trustInputStale, .trustInputRefreshFailing: .raises(finding: "trust-input")
        case .trustInputCurrent: .clears(finding: "trust-input", cleared: [.trustInputStale, .trustInputRefreshFailing])
        case .certificateChanged: .event(finding: "certificate")
        case .pinForecastBreak: .event(finding: "pin-forecast")
        case .ctLogInconsistent: .event(finding: "ct-log")
        case .ctUnexpectedIssuer: .event(finding: "ct-issuer")
        }
    }

    /// `certificate.expired` becomes `TLSAuditCertificateExpired`.
    static func alertName(_ kind: AlertKind) -> String {
        "TLSAudit" + kind.rawValue.split(whereSeparator: { $0 == "." || $0 == "-" }).map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    /// The Alertmanager alert for `alert` (raised or event), ending at `endsAt` when given.
    static func document(for alert: Alert, endsAt: Date? = nil) -> [String: Any] {
        let finding: String = switch role(of: alert.kind) {
        case .raises(let finding), .clears(let finding, _), .event(let finding): finding
        }
        var document: [String: Any] = [
            "labels": ["alertname": alertName(alert.kind), "target": alert.target, "address": alert.address,
                       "severity": alert.severity.rawValue, "finding": finding, "source": "tlsaudit"],
            "annotations": ["summary": alert.summary, "description": alert.text, "alert_id": alert.id],
            "startsAt": Timestamp.format(alert.createdAt),
        ]
        if case .event = role(of: alert.kind) {
            document["endsAt"] = Timestamp.format(endsAt ?? alert.createdAt.addingTimeInterval(eventDuration))
        } else if let endsAt {
            document["endsAt"] = Timestamp.format(endsAt)
        }
        return document
    }

    /// What to post when `alert` is delivered: itself, or for an alert that clears a condition,
    /// the condition's latest raising alert (among `recent`) ending now. Empty: nothing to clear.
    static func documents(delivering alert: Alert, recent: [Alert]) -> [[String: Any]] {
        switch role(of: alert.kind) {
        case .raises:
            return [document(for: alert)]
        case .event:
            // A replaced certificate also ends an expiry condition of the one it replaced.
            let ended = firing(recent.filter { $0.createdAt < alert.createdAt })
                .filter { $0.target == alert.target && $0.address == alert.address && [.certificateExpiring, .certificateExpired].contains($0.kind) }
            return [document(for: alert)] + ended.map { document(for: $0, endsAt: alert.createdAt) }
        case .clears(_, let cleared):
            let raised = recent.filter { cleared.contains($0.kind) && $0.target == alert.target && $0.address == alert.address
                && $0.createdAt <= alert.createdAt }
            guard let latest = raised.max(by: { $0.createdAt < $1.createdAt }) else { return [] }
            return [document(for: latest, endsAt: alert.createdAt)]
        }
    }

    /// The conditions firing now, by the alerts in `recent` (any order): per target, address and
    /// condition, the newest alert when it raises (expiry: unless a newer certificate.changed
    /// says the certificate was replaced).
    static func firing(_ recent: [Alert]) -> [Alert] {
        var latest: [String: Alert] = [:]
        for alert in recent.sorted(by: { $0.createdAt < $1.createdAt }) {
            switch role(of: alert.kind) {
            case .raises(let finding), .clears(let finding, _):
                latest["\(alert.target)\u{0}\(alert.address)\u{0}\(finding)"] = alert
            case .event:
                // A new certificate ends the expiry condition of the one it replaced.
                latest.removeValue(forKey: "\(alert.target)\u{0}\(alert.address)\u{0}expiry")
            }
        }
        return latest.values.filter { if case .raises = role(of: $0.kind) { true } else { false } }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    /// The API endpoint under the configured base URL (`http://am:9093` or `.../alertmanager`).
    static func endpoint(_ base: URL) -> URL {
        base.path.hasSuffix("/api/v2/alerts") ? base : base.appendingPathComponent("api/v2/alerts")
    }

    static func body(_ documents: [[String: Any]]) throws -> Data {
        try JSONSerialization.data(withJSONObject: documents, options: [.sortedKeys])
    }
}
