import Foundation
import TLSAuditModel
import TLSAuditStore

/// One target for its page (`/api/v1/targets/{name}`, `tlsaudit.target/1`): its addresses as
/// `status` shows them, each address's latest scan in full (the handshake, the chain as sent and
/// as built with each certificate's SCT and revocation status, the findings, the pins, the
/// hygiene checks: `scan --format json`'s address objects), the history (as `history NAME`), its
/// alerts, and every finding of the latest scans in words (the catalog `ats` and the reports read).
struct TargetDocument: Encodable {
    let schema = "tlsaudit.target/1"
    let target: String
    let addresses: [TargetStatus]
    let latest: [AddressScanResult]
    let history: [HistoryEntry]
    let alerts: [StoredAlert]
    /// By finding id.
    let findings: [String: FindingWords]

    /// A finding explained: title, severity, why it matters and the fix.
    struct FindingWords: Encodable {
        let title: String
        let severity: String
        let why: String?
        let fix: String?
        let section: String
    }

    /// How many history entries and (newest) alerts of the target are read.
    static let historyLimit = 50
    static let alertsRead = 1_000

    /// `result` with its pins' evaluation: the store keeps the pins' state with the address's
    /// current state rather than with each scan, so the latest scan gets it back from its row
    /// (the message is the `pin.mismatch` finding's, when there is one).
    static func withPins(_ result: AddressScanResult, _ row: TargetStatus) -> AddressScanResult {
        guard result.pin == nil, row.pinState != .none else { return result }
        var result = result
        let message = result.findings.first { $0.id == .pinMismatch }?.message
            ?? (row.pinState == .match ? "a configured pin matches the chain" : "no configured pin matches the chain")
        result.pin = PinEvaluation(state: row.pinState, message: message, leafSPKI: row.leafSPKI, leafFingerprint: row.leafFingerprint)
        return result
    }

    /// The document of `name` from `store` (its rows with their group when `configured` knows it);
    /// nil when the store has no scan of it.
    static func read(_ name: String, from store: any ScanStore, configured: ConfiguredTargets?) throws -> TargetDocument? {
        var addresses = try store.status(of: name)
        if let configured { addresses = configured.grouped(addresses) }
        guard !addresses.isEmpty else { return nil }
        let latest = try addresses.compactMap { row in try store.result(observationID: row.lastObservationID).map { withPins($0, row) } }
        var words: [String: FindingWords] = [:]
        for finding in latest.flatMap(\.findings) {
            guard words[finding.id.rawValue] == nil, let entry = FindingCatalog[finding.id] else { continue }
            words[finding.id.rawValue] = FindingWords(title: entry.title, severity: entry.severity.rawValue, why: entry.why,
                                                      fix: entry.fix?.short ?? entry.fix?.detailed, section: entry.section.rawValue)
        }
        return TargetDocument(target: name, addresses: addresses, latest: latest,
                              history: try store.history(target: name, limit: historyLimit),
                              alerts: try store.alerts(of: name, limit: alertsRead), findings: words)
    }
}
