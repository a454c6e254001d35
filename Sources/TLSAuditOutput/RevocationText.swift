public import TLSAuditModel
import TLSAuditSupport

/// One line of text for a chain's revocation facts: each certificate's status and where it came
/// from, e.g. `revocation (soft): [0] good, OCSP http://ocsp.example/, next update 2026-11-24`.
public enum RevocationText {
    public static func line(_ report: RevocationReport) -> String {
        var parts = report.checks.map { check -> String in
            var text = "[\(check.depth)] \(check.status.rawValue)"
            if let revokedAt = check.revokedAt { text += " since \(Timestamp.formatDay(revokedAt))" }
            if let reason = check.reason { text += " (\(reason))" }
            switch check.source {
            case .stapledOCSP: text += ", stapled OCSP"
            case .ocsp: text += ", OCSP" + (check.url.map { " \($0)" } ?? "")
            case .crl: text += ", CRL" + (check.url.map { " \($0)" } ?? "")
            case .none: text += check.detail == RevocationReport.noSource ? ", no source" : ""
            }
            if let nextUpdate = check.nextUpdate { text += ", next update \(Timestamp.formatDay(nextUpdate))" }
            return text
        }
        if report.mustStaple { parts.append(report.stapled == false ? "must-staple, nothing stapled" : "must-staple") }
        return "revocation (\(report.mode.rawValue)): " + (parts.isEmpty ? "no issuer to ask about" : parts.joined(separator: "; "))
    }
}
