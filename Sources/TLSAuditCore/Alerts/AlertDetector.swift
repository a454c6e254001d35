import Foundation
import TLSAuditSupport

/// When to alert.
public struct AlertRules: Hashable, Sendable {
    /// Consecutive failed scans before `target.unreachable`.
    public var unreachableAfter: Int
    /// Days-left thresholds for `certificate.expiring`, any order.
    public var expiryThresholds: [Int]
    /// An address already broken on its first scan (untrusted, not compliant) raises its alert
    /// once, as a change from "unknown" (pin mismatches and expiry already do).
    public var alertOnFirstScan: Bool

    public init(unreachableAfter: Int = 3, expiryThresholds: [Int] = [30, 14, 7, 1], alertOnFirstScan: Bool = true) {
        self.unreachableAfter = unreachableAfter
        self.expiryThresholds = expiryThresholds
        self.alertOnFirstScan = alertOnFirstScan
    }
}

/// Alerts on transitions, never on every scan: compares what the store remembers of an address
/// with a new result, and returns the alerts plus what to remember next. Pure, so the store can
/// run it inside the transaction that records the scan (a crash loses neither or both).
public enum AlertDetector {
    public static func detect(previous: AddressMemory?, result: AddressScanResult, target: String, host: String, port: Int,
                              rules: AlertRules, observationID: Int64) -> (alerts: [Alert], memory: AddressMemory) {
        var memory = previous ?? AddressMemory()
        var alerts: [Alert] = []
        func raise(_ kind: AlertKind, _ severity: AlertSeverity, _ summary: String, _ changes: [String: String],
                   discriminator: String = "") {
            let id = stableID("\(target)|\(result.address)|\(kind.rawValue)|\(observationID)|\(discriminator)")
            alerts.append(Alert(id: id, kind: kind, severity: severity, target: target, host: host, port: port,
                                address: result.address, createdAt: result.startedAt, summary: summary, changes: changes))
        }

        let reachable = result.status == .completed || result.chain != nil
        if !reachable {
            memory.consecutiveFailures += 1
            if memory.consecutiveFailures >= rules.unreachableAfter, !memory.unreachableAlerted {
                memory.unreachableAlerted = true
                raise(.unreachable, .error,
                      "unreachable for \(memory.consecutiveFailures) consecutive scans: \(result.error?.description ?? "scan failed")",
                      ["failures": "\(memory.consecutiveFailures)", "category": result.error?.category.rawValue ?? "unknown"])
            }
            return (alerts, memory)
        }
        if memory.unreachableAlerted {
            raise(.reachable, .info, "reachable again after \(memory.consecutiveFailures) failed scans",
                  ["failures": "\(memory.consecutiveFailures)"])
        }
        memory.consecutiveFailures = 0
        memory.unreachableAlerted = false

        let leaf = result.chain?.presented.first
        // A verdict that changes with the same leaf on the first scan after a trust input was
        // refreshed changed because of that input: its alerts say so (still one per transition).
        let sameLeaf = memory.leafFingerprint != nil && memory.leafFingerprint == leaf?.sha256Fingerprint
        let judgedAgain = sameLeaf ? result.judgedWith?.changedSince(memory.lastScanAt) : nil
        let inputSuffix = judgedAgain.map { "; the same certificate, judged again with \($0)" } ?? ""
        func noting(_ changes: [String: String]) -> [String: String] {
            guard let judgedAgain else { return changes }
            return changes.merging(["judged_again_with": judgedAgain]) { first, _ in first }
        }
        // Pins.
        if let pin = result.pin, pin.state != .none {
            var changes = ["new_leaf_sha256": leaf?.sha256Fingerprint ?? "", "new_leaf_spki": leaf?.spkiSHA256 ?? ""]
            // Nothing to say of an old leaf on the first scan: the keys are left out, not empty.
            if let old = memory.leafFingerprint { changes["old_leaf_sha256"] = old }
            if let old = memory.leafSPKI { changes["old_leaf_spki"] = old }
            if let matched = pin.matched { changes["matched_pin"] = matched }
            if pin.state == .mismatch, memory.pinState != .mismatch {
                raise(.pinMismatch, .critical, "pin mismatch: \(pin.message)", changes)
            } else if pin.state == .match, memory.pinState == .mismatch {
                raise(.pinRestored, .info, "pins match again: \(pin.message)", changes)
            }
            memory.pinState = pin.state
        } else if result.status == .completed {
            memory.pinState = PinEvaluation.State.none
        }
        // Leaf changes.
        if let leaf {
            if let old = memory.leafFingerprint, old != leaf.sha256Fingerprint {
                let sameKey = memory.leafSPKI == leaf.spkiSHA256
                raise(.certificateChanged, sameKey ? .info : .warning,
                      sameKey ? "new leaf certificate with the same key (a renewal): \(leaf.displayName), valid to \(Timestamp.formatDay(leaf.notAfter))"
                              : "new leaf certificate with a NEW key: \(leaf.displayName), valid to \(Timestamp.formatDay(leaf.notAfter))",
                      ["old_leaf_sha256": old, "new_leaf_sha256": leaf.sha256Fingerprint,
                       "old_leaf_spki": memory.leafSPKI ?? "", "new_leaf_spki": leaf.spkiSHA256,
                       "same_key": sameKey ? "true" : "false", "new_not_after": Timestamp.format(leaf.notAfter)])
            }
            memory.leafFingerprint = leaf.sha256Fingerprint
            memory.leafSPKI = leaf.spkiSHA256
        }
        // What an app judged by its own rules logs when it does not connect, for the alerts below.
        let appError = result.app.flatMap { app in app.connects ? nil : app.error.map { (bundle: app.bundle, error: $0) } }
        let appSuffix = appError.map { "; app \($0.bundle) fails with NSURLErrorDomain \($0.error.code) \($0.error.name)" } ?? ""
        // Trust (judged from what the chain showed, even when the handshake did not complete).
        let trustErrors = result.findings.filter(\.isTrustError)
        let trusted = trustErrors.isEmpty
        let firstLook = memory.trusted == nil && rules.alertOnFirstScan
        if memory.trusted == true || firstLook, !trusted {
            let listed = trustErrors.map { "\($0.id)\($0.depth.map { " at depth \($0)" } ?? "")" }.joined(separator: ", ")
            var changes = ["findings": trustErrors.map(\.id.rawValue).joined(separator: ","), "new_leaf_sha256": leaf?.sha256Fingerprint ?? ""]
            if memory.trusted == nil { changes["previous"] = "unknown" }
            if let appError { changes["app_error"] = "\(appError.error.code)" }
            raise(.trustBroken, .critical,
                  (memory.trusted == nil ? "the chain is not trusted on the first scan: \(listed)" : "the chain is no longer trusted: \(listed)")
                      + appSuffix + inputSuffix,
                  noting(changes))
        } else if memory.trusted == false, trusted {
            raise(.trustRestored, .info, "the chain is trusted again" + inputSuffix, noting(["new_leaf_sha256": leaf?.sha256Fingerprint ?? ""]))
        }
        memory.trusted = trusted
        // ATS verdict, on completed handshakes only.
        if result.status == .completed {
            let compliant = result.ats.compliant
            // "ATS compliant" under the ATS policies; plain "compliant" under apple-trust and Mozilla's.
            let verdict = result.ats.policy.isAppTransportSecurity ? "ATS compliant" : "compliant"
            let firstVerdict = memory.atsCompliant == nil && rules.alertOnFirstScan
            if memory.atsCompliant == true || firstVerdict, !compliant {
                var changes = ["failed_rules": result.ats.failedRules.joined(separator: ","), "policy": result.ats.policy.rawValue]
                if memory.atsCompliant == nil { changes["previous"] = "unknown" }
                if let appError { changes["app_error"] = "\(appError.error.code)" }
                raise(.atsRegressed, .error,
                      (memory.atsCompliant == nil ? "not \(verdict) on the first scan" : "no longer \(verdict)")
                          + " (\(result.ats.policy.rawValue)): " + result.ats.failedRules.joined(separator: ", ") + appSuffix + inputSuffix,
                      noting(changes))
            } else if memory.atsCompliant == false, compliant {
                raise(.atsRecovered, .info, "\(verdict) again (\(result.ats.policy.rawValue))" + inputSuffix,
                      noting(["old_failed_rules": memory.failedRules.joined(separator: ","), "policy": result.ats.policy.rawValue]))
            }
            memory.atsCompliant = compliant
            memory.failedRules = result.ats.failedRules
        }
        // Expiry of every certificate of the chain (path as built, else as presented).
        let certificates = result.chain?.certificates ?? []
        let thresholds = rules.expiryThresholds.sorted()
        for (depth, certificate) in certificates.enumerated() {
            let days = certificate.daysLeft(at: result.startedAt)
            let level: String
            if days < 0 {
                level = "expired"
            } else if let threshold = thresholds.first(where: { days <= $0 }) {
                level = "\(threshold)"
            } else {
                continue
            }
            let mark = "\(certificate.sha256Fingerprint)#\(level)"
            guard !memory.expiryMarks.contains(mark) else { continue }
            memory.expiryMarks.insert(mark)
            let role = depth == 0 ? "the leaf" : "the CA certificate at depth \(depth)"
            let changes = ["certificate_sha256": certificate.sha256Fingerprint, "subject": certificate.subject,
                           "not_after": Timestamp.format(certificate.notAfter), "days_left": "\(days)", "depth": "\(depth)"]
            if days < 0 {
                raise(.certificateExpired, .critical, "\(role) \(certificate.displayName) expired \(-days) day(s) ago", changes,
                      discriminator: mark)
            } else {
                raise(.certificateExpiring, days <= 7 ? .error : .warning,
                      "\(role) \(certificate.displayName) expires in \(days) day(s), on \(Timestamp.formatDay(certificate.notAfter))",
                      changes, discriminator: mark)
            }
        }
        return (alerts, memory)
    }

    /// A stable, unique alert id (hex FNV-1a over the identifying fields, twice for 128 bits).
    static func stableID(_ text: String) -> String {
        StableHash.fnv1a(text).hex(width: 16) + StableHash.fnv1a(text, seed: 0x8422_2325_cbf2_9ce4).hex(width: 16)
    }
}

/// Where alerts go and when they are raised: the detector's rules and the sinks with the least
/// severity each takes.
public struct AlertSettings: Sendable {
    public struct Sink: Sendable, Hashable {
        public var name: String
        public var minimumSeverity: AlertSeverity
        public init(name: String, minimumSeverity: AlertSeverity) {
            self.name = name
            self.minimumSeverity = minimumSeverity
        }
    }

    public var rules: AlertRules
    public var sinks: [Sink]

    public init(rules: AlertRules, sinks: [Sink]) {
        self.rules = rules
        self.sinks = sinks
    }
}

extension AlertSettings {
    /// The detector and the sink choice for one stored scan (`nil` settings: the default rules, no sink).
    public static func decide(_ settings: AlertSettings?, previous: AddressMemory?, result: AddressScanResult, target: String,
                              host: String, port: Int, observationID: Int64) -> (alerts: [(alert: Alert, sinks: [String])], memory: AddressMemory) {
        let (alerts, memory) = AlertDetector.detect(previous: previous, result: result, target: target, host: host, port: port,
                                                    rules: settings?.rules ?? AlertRules(), observationID: observationID)
        let routed = alerts.map { alert in
            (alert, (settings?.sinks ?? []).filter { alert.severity >= $0.minimumSeverity }.map(\.name))
        }
        return (routed, memory)
    }
}
