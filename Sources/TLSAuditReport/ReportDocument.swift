import Foundation
import TLSAuditCore
import TLSAuditStore
import TLSAuditSupport

/// The report laid out once as headings, paragraphs, tables and the trend, so that the text,
/// Markdown and HTML renderers show the same content and differ only in markup.
struct ReportDocument {
    /// How a cell should stand out; renderers without colour ignore it.
    enum Tone: String { case good, bad, warning, muted, plain }

    struct Cell {
        var text: String
        var tone: Tone = .plain
        init(_ text: String, _ tone: Tone = .plain) {
            self.text = text
            self.tone = tone
        }
    }

    enum Block {
        case heading(String)
        case subheading(String)
        case paragraph(String)
        /// `stacksOnPhone`: in HTML, each row becomes one block on a narrow screen (the fix-first list).
        case table(header: [String], rows: [[Cell]], stacksOnPhone: Bool = false)
        case trend([ComplianceReport.TrendPoint], goal: Double)
    }

    var title: String
    var subtitle: String
    var blocks: [Block]

    init(_ report: ComplianceReport) {
        title = "tlsaudit compliance report"
        let days = report.period.end.timeIntervalSince(report.period.start) / 86_400
        let length = days >= 1 ? Self.count(days, "day") : days * 24 >= 1 ? Self.count(days * 24, "hour")
            : Self.count((days * 24 * 60).rounded(), "minute")
        subtitle = "\(Timestamp.format(report.period.start)) to \(Timestamp.format(report.period.end)) (\(length)) · policy: "
            + (report.policy == "as-scanned" ? "each target's own" : report.policy)
        blocks = []
        fixFirst(report)
        fleet(report)
        targets(report)
        apps(report)
        changes(report)
        expiring(report)
        unreachable(report)
        conformance(report)
        hygiene(report)
    }

    // MARK: - Sections

    /// Conformance lints of the current chains: what CAs get wrong while clients still accept it.
    private mutating func conformance(_ report: ComplianceReport) {
        let rows = report.targets.flatMap { target in
            target.addresses.filter { !$0.lints.isEmpty }.map { [Cell(target.target), Cell($0.address), Cell($0.lints.joined(separator: ", "), .warning)] }
        }
        blocks.append(.heading("Conformance (\(rows.count))"))
        guard !rows.isEmpty else {
            blocks.append(.paragraph("No certificate breaks a Baseline Requirements or RFC 5280 rule tlsaudit lints (docs/findings.md)."))
            return
        }
        blocks.append(.paragraph("Rules the certificates break while clients still accept them (lint.*, docs/findings.md); they never change a verdict."))
        blocks.append(.table(header: ["Target", "Address", "Lints"], rows: rows))
    }

    /// The opt-in checks (`checks: [inventory, headers, vulnerabilities]`): what they found wrong.
    private mutating func hygiene(_ report: ComplianceReport) {
        let checked = report.targets.flatMap { target in target.addresses.compactMap { address in address.hygiene.map { (target.target, address.address, $0) } } }
        let rows = checked.filter { !$0.2.problems.isEmpty }.map { target, address, hygiene in
            [Cell(target), Cell(address), Cell(hygiene.problems.joined(separator: "; "), hygiene.problems.contains { $0.contains("CVE") } ? .bad : .warning)]
        }
        blocks.append(.heading("Server hygiene (\(rows.count))"))
        guard !checked.isEmpty else {
            blocks.append(.paragraph("No address ran the opt-in checks (checks: [inventory, headers, vulnerabilities])."))
            return
        }
        guard !rows.isEmpty else {
            blocks.append(.paragraph("The opt-in checks found nothing wrong at the \(checked.count) address(es) that ran them."))
            return
        }
        blocks.append(.paragraph("What the opt-in checks found at the \(checked.count) address(es) that ran them (README, Server hygiene)."))
        blocks.append(.table(header: ["Target", "Address", "Problems"], rows: rows))
    }

    /// What to fix first, most urgent first: the operator's first question.
    private mutating func fixFirst(_ report: ComplianceReport) {
        blocks.append(.heading("Fix first"))
        guard !report.fixFirst.isEmpty else {
            blocks.append(.paragraph("Nothing to fix: every address reached is compliant and no certificate expires within \(report.expiringWithinDays) days."))
            return
        }
        blocks.append(.table(header: ["#", "Target", "Address", "Problem", "Fix"], rows: report.fixFirst.enumerated().map { index, item in
            let tone: Tone = ["expired", "untrusted", "pin-mismatch"].contains(item.category) ? .bad : .warning
            return [Cell("\(index + 1)"), Cell(item.target), Cell(item.address), Cell(item.problem, tone), Cell(item.fix)]
        }, stacksOnPhone: true))
    }

    private mutating func fleet(_ report: ComplianceReport) {
        let summary = report.summary
        blocks.append(.heading("Fleet"))
        blocks.append(.paragraph("\(summary.targets) target\(summary.targets == 1 ? "" : "s"), \(summary.addresses) address\(summary.addresses == 1 ? "" : "es"): \(summary.compliant) compliant, \(summary.notCompliant) not compliant, \(summary.unreachable) unreachable."))
        var compliance = "Compliance (compliant share of the addresses reached): \(Self.percent(summary.compliance)) against a goal of \(Self.percent(report.goal))"
        switch summary.trend {
        case "unknown": compliance += "; no data at the start of the period."
        case "flat": compliance += ", unchanged since the start of the period."
        default: compliance += ", \(summary.trend) from \(Self.percent(summary.complianceAtStart)) at the start of the period."
        }
        blocks.append(.paragraph(compliance))
        var scans = "\(summary.scans) scan\(summary.scans == 1 ? "" : "s") in the period, \(summary.failedScans) of which reached nothing."
        if report.policy != "as-scanned" {
            scans += " Verdicts re-judged under \(report.policy) from the stored observations (\(summary.rejudgedObservations) distinct)."
        }
        blocks.append(.paragraph(scans))
        blocks.append(.trend(report.trend, goal: report.goal))
    }

    private mutating func targets(_ report: ComplianceReport) {
        blocks.append(.heading("Targets"))
        guard !report.targets.isEmpty else {
            blocks.append(.paragraph("No target has been scanned yet."))
            return
        }
        var rows: [[Cell]] = []
        for target in report.targets {
            for address in target.addresses {
                let trust: Cell = switch address.trusted {
                case true?: Cell("trusted", .good)
                case false?: Cell(address.trustErrors.joined(separator: ", "), .bad)
                case nil: Cell("-", .muted)
                }
                let pin: Cell = switch address.pinState {
                case .match: Cell("match", .good)
                case .mismatch: Cell("MISMATCH", .bad)
                case .none: Cell(address.pinState.rawValue, .muted)
                }
                rows.append([
                    Cell(target.target), Cell(address.address), Self.status(address.status),
                    Cell(address.status == .unreachable ? (address.failureCategory?.rawValue ?? "failed")
                         : address.failedRules.isEmpty ? "-" : address.failedRules.joined(separator: ", "),
                         address.failedRules.isEmpty ? .muted : .bad),
                    trust, pin, Self.expiry(address.earliestExpiry, daysLeft: address.daysLeft),
                    Cell([address.protocolVersion?.rawValue, address.cipher].compactMap { $0 }.joined(separator: " "), .muted),
                ])
            }
        }
        blocks.append(.table(header: ["Target", "Address", "Status", "Failing rules", "Trust", "Pin", "Earliest expiry", "Protocol"],
                             rows: rows))
    }

    /// Per app (targets tagged `app:BUNDLE_ID`): which servers its client connects to, relying on
    /// which exception, and why it does not connect to the others. Absent when no target names an app.
    private mutating func apps(_ report: ComplianceReport) {
        guard let apps = report.apps else { return }
        blocks.append(.heading("Apps (\(apps.count))"))
        blocks.append(.paragraph("Targets tagged app:BUNDLE_ID, judged as that app's client judges them (its ATS exceptions for the host)."))
        for app in apps {
            blocks.append(.subheading(app.bundle))
            blocks.append(.paragraph("\(app.compliant) of \(app.targets) target\(app.targets == 1 ? "" : "s") compliant for the app."))
            blocks.append(.table(header: ["Target", "Address", "For the app", "Relies on / why not"], rows: app.addresses.map { address in
                let status: Cell = switch address.status {
                case "compliant": Cell("compliant", .good)
                case "not-compliant": Cell("NOT COMPLIANT", .bad)
                case "unreachable": Cell("UNREACHABLE", .warning)
                default: Cell(address.status, .muted)
                }
                let detail = address.reliesOn.map { Cell($0) }
                    ?? (address.reasons.isEmpty ? Cell("-", .muted)
                        : Cell(address.reasons.joined(separator: ", ") + (address.error.map { "; the app logs \($0)" } ?? ""), .bad))
                return [Cell(address.target), Cell(address.address), status, detail]
            }))
        }
    }

    private mutating func changes(_ report: ComplianceReport) {
        let changes = report.changes
        blocks.append(.heading("Changes in the period"))
        if changes.newFailures.isEmpty && changes.fixes.isEmpty && changes.certificates.isEmpty && changes.alerts.isEmpty {
            blocks.append(.paragraph("Nothing changed."))
            return
        }
        for (title, list, tone) in [("New failures", changes.newFailures, Tone.bad), ("Fixes", changes.fixes, .good)] {
            blocks.append(.subheading("\(title) (\(list.count))"))
            if !list.isEmpty {
                blocks.append(.table(header: ["When", "Target", "Address", "Rules"], rows: list.map {
                    [Cell(Timestamp.format($0.at)), Cell($0.target), Cell($0.address), Cell($0.rules.joined(separator: ", "), tone)]
                }))
            }
        }
        blocks.append(.subheading("New certificates (\(changes.certificates.count))"))
        if !changes.certificates.isEmpty {
            blocks.append(.table(header: ["When", "Target", "Address", "Key", "New SHA-256", "Certificate"], rows: changes.certificates.map {
                [Cell(Timestamp.format($0.at)), Cell($0.target), Cell($0.address),
                 $0.sameKey ? Cell("same key", .good) : Cell("NEW KEY", .warning), Cell(String($0.newFingerprint.prefix(16)), .muted),
                 Cell($0.summary)]
            }))
        }
        for (title, list) in [("Pin events", changes.pinEvents), ("Alerts", changes.alerts)] {
            blocks.append(.subheading("\(title) (\(list.count))"))
            if !list.isEmpty {
                blocks.append(.table(header: ["When", "Severity", "Kind", "Target", "Address", "Summary"], rows: list.map {
                    [Cell(Timestamp.format($0.at)), Self.severity($0.severity.rawValue), Cell($0.kind.rawValue), Cell($0.target), Cell($0.address),
                     Cell($0.summary)]
                }))
            }
        }
    }

    private mutating func expiring(_ report: ComplianceReport) {
        blocks.append(.heading("Certificates expiring within \(report.expiringWithinDays) days (\(report.expiring.count))"))
        guard !report.expiring.isEmpty else {
            blocks.append(.paragraph("None: every certificate of every current chain is valid for longer."))
            return
        }
        blocks.append(.table(header: ["Days left", "Not after", "Certificate", "Depth", "Issuer", "Used by"], rows: report.expiring.map {
            [Self.expiry($0.notAfter, daysLeft: $0.daysLeft, dayOnly: false), Cell(Timestamp.formatDay($0.notAfter)),
             Cell($0.commonName ?? $0.subject), Cell($0.depth == 0 ? "leaf" : "CA (\($0.depth))", .muted), Cell($0.issuer, .muted),
             Cell($0.usedBy.joined(separator: ", "))]
        }))
    }

    private mutating func unreachable(_ report: ComplianceReport) {
        blocks.append(.heading("Unreachable (\(report.unreachable.count))"))
        guard !report.unreachable.isEmpty else {
            blocks.append(.paragraph("Every address answered its last scan."))
            return
        }
        blocks.append(.table(header: ["Target", "Address", "Last reached", "Last scan", "Failure"], rows: report.unreachable.map {
            [Cell($0.target), Cell($0.address), Cell($0.lastReachableAt.map(Timestamp.format) ?? "never", .muted),
             Cell(Timestamp.format($0.lastScanAt)),
             Cell([$0.failureCategory?.rawValue, $0.failureMessage].compactMap { $0 }.joined(separator: ": "), .bad)]
        }))
    }

    /// Every k-th point and the last, at most about `limit` (the HTML chart shows them all; a text
    /// table of sixty rows would bury the rest of the report).
    static func thinned(_ points: [ComplianceReport.TrendPoint], limit: Int = 13) -> [ComplianceReport.TrendPoint] {
        guard points.count > limit, let last = points.last else { return points }
        let every = (points.count - 2) / (limit - 1) + 1
        let picked = stride(from: 0, to: points.count - 1, by: every).map { points[$0] }
        return picked + [last]
    }

    // MARK: - Cells

    static func status(_ condition: AddressCondition) -> Cell {
        switch condition {
        case .compliant: Cell("compliant", .good)
        case .notCompliant: Cell("NOT COMPLIANT", .bad)
        case .unreachable: Cell("UNREACHABLE", .warning)
        }
    }

    static func severity(_ severity: String) -> Cell {
        switch severity {
        case "critical", "error": Cell(severity, .bad)
        case "warning": Cell(severity, .warning)
        default: Cell(severity, .muted)
        }
    }

    static func expiry(_ date: Date?, daysLeft: Int?, dayOnly: Bool = true) -> Cell {
        guard let date, let days = daysLeft else { return Cell("-", .muted) }
        let text = dayOnly ? "\(Timestamp.formatDay(date)) (\(days < 0 ? "expired \(-days)d ago" : "\(days)d"))"
            : days < 0 ? "expired \(-days)d ago" : "\(days)"
        return Cell(text, days < 0 ? .bad : days <= 14 ? .warning : .plain)
    }

    static func percent(_ value: Double?) -> String {
        value.map { "\(number($0))%" } ?? "n/a"
    }

    /// `1 day`, `7 days`, `1.5 hours`.
    static func count(_ value: Double, _ unit: String) -> String {
        "\(number(value)) \(unit)\(number(value) == "1" ? "" : "s")"
    }

    /// `12`, `12.5`: at most one decimal, none when whole.
    static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }
}
