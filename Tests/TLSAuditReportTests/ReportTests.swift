import Foundation
import GRDB
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
@testable import TLSAuditReport
@testable import TLSAuditService
@testable import TLSAuditStore
@testable import TLSAuditSQLite
import TLSAuditSupport
import TLSAuditServiceLab

/// `tlsaudit report` on a fixed database of real handshakes (built by
/// `tlsaudit-bench report-fixture`; see docs/report.md, "The test fixture"), and the service's scheduled reports.
@Suite("Compliance reports", .serialized)
struct ReportTests {
    init() { TestBackends.register() }

    static let fixtures = ServiceLab.reportFixtures
    /// The fixture's week: scans from 2026-10-31T12:00Z to 2026-11-07T12:00Z.
    static let end = ServiceLab.reportFixtureEnd
    let lab = ServiceLab.shared

    /// A private copy of the fixture database (opening it may migrate it and adds WAL files).
    func fixtureCopy() throws -> String {
        let workspace = try lab.workspace("report")
        let path = workspace.appendingPathComponent("fixture.sqlite").path
        try FileManager.default.copyItem(atPath: Self.fixtures.appendingPathComponent("fixture.sqlite").path, toPath: path)
        return path
    }

    func report(_ database: String, _ arguments: [String]) throws -> Binary.Output {
        try Binary.run(["report", "--database", database, "--at", Self.end, "--since", "7d"] + arguments)
    }

    @Test("a certificate change stored with its counts and flags as JSON numbers and booleans (as since 2026-11-23) is read by the report")
    func typedAlertChanges() throws {
        let database = try fixtureCopy()
        let store = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
        let alert = Alert(id: "typed-changes", kind: .certificateChanged, severity: .info, target: "fixed", host: "127.0.0.1", port: 443,
                          address: "127.0.0.1", createdAt: Timestamp.parse("2026-11-06T00:00:00Z")!, summary: "renewed",
                          changes: ["same_key": "true", "old_leaf_sha256": "aa", "new_leaf_sha256": "bb", "days_left": "30"])
        #expect(try store.recordAlert(alert, sinks: []))
        let stored = try String(decoding: JSONDocumentEncoder.tlsauditCompact.encode(alert), as: UTF8.self)
        #expect(stored.contains("\"same_key\":true"), "stored as a boolean: \(stored)")
        let output = try report(database, ["--format", "json"])
        #expect(output.status != 2, "\(output.stderr)")
        #expect(output.stdout.contains("\"id\" : \"typed-changes\""), "the alert is in the report: \(output.stdout.prefix(2000))")
    }

    @Test("the trend covers only the part of the period with scans, coloured against the goal")
    func trendWithData() throws {
        // 30 days, of which the fixture's scans cover the last eight.
        let output = try Binary.run(["report", "--database", try fixtureCopy(), "--at", Self.end, "--since", "30d", "--format", "json", "--goal", "80"])
        let report = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(output.stdout.utf8))
        #expect(report.goal == 80)
        #expect(!report.trend.isEmpty && report.trend.allSatisfy { $0.compliance != nil }, "no run of n/a points before the first scan")
        #expect(report.trend.first.map { $0.at >= Timestamp.parse("2026-10-31T00:00:00Z")! } == true)
        let html = try Binary.run(["report", "--database", try fixtureCopy(), "--at", Self.end, "--since", "30d", "--format", "html", "--goal", "80"]).stdout
        #expect(html.contains("goal 80%") && html.contains("#cf222e") && html.contains("#1a7f37"), "red below the goal, green above")
        let text = try Binary.run(["report", "--database", try fixtureCopy(), "--at", Self.end, "--since", "30d"]).stdout
        #expect(!text.contains("n/a"), "\(text.prefix(1500))")
    }

    @Test("every format matches its golden file (TLSAUDIT_UPDATE_GOLDEN=1 rewrites them)", arguments: ReportFormat.allCases)
    func golden(format: ReportFormat) throws {
        let database = try fixtureCopy()
        let output = try report(database, ["--format", format.rawValue])
        #expect(output.status == 0, "\(output.stderr)")
        let golden = Self.fixtures.appendingPathComponent("golden.\(format.fileExtension)")
        if ProcessInfo.processInfo.environment["TLSAUDIT_UPDATE_GOLDEN"] == "1" {
            try output.stdout.write(to: golden, atomically: true, encoding: .utf8)
        }
        let expected = try String(contentsOf: golden, encoding: .utf8)
        #expect(output.stdout == expected, "differs from \(golden.path); diff it, and rerun with TLSAUDIT_UPDATE_GOLDEN=1 if the change is intended")
    }

    @Test("the week's story is in the report: one regression, one fix, renewals, pin events, the target that went down")
    func content() throws {
        let output = try report(try fixtureCopy(), ["--format", "json"])
        #expect(output.status == 0, "\(output.stderr)")
        let report = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(output.stdout.utf8))
        #expect(report.schema == "tlsaudit.report/1")
        #expect(report.summary.targets == 9 && report.summary.addresses == 9)
        #expect(report.summary.compliant == 6 && report.summary.notCompliant == 2 && report.summary.unreachable == 1)
        #expect(report.summary.compliance == 75 && report.summary.complianceAtStart == 77.8 && report.summary.trend == "down")
        // A pin mismatch is a failure like any other (and its restoration a fix).
        #expect(report.changes.newFailures.map(\.target) == ["regressed", "pinned"])
        #expect(report.changes.newFailures.first?.rules.contains("ats.tls-version") == true)
        #expect(report.changes.newFailures.last?.rules == ["pin.mismatch"])
        #expect(report.changes.fixes.map(\.target) == ["fixed", "pinned"] && report.changes.fixes.first?.rules == ["ats.trust"])
        #expect(report.changes.pinEvents.map(\.kind.rawValue) == ["pin.mismatch", "pin.restored"])
        let renewal = try #require(report.changes.certificates.first { $0.target == "renewed" })
        #expect(renewal.sameKey)
        #expect(report.changes.certificates.filter { !$0.sameKey }.map(\.target) == ["fixed", "regressed", "pinned", "pinned"])
        #expect(report.unreachable.map(\.target) == ["down"])
        // What to fix first: untrusted before expiring (soonest first), protocol, certificate rules, unreachable.
        #expect(report.fixFirst.map(\.category) == ["untrusted", "expiring", "expiring", "protocol", "certificate", "unreachable"],
                "\(report.fixFirst.map(\.category))")
        #expect(report.fixFirst.first?.target == "wrong-name" && report.fixFirst.first?.fix.contains("subjectAltName") == true)
        #expect(report.fixFirst.filter { $0.category == "expiring" }.map(\.target) == ["hostile", "tricky"])
        for format in ["text", "markdown", "html", "csv"] {
            let rendered = try self.report(try fixtureCopy(), ["--format", format]).stdout
            let first = try #require(rendered.range(of: "wrong-name"), "\(format)")
            #expect(!String(rendered[..<first.lowerBound]).lowercased().contains("fleet"), "\(format) opens with the fix-first list")
        }
        #expect(report.unreachable.first?.lastReachableAt == Timestamp.parse("2026-11-05T00:00:00Z"))
        #expect(report.expiring.map(\.commonName) == ["<script>alert(1)</script>", "=HYPERLINK(\"x\") | *bold* [a](b) & co"])
        #expect(report.expiring.map(\.daysLeft) == [17, 23])
        // The trend: 77.8% until the fix (2026-11-03), 88.9% until the regression (2026-11-04T12:00), then 75%.
        let points = Dictionary(uniqueKeysWithValues: report.trend.map { (Timestamp.format($0.at), $0.compliance) })
        #expect(points["2026-11-02T00:00:00Z"] == 77.8 && points["2026-11-03T06:00:00Z"] == 88.9 && points[Self.end] == 75)
        let regressed = try #require(report.targets.first { $0.target == "regressed" }?.addresses.first)
        #expect(regressed.protocolVersion?.rawValue == "TLSv1" && regressed.trusted == true)
        let wrongName = try #require(report.targets.first { $0.target == "wrong-name" }?.addresses.first)
        #expect(wrongName.trustErrors == ["trust.hostname-mismatch"] && wrongName.trusted == false)
        #expect(report.targets.first { $0.target == "pinned" }?.addresses.first?.pinState == .match)
    }

    @Test("--policy judges the stored observations again without rescanning: other rules fail, nothing is written")
    func rejudge() throws {
        let database = try fixtureCopy()
        _ = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex) // migrated first: that writes
        let verdicts = { try DatabaseQueue(path: database).read { try Int.fetchOne($0, sql: "SELECT count(*) FROM verdict") } }
        let before = try verdicts()
        let output = try report(database, ["--format", "json", "--policy", "apple-trust"])
        #expect(output.status == 0, "\(output.stderr)")
        let rejudged = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(output.stdout.utf8))
        #expect(rejudged.policy == "apple-trust")
        #expect(rejudged.summary.rejudgedObservations > 0)
        let regressed = try #require(rejudged.targets.first { $0.target == "regressed" }?.addresses.first)
        // Apple's trust rules check keys and signatures, not the protocol or the suite.
        #expect(regressed.policy == .appleTrust)
        #expect(regressed.failedRules == ["ats.signature-hash", "ats.key-size"])
        #expect(rejudged.changes.newFailures.first?.rules == ["ats.signature-hash", "ats.key-size"])
        #expect(rejudged.targets.first { $0.target == "wrong-name" }?.addresses.first?.failedRules == ["ats.trust"])
        #expect(try verdicts() == before, "a report writes no verdicts")

        // Under the policy the scans were stored with, the stored verdicts are used as they are.
        let same = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(try report(database, ["--format", "json", "--policy", "ats-runtime"]).stdout.utf8))
        #expect(same.summary.rejudgedObservations == 0)
        #expect(same.summary.compliant == 6)
        // That path walks every scan; the default one walks the stored verdict changes: same story.
        let asScanned = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(try report(database, ["--format", "json"]).stdout.utf8))
        #expect(same.trend == asScanned.trend)
        #expect(same.changes.newFailures == asScanned.changes.newFailures && same.changes.fixes == asScanned.changes.fixes)
        #expect(same.summary.scans == asScanned.summary.scans && same.summary.failedScans == asScanned.summary.failedScans)
    }

    @Test("the verdict changes the store writes as it goes are what the v4 migration derives from the scans")
    func addressChanges() throws {
        let database = try fixtureCopy()
        let queue = try DatabaseQueue(path: database)
        let (written, derived) = try queue.read { db in
            (try Row.fetchAll(db, sql: """
                SELECT target, address, started_at, observation_id, condition, policy, failed_rules FROM address_change
                ORDER BY started_at, observation_id
                """).map { $0.description },
             try Row.fetchAll(db, sql: SQLiteMigrations.addressChanges).map { $0.description })
        }
        #expect(written.count == 14, "\(written.joined(separator: "\n"))")
        #expect(written == derived.map { $0.replacingOccurrences(of: "id:", with: "observation_id:") })
    }

    @Test("retention keeps what a later report needs: the same story after pruning the scans before the period")
    func pruneKeepsBaselines() throws {
        let database = try fixtureCopy()
        // Four days ending 2026-11-08: the regression (11-04 12:00) is judged against a compliant
        // verdict from 10-31, long before the cutoff.
        let arguments = ["report", "--database", database, "--at", Self.end, "--since", "4d", "--format", "json"]
        let before = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(try Binary.run(arguments).stdout.utf8))
        let pruned = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).prune(olderThan: Timestamp.parse("2026-11-03T06:00:00Z")!)
        #expect(pruned.observations > 0)
        let after = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(try Binary.run(arguments).stdout.utf8))
        #expect(before.changes.newFailures.map(\.target) == ["regressed", "pinned"])
        #expect(after.changes.newFailures == before.changes.newFailures)
        #expect(after.trend == before.trend)
        #expect(after.summary.complianceAtStart == before.summary.complianceAtStart)
    }

    @Test("scans stored out of order give the same timeline as scans stored in order")
    func outOfOrder() throws {
        let source = try SQLiteScanStore(path: try fixtureCopy(), create: false, sha256: Digest.sha256Hex)
        // Every scan of the fixture (135, folded into runs when it was opened), each with its own time.
        let rows = try DatabaseQueue(path: source.path).read {
            try Row.fetchAll($0, sql: """
                SELECT s.observation_id AS id, s.started_at, s.duration_ms, o.target, o.host, o.port, o.sni
                FROM scan s JOIN observation o ON o.id = s.observation_id ORDER BY s.started_at
                """)
        }
        #expect(rows.count == 135)
        var scans = try rows.map { row in
            var result = try #require(try source.result(observationID: row["id"]))
            result.startedAt = Date(timeIntervalSince1970: row["started_at"])
            result.durationMs = row["duration_ms"]
            return StoredScan(target: row["target"], host: row["host"], port: row["port"], sni: row["sni"], result: result)
        }
        // A fixed shuffle: every scan stored in a different order from its time.
        var generator = SplitMix(seed: 42)
        scans.shuffle(using: &generator)
        let path = try lab.workspace("shuffled").appendingPathComponent("db.sqlite").path
        let store = try SQLiteScanStore(path: path, sha256: Digest.sha256Hex)
        for scan in scans { _ = try store.record([scan], decide: AlertSettings.decision(nil)) }
        let (written, derived) = try DatabaseQueue(path: path).read { db in
            (try Row.fetchAll(db, sql: """
                SELECT target, address, started_at, condition, policy, failed_rules FROM address_change ORDER BY started_at, target
                """).map(\.description),
             // Derived from every scan (runs' repeats included), as the v4 migration derives it from observations.
             try Row.fetchAll(db, sql: "SELECT target, address, started_at, condition, policy, failed_rules FROM (\(Self.changesFromEveryScan)) ORDER BY started_at, target").map(\.description))
        }
        #expect(written.count == 12)
        #expect(written == derived)
    }

    /// `SQLiteMigrations.addressChanges` over every scan (the `scan` view) rather than the observations.
    static let changesFromEveryScan = SQLiteMigrations.addressChanges.replacingOccurrences(
        of: "FROM observation o JOIN verdict v", with: """
            FROM (SELECT s.observation_id AS id, s.target, s.address, s.started_at, o.status, o.trust_store, o.policy
                  FROM scan s JOIN observation o ON o.id = s.observation_id) o JOIN verdict v
            """)

    @Test("the content hash the store writes with each scan is what the v4 migration computes for older scans")
    func contentHashes() throws {
        let queue = try DatabaseQueue(path: try fixtureCopy())
        let stored = try queue.read { try String.fetchAll($0, sql: "SELECT content_hash FROM observation ORDER BY id") }
        #expect(stored.count == 135 && stored.allSatisfy { $0.count == 64 })
        // The hash is SHA-256 (FIPS 180-4 test vectors), OpenSSL's (the one the store is handed).
        let sha256Text: (String) -> String = { Digest.sha256Hex(Array($0.utf8)) }
        #expect(sha256Text("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(sha256Text("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(sha256Text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(Digest.sha256Hex(Array(repeating: UInt8(ascii: "a"), count: 1_000_000))
            == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // Scans of an unchanged server share a hash; a changed server gets a new one. The hashes the
        // fixture was written with (by an earlier, Swift SHA-256) are what OpenSSL's computes now.
        #expect(Set(stored).count < stored.count && Set(stored).count > 9)
        let recomputed = try queue.write { db in
            try db.execute(sql: "UPDATE observation SET content_hash = NULL")
            try ObservationContent.backfill(db, sha256: Digest.sha256Hex)
            return try String.fetchAll(db, sql: "SELECT content_hash FROM observation ORDER BY id")
        }
        #expect(recomputed == stored)
    }

    @Test("HTML is one self-contained file: no scripts, no external assets, hostile names escaped")
    func htmlIsSelfContained() throws {
        let output = try report(try fixtureCopy(), ["--format", "html"])
        let html = output.stdout
        #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(!html.lowercased().contains("<script"))
        #expect(!html.contains("src=") && !html.contains("href=") && !html.contains("@import") && !html.contains("url("))
        #expect(html.contains("<svg") && html.contains("<circle") && html.contains("stroke-dasharray"), "the trend, with its goal line")
        #expect(html.contains("=HYPERLINK(&quot;x&quot;) | *bold* [a](b) &amp; co"))
        let markdown = try report(try fixtureCopy(), ["--format", "markdown"]).stdout
        #expect(markdown.contains("&lt;script&gt;alert\\(1\\)&lt;/script&gt;") || markdown.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(markdown.contains("\\| \\*bold\\* \\[a\\](b) &amp; co"))
    }

    @Test("headless Chromium renders the HTML: the hostile name is text, never an element; a screenshot is taken")
    func chromium() throws {
        let browser = try LabPrerequisite.program(["/usr/bin/chromium", "/usr/bin/chromium-browser"], package: "chromium")
        let database = try fixtureCopy()
        let directory = URL(fileURLWithPath: database).deletingLastPathComponent()
        let page = directory.appendingPathComponent("report.html").path
        #expect(try report(database, ["--format", "html", "--out", page]).status == 0)
        let common = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=\(directory.path)/chromium"]
        let dom = try run(browser, common + ["--dump-dom", "file://\(page)"])
        #expect(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the CN is text in the rendered DOM")
        #expect(!dom.contains("<script"), "no script element in the rendered DOM")
        #expect(dom.contains("<svg"))
        // No table wider than a 1280-pixel page (suite names wrap): measured in the page, by a
        // script added to a copy (the report itself runs none: its CSP forbids it).
        let html = try String(contentsOfFile: page, encoding: .utf8)
        let probe = directory.appendingPathComponent("probe.html").path
        try html.replacingOccurrences(of: #"<meta http-equiv="Content-Security-Policy""#, with: "<meta name=\"x-csp-removed\"")
            .replacingOccurrences(of: "</body>", with: """
                <script>document.documentElement.setAttribute('data-clipped', Array.from(document.querySelectorAll('.scroll'))
                  .filter(e => e.scrollWidth > e.clientWidth + 1).length)</script></body>
                """)
            .write(toFile: probe, atomically: true, encoding: .utf8)
        let measured = try run(browser, common + ["--window-size=1280,2400", "--dump-dom", "file://\(probe)"])
        #expect(measured.contains("data-clipped=\"0\""), "a table is wider than 1280 pixels: \(measured.prefix(200))")
        let screenshot = directory.appendingPathComponent("report.png").path
        for (name, width) in [("desktop", 1280), ("phone", 390)] {
            let file = screenshot.replacingOccurrences(of: ".png", with: "-\(name).png")
            _ = try run(browser, common + ["--window-size=\(width),2400", "--screenshot=\(file)", "file://\(page)"])
            let png = try Data(contentsOf: URL(fileURLWithPath: file))
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 20_000, "\(file): \(png.count) bytes")
            // Width from the PNG header: the page rendered at the requested size.
            let pngWidth = png[16..<20].reduce(0) { $0 << 8 | Int($1) }
            #expect(pngWidth == width)
        }
        // Printable: Chromium's print path (the @media print rules) makes a PDF of several pages.
        let pdf = directory.appendingPathComponent("report.pdf").path
        _ = try run(browser, common + ["--no-pdf-header-footer", "--print-to-pdf=\(pdf)", "file://\(page)"])
        let document = try Data(contentsOf: URL(fileURLWithPath: pdf))
        #expect(document.starts(with: Array("%PDF".utf8)))
        // The page tree's /Count: three A4/Letter pages for the fixture's week.
        let text = String(decoding: document, as: UTF8.self)
        let pages = text.range(of: #"/Count (\d+)"#, options: .regularExpression).flatMap { Int(text[$0].dropFirst(7)) }
        #expect((pages ?? 0) >= 2, "\(pages ?? 0) pages")
    }

    /// The browser's standard output (it logs noise on standard error).
    func run(_ program: String, _ arguments: [String]) throws -> String {
        try Binary.run(arguments, program: program).stdout
    }

    @Test("bad options and an unreadable database give a clear error and an exit code")
    func errors() throws {
        let database = try fixtureCopy()
        let badSince = try Binary.run(["report", "--database", database, "--since", "soon"])
        #expect(badSince.status == 64 && badSince.stderr.contains("--since"))
        let badFormat = try Binary.run(["report", "--database", database, "--format", "pdf"])
        #expect(badFormat.status == 64)
        let missing = try Binary.run(["report", "--database", "/nonexistent/tlsaudit.sqlite"])
        #expect(missing.status == 2 && missing.stderr.contains("no database"))
        let unwritable = try report(database, ["--out", "/proc/tlsaudit-report.txt"])
        #expect(unwritable.status == 2 && unwritable.stderr.contains("cannot write /proc/tlsaudit-report.txt"))
    }

    @Test("durations must be finite and at most 100 years; a report's files are told apart from a longer-named report's")
    func limits() throws {
        #expect(DurationText.seconds("inf") == nil && DurationText.seconds("nan") == nil && DurationText.seconds("1e15") == nil)
        #expect(DurationText.seconds("infd") == nil && DurationText.seconds("-5m") == nil && DurationText.seconds("7d") == 604_800)
        let database = try fixtureCopy()
        #expect(try Binary.run(["report", "--database", database, "--since", "inf"]).status == 64)
        #expect(try Binary.run(["report", "--database", database, "--expiring-within", "inf"]).status == 64)
        let schedule = ReportSchedule(name: "weekly", frequency: .weekly, directory: "/tmp")
        #expect(schedule.owns(fileName: "weekly-2026-11-23.html", format: .html))
        #expect(!schedule.owns(fileName: "weekly-eu-2026-11-23.html", format: .html))
        #expect(!schedule.owns(fileName: "weekly-2026-11-23.json", format: .html))
        #expect(!schedule.owns(fileName: "weekly-notes.html", format: .html))
    }

    @Test("a command that never reads its input cannot hold a delivery past its timeout")
    func commandThatDoesNotRead() {
        let started = Date()
        let outcome = CommandSink.run(["/bin/sleep", "30"], input: Data(count: 4 << 20), timeout: 1)
        #expect(Date().timeIntervalSince(started) < 5)
        if case .success = outcome { Issue.record("a command killed at its timeout is a failure") }
    }
}

/// The service's scheduled reports, with a real service, a real server and a webhook receiver.
@Suite("Scheduled reports", .serialized)
struct ScheduledReportTests {
    init() { TestBackends.register() }

    let lab = ServiceLab.shared
    static let secret = "report-secret"

    func config(_ workspace: URL, port: Int, receiver: LabWebhookReceiver, at: String) throws -> String {
        let path = workspace.appendingPathComponent("tlsaudit.yaml").path
        let yaml = lab.configuration(database: workspace.appendingPathComponent("db.sqlite").path, targets: [("api", port)],
                                     extra: """
            alerts:
              sinks:
                - type: log
                - name: hook
                  type: webhook
                  url: http://127.0.0.1:\(receiver.port)/reports
                  secret: \(Self.secret)
                  timeout: 2s
            reports:
              - name: daily-ops
                schedule: daily
                at: "\(at)"
                timezone: UTC
                since: 1h
                formats: [html, json, csv]
                directory: \(workspace.path)/reports
                sinks: [hook]
            """)
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func reportRequests(_ receiver: LabWebhookReceiver) -> [LabWebhookReceiver.Request] {
        receiver.received.filter { $0.headers["x-tlsaudit-report-id"] != nil }
    }

    @Test("a daily report is written at its time in every format and sent signed; a restart neither repeats nor skips one")
    func daily() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        let workspace = try lab.workspace("scheduled")
        // Due in twelve hours at first: the service scans for a while before the report is moved
        // to a few seconds ahead by a reload (so that it has scans to report on, however slow the machine).
        let config = try config(workspace, port: server.port, receiver: receiver, at: ServiceLab.timeOfDay(12 * 3600))
        let check = try Binary.run(["check-config", config])
        #expect(check.status == 0, "\(check.stderr)")

        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans before the report") { service.storedScans.count >= 2 }
        _ = try self.config(workspace, port: server.port, receiver: receiver, at: ServiceLab.timeOfDay(3))
        service.signal(SIGHUP)
        service.wait("the reload") { !service.lines(containing: "configuration reloaded").isEmpty }
        let reports = workspace.appendingPathComponent("reports")
        let day = Timestamp.formatDay(Date().addingTimeInterval(3))
        let json = reports.appendingPathComponent("daily-ops-\(day).json")
        service.wait("the scheduled report", timeout: 25) { FileManager.default.fileExists(atPath: json.path) }
        let report = try JSONDecoder.tlsaudit.decode(ComplianceReport.self, from: Data(contentsOf: json))
        #expect(report.targets.map(\.target) == ["api"])
        #expect(report.summary.compliant == 1 && report.summary.scans >= 2)
        let html = try String(contentsOf: reports.appendingPathComponent("daily-ops-\(day).html"), encoding: .utf8)
        #expect(html.contains("<svg"))
        let csv = try String(contentsOf: reports.appendingPathComponent("daily-ops-\(day).csv"), encoding: .utf8)
        #expect(csv.split(separator: "\r\n").count == 2)

        service.wait("the report at the webhook") { reportRequests(receiver).count == 1 }
        let request = try #require(reportRequests(receiver).first)
        let expected = MessageAuthentication.hmacSHA256Hex(key: Array(Self.secret.utf8), message: Array(request.body))
        #expect(request.headers["x-tlsaudit-signature"] == "sha256=\(expected)")
        #expect(request.headers["x-tlsaudit-report-id"] == "daily-ops@\(Timestamp.format(report.period.end))")
        let notice = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: Any])
        #expect(notice["schema"] as? String == "tlsaudit.report-notice/1")
        #expect((notice["text"] as? String)?.hasPrefix("tlsaudit report daily-ops") == true)
        #expect((notice["report"] as? [String: Any])?["schema"] as? String == "tlsaudit.report/1")
        // Logged after the run is recorded, which follows the sending (a synced commit).
        service.wait("the run recorded") { !service.lines(containing: "scheduled report written").isEmpty }
        #expect(service.lines(containing: "scheduled report written").count == 1)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)

        // Restarted with the same schedule: today's report exists, so nothing is written again.
        let again = try ServiceProcess(config: config, workspace: workspace)
        again.wait("scans after the restart") { again.storedScans.count >= 3 }
        #expect(reportRequests(receiver).count == 1)
        #expect(again.lines(containing: "scheduled report written").isEmpty)
        again.signal(SIGTERM)
        #expect(again.waitForExit(timeout: 10) == 0)

        // Moved to a time that passed while it was stopped: the missed report is written at start.
        _ = try self.config(workspace, port: server.port, receiver: receiver, at: ServiceLab.timeOfDay(-1))
        let caughtUp = try ServiceProcess(config: config, workspace: workspace)
        caughtUp.wait("the missed report") { reportRequests(receiver).count == 2 }
        #expect(caughtUp.lines(containing: "missed while stopped").count == 1)
        caughtUp.signal(SIGTERM)
        #expect(caughtUp.waitForExit(timeout: 10) == 0)
        let runs = try SQLiteScanStore(path: workspace.appendingPathComponent("db.sqlite").path, create: false, sha256: Digest.sha256Hex)
            .lastReportRun(name: "daily-ops")
        #expect(runs != nil && runs! > report.period.end)
    }

    @Test("the reports section is checked like the rest: every mistake with its line")
    func configurationErrors() throws {
        let yaml = """
            database: /tmp/x.sqlite
            alerts:
              sinks:
                - name: hook
                  type: webhook
                  url: http://127.0.0.1:9/
            reports:
              - schedule: hourly
              - name: weekly
                schedule: weekly
                day: funday
                at: "25:00"
                formats: [html, pdf]
                sinks: [nope]
                timezone: Mars/Base
              - schedule: daily
                day: monday
                colour: blue
            targets: [example.org]
            """
        #expect(throws: ConfigurationErrors.self) { try ServiceConfiguration.parse(yaml: yaml, file: "t.yaml", baseDirectory: "/tmp") }
        do {
            _ = try ServiceConfiguration.parse(yaml: yaml, file: "t.yaml", baseDirectory: "/tmp")
        } catch {
            let lines = error.errors.map { "\($0.line ?? 0): \($0.message)" }
            #expect(lines.contains { $0.hasPrefix("8:") && $0.contains("schedule 'hourly'") })
            #expect(lines.contains { $0.hasPrefix("11:") && $0.contains("day must be one of") })
            #expect(lines.contains { $0.hasPrefix("12:") && $0.contains("HH:MM") })
            #expect(lines.contains { $0.hasPrefix("13:") && $0.contains("formats must be") })
            #expect(lines.contains { $0.hasPrefix("14:") && $0.contains("no sink named 'nope'") })
            #expect(lines.contains { $0.hasPrefix("15:") && $0.contains("not a time zone") })
            #expect(lines.contains { $0.hasPrefix("17:") && $0.contains("weekly reports only") })
            #expect(lines.contains { $0.hasPrefix("18:") && $0.contains("unknown key 'colour'") })
        }
        let good = try ServiceConfiguration.parse(yaml: """
            database: /var/lib/tlsaudit/db.sqlite
            reports:
              - schedule: weekly
                day: friday
                at: "17:30"
                timezone: Europe/Paris
                formats: [html, json, html]
                keep: 12
            targets: [example.org]
            """, file: "t.yaml", baseDirectory: "/tmp")
        let schedule = try #require(good.reports.first)
        #expect(schedule.name == "weekly" && schedule.weekday == 6)
        #expect(schedule.timeOfDay == 17 * 3600 + 30 * 60)
        #expect(schedule.formats == [.html, .json])
        #expect(schedule.keep == 12 && schedule.since == 7 * 86_400)
        #expect(schedule.directory == "/var/lib/tlsaudit/reports")
        // Friday 2026-11-20 17:30 in Paris is 16:30 UTC; asked on Sunday the 22nd, that is the latest one.
        #expect(schedule.latestDue(atOrBefore: Timestamp.parse("2026-11-22T12:00:00Z")!) == Timestamp.parse("2026-11-20T16:30:00Z"))
        #expect(schedule.nextDue(after: Timestamp.parse("2026-11-22T12:00:00Z")!) == Timestamp.parse("2026-11-27T16:30:00Z"))
        // On the days the clocks change, a daily 06:00 report in Paris is still at 06:00 local.
        var paris = ReportSchedule(name: "d", frequency: .daily, directory: "/tmp")
        paris.timeZone = TimeZone(identifier: "Europe/Paris")!
        #expect(paris.latestDue(atOrBefore: Timestamp.parse("2026-03-29T12:00:00Z")!) == Timestamp.parse("2026-03-29T04:00:00Z"))
        #expect(paris.latestDue(atOrBefore: Timestamp.parse("2026-10-25T12:00:00Z")!) == Timestamp.parse("2026-10-25T05:00:00Z"))
        // Across the end of summer time the report stays at 17:30 local (15:30 UTC in summer).
        #expect(schedule.latestDue(atOrBefore: Timestamp.parse("2026-10-20T00:00:00Z")!) == Timestamp.parse("2026-10-16T15:30:00Z"))
    }
}

/// A small deterministic random number generator (for a reproducible shuffle).
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
