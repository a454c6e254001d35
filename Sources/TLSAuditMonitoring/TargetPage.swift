/// The page of one target at `/targets/{name}`, drawn from `/api/v1/targets/{name}`: each address
/// with its verdict, every finding in words (severity, why it matters, the fix: the catalog `ats`
/// and the reports read), the handshake, the chain as presented and as built (subject, issuer,
/// key, signature, validity, SCT and revocation status per certificate), the pins, the hygiene
/// checks that ran, and the history as a timeline of verdict changes and alerts. Refreshed in
/// place every 30 s, keeping the scroll position and which sections are open.
enum TargetPage {
    static let html = PageAssets.html(title: "tlsaudit target", body: """
        <nav><a href="/">← all targets</a></nav>
        <header>
        <h1 id="name">loading…</h1>
        <p id="updated" aria-live="polite"></p>
        </header>
        <main id="target"></main>
        """, script: "/target.js")

    static let script = #"""
        "use strict";
        (() => {
        const {el, replace, getJSON, showError, verdictOf, verdictNode, reasonsOf, reasonNode, daysLeft, daysText, when, targetLink} = TLSAudit;
        const name = decodeURIComponent(location.pathname.replace(/^\/targets\//, ""));
        document.getElementById("name").textContent = name;
        document.title = name + " · tlsaudit";

        function facts(pairs) {
          const shown = pairs.filter(([, value]) => value !== null && value !== undefined && value !== "");
          return shown.length ? el("dl", {class: "facts"}, shown.map(([label, value]) => [el("dt", {}, label), el("dd", {}, value)])) : null;
        }
        function key(publicKey) {
          if (!publicKey) return "";
          return publicKey.type + " " + publicKey.bits + (publicKey.curve ? " (" + publicKey.curve + ")" : "");
        }
        function validity(certificate, now) {
          const days = daysLeft(certificate.not_after, now);
          return certificate.not_before.slice(0, 10) + " to " + certificate.not_after.slice(0, 10) + " (" + daysText(days) + ")";
        }
        function names(certificate) {
          const sans = certificate.subject_alternative_names;
          return sans ? [...(sans.dns || []), ...(sans.ip || [])].join(", ") : "";
        }
        /// The SCT status of the leaf (the handshake's CT report): each SCT's log and status, and Apple's policy.
        function sctText(address) {
          const ct = address.handshake && address.handshake.certificate_transparency;
          if (!ct) return "not seen";
          const scts = ct.scts.map(sct => (sct.log || "unknown log") + " (" + sct.origin + "): " + sct.status);
          const policy = ct.policy ? "Apple's CT policy " + (ct.policy.satisfied ? "met" : "not met") + (ct.policy.required ? "" : ", not required here") : "";
          return el("span", {title: ct.policy && ct.policy.reason ? ct.policy.reason : null},
                    [scts.length ? scts.join("; ") : "no SCT", policy].filter(Boolean).join("; "));
        }
        function revocationText(chain, depth) {
          const check = chain.revocation && chain.revocation.checks.find(check => check.depth === depth);
          if (!check) return chain.revocation ? "" : "not checked";
          return check.status + " (" + check.source + ")" + (check.revoked_at ? " at " + when(check.revoked_at) : "") + (check.detail ? ": " + check.detail : "");
        }
        function certificateRows(certificates, address, depthOf) {
          const now = Date.now();
          return certificates.map((certificate, index) => {
            const depth = depthOf(index);
            return el("tr", {"data-fingerprint": certificate.sha256_fingerprint},
              el("td", {"data-label": "#"}, String(index)),
              el("td", {"data-label": "Subject"}, certificate.subject, names(certificate) ? el("div", {class: "muted"}, "names: " + names(certificate)) : null),
              el("td", {"data-label": "Issuer"}, certificate.issuer),
              el("td", {"data-label": "Key"}, key(certificate.public_key)),
              el("td", {"data-label": "Signature"}, certificate.signature_algorithm || ""),
              el("td", {"data-label": "Valid"}, validity(certificate, now)),
              el("td", {"data-label": "SCT"}, depth === 0 ? sctText(address) : ""),
              el("td", {"data-label": "Revocation"}, depth === null ? "" : address.chain ? revocationText(address.chain, depth) : ""));
          });
        }
        function certificateTable(caption, certificates, address, depthOf, css) {
          return el("div", {class: "scroll"}, el("table", {class: "cards " + css},
            el("caption", {}, caption),
            el("thead", {}, el("tr", {}, ["#", "Subject", "Issuer", "Key", "Signature", "Valid", "SCT", "Revocation"].map(label => el("th", {scope: "col"}, label)))),
            el("tbody", {}, certificateRows(certificates, address, depthOf))));
        }
        /// A finding's severity: errors first, then warnings, then the rest; its class.
        function severity(finding) {
          return finding.severity === "error" ? {rank: 0, css: "bad"} : finding.severity === "warning" ? {rank: 1, css: "warn"} : {rank: 2, css: "muted"};
        }
        function findingsSection(address, words) {
          const findings = [...address.findings].sort((a, b) => severity(a).rank - severity(b).rank);
          if (!findings.length) return el("p", {}, "No findings.");
          return el("div", {class: "findings"}, findings.map(finding => {
            const entry = words[finding.id] || {};
            return el("article", {class: "finding " + finding.severity, "data-id": finding.id},
              el("h4", {}, el("span", {class: severity(finding).css}, finding.severity.toUpperCase()),
                 " ", entry.title || finding.id, " ", el("code", {}, finding.id), finding.depth !== undefined ? el("span", {class: "muted"}, " at depth " + finding.depth) : null),
              el("p", {}, finding.message),
              entry.why ? el("p", {}, el("strong", {}, "Why it matters: "), entry.why) : null,
              entry.fix ? el("p", {class: "fix"}, el("strong", {}, "Fix: "), entry.fix) : null);
          }));
        }
        function handshakeFacts(address) {
          const handshake = address.handshake;
          if (!handshake) return address.error ? facts([["Failure", address.error.category + ": " + address.error.message]]) : el("p", {}, "No handshake.");
          const exchange = handshake.key_exchange || {};
          return facts([
            ["Protocol", handshake.protocol_version],
            ["Suite", handshake.cipher ? handshake.cipher.iana || handshake.cipher.openssl : ""],
            ["Group", exchange.group || (exchange.ephemeral_key ? exchange.ephemeral_key.type + " " + exchange.ephemeral_key.bits : "none")],
            ["Forward secrecy", exchange.forward_secrecy ? "yes" : "no"],
            ["Signature hash", handshake.server_signature_hash],
            ["Client", handshake.client_profile],
            ["Stapled OCSP", handshake.stapled_ocsp ? handshake.stapled_ocsp.certificate_status || handshake.stapled_ocsp.response_status : "none"],
            ["Failure", address.error ? address.error.category + ": " + address.error.message : null]]);
        }
        function pinFacts(address) {
          const pin = address.pin;
          if (!pin || pin.state === "none") return el("p", {}, "No pins configured.");
          return facts([["State", pin.state === "mismatch" ? "\u2715 mismatch" : pin.state === "match" ? "\u2713 match" : pin.state],
                        ["Matched", pin.matched], ["Leaf SPKI", pin.leaf_spki ? "sha256/" + pin.leaf_spki : null],
                        ["Leaf fingerprint", pin.leaf_fingerprint], ["Detail", pin.message]]);
        }
        /// A target judged by an iOS app's rules (app:): whether that app connects, on what, or the error it logs.
        function appFacts(address) {
          const app = address.app;
          if (!app) return null;
          const error = app.error ? "NSURLErrorDomain " + app.error.code + " " + app.error.name
            + (app.error.ssl_code ? " (kCFStreamErrorDomainSSL " + app.error.ssl_code + " " + (app.error.ssl_name || "") + ")" : "") : null;
          return [el("h3", {}, "App " + app.bundle),
                  facts([["For the app", app.connects ? "\u2713 connects" : "\u2715 does not connect"],
                         ["Relies on", app.connects ? (app.relies_on.length ? app.relies_on.join(", ") : "default ATS") : null],
                         ["Why not", app.connects ? null : app.reasons.join(", ")],
                         ["The app logs", error], ["Configuration", app.configuration], ["Detail", app.detail]])];
        }
        /// The opt-in checks that ran: each answer in words (inventory, headers, vulnerabilities), or their findings.
        function hygiene(address) {
          const answers = (report) => Object.entries(report).filter(([, value]) => value && typeof value === "object" && "status" in value && "detail" in value)
            .map(([check, value]) => [check.replace(/_/g, " "), value.status + ": " + value.detail]);
          const parts = [];
          if (address.inventory) parts.push(el("h4", {}, "Server inventory"), facts(answers(address.inventory)));
          if (address.headers) parts.push(el("h4", {}, "HTTP headers"), facts([["Path", address.headers.path], ["Status", address.headers.status], ["Detail", address.headers.detail],
                                                                                ...answers(address.headers)]));
          if (address.vulnerabilities) parts.push(el("h4", {}, "Vulnerabilities"), facts(answers(address.vulnerabilities)));
          if (address.enumeration) parts.push(el("h4", {}, "Protocols and suites"), facts(address.enumeration.protocols.map(p => [p.version, p.status + (p.detail ? ": " + p.detail : "")])),
                                              address.enumeration.findings.length ? el("ul", {class: "reasons"}, address.enumeration.findings.map(f => reasonNode(f.id))) : null);
          if (address.clients) {
            const refused = address.clients.clients.filter(client => !client.connects);
            parts.push(el("h4", {}, "Client simulation"), el("p", {}, (address.clients.clients.length - refused.length) + " of " + address.clients.clients.length + " clients connect"
              + (refused.length ? "; not: " + refused.map(client => client.client).join(", ") : "")));
          }
          // A check of one's own (check_reports): its report's top-level facts, its findings' ids.
          for (const [name, report] of Object.entries(address.check_reports || {})) {
            const value = report.report;
            const rows = value && typeof value === "object" && !Array.isArray(value)
              ? Object.entries(value).map(([key, item]) => [key.replace(/_/g, " "), typeof item === "object" ? JSON.stringify(item) : String(item)])
              : [["Report", value === undefined ? "none" : JSON.stringify(value)]];
            parts.push(el("h4", {}, "Check " + name), facts(rows),
                       report.findings.length ? el("ul", {class: "reasons"}, report.findings.map(f => reasonNode(f.id))) : null);
          }
          return parts.length ? parts : [el("p", {class: "muted"}, "No hygiene checks configured for this target (checks:).")];
        }
        function addressSection(address, row, words) {
          const verdict = row ? verdictOf(row) : verdictOf({status: address.status, compliant: address.ats.compliant, pin_state: address.pin ? address.pin.state : "none"});
          const chain = address.chain;
          const reasons = row ? reasonsOf(row) : address.ats.failed_rules;
          return el("section", {class: "address", "data-address": address.address, "aria-labelledby": "address-" + address.address},
            el("h2", {id: "address-" + address.address}, address.address + " port " + address.port + " \u2014 ", verdictNode(verdict)),
            facts([["Scanned", when(address.started_at) + " (" + address.duration_ms + " ms)"], ["Policy", address.ats.policy],
                   ["Earliest expiry", row && row.earliest_expiry ? when(row.earliest_expiry) + " (" + daysText(daysLeft(row.earliest_expiry, Date.now())) + ")" : null]]),
            reasons.length ? el("ul", {class: "reasons"}, reasons.map(reasonNode)) : null,
            el("h3", {}, "Findings"), findingsSection(address, words),
            el("h3", {}, "Handshake"), handshakeFacts(address),
            el("h3", {}, "Chain"),
            chain ? [certificateTable("As presented by the server", chain.presented, address, index => {
                       const element = chain.path.findIndex(step => step.source === "presented" && step.presented_index === index);
                       return element < 0 ? null : element; }, "presented"),
                     certificateTable("As built" + (chain.anchored ? ", to an anchor in " + chain.trust_store : ", not anchored (" + chain.trust_store + ")"),
                                      chain.path.map(step => step.certificate), address, index => index, "built")]
                  : el("p", {}, "No certificate was received."),
            el("h3", {}, "Pins"), pinFacts(address),
            appFacts(address),
            el("h3", {}, "Hygiene checks"), hygiene(address));
        }
        /// The history, newest first: verdict changes (an entry whose verdict differs from the one
        /// before it at that address) and alerts, merged by time.
        function timeline(document_) {
          // The API lists the history newest first in the order of observation (not by wall-clock
          // time, which a clock step can run backwards): oldest first here.
          const entries = [...document_.history].reverse();
          const last = {};
          const events = [];
          for (const entry of entries) {
            const verdict = verdictOf({status: entry.status, compliant: entry.compliant, pin_state: entry.pin_state});
            const before = last[entry.address];
            if (!before || before.key !== verdict.key) {
              events.push({at: entry.started_at, kind: "verdict", node: [el("strong", {}, entry.address + ": "), before ? before.text + " \u2192 " : "first scan: ", verdictNode(verdict),
                entry.failed_rules && entry.failed_rules.length ? el("span", {class: "muted"}, " (" + entry.failed_rules.join(", ") + ")") : null,
                entry.run ? el("span", {class: "muted"}, "; unchanged through " + when(entry.run.last_seen_at) + ", " + entry.run.scans + " scans") : null]});
            }
            last[entry.address] = verdict;
          }
          for (const stored of document_.alerts) {
            const alert = stored.alert;
            events.push({at: alert.created_at, kind: "alert", node: [el("strong", {}, "alert " + alert.kind + " (" + alert.severity + "): "), alert.summary,
              stored.deliveries.length ? el("span", {class: "muted"}, "; " + stored.deliveries.map(d => d.sink + " " + d.state).join(", ")) : null]});
          }
          events.sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
          if (!events.length) return el("p", {}, "Nothing yet.");
          return el("ol", {class: "timeline"}, events.map(event => el("li", {"data-kind": event.kind}, el("time", {datetime: event.at}, when(event.at)), " ", event.node)));
        }
        function render(document_) {
          const words = document_.findings || {};
          const rows = {};
          for (const row of document_.addresses) rows[row.address] = row;
          const group = document_.addresses.find(row => row.group);
          const tags = [...new Set(document_.addresses.flatMap(row => row.tags || []))];
          const history = document.querySelector('details[data-section="history"]');
          replace(document.getElementById("target"),
            facts([["Host", document_.addresses[0] ? document_.addresses[0].host + ":" + document_.addresses[0].port : ""], ["Group", group ? group.group : null],
                   ["Tags", tags.join(", ")], ["Addresses", String(document_.addresses.length)]]),
            document_.latest.map(address => addressSection(address, rows[address.address], words)),
            el("h2", {}, "History"),
            el("details", {"data-section": "history", open: history ? history.open : true}, el("summary", {}, "Verdict changes and alerts, newest first"), timeline(document_)));
        }
        async function refresh() {
          try {
            const document_ = await getJSON("/api/v1/targets/" + encodeURIComponent(name));
            render(document_);
            showError(null);
            document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
            document.documentElement.dataset.targetLoaded = String(performance.now());
          } catch (error) {
            showError(error.status === 404 ? "no scans of " + name + " are stored" : "cannot read the target: " + error.message + " (retrying)");
          }
        }
        refresh();
        setInterval(refresh, 30000);
        })();

        """#
}
