import Foundation
import TLSAuditSupport

extension RevocationReport {
    /// `trust.revoked`, `revocation.unknown` and `revocation.must-staple` for this report. Only the
    /// leaf's lack of any source counts as unknown: an intermediate without OCSP or CRL is not
    /// checked by clients either (a source it names that fails does count). With `clientFetches`
    /// false (Apple's clients, `CompliancePolicy.fetchesRevocation`), a revocation only an OCSP
    /// responder or a CRL tells is a warning: those clients never ask them and connect; a stapled
    /// one stays an error, as trustd reads staples.
    public func findings(names: [String], clientFetches: Bool = true) -> [Finding] {
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
                if !clientFetches, check.source == .ocsp || check.source == .crl {
                    message += " Apple's clients connect all the same: trustd asks an OCSP responder only for EV certificates and reads no CRL (it reads stapled responses, and Apple's own revocation data for publicly trusted CAs, which may list it); clients that check revocation refuse it."
                    findings.append(Finding(.trustRevoked, .warning, depth: check.depth, message))
                } else {
                    findings.append(Finding(.trustRevoked, .error, depth: check.depth, message))
                }
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
