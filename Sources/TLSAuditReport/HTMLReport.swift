import Foundation
import TLSAuditCore
import TLSAuditSupport

/// One self-contained HTML file: inline CSS, the trend as inline SVG, no scripts and no external
/// assets. Readable on a phone (wide tables scroll sideways) and printable (colours kept, rows
/// never split across pages). Every piece of text goes through `escape`.
enum HTMLReport {
    static func render(_ document: ReportDocument) -> String {
        var body = ""
        for block in document.blocks {
            switch block {
            case .heading(let text):
                body += "<h2>\(escape(text))</h2>\n"
            case .subheading(let text):
                body += "<h3>\(escape(text))</h3>\n"
            case .paragraph(let text):
                body += "<p>\(escape(text))</p>\n"
            case .table(let header, let rows, let stacksOnPhone):
                let style = stacksOnPhone ? " class=\"stack\"" : ""
                body += "<div class=\"scroll\"><table\(style)>\n<thead><tr>" + header.map { "<th>\(escape($0))</th>" }.joined() + "</tr></thead>\n<tbody>\n"
                for row in rows {
                    body += "<tr>" + row.map { cell in
                        // Long suite names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) may wrap after each underscore.
                        let text = escape(cell.text).replacingOccurrences(of: "_", with: "_<wbr>")
                        return cell.tone == .plain ? "<td>\(text)</td>" : "<td class=\"\(cell.tone.rawValue)\">\(text)</td>"
                    }.joined() + "</tr>\n"
                }
                body += "</tbody></table></div>\n"
            case .trend(let points, let goal):
                body += "<figure>\n" + TrendChart.svg(points, goal: goal)
                    + "<figcaption>Compliance of the addresses reached, over the part of the period with scans; green at or above the goal of \(escape(ReportDocument.percent(goal))) (dashed line), red below it.</figcaption>\n</figure>\n"
            }
        }
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
            <title>\(escape(document.title))</title>
            <style>
            \(stylesheet)
            </style>
            </head>
            <body>
            <header><h1>\(escape(document.title))</h1><p class="muted">\(escape(document.subtitle))</p></header>
            <main>
            \(body)</main>
            </body>
            </html>

            """
    }

    /// Escapes the five characters that matter in HTML text and attribute values.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                out += String(character).withoutControlCharacters
            }
        }
        return out
    }

    static let stylesheet = """
        :root { --good: #1a7f37; --bad: #cf222e; --warning: #9a6700; --muted: #59636e; --line: #d1d9e0; }
        * { box-sizing: border-box; }
        body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; margin: 0 auto; max-width: 72rem; padding: 1rem; }
        h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
        h2 { font-size: 1.2rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
        h3 { font-size: 1rem; margin: 1.25rem 0 .4rem; }
        p { margin: .4rem 0; }
        .scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
        table { border-collapse: collapse; width: 100%; font-size: .875rem; }
        th, td { text-align: left; vertical-align: top; padding: .3rem .5rem; border-bottom: 1px solid var(--line); overflow-wrap: break-word; }
        td:nth-child(-n+3) { min-width: 5.5rem; }
        th { background: #f6f8fa; white-space: nowrap; }
        td.good { color: var(--good); } td.bad { color: var(--bad); font-weight: 600; }
        td.warning { color: var(--warning); font-weight: 600; } td.muted, .muted { color: var(--muted); }
        figure { margin: 1rem 0; } figcaption { color: var(--muted); font-size: .8rem; }
        svg { width: 100%; height: auto; max-height: 16rem; }
        table.stack td:first-child { min-width: 0; width: 2rem; }
        @media (max-width: 40rem) {
          body { padding: .5rem; font-size: 14px; } th, td { padding: .25rem .35rem; }
          table.stack thead { display: none; }
          table.stack tr { display: block; border-bottom: 1px solid var(--line); padding: .3rem 0; }
          table.stack td { display: inline-block; border: 0; min-width: 0; width: auto; padding: .1rem .35rem; }
          table.stack td:nth-child(4), table.stack td:nth-child(5) { display: block; }
        }
        @media print {
          body { max-width: none; padding: 0; font-size: 10pt; }
          * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
          .scroll { overflow: visible; }
          tr, figure { break-inside: avoid; }
          h2, h3 { break-after: avoid; }
        }
        """
}

/// The compliance trend as an inline SVG line chart (0-100%), with a tooltip per point.
enum TrendChart {
    static func svg(_ points: [ComplianceReport.TrendPoint], goal: Double) -> String {
        let width = 720.0, height = 220.0, left = 44.0, right = 12.0, top = 12.0, bottom = 30.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        var out = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"Compliance over the period\">\n"
        for tick in stride(from: 0, through: 100, by: 25) {
            let y = top + plotHeight * (1 - Double(tick) / 100)
            out += "<line x1=\"\(left)\" y1=\"\(fmt(y))\" x2=\"\(width - right)\" y2=\"\(fmt(y))\" stroke=\"#d1d9e0\" stroke-width=\"1\"/>"
            out += "<text x=\"\(left - 6)\" y=\"\(fmt(y + 4))\" font-size=\"11\" text-anchor=\"end\" fill=\"#59636e\">\(tick)%</text>\n"
        }
        guard let first = points.first, let last = points.last else { return out + "</svg>\n" }
        let span = max(last.at.timeIntervalSince(first.at), 1)
        func x(_ point: ComplianceReport.TrendPoint) -> Double { left + plotWidth * point.at.timeIntervalSince(first.at) / span }
        func y(_ value: Double) -> Double { top + plotHeight * (1 - value / 100) }
        // Runs of points with data, drawn as separate lines (a gap where nothing was reached).
        var runs: [[ComplianceReport.TrendPoint]] = [[]]
        for point in points {
            if point.compliance == nil { if !(runs.last?.isEmpty ?? true) { runs.append([]) } } else { runs[runs.count - 1].append(point) }
        }
        // The goal, dashed; the line is green where the fleet meets it, red where it does not.
        out += "<line x1=\"\(left)\" y1=\"\(fmt(y(goal)))\" x2=\"\(width - right)\" y2=\"\(fmt(y(goal)))\" stroke=\"#59636e\" stroke-width=\"1\" stroke-dasharray=\"4 3\"/>"
        out += "<text x=\"\(width - right)\" y=\"\(fmt(y(goal) - 4))\" font-size=\"11\" text-anchor=\"end\" fill=\"#59636e\">goal \(HTMLReport.escape(ReportDocument.percent(goal)))</text>\n"
        func colour(_ value: Double) -> String { value >= goal ? "#1a7f37" : "#cf222e" }
        for run in runs where !run.isEmpty {
            for (from, to) in zip(run, run.dropFirst()) {
                let worst = min(from.compliance!, to.compliance!)
                out += "<line x1=\"\(fmt(x(from)))\" y1=\"\(fmt(y(from.compliance!)))\" x2=\"\(fmt(x(to)))\" y2=\"\(fmt(y(to.compliance!)))\" stroke=\"\(colour(worst))\" stroke-width=\"2\"/>\n"
            }
        }
        for point in points {
            guard let value = point.compliance else { continue }
            let label = "\(Timestamp.format(point.at)): \(ReportDocument.percent(value)) (\(point.compliant) of \(point.compliant + point.notCompliant) reached; \(point.unreachable) unreachable)"
            out += "<circle cx=\"\(fmt(x(point)))\" cy=\"\(fmt(y(value)))\" r=\"2.5\" fill=\"\(colour(value))\"><title>\(HTMLReport.escape(label))</title></circle>\n"
        }
        for (point, anchor) in [(first, "start"), (last, "end")] {
            out += "<text x=\"\(fmt(x(point)))\" y=\"\(fmt(height - 8))\" font-size=\"11\" text-anchor=\"\(anchor)\" fill=\"#59636e\">\(HTMLReport.escape(Timestamp.format(point.at)))</text>\n"
        }
        return out + "</svg>\n"
    }

    static func fmt(_ value: Double) -> String { String(format: "%.1f", value) }
}
