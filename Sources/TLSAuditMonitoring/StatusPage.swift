import Foundation
import TLSAuditModel

/// The live status page at `/`: the fleet table of `tlsaudit status` with each address's specific
/// reasons, sortable by any column, refreshed from `/api/v1/status` every 10 s without a reload.
/// Self-contained: its script comes from `/status.js` on the same listener (the page's CSP allows
/// nothing else), and no font, image or stylesheet is loaded from anywhere. Each reason that is a
/// finding shows its title from `FindingCatalog` (its `title` attribute, set through the DOM).
enum StatusPage {
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static let html = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>tlsaudit status</title>
        <style>
        :root { color-scheme: light dark; --bad: #c62828; --warn: #b26a00; --good: #2e7d32; --line: #8884; }
        body { font: 15px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; padding: 12px; }
        h1 { font-size: 20px; margin: 0 0 4px; }
        #summary { margin: 0 0 10px; color: #777; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { cursor: pointer; user-select: none; white-space: nowrap; position: sticky; top: 0; background: Canvas; }
        th[aria-sort="ascending"]::after { content: " \\25B2"; }
        th[aria-sort="descending"]::after { content: " \\25BC"; }
        .bad { color: var(--bad); font-weight: 600; } .warn { color: var(--warn); font-weight: 600; } .good { color: var(--good); }
        .reasons { font-family: ui-monospace, monospace; font-size: 13px; word-break: break-word; }
        #error { color: var(--bad); }
        @media (max-width: 700px) {
          thead { display: none; }
          table, tbody, tr, td { display: block; width: 100%; box-sizing: border-box; }
          tr { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 10px; padding: 4px 0; }
          td { border: none; padding: 3px 10px; }
          td::before { content: attr(data-label) ": "; color: #777; }
          td:empty { display: none; }
          #sort { display: block; margin: 0 0 10px; }
        }
        @media (min-width: 701px) { #sort { display: none; } }
        </style>
        </head>
        <body>
        <h1>tlsaudit status</h1>
        <p id="summary">loading…</p>
        <p id="error" hidden></p>
        <label id="sort">Sort by <select id="sort-key"></select></label>
        <table id="status">
        <thead><tr>
        <th data-key="target">Target</th><th data-key="address">Address</th><th data-key="verdict">Verdict</th>
        <th data-key="reasons">Reasons</th><th data-key="expiry">Expires in</th><th data-key="pin">Pin</th><th data-key="age">Last scan</th>
        </tr></thead>
        <tbody></tbody>
        </table>
        <script src="/status.js"></script>
        </body>
        </html>

        """

    /// Finding id to title, from the catalog, as a JavaScript object (JSON: escaped, sorted).
    static let findingTitles: String = {
        let titles = Dictionary(FindingCatalog.entries.map { ($0.id.rawValue, $0.title) }, uniquingKeysWith: { first, _ in first })
        let data = (try? JSONSerialization.data(withJSONObject: titles, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }()

    static let script = """
        "use strict";
        const titles = \(findingTitles);
        const columns = ["target", "address", "verdict", "reasons", "expiry", "pin", "age"];
        const labels = {target: "Target", address: "Address", verdict: "Verdict", reasons: "Reasons", expiry: "Expires in", pin: "Pin", age: "Last scan"};
        let rows = [];
        let sortKey = "verdict", ascending = true;

        function verdictOf(t) {
          if (t.status === "failed") return {text: "unreachable", rank: 0, css: "bad"};
          if (t.pin_state === "mismatch") return {text: "pin mismatch", rank: 1, css: "bad"};
          if (!t.compliant) return {text: "not compliant", rank: 2, css: "warn"};
          return {text: "compliant", rank: 3, css: "good"};
        }
        function reasonsOf(t) {
          if (t.status === "failed") return [t.failure_category || "failed"];
          return [...(t.trust_errors || []), ...(t.failed_rules || []).filter(r => !(t.trust_errors || []).includes(r))];
        }
        function days(seconds) { return seconds === null ? "" : (seconds / 86400).toFixed(seconds < 864000 ? 1 : 0) + " d"; }
        function ago(seconds) {
          if (seconds < 90) return Math.round(seconds) + " s ago";
          if (seconds < 5400) return Math.round(seconds / 60) + " min ago";
          if (seconds < 172800) return Math.round(seconds / 3600) + " h ago";
          return Math.round(seconds / 86400) + " d ago";
        }
        function model(t, now) {
          const verdict = verdictOf(t);
          const expiry = t.earliest_expiry ? (Date.parse(t.earliest_expiry) - now) / 1000 : null;
          const age = (now - Date.parse(t.last_scan_at)) / 1000;
          return {
            target: t.target, address: t.address, verdict, reasons: reasonsOf(t), expiry, pin: t.pin_state, age,
            sort: {target: t.target, address: t.address, verdict: verdict.rank, reasons: reasonsOf(t).join(" "),
                   expiry: expiry === null ? Infinity : expiry, pin: t.pin_state, age}
          };
        }
        function render() {
          const body = document.querySelector("#status tbody");
          const sorted = rows.slice().sort((a, b) => {
            const x = a.sort[sortKey], y = b.sort[sortKey];
            const order = x < y ? -1 : x > y ? 1 : (a.target + a.address).localeCompare(b.target + b.address);
            return ascending ? order : -order;
          });
          body.replaceChildren(...sorted.map(r => {
            const tr = document.createElement("tr");
            tr.dataset.target = r.target;
            const cells = {
              target: [r.target], address: [r.address], verdict: [r.verdict.text, r.verdict.css],
              reasons: [r.reasons.join(", "), "reasons"], expiry: [days(r.expiry), r.expiry !== null && r.expiry < 14 * 86400 ? "warn" : ""],
              pin: [r.pin, r.pin === "mismatch" ? "bad" : ""], age: [ago(r.age)]
            };
            for (const key of columns) {
              const td = document.createElement("td");
              if (key === "reasons") {
                r.reasons.forEach((reason, index) => {
                  if (index > 0) td.append(", ");
                  const span = document.createElement("span");
                  span.textContent = reason;
                  if (Object.hasOwn(titles, reason)) span.title = titles[reason];
                  td.append(span);
                });
              } else {
                td.textContent = cells[key][0];
              }
              if (cells[key][1]) td.className = cells[key][1];
              td.dataset.label = labels[key];
              td.dataset.key = key;
              tr.appendChild(td);
            }
            return tr;
          }));
          for (const th of document.querySelectorAll("th")) {
            th.setAttribute("aria-sort", th.dataset.key === sortKey ? (ascending ? "ascending" : "descending") : "none");
          }
          const bad = rows.filter(r => r.verdict.rank < 3).length;
          document.getElementById("summary").textContent =
            rows.length + " addresses, " + bad + " need attention; updated " + new Date().toLocaleTimeString();
        }
        async function refresh() {
          try {
            const response = await fetch("/api/v1/status", {cache: "no-store", credentials: "same-origin"});
            if (!response.ok) throw new Error("HTTP " + response.status);
            const document_ = await response.json();
            const now = Date.now();
            rows = document_.targets.map(t => model(t, now));
            document.getElementById("error").hidden = true;
            render();
          } catch (error) {
            const banner = document.getElementById("error");
            banner.textContent = "cannot read /api/v1/status: " + error.message + " (retrying)";
            banner.hidden = false;
          }
        }
        function sortBy(key) {
          ascending = key === sortKey ? !ascending : true;
          sortKey = key;
          document.getElementById("sort-key").value = key;
          render();
        }
        for (const th of document.querySelectorAll("th")) th.addEventListener("click", () => sortBy(th.dataset.key));
        const select = document.getElementById("sort-key");
        for (const key of columns) select.add(new Option(labels[key], key));
        select.value = sortKey;
        select.addEventListener("change", () => { ascending = false; sortBy(select.value); });
        refresh();
        setInterval(refresh, 10000);

        """
}
