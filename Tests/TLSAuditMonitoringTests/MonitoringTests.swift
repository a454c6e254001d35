import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditSupport
import TLSAuditProcess
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// `serve` with its HTTP listener: health, readiness and Prometheus metrics, read with curl and
/// checked with promtool, as Prometheus and operators read them.
@Suite("monitoring: the HTTP listener", .serialized)
struct MonitoringTests {
    let lab = ServiceLab.shared

    /// `count` requests side by side from one curl (-Z), request `index` made of `request(index)`:
    /// the `writeOut` line of each.
    static func parallel(_ count: Int, writeOut: String = "%{http_code}\n", _ request: (Int) -> [String]) throws -> [Substring] {
        let arguments = (1...count).flatMap { index in ["-s", "-o", "/dev/null", "-w", writeOut] + request(index) + (index < count ? ["--next"] : []) }
        return try Binary.run(["-Z", "--parallel-max", "\(count)", "--parallel-immediate"] + arguments, program: "/usr/bin/curl").stdout
            .split(separator: "\n")
    }

    /// A fresh bearer token and the file holding it (`bearer_token_file`), in `workspace`.
    static func bearerToken(in workspace: URL) throws -> (token: String, file: String) {
        let token = "t0ken-\(UUID().uuidString.prefix(8))"
        let file = workspace.appendingPathComponent("token").path
        try (token + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return (token, file)
    }

    /// Starts `serve` on `targets` (with their `tags`) with `http` as the listener's settings; waits for `listeners` of them.
    func service(_ name: String, targets: [(String, Int)], http: String, listeners: Int = 1,
                 tags: [String: [String]] = [:]) throws -> (ServiceProcess, URL) {
        let workspace = try lab.workspace(name)
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("tlsaudit.sqlite").path, targets: targets,
                              extra: "http:\n" + http.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"), tags: tags)
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("the http listeners", timeout: 20) { ServiceHTTP.listening(service).count >= listeners }
        return (service, workspace)
    }

    @Test("health, readiness and /metrics on IPv4 and IPv6: ssl_exporter's names and labels, tlsaudit's own series; the bearer token asked for except on the health checks; promtool check metrics passes")
    func metricsAndHealth() throws {
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let (token, tokenFile) = try Self.bearerToken(in: lab.workspace("monitoring-token"))
        let (service, _) = try service("monitoring-metrics", targets: [("good", good.port), ("expired", expired.port)], http: """
            listen: ["127.0.0.1:0", "[::1]:0"]
            bearer_token_file: \(tokenFile)
            """, listeners: 2)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let addresses = ServiceHTTP.listening(service)
        #expect(addresses.contains { $0.hasPrefix("127.0.0.1:") } && addresses.contains { $0.hasPrefix("[::1]:") }, "\(addresses)")
        service.wait("both targets scanned") { Set(service.storedScans.map(\.target)) == ["good", "expired"] }

        for address in addresses {
            let health = try ServiceHTTP.fetch("http://\(address)/healthz")
            #expect(health.status == 200 && health.body.hasPrefix("ok"), "\(address): \(health)")
            let ready = try ServiceHTTP.fetch("http://\(address)/readyz")
            #expect(ready.status == 200 && ready.body.hasPrefix("ready") && ready.body.contains("store: writable"), "\(address): \(ready)")
            #expect(try ServiceHTTP.fetch("http://\(address)/metrics").status == 401, "no token, no metrics")
            #expect(try ServiceHTTP.fetch("http://\(address)/metrics", token: "wrong").status == 401)
        }
        let metrics = try ServiceHTTP.fetch("http://\(addresses[0])/metrics", token: token)
        #expect(metrics.status == 200)
        let lines = metrics.body.split(separator: "\n").map(String.init)
        func value(_ prefix: String) -> Double? {
            lines.first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(value(#"ssl_probe_success{target="good",address="127.0.0.1"}"#) == 1, "\(metrics.body.prefix(3000))")
        #expect(value(#"ssl_tls_version_info{target="good",address="127.0.0.1",version="TLS 1.3"}"#) == 1)
        #expect(value(#"tlsaudit_compliant{target="good",address="127.0.0.1""#) == 1)
        #expect(value(#"tlsaudit_compliant{target="expired",address="127.0.0.1""#) == 0)
        #expect(lines.contains { $0.hasPrefix(#"tlsaudit_rule_failed{target="expired",address="127.0.0.1",rule=""#) })
        #expect(value(#"tlsaudit_pin_state{target="good",address="127.0.0.1",state="none"}"#) == 1)
        // The leaf's notAfter, labelled as ssl_exporter labels it (serial in decimal, names framed by commas).
        let serial = try Self.decimalSerial(of: lab.good.pem)
        let leaf = #"ssl_cert_not_after{target="good",address="127.0.0.1",serial_no="\#(serial)",issuer_cn=""#
        #expect(value(leaf) == lab.good.summary.notAfter.timeIntervalSince1970, "\(lines.filter { $0.hasPrefix("ssl_cert_not_after") })")
        #expect(lines.contains { $0.hasPrefix(leaf) && $0.contains(#"cn="\#(ServiceLab.hostname)",dnsnames=",\#(ServiceLab.hostname),""#) })
        #expect(lines.contains { $0.hasPrefix(#"ssl_verified_cert_not_after{target="good",address="127.0.0.1",chain_no="0""#) })
        let expiry = value(#"tlsaudit_chain_expiry_timestamp_seconds{target="expired",address="127.0.0.1"}"#) ?? .infinity
        #expect(expiry == lab.expired.summary.notAfter.timeIntervalSince1970, "the expired chain's earliest expiry: \(expiry)")
        #expect((value(#"tlsaudit_chain_expiry_timestamp_seconds{target="good",address="127.0.0.1"}"#) ?? 0) > Date().timeIntervalSince1970)
        #expect(value(#"tlsaudit_scans_total{status="completed",category="none"}"#) ?? 0 >= 2)
        #expect(lines.contains { $0.hasPrefix("tlsaudit_scan_duration_seconds_bucket{le=") })
        #expect(lines.contains { $0.hasPrefix("tlsaudit_store_write_seconds_count") })
        #expect(value(#"tlsaudit_alerts_raised_total{kind="certificate.expired""#) ?? 0 >= 1, "\(lines.filter { $0.contains("alerts") })")
        #expect((value("process_resident_memory_bytes") ?? 0) > 1_000_000)
        #expect((value("process_open_fds") ?? 0) > 3)
        #expect(value("tlsaudit_queue_waiting_scans") != nil && value("tlsaudit_queue_running_scans") != nil)

        // OpenMetrics when asked for: counter families without _total, and the closing # EOF.
        let open = try Binary.run(["-sS", "-H", "Authorization: Bearer \(token)", "-H",
                                   "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
                                   "-D", "-", "http://\(addresses[0])/metrics"], program: "/usr/bin/curl").stdout
        #expect(open.lowercased().contains("content-type: application/openmetrics-text; version=1.0.0"), "\(open.prefix(400))")
        #expect(open.hasSuffix("# EOF\n") && open.contains("# TYPE tlsaudit_scans counter\n")
                && open.contains("\ntlsaudit_scans_total{status=\"completed\""), "\(open.suffix(300))")

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).txt")
        try metrics.body.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let check = try Binary.run(["-c", "promtool check metrics < \(file.path)"], program: "/bin/sh")
        #expect(check.status == 0, "promtool check metrics: \(check.stdout)\(check.stderr)")
    }

    @Test("the API: /api/v1/status, /targets/NAME/history and /alerts return the documents the commands print, /summary the summary, trend and expiring sections of report --format json, /targets/NAME the target's rows, history, alerts, latest scans and findings in words, valid against the OpenAPI document's schemas; the OpenAPI document is valid; 404 and 400 with an error document")
    func apiDocuments() throws {
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let workspace = try lab.workspace("monitoring-api")
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        // A long interval: the state stays still between the API's answers and the commands'.
        try lab.configuration(database: database, targets: [("good", good.port), ("expired", expired.port)], interval: "1h",
                              extra: "http: {listen: \"127.0.0.1:0\"}").write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("the listener and both scans") { ServiceHTTP.listening(service).count == 1 && service.storedScans.count >= 2 }
        service.wait("the alerts delivered to the log") { service.lines(containing: "alert delivered").count >= 1 }
        Thread.sleep(forTimeInterval: 1)
        let base = "http://\(ServiceHTTP.listening(service)[0])/api/v1"

        var documents: [(name: String, schema: String, body: String)] = []
        for (path, command, schema) in [("status", ["status"], "Status"), ("targets/expired/history", ["history", "expired"], "HistoryEntry[]"),
                                        ("alerts", ["alerts"], "StoredAlert[]")] {
            let fetched = try ServiceHTTP.fetch("\(base)/\(path)")
            #expect(fetched.status == 200, "\(path): \(fetched)")
            let printed = try Binary.run(command + ["--database", database, "--format", "json"])
            #expect(fetched.body == printed.stdout, "\(path) is what `tlsaudit \(command.joined(separator: " ")) --format json` prints")
            documents.append((path, schema, fetched.body))
        }
        // The summary: report's summary, trend and expiring sections for the same period and end, through the CLI's JSON.
        let at = Timestamp.format(Date())
        let summary = try ServiceHTTP.fetch("\(base)/summary?since=1h&at=\(at)")
        #expect(summary.status == 200, "\(summary)")
        let report = try Binary.run(["report", "--database", database, "--config", config, "--since", "1h", "--at", at,
                                     "--expiring-within", "90d", "--format", "json"])
        let api = try #require(try JSONSerialization.jsonObject(with: Data(summary.body.utf8)) as? [String: Any])
        let cli = try #require(try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any])
        #expect(api["schema"] as? String == "tlsaudit.summary/1")
        for key in ["period", "policy", "summary", "trend", "expiring", "expiring_within_days", "goal", "generated_at"] {
            #expect(api[key] != nil && NSDictionary(dictionary: ["v": api[key] as Any]).isEqual(to: ["v": cli[key] as Any]),
                    "summary.\(key) is report's: \(String(describing: api[key])) / \(String(describing: cli[key]))")
        }
        let counts = try #require(api["summary"] as? [String: Any])
        #expect(counts["compliant"] as? Int == 1 && counts["not_compliant"] as? Int == 1 && counts["addresses"] as? Int == 2, "\(counts)")
        #expect((api["expiring"] as? [[String: Any]])?.contains { ($0["days_left"] as? Int ?? 0) < 0 } == true, "the expired leaf is listed")
        documents.append(("summary", "Summary", summary.body))
        // Of now (no `at`): the same answer again within 30 s; another period is its own.
        let ofNow = try ServiceHTTP.fetch("\(base)/summary?since=1h")
        let again = try ServiceHTTP.fetch("\(base)/summary?since=1h")
        #expect(ofNow.status == 200 && again.body == ofNow.body, "reused within 30 s")
        let twoHours = try JSONSerialization.jsonObject(with: Data(try ServiceHTTP.fetch("\(base)/summary?since=2h").body.utf8)) as? [String: Any]
        let start = ((twoHours?["period"] as? [String: Any])?["start"] as? String).flatMap(Timestamp.parse)
        #expect(start.map { abs($0.timeIntervalSinceNow + 7200) < 60 } == true, "another since is computed for itself: \(String(describing: start))")
        #expect(try ServiceHTTP.fetch("\(base)/summary?since=1x").status == 400)
        #expect(try ServiceHTTP.fetch("\(base)/summary?at=yesterday").status == 400)
        // A target's page document: its status rows, history and alerts as the commands print them, its latest scans in full.
        let target = try ServiceHTTP.fetch("\(base)/targets/expired")
        #expect(target.status == 200, "\(target)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(target.body.utf8)) as? [String: Any])
        func printed(_ command: [String]) throws -> Any {
            try JSONSerialization.jsonObject(with: Data(try Binary.run(command + ["--database", database, "--format", "json"]).stdout.utf8))
        }
        let statusRows = ((try printed(["status"]) as? [String: Any])?["targets"] as? [[String: Any]] ?? []).filter { $0["target"] as? String == "expired" }
        #expect(NSArray(array: document["addresses"] as? [Any] ?? []).isEqual(to: statusRows), "addresses are status's rows")
        #expect(NSArray(array: document["history"] as? [Any] ?? []).isEqual(to: try printed(["history", "expired", "--limit", "50"]) as? [Any] ?? [1]))
        let targetAlerts = (try printed(["alerts", "--limit", "1000"]) as? [[String: Any]] ?? []).filter { ($0["alert"] as? [String: Any])?["target"] as? String == "expired" }
        #expect(!targetAlerts.isEmpty && NSArray(array: document["alerts"] as? [Any] ?? []).isEqual(to: targetAlerts), "the target's alerts")
        let latest = try #require((document["latest"] as? [[String: Any]])?.first)
        let chain = latest["chain"] as? [String: Any]
        #expect((chain?["presented"] as? [[String: Any]])?.first?["sha256_fingerprint"] as? String == statusRows.first?["leaf_fingerprint"] as? String,
                "the latest scan's leaf is status's: \(String(describing: chain?.keys))")
        let words = try #require(document["findings"] as? [String: [String: Any]])
        #expect((words["trust.expired"]?["title"] as? String)?.isEmpty == false && words["trust.expired"]?["fix"] != nil, "\(words.keys)")
        documents.append(("target", "Target", target.body))
        #expect(try ServiceHTTP.fetch("\(base)/targets/nothing-here").status == 404)
        let missing = try ServiceHTTP.fetch("\(base)/targets/nothing-here/history")
        #expect(missing.status == 404 && missing.body.contains("\"error\""), "\(missing)")
        documents.append(("missing", "Error", missing.body))
        let badLimit = try ServiceHTTP.fetch("\(base)/alerts?limit=0")
        #expect(badLimit.status == 400, "\(badLimit)")
        #expect(try ServiceHTTP.fetch("\(base)/alerts?limit=1").body.components(separatedBy: "\"alert\" :").count == 2, "limit=1: one alert")
        let openAPI = try ServiceHTTP.fetch("\(base)/openapi.json")
        #expect(openAPI.status == 200)

        // Validated by Python's openapi-spec-validator and jsonschema: independent implementations.
        let directory = workspace.appendingPathComponent("api")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try openAPI.body.write(to: directory.appendingPathComponent("openapi.json"), atomically: true, encoding: .utf8)
        for (index, document) in documents.enumerated() {
            try document.body.write(to: directory.appendingPathComponent("\(index)-\(document.schema).json"), atomically: true, encoding: .utf8)
        }
        let script = """
            import json, sys, glob, os
            from openapi_spec_validator import validate
            import jsonschema
            spec = json.load(open('openapi.json'))
            validate(spec)
            checked = 0
            for path in sorted(glob.glob('[0-9]*-*.json')):
                name = path.split('-', 1)[1][:-5]
                ref = {'$ref': '#/components/schemas/' + name.rstrip('[]')}
                schema = {'type': 'array', 'items': ref} if name.endswith('[]') else ref
                schema = dict(schema, components=spec['components'])
                jsonschema.validate(json.load(open(path)), schema, cls=jsonschema.Draft202012Validator,
                                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
                checked += 1
            print('valid', checked)
            """
        let validated = try Binary.run(["python3", "-c", script], program: "/usr/bin/env", directory: directory.path)
        #expect(validated.status == 0 && validated.stdout.contains("valid \(documents.count)"), "\(validated.stdout)\(validated.stderr)")
    }

    @Test("https (ListenerTLS trait): the listener serves TLS 1.2+ with the configured chain (curl verifies it against the lab root; TLS 1.1 is refused), and tlsaudit's own scan of its listener is ATS-compliant; a build without the trait refuses http: tls: in check-config and serve, saying how to build it")
    func httpsListener() throws {
        let workspace = try lab.workspace("monitoring-https")
        let chain = workspace.appendingPathComponent("listener-chain.pem").path
        let key = workspace.appendingPathComponent("listener-key.pem").path
        try (lab.good.pem + lab.intermediate.pem).write(toFile: chain, atomically: true, encoding: .utf8)
        try lab.good.key.pem.write(toFile: key, atomically: true, encoding: .utf8)
        let good = try lab.goodServer()
        defer { good.stop() }
        #if !ListenerTLS
        // A build without the ListenerTLS trait (plain `swift test`): check-config and serve refuse the
        // listener's TLS with the way to build it, instead of serving plain HTTP where HTTPS was asked for.
        let configuration = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("tlsaudit.sqlite").path, targets: [("good", good.port)], extra: """
            http: {listen: "127.0.0.1:0", tls: {certificate: \(chain), key: \(key)}}
            """).write(toFile: configuration, atomically: true, encoding: .utf8)
        for command in [["check-config", configuration], ["serve", "--config", configuration]] {
            let refused = try Binary.run(command)
            #expect(refused.status != 0 && (refused.stdout + refused.stderr).contains("swift build -c release --traits ListenerTLS"),
                    "\(command[0]): \(refused.stdout)\(refused.stderr)")
        }
        #else
        let (service, _) = try service("monitoring-https-service", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            tls: {certificate: \(chain), key: \(key)}
            allowed_hosts: [\(ServiceLab.hostname)]
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let port = ServiceHTTP.listening(service)[0].split(separator: ":").last.map(String.init) ?? ""
        let url = "https://\(ServiceLab.hostname):\(port)/healthz"
        let resolve = "\(ServiceLab.hostname):\(port):127.0.0.1"
        let verified = try Binary.run(["-sS", "--cacert", lab.rootFile, "--resolve", resolve, "--tlsv1.2", url], program: "/usr/bin/curl")
        #expect(verified.status == 0 && verified.stdout.hasPrefix("ok"), "\(verified.stdout)\(verified.stderr)")
        let old = try Binary.run(["-sS", "--cacert", lab.rootFile, "--resolve", resolve, "--tlsv1.1", "--tls-max", "1.1", url],
                                 program: "/usr/bin/curl")
        #expect(old.status != 0, "TLS 1.1 refused: \(old.stdout)\(old.stderr)")
        let plain = try ServiceHTTP.fetch("http://127.0.0.1:\(port)/healthz")
        #expect(plain.status != 200, "no plain HTTP on the TLS listener")
        let scan = try Binary.run(["scan", "\(ServiceLab.hostname):\(port)", "--connect-to", "127.0.0.1", "--ca-file", lab.rootFile])
        #expect(scan.status == 0, "tlsaudit scans its own listener as compliant: \(scan.stdout.suffix(1500))")
        #endif
    }

    @Test("basic auth from an htpasswd file (htpasswd -B): the right password passes, a wrong one or an unknown user gets 401 with a Basic challenge; the bearer token works beside it; a flood of wrong passwords from one client gets 429 and scanning goes on")
    func basicAuth() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("monitoring-basic")
        let htpasswd = try Binary.run(["-nbB", "-C", "5", "alice", "c0rrect horse"], program: try LabPrerequisite.program(["/usr/bin/htpasswd"], package: "apache2-utils"))
        #expect(htpasswd.stdout.hasPrefix("alice:$2y$05$"), "htpasswd -B writes $2y$: \(htpasswd.stdout)")
        let users = workspace.appendingPathComponent("htpasswd").path
        try ("# who may read /metrics\n" + htpasswd.stdout).write(toFile: users, atomically: true, encoding: .utf8)
        let tokenFile = workspace.appendingPathComponent("token").path
        try "t0ken\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let (service, _) = try service("monitoring-basic", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            basic_auth_file: \(users)
            bearer_token_file: \(tokenFile)
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let address = ServiceHTTP.listening(service)[0]
        service.wait("a first scan") { !service.storedScans.isEmpty }
        #expect(try ServiceHTTP.fetch("http://\(address)/healthz").status == 200)
        let open = try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:c0rrect horse")
        #expect(open.status == 200 && open.body.contains("ssl_probe_success{target=\"good\""))
        #expect(try ServiceHTTP.fetch("http://\(address)/api/v1/status", user: "alice:c0rrect horse").status == 200)
        let wrong = try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:wrong", headers: true)
        #expect(wrong.status == 401 && wrong.body.lowercased().contains("www-authenticate: basic realm=\"tlsaudit\""), "\(wrong.body)")
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", user: "mallory:c0rrect horse").status == 401)
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics").status == 401)
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", token: "t0ken").status == 200)
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", token: "alice").status == 401)

        // 60 wrong passwords at once from one client: at most 5 checks a second, the rest answered 429 at once.
        let held = Date().timeIntervalSince1970
        let codes = try Self.parallel(60) { ["-u", "alice:guess\($0)", "http://\(address)/metrics"] }
        #expect(codes.count == 60 && codes.contains("429") && codes.allSatisfy { $0 == "401" || $0 == "429" }, "\(codes)")
        #expect(codes.filter { $0 == "401" }.count <= 15, "checked at most 5 a second: \(codes.filter { $0 == "401" }.count) checked")
        Thread.sleep(forTimeInterval: 3)
        #expect(service.storedScans.filter { $0.startedAt > held }.count >= 2, "scanning went on")
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:c0rrect horse").status == 200, "the right password still passes")
    }

    @Test("hostile clients: 400 stalled connections (slowloris) and a 200 KB header do not stop scanning; stalled connections are closed after the idle timeout, and so is a client trickling its request head a byte at a time; descriptors stay bounded")
    func hostileClients() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let (service, _) = try service("monitoring-hostile", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            max_connections: 50
            idle_timeout: 2s
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let address = ServiceHTTP.listening(service)[0]
        let port = UInt16(address.split(separator: ":").last ?? "") ?? 0
        service.wait("a first scan") { !service.storedScans.isEmpty }
        let descriptorsBefore = Self.descriptors(of: service)

        // 400 connections, each sending the start of a request and nothing more.
        var stalled: [Int32] = []
        defer { for socket in stalled { close(socket) } }
        for _ in 0..<400 {
            let socket = Self.connect(port: port)
            guard socket >= 0 else { break }
            _ = "GET /metrics HTTP/1.1\r\nHost: x\r\n".withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            stalled.append(socket)
        }
        #expect(stalled.count == 400)
        let held = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 4)
        let scansMeanwhile = service.storedScans.filter { $0.startedAt > held }.count
        #expect(scansMeanwhile >= 2, "scanning went on (interval 1 s): \(scansMeanwhile) scans in 4 s")
        let descriptors = Self.descriptors(of: service)
        #expect(descriptors - descriptorsBefore <= 60, "descriptors: \(descriptorsBefore) before, \(descriptors) with 400 clients (max 50 connections)")
        // The accepted ones were closed at the idle timeout: reading gives end of file (or a reset).
        let closed = stalled.prefix(20).filter { socket in
            var pollDescriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&pollDescriptor, 1, 100) == 1 else { return false }
            var byte: UInt8 = 0
            return recv(socket, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
        }
        #expect(closed.count >= 10, "stalled connections closed after the 2 s idle timeout: \(closed.count) of 20")
        for socket in stalled { close(socket) }
        stalled.removeAll()

        // A request with a 200 KB header is refused, and the listener still answers afterwards.
        let header = FileManager.default.temporaryDirectory.appendingPathComponent("header-\(UUID().uuidString)")
        try ("X-Big: " + String(repeating: "a", count: 200_000) + "\n").write(to: header, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: header) }
        let huge = try Binary.run(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                                   "-H", "@\(header.path)", "http://\(address)/healthz"], program: "/usr/bin/curl")
        #expect(huge.stdout != "200", "a 200 KB header is not served: \(huge.stdout) \(huge.stderr)")
        service.wait("the listener answering again") { (try? ServiceHTTP.fetch("http://\(address)/healthz"))?.status == 200 }

        // A request head trickled one byte every 300 ms: the idle timeout counts from the last whole
        // part of a request (a head, a body chunk), not the last byte, so it is closed at 2 s all the same.
        let trickler = Self.connect(port: port)
        defer { close(trickler) }
        let opened = Date()
        _ = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".withCString { send(trickler, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var closedAfter: Double?
        while closedAfter == nil, Date().timeIntervalSince(opened) < 10 {
            var pollDescriptor = pollfd(fd: trickler, events: Int16(POLLIN), revents: 0)
            var byte: UInt8 = 0
            if poll(&pollDescriptor, 1, 300) == 1, recv(trickler, &byte, 1, Int32(MSG_DONTWAIT)) <= 0 {
                closedAfter = Date().timeIntervalSince(opened)
            } else if send(trickler, "a", 1, Int32(MSG_NOSIGNAL)) < 0 {
                closedAfter = Date().timeIntervalSince(opened)
            }
        }
        #expect(closedAfter.map { (1.5...4).contains($0) } == true, "a trickling client closed at the 2 s idle timeout: \(String(describing: closedAfter))")
        #expect(service.waitForExit(timeout: 0) == nil, "the service still runs")
    }

    @Test("OCSP series from servers stapling a real responder's answers: stapled, status good or revoked, thisUpdate, nextUpdate and the revocation time; none for a server that staples nothing")
    func ocspSeries() throws {
        let good = "4" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(15)
        let revoked = "5" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(15)
        let responder = try LabOCSPResponder(issuer: lab.intermediate, entries: [(good, .good), (revoked, .revoked(reason: "keyCompromise"))],
                                             directory: try lab.workspace("monitoring-ocsp"))
        func leaf(_ serial: String) throws -> LabCertificate {
            var request = LabCertificateRequest.server([ServiceLab.hostname])
            request.serialHex = serial
            return try lab.intermediate.issue(request)
        }
        let goodLeaf = try leaf(good), revokedLeaf = try leaf(revoked)
        let goodStaple = try responder.response(for: goodLeaf)
        let revokedStaple = try responder.response(for: revokedLeaf)
        let (goodServer, goodPort) = try responder.stapledServer(leaf: goodLeaf, staple: goodStaple)
        defer { LabOCSPResponder.kill(goodServer) }
        // A second responder directory: s_server reads its files at start, the first one's are rewritten.
        let second = try LabOCSPResponder(issuer: lab.intermediate, entries: [], directory: try lab.workspace("monitoring-ocsp"))
        let (revokedServer, revokedPort) = try second.stapledServer(leaf: revokedLeaf, staple: revokedStaple)
        defer { LabOCSPResponder.kill(revokedServer) }
        let plain = try lab.goodServer()
        defer { plain.stop() }
        let (service, _) = try service("monitoring-ocsp", targets: [("good", goodPort), ("revoked", revokedPort), ("plain", plain.port)],
                                       http: "listen: 127.0.0.1:0")
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("the three targets scanned") { Set(service.storedScans.map(\.target)) == ["good", "revoked", "plain"] }
        let body = try ServiceHTTP.fetch("http://\(ServiceHTTP.listening(service)[0])/metrics").body
        func value(_ family: String, _ target: String) -> Double? {
            body.split(separator: "\n").first { $0.hasPrefix("\(family){target=\"\(target)\",") }
                .flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
        }
        let now = Date().timeIntervalSince1970
        #expect(value("ssl_ocsp_response_stapled", "good") == 1 && value("ssl_ocsp_response_stapled", "revoked") == 1)
        #expect(value("ssl_ocsp_response_stapled", "plain") == 0)
        #expect(value("ssl_ocsp_response_status", "good") == 0, "\(body.split(separator: "\n").filter { $0.contains("ocsp") })")
        #expect(value("ssl_ocsp_response_status", "revoked") == 1)
        #expect(value("ssl_ocsp_response_status", "plain") == nil)
        let thisUpdate = try #require(value("ssl_ocsp_response_this_update", "good"))
        let nextUpdate = try #require(value("ssl_ocsp_response_next_update", "good"))
        #expect(abs(thisUpdate - now) < 600 && abs(nextUpdate - thisUpdate - 86_400) < 60, "\(thisUpdate) \(nextUpdate)")
        // The responder's index says revoked a day ago.
        let revokedAt = try #require(value("ssl_ocsp_response_revoked_at", "revoked"))
        #expect(abs(now - 86_400 - revokedAt) < 600, "\(revokedAt)")
        #expect(value("ssl_ocsp_response_revoked_at", "good") == nil)
    }

    @Test("contrib/prometheus/rules.yml: promtool check rules, and its unit tests (promtool test rules) pass; the Grafana dashboard is JSON naming only series tlsaudit serves")
    func rulesAndDashboard() throws {
        let contrib = ServiceLab.packageRoot.appendingPathComponent("contrib")
        let prometheus = contrib.appendingPathComponent("prometheus").path
        let check = try Binary.run(["check", "rules", "rules.yml"], program: "/usr/bin/promtool", directory: prometheus)
        #expect(check.status == 0 && check.stdout.contains("SUCCESS: 6 rules found"), "\(check.stdout)\(check.stderr)")
        let test = try Binary.run(["test", "rules", "rules_test.yml"], program: "/usr/bin/promtool", directory: prometheus)
        #expect(test.status == 0 && test.stdout.contains("SUCCESS"), "\(test.stdout)\(test.stderr)")

        let dashboard = try Data(contentsOf: contrib.appendingPathComponent("grafana/tlsaudit.json"))
        let document = try #require(try JSONSerialization.jsonObject(with: dashboard) as? [String: Any])
        let panels = try #require(document["panels"] as? [[String: Any]])
        #expect(panels.count >= 5)
        let expressions = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
        let served = ["ssl_probe_success", "ssl_cert_not_after", "ssl_tls_version_info", "tlsaudit_compliant", "tlsaudit_rule_failed",
                      "tlsaudit_pin_state", "tlsaudit_chain_expiry_timestamp_seconds", "tlsaudit_scan_duration_seconds_bucket",
                      "tlsaudit_scans_total", "tlsaudit_alerts_raised_total", "tlsaudit_alert_deliveries_total",
                      "tlsaudit_last_scan_timestamp_seconds", "process_resident_memory_bytes", "up"]
        for expression in expressions {
            // The identifiers outside string literals that are not functions or keywords: the series named.
            let unquoted = expression.replacing(/"[^"]*"/, with: "")
            let names = unquoted.matches(of: /[a-z_][a-z0-9_]*/).map { String($0.output) }
                .filter { ($0.contains("_") || $0 == "up") && !["histogram_quantile", "max_over_time"].contains($0) }
            #expect(!names.isEmpty && names.allSatisfy { served.contains($0) }, "\(expression): \(names)")
        }
        // A variable per label the rules name (their summaries' $labels, and the job), each used by the panels;
        // every per-address series is selected by target and address.
        let rules = try String(contentsOfFile: prometheus + "/rules.yml", encoding: .utf8)
        let ruleLabels = Set(rules.matches(of: /\$labels\.([a-z_]+)/).map { String($0.output.1) } + ["job"])
        let variables = Set(((document["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String })
        #expect(ruleLabels.isSubset(of: variables) && ruleLabels.count >= 4, "rules: \(ruleLabels), variables: \(variables)")
        for variable in variables {
            #expect(expressions.contains { $0.contains("=~\"$\(variable)\"") }, "no panel uses $\(variable)")
        }
        for expression in expressions {
            for series in ["ssl_probe_success", "ssl_cert_not_after", "tlsaudit_compliant", "tlsaudit_chain_expiry_timestamp_seconds"]
            where expression.contains(series + "{") || expression.contains(series + " ") || expression.hasSuffix(series) {
                #expect(expression.contains(series + #"{job=~"$job",target=~"$target",address=~"$address""#), "\(expression)")
            }
        }
    }

    /// The Grafana dashboard's panel expressions with its variables set to `job` and every value of the others.
    static func dashboardExpressions(job: String) throws -> [String] {
        let file = ServiceLab.packageRoot.appendingPathComponent("contrib/grafana/tlsaudit.json")
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any] ?? [:]
        return (document["panels"] as? [[String: Any]] ?? []).flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
            .map { $0.replacingOccurrences(of: "$job", with: job).replacingOccurrences(of: "$target", with: ".*")
                .replacingOccurrences(of: "$address", with: ".*").replacingOccurrences(of: "$policy", with: ".*") }
    }

    static func connect(port: UInt16) -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return -1 }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(socket); return -1 }
        return socket
    }

    static func descriptors(of service: ServiceProcess) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(service.pid)/fd"))?.count ?? 0
    }

    /// The certificate's serial number in decimal, as openssl prints it in hex.
    static func decimalSerial(of pem: String) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("serial-\(UUID().uuidString).pem")
        try pem.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try Binary.run(["x509", "-in", file.path, "-noout", "-serial"], program: "/usr/bin/openssl")
        let hex = output.stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "serial=", with: "")
        let script = "print(int('\(hex)', 16))"
        return try Binary.run(["python3", "-c", script], program: "/usr/bin/env").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A real Prometheus and a real Alertmanager (Debian's packages), started on free loopback ports in
/// a temporary directory and stopped at the end.
final class MonitoringStack: @unchecked Sendable {
    let directory: URL
    let prometheusPort: Int
    let alertmanagerPort: Int
    private var processes: [ChildProcess] = []

    /// Prometheus scraping tlsaudit's `/metrics` at `target` every second, and Alertmanager.
    convenience init(workspace: URL, scraping target: String, alertmanagerPort: Int) throws {
        try self.init(workspace: workspace, scrapeConfigs: """
            - job_name: tlsaudit
              scrape_interval: 1s
              static_configs: [{targets: ["\(target)"]}]
            """, alertmanagerPort: alertmanagerPort)
    }

    /// Prometheus with `scrapeConfigs` (YAML list items), and Alertmanager when `alertmanagerPort` is given.
    init(workspace: URL, scrapeConfigs: String, alertmanagerPort: Int? = nil) throws {
        directory = workspace
        prometheusPort = try LabPorts.unusedPort()
        self.alertmanagerPort = alertmanagerPort ?? 0
        try ("""
            global: {scrape_interval: 1s, evaluation_interval: 1s}
            scrape_configs:

            """ + scrapeConfigs.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") + "\n")
            .write(to: workspace.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        try start("/usr/bin/prometheus", ["--config.file=\(workspace.path)/prometheus.yml", "--storage.tsdb.path=\(workspace.path)/tsdb",
                                          "--web.listen-address=127.0.0.1:\(prometheusPort)"], log: "prometheus.log")
        guard let alertmanagerPort else { return }
        try """
            route: {receiver: none, group_wait: 1s, group_interval: 1s, repeat_interval: 1h}
            receivers: [{name: none}]
            """.write(to: workspace.appendingPathComponent("alertmanager.yml"), atomically: true, encoding: .utf8)
        try start("/usr/bin/prometheus-alertmanager", ["--config.file=\(workspace.path)/alertmanager.yml",
                                                       "--storage.path=\(workspace.path)/am", "--cluster.listen-address=",
                                                       "--web.listen-address=127.0.0.1:\(alertmanagerPort)"], log: "alertmanager.log")
    }

    private func start(_ program: String, _ arguments: [String], log: String) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let file = directory.appendingPathComponent(log)
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: file)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        processes.append(process)
    }

    func log(_ name: String) -> String { (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? "" }

    /// Prometheus' answer to an instant query: each series' labels and value.
    func query(_ expression: String) throws -> [(labels: [String: String], value: Double)] {
        let encoded = expression.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? expression
        let fetched = try ServiceHTTP.fetch("http://127.0.0.1:\(prometheusPort)/api/v1/query?query=\(encoded)")
        // Not up yet: no answer, or not JSON.
        guard let document = (try? JSONSerialization.jsonObject(with: Data(fetched.body.utf8))) as? [String: Any],
              let data = document["data"] as? [String: Any], let result = data["result"] as? [[String: Any]] else { return [] }
        return result.map { series in
            let value = (series["value"] as? [Any])?.last as? String
            return ((series["metric"] as? [String: String]) ?? [:], Double(value ?? "") ?? .nan)
        }
    }

    /// Whether Prometheus evaluates `expression` without an error.
    func evaluates(_ expression: String) throws -> Bool {
        let encoded = expression.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? expression
        let fetched = try ServiceHTTP.fetch("http://127.0.0.1:\(prometheusPort)/api/v1/query?query=\(encoded)")
        return ((try? JSONSerialization.jsonObject(with: Data(fetched.body.utf8))) as? [String: Any])?["status"] as? String == "success"
    }

    /// The alerts Alertmanager holds: labels and whether each is active.
    func alerts() throws -> [(labels: [String: String], state: String)] {
        let fetched = try ServiceHTTP.fetch("http://127.0.0.1:\(alertmanagerPort)/api/v2/alerts")
        guard let list = (try? JSONSerialization.jsonObject(with: Data(fetched.body.utf8))) as? [[String: Any]] else { return [] }
        return list.map { (($0["labels"] as? [String: String]) ?? [:], (($0["status"] as? [String: Any])?["state"] as? String) ?? "") }
    }

    func stop() {
        for process in processes where process.isRunning { process.terminate() }
        for process in processes { process.waitUntilExit() }
    }
}

extension MonitoringTests {
    @Test("end to end: a real Prometheus scrapes tlsaudit every second and a real Alertmanager gets its alerts; a lab server breaks: Prometheus has the failing probe with ssl_exporter's labels, Alertmanager the unreachable alert with tlsaudit's labels")
    func prometheusAndAlertmanager() throws {
        let server = try lab.goodServer()
        var serverStopped = false
        defer { if !serverStopped { server.stop() } }
        let workspace = try lab.workspace("monitoring-stack")
        let port = try LabPorts.unusedPort()
        let alertmanagerPort = try LabPorts.unusedPort()
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("tlsaudit.sqlite").path, targets: [("web", server.port)], extra: """
            http: {listen: "127.0.0.1:\(port)"}
            alerts:
              unreachable_after: 2
              sinks:
                - {name: am, type: alertmanager, url: "http://127.0.0.1:\(alertmanagerPort)", timeout: 2s}
            """).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let stack = try MonitoringStack(workspace: workspace, scraping: "127.0.0.1:\(port)", alertmanagerPort: alertmanagerPort)
        defer { stack.stop() }

        try service.wait("Prometheus has the probe succeeding", timeout: 60) {
            try stack.query(#"ssl_probe_success{target="web"}"#).first?.value == 1
        }
        let leaf = try stack.query(#"ssl_cert_not_after{target="web",cn="\#(ServiceLab.hostname)"}"#)
        #expect(leaf.first?.value == lab.good.summary.notAfter.timeIntervalSince1970, "\(leaf)")
        #expect(leaf.first?.labels["job"] == "tlsaudit" && leaf.first?.labels["dnsnames"] == ",\(ServiceLab.hostname),", "\(leaf)")

        server.stop()
        serverStopped = true
        try service.wait("Prometheus has the probe failing", timeout: 30) {
            try stack.query(#"ssl_probe_success{target="web"}"#).first?.value == 0
        }
        let failures = try stack.query(#"tlsaudit_scans_total{status="failed"}"#)
        #expect(failures.contains { $0.labels["category"] == "connection-refused" && $0.value >= 1 }, "\(failures)")
        try service.wait("Alertmanager has the unreachable alert", timeout: 30) {
            try stack.alerts().contains { $0.labels["alertname"] == "TLSAuditTargetUnreachable" }
        }
        let alert = try stack.alerts().first { $0.labels["alertname"] == "TLSAuditTargetUnreachable" }
        #expect(alert?.labels["target"] == "web" && alert?.labels["address"] == "127.0.0.1" && alert?.labels["finding"] == "reachability",
                "\(String(describing: alert))")
        #expect(alert?.labels["severity"] != nil && alert?.state == "active", "\(String(describing: alert))")

        // The server comes back: target.recovered ends the Alertmanager alert (endsAt), and the probe succeeds again.
        var again = LabServerConfiguration(chain: [lab.good, lab.intermediate])
        again.port = server.port
        let restarted = try LabTLSServer(again)
        defer { restarted.stop() }
        try service.wait("Alertmanager's unreachable alert resolved", timeout: 30) {
            !(try stack.alerts().contains { $0.labels["alertname"] == "TLSAuditTargetUnreachable" && $0.state == "active" })
        }
        try service.wait("Prometheus has the probe succeeding again", timeout: 30) {
            try stack.query(#"ssl_probe_success{target="web"}"#).first?.value == 1
        }
        #expect(service.lines(containing: "alert delivered").contains { $0.contains("kind=target.recovered") && $0.contains("sink=am") })
    }
}
