import Foundation
import Testing
import TLSAuditLab
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// `/probe?target=&module=`: the multi-target exporter pattern of ssl_exporter and
/// blackbox_exporter, against lab servers, read with curl and with a real Prometheus.
extension MonitoringTests {
    /// The value of the first sample line starting with `prefix`.
    static func sample(_ body: String, _ prefix: String) -> Double? {
        body.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// Groups used as modules: `pinned` (pins no lab key matches) and `trust-only` (the trust policy).
    static let probeModules = """
        groups:
          - name: pinned
            pins:
              mode: public-key
              pins: ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "sha256/BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="]
            targets: []
          - name: trust-only
            policy: apple-trust
            targets: []
        """

    @Test("/probe scans the named target now and answers its series under /metrics' names plus blackbox_exporter's probe series, stores nothing; modules are configuration groups; the token is asked for; 400 for a missing or malformed target or an unknown module, 403 outside allowed_targets; promtool check metrics passes")
    func probeEndpoint() throws {
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let (token, tokenFile) = try Self.bearerToken(in: lab.workspace("probe-token"))
        let workspace = try lab.workspace("probe-endpoint")
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("tlsaudit.sqlite").path, targets: [("good", good.port)],
                              interval: "1h", extra: """
            http:
              listen: "127.0.0.1:0"
              bearer_token_file: \(tokenFile)
              probe: {allowed_targets: ["\(ServiceLab.hostname)", "*.probe.tlsaudit.test"]}
            \(Self.probeModules)
            """).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("the http listener") { !ServiceHTTP.listening(service).isEmpty }
        service.wait("the configured target scanned") { !service.storedScans.isEmpty }
        let listener = ServiceHTTP.listening(service)[0]
        func probe(_ query: String) throws -> ServiceHTTP.Fetched { try ServiceHTTP.fetch("http://\(listener)/probe?\(query)", token: token) }
        let host = ServiceLab.hostname

        #expect(try ServiceHTTP.fetch("http://\(listener)/probe?target=\(host):\(good.port)").status == 401, "no token, no probe")
        let scanned = try probe("target=\(host):\(good.port)")
        #expect(scanned.status == 200, "\(scanned)")
        let target = #"target="\#(host):\#(good.port)",address="127.0.0.1""#
        #expect(Self.sample(scanned.body, "probe_success ") == 1, "\(scanned.body.prefix(2000))")
        #expect((Self.sample(scanned.body, "probe_duration_seconds ") ?? 0) > 0)
        #expect(Self.sample(scanned.body, #"ssl_prober{prober="tcp"}"#) == 1)
        #expect(Self.sample(scanned.body, "ssl_probe_success{\(target)}") == 1)
        #expect(Self.sample(scanned.body, "ssl_tls_version_info{\(target),version=\"TLS 1.3\"}") == 1)
        #expect(Self.sample(scanned.body, "probe_tls_version_info{\(target),version=\"TLS 1.3\"}") == 1)
        // The earliest notAfter of what the server sent (the leaf and the intermediate), as blackbox_exporter reads it.
        let earliest = min(lab.good.summary.notAfter, lab.intermediate.summary.notAfter).timeIntervalSince1970
        #expect(Self.sample(scanned.body, "probe_ssl_earliest_cert_expiry{\(target)}") == earliest)
        #expect(Self.sample(scanned.body, "ssl_cert_not_after{\(target),serial_no=\"\(try Self.decimalSerial(of: lab.good.pem))\"")
                == lab.good.summary.notAfter.timeIntervalSince1970)
        #expect(Self.sample(scanned.body, "tlsaudit_compliant{\(target),policy=\"ats-runtime\"}") == 1)
        #expect(Self.sample(scanned.body, "tlsaudit_pin_state{\(target),state=\"none\"}") == 1)
        #expect(!scanned.body.contains("tlsaudit_scans_total"), "only the probe's series, not the service's")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString).txt")
        try scanned.body.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let check = try Binary.run(["-c", "promtool check metrics < \(file.path)"], program: "/bin/sh")
        #expect(check.status == 0, "promtool check metrics: \(check.stdout)\(check.stderr)")

        // An expired chain: the handshake completes (probe_success 1), the policy fails.
        let stale = try probe("target=\(host):\(expired.port)")
        #expect(Self.sample(stale.body, "probe_success ") == 1)
        #expect(Self.sample(stale.body, #"tlsaudit_compliant{target="\#(host):\#(expired.port)",address="127.0.0.1",policy="ats-runtime"}"#) == 0)
        // Modules: a group's settings apply to the probed target.
        let pinned = try probe("target=\(host):\(good.port)&module=pinned")
        #expect(Self.sample(pinned.body, "tlsaudit_pin_state{\(target),state=\"mismatch\"}") == 1, "\(pinned.body.prefix(1500))")
        let trustOnly = try probe("target=\(host):\(expired.port)&module=trust-only")
        #expect(Self.sample(trustOnly.body, #"tlsaudit_compliant{target="\#(host):\#(expired.port)",address="127.0.0.1",policy="apple-trust"}"#) == 0)
        #expect(Self.sample(try probe("target=\(host):\(good.port)&module=trust-only").body,
                            "tlsaudit_compliant{\(target),policy=\"apple-trust\"}") == 1)
        // Nothing stored: the store has the configured target's scans only.
        #expect(Set(service.storedScans.map(\.target)) == ["good"], "\(service.storedScans.map(\.target))")

        let unknown = try probe("target=\(host):\(good.port)&module=nope")
        #expect(unknown.status == 400 && unknown.body.contains("pinned, trust-only"), "\(unknown)")
        let missing = try probe("module=pinned")
        #expect(missing.status == 400 && missing.body.contains("target parameter is required"), "\(missing)")
        let malformed = try probe("target=\(host):99999")
        #expect(malformed.status == 400 && malformed.body.contains("is not a port"), "\(malformed)")
        let outside = try probe("target=example.org:443")
        #expect(outside.status == 403 && outside.body.contains("allowed_targets"), "\(outside)")
        // A host below an allowed *.DOMAIN passes the rule (and then finds port 1 closed: probe_success 0).
        let wildcard = try probe("target=a.probe.tlsaudit.test:1")
        #expect(wildcard.status == 200 && Self.sample(wildcard.body, "probe_success ") == 0, "\(wildcard)")
        #expect(wildcard.body.contains(#"ssl_probe_success{target="a.probe.tlsaudit.test:1",address="127.0.0.1"} 0"#), "\(wildcard.body.prefix(1200))")

        let metrics = try ServiceHTTP.fetch("http://\(listener)/metrics", token: token).body
        #expect(Self.sample(metrics, #"tlsaudit_probe_requests_total{outcome="scanned"}"#) ?? 0 >= 6, "\(metrics.prefix(400))")
        #expect(Self.sample(metrics, #"tlsaudit_probe_requests_total{outcome="refused"}"#) ?? 0 >= 4)
        #expect(metrics.contains(#"tlsaudit_build_info{version=""#) && metrics.contains(#",openssl="3."#), "build info")
        #expect(!metrics.contains("\(host):\(good.port)"), "/metrics keeps the configured targets' series only")
    }

    @Test("/probe's bounds: Prometheus' scrape timeout shortens the probe of a tarpit (answered probe_success 0 within it); beyond concurrency a probe waits for a slot until its deadline, then gets 503; probe: off answers 404; the listener's stop logs no error")
    func probeBounds() throws {
        let tarpit = try LabHostileServer(.tarpit)
        defer { tarpit.stop() }
        let (bounded, _) = try service("probe-bounds", targets: [("closed", 1)], http: """
            listen: "127.0.0.1:0"
            probe: {timeout: 20s, concurrency: 1}
            """)
        defer { bounded.signal(SIGTERM); _ = bounded.waitForExit(timeout: 15) }
        let listener = ServiceHTTP.listening(bounded)[0]
        let url = "http://\(listener)/probe?target=\(ServiceLab.hostname):\(tarpit.port)"
        let started = Date()
        let stalled = try ServiceHTTP.fetch(url, options: ["-H", "X-Prometheus-Scrape-Timeout-Seconds: 2"])
        let took = Date().timeIntervalSince(started)
        #expect(stalled.status == 200 && Self.sample(stalled.body, "probe_success ") == 0, "\(stalled)")
        #expect(took < 2.0, "answered within Prometheus' scrape timeout: \(took) s")

        // One slot: a probe holds it (its scan bounded by the module's 2 s timeout) while a second, with a shorter
        // scrape timeout, waits for it past its deadline and is refused; the first is answered.
        let holder = DispatchGroup()
        nonisolated(unsafe) var held: ServiceHTTP.Fetched?
        DispatchQueue.global().async(group: holder) { held = try? ServiceHTTP.fetch(url, options: ["-H", "X-Prometheus-Scrape-Timeout-Seconds: 4"]) }
        Thread.sleep(forTimeInterval: 0.3)
        let waited = try ServiceHTTP.fetch(url, options: ["-H", "X-Prometheus-Scrape-Timeout-Seconds: 2"])
        holder.wait()
        #expect(waited.status == 503 && waited.body.contains("probe slot"), "\(waited)")
        #expect(held?.status == 200 && Self.sample(held?.body ?? "", "probe_success ") == 0, "\(String(describing: held))")
        let metrics = try ServiceHTTP.fetch("http://\(listener)/metrics").body
        #expect(Self.sample(metrics, #"tlsaudit_probe_requests_total{outcome="busy"}"#) == 1, "\(metrics.prefix(600))")

        let (off, _) = try service("probe-off", targets: [("closed", 1)], http: """
            listen: "127.0.0.1:0"
            probe: off
            """)
        let refused = try ServiceHTTP.fetch("http://\(ServiceHTTP.listening(off)[0])/probe?target=\(ServiceLab.hostname):\(tarpit.port)")
        #expect(refused.status == 404 && refused.body.contains("probe: off"), "\(refused)")
        // The listener stops gracefully: a clean stop logs nothing at error level (journalctl -p err stays quiet).
        off.signal(SIGTERM)
        #expect(off.waitForExit(timeout: 15) == 0)
        #expect(off.lines(containing: " error ").isEmpty && off.lines(containing: " critical ").isEmpty, "\(off.log.suffix(1000))")
    }

    @Test("a real Prometheus scraping /probe through ssl_exporter's relabel config (target from __address__, instance from the target) stores ssl_exporter- and blackbox_exporter-named series for two targets, one series set per instance, and the dashboards' instance selector finds each")
    func prometheusProbeScrape() throws {
        let first = try lab.goodServer()
        let second = try lab.expiredServer()
        defer { first.stop(); second.stop() }
        let workspace = try lab.workspace("probe-prometheus")
        let tokenFile = try Self.bearerToken(in: workspace).file
        let port = try LabPorts.unusedPort()
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("tlsaudit.sqlite").path, targets: [("web", first.port)], extra: """
            http: {listen: "127.0.0.1:\(port)", bearer_token_file: \(tokenFile)}
            \(Self.probeModules)
            """).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("the http listener") { !ServiceHTTP.listening(service).isEmpty }
        let targets = ["\(ServiceLab.hostname):\(first.port)", "\(ServiceLab.hostname):\(second.port)"]
        // ssl_exporter's README configuration, pointed at tlsaudit (README, "The exporter pattern").
        let stack = try MonitoringStack(workspace: workspace, scrapeConfigs: """
            - job_name: tls
              metrics_path: /probe
              params: {module: [trust-only]}
              scrape_interval: 1s
              authorization: {credentials_file: \(tokenFile)}
              static_configs: [{targets: ["\(targets[0])", "\(targets[1])"]}]
              relabel_configs:
                - source_labels: [__address__]
                  target_label: __param_target
                - source_labels: [__param_target]
                  target_label: instance
                - target_label: __address__
                  replacement: 127.0.0.1:\(port)
            - job_name: tlsaudit
              scrape_interval: 1s
              authorization: {credentials_file: \(tokenFile)}
              static_configs: [{targets: ["127.0.0.1:\(port)"]}]
              metric_relabel_configs:
                - source_labels: [target]
                  regex: (.+)
                  target_label: instance
            """)
        defer { stack.stop() }
        try service.wait("Prometheus has both probes", timeout: 60) {
            try stack.query(#"probe_success{job="tls"}"#).count == 2
        }
        #expect(try stack.query(#"up{job="tls"}"#).allSatisfy { $0.value == 1 })
        for (instance, certificate) in zip(targets, [lab.good, lab.expired]) {
            // The query an ssl_exporter dashboard makes with its instance variable.
            let leaf = try stack.query(#"ssl_cert_not_after{job="tls",instance=~"\#(instance)",cn="\#(ServiceLab.hostname)"}"#)
            #expect(leaf.count == 1 && leaf.first?.value == certificate.summary.notAfter.timeIntervalSince1970, "\(instance): \(leaf)")
            #expect(try stack.query(#"ssl_probe_success{instance="\#(instance)"}"#).first?.value == 1)
            #expect(try stack.query(#"probe_success{instance="\#(instance)"}"#).first?.value == 1)
            #expect(try stack.query(#"ssl_tls_version_info{instance="\#(instance)",version="TLS 1.3"}"#).first?.value == 1)
            #expect(try stack.query(#"probe_tls_version_info{instance="\#(instance)",version="TLS 1.3"}"#).first?.value == 1)
            let earliest = try stack.query(#"probe_ssl_earliest_cert_expiry{instance="\#(instance)"}"#)
            #expect(earliest.first?.value == min(certificate.summary.notAfter, lab.intermediate.summary.notAfter).timeIntervalSince1970,
                    "\(earliest)")
            #expect(try stack.query(#"ssl_verified_cert_not_after{instance="\#(instance)",chain_no="0"}"#).count >= 2)
        }
        // tlsaudit's own dashboard on the /probe job: every panel's query evaluates; those of the probed series find both targets.
        for expression in try Self.dashboardExpressions(job: "tls") {
            #expect(try stack.evaluates(expression), "\(expression)")
            if expression.hasPrefix("ssl_cert_not_after") || expression.hasPrefix("sort((tlsaudit_chain_expiry") {
                #expect(Set(try stack.query(expression).compactMap { $0.labels["instance"] }) == Set(targets), "\(expression)")
            }
        }
        // /metrics with the target copied into instance: the configured target, selected as those dashboards select.
        try service.wait("Prometheus has the configured target from /metrics", timeout: 30) {
            try stack.query(#"ssl_cert_not_after{job="tlsaudit",instance=~"web",cn="\#(ServiceLab.hostname)"}"#).first?.value
                == lab.good.summary.notAfter.timeIntervalSince1970
        }
        #expect(try stack.query(#"tlsaudit_build_info{job="tlsaudit"}"#).first?.labels["instance"] == "127.0.0.1:\(port)",
                "a series without a target keeps the scrape's instance")
        let compliant = try stack.query(#"tlsaudit_compliant{job="tls",policy="apple-trust"}"#)
        #expect(Dictionary(uniqueKeysWithValues: compliant.map { ($0.labels["instance"] ?? "", $0.value) }) == [targets[0]: 1, targets[1]: 0],
                "the module's policy judged each: \(compliant)")
    }
}
