import Foundation
import Testing
import TLSAuditCore

/// AFNetworking's and NSPinnedDomains' pin evaluation, and the alert detector, on hand-made values
/// (the end-to-end tests run the same through real handshakes and the service).
@Suite("pin evaluation")
struct PinEvaluationTests {
    let leaf = TrustEvaluatorTests.certificate("leaf", issuer: "int", ca: false)
    let intermediate = TrustEvaluatorTests.certificate("int", issuer: "root", ca: true)

    func evaluate(_ policy: PinPolicy, trustErrors: [Finding] = []) -> PinEvaluation {
        let path = [leaf, intermediate].enumerated().map { PathElement(certificate: $1, source: .presented, presentedIndex: $0) }
        return policy.evaluate(presented: [leaf, intermediate], path: path, trustErrors: trustErrors) { _ in
            PinnedAnchorEvaluation(path: [], errors: [Finding(.trustInvalid, .error, "no pinned anchor")])
        }
    }

    @Test("public-key mode: a pinned key anywhere in the chain matches; none matching is a mismatch")
    func publicKey() {
        #expect(evaluate(PinPolicy(mode: .publicKey, pins: [.spki("int")])).state == .match)
        #expect(evaluate(PinPolicy(mode: .publicKey, pins: [.spki("other")])).state == .mismatch)
    }

    @Test("AFNetworking refuses an untrusted chain before it looks at the pins, unless invalid certificates are allowed")
    func trustFirst() {
        let untrusted = [Finding(.trustExpired, .error, depth: 0, "expired")]
        #expect(evaluate(PinPolicy(mode: .publicKey, pins: [.spki("leaf")]), trustErrors: untrusted).state == .mismatch)
        var lenient = PinPolicy(mode: .publicKey, pins: [.spki("leaf")])
        lenient.allowInvalidCertificates = true
        #expect(evaluate(lenient, trustErrors: untrusted).state == .match)
    }

    @Test("mode none with invalid certificates allowed and no name check accepts anything; no pins is none")
    func none() {
        var anything = PinPolicy(mode: .none)
        anything.allowInvalidCertificates = true
        anything.validatesDomainName = false
        #expect(anything.acceptsAnyCertificate)
        #expect(evaluate(anything, trustErrors: [Finding(.trustSelfSigned, .error, "self-signed")]).state == .match)
        #expect(evaluate(PinPolicy()).state == .none)
    }

    @Test("NSPinnedDomains: the leaf identity must be the leaf's key, a CA identity some CA's")
    func pinnedDomains() {
        #expect(evaluate(PinPolicy(leafIdentities: ["leaf"])).state == .match)
        #expect(evaluate(PinPolicy(leafIdentities: ["int"])).state == .mismatch)
        #expect(evaluate(PinPolicy(caIdentities: ["int"])).state == .match)
        #expect(evaluate(PinPolicy(caIdentities: ["leaf"])).state == .mismatch)
    }
}

@Suite("alert detector")
struct AlertDetectorTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    func result(leaf: String = "leaf", compliant: Bool = true, failed: Bool = false, pin: PinEvaluation.State? = nil,
                findings: [Finding] = [], at offset: Double = 0) -> AddressScanResult {
        let certificate = TrustEvaluatorTests.certificate(leaf, issuer: "int", ca: false,
                                                          notAfter: Self.start.addingTimeInterval(365 * 86_400))
        let chain = failed ? nil : ChainReport(presented: [certificate],
                                               path: [PathElement(certificate: certificate, source: .presented, presentedIndex: 0)],
                                               anchored: true, trustStore: "system", issues: [])
        return AddressScanResult(
            address: "192.0.2.1", family: "ipv4", port: 443, status: failed ? .failed : .completed,
            startedAt: Self.start.addingTimeInterval(offset), durationMs: 5, handshake: nil,
            error: failed ? ProbeFailure(.connectionRefused, "refused") : nil, chain: chain, findings: findings,
            ats: PolicyVerdict(policy: .atsRuntime, compliant: compliant && !failed, rules: [:],
                            failedRules: compliant || failed ? [] : ["ats.tls-version"]),
            pin: pin.map { PinEvaluation(state: $0, message: "", matched: nil, leafSPKI: leaf, leafFingerprint: leaf) })
    }

    /// Runs the detector over `results` in order, returning the alert kinds of each step.
    func run(_ results: [AddressScanResult], rules: AlertRules = AlertRules()) -> [[AlertKind]] {
        var memory: AddressMemory?
        return results.enumerated().map { index, result in
            let (alerts, next) = AlertDetector.detect(previous: memory, result: result, target: "t", host: "h", port: 443,
                                                      rules: rules, observationID: Int64(index))
            memory = next
            return alerts.map(\.kind)
        }
    }

    @Test("alerts on transitions only: a new leaf, a regression and its recovery, nothing while nothing changes")
    func transitions() {
        let steps = run([result(), result(at: 60), result(leaf: "renewed", at: 120), result(leaf: "renewed", compliant: false, at: 180),
                         result(leaf: "renewed", compliant: false, at: 240), result(leaf: "renewed", at: 300)])
        #expect(steps[0].isEmpty && steps[1].isEmpty)
        #expect(steps[2] == [.certificateChanged])
        #expect(steps[3] == [.atsRegressed])
        #expect(steps[4].isEmpty)
        #expect(steps[5] == [.atsRecovered])
    }

    @Test("a regression's summary says 'ATS compliant' under the ATS policies and 'compliant' under the others")
    func summaryWording() {
        for (policy, wording) in [(CompliancePolicy.atsRuntime, "no longer ATS compliant (ats-runtime)"),
                                  (.mozillaIntermediate, "no longer compliant (mozilla-intermediate)"),
                                  (.appleTrust, "no longer compliant (apple-trust)")] {
            var good = result(), bad = result(compliant: false, at: 60)
            good.ats.policy = policy
            bad.ats.policy = policy
            let (_, memory) = AlertDetector.detect(previous: nil, result: good, target: "t", host: "h", port: 443,
                                                   rules: AlertRules(), observationID: 1)
            let (alerts, _) = AlertDetector.detect(previous: memory, result: bad, target: "t", host: "h", port: 443,
                                                   rules: AlertRules(), observationID: 2)
            #expect(alerts.first { $0.kind == .atsRegressed }?.summary.hasPrefix(wording) == true, "\(alerts.map(\.summary))")
        }
    }

    @Test("unreachable after the configured number of failures, once, and recovered after")
    func unreachable() {
        let steps = run([result(), result(failed: true, at: 60), result(failed: true, at: 120), result(failed: true, at: 180),
                         result(failed: true, at: 240), result(at: 300)], rules: AlertRules(unreachableAfter: 3))
        #expect(steps[1].isEmpty && steps[2].isEmpty)
        #expect(steps[3] == [.unreachable])
        #expect(steps[4].isEmpty)
        #expect(steps[5].contains(.reachable))
    }

    @Test("a certificate revoked while it was trusted raises trust.broken at once; an unknown status does not")
    func revocation() {
        let revoked = Finding(.trustRevoked, .error, depth: 0, "leaf is revoked since 2026-11-23 (reason: keyCompromise)")
        let unknown = Finding(.revocationUnknown, .warning, depth: 0, "the status is unknown")
        let steps = run([result(), result(findings: [unknown], at: 60), result(compliant: false, findings: [revoked], at: 120)])
        #expect(steps[1].isEmpty)
        #expect(steps[2].contains(.trustBroken), "\(steps)")
    }

    @Test("a pin mismatch raises, a match after it restores")
    func pins() {
        let steps = run([result(pin: .match), result(pin: .mismatch, at: 60), result(pin: .mismatch, at: 120), result(pin: .match, at: 180)])
        #expect(steps[1].contains(.pinMismatch))
        #expect(!steps[2].contains(.pinMismatch))
        #expect(steps[3].contains(.pinRestored))
    }
}
