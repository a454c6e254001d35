import Foundation
import Testing
import TLSAuditCore
@testable import TLSAuditService
import TLSAuditSupport

/// What tlsaudit's alerts become for Alertmanager: names, the conditions firing, what a clearing
/// alert ends (the end-to-end test in MonitoringTests runs a real Alertmanager).
@Suite("alertmanager sink: conditions and documents")
struct AlertmanagerSinkTests {
    static func alert(_ kind: AlertKind, _ target: String, at seconds: Double, severity: AlertSeverity = .critical) -> Alert {
        Alert(id: "\(kind.rawValue)-\(target)-\(Int(seconds))", kind: kind, severity: severity, target: target, host: "\(target).example",
              port: 443, address: "192.0.2.1", createdAt: Date(timeIntervalSince1970: 1_800_000_000 + seconds), summary: "s", changes: [:])
    }

    static func labels(_ document: [String: Any]) -> [String: String] { document["labels"] as? [String: String] ?? [:] }

    @Test("alert names: CamelCase of the kind, prefixed")
    func names() {
        #expect(AlertmanagerSink.alertName(.certificateExpired) == "TLSAuditCertificateExpired")
        #expect(AlertmanagerSink.alertName(.splitView) == "TLSAuditSplitView")
        #expect(AlertmanagerSink.alertName(.unreachable) == "TLSAuditTargetUnreachable")
        #expect(Set(AlertKind.allCases.map(AlertmanagerSink.alertName)).count == AlertKind.allCases.count, "one name per kind")
    }

    @Test("firing: the newest word on each condition, when it raises; a changed certificate ends an expiry")
    func firing() {
        let recent = [
            Self.alert(.pinMismatch, "pinned", at: 10), Self.alert(.pinRestored, "pinned", at: 20, severity: .info),
            Self.alert(.atsRegressed, "regressed", at: 30, severity: .error),
            Self.alert(.certificateExpired, "renewed", at: 40), Self.alert(.certificateChanged, "renewed", at: 50, severity: .info),
            Self.alert(.certificateExpiring, "expiring", at: 60, severity: .warning),
            Self.alert(.unreachable, "down", at: 70, severity: .error), Self.alert(.reachable, "down", at: 65, severity: .info),
        ]
        let firing = AlertmanagerSink.firing(recent.shuffled())
        #expect(firing.map(\.target) == ["regressed", "expiring", "down"], "\(firing.map(\.id))")
    }

    @Test("delivering an alert that clears a condition posts the condition's latest raising alert, same labels, with endsAt")
    func clearing() throws {
        let raised = Self.alert(.pinMismatch, "pinned", at: 10)
        let restored = Self.alert(.pinRestored, "pinned", at: 20, severity: .info)
        let documents = AlertmanagerSink.documents(delivering: restored, recent: [raised, Self.alert(.pinMismatch, "other", at: 15)])
        #expect(documents.count == 1)
        let document = try #require(documents.first)
        #expect(Self.labels(document) == Self.labels(AlertmanagerSink.document(for: raised)), "the same alert to Alertmanager")
        #expect(Self.labels(document)["severity"] == "critical" && Self.labels(document)["finding"] == "pin")
        #expect(document["endsAt"] as? String == Timestamp.format(restored.createdAt))
        #expect(document["startsAt"] as? String == Timestamp.format(raised.createdAt))
        // Nothing raised: nothing to clear.
        #expect(AlertmanagerSink.documents(delivering: restored, recent: []).isEmpty)
        // A raising alert fires with no endsAt; an event ends an hour after it.
        #expect(AlertmanagerSink.documents(delivering: raised, recent: []).first?["endsAt"] == nil)
        let changed = Self.alert(.certificateChanged, "renewed", at: 50, severity: .info)
        let expired = Self.alert(.certificateExpired, "renewed", at: 40)
        let renewal = AlertmanagerSink.documents(delivering: changed, recent: [expired, changed])
        #expect(renewal.count == 2, "the event, and the end of the expiry it replaced")
        #expect(renewal[0]["endsAt"] as? String == Timestamp.format(changed.createdAt.addingTimeInterval(3_600)))
        #expect(Self.labels(renewal[1])["alertname"] == "TLSAuditCertificateExpired"
                && renewal[1]["endsAt"] as? String == Timestamp.format(changed.createdAt))
    }

    @Test("the endpoint: the API path under the configured base, or the URL itself when it names it")
    func endpoint() {
        #expect(AlertmanagerSink.endpoint(URL(string: "http://am:9093")!).absoluteString == "http://am:9093/api/v2/alerts")
        #expect(AlertmanagerSink.endpoint(URL(string: "https://x/alertmanager/")!).absoluteString == "https://x/alertmanager/api/v2/alerts")
        #expect(AlertmanagerSink.endpoint(URL(string: "http://am:9093/api/v2/alerts")!).absoluteString == "http://am:9093/api/v2/alerts")
    }
}
