public import Foundation
public import TLSAuditCore
import TLSAuditStore
import TLSAuditSupport

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

    public static func build(_ data: ReportData, expiringWithinDays: Int = SettingBounds.expiringWithinDays,
                             goal: Double = ComplianceReport.defaultGoal) -> ComplianceReport {
        let end = data.query.end
        let addresses = data.addresses.map { address -> ComplianceReport.AddressEntry in
            let earliest = address.chain.map(\.notAfter).min()
            let reached = address.verdict.condition != .unreachable
            // A server reached whose handshake still failed (a client certificate required, say) keeps its reason.
            let failedHandshake = address.verdict.condition == .notCompliant && address.verdict.failedRules.isEmpty
            let hygiene = ServerHygiene.problems(inventory: address.inventory, headers: address.headers, vulnerabilities: address.vulnerabilities,
                                                 clients: address.clients, checkReports: address.checkReports)
            var entry = ComplianceReport.AddressEntry(
                address: address.address, status: address.verdict.condition, policy: address.verdict.policy,
                failedRules: address.verdict.failedRules,
                trusted: reached ? address.verdict.trustErrors.isEmpty : nil, trustErrors: address.verdict.trustErrors,
                lints: address.verdict.lints,
                pinState: address.pinState, pinMessage: address.pinMessage, earliestExpiry: earliest,
                daysLeft: earliest.map { Timestamp.daysLeft(until: $0, at: end) },
                protocolVersion: address.protocolVersion, cipher: address.cipher, lastScanAt: address.lastScanAt,
                failureCategory: reached && !failedHandshake ? nil : address.failureCategory,
                failureMessage: reached && !failedHandshake ? nil : address.failureMessage)
            if !hygiene.checks.isEmpty { entry.hygiene = ComplianceReport.Hygiene(checks: hygiene.checks, problems: hygiene.problems) }
            return entry
        }
        var targets: [ComplianceReport.TargetEntry] = []
        for (index, address) in data.addresses.enumerated() {
            if targets.last?.target == address.target {
                targets[targets.count - 1].addresses.append(addresses[index])
            } else {
                targets.append(ComplianceReport.TargetEntry(target: address.target, host: address.host, port: address.port,
                                                            status: .compliant, addresses: [addresses[index]],
                                                            tags: address.tags.isEmpty ? nil : address.tags))
            }
        }
        for index in targets.indices {
            targets[index].status = worst(targets[index].addresses.map(\.status))
        }

        // The part of the period with data: no run of empty points before the first scan.
        let firstWithData = data.trend.firstIndex { $0.compliant + $0.notCompliant + $0.unreachable > 0 } ?? data.trend.endIndex
        let trend = data.trend[firstWithData...].map {
            ComplianceReport.TrendPoint(at: $0.at, compliant: $0.compliant, notCompliant: $0.notCompliant,
                                        unreachable: $0.unreachable,
                                        compliance: percentage($0.compliant, of: $0.compliant + $0.notCompliant))
        }
        let counts = Dictionary(grouping: addresses, by: \.status).mapValues(\.count)
        let compliant = counts[.compliant] ?? 0, notCompliant = counts[.notCompliant] ?? 0
        let now = percentage(compliant, of: compliant + notCompliant)
        // At the start of the period itself (nil when nothing had been scanned yet), not at the first point shown.
        let atStart = data.trend.first.flatMap { percentage($0.compliant, of: $0.compliant + $0.notCompliant) }
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
            ComplianceReport.AlertEntry(id: $0.id, at: $0.createdAt, kind: $0.kind, severity: $0.severity,
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
            pinEvents: alerts.filter { $0.kind.isPinEvent }, alerts: alerts)

        let unreachable = data.addresses.filter { $0.verdict.condition == .unreachable }.map {
            ComplianceReport.UnreachableEntry(target: $0.target, address: $0.address, lastScanAt: $0.lastScanAt,
                                              lastReachableAt: $0.lastReachableAt, failureCategory: $0.failureCategory,
                                              failureMessage: $0.failureMessage)
        }
        var report = ComplianceReport(
            schema: ComplianceReport.schemaVersion, generatedAt: end,
            period: .init(start: data.query.start, end: end, step: Int(data.query.step)),
            policy: data.query.policy?.rawValue ?? "as-scanned", summary: summary, trend: trend, targets: targets,
            changes: changes, expiring: expiring(data.addresses, at: end, within: expiringWithinDays),
            expiringWithinDays: expiringWithinDays, unreachable: unreachable)
        report.fixFirst = fixFirst(targets, within: expiringWithinDays)
        report.goal = goal
        report.apps = apps(data.addresses)
        return report
    }

    /// Per app tag (`app:BUNDLE_ID`) among the addresses: each address as that app's client sees it
    /// (its latest scan's app outcome), and how many of the app's targets it connects to everywhere.
    /// Nil when no address carries an app tag.
    static func apps(_ addresses: [ReportAddress]) -> [ComplianceReport.AppEntry]? {
        var byApp: [String: [ComplianceReport.AppAddress]] = [:]
        for address in addresses {
            for bundle in TargetTags.apps(in: address.tags) {
                let outcome = address.app?.bundle == bundle ? address.app : nil
                let status = outcome.map { $0.connects ? "compliant" : "not-compliant" }
                    ?? (address.verdict.condition == .unreachable ? "unreachable" : "not-judged")
                byApp[bundle, default: []].append(ComplianceReport.AppAddress(
                    target: address.target, address: address.address, status: status,
                    reliesOn: outcome?.connects == true ? outcome?.reliance : nil, reasons: outcome?.reasons ?? [],
                    error: outcome?.connects == false ? outcome?.error?.description : nil))
            }
        }
        guard !byApp.isEmpty else { return nil }
        return byApp.keys.sorted().map { bundle in
            let entries = byApp[bundle] ?? []
            let byTarget = Dictionary(grouping: entries, by: \.target)
            return ComplianceReport.AppEntry(bundle: bundle, targets: byTarget.count,
                                             compliant: byTarget.values.filter { $0.allSatisfy { $0.status == "compliant" } }.count,
                                             addresses: entries)
        }
    }

    /// The order the operator should work in: expired and untrusted first (clients refuse them
    /// now), then pin mismatches (possible interception), then certificates expiring soonest, then
    /// protocol and suite problems, then other certificate rules, then unreachable addresses.
    static func fixFirst(_ targets: [ComplianceReport.TargetEntry], within days: Int) -> [ComplianceReport.FixItem] {
        var items: [(rank: Int, days: Int, item: ComplianceReport.FixItem)] = []
        let protocolRules: Set<FindingID> = [.atsTLSVersion, .atsForwardSecrecy, .atsCipherSuite, .atsHandshake]
        let certificateRules: Set<FindingID> = [.atsSignatureHash, .atsKeySize]
        for target in targets {
            for address in target.addresses {
                let before = items.count
                defer {
                    // Not compliant, yet no rule says why: the handshake itself failed.
                    if address.status == .notCompliant, items.count == before {
                        items.append((5, .max, .init(category: "handshake", target: target.target, address: address.address,
                                                     problem: address.failureCategory?.rawValue ?? "not compliant",
                                                     fix: "make the handshake complete with a current client (\(address.failureMessage ?? "see the scan"))")))
                    }
                }
                func add(_ rank: Int, _ category: String, _ problem: String, _ fix: String, days: Int = .max) {
                    items.append((rank, days, .init(category: category, target: target.target, address: address.address,
                                                    problem: problem, fix: fix)))
                }
                let left = address.daysLeft ?? .max
                if address.status == .unreachable {
                    add(7, "unreachable", address.failureCategory?.rawValue ?? "unreachable",
                        "make the server reachable again (\(address.failureMessage ?? "no TLS server answered"))")
                    continue
                }
                if address.trustErrors.contains(.trustExpired) || left < 0 {
                    add(1, "expired", FindingID.trustExpired.rawValue, shortFix(.trustExpired) ?? "", days: left)
                } else if address.trusted == false {
                    let errors = address.trustErrors
                    add(2, "untrusted", errors.joined(separator: ", "), trustFix(errors))
                }
                if address.pinState == .mismatch {
                    add(3, "pin-mismatch", FindingID.pinMismatch.rawValue, shortFix(.pinMismatch) ?? "")
                }
                if left >= 0, left <= days {
                    add(4, "expiring", "expires in \(left) day\(left == 1 ? "" : "s")",
                        "renew before \(address.earliestExpiry.map(Timestamp.formatDay) ?? "it expires")", days: left)
                }
                let failing = Set(address.failedRules)
                if !failing.isDisjoint(with: protocolRules) {
                    add(5, "protocol", address.failedRules.filter(protocolRules.contains).joined(separator: ", "),
                        "enable TLS 1.2 or 1.3 with ECDHE and AES-GCM or CHACHA20-POLY1305 (what current Apple clients offer)")
                }
                if !failing.isDisjoint(with: certificateRules) {
                    add(6, "certificate", address.failedRules.filter(certificateRules.contains).joined(separator: ", "),
                        "reissue with a SHA-256 signature and an RSA-2048 or P-256 key, from a CA whose certificates meet the same")
                }
            }
        }
        return items.enumerated().sorted { ($0.element.rank, $0.element.days, $0.offset) < ($1.element.rank, $1.element.days, $1.offset) }
            .map(\.element.item)
    }

    /// The trust errors whose fix the report names, the most basic first.
    static let trustFixOrder: [FindingID] = [
        .trustIncompleteChain, .trustHostnameMismatch, .trustSelfSigned, .trustUntrustedRoot, .trustNotYetValid, .trustLifetime,
        .trustEKU, .trustCertificateTransparency, .trustRevoked, .revocationUnknown, .revocationMustStaple,
    ]

    /// The short fix `FindingCatalog` gives for `id` (every id the report names has one: FindingCatalogTests).
    static func shortFix(_ id: FindingID) -> String? { FindingCatalog[id]?.fix?.short }

    /// The fix for the trust errors of an address (the most basic first), in the catalog's short words.
    static func trustFix(_ errors: [FindingID]) -> String {
        let chosen = trustFixOrder.filter(errors.contains).compactMap(shortFix)
        var seen = Set<String>()
        let unique = chosen.filter { seen.insert($0).inserted }
        return unique.isEmpty ? "fix the chain: \(errors.joined(separator: ", "))" : unique.joined(separator: "; ")
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
