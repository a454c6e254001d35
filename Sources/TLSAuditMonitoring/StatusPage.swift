/// The overview at `/`: counts by verdict, the fleet's compliance over the last 30 days and the
/// certificates expiring within 90 days (inline SVG drawn from `/api/v1/summary`, of the targets
/// carrying the tag filter when one is chosen), then the fleet
/// table of `/api/v1/status` with each reason's title, filtered by tag, group, policy, verdict and
/// text and sorted by any column. Filters and order live in the URL (a link or a reload keeps
/// them); the page refreshes in place (status every 10 s, summary every 60 s) without touching
/// the filters or the scroll position.
enum StatusPage {
    static let html = PageAssets.html(title: "tlsaudit", body: """
        <header>
        <h1>tlsaudit</h1>
        <p id="updated" aria-live="polite">loading…</p>
        </header>
        <div id="trust-inputs" role="status" aria-live="polite" hidden></div>
        <ul class="tiles" id="counts" aria-label="Addresses by verdict"></ul>
        <section class="charts" aria-label="Trends">
        <figure id="trend"><figcaption>Compliance, last 30 days</figcaption></figure>
        <figure id="expiry"><figcaption>Certificates expiring in the next 90 days, by week</figcaption></figure>
        </section>
        <form class="filters" id="filters" role="search" aria-label="Filter the addresses">
        <label>Text <input type="search" id="filter-q" name="q" placeholder="target, address, reason, tag" autocomplete="off"></label>
        <label>Verdict <select id="filter-verdict" name="verdict"><option value="">any</option><option value="unreachable">unreachable</option><option value="pin-mismatch">pin mismatch</option><option value="not-compliant">not compliant</option><option value="compliant">compliant</option><option value="attention">needs attention</option></select></label>
        <label>Tag <select id="filter-tag" name="tag"><option value="">any</option></select></label>
        <label>Group <select id="filter-group" name="group"><option value="">any</option></select></label>
        <label>Policy <select id="filter-policy" name="policy"><option value="">any</option></select></label>
        <label class="narrow-only">Sort by <select id="sort-key" name="sort"></select></label>
        <button type="reset" id="filter-clear">Clear filters</button>
        </form>
        <p id="shown" class="muted" aria-live="polite"></p>
        <table id="status" class="cards">
        <thead><tr>
        <th data-key="target" scope="col"><button type="button">Target</button></th><th data-key="address" scope="col"><button type="button">Address</button></th>
        <th data-key="verdict" scope="col"><button type="button">Verdict</button></th><th data-key="reasons" scope="col"><button type="button">Reasons</button></th>
        <th data-key="expiry" scope="col"><button type="button">Expires in</button></th><th data-key="pin" scope="col"><button type="button">Pin</button></th>
        <th data-key="age" scope="col"><button type="button">Last scan</button></th>
        </tr></thead>
        <tbody></tbody>
        </table>
        <p><button type="button" id="more" hidden>Show all</button></p>
        <section id="ct" aria-labelledby="ct-title" hidden>
        <h2 id="ct-title">Certificates logged in CT for pinned or watched names</h2>
        <p class="muted">Valid from the last 30 days on, newest first: a <strong>break</strong> is refused by the name's pins (deployed, pinned apps fail: add its key as a backup pin first); an <strong>unexpected issuer</strong> is a CA the watch entry does not allow.</p>
        <table id="ct-sightings" class="cards">
        <thead><tr><th scope="col">Valid from</th><th scope="col">Verdict</th><th scope="col">Host</th><th scope="col">Judged by</th><th scope="col">Issuer</th><th scope="col">Key (SPKI)</th><th scope="col">Logged</th></tr></thead>
        <tbody></tbody>
        </table>
        </section>
        """, script: "/status.js")

    static let script = #"""
        "use strict";
        (() => {
        const {el, svg, replace, getJSON, showError, verdictOf, verdictNode, reasonsOf, reasonNode, daysLeft, daysText, ago, when, day, targetLink} = TLSAudit;
        const columns = ["target", "address", "verdict", "reasons", "expiry", "pin", "age"];
        const labels = {target: "Target", address: "Address", verdict: "Verdict", reasons: "Reasons", expiry: "Expires in", pin: "Pin", age: "Last scan"};
        const filterNames = ["q", "verdict", "tag", "group", "policy"];
        /// Rows drawn at first: enough for any screen; "Show all" draws the rest.
        const pageSize = 500;
        let rows = [], summary = null, summaryTag = "", statusAt = 0, sortKey = "verdict", ascending = true, showAll = false;

        function control(name) { return document.getElementById("filter-" + name); }
        /// Filters and order from the URL (a shared link, a reload), onto the controls.
        function readURL() {
          const query = new URLSearchParams(location.search);
          for (const name of filterNames) {
            const value = query.get(name) || "";
            const input = control(name);
            if (input.tagName === "SELECT" && value && ![...input.options].some(option => option.value === value)) input.add(new Option(value, value));
            input.value = value;
          }
          if (columns.includes(query.get("sort"))) sortKey = query.get("sort");
          ascending = query.get("order") !== "desc";
        }
        function writeURL() {
          const query = new URLSearchParams();
          for (const name of filterNames) if (control(name).value) query.set(name, control(name).value);
          if (sortKey !== "verdict" || !ascending) { query.set("sort", sortKey); query.set("order", ascending ? "asc" : "desc"); }
          const url = new URL(location.href);
          url.search = query.toString();
          history.replaceState(null, "", url.href);
        }
        function model(row, now) {
          const verdict = verdictOf(row);
          const days = daysLeft(row.earliest_expiry, now);
          const age = (now - Date.parse(row.last_scan_at)) / 1000;
          const reasons = reasonsOf(row);
          const tags = row.tags || [];
          return {
            row, verdict, reasons, days, age, tags,
            text: [row.target, row.address, row.host, verdict.text, ...reasons, ...reasons.map(id => TLSAudit.title(id) || ""), ...tags, row.group || "", row.policy].join(" ").toLowerCase(),
            sort: {target: row.target, address: row.address, verdict: verdict.rank, reasons: reasons.join(" "),
                   expiry: days === null ? Infinity : days, pin: row.pin_state, age}
          };
        }
        function matches(item) {
          const q = control("q").value.trim().toLowerCase();
          if (q && !q.split(/\s+/).every(word => item.text.includes(word))) return false;
          const verdict = control("verdict").value;
          if (verdict === "attention" ? item.verdict.rank === 3 : verdict && item.verdict.key !== verdict) return false;
          if (control("tag").value && !item.tags.includes(control("tag").value)) return false;
          if (control("group").value && (item.row.group || "") !== control("group").value) return false;
          if (control("policy").value && item.row.policy !== control("policy").value) return false;
          return true;
        }
        /// A select's options: "any" and the values present (the chosen one kept even when gone).
        function offer(name, values) {
          const select = control(name), chosen = select.value;
          const wanted = [...new Set(values.filter(Boolean))].sort();
          if (chosen && !wanted.includes(chosen)) wanted.push(chosen);
          const present = [...select.options].slice(1).map(option => option.value);
          if (present.join("\n") === wanted.join("\n")) return;
          select.replaceChildren(new Option("any", ""), ...wanted.map(value => new Option(value, value)));
          select.value = chosen;
        }
        function cell(key, content, css) {
          return el("td", {"data-key": key, "data-label": labels[key], class: css || null}, content);
        }
        function renderTable() {
          const now = statusAt;
          const shown = rows.filter(matches).sort((a, b) => {
            const x = a.sort[sortKey], y = b.sort[sortKey];
            const order = x < y ? -1 : x > y ? 1 : (a.row.target + " " + a.row.address).localeCompare(b.row.target + " " + b.row.address);
            return ascending ? order : -order;
          });
          const drawn = showAll ? shown : shown.slice(0, pageSize);
          replace(document.querySelector("#status tbody"), drawn.map(item => {
            const row = item.row;
            return el("tr", {"data-target": row.target, "data-address": row.address, "data-verdict": item.verdict.key},
              cell("target", [targetLink(row.target), row.group ? el("div", {class: "muted"}, "group " + row.group) : null,
                              item.tags.length ? el("div", {class: "muted"}, item.tags.join(", ")) : null]),
              cell("address", row.address),
              cell("verdict", verdictNode(item.verdict)),
              cell("reasons", item.reasons.length ? el("ul", {class: "reasons"}, item.reasons.map(reasonNode)) : null),
              cell("expiry", daysText(item.days), item.days !== null && item.days < 14 ? "warn" : null),
              cell("pin", row.pin_state === "mismatch" ? "\u2715 mismatch" : row.pin_state, row.pin_state === "mismatch" ? "bad" : null),
              cell("age", el("time", {datetime: row.last_scan_at, title: when(row.last_scan_at)}, ago(item.age))));
          }));
          for (const th of document.querySelectorAll("#status th")) {
            th.setAttribute("aria-sort", th.dataset.key === sortKey ? (ascending ? "ascending" : "descending") : "none");
          }
          document.getElementById("sort-key").value = sortKey;
          const more = document.getElementById("more");
          more.hidden = drawn.length === shown.length;
          more.textContent = "Show all " + shown.length + " addresses";
          const attention = rows.filter(item => item.verdict.rank < 3).length;
          document.getElementById("shown").textContent = (shown.length === rows.length ? rows.length + " addresses" : shown.length + " of " + rows.length + " addresses shown")
            + (drawn.length < shown.length ? " (first " + drawn.length + " drawn)" : "") + "; " + attention + " need attention";
          document.getElementById("shown").dataset.shown = shown.length;
        }
        function renderCounts() {
          const counts = {unreachable: 0, "pin-mismatch": 0, "not-compliant": 0, compliant: 0};
          for (const item of rows) counts[item.verdict.key] += 1;
          const chosen = control("verdict").value;
          replace(document.getElementById("counts"), [["compliant", "\u2713 compliant"], ["not-compliant", "! not compliant"],
              ["pin-mismatch", "\u2715 pin mismatch"], ["unreachable", "\u2715 unreachable"]].map(([key, text]) =>
            el("li", {}, el("button", {type: "button", "data-verdict": key, "aria-pressed": String(chosen === key),
                                        class: key === "compliant" ? "good" : key === "not-compliant" ? "warn" : "bad"},
                           el("strong", {}, String(counts[key])), text))));
        }
        /// A compliance figure in words: `93.2%`, or `n/a` for a moment with nothing to count.
        function percent(value) { return value === null || value === undefined ? "n/a" : value.toFixed(1) + "%"; }
        /// A chart's caption, naming the tag its summary is of.
        function caption(figure, text) { figure.querySelector("figcaption").textContent = text + (summaryTag ? " (tag " + summaryTag + ")" : ""); }
        /// Whether the figure's details are open: as the reader left them, else `initially` (a refresh keeps them).
        function stillOpen(figure, initially) {
          const details = figure.querySelector("details");
          return details ? details.open : initially;
        }
        /// A chart's width in its own units: the figure's width in pixels (text stays legible on a phone), 300 to 640.
        function chartWidth(figure) { return Math.round(Math.min(640, Math.max(300, figure.clientWidth || 640))); }
        /// The compliance trend: a line through the report's points (percent), the goal dashed, each point titled.
        function renderTrend() {
          const figure = document.getElementById("trend");
          const points = summary.trend.filter(point => point.compliance !== null && point.compliance !== undefined);
          const start = Date.parse(summary.period.start), end = Date.parse(summary.period.end);
          const width = chartWidth(figure), height = 220, left = 44, right = 16, top = 14, bottom = 34;
          const x = time => left + (end > start ? (time - start) / (end - start) : 1) * (width - left - right);
          const y = percent => top + (100 - percent) / 100 * (height - top - bottom);
          const now = summary.summary.compliance, then = summary.summary.compliance_at_start;
          const words = points.length === 0 ? "no scans in the period"
            : "compliance " + (then === null || then === undefined ? "" : "from " + percent(then) + " ") + "to " + percent(now)
              + " between " + day(summary.period.start) + " and " + day(summary.period.end) + ", goal " + summary.goal + "%";
          const chart = svg("svg", {class: "chart", viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": words},
            svg("title", {}, words),
            [0, 50, 100].map(percent => [svg("line", {class: "axis", x1: left, x2: width - right, y1: y(percent), y2: y(percent)}),
                                        svg("text", {x: left - 6, y: y(percent) + 4, "text-anchor": "end"}, percent + "%")]),
            svg("line", {class: "goal", x1: left, x2: width - right, y1: y(summary.goal), y2: y(summary.goal)}),
            svg("text", {x: width - right, y: y(summary.goal) - 4, "text-anchor": "end"}, "goal " + summary.goal + "%"),
            svg("text", {x: left, y: height - 10}, day(summary.period.start)),
            svg("text", {x: width - right, y: height - 10, "text-anchor": "end"}, day(summary.period.end)),
            points.length ? svg("polyline", {class: "line", points: points.map(point => x(Date.parse(point.at)) + "," + y(point.compliance)).join(" ")}) : null,
            points.map(point => svg("circle", {class: "point", r: 3.5, cx: x(Date.parse(point.at)), cy: y(point.compliance),
                                               "data-at": point.at, "data-compliance": point.compliance},
              svg("title", {}, when(point.at) + ": " + percent(point.compliance) + " compliant (" + point.compliant + " compliant, "
                               + point.not_compliant + " not compliant, " + point.unreachable + " unreachable)"))),
            points.length ? svg("text", {x: x(Date.parse(points[points.length - 1].at)) - 4, y: y(points[points.length - 1].compliance) - 8, "text-anchor": "end"},
                                percent(points[points.length - 1].compliance)) : null);
          const table = el("details", {open: stillOpen(figure, false)}, el("summary", {}, "The points as a table"),
            el("div", {class: "scroll"}, el("table", {class: "trend-points"},
              el("thead", {}, el("tr", {}, ["Time", "Compliance", "Compliant", "Not compliant", "Unreachable"].map(name => el("th", {scope: "col"}, name)))),
              el("tbody", {}, summary.trend.map(point => el("tr", {},
                el("td", {}, when(point.at)), el("td", {}, percent(point.compliance)),
                el("td", {}, String(point.compliant)), el("td", {}, String(point.not_compliant)), el("td", {}, String(point.unreachable))))))));
          caption(figure, "Compliance, last 30 days");
          replace(figure, figure.querySelector("figcaption"), chart, el("p", {class: "muted"}, words), table);
          figure.dataset.periodEnd = summary.period.end;
        }
        /// The expiry timeline: one bar per week ahead (expired ones hatched, first), each labelled
        /// with its count, then the certificates of each week, nearest first.
        function renderExpiry() {
          const figure = document.getElementById("expiry");
          const weeks = Math.ceil(summary.expiring_within_days / 7);
          const buckets = [{label: "expired", short: "expired", items: []}];
          const end = Date.parse(summary.period.end);
          for (let week = 0; week < weeks; week += 1) {
            const from = new Date(end + week * 7 * 86400000).toISOString();
            buckets.push({label: "week of " + day(from) + " (" + week * 7 + " to " + (week * 7 + 6) + " days)", short: day(from).slice(5), items: []});
          }
          for (const certificate of summary.expiring) {
            const index = certificate.days_left < 0 ? 0 : Math.min(weeks, Math.floor(certificate.days_left / 7) + 1);
            buckets[index].items.push(certificate);
          }
          const width = chartWidth(figure), height = 220, left = 30, right = 8, top = 18, bottom = 40;
          const most = Math.max(1, ...buckets.map(bucket => bucket.items.length));
          const slot = (width - left - right) / buckets.length;
          const barHeight = count => count / most * (height - top - bottom);
          const total = summary.expiring.length;
          const words = total === 0 ? "no certificate expires within " + summary.expiring_within_days + " days"
            : total + " certificate(s) expired or expiring within " + summary.expiring_within_days + " days; " + buckets[0].items.length + " expired";
          const chart = svg("svg", {class: "chart", viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": words},
            svg("title", {}, words),
            svg("defs", {}, svg("pattern", {id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)"},
                                svg("line", {class: "hatch-line", x1: 0, y1: 0, x2: 0, y2: 6}))),
            svg("line", {class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom}),
            buckets.map((bucket, index) => {
              const count = bucket.items.length, h = barHeight(count), bx = left + index * slot + 3;
              return svg("g", {"data-week": index === 0 ? "expired" : String(index - 1), "data-count": count},
                svg("title", {}, bucket.label + ": " + count + " certificate(s)"),
                count ? svg("rect", {class: index === 0 ? "bar expired" : "bar", x: bx, width: slot - 6, y: height - bottom - h, height: h}) : null,
                svg("text", {x: bx + (slot - 6) / 2, y: height - bottom - h - 4, "text-anchor": "middle"}, String(count)),
                index % 2 === 0 || buckets.length < 8 ? svg("text", {x: bx + (slot - 6) / 2, y: height - bottom + 14, "text-anchor": "middle"}, bucket.short) : null);
            }),
            svg("text", {x: left, y: height - 6}, "expired, then weeks from " + day(summary.period.end)));
          const list = el("div", {class: "weeks"}, buckets.filter(bucket => bucket.items.length).map(bucket => [
            el("h3", {}, bucket.label[0].toUpperCase() + bucket.label.slice(1) + ": " + bucket.items.length),
            el("ul", {}, bucket.items.map(certificate => el("li", {"data-fingerprint": certificate.fingerprint},
              el("strong", {}, daysText(certificate.days_left)), " ", certificate.common_name || certificate.subject,
              certificate.depth === 0 ? " (leaf)" : " (CA, depth " + certificate.depth + ")",
              el("span", {class: "muted"}, " issued by " + certificate.issuer + "; used by "),
              certificate.used_by.map((user, index) => {
                const cut = user.lastIndexOf(" (");
                return [index ? ", " : "", cut > 0 ? targetLink(user.slice(0, cut)) : user, cut > 0 ? user.slice(cut) : ""];
              }))))]));
          caption(figure, "Certificates expiring in the next 90 days, by week");
          replace(figure, figure.querySelector("figcaption"), chart, el("p", {class: "muted"}, words),
                  el("details", {open: stillOpen(figure, total <= 12)}, el("summary", {}, "The certificates, nearest first"), list));
        }
        function render() {
          offer("tag", rows.flatMap(item => item.tags));
          offer("group", rows.map(item => item.row.group));
          offer("policy", rows.map(item => item.row.policy));
          renderCounts();
          renderTable();
        }
        async function refreshStatus() {
          try {
            const document_ = await getJSON("/api/v1/status");
            statusAt = Date.now();
            rows = document_.targets.map(row => model(row, statusAt));
            showError(null);
            render();
            document.getElementById("updated").textContent = "updated " + new Date(statusAt).toLocaleTimeString();
            document.documentElement.dataset.statusLoaded = String(performance.now());
          } catch (error) {
            showError("cannot read /api/v1/status: " + error.message + " (retrying)");
          }
        }
        /// A trust input that is stale or cannot be refreshed: verdicts that depend on it may be wrong.
        async function refreshTrustInputs() {
          const box = document.getElementById("trust-inputs");
          try {
            const answer = await getJSON("/api/v1/trust-inputs");
            const troubled = answer.inputs.filter(input => input.condition !== "current");
            replace(box, troubled.map(input => el("p", {class: "warning", "data-input": input.input},
              input.input + " is " + input.condition + ": " + input.source
              + (input.age_days !== undefined && input.age_days !== null ? ", " + input.age_days + " days old (max_age " + input.max_age_days + " days)" : "")
              + (input.last_error ? "; last refresh: " + input.last_error : ""))));
            box.hidden = troubled.length === 0;
            document.documentElement.dataset.trustInputsLoaded = String(performance.now());
          } catch (error) {
            box.hidden = true; // a build or route without trust inputs
          }
        }
        /// The certificates the CT follower saw for pinned or watched names: breaks and unexpected issuers first.
        async function refreshSightings() {
          const section = document.getElementById("ct");
          try {
            const answer = await getJSON("/api/v1/ct/sightings?days=30&limit=200");
            const rank = {"break": 0, "unexpected-issuer": 1, "covered": 2, "seen": 3};
            const sightings = answer.sightings.slice().sort((a, b) => (rank[a.verdict] - rank[b.verdict]) || b.not_before.localeCompare(a.not_before));
            const labels = ["Valid from", "Verdict", "Host", "Judged by", "Issuer", "Key (SPKI)", "Logged"];
            replace(document.querySelector("#ct-sightings tbody"), sightings.map(s => el("tr", {"data-verdict": s.verdict, class: s.verdict === "break" || s.verdict === "unexpected-issuer" ? "warning" : null},
              [when(s.not_before), s.verdict, s.host, s.judged_by, s.issuer, "sha256/" + s.spki, s.log + " #" + s.index + (s.precertificate ? " (precertificate)" : "")]
                .map((text, index) => el("td", {"data-label": labels[index]}, text)))));
            section.hidden = sightings.length === 0;
            document.documentElement.dataset.sightingsLoaded = String(performance.now());
          } catch (error) {
            section.hidden = true;
          }
        }
        /// The charts follow the tag filter (an app's hosts, say): the summary of the targets carrying that tag.
        async function refreshSummary() {
          const tag = control("tag").value;
          try {
            const answer = await getJSON("/api/v1/summary?since=30d" + (tag ? "&tag=" + encodeURIComponent(tag) : ""));
            if (tag !== control("tag").value) return; // the filter changed meanwhile: its own read follows
            summary = answer;
            summaryTag = tag;
            renderTrend();
            renderExpiry();
            document.documentElement.dataset.summaryLoaded = String(performance.now());
          } catch (error) {
            showError("cannot read /api/v1/summary: " + error.message + " (retrying)");
          }
        }
        function changed() { showAll = false; writeURL(); renderCounts(); renderTable(); }
        function sortBy(key, keepDirection) {
          ascending = keepDirection ? ascending : key === sortKey ? !ascending : true;
          sortKey = key;
          writeURL();
          renderTable();
        }
        readURL();
        const sortSelect = document.getElementById("sort-key");
        for (const key of columns) sortSelect.add(new Option(labels[key], key));
        sortSelect.value = sortKey;
        sortSelect.addEventListener("change", () => sortBy(sortSelect.value, true));
        for (const th of document.querySelectorAll("#status th")) th.querySelector("button").addEventListener("click", () => sortBy(th.dataset.key));
        for (const name of filterNames) control(name).addEventListener(name === "q" ? "input" : "change", changed);
        control("tag").addEventListener("change", refreshSummary);
        document.getElementById("filters").addEventListener("submit", event => event.preventDefault());
        document.getElementById("filters").addEventListener("reset", () => setTimeout(() => { changed(); refreshSummary(); }, 0));
        document.getElementById("counts").addEventListener("click", event => {
          const button = event.target.closest("button[data-verdict]");
          if (!button) return;
          control("verdict").value = control("verdict").value === button.dataset.verdict ? "" : button.dataset.verdict;
          changed();
        });
        document.getElementById("more").addEventListener("click", () => { showAll = true; renderTable(); });
        refreshStatus();
        refreshSummary();
        refreshTrustInputs();
        refreshSightings();
        setInterval(refreshSightings, 60000);
        setInterval(refreshStatus, 10000);
        setInterval(refreshSummary, 60000);
        setInterval(refreshTrustInputs, 60000);
        })();

        """#
}
