import Foundation
import Testing
import TLSAuditLab
import TLSAuditServiceLab
import TLSAuditProcess

/// The listener against hostile pages and clients: the `Host` rule, the per-client
/// password budget, bcrypt's 72-byte limit, the headers on every answer, encoded names and scheme
/// names in any case; real requests from curl on 127.0.0.1, 127.0.0.2 and ::1.
extension MonitoringTests {
    /// curl's status code and the two headers the listener adds to every answer: "CODE|nosniff|no-store".
    static func stamped(_ url: String, _ options: [String] = []) throws -> String {
        try Binary.run(["-sS", "-g", "--max-time", "10", "-o", "/dev/null", "-w",
                        "%{http_code}|%header{x-content-type-options}|%header{cache-control}", url] + options, program: "/usr/bin/curl").stdout
    }

    /// An htpasswd file of `users` (name, password), bcrypt at cost 5, made by htpasswd -B.
    func htpasswd(_ users: [(String, String)], in workspace: URL) throws -> String {
        let program = try LabPrerequisite.program(["/usr/bin/htpasswd"], package: "apache2-utils")
        let lines = try users.map { user, password in
            let made = try Binary.run(["-nbB", "-C", "5", user, password], program: program)
            #expect(made.status == 0 && made.stdout.hasPrefix("\(user):$2y$05$"), "\(made.stdout)\(made.stderr)")
            return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let file = workspace.appendingPathComponent("htpasswd").path
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    static func port(_ address: String) -> String { address.split(separator: ":").last.map(String.init) ?? "" }

    @Test("the Host rule (DNS rebinding): without auth, the listen address, localhost and allowed_hosts pass on every path, with or without the port, IPv6 in brackets; another name, another port or no Host gets 421; with auth and allowed_hosts, a right token from a wrong Host gets 421")
    func hostRule() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let (service, _) = try service("monitoring-host", targets: [("good", good.port)], http: """
            listen: ["127.0.0.1:0", "[::1]:0"]
            allowed_hosts: [dashboard.tlsaudit.test]
            """, listeners: 2)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let addresses = ServiceHTTP.listening(service)
        let v4 = try #require(addresses.first { $0.hasPrefix("127.0.0.1:") }), v6 = try #require(addresses.first { $0.hasPrefix("[::1]:") })
        service.wait("a first scan") { !service.storedScans.isEmpty }
        let paths = ["/api/v1/status", "/api/v1/targets/good/history", "/metrics", "/healthz", "/readyz", "/"]
        func statuses(_ address: String, host: String?) throws -> [Int] {
            try paths.map { try ServiceHTTP.fetch("http://\(address)\($0)", options: ["-H", host.map { "Host: \($0)" } ?? "Host:"]).status }
        }
        let (port4, port6) = (Self.port(v4), Self.port(v6))
        for host in ["127.0.0.1:\(port4)", "127.0.0.1", "localhost:\(port4)", "LOCALHOST", "dashboard.tlsaudit.test:\(port4)", "Dashboard.TLSAudit.test"] {
            #expect(try statuses(v4, host: host) == paths.map { _ in 200 }, "Host: \(host)")
        }
        for host in ["[::1]:\(port6)", "[::1]", "[0:0:0:0:0:0:0:1]:\(port6)", "localhost", "dashboard.tlsaudit.test:\(port6)"] {
            #expect(try statuses(v6, host: host) == paths.map { _ in 200 }, "Host: \(host)")
        }
        for host in ["rebind.attacker.test:\(port4)", "rebind.attacker.test", "127.0.0.1.attacker.test", "localhost.attacker.test:\(port4)",
                     "127.0.0.1:1", "dashboard.tlsaudit.test:1", nil] {
            #expect(try statuses(v4, host: host) == paths.map { _ in 421 }, "Host: \(host ?? "(none)")")
        }
        for host in ["rebind.attacker.test:\(port6)", "[::1]:1", "127.0.0.1:\(port6)"] {
            #expect(try statuses(v6, host: host) == paths.map { _ in 421 }, "Host: \(host)")
        }
        let refused = try ServiceHTTP.fetch("http://\(v4)/api/v1/status", options: ["-H", "Host: rebind.attacker.test"])
        #expect(refused.body.contains("rebind.attacker.test") && refused.body.contains("allowed_hosts"), "\(refused.body)")

        // With a token and allowed_hosts, the rule still applies: a right token from a wrong Host is refused.
        let workspace = try lab.workspace("monitoring-host-token")
        let tokenFile = workspace.appendingPathComponent("token").path
        try "h0st-t0ken\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let (guarded, _) = try self.service("monitoring-host-auth", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            bearer_token_file: \(tokenFile)
            allowed_hosts: dashboard.tlsaudit.test
            """)
        defer { guarded.signal(SIGTERM); _ = guarded.waitForExit(timeout: 15) }
        let address = ServiceHTTP.listening(guarded)[0]
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", token: "h0st-t0ken", options: ["-H", "Host: rebind.attacker.test"]).status == 421)
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", token: "h0st-t0ken", options: ["-H", "Host: dashboard.tlsaudit.test"]).status == 200)
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", token: "h0st-t0ken").status == 200)
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics").status == 401, "a right Host does not replace the token")
    }

    @Test("a flood of junk basic credentials (25 a second each: a known user's wrong password, an unknown user) gets 429 beyond its own budget, while ten new valid logins from 127.0.0.1 all pass, whether the flood comes from 127.0.0.2 or from 127.0.0.1 itself (budgets per client and user name, unknown names in a bucket of their own); a remembered password passes even from the flooding address",
          arguments: ["127.0.0.2", "127.0.0.1"])
    func perClientBudget(floodFrom: String) throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("monitoring-budget")
        let users = (1...10).map { ("user\($0)", "pass-\($0)-\(UUID().uuidString.prefix(6))") }
        let file = try htpasswd([("alice", "c0rrect horse")] + users, in: workspace)
        let (service, _) = try service("monitoring-budget", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            basic_auth_file: \(file)
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let address = ServiceHTTP.listening(service)[0]
        #expect(try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:c0rrect horse").status == 200)

        let floods = try Self.flood(address, ["--interface", floodFrom])
        defer { for (process, _) in floods where process.isRunning { process.terminate() } }
        Thread.sleep(forTimeInterval: 1)
        var logins: [Int] = []
        for (user, password) in users {
            logins.append(try ServiceHTTP.fetch("http://\(address)/metrics", user: "\(user):\(password)").status)
            Thread.sleep(forTimeInterval: 0.25)
        }
        let remembered = try (1...10).map { _ in
            try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:c0rrect horse", options: ["--interface", floodFrom]).status
        }
        #expect(floods.allSatisfy { $0.0.isRunning }, "the logins ran during the flood")
        #expect(logins == users.map { _ in 200 }, "every new valid login from 127.0.0.1 passed: \(logins)")
        #expect(remembered == (1...10).map { _ in 200 }, "a remembered password never waits: \(remembered)")
        Self.heldToBudget(floods)
    }

    /// Two curls flooding `address` with junk basic credentials (a known user's wrong password, an
    /// unknown user), 25 requests a second each, 150 each, with `options` (an interface, headers).
    static func flood(_ address: String, _ options: [String]) throws -> [(ChildProcess, Pipe)] {
        try ["alice:wrong-guess", "mallory:junk"].map { credentials in
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            process.arguments = ["-s", "--rate", "25/s", "-o", "/dev/null", "-w", "%{http_code}\n", "-u", credentials] + options
                + ["http://\(address)/metrics?n=[1-150]"]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            return (process, output)
        }
    }

    /// The flood's status codes, once it ends: 150 per curl, each 401 or 429, and at least 100 429s each.
    static func heldToBudget(_ floods: [(ChildProcess, Pipe)], sourceLocation: SourceLocation = #_sourceLocation) {
        for (process, output) in floods {
            process.waitUntilExit()
            let codes = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
            #expect(codes.count == 150 && codes.allSatisfy { $0 == "401" || $0 == "429" }, "\(codes)", sourceLocation: sourceLocation)
            #expect(codes.filter { $0 == "429" }.count >= 100, "held to its budget: \(codes.filter { $0 == "429" }.count) of 150 got 429",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("http trusted_proxies: behind a trusted proxy the budget follows the client named in X-Forwarded-For or Forwarded, so a flooding client locks out no one else, not even the same user elsewhere; from an address that is not a trusted proxy the headers change nothing")
    func trustedProxies() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("monitoring-proxies")
        let file = try htpasswd([("alice", "c0rrect horse")], in: workspace)
        let (service, _) = try service("monitoring-proxies", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            basic_auth_file: \(file)
            trusted_proxies: [127.0.0.1/32, "::1"]
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let address = ServiceHTTP.listening(service)[0]
        // The proxy (127.0.0.1) forwards a flood from 203.0.113.9, which also tries to name another client first.
        let floods = try Self.flood(address, ["--interface", "127.0.0.1", "-H", "X-Forwarded-For: 198.51.100.7, 203.0.113.9"])
        defer { for (process, _) in floods where process.isRunning { process.terminate() } }
        Thread.sleep(forTimeInterval: 1)
        var logins: [Int] = []
        for index in 0..<10 {
            // Alice herself, from two other clients behind the proxy, each header form once.
            let header = index % 2 == 0 ? "X-Forwarded-For: 198.51.100.7" : "Forwarded: for=\"[2001:db8::7]:4711\";proto=https"
            logins.append(try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:c0rrect horse\(index)", options: ["-H", header]).status)
            logins.append(try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:c0rrect horse", options: ["-H", header]).status)
            Thread.sleep(forTimeInterval: 0.25)
        }
        #expect(floods.allSatisfy { $0.0.isRunning }, "the logins ran during the flood")
        #expect(logins == (0..<10).flatMap { _ in [401, 200] }, "alice's wrong and right passwords from other clients: 401 and 200, never 429: \(logins)")
        Self.heldToBudget(floods)

        // From 127.0.0.2, not a trusted proxy, a new X-Forwarded-For each request buys no new budget.
        let spoofed = try (1...30).map { index in
            try ServiceHTTP.fetch("http://\(address)/metrics", user: "alice:guess-\(index)",
                           options: ["--interface", "127.0.0.2", "-H", "X-Forwarded-For: 192.0.2.\(index)"]).status
        }
        #expect(spoofed.filter { $0 == 429 }.count >= 10, "\(spoofed)")
    }

    @Test("passwords over 72 bytes or with a NUL are refused without a bcrypt check: a 72-byte password passes, with more after it 401; a right password then a NUL and more 401; 40 such at once all 401, none 429")
    func passwordLimits() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("monitoring-passwords")
        let long = String(String(repeating: "0123456789", count: 8).prefix(72))
        let file = try htpasswd([("bob", long), ("carol", "pw")], in: workspace)
        let (service, _) = try service("monitoring-passwords", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            basic_auth_file: \(file)
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let url = "http://\(ServiceHTTP.listening(service)[0])/metrics"
        func status(_ user: String, _ password: String) throws -> Int {
            try ServiceHTTP.fetch(url, options: ["-H", "Authorization: \(Self.basic(user, password))"]).status
        }
        #expect(try status("bob", long + "x") == 401, "bcrypt would read the first 72 bytes only")
        #expect(try status("bob", long + " and more characters") == 401)
        #expect(try status("carol", "pw\0junk") == 401, "bcrypt would stop at the NUL")
        #expect(try status("carol", "pw\0") == 401)
        let codes = try Self.parallel(40) { ["-H", "Authorization: \(Self.basic("bob", long + "\($0)"))", url] }
        #expect(codes.count == 40 && codes.allSatisfy { $0 == "401" }, "no check, so no budget spent: \(codes)")
        #expect(try status("bob", long) == 200, "the 72-byte password itself passes")
        #expect(try status("carol", "pw") == 200)
    }

    @Test("every answer has X-Content-Type-Options: nosniff (401, 404, 429, /metrics, the health checks, the API) and every /api/ answer Cache-Control: no-store; scheme names in any case; an encoded target name (my%20target) is found; with auth and no allowed_hosts, any Host passes")
    func headersSchemesAndNames() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let workspace = try lab.workspace("monitoring-headers")
        let file = try htpasswd([("alice", "c0rrect horse")], in: workspace)
        let tokenFile = workspace.appendingPathComponent("token").path
        try "t0ken\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let (service, _) = try service("monitoring-headers", targets: [("my target", good.port), ("good", good.port)], http: """
            listen: "127.0.0.1:0"
            bearer_token_file: \(tokenFile)
            basic_auth_file: \(file)
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let base = "http://\(ServiceHTTP.listening(service)[0])"
        // The log's target=my target reads as "my" through storedScans, which splits at spaces.
        service.wait("both targets scanned") { Set(service.storedScans.map(\.target)) == ["my", "good"] }
        let token = ["-H", "Authorization: Bearer t0ken"]

        for scheme in ["bearer t0ken", "BEARER t0ken", "Bearer   t0ken", "basic \(Self.basic("alice", "c0rrect horse").dropFirst(6))",
                       "BASIC \(Self.basic("alice", "c0rrect horse").dropFirst(6))"] {
            #expect(try ServiceHTTP.fetch("\(base)/api/v1/status", options: ["-H", "Authorization: \(scheme)"]).status == 200, "\(scheme)")
        }
        for scheme in ["bearer wrong", "Token t0ken", "bearer", "Bearer"] {
            #expect(try ServiceHTTP.fetch("\(base)/api/v1/status", options: ["-H", "Authorization: \(scheme)"]).status == 401, "\(scheme)")
        }

        let answers: [(String, [String], String)] = [
            ("/metrics", [], "401|nosniff|"), ("/metrics", token, "200|nosniff|"), ("/healthz", [], "200|nosniff|"),
            ("/readyz", [], "200|nosniff|"), ("/nothing", token, "404|nosniff|"), ("/status.js", token, "200|nosniff|no-store"),
            ("/", token, "200|nosniff|no-store"), ("/", [], "401|nosniff|"), ("/targets/nothing-here", [], "401|nosniff|"),
            ("/targets/nothing-here", token, "200|nosniff|no-store"), ("/ui.js", [], "401|nosniff|"), ("/ui.css", token, "200|nosniff|no-store"),
            ("/target.js", token, "200|nosniff|no-store"), ("/api/v1/targets/nothing-here", [], "401|nosniff|no-store"),
            ("/api/v1/summary", [], "401|nosniff|no-store"), ("/api/v1/status", [], "401|nosniff|no-store"),
            ("/api/v1/status", token, "200|nosniff|no-store"), ("/api/v1/openapi.json", token, "200|nosniff|no-store"),
            ("/api/v1/alerts", token, "200|nosniff|no-store"), ("/api/v1/alerts?limit=0", token, "400|nosniff|no-store"),
            ("/api/v1/targets/nothing-here/history", token, "404|nosniff|no-store"), ("/api/v1/nothing", token, "404|nosniff|no-store"),
            // Auth on and no allowed_hosts: the Host rule is off, any name passes with the token.
            ("/api/v1/status", token + ["-H", "Host: rebind.attacker.test"], "200|nosniff|no-store"),
        ]
        for (path, options, expected) in answers {
            #expect(try Self.stamped(base + path, options) == expected, "\(path) \(options)")
        }
        let codes = try Self.parallel(30, writeOut: "%{http_code}|%header{x-content-type-options}\n") {
            ["-u", "alice:guess\($0)", "\(base)/api/v1/status"]
        }
        #expect(codes.contains("429|nosniff") && codes.allSatisfy { $0 == "429|nosniff" || $0 == "401|nosniff" }, "\(codes)")

        for name in ["my%20target", "%6Dy%20target", "my%20%74arget"] {
            let history = try ServiceHTTP.fetch("\(base)/api/v1/targets/\(name)/history", options: token)
            let entries = (try? JSONSerialization.jsonObject(with: Data(history.body.utf8))) as? [[String: Any]] ?? []
            #expect(history.status == 200 && !entries.isEmpty && entries.allSatisfy { $0["target"] as? String == "my target" },
                    "\(name): \(history.status) \(history.body.prefix(300))")
        }
        #expect(try ServiceHTTP.fetch("\(base)/api/v1/targets/my%zztarget/history", options: token).status == 400, "not percent-encoding")
    }

}
