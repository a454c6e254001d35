public import TLSAuditModel
import TLSAuditSupport

/// Text lines for a CT report: the policy's answer, then one line per SCT, e.g.
/// `SCT embedded  Google 'Argon2026h1' log (Google)  2026-01-05T10:00:00Z  valid`.
public enum CertificateTransparencyText {
    public static func lines(_ report: CertificateTransparencyReport) -> [String] {
        let answer = report.policy.required ? (report.policy.satisfied ? "required, met" : "required, NOT met") : "not required"
        var lines = ["certificate transparency (\(answer)): \(report.policy.reason)  [log list: \(report.logList)]"]
        for sct in report.scts {
            let log = sct.log.map { "\($0) (\(sct.operator ?? "?"))" } ?? "unknown log \(sct.logID)"
            lines.append("  SCT \(sct.origin.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)) \(log)  \(Timestamp.format(sct.timestamp))  \(sct.status.rawValue)")
        }
        return lines
    }

    /// Where the chain's anchor is: `anchored in STORE`, naming the public stores that hold the anchor when the store is another.
    public static func anchor(_ chain: ChainReport) -> String {
        guard chain.anchored else { return "not anchored in \(chain.trustStore)" }
        var text = "anchored in \(chain.trustStore)"
        if let stores = chain.anchorIn, !stores.isEmpty, stores != [chain.trustStore] {
            text += " (the anchor is a root of \(stores.joined(separator: " and ")): public-trust rules apply)"
        }
        return text
    }
}
