import Foundation
import TLSAuditSupport

extension RevocationReport {
    /// `trust.revoked`, `revocation.unknown` and `revocation.must-staple` for this report. Only the
    /// leaf's lack of any source counts as unknown: an intermediate without OCSP or CRL is not
    /// checked by clients either (a source it names that fails does count).
    public func findings(names: [String]) -> [Finding] {
        var findings: [Finding] = []
        let unknownSeverity: Severity = mode == .hard ? .error : .warning
        for check in checks {
            let name = check.depth < names.count ? names[check.depth] : "the certificate at depth \(check.depth)"
            switch check.status {
            case .good:
                break
            case .revoked:
                var message = "\(name) is revoked"
                if let revokedAt = check.revokedAt { message += " since \(Timestamp.format(revokedAt))" }
                if let reason = check.reason { message += " (reason: \(reason))" }
                message += ", according to \(check.describedSource)."
                findings.append(Finding(.trustRevoked, .error, depth: check.depth, message))
            case .unknown where check.source == .none && check.depth > 0 && check.detail == Self.noSource:
                break
            case .unknown:
                findings.append(Finding(.revocationUnknown, unknownSeverity, depth: check.depth,
                    "The revocation status of \(name) is unknown: \(check.detail ?? "no answer")."
                    + (mode == .hard ? " Revocation is checked hard-fail for this target." : "")))
            }
        }
        if mustStaple, stapled == false {
            findings.append(Finding(.revocationMustStaple, unknownSeverity, depth: 0,
                "\(names.first ?? "The leaf") demands a stapled OCSP response (TLS feature status_request, must-staple) and the server sent none: Firefox refuses the connection."))
        }
        return findings
    }
}

extension RevocationCheck {
    var describedSource: String {
        switch source {
        case .stapledOCSP: "the OCSP response the server stapled"
        case .ocsp: "the OCSP responder" + (url.map { " \($0)" } ?? "")
        case .crl: "the CRL" + (url.map { " \($0)" } ?? "")
        case .none: "no source"
        }
    }
}
