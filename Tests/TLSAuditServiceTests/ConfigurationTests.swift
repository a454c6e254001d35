import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditService
import TLSAuditMonitoring
import TLSAuditServiceLab

@Suite("configuration")
struct ConfigurationTests {
    init() { TestBackends.register() }

    static let packageRoot = ServiceLab.packageRoot

    func parse(_ yaml: String) throws -> ServiceConfiguration {
        try ServiceConfiguration.parse(yaml: yaml, file: "test.yaml", baseDirectory: "/tmp")
    }

    func errors(_ yaml: String) -> [ConfigurationError] {
        do {
            _ = try parse(yaml)
            Issue.record("expected errors")
            return []
        } catch let error as ConfigurationErrors {
            return error.errors
        } catch {
            Issue.record("unexpected error \(error)")
            return []
        }
    }

    @Test("the sample config/tlsaudit.yaml is valid, through the binary")
    func sample() throws {
        let output = try Binary.run(["check-config", Self.packageRoot.appendingPathComponent("config/tlsaudit.yaml").path])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains("OK: 10 target(s) in 3 group(s)"))
    }

    @Test("defaults, groups and targets merge; tags accumulate")
    func inheritance() throws {
        let configuration = try parse("""
            database: /var/lib/x.sqlite
            defaults: {interval: 10m, timeout: 5s, tags: [all]}
            groups:
              - name: api
                interval: 1m
                policy: ats-runtime
                tags: [api]
                targets:
                  - a.example
                  - {host: b.example, port: 8443, interval: 30s, tags: [b]}
            targets:
              - "[2001:db8::1]:444"
              - {host: c.example, addresses: [10.0.0.1, "2001:db8::2"], name: c}
            """)
        #expect(configuration.targets.map(\.key) == ["a.example:443", "b.example:8443", "[2001:db8::1]:444", "c"])
        let a = configuration.targets[0]
        #expect(a.interval == 60 && a.timeout == 5 && a.policy == .atsRuntime && a.tags == ["all", "api"] && a.group == "api")
        let b = configuration.targets[1]
        #expect(b.interval == 30 && b.port == 8443 && b.tags == ["all", "api", "b"])
        let v6 = configuration.targets[2]
        #expect(v6.host == "2001:db8::1" && v6.port == 444 && v6.sni == nil && v6.interval == 600 && v6.policy == .atsRuntime)
        #expect(configuration.targets[3].addresses == .list(["10.0.0.1", "2001:db8::2"]))
        #expect(configuration.database == "/var/lib/x.sqlite")
    }

    @Test("every error is reported with its line; unknown keys suggest the right one")
    func errorsWithLines() {
        let problems = errors("""
            concurency: 4
            defaults:
              timeout: forever
            targets:
              - host: ok.example
                intervall: 5m
              - {port: 5}
              - ok.example
            """)
        #expect(problems.map(\.line) == [1, 3, 6, 7, 8])
        #expect(problems[0].message.contains("did you mean 'concurrency'"))
        #expect(problems[1].message.contains("expected a duration"))
        #expect(problems[2].message.contains("unknown key 'intervall'"))
        #expect(problems[3].message.contains("needs a 'host'"))
        #expect(problems[4].message.contains("already defined at line 5"))
        #expect(problems.allSatisfy { $0.description.hasPrefix("test.yaml:") })
    }

    @Test("fleet keys: node, fleet, vantage and the database postgres: block, each mistake with its line")
    func fleetKeys() throws {
        let good = try parse("""
            database:
              postgres: {host: db.example, port: 6432, database: audit, user: scanner, sslmode: verify-full, pool_size: 2}
            node: {name: scanner-1, vantage: eu-west}
            fleet: {lease: 30s, poll: 1s}
            targets:
              - {host: a.example, vantage: all}
              - {host: b.example, vantage: [us-east, eu-west, us-east]}
              - {host: c.example, vantage: eu-west}
              - d.example
            """)
        #expect(good.database == "postgres://scanner@db.example:6432/audit?sslmode=verify-full&pool_size=2")
        #expect(good.node == NodeIdentity(name: "scanner-1", vantage: "eu-west"))
        #expect(good.fleet.lease == 30 && good.fleet.poll == 1)
        #expect(good.targets.map(\.vantages) == [.all, .list(["eu-west", "us-east"]), .list(["eu-west"]), .any])

        let problems = errors("""
            database:
              postgres: {port: 5432, database: audit}
            node: {name: "has space", vantage: all}
            fleet: {lease: 5s, poll: 2s}
            targets:
              - {host: a.example, vantage: []}
              - {host: b.example, vantage: [any]}
              - {host: c.example, vantage: "eu/west"}
            """)
        #expect(problems.map(\.line) == [2, 3, 3, 4, 6, 7, 8], "\(problems)")
        #expect(problems[0].message.contains("needs a 'host'"))
        #expect(problems[1].message.contains("node name 'has space'") && problems[1].message.contains("are reserved"))
        #expect(problems[2].message.contains("node vantage 'all'"))
        #expect(problems[3].message.contains("at least three polls"))
        #expect(problems[4].message.contains("an empty list"))
        #expect(problems[5].message.contains("vantage 'any'") && problems[6].message.contains("vantage 'eu/west'"))
    }

    @Test("database: a path is SQLite's, a postgres:// URL PostgreSQL's (a fleet), a URL no backend takes is refused with its line, not taken for a file name")
    func databaseBackends() throws {
        #expect(try !parse("database: /var/lib/tlsaudit/x.sqlite\ntargets: [a.example]").location().offersFleet)
        #expect(try parse("database: postgres://scanner@db.example/audit\ntargets: [a.example]").location().offersFleet)
        #expect(try parse("database: postgres://scanner@db.example/audit").targets.isEmpty, "a fleet node may leave its targets to fleet apply")
        let problems = errors("""
            targets: [a.example]
            database: mysql://db.example/audit
            """)
        #expect(problems.map(\.line) == [2], "\(problems)")
        #expect(problems.first?.message.contains("no store backend takes 'mysql://db.example/audit'") == true, "\(problems)")
        #expect(problems.first?.message.contains("PostgreSQL, SQLite") == true, "\(problems)")
        #expect(errors("database: x.sqlite").first?.message.contains("no targets") == true, "a SQLite node needs targets")
        // A path is a path, whatever it holds; a scheme must begin the value.
        #expect(try parse("database: /var/lib/odd://name.sqlite\ntargets: [a.example]").database == "/var/lib/odd://name.sqlite")
        #expect(errors("database: file:///var/lib/x.sqlite\ntargets: [a.example]").first?.message.contains("no store backend takes") == true)
    }

    @Test("http: one address or a list (IPv4, [IPv6], :port), a token file, connection and idle limits; each mistake with its line")
    func httpKeys() throws {
        let good = try parse("""
            http:
              listen: ["127.0.0.1:9219", "[::1]:9219", ":9220"]
              max_connections: 20
              idle_timeout: 30s
            targets: [a.example]
            """)
        #expect(good.http.listen.map(\.description) == ["127.0.0.1:9219", "[::1]:9219", "0.0.0.0:9220"])
        #expect(good.http.maxConnections == 20 && good.http.idleTimeout == 30)
        #expect(try parse("targets: [a.example]").http.enabled == false, "off by default")
        #expect(try parse("http: {listen: \"localhost:9219\"}\ntargets: [a.example]").http.listen.map(\.description) == ["localhost:9219"])

        let problems = errors("""
            http:
              listen: ["127.0.0.1", "[::1]:99999", "127.0.0.1:9219", "127.0.0.1:9219"]
              bearer_token_file: /nonexistent/token
              max_connections: 0
              idle_timeout: 2h
              tls: yes
            targets: [a.example]
            """)
        #expect(problems.map(\.line) == [2, 2, 2, 3, 4, 5, 6], "\(problems)")
        #expect(problems[0].message.contains("'127.0.0.1' is not HOST:PORT"))
        #expect(problems[1].message.contains("'[::1]:99999'"))
        #expect(problems[2].message.contains("given twice"))
        #expect(problems[3].message.contains("cannot be read"))
        #expect(problems[6].message.contains("tls"))
        #expect(errors("http: {max_connections: 5}\ntargets: [a.example]").first?.message.contains("'listen' is required") == true)
        // A build without the ListenerTLS trait refuses the listener's TLS, saying how to build with it.
        let noTLS = """
            http: {listen: ":9219", tls: {certificate: /nonexistent.pem, key: /nonexistent-key.pem}}
            targets: [a.example]
            """
        do {
            _ = try ServiceConfiguration.parse(yaml: noTLS, file: "test.yaml", baseDirectory: "/tmp", listenerTLS: false)
            Issue.record("http: tls: accepted by a build without ListenerTLS")
        } catch {
            #expect(error.errors.count == 1 && error.errors[0].line == 1
                    && error.errors[0].message.contains("`swift build -c release --traits ListenerTLS`"), "\(error)")
        }
        #expect(errors(noTLS).count == (ListenerTLS.available ? 2 : 1), "this build: both files unreadable, or the refusal")

        // basic_auth_file: an htpasswd file of bcrypt hashes; MD5 ($apr1$) and broken lines refused with their line.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-htpasswd-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bcrypt = "$2y$05$" + String(repeating: "a", count: 53)
        let goodFile = directory.appendingPathComponent("good").path
        try "# operators\nalice:\(bcrypt)\n\nbob:\(bcrypt.replacingOccurrences(of: "$2y$", with: "$2b$"))\n".write(toFile: goodFile, atomically: true, encoding: .utf8)
        #expect(try parse("http: {listen: \":9219\", basic_auth_file: \(goodFile)}\ntargets: [a.example]").http.basicAuthFile == goodFile)
        let md5File = directory.appendingPathComponent("md5").path
        try "alice:\(bcrypt)\ncarol:$apr1$abcdefgh$0123456789012345678901\n".write(toFile: md5File, atomically: true, encoding: .utf8)
        let md5 = errors("http: {listen: \":9219\", basic_auth_file: \(md5File)}\ntargets: [a.example]")
        #expect(md5.count == 1 && md5[0].message.contains("line 2: user carol has no bcrypt hash"), "\(md5)")
        let twice = directory.appendingPathComponent("twice").path
        try "alice:\(bcrypt)\nalice:\(bcrypt)\n".write(toFile: twice, atomically: true, encoding: .utf8)
        #expect(errors("http: {listen: \":9219\", basic_auth_file: \(twice)}\ntargets: [a.example]").first?.message.contains("line 2: user alice is listed twice") == true)
        #expect(errors("http: {listen: \":9219\", basic_auth_file: /nonexistent/htpasswd}\ntargets: [a.example]").first?.message
            .contains("basic_auth_file /nonexistent/htpasswd cannot be read") == true)
    }

    @Test("http probe: allowed_targets patterns, timeout and concurrency within their ranges, probe: off; each group is a module resolving any HOST[:PORT] as a target listed in it (a STARTTLS group's port and policy, a group's pins and trust); each mistake with its line")
    func probeModules() throws {
        let configuration = try parse("""
            http:
              listen: "127.0.0.1:9219"
              probe: {allowed_targets: ["*.example.com", api.example.net, "192.0.2.10", "::1"], timeout: 4s, concurrency: 2}
            defaults: {timeout: 3s}
            groups:
              - name: smtp
                starttls: smtp
                targets: []
              - name: pinned
                policy: apple-trust
                trust: system
                pins: {mode: public-key, pins: ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "sha256/BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="]}
                targets: [listed.example]
            targets: [a.example]
            """)
        let probe = configuration.http.probe
        #expect(probe.enabled && probe.timeout == 4 && probe.concurrency == 2)
        #expect(probe.allows(host: "mx.example.com") && probe.allows(host: "A.B.Example.COM") && !probe.allows(host: "example.com.evil"))
        #expect(!probe.allows(host: "example.com") && probe.allows(host: "api.example.net") && !probe.allows(host: "www.api.example.net"))
        #expect(probe.allows(host: "192.0.2.10") && probe.allows(host: "0:0:0:0:0:0:0:1") && !probe.allows(host: "192.0.2.11"))
        #expect(HTTPSettings.ProbeSettings().allows(host: "anything.example"), "any host by default")
        #expect(configuration.probeModules.map(\.name) == ["smtp", "pinned"])
        let mail = try configuration.probeModules[0].target("mx.example.com")
        #expect(mail.key == "mx.example.com:25" && mail.port == 25 && mail.starttls?.protocol == .smtp && mail.policy == .appleTrust, "\(mail)")
        #expect(mail.timeout == 3 && mail.group == "smtp")
        #expect(try configuration.probeModules[0].target("mx.example.com:587").port == 587)
        let pinned = try configuration.probeModules[1].target("[2001:db8::1]:8443")
        #expect(pinned.key == "[2001:db8::1]:8443" && pinned.host == "2001:db8::1" && pinned.sni == nil && pinned.pins?.pins.count == 2)
        #expect(pinned.trust == .system && pinned.policy == .appleTrust)
        let plain = try configuration.probeDefaults.target("www.example.org")
        #expect(plain.key == "www.example.org:443" && plain.starttls == nil && plain.policy == .atsRuntime && plain.trust == .apple)
        #expect(throws: ScanTarget.ParseError.self) { try configuration.probeDefaults.target("www.example.org:0") }
        #expect(throws: ScanTarget.ParseError.self) { try configuration.probeDefaults.target("a b") }
        #expect(throws: ScanTarget.ParseError.self) { try configuration.probeDefaults.target("*.example.org") }
        #expect(try parse("http: {listen: \":9219\", probe: off}\ntargets: [a.example]").http.probe.enabled == false)

        let problems = errors("""
            http:
              listen: ":9219"
              probe:
                allowed_targets: ["https://a.example", "a.example:443", "*"]
                timeout: 0s
                concurrency: 1000
                modules: [x]
            targets: [a.example]
            """)
        #expect(problems.map(\.line) == [4, 4, 5, 6, 7], "\(problems)")
        #expect(problems[0].message.contains("'https://a.example' is not a host name"))
        #expect(problems[3].message.contains("from 1 to 256") && problems[2].message.contains("at least 500ms"), "\(problems)")
    }

    @Test("starttls: named per target or group (its default port, apple-trust unless a policy is set), inferred on well-known ports only, none turns it off; a bad name is refused with its line")
    func starttls() throws {
        let configuration = try parse("""
            defaults: {port: 443, policy: ats-runtime}
            groups:
              - name: mail
                starttls: smtp
                targets: [mx1.example, "mx2.example:587", {host: mx3.example, policy: ats}]
            targets:
              - imap.example:143
              - web.example:8143
              - {host: plain.example, port: 25, starttls: none}
              - {host: db.example, starttls: postgres}
            """)
        let byHost = Dictionary(uniqueKeysWithValues: configuration.targets.map { ($0.host, $0) })
        #expect(byHost["mx1.example"]?.port == 25 && byHost["mx1.example"]?.starttls == STARTTLSUse(.smtp, inferred: false))
        #expect(byHost["mx1.example"]?.policy == .appleTrust, "STARTTLS targets default to the trust policy (the defaults' port and policy are for HTTPS)")
        #expect(byHost["mx2.example"]?.port == 587)
        #expect(byHost["mx3.example"]?.policy == .ats, "a policy set on the target wins")
        #expect(byHost["imap.example"]?.starttls == STARTTLSUse(.imap, inferred: true))
        #expect(byHost["imap.example"]?.scanTarget.starttls == STARTTLSUse(.imap, inferred: true))
        #expect(byHost["web.example"]?.starttls == nil && byHost["web.example"]?.policy == .atsRuntime, "other ports are not guessed")
        #expect(byHost["plain.example"]?.starttls == nil)
        #expect(byHost["db.example"]?.port == 5432)
        let checked = try parse("defaults: {checks: [inventory]}\ntargets: [a.example, {host: b.example, checks: []}]\n")
        #expect(checked.targets[0].checks == [.inventory] && checked.targets[0].scanTarget.checks == [.inventory])
        #expect(checked.targets[1].checks.isEmpty, "a target's own empty list turns the defaults' checks off")
        let badCheck = errors("targets:\n  - {host: a.example, checks: [inventory, heartbleed]}\n")
        #expect(badCheck.count == 1 && badCheck[0].line == 2 && badCheck[0].message.contains("'heartbleed' is not a check"), "\(badCheck)")
        let bad = errors("targets:\n  - {host: a.example, starttls: smtps}\n")
        #expect(bad.count == 1 && bad[0].line == 2 && bad[0].message.contains("starttls 'smtps'"), "\(bad)")
    }

    @Test("an alertmanager sink: its base URL; no secret; reports cannot be sent to it")
    func alertmanagerSink() throws {
        let good = try parse("""
            alerts:
              sinks:
                - {name: am, type: alertmanager, url: "http://127.0.0.1:9093", timeout: 3s}
            targets: [a.example]
            """)
        #expect(good.alerts.sinks.map(\.name) == ["am"])
        let problems = errors("""
            alerts:
              sinks:
                - {name: am, type: alertmanager, url: "http://127.0.0.1:9093", secret: x}
                - {name: am2, type: alertmanager}
            reports:
              - {name: weekly, schedule: weekly, formats: [json], directory: /tmp, sinks: [am]}
            targets: [a.example]
            """)
        #expect(problems.map(\.line) == [3, 4, 6], "\(problems)")
        #expect(problems[0].message.contains("no 'secret'") && problems[1].message.contains("needs a 'url'"))
        #expect(problems[2].message.contains("takes alerts, not reports"))
    }

    @Test("sink kinds are the registered ones: an unknown or missing type names them all; each kind's keys are allowed, others are not")
    func sinkKinds() throws {
        let problems = errors("""
            alerts:
              sinks:
                - {type: pager}
                - {name: nameless}
                - {type: webhook, url: "http://127.0.0.1:9/hook", argv: [x], urll: y}
                - {type: command, argv: [/bin/true], timeout: 2s}
            targets: [a.example]
            """)
        #expect(problems.map(\.message) == [
            "sink type 'pager' is not one of log, webhook, command, alertmanager",
            "a sink needs a 'type': log, webhook, command or alertmanager",
            "unknown key 'urll' in a sink (did you mean 'url'?); expected one of: name, type, timeout, min_severity, url, secret, ca_file, argv",
        ], "\(problems)")
        #expect(problems.map(\.line) == [3, 4, 5])
    }

    @Test("one range per setting: the configuration and every command that takes the option refuse the same values")
    func settingRanges() throws {
        let problems = errors("""
            concurrency: 5000
            defaults:
              timeout: 6m
              revocation: sometimes
            targets:
              - host: ok.example
                port: 70000
                interval: 50ms
            """)
        #expect(problems.map(\.line) == [1, 3, 4, 7, 8], "\(problems)")
        #expect(problems[1].message.contains(SettingBounds.timeout.described), "\(problems[1])")
        #expect(problems[2].message.contains("off, soft, hard"))
        let accepted = try parse("defaults: {timeout: 5m}\ntargets: [ok.example]")
        #expect(accepted.targets[0].timeout == 300)
        for command in [["scan", "ok.example"], ["ats", "ok.example"], ["pin", "ok.example"], ["verify", "--chain", "/dev/null"]] {
            for value in ["0", "301"] {
                let output = try Binary.run(command + ["--timeout", value])
                #expect(output.status == 64, "\(command) --timeout \(value): \(output.stderr)")
                #expect(output.stderr.contains("--timeout must be \(SettingBounds.timeout.described)"), "\(command): \(output.stderr)")
            }
        }
        // The report's period and expiry window: the same range for a scheduled report and `report`.
        let reportProblems = errors("""
            targets: [ok.example]
            reports:
              - name: weekly
                schedule: daily
                directory: /tmp
                since: 30s
            """)
        #expect(reportProblems.map(\.line) == [6], "\(reportProblems)")
        #expect(reportProblems.first?.message.contains("at least \(Int(SettingBounds.reportPeriod.range.lowerBound))s") == true,
                "\(reportProblems)")
        for (option, value, bound) in [("--since", "30s", SettingBounds.reportPeriod.described),
                                       ("--expiring-within", "soon", SettingBounds.expiringWithin.described),
                                       ("--goal", "101", SettingBounds.goal.described)] {
            let output = try Binary.run(["report", "--database", "/nonexistent.sqlite", option, value])
            #expect(output.status == 64, "report \(option) \(value): \(output.stderr)")
            #expect(output.stderr.contains("\(option) must be \(bound)"), "\(option): \(output.stderr)")
        }
        let grace = try Binary.run(["serve", "--config", "/nonexistent.yaml", "--shutdown-grace", "3601"])
        #expect(grace.status == 64 && grace.stderr.contains("--shutdown-grace must be \(SettingBounds.shutdownGrace.described)"),
                "\(grace.stderr)")
    }

    @Test("a target's trust ca_file that cannot be read or holds no certificate stops the configuration, with its line")
    func trustCAFile() throws {
        let directory = try ServiceLab.shared.workspace("trust-ca-file")
        try Data("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".utf8)
            .write(to: directory.appendingPathComponent("junk.pem"))
        try Data(ServiceLab.shared.root.pem.utf8).write(to: directory.appendingPathComponent("root.pem"))
        func problems(_ file: String) throws -> [ConfigurationError] {
            do {
                _ = try ServiceConfiguration.parse(yaml: "targets:\n  - host: a.example\n    trust: {ca_file: \(file)}\n",
                                                   file: "test.yaml", baseDirectory: directory.path)
                return []
            } catch {
                return error.errors
            }
        }
        #expect(try problems("root.pem").isEmpty)
        let junk = try problems("junk.pem")
        #expect(junk.map(\.line) == [3])
        #expect(junk.map(\.message) == ["ca_file \(directory.path)/junk.pem holds no certificate (PEM or DER)"])
        #expect(try problems("missing.pem").map(\.message) == ["ca_file \(directory.path)/missing.pem cannot be read"])
    }

    @Test("ct: {follow: true, watch:}: domains (A-labels, lower case, subdomains unless told), allowed issuers by name or key; a bad domain, issuer or key is an error with its line; pins: {domain:, include_subdomains:}")
    func ctWatchAndPinnedDomain() throws {
        let configuration = try parse("""
            ct: {follow: true, poll: 30s, watch: [Bücher.Example, {domain: "*.shop.example", include_subdomains: false, issuers: ["Let's Encrypt", "sha256/\(String(repeating: "A", count: 43))="]}]}
            targets:
              - {host: api.example.com, pins: {domain: Example.com, include_subdomains: true, leaf_identities: ["\(String(repeating: "B", count: 43))="]}}
            """)
        let watch = try #require(configuration.ctFollow?.watch)
        #expect(watch.map(\.domain) == ["xn--bcher-kva.example", "shop.example"] && watch.map(\.includeSubdomains) == [true, false])
        #expect(watch[1].issuers == [.name("Let's Encrypt"), .key(String(repeating: "A", count: 43) + "=")])
        #expect(configuration.ctFollow?.poll == 30)
        #expect(configuration.targets.first?.pins?.pinnedDomain == PinnedDomainScope(domain: "example.com", includesSubdomains: true))
        let problems = errors("""
            ct: {follow: true, watch: [com, {issuers: [x]}, {domain: a.example, issuers: []}, {domain: b.example, issuers: ["sha256/short"]}, {domain: c.example, colour: red}]}
            targets:
              - {host: a.example, pins: {include_subdomains: true, leaf_identities: ["\(String(repeating: "B", count: 43))="]}}
            """)
        let messages = problems.map(\.message).joined(separator: "\n")
        #expect(messages.contains("'com' is not a domain name with at least two labels"))
        #expect(messages.contains("needs 'domain'"))
        #expect(messages.contains("issuers must be a non-empty list"))
        #expect(messages.contains("44 characters of base64"))
        #expect(messages.contains("colour"))
        #expect(messages.contains("include_subdomains goes with domain"))
        #expect(problems.allSatisfy { $0.line != nil })
        #expect(errors("ct: {watch: [a.example]}\ntargets: [a.example]").first?.message.contains("settings of 'follow: true'") == true)
    }

    @Test("trust: named stores (apple, system, {store:}, {ca_file:}) per target, group or defaults; unset, the policy's; ct: {log_list:} read at check time")
    func trustStoresAndLogList() throws {
        let directory = try ServiceLab.shared.workspace("trust-stores")
        try Data(ServiceLab.shared.root.pem.utf8).write(to: directory.appendingPathComponent("bundle.pem"))
        let list = try LabCTLog.listFile([(try LabCTLog("lab", operator: "Lab"), "usable", Date(timeIntervalSince1970: 1_600_000_000))])
        try list.write(to: directory.appendingPathComponent("logs.json"))
        try Data("{\"operators\": 3}".utf8).write(to: directory.appendingPathComponent("bad.json"))
        func parse(_ yaml: String) throws(ConfigurationErrors) -> ServiceConfiguration {
            try ServiceConfiguration.parse(yaml: yaml, file: "test.yaml", baseDirectory: directory.path)
        }
        let configuration = try parse("""
            ct: {log_list: logs.json}
            groups:
              - name: web
                trust: system
                targets: [g.example]
            targets:
              - a.example
              - {host: b.example, policy: mozilla-intermediate}
              - {host: c.example, trust: system}
              - {host: d.example, policy: mozilla-modern, trust: {store: apple}}
              - {host: e.example, trust: {store: bundle.pem}}
              - {host: f.example, trust: {ca_file: bundle.pem}}
              - {host: h.example, trust: apple}
            """)
        let trust = Dictionary(uniqueKeysWithValues: configuration.targets.map { ($0.host, $0.trust) })
        #expect(trust["a.example"] == .apple, "the ATS policies judge against Apple's store by default")
        #expect(trust["b.example"] == .system, "the Mozilla policies against Debian's")
        #expect(trust["c.example"] == .system)
        #expect(trust["d.example"] == .apple)
        #expect(trust["e.example"] == .file(directory.appendingPathComponent("bundle.pem").path))
        #expect(trust["f.example"] == .caFile(directory.appendingPathComponent("bundle.pem").path))
        #expect(trust["g.example"] == .system)
        #expect(trust["h.example"] == .apple)
        #expect(configuration.trustInputs.ctLogList.source == directory.appendingPathComponent("logs.json").path)
        func problems(_ yaml: String) -> [ConfigurationError] {
            do { _ = try parse(yaml); return [] } catch { return error.errors }
        }
        let bad = problems("ct: {log_list: bad.json}\ntargets: [a.example]\n")
        #expect(bad.map(\.line) == [1])
        #expect(bad.first?.message.contains("not a CT log list in the v3 JSON schema") == true, "\(bad)")
        #expect(problems("ct: {log_list: missing.json}\ntargets: [a.example]\n").first?.message.contains("cannot") == true)
        #expect(problems("targets:\n  - {host: a.example, trust: mozilla}\n").first?.message.contains("'apple'") == true)
        #expect(problems("targets:\n  - {host: a.example, trust: {store: apple, ca_file: bundle.pem}}\n").first?.message
                    .contains("not both") == true)
    }

    @Test("app: an app's effective ATS rules per target (as app import writes them): the probe that stands for them, the app tag added; mistakes named with their line")
    func appRules() throws {
        let configuration = try parse("""
            groups:
              - name: app shop
                tags: [mobile]
                targets:
                  - host: legacy.example
                    app: {bundle: com.example.shop, entry: legacy.example, relies_on: [NSExceptionMinimumTLSVersion, NSExceptionRequiresForwardSecrecy],
                          minimum_tls_version: TLSv1.0, requires_forward_secrecy: false}
                  - {host: open.example, app: {bundle: com.example.shop, arbitrary_loads: true, relies_on: [NSAllowsArbitraryLoads]}}
                  - {host: strict.example, app: {bundle: com.example.shop, entry: strict.example, minimum_tls_version: TLSv1.3}}
                  - {host: web.example, app: {bundle: com.example.shop, entry: web.example, allows_insecure_http_loads: true}}
                  - {host: plain.example, app: {bundle: com.example.shop}}
            """)
        let targets = Dictionary(uniqueKeysWithValues: configuration.targets.map { ($0.host, $0) })
        let legacy = try #require(targets["legacy.example"]?.app)
        #expect(legacy.configuration == "TLSv1.0+no-forward-secrecy" && legacy.minimumTLSVersion == .tls1_0 && !legacy.requiresForwardSecrecy)
        #expect(legacy.reliesOn == ["NSExceptionMinimumTLSVersion", "NSExceptionRequiresForwardSecrecy"] && legacy.entry == "legacy.example")
        #expect(targets["legacy.example"]?.tags == ["mobile", "app:com.example.shop"], "the app's tag is added to the group's")
        #expect(targets["legacy.example"]?.scanTarget.app == legacy, "the scanner gets the rules")
        let open = try #require(targets["open.example"]?.app)
        #expect(open.configuration == "arbitrary-loads" && open.arbitraryLoads && open.minimumTLSVersion == .tls1_0)
        #expect(targets["strict.example"]?.app?.configuration == "TLSv1.3")
        #expect(targets["web.example"]?.app?.configuration == "insecure-http-loads")
        #expect(targets["plain.example"]?.app?.configuration == "default" && targets["plain.example"]?.app?.reliesOn == [])
        #expect(targets["plain.example"]?.tags == ["mobile", "app:com.example.shop"])

        let mistakes = errors("""
            targets:
              - {host: a.example, app: {entry: a.example}}
              - {host: b.example, app: {bundle: x, minimum_tls_version: "1.2"}}
              - {host: c.example, app: {bundle: x, requires_fs: false}}
              - {host: d.example, policy: mozilla-modern, app: {bundle: x}}
              - {host: e.example, app: com.example.shop}
            """)
        #expect(mistakes.map(\.line) == [2, 3, 4, 5, 6], "\(mistakes)")
        #expect(mistakes[0].message.contains("'bundle'"), "\(mistakes[0])")
        #expect(mistakes[1].message.contains("TLSv1.2"), "\(mistakes[1])")
        #expect(mistakes[2].message.contains("requires_fs"), "\(mistakes[2])")
        #expect(mistakes[3].message.contains("mozilla-modern"), "\(mistakes[3])")
        #expect(mistakes[4].message.contains("mapping"), "\(mistakes[4])")
    }

    @Test("bad YAML names the line")
    func badYAML() {
        let problems = errors("targets:\n  - a.example\n  - [unclosed\n")
        #expect(problems.count == 1)
        #expect(problems.first?.message.contains("not valid YAML") == true)
        #expect(problems.first?.message.contains("line") == true)
    }

    @Test("check-config exits 64 and prints file:line for each error")
    func checkConfigBinary() throws {
        let file = try ServiceLab.shared.workspace("check-config").appendingPathComponent("bad.yaml")
        try "targets:\n  - host: a.example\n    policy: strict\n".write(to: file, atomically: true, encoding: .utf8)
        let output = try Binary.run(["check-config", file.path])
        #expect(output.status == 64)
        #expect(output.stderr.contains("\(file.path):3: policy 'strict' is not one of ats, ats-runtime, apple-trust"))
    }

    @Test("AFNetworking 2.x's validates_certificate_chain is refused by check-config and serve, naming the version that dropped it and what replaced it")
    func validatesCertificateChain() throws {
        let workspace = try ServiceLab.shared.workspace("certificate-chain")
        let file = workspace.appendingPathComponent("old.yaml")
        let pin = "sha256/" + Data(repeating: 7, count: 32).base64EncodedString()
        try """
            database: \(workspace.appendingPathComponent("db.sqlite").path)
            targets:
              - host: a.example
                pins:
                  mode: public-key
                  pins: ["\(pin)", "sha256/\(Data(repeating: 8, count: 32).base64EncodedString())"]
                  validates_certificate_chain: true

            """.write(to: file, atomically: true, encoding: .utf8)
        let check = try Binary.run(["check-config", file.path])
        #expect(check.status == 64)
        let line = check.stderr.split(separator: "\n").first { $0.contains("validates_certificate_chain") }.map(String.init) ?? ""
        #expect(line.hasPrefix("\(file.path):7: "), "\(check.stderr)")
        #expect(line.contains("removed in AFNetworking 2.6.0"), "\(line)")
        #expect(line.contains("any one of its certificates"), "what replaced it: \(line)")
        #expect(!line.contains("unknown key"), "not a generic unknown-key error: \(line)")
        let serve = try Binary.run(["serve", "--config", file.path])
        #expect(serve.status == 64)
        #expect(serve.stderr.contains("removed in AFNetworking 2.6.0"), "\(serve.stderr)")
    }

    @Test("check-config refuses a configuration over 4 MiB or 100,000 targets quickly, with the reason")
    func inputLimits() throws {
        let directory = try ServiceLab.shared.workspace("input-limits")
        // 100,001 short targets fit in 4 MiB: refused for their number.
        let many = directory.appendingPathComponent("many.yaml")
        try ("targets:\n" + (0...InputLimits.targets).map { "  - h\($0).example\n" }.joined()).write(to: many, atomically: true, encoding: .utf8)
        var started = ContinuousClock.now
        let counted = try Binary.run(["check-config", many.path])
        let countedTime = ContinuousClock.now - started
        #expect(counted.status == 64)
        #expect(counted.stderr.contains("100001 targets; tlsaudit takes at most 100000 in one configuration"), "\(counted.stderr.prefix(500))")
        #expect(countedTime < .seconds(30), "took \(countedTime)")
        // Over 4 MiB: refused before parsing (a million targets took 4.3 s and 677 MiB).
        let large = directory.appendingPathComponent("large.yaml")
        try ("targets:\n" + String(repeating: "  - a-rather-long-host-name-for-a-target.example:443\n", count: 90_000))
            .write(to: large, atomically: true, encoding: .utf8)
        started = ContinuousClock.now
        let sized = try Binary.run(["check-config", large.path])
        let sizedTime = ContinuousClock.now - started
        #expect(sized.status == 64)
        #expect(sized.stderr.contains("is larger than 4 MiB, the most tlsaudit reads"), "\(sized.stderr.prefix(500))")
        #expect(sizedTime < .seconds(2), "took \(sizedTime)")
        let missing = try Binary.run(["check-config", directory.appendingPathComponent("absent.yaml").path])
        #expect(missing.stderr.contains("No such file or directory"), "\(missing.stderr)")
    }

    @Test("durations", arguments: [("500ms", 0.5), ("30s", 30.0), ("5m", 300.0), ("2h", 7200.0), ("7d", 604_800.0), ("45", 45.0)])
    func durations(text: String, seconds: Double) throws {
        let configuration = try parse("targets:\n  - {host: a.example, interval: \(text)}\n")
        #expect(configuration.targets[0].interval == seconds)
    }
}

@Suite("systemd unit")
struct SystemdUnitTests {
    init() { TestBackends.register() }

    /// The unit with ExecStart pointing at the built binary (systemd-analyze checks that it exists).
    func unitFile() throws -> URL {
        let source = ServiceLab.packageRoot.appendingPathComponent("systemd/tlsaudit.service")
        let text = try String(contentsOf: source, encoding: .utf8).replacingOccurrences(of: "/usr/local/bin/tlsaudit", with: Binary.path)
        let unit = try ServiceLab.shared.workspace("unit").appendingPathComponent("tlsaudit.service")
        try text.write(to: unit, atomically: true, encoding: .utf8)
        return unit
    }

    /// systemd-analyze ARGS: its status, and its output and errors together.
    func run(_ arguments: [String]) throws -> (Int32, String) {
        let output = try Binary.run(arguments, program: try LabPrerequisite.program(["/usr/bin/systemd-analyze"], package: "systemd"))
        return (output.status, output.stdout + output.stderr)
    }

    @Test("systemd-analyze verify accepts the unit; its security exposure is 2.0 or lower")
    func unit() throws {
        let unit = try unitFile()
        let (verifyStatus, verifyOutput) = try run(["verify", unit.path])
        #expect(verifyStatus == 0, "\(verifyOutput)")
        let (_, security) = try run(["security", "--offline=yes", unit.path])
        let line = try #require(security.split(separator: "\n").first { $0.contains("Overall exposure level") })
        let score = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) })
        #expect(score <= 2.0, "\(line)")
        let text = try String(contentsOf: unit, encoding: .utf8)
        for directive in ["Type=notify", "DynamicUser=yes", "StateDirectory=tlsaudit", "ProtectSystem=strict",
                          "NoNewPrivileges=yes", "PrivateTmp=yes", "RestrictAddressFamilies=", "CapabilityBoundingSet=\n",
                          "SystemCallFilter=@system-service"] {
            #expect(text.contains(directive), "missing \(directive)")
        }
    }
}

@Suite("demo")
struct DemoTests {
    init() { TestBackends.register() }

    @Test("tlsaudit demo runs the real service and prints the status table")
    func demo() throws {
        let database = try ServiceLab.shared.workspace("demo").appendingPathComponent("demo.sqlite").path
        let output = try Binary.run(["demo", "--cycles", "2", "--database", database])
        #expect(output.status == 0, "\(output.stderr)")
        for line in ["good ", "expired ", "weak ", "wrong-name ", "closed-port "] {
            #expect(output.stdout.contains(line))
        }
        #expect(output.stdout.contains("NOT COMPLIANT (trust.expired)"), "the trust reason, not only ats.trust")
        #expect(output.stdout.contains("UNREACHABLE (connection-refused"))
        #expect(output.stdout.contains("5 address(es): 1 compliant, 3 not compliant, 1 unreachable"))
        let history = try Binary.run(["history", "--database", database, "good"])
        #expect(history.status == 0)
        // Two scans of 'good': two rows, or one run of two unchanged scans.
        #expect(history.stdout.split(separator: "\n").count >= 3 || history.stdout.contains("(2 scans)"), "\(history.stdout)")
    }
}
