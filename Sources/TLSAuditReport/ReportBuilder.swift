public import Foundation
public import TLSAuditCore
public import TLSAuditStore

/// Turns what the store read into a `ComplianceReport`. Pure: the same data always gives the
/// same report, which the golden-file tests rely on.
public enum ReportBuilder {
    /// The trend's step for a period: the shortest round step that gives at most 60 points.
    public static func step(for period: TimeInterval) -> TimeInterval {
        let minute = 60.0, hour = 3600.0, day = 86_400.0
        let steps = [minute, 5 * minute, 15 * minute, 30 * minute, hour, 3 * hour, 6 * hour, 12 * hour, day, 7 * day, 30 * day]
        // n steps make n + 1 points (the start, each step, the end).
        return steps.first { period / $0 <= 59 } ?? 365 * day
    }

    /// The query for a report over `since` seconds up to `end`.
    public static func query(end: Date, since: TimeInterval, policy: CompliancePolicy?, targets: Set<String>?) -> ReportQuery {
        ReportQuery(start: end.addingTimeInterval(-since), end: end, policy: policy, targets: targets, step: step(for: since))
    }

    public static func build(_ data: ReportData, expiringWithinDays: Int = 30) -> ComplianceReport {
        let end = data.query.end
        let addresses = data.addresses.map { address -> ComplianceReport.AddressEntry in
            let earliest = address.chain.map(\.notAfter).min()
            let reached = address.verdict.condition != .unreachable
            return ComplianceReport.AddressEntry(
                address: address.address, status: address.verdict.condition, policy: address.verdict.policy,
                failedRules: address.verdict.failedRules,
                trusted: reached ? address.verdict.trustErrors.isEmpty : nil, trustErrors: address.verdict.trustErrors,
                pinState: address.pinState, pinMessage: address.pinMessage, earliestExpiry: earliest,
                daysLeft: earliest.map { Timestamp.daysLeft(until: $0, at: end) },
                protocolVersion: address.protocolVersion, cipher: address.cipher, lastScanAt: address.lastScanAt,
                failureCategory: reached ? nil : address.failureCategory,
                failureMessage: reached ? nil : address.failureMessage)
        }
        var targets: [ComplianceReport.TargetEntry] = []
        for (index, address) in data.addresses.enumerated() {
            if targets.last?.target == address.target {
                targets[targets.count - 1].addresses.append(addresses[index])
            } else {
                targets.append(ComplianceReport.TargetEntry(target: address.target, host: address.host, port: address.port,
                                                            status: .compliant, addresses: [addresses[index]]))
            }
        }
        for index in targets.indices {
            targets[index].status = worst(targets[index].addresses.map(\.status))
        }

        let trend = data.trend.map {
            ComplianceReport.TrendPoint(at: $0.at, compliant: $0.compliant, notCompliant: $0.notCompliant,
                                        unreachable: $0.unreachable,
                                        compliance: percentage($0.compliant, of: $0.compliant + $0.notCompliant))
        }
        let counts = Dictionary(grouping: addresses, by: \.status).mapValues(\.count)
        let compliant = counts[.compliant] ?? 0, notCompliant = counts[.notCompliant] ?? 0
        let now = percentage(compliant, of: compliant + notCompliant)
        let atStart = trend.first?.compliance
        let direction: String
        if let now, let atStart {
            direction = abs(now - atStart) < 0.05 ? "flat" : now > atStart ? "up" : "down"
        } else {
            direction = "unknown"
        }
        let summary = ComplianceReport.Summary(
            targets: targets.count, addresses: addresses.count, compliant: compliant, notCompliant: notCompliant,
            unreachable: counts[.unreachable] ?? 0, compliance: now, complianceAtStart: atStart, trend: direction,
            scans: data.scans, failedScans: data.failedScans, rejudgedObservations: data.rejudged)

        let alerts = data.alerts.map {
            ComplianceReport.AlertEntry(id: $0.id, at: $0.createdAt, kind: $0.kind.rawValue, severity: $0.severity.rawValue,
                                        target: $0.target, address: $0.address, summary: $0.summary)
        }
        let certificateChanges = data.alerts.filter { $0.kind == .certificateChanged }.map {
            ComplianceReport.CertificateChange(at: $0.createdAt, target: $0.target, address: $0.address,
                                               oldFingerprint: $0.changes["old_leaf_sha256"] ?? "",
                                               newFingerprint: $0.changes["new_leaf_sha256"] ?? "",
                                               sameKey: $0.changes["same_key"] == "true", summary: $0.summary)
        }
        func ruleChanges(_ kind: ReportTransition.Kind) -> [ComplianceReport.RuleChange] {
            data.transitions.filter { $0.kind == kind }.map {
                ComplianceReport.RuleChange(at: $0.at, target: $0.target, address: $0.address, policy: $0.policy, rules: $0.rules)
            }
        }
        let changes = ComplianceReport.Changes(
            certificates: certificateChanges, newFailures: ruleChanges(.newFailure), fixes: ruleChanges(.fix),
            pinEvents: alerts.filter { $0.kind.hasPrefix("pin.") }, alerts: alerts)

        let unreachable = data.addresses.filter { $0.verdict.condition == .unreachable }.map {
            ComplianceReport.UnreachableEntry(target: $0.target, address: $0.address, lastScanAt: $0.lastScanAt,
                                              lastReachableAt: $0.lastReachableAt, failureCategory: $0.failureCategory,
                                              failureMessage: $0.failureMessage)
        }
        return ComplianceReport(
            schema: ComplianceReport.schemaVersion, generatedAt: end,
            period: .init(start: data.query.start, end: end, step: Int(data.query.step)),
            policy: data.query.policy?.rawValue ?? "as-scanned", summary: summary, trend: trend, targets: targets,
            changes: changes, expiring: expiring(data.addresses, at: end, within: expiringWithinDays),
            expiringWithinDays: expiringWithinDays, unreachable: unreachable)
    }

    /// Every certificate of every current chain expiring within `days` (or expired), once each,
    /// soonest first, with the addresses that serve it.
    static func expiring(_ addresses: [ReportAddress], at end: Date, within days: Int) -> [ComplianceReport.ExpiringCertificate] {
        var byFingerprint: [String: ComplianceReport.ExpiringCertificate] = [:]
        for address in addresses {
            for certificate in address.chain {
                let left = Timestamp.daysLeft(until: certificate.notAfter, at: end)
                guard left <= days else { continue }
                let user = "\(address.target) (\(address.address))"
                if var known = byFingerprint[certificate.fingerprint] {
                    if !known.usedBy.contains(user) { known.usedBy.append(user) }
                    known.depth = min(known.depth, certificate.depth)
                    byFingerprint[certificate.fingerprint] = known
                } else {
                    byFingerprint[certificate.fingerprint] = ComplianceReport.ExpiringCertificate(
                        fingerprint: certificate.fingerprint, subject: certificate.subject,
                        commonName: certificate.commonName, issuer: certificate.issuer, notAfter: certificate.notAfter,
                        daysLeft: left, depth: certificate.depth, usedBy: [user])
                }
            }
        }
        return byFingerprint.values.sorted {
            ($0.notAfter, $0.depth, $0.fingerprint) < ($1.notAfter, $1.depth, $1.fingerprint)
        }
    }

    static func percentage(_ part: Int, of whole: Int) -> Double? {
        guard whole > 0 else { return nil }
        return (Double(part) * 1000 / Double(whole)).rounded() / 10
    }

    static func worst(_ conditions: [AddressCondition]) -> AddressCondition {
        if conditions.contains(.unreachable) { return .unreachable }
        if conditions.contains(.notCompliant) { return .notCompliant }
        return .compliant
    }
}
