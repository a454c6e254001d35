import Foundation
import TLSAuditModel

/// What the listener's pages share: the stylesheet (`/ui.css`) and the script of helpers
/// (`/ui.js`). The pages load nothing from anywhere else, and their CSP allows nothing else
/// (`contentSecurityPolicy`): no inline script, no inline style attribute, no font, no image.
/// Every value from the API reaches the page as text (`textContent`, `setAttribute`), never as
/// markup, so hostile target names, subjects and SANs render as what they are.
enum PageAssets {
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// A page: the shared head, `body` (static markup only), then `/ui.js` and the page's own `script`.
    static func html(title: String, body: String, script: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(title)</title>
        <link rel="stylesheet" href="/ui.css">
        </head>
        <body>
        \(body)
        <p id="error" role="alert" hidden></p>
        <script src="/ui.js"></script>
        <script src="\(script)"></script>
        </body>
        </html>

        """
    }

    /// Finding id to title, from the catalog, as a JavaScript object (JSON: escaped, sorted).
    static let findingTitles: String = {
        let titles = Dictionary(FindingCatalog.entries.map { ($0.id.rawValue, $0.title) }, uniquingKeysWith: { first, _ in first })
        let data = (try? JSONSerialization.data(withJSONObject: titles, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }()

    static let stylesheet = """
        :root { color-scheme: light dark; --bad: #c62828; --warn: #a35f00; --good: #2e7d32; --line: #8884; --muted: #6b6b6b; --fill: #1f6feb; }
        body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 12px; max-width: 1400px; }
        h1 { font-size: 21px; margin: 0 0 6px; overflow-wrap: anywhere; } h2 { font-size: 17px; margin: 22px 0 8px; overflow-wrap: anywhere; }
        h3 { font-size: 15px; margin: 14px 0 6px; }
        a { color: inherit; } a:focus-visible, button:focus-visible, select:focus-visible, input:focus-visible, summary:focus-visible { outline: 3px solid var(--fill); outline-offset: 2px; }
        .muted, #updated { color: var(--muted); }
        #error { color: var(--bad); font-weight: 600; }
        #trust-inputs p { border-left: 4px dashed var(--warn); padding-left: 0.5em; }
        .tiles { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0 12px; padding: 0; list-style: none; }
        .tiles button { font: inherit; text-align: left; border: 1px solid var(--line); border-radius: 8px; padding: 6px 12px; background: Canvas; color: CanvasText; cursor: pointer; min-width: 120px; }
        .tiles button[aria-pressed="true"] { border: 2px solid CanvasText; }
        .tiles strong { display: block; font-size: 22px; }
        .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 12px 24px; }
        .charts figure { margin: 0; } figcaption { font-weight: 600; margin: 0 0 4px; }
        svg.chart { width: 100%; height: auto; display: block; font-size: 12px; }
        svg.chart text { fill: CanvasText; } svg.chart .axis { stroke: var(--line); } svg.chart .line { fill: none; stroke: var(--fill); stroke-width: 2.5; }
        svg.chart .point { fill: var(--fill); } svg.chart .goal { stroke: CanvasText; stroke-dasharray: 6 4; }
        svg.chart .bar { fill: var(--fill); stroke: CanvasText; stroke-width: 0.5; } svg.chart .bar.expired { fill: url(#hatch); }
        svg.chart .hatch-line { stroke: var(--bad); stroke-width: 3; }
        details { margin: 6px 0; } summary { cursor: pointer; }
        .weeks { margin: 6px 0 0; } .weeks ul { margin: 2px 0 8px; padding-left: 20px; }
        form.filters { display: flex; flex-wrap: wrap; gap: 8px 12px; align-items: end; margin: 14px 0 8px; }
        form.filters label { display: flex; flex-direction: column; font-size: 13px; color: var(--muted); }
        form.filters select, form.filters input, form.filters button, #more { font: inherit; padding: 4px 6px; min-height: 32px; }
        form.filters input { min-width: 14em; }
        table { border-collapse: collapse; width: 100%; }
        caption { text-align: left; font-weight: 600; padding: 6px 0; overflow-wrap: anywhere; }
        th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { white-space: nowrap; position: sticky; top: 0; background: Canvas; }
        th button { font: inherit; font-weight: 600; border: 0; background: none; color: inherit; padding: 0; cursor: pointer; }
        th[aria-sort="ascending"] button::after { content: " \\25B2"; } th[aria-sort="descending"] button::after { content: " \\25BC"; }
        .verdict { font-weight: 600; white-space: nowrap; }
        .bad { color: var(--bad); } .warn { color: var(--warn); } .good { color: var(--good); }
        .reasons { margin: 0; padding: 0; list-style: none; } .reasons li { margin: 0 0 2px; }
        code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 13px; overflow-wrap: anywhere; }
        td, dd, li { overflow-wrap: anywhere; }
        dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; } dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
        .finding { border-left: 4px solid var(--line); padding: 4px 10px; margin: 0 0 10px; }
        .finding.error { border-left: 4px double var(--bad); } .finding.warning { border-left: 4px dashed var(--warn); }
        .finding p { margin: 2px 0; }
        .timeline { list-style: none; padding: 0; margin: 0; } .timeline li { border-left: 2px solid var(--line); padding: 2px 0 8px 12px; }
        .timeline time { font-family: ui-monospace, monospace; font-size: 13px; }
        .scroll { overflow-x: auto; }
        @media (max-width: 700px) {
          table.cards thead { display: none; }
          table.cards, table.cards caption, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; box-sizing: border-box; }
          table.cards tr { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 10px; padding: 4px 0; }
          table.cards td { border: none; padding: 3px 10px; }
          table.cards td::before { content: attr(data-label) ": "; color: var(--muted); }
          table.cards td:empty { display: none; }
          form.filters label, form.filters input, form.filters select { width: 100%; min-width: 0; box-sizing: border-box; }
          dl.facts { grid-template-columns: 1fr; } dl.facts dd { margin: 0 0 6px; }
        }
        @media (min-width: 701px) { form.filters .narrow-only { display: none; } }

        """

    /// The helpers both pages use, as `TLSAudit`: DOM builders that take text only, the API reader,
    /// the verdict of a status row (in words and a mark, never colour alone), days and times.
    static let script = #"""
        "use strict";
        const TLSAudit = (() => {
          const titles = \#(findingTitles);
          function build(node, attributes, children) {
            for (const [key, value] of Object.entries(attributes || {})) {
              if (value === null || value === undefined || value === false) continue;
              if (key === "class") node.setAttribute("class", value);
              else if (key === "text") node.textContent = value;
              else node.setAttribute(key, value === true ? "" : String(value));
            }
            for (const child of children.flat(Infinity)) {
              if (child === null || child === undefined || child === false) continue;
              node.append(child instanceof Node ? child : String(child));
            }
            return node;
          }
          /// An HTML element; strings among the children become text nodes.
          function el(tag, attributes, ...children) { return build(document.createElement(tag), attributes, children); }
          /// Replaces a node's children (arrays flattened, strings as text).
          function replace(node, ...children) { node.replaceChildren(); return build(node, {}, children); }
          /// An SVG element.
          function svg(tag, attributes, ...children) { return build(document.createElementNS("http://www.w3.org/2000/svg", tag), attributes, children); }
          async function getJSON(path) {
            const response = await fetch(path, {cache: "no-store", credentials: "same-origin"});
            if (!response.ok) {
              let message = "HTTP " + response.status;
              try { message += ": " + (await response.json()).error; } catch (ignored) {}
              const error = new Error(message);
              error.status = response.status;
              throw error;
            }
            return response.json();
          }
          function showError(message) {
            const banner = document.getElementById("error");
            banner.textContent = message || "";
            banner.hidden = !message;
          }
          /// A status row's verdict: words, a mark readable without colour, a rank (worst first) and its class.
          function verdictOf(row) {
            if (row.status === "failed") return {key: "unreachable", text: "unreachable", mark: "\u2715", rank: 0, css: "bad"};
            if (row.pin_state === "mismatch" || (row.failed_rules || []).includes("pin.mismatch")) return {key: "pin-mismatch", text: "pin mismatch", mark: "\u2715", rank: 1, css: "bad"};
            if (!row.compliant) return {key: "not-compliant", text: "not compliant", mark: "!", rank: 2, css: "warn"};
            return {key: "compliant", text: "compliant", mark: "\u2713", rank: 3, css: "good"};
          }
          function verdictNode(verdict) {
            return el("span", {class: "verdict " + verdict.css}, verdict.mark + " " + verdict.text);
          }
          /// The reasons to show: the failed rules, `ats.trust` replaced by the trust errors behind it (as `status`).
          function reasonsOf(row) {
            if (row.status === "failed") return [row.failure_category || "failed"];
            const trust = [...new Set(row.trust_errors || [])];
            const rules = row.failed_rules || [];
            const index = rules.indexOf("ats.trust");
            if (trust.length === 0 || index < 0) return rules;
            return [...rules.slice(0, index), ...trust, ...rules.slice(index + 1)];
          }
          function title(id) { return Object.hasOwn(titles, id) ? titles[id] : null; }
          /// A finding id with its title in words: `trust.expired` Certificate expired.
          function reasonNode(id) {
            const words = title(id);
            return el("li", {"data-id": id}, el("code", {}, id), words ? " " + words : null);
          }
          /// Whole days from now to an ISO time, rounded down (negative once past), as `status` and reports count them.
          function daysLeft(iso, now) { return iso ? Math.floor((Date.parse(iso) - now) / 86400000) : null; }
          function daysText(days) {
            if (days === null) return "";
            return days < 0 ? "expired " + (-days) + " d ago" : days + " d";
          }
          function ago(seconds) {
            if (seconds < 90) return Math.round(seconds) + " s ago";
            if (seconds < 5400) return Math.round(seconds / 60) + " min ago";
            if (seconds < 172800) return Math.round(seconds / 3600) + " h ago";
            return Math.round(seconds / 86400) + " d ago";
          }
          /// An ISO time as `2026-11-26 19:55 UTC` (the same for every reader of a shared link).
          function when(iso) { return iso ? iso.replace("T", " ").replace(/(:\d\d)(\.\d+)?Z$/, "$1").slice(0, 16) + " UTC" : ""; }
          function day(iso) { return iso ? iso.slice(0, 10) : ""; }
          function targetLink(name) { return el("a", {href: "/targets/" + encodeURIComponent(name)}, name); }
          return {el, svg, replace, getJSON, showError, verdictOf, verdictNode, reasonsOf, title, reasonNode, daysLeft, daysText, ago, when, day, targetLink};
        })();

        """#
}
