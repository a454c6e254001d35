import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditSupport
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// The listener's pages (`/` and `/targets/{name}`) in headless Chromium against a service
/// scanning the lab (good, expired, SHA-1, pin mismatch, a hostile subject, unreachable), its
/// store holding 30 days of history from `tlsaudit-bench fill`. Screenshots at 390 and 1,280 px
/// are kept in `.build/test-artifacts/status-pages/`.
@Suite("the status pages in headless Chromium", .serialized)
struct StatusPagesTests {
    let lab = ServiceLab.shared

    static let hostileName = "x<img src=x onerror=alert(1)>"
    static let hostileSubject = "<script>alert('cn')</script>"
    static let hostileSAN = "<b>bold</b>.evil.test"

    /// Where the screenshots are kept: `.build/test-artifacts/status-pages/` of this checkout.
    static let artifacts: URL = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/test-artifacts/status-pages")
    }()

    /// The `data-target` of each table row, in order (entities decoded: a serializer may escape `<` in attributes).
    static func rows(_ dom: String) -> [String] {
        dom.components(separatedBy: "<tr data-target=\"").dropFirst().map {
            String($0.prefix { $0 != "\"" }).replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&amp;", with: "&")
        }
    }

    /// The value of the first attribute `name` in `markup` whose value matches `value` (a regular expression).
    static func attribute(_ name: String, in markup: String, value: String = #"[^"]+"#) -> String? {
        markup.range(of: "\(name)=\"\(value)\"", options: .regularExpression).map { String(markup[$0].dropFirst(name.count + 2).dropLast()) }
    }

    /// The markup without attribute values: an element a server's value made would show here.
    static func elements(_ dom: String) -> String {
        dom.replacingOccurrences(of: #"="[^"]*""#, with: "=\"\"", options: .regularExpression)
    }

    /// A JSON value of `url`.
    static func json(_ url: String) throws -> Any {
        let fetched = try ServiceHTTP.fetch(url)
        #expect(fetched.status == 200, "\(url): \(fetched)")
        return try JSONSerialization.jsonObject(with: Data(fetched.body.utf8))
    }

    @Test("overview and target pages: the chart's points are the summary API's, filters narrow the rows (and stay in the URL across a refresh, with the scroll), findings in words with their fixes, the chain as presented and as built, a hostile name, subject and SAN render as text, no horizontal overflow at 390 px; screenshots at 390 and 1,280 px kept")
    func pages() throws {
        let browser = try LabPrerequisite.program(["/usr/bin/chromium", "/usr/bin/chromium-browser"], package: "chromium")
        let workspace = try lab.workspace("status-pages")
        var chromium = HeadlessBrowser(program: browser, workspace: workspace)
        let hostname = ServiceLab.hostname
        let sha1Leaf = try lab.intermediate.issue(.server([hostname], key: .rsa(bits: 2048), digest: .sha1))
        var hostileRequest = LabCertificateRequest.server([hostname, Self.hostileSAN])
        hostileRequest.commonName = Self.hostileSubject
        let hostileLeaf = try lab.intermediate.issue(hostileRequest)
        let good = try lab.goodServer(), expired = try lab.expiredServer(), pinned = try lab.goodServer()
        let sha1 = try LabTLSServer(LabServerConfiguration(chain: [sha1Leaf, lab.intermediate]))
        let hostile = try LabTLSServer(LabServerConfiguration(chain: [hostileLeaf, lab.intermediate]))
        defer { [good, expired, pinned, sha1, hostile].forEach { $0.stop() } }
        let closed = try LabPorts.unusedPort()

        // 30 days of history for the same targets, from the bench's fill tool, ending an hour ago.
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let names = ["good", "expired", "sha1", "pinned", Self.hostileName, "unreachable"]
        let bench = URL(fileURLWithPath: Binary.path).deletingLastPathComponent().appendingPathComponent("tlsaudit-bench").path
        let fill = try Binary.run(["fill", "--database", database, "--names", names.joined(separator: ","), "--scans", "\(names.count * 60)",
                                   "--days", "30", "--end", Timestamp.format(Date().addingTimeInterval(-3600))], program: bench)
        #expect(fill.status == 0 && fill.stdout.contains("6 targets, 360 scans"), "\(fill.stdout)\(fill.stderr)")

        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        let wrongPins = #"{mode: public-key, pins: ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "sha256/BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ="]}"#
        try """
            database: \(database)
            log_level: info
            http: {listen: "127.0.0.1:0"}
            defaults:
              interval: 1h
              timeout: 2s
              sni: \(hostname)
              addresses: [127.0.0.1]
              trust: {ca_file: \(lab.rootFile)}
            groups:
              - name: web
                tags: [team-web]
                targets:
                  - {host: \(hostname), port: \(good.port), name: good, checks: [inventory]}
                  - {host: \(hostname), port: \(expired.port), name: expired}
                  - {host: \(hostname), port: \(sha1.port), name: sha1}
              - name: mobile
                tags: ["app:com.example.shop"]
                targets:
                  - {host: \(hostname), port: \(pinned.port), name: pinned, pins: \(wrongPins), app: {bundle: com.example.shop}}
                  - {host: \(hostname), port: \(hostile.port), name: "\(Self.hostileName)"}
                  - {host: \(hostname), port: \(closed), name: unreachable, app: {bundle: com.example.shop}}
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("the listener and a live scan of every target", timeout: 30) {
            ServiceHTTP.listening(service).count == 1
                && service.storedScans.count >= names.count
        }
        let base = "http://\(ServiceHTTP.listening(service)[0])"

        // The rows carry their group, as `status --config` prints them.
        let status = try ServiceHTTP.fetch("\(base)/api/v1/status")
        let printed = try Binary.run(["status", "--config", config, "--format", "json"])
        #expect(status.body == printed.stdout, "/api/v1/status is `status --config --format json`")
        #expect(status.body.contains("\"group\" : \"mobile\"") && status.body.contains("\"group\" : \"web\""), "\(status.body.prefix(1500))")
        // And in the text table, with --group as the page's group filter.
        let table = try Binary.run(["status", "--config", config])
        #expect(table.stdout.split(separator: "\n").first?.contains("GROUP") == true && table.stdout.contains(" mobile "), "\(table.stdout)")
        let mobile = try Binary.run(["status", "--config", config, "--group", "mobile", "--format", "json"])
        let mobileRows = (try JSONSerialization.jsonObject(with: Data(mobile.stdout.utf8)) as? [String: Any])?["targets"] as? [[String: Any]] ?? []
        #expect(Set(mobileRows.compactMap { $0["target"] as? String }) == ["pinned", Self.hostileName, "unreachable"], "\(mobile.stdout)")
        let refused = try Binary.run(["status", "--database", database, "--group", "mobile"])
        #expect(refused.status == 64 && refused.stderr.contains("--group needs the configuration"), "\(refused.stderr)")

        // The overview.
        let overview = try chromium.dom(base + "/")
        #expect(Set(Self.rows(overview)) == Set(names), "every target has its row: \(Self.rows(overview))")
        #expect(Self.rows(overview).first == "unreachable", "worst first: \(Self.rows(overview))")
        #expect(!Self.elements(overview).contains("<img"), "the hostile name is text: \(overview.prefix(4000))")
        #expect(overview.contains("x&lt;img src=x onerror=alert(1)&gt;"), "the hostile name is shown as written")
        #expect(overview.contains("<li data-id=\"trust.expired\"><code>trust.expired</code> Certificate expired</li>"),
                "each finding's title beside its id: \(overview.prefix(6000))")
        let expiryCells = overview.components(separatedBy: "data-key=\"expiry\" data-label=\"Expires in\"").dropFirst()
            .map { String($0.drop { $0 != ">" }.dropFirst().prefix { $0 != "<" }) }
        #expect(!expiryCells.isEmpty && expiryCells.allSatisfy { $0.isEmpty || $0.range(of: #"^(expired )?\d+ d( ago)?$"#, options: .regularExpression) != nil },
                "days to expiry in whole days: \(expiryCells)")
        #expect(expiryCells.contains { $0.hasPrefix("expired ") }, "the expired chain: \(expiryCells)")
        #expect(overview.contains("data-verdict=\"pin-mismatch\""), "the pin mismatch has its verdict")
        #expect(overview.contains("✕ pin mismatch") && overview.contains("! not compliant") && overview.contains("✓ compliant"),
                "verdicts in words and marks, not colour alone")
        #expect(overview.components(separatedBy: "<button type=\"button\"").count - 1 >= 7 + 4 && !overview.contains("tabindex=\"-1\""),
                "the sort headers and the counts are buttons: reached and pressed from the keyboard")

        // The chart's points are the summary's, for the same end of period.
        let periodEnd = try #require(Self.attribute("data-period-end", in: overview), "the trend figure names its period")
        let summary = try #require(try Self.json("\(base)/api/v1/summary?since=30d&at=\(periodEnd)") as? [String: Any])
        let apiPoints = (summary["trend"] as? [[String: Any]] ?? []).compactMap { point -> String? in
            guard let at = point["at"] as? String, let compliance = point["compliance"] as? Double else { return nil }
            return "\(at) \(compliance)"
        }
        let pagePoints = overview.components(separatedBy: "<circle ").dropFirst().compactMap { element -> String? in
            guard let at = Self.attribute("data-at", in: element),
                  let compliance = Self.attribute("data-compliance", in: element).flatMap(Double.init) else { return nil }
            return "\(at) \(compliance)"
        }
        #expect(apiPoints.count >= 20 && pagePoints == apiPoints, "the chart's \(pagePoints.count) points are the API's \(apiPoints.count)")
        #expect(Set(apiPoints.map { $0.split(separator: " ")[1] }).count > 1, "30 days of history move the line: \(apiPoints)")
        // The expiry timeline: a bar per week, counts adding up to the summary's expiring certificates.
        let weekCounts = overview.components(separatedBy: "data-week=\"").dropFirst().compactMap { element -> Int? in
            Self.attribute("data-count", in: element, value: #"\d+"#).flatMap { Int($0) }
        }
        #expect(weekCounts.count == 14 && weekCounts.reduce(0, +) == (summary["expiring"] as? [Any])?.count,
                "expired plus 13 weeks: \(weekCounts) for \((summary["expiring"] as? [Any])?.count ?? -1) certificates")
        #expect(weekCounts.first ?? 0 >= 1, "the expired leaf is in the expired bar")
        #expect(overview.contains("fill: url(#hatch)") || overview.contains("class=\"bar expired\""), "expired bars are hatched, not only coloured")

        // Filters narrow the rows, from the URL (a link, a reload) as from the controls.
        #expect(Self.rows(try chromium.dom(base + "/?group=mobile")).sorted()
                == ["pinned", "unreachable", Self.hostileName].sorted())
        #expect(Self.rows(try chromium.dom(base + "/?verdict=not-compliant")).sorted() == ["expired", "sha1"], "not compliant: the expired and SHA-1 chains")
        #expect(Self.rows(try chromium.dom(base + "/?q=expired")) == ["expired"])
        let tagged = try chromium.dom(base + "/?tag=app%3Acom.example.shop&verdict=compliant")
        #expect(Self.rows(tagged) == [Self.hostileName])
        #expect(tagged.contains("<figcaption>Compliance, last 30 days (tag app:com.example.shop)</figcaption>"), "the charts follow the tag filter")
        let taggedEnd = try #require(Self.attribute("data-period-end", in: tagged))
        let taggedSummary = try #require(try Self.json("\(base)/api/v1/summary?since=30d&tag=app:com.example.shop&at=\(taggedEnd)") as? [String: Any])
        #expect((taggedSummary["summary"] as? [String: Any])?["addresses"] as? Int == 3
                && tagged.components(separatedBy: "<circle ").count - 1 == (taggedSummary["trend"] as? [[String: Any]] ?? []).filter { $0["compliance"] is Double }.count,
                "the tag's 3 addresses, one point per trend point: \(String(describing: taggedSummary["summary"]))")
        #expect(Self.rows(try chromium.dom(base + "/?policy=ats-runtime&verdict=unreachable")) == ["unreachable"])

        // Typing in the text filter, sorting by a click, then the 10 s refresh: the filter, the order
        // and the scroll stay. A copy of the page (the served page's CSP allows only its own
        // scripts) with a probe script, reading the same listener through <base>.
        let html = try ServiceHTTP.fetch(base + "/")
        #expect(html.status == 200 && !html.body.contains("http://") && !html.body.contains("https://") && !html.body.contains("style="),
                "no external asset, no inline style")
        for path in ["/", "/targets/expired", "/ui.js"] {
            let headers = try ServiceHTTP.fetch(base + path, headers: true).body.lowercased()
            #expect(headers.contains("content-security-policy: default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'none'")
                    && !headers.contains("unsafe-inline"), "\(path): the strict CSP: \(headers.prefix(600))")
        }
        let copy = workspace.appendingPathComponent("overview-probe.html")
        try html.body.replacingOccurrences(of: "<head>", with: "<head><base href=\"\(base)/\">")
            .replacingOccurrences(of: "</body>", with: """
                <script>
                setTimeout(() => { const q = document.getElementById("filter-q"); q.value = "mobile"; q.dispatchEvent(new Event("input")); }, 1500);
                setTimeout(() => document.querySelector('th[data-key="target"] button').click(), 1700);
                setTimeout(() => document.querySelector('th[data-key="target"] button').click(), 1800);
                setTimeout(() => { window.scrollTo(0, 400); document.documentElement.setAttribute("data-before", window.scrollY); }, 2000);
                setTimeout(() => {
                  const root = document.documentElement;
                  root.setAttribute("data-after", window.scrollY);
                  root.setAttribute("data-query", location.search);
                  root.setAttribute("data-updated", document.getElementById("updated").textContent);
                  root.setAttribute("data-overflow", document.documentElement.scrollWidth > window.innerWidth);
                }, 12500);
                </script>
                </body>
                """).write(to: copy, atomically: true, encoding: .utf8)
        let probed = try chromium.dom(copy.absoluteString, width: 390, budget: 14000, options: ["--disable-web-security"])
        #expect(Self.rows(probed) == [Self.hostileName, "unreachable", "pinned"], "typed filter, sorted by target descending: \(Self.rows(probed))")
        #expect(probed.contains("data-query=\"?q=mobile&amp;sort=target&amp;order=desc\""), "the filter and order are in the URL: \(probed.prefix(400))")
        let scroll = ["data-before", "data-after"].map { Self.attribute($0, in: probed, value: #"\d+"#) }
        #expect(scroll[0] != nil && scroll[0] != "0" && scroll[0] == scroll[1], "the refresh keeps the scroll: \(scroll)")
        #expect(probed.contains("data-updated=\"updated "), "refreshed in place")
        #expect(probed.contains("data-overflow=\"false\""), "no horizontal overflow at 390 px")

        // A target page: findings in words with their fixes, the chain as presented and as built, the timeline.
        let expiredPage = try chromium.dom(base + "/targets/expired")
        #expect(expiredPage.contains("Certificate expired") && expiredPage.contains("<strong>Fix: </strong>")
                && expiredPage.contains("<strong>Why it matters: </strong>"), "the finding in words: \(expiredPage.prefix(5000))")
        #expect(expiredPage.contains("<caption>As presented by the server</caption>") && expiredPage.contains("<caption>As built"), "both chains")
        let leafFingerprint = lab.expired.summary.sha256Fingerprint
        #expect(expiredPage.components(separatedBy: "data-fingerprint=\"\(leafFingerprint)\"").count == 3, "the expired leaf in both chains")
        #expect(expiredPage.contains("CN=service test intermediate"), "the issuer")
        #expect(expiredPage.contains("data-kind=\"alert\"") && expiredPage.contains("data-kind=\"verdict\""), "alerts and verdict changes on the timeline")
        #expect(expiredPage.contains("<dt>Protocol</dt><dd>TLSv1.3</dd>") && expiredPage.contains("<dt>Suite</dt>"), "the handshake")
        #expect(expiredPage.contains("No hygiene checks configured for this target"), "no check ran there")
        let goodPage = try chromium.dom(base + "/targets/good")
        #expect(goodPage.contains("<h4>Server inventory</h4>") && goodPage.range(of: #"<dt>secure renegotiation</dt><dd>(yes|no): [^<]+</dd>"#, options: .regularExpression) != nil,
                "the hygiene checks that ran, in words: \(goodPage.components(separatedBy: "<h3>Hygiene checks</h3>").last?.prefix(1200) ?? "")")
        let pinnedPage = try chromium.dom(base + "/targets/pinned")
        #expect(pinnedPage.contains("<dt>State</dt><dd>✕ mismatch</dd>") && pinnedPage.contains("pin mismatch")
                && pinnedPage.contains("<dt>Leaf SPKI</dt><dd>sha256/") && pinnedPage.contains("<dt>Detail</dt><dd>A pinned client refuses this server: no public key of the chain is pinned"), "the pin's state: \(pinnedPage.components(separatedBy: "<h3>Pins</h3>").last?.prefix(800) ?? "")")
        // Judged by the app's rules too: the app's section, and the error the app logs where it does not connect.
        #expect(pinnedPage.contains("<h3>App com.example.shop</h3>") && pinnedPage.contains("<dt>For the app</dt><dd>✓ connects</dd>"),
                "\(pinnedPage.components(separatedBy: "<h3>Pins</h3>").last?.prefix(1500) ?? "")")
        let sha1Page = try chromium.dom(base + "/targets/sha1")
        #expect(sha1Page.contains("data-id=\"ats.signature-hash\"") && sha1Page.contains("ecdsa-with-SHA1"), "the SHA-1 signature: \(sha1Page.prefix(3000))")
        let unreachablePage = try chromium.dom(base + "/targets/unreachable")
        #expect(unreachablePage.contains("unreachable") && unreachablePage.contains("No certificate was received."), "\(unreachablePage.prefix(3000))")
        #expect(unreachablePage.contains("<dt>The app logs</dt><dd>NSURLErrorDomain -1004 NSURLErrorCannotConnectToHost</dd>"),
                "\(unreachablePage.components(separatedBy: "<h3>Pins</h3>").last?.prefix(1500) ?? "")")
        let encodedHostile = Self.hostileName.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let hostilePage = try chromium.dom(base + "/targets/" + encodedHostile)
        #expect(hostilePage.contains("script&gt;alert('cn')") && hostilePage.contains("names: \(hostname), &lt;b&gt;bold&lt;/b&gt;.evil.test"),
                "the hostile subject and SAN as text: \(hostilePage.prefix(5000))")
        let hostileElements = Self.elements(hostilePage)
        #expect(!hostileElements.contains("<img") && !hostileElements.contains("<b>") && hostileElements.components(separatedBy: "<script").count == 3,
                "no element from a server's values (only the page's two scripts)")
        #expect(hostilePage.contains("<h1 id=\"name\">x&lt;img src=x onerror=alert(1)&gt;</h1>"))
        #expect(try ServiceHTTP.fetch(base + "/targets/nothing").status == 200 && (try chromium.dom(base + "/targets/nothing")).contains("no scans of nothing are stored"))

        // Screenshots, kept.
        try FileManager.default.createDirectory(at: Self.artifacts, withIntermediateDirectories: true)
        for (page, url) in [("overview", base + "/"), ("target-expired", base + "/targets/expired")] {
            for (width, height) in [(390, 2400), (1280, 1600)] {
                let file = Self.artifacts.appendingPathComponent("\(page)-\(width).png")
                let png = try chromium.screenshot(url, width: width, height: height, to: file)
                #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 5_000, "\(file.path): \(png.count) bytes")
                #expect(png[16..<20].reduce(0) { $0 << 8 | Int($1) } == width)
            }
        }
    }
}
