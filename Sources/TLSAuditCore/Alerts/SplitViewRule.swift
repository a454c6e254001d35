public import Foundation
import TLSAuditSupport

/// Whether a fleet's vantage points see one target alike, and how bad it is when they do not
/// (`split-view`). The service keeps the windows and reads the states (`SplitViewDetector`); what
/// counts as a split and its severity are decided here.
public enum SplitViewRule {
    /// One vantage point's latest state at one address of the target.
    public struct Observation: Sendable, Hashable {
        /// The stored target, `KEY@VANTAGE`.
        public var target: String
        public var address: String
        public var host: String
        public var port: Int
        public var leafFingerprint: String?
        public var leafSPKI: String?
        /// The scan failed (the address was not reached).
        public var failed: Bool
        public var compliant: Bool
        /// The reasons shown for a verdict that is not compliant.
        public var reasons: [FindingID]

        public init(target: String, address: String, host: String, port: Int, leafFingerprint: String?, leafSPKI: String?,
                    failed: Bool, compliant: Bool, reasons: [FindingID]) {
            self.target = target
            self.address = address
            self.host = host
            self.port = port
            self.leafFingerprint = leafFingerprint
            self.leafSPKI = leafSPKI
            self.failed = failed
            self.compliant = compliant
            self.reasons = reasons
        }
    }

    /// The alert when a target's vantages disagree, nil when they agree. Each vantage's view is
    /// what it saw at each address its DNS gave (leaf, key, verdict): two vantages answered with
    /// different addresses that serve the same certificate see the same thing. A different key is
    /// critical (one network may be intercepted), a different certificate with the same key a
    /// warning, a different verdict alone an error.
    public static func alert(key: String, observations states: [Observation], at time: Date) -> Alert? {
        struct View: Hashable { var leaf: String; var key: String; var verdict: String }
        func view(_ state: Observation) -> View {
            View(leaf: state.leafFingerprint ?? "-", key: state.leafSPKI ?? "-",
                 verdict: state.failed ? "unreachable"
                    : state.compliant ? "compliant" : "not compliant (\(state.reasons.joined(separator: ",")))")
        }
        let byVantage = Dictionary(grouping: states, by: { VantageTarget.split($0.target).vantage ?? "?" })
        let views = byVantage.mapValues { Set($0.map(view)) }
        guard Set(views.values).count > 1 else { return nil }
        let keys = Set(views.values.map { Set($0.map(\.key)) })
        let leaves = Set(views.values.map { Set($0.map(\.leaf)) })
        var changes: [String: String] = [:]
        var seen: [String] = []
        for vantage in views.keys.sorted() {
            let described: String = byVantage[vantage, default: []].sorted { $0.address < $1.address }.map { state in
                let seenThere = view(state)
                return "\(state.address) leaf \(seenThere.leaf) key sha256/\(seenThere.key) \(seenThere.verdict)"
            }.joined(separator: ", ")
            changes["vantage.\(vantage)"] = described
            seen.append("\(vantage): \(described)")
        }
        let (severity, what): (AlertSeverity, String) = keys.count > 1 ? (.critical, "different leaf keys")
            : leaves.count > 1 ? (.warning, "different leaf certificates") : (.error, "different verdicts")
        // The id is the split itself (views without addresses or times): the same split is one alert.
        let identity = views.keys.sorted().map { vantage in
            "\(vantage)=" + views[vantage, default: []].map { "\($0.leaf)/\($0.key)/\($0.verdict)" }.sorted().joined(separator: "+")
        }.joined(separator: "\u{0}")
        let first = states.sorted { $0.target < $1.target }[0]
        let addresses = Set(states.map(\.address)).sorted().joined(separator: ",")
        return Alert(id: StableHash.fnv1a("split-view\u{0}\(key)\u{0}" + identity).hex(width: 16)
                         + StableHash.fnv1a(identity, seed: 0x9e37_79b9_7f4a_7c15).hex(width: 16),
                     kind: .splitView, severity: severity, target: key, host: first.host, port: first.port, address: addresses,
                     createdAt: time, summary: "vantage points see \(what): " + seen.joined(separator: "; "), changes: changes)
    }
}
