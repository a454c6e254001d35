import Foundation
import TLSAuditCore
import TLSAuditOutput
import TLSAuditSupport

/// The formats `tlsaudit report --format` writes.
public enum ReportFormat: String, CaseIterable, Sendable, Codable {
    case text, markdown, json, csv, html

    /// The file extension scheduled reports use.
    public var fileExtension: String {
        switch self {
        case .text: "txt"
        case .markdown: "md"
        case .json: "json"
        case .csv: "csv"
        case .html: "html"
        }
    }
}

/// Renders a report in any format. Every string that comes from a server (subjects, names,
/// failure messages) is neutralised for the format: control characters replaced in text,
/// Markdown and CSV (no terminal escapes), Markdown metacharacters escaped, CSV cells that a
/// spreadsheet would run as a formula quoted, and everything escaped in HTML.
public enum ReportRenderer {
    /// `compact`: JSON on one line instead of indented.
    public static func render(_ report: ComplianceReport, as format: ReportFormat, compact: Bool = false) throws -> String {
        switch format {
        case .text: TextReport.render(ReportDocument(report))
        case .markdown: MarkdownReport.render(ReportDocument(report))
        case .html: HTMLReport.render(ReportDocument(report))
        case .csv: CSVReport.render(report)
        case .json: String(decoding: try (compact ? JSONDocumentEncoder.tlsauditCompact : .tlsaudit).encode(report), as: UTF8.self) + "\n"
        }
    }
}

extension String {
    /// The string with control characters (C0, DEL, C1; newlines and tabs included) shown as
    /// U+FFFD, so a hostile certificate cannot move the cursor or recolour a terminal.
    var withoutControlCharacters: String {
        guard unicodeScalars.contains(where: \.isControl) else { return self }
        return String(String.UnicodeScalarView(unicodeScalars.map { $0.isControl ? "\u{FFFD}" : $0 }))
    }
}

extension Unicode.Scalar {
    /// C0, DEL and C1 controls, and the bidirectional overrides and isolates (U+202A-202E,
    /// U+2066-2069) that would let a name display reordered text.
    var isControl: Bool {
        value < 0x20 || (0x7F...0x9F).contains(value) || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
    }
}

/// Plain text for a terminal or an e-mail body.
enum TextReport {
    static func render(_ document: ReportDocument) -> String {
        var out = "\(document.title.uppercased())\n\(document.subtitle)\n"
        for block in document.blocks {
            switch block {
            case .heading(let text):
                out += "\n\(text.uppercased())\n"
            case .subheading(let text):
                out += "\n  \(text)\n"
            case .paragraph(let text):
                out += "  \(text.withoutControlCharacters)\n"
            case .table(let header, let rows, _):
                let table = TextTable.render(header: header.map { $0.uppercased() },
                                             rows: rows.map { $0.map(\.text.withoutControlCharacters) })
                out += table.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                    .map { "  " + $0 }.joined(separator: "\n") + "\n"
            case .trend(let points, let goal):
                out += "\n  Compliance over the period (goal \(ReportDocument.percent(goal))):\n"
                for point in ReportDocument.thinned(points) {
                    let mark = (point.compliance ?? 0) >= goal ? " " : "!"
                    out += "  \(Timestamp.format(point.at)) \(mark)\(bar(point.compliance))  \(ReportDocument.percent(point.compliance))"
                        + "  (\(point.compliant) of \(point.compliant + point.notCompliant) reached; \(point.unreachable) unreachable)\n"
                }
            }
        }
        return out
    }

    /// A 20-cell bar of a percentage.
    static func bar(_ value: Double?) -> String {
        guard let value else { return String(repeating: " ", count: 20) }
        let filled = Int((value / 5).rounded())
        return String(repeating: "#", count: filled) + String(repeating: ".", count: 20 - filled)
    }
}

/// Markdown (GitHub flavour): a wiki page or a ticket.
enum MarkdownReport {
    static func render(_ document: ReportDocument) -> String {
        var out = "# \(document.title)\n\n\(escape(document.subtitle))\n"
        for block in document.blocks {
            switch block {
            case .heading(let text):
                out += "\n## \(escape(text))\n"
            case .subheading(let text):
                out += "\n### \(escape(text))\n"
            case .paragraph(let text):
                out += "\n\(escape(text))\n"
            case .table(let header, let rows, _):
                out += "\n| " + header.map(escape).joined(separator: " | ") + " |\n"
                out += "|" + String(repeating: " --- |", count: header.count) + "\n"
                for row in rows {
                    out += "| " + row.map { cell in
                        let text = escape(cell.text)
                        return cell.tone == .bad && !text.isEmpty ? "**\(text)**" : text
                    }.joined(separator: " | ") + " |\n"
                }
            case .trend(let points, let goal):
                out += "\nGoal: \(escape(ReportDocument.percent(goal))) compliant; below it in bold.\n"
                out += "\n| When | Compliance | Compliant | Not compliant | Unreachable |\n| --- | --- | --- | --- | --- |\n"
                for point in ReportDocument.thinned(points) {
                    let percent = escape(ReportDocument.percent(point.compliance))
                    out += "| \(Timestamp.format(point.at)) | \((point.compliance ?? 0) >= goal ? percent : "**\(percent)**") | \(point.compliant) | \(point.notCompliant) | \(point.unreachable) |\n"
                }
            }
        }
        return out
    }

    /// Backslash-escapes Markdown's metacharacters and turns `<`, `>` and `&` into entities, so
    /// that a certificate name shows as written and never as markup or HTML.
    static func escape(_ text: String) -> String {
        var out = ""
        for character in text.withoutControlCharacters {
            switch character {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\\", "`", "*", "_", "{", "}", "[", "]", "#", "+", "|", "~":
                out += "\\\(character)"
            default: out.append(character)
            }
        }
        return out
    }
}

/// CSV (RFC 4180): one row per target and address, for spreadsheets and scripts.
enum CSVReport {
    static let header = ["target", "host", "port", "address", "status", "policy", "failed_rules", "trusted", "trust_errors",
                         "pin_state", "earliest_expiry", "days_left", "protocol", "cipher", "last_scan_at",
                         "failure_category", "failure_message", "fix_rank", "fix"]

    /// Added after `header` when some target names an app (`app:BUNDLE_ID`): its tags, the apps,
    /// and per app its status and what it relies on or why it does not connect (`; ` between apps).
    static let appHeader = ["tags", "apps", "app_status", "app_detail"]

    /// The rows to fix come first, in `fixFirst` order (`fix_rank` 1, 2, ...; several problems of
    /// one address are joined in `fix`), then the others in target order.
    static func render(_ report: ComplianceReport) -> String {
        var out = (header + (report.apps == nil ? [] : appHeader)).joined(separator: ",") + "\r\n"
        var appCells: [String: [(bundle: String, entry: ComplianceReport.AppAddress)]] = [:]
        for app in report.apps ?? [] {
            for entry in app.addresses { appCells[Self.key(entry.target, entry.address), default: []].append((app.bundle, entry)) }
        }
        var rank: [String: Int] = [:], fixes: [String: [String]] = [:]
        for item in report.fixFirst {
            let key = Self.key(item.target, item.address)
            if rank[key] == nil { rank[key] = rank.count + 1 }
            fixes[key, default: []].append("\(item.problem): \(item.fix)")
        }
        var rows: [(order: Int, index: Int, key: String, target: ComplianceReport.TargetEntry, address: ComplianceReport.AddressEntry)] = []
        for target in report.targets {
            for address in target.addresses {
                let key = Self.key(target.target, address.address)
                rows.append((rank[key] ?? Int.max, rows.count, key, target, address))
            }
        }
        rows.sort { ($0.order, $0.index) < ($1.order, $1.index) }
        for (_, _, key, target, address) in rows {
            var cells: [String?] = [
                target.target, target.host, String(target.port), address.address, address.status.rawValue,
                address.policy.rawValue, address.failedRules.joined(separator: " "),
                address.trusted.map { $0 ? "true" : "false" }, address.trustErrors.joined(separator: " "),
                address.pinState.rawValue, address.earliestExpiry.map(Timestamp.format), address.daysLeft.map(String.init),
                address.protocolVersion?.rawValue, address.cipher, Timestamp.format(address.lastScanAt),
                address.failureCategory?.rawValue, address.failureMessage, rank[key].map(String.init), fixes[key]?.joined(separator: "; "),
            ]
            if report.apps != nil { cells += appColumns(tags: target.tags, apps: appCells[key]) }
            out += cells.enumerated().map { index, cell in
                field(cell ?? "", numeric: index == 2 || index == 11 || index == 17)
            }.joined(separator: ",") + "\r\n"
        }
        return out
    }

    /// Quotes a field when needed; a text field a spreadsheet would evaluate (`=`, `+`, `-`, `@`
    /// first) gets a leading apostrophe (OWASP's advice against CSV injection).
    /// The cells of `appHeader` for one address: its target's tags, and per app its status and detail.
    static func appColumns(tags: [String]?, apps: [(bundle: String, entry: ComplianceReport.AppAddress)]?) -> [String?] {
        guard let apps else { return [tags?.joined(separator: " "), nil, nil, nil] }
        let details = apps.map { $0.entry.reliesOn ?? ($0.entry.reasons.joined(separator: " ") + ($0.entry.error.map { " (\($0))" } ?? "")) }
        return [tags?.joined(separator: " "), apps.map(\.bundle).joined(separator: " "), apps.map(\.entry.status).joined(separator: "; "),
                details.joined(separator: "; ")]
    }

    /// A row's key in the lookups above.
    static func key(_ target: String, _ address: String) -> String { target + "\u{1F}" + address }

    static func field(_ value: String, numeric: Bool) -> String {
        var text = value.withoutControlCharacters
        // The first scalar, not the first character: "=" followed by a combining mark is still a formula.
        if !numeric, let first = text.unicodeScalars.first, "=+-@".unicodeScalars.contains(first) { text = "'" + text }
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "'" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
