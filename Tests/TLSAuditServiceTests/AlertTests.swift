import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditStore
import TLSAuditSQLite
@testable import TLSAuditService
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// A loopback TLS server whose certificate (or whole configuration) can be swapped mid-run on the
/// same port: a simulated man in the middle, a renewal, a regression.
final class SwappableServer: @unchecked Sendable {
    private(set) var server: LabTLSServer
    var port: Int { server.port }

    init(_ configuration: LabServerConfiguration) throws {
        server = try LabTLSServer(configuration)
    }

    func swap(to configuration: LabServerConfiguration) throws {
        let port = server.port
        server.stop()
        var onPort = configuration
        onPort.port = port
        server = try LabTLSServer(onPort)
    }

    func stop() { server.stop() }
}

@Suite("alerts end to end", .serialized)
struct AlertTests {
    init() { TestBackends.register() }

    let lab = ServiceLab.shared
    static let secret = "s3cret"

    /// Leaves for the same name with two different keys.
    func leaves() throws -> (genuine: LabCertificate, impostor: LabCertificate) {
        (try lab.intermediate.issue(.server([ServiceLab.hostname])), try lab.intermediate.issue(.server([ServiceLab.hostname])))
    }

    func config(_ workspace: URL, port: Int, receiver: LabWebhookReceiver, pins: String, interval: String = "300ms",
                extraAlerts: String = "") throws -> String {
        let path = workspace.appendingPathComponent("tlsaudit.yaml").path
        let yaml = lab.configuration(database: workspace.appendingPathComponent("db.sqlite").path, targets: [],
                                     interval: interval, extra: """
            alerts:
              unreachable_after: 2
              sinks:
                - type: log
                - name: hook
                  type: webhook
                  url: http://127.0.0.1:\(receiver.port)/alerts
                  secret: \(Self.secret)
                  timeout: 2s
            \(extraAlerts)
            """) + "  - host: \(ServiceLab.hostname)\n    port: \(port)\n    name: api\n"
            + (pins.isEmpty ? "" : "    pins:\n" + pins.split(separator: "\n").map { "      \($0)" }.joined(separator: "\n") + "\n")
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Decoded alerts the receiver accepted.
    func alerts(_ receiver: LabWebhookReceiver) -> [Alert] {
        receiver.received.compactMap { try? JSONDecoder.tlsaudit.decode(Alert.self, from: $0.body) }
    }

    func count(_ kind: AlertKind, _ receiver: LabWebhookReceiver) -> Int { alerts(receiver).filter { $0.kind == kind }.count }

    @Test("a swapped key raises exactly one pin-mismatch alert, then one restored; signed, with old and new pins")
    func manInTheMiddle() throws {
        let (genuine, impostor) = try leaves()
        let server = try SwappableServer(LabServerConfiguration(chain: [genuine, lab.intermediate]))
        defer { server.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        let workspace = try lab.workspace("mitm")
        let backup = "sha256/" + Data(repeating: 7, count: 32).base64EncodedString()
        let config = try config(workspace, port: server.port, receiver: receiver,
                                pins: "mode: public-key\npins: [\"sha256/\(genuine.summary.spkiSHA256)\", \"\(backup)\"]")
        let check = try Binary.run(["check-config", config])
        #expect(check.status == 0, "\(check.stderr)")
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("three scans with matching pins") { service.storedScans.count >= 3 }
        #expect(alerts(receiver).isEmpty, "no alert while nothing changes")

        try server.swap(to: LabServerConfiguration(chain: [impostor, lab.intermediate]))
        service.wait("the pin-mismatch alert") { count(.pinMismatch, receiver) == 1 }
        let scansAfter = service.storedScans.count
        service.wait("more scans of the impostor") { service.storedScans.count >= scansAfter + 4 }
        #expect(count(.pinMismatch, receiver) == 1, "raised on the transition, not on every scan")

        let mismatch = try #require(alerts(receiver).first { $0.kind == .pinMismatch })
        #expect(mismatch.severity == .critical)
        #expect(mismatch.target == "api" && mismatch.address == "127.0.0.1")
        #expect(mismatch.changes["old_leaf_spki"] == genuine.summary.spkiSHA256)
        #expect(mismatch.changes["new_leaf_spki"] == impostor.summary.spkiSHA256)
        #expect(mismatch.changes["new_leaf_sha256"] == impostor.summary.sha256Fingerprint)
        #expect(mismatch.text.hasPrefix("[CRITICAL] api (127.0.0.1) pin.mismatch"))
        let request = try #require(receiver.received.first { (try? JSONDecoder.tlsaudit.decode(Alert.self, from: $0.body))?.kind == .pinMismatch })
        let expected = MessageAuthentication.hmacSHA256Hex(key: Array(Self.secret.utf8), message: Array(request.body))
        #expect(request.headers["x-tlsaudit-signature"] == "sha256=\(expected)")
        #expect(request.headers["x-tlsaudit-alert-id"] == mismatch.id)
        #expect(count(.certificateChanged, receiver) == 1)
        #expect(alerts(receiver).first { $0.kind == .certificateChanged }?.changes["same_key"] == "false")

        try server.swap(to: LabServerConfiguration(chain: [genuine, lab.intermediate]))
        service.wait("the restored alert") { count(.pinRestored, receiver) == 1 }
        let status = try SQLiteScanStore(path: workspace.appendingPathComponent("db.sqlite").path, create: false, sha256: Digest.sha256Hex).status()
        #expect(status.first?.pinState == .match)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
        #expect(count(.pinMismatch, receiver) == 1 && count(.pinRestored, receiver) == 1)
        #expect(Set(alerts(receiver).map(\.id)).count == alerts(receiver).count, "no alert delivered twice")
    }

    @Test("a target broken on its first scan alerts once, from 'unknown'; a restart does not repeat it; first_scan: false keeps it quiet",
          arguments: [true, false])
    func dayOne(enabled: Bool) throws {
        let server = try lab.expiredServer()
        defer { server.stop() }
        let workspace = try lab.workspace("day-one")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: [("broken", server.port)], interval: "200ms",
                              extra: "alerts:\n  first_scan: \(enabled)\n  sinks: [{type: log}]")
            .write(toFile: config, atomically: true, encoding: .utf8)
        func kinds() throws -> [AlertKind] {
            try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).alerts(limit: 100).map(\.alert.kind)
        }
        for run in 0..<2 {
            let service = try ServiceProcess(config: config, workspace: workspace)
            service.wait("scans") { service.storedScans.count >= 3 }
            service.signal(SIGTERM)
            #expect(service.waitForExit(timeout: 15) == 0)
            let raised = try kinds()
            if enabled {
                // Before: silent until the target was first seen healthy.
                #expect(raised.filter { $0 == .trustBroken }.count == 1, "run \(run): \(raised)")
                #expect(raised.filter { $0 == .atsRegressed }.count == 1, "run \(run): \(raised)")
            } else {
                #expect(!raised.contains(.trustBroken) && !raised.contains(.atsRegressed), "\(raised)")
            }
        }
        if enabled {
            let broken = try #require(try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).alerts(limit: 100)
                .first { $0.alert.kind == .trustBroken })
            #expect(broken.alert.changes["previous"] == "unknown")
            #expect(broken.alert.summary.contains("not trusted on the first scan"), "\(broken.alert.summary)")
        }
    }

    @Test("the receiver down, then up: the alert arrives once")
    func receiverDown() throws {
        let (genuine, impostor) = try leaves()
        let server = try SwappableServer(LabServerConfiguration(chain: [genuine, lab.intermediate]))
        defer { server.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        let workspace = try lab.workspace("down")
        let config = try config(workspace, port: server.port, receiver: receiver,
                                pins: "leaf_identities: [\"\(genuine.summary.spkiSHA256)\", \"\(Data(repeating: 1, count: 32).base64EncodedString())\"]")
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans") { service.storedScans.count >= 2 }
        receiver.stop() // Connections refused from now on.
        try server.swap(to: LabServerConfiguration(chain: [impostor, lab.intermediate]))
        service.wait("failed deliveries") { service.lines(containing: "alert delivery failed").count >= 2 }
        receiver.respond(with: 503)
        try receiver.start() // Up, but answering 503: still not delivered.
        service.wait("a 503 refusal") { !service.lines(containing: "HTTP 503").isEmpty }
        #expect(count(.pinMismatch, receiver) == 0)
        receiver.respond(with: 200)
        service.wait("the delivery", timeout: 30) { count(.pinMismatch, receiver) == 1 }
        Thread.sleep(forTimeInterval: 1.5)
        #expect(count(.pinMismatch, receiver) == 1)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)
    }

    @Test("the service killed between detection and delivery, its delivery in flight: after a restart the alert arrives once, without waiting out the claim")
    func killedBeforeDelivery() throws {
        let (genuine, impostor) = try leaves()
        let server = try SwappableServer(LabServerConfiguration(chain: [genuine, lab.intermediate]))
        defer { server.stop() }
        // A receiver that holds each request 10 s and then refuses it: the kill comes while the
        // service's claim on the delivery is held (a lease of 50 s).
        let receiver = try LabWebhookReceiver()
        receiver.respond(with: 503, delay: 10)
        defer { receiver.stop() }
        let workspace = try lab.workspace("killed")
        let config = try config(workspace, port: server.port, receiver: receiver,
                                pins: "ca_identities: [\"\(lab.intermediate.summary.spkiSHA256)\", \"\(lab.root.summary.spkiSHA256)\"]\nleaf_identities: [\"\(genuine.summary.spkiSHA256)\", \"\(Data(repeating: 2, count: 32).base64EncodedString())\"]")
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans") { service.storedScans.count >= 2 }
        try server.swap(to: LabServerConfiguration(chain: [impostor, lab.intermediate]))
        service.wait("the alert's delivery to be in flight") { receiver.attempts.contains { $0.path == "/alerts" } }
        service.signal(SIGKILL)
        _ = service.waitForExit(timeout: 5)
        #expect(count(.pinMismatch, receiver) == 0)

        receiver.respond(with: 200)
        let restarted = try ServiceProcess(config: config, workspace: workspace)
        restarted.wait("the delivery after the restart", timeout: 15) { count(.pinMismatch, receiver) == 1 }
        restarted.wait("more scans") { restarted.storedScans.count >= 4 }
        #expect(count(.pinMismatch, receiver) == 1, "the impostor is still there: no second mismatch alert")
        restarted.signal(SIGTERM)
        #expect(restarted.waitForExit(timeout: 10) == 0)
        let stored = try SQLiteScanStore(path: workspace.appendingPathComponent("db.sqlite").path, create: false, sha256: Digest.sha256Hex).alerts(limit: 100)
        let mismatch = try #require(stored.first { $0.alert.kind == .pinMismatch })
        #expect(mismatch.deliveries.contains { $0.sink == "hook" && $0.state == .delivered })
        #expect(mismatch.deliveries.contains { $0.sink == "log" && $0.state == .delivered })
    }

    @Test("trust broken and restored, ATS regressed and recovered, expiry thresholds once, unreachable and recovered; command sink gets JSON on stdin")
    func transitions() throws {
        let good = LabServerConfiguration(chain: [lab.good, lab.intermediate])
        let server = try SwappableServer(good)
        defer { server.stop() }
        let receiver = try LabWebhookReceiver()
        defer { receiver.stop() }
        let workspace = try lab.workspace("transitions")
        let sinkFile = workspace.appendingPathComponent("command-sink.jsonl").path
        let config = try config(workspace, port: server.port, receiver: receiver, pins: "", extraAlerts: """
                - type: command
                  argv: [/usr/bin/tee, -a, \(sinkFile)]
                  min_severity: warning
            """)
        let check = try Binary.run(["check-config", config])
        #expect(check.status == 0, "\(check.stderr)")
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans") { service.storedScans.count >= 2 }

        try server.swap(to: LabServerConfiguration(chain: [lab.expired, lab.intermediate]))
        service.wait("trust broken, ATS regressed, leaf expired") {
            count(.trustBroken, receiver) == 1 && count(.atsRegressed, receiver) == 1 && count(.certificateExpired, receiver) == 1
        }
        try server.swap(to: good)
        service.wait("trust restored") { count(.trustRestored, receiver) == 1 && count(.atsRecovered, receiver) == 1 }

        var soon = LabCertificateRequest.server([ServiceLab.hostname])
        soon.notAfter = Date().addingTimeInterval(5.5 * 86_400)
        try server.swap(to: LabServerConfiguration(chain: [try lab.intermediate.issue(soon), lab.intermediate]))
        service.wait("the expiry alert") { count(.certificateExpiring, receiver) == 1 }
        let expiring = try #require(alerts(receiver).first { $0.kind == .certificateExpiring })
        #expect(expiring.changes["days_left"] == "5" && expiring.severity == .error)

        server.stop()
        service.wait("unreachable after two failures") { count(.unreachable, receiver) == 1 }
        try server.swap(to: good)
        service.wait("reachable again") { count(.reachable, receiver) == 1 }
        #expect(count(.certificateExpiring, receiver) == 1, "each threshold alerts once")
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 10) == 0)

        // The command sink received the warning-and-above alerts, one JSON document each.
        let lines = try String(contentsOfFile: sinkFile, encoding: .utf8).split(separator: "\n")
        let commandAlerts = lines.compactMap { try? JSONDecoder.tlsaudit.decode(Alert.self, from: Data($0.utf8)) }
        #expect(!commandAlerts.isEmpty)
        #expect(commandAlerts.allSatisfy { $0.severity >= .warning })
        #expect(commandAlerts.contains { $0.kind == .trustBroken })
        #expect(!commandAlerts.contains { $0.kind == .trustRestored }, "info alerts are below this sink's min_severity")
    }
}

/// Command sinks start their command with no blocked signals and default signal handling, from
/// whichever thread delivers the alert (Dispatch threads block SIGTERM and the rest, the service
/// ignores SIGPIPE and SIGHUP; a command inheriting that could not be stopped, nor could what it
/// starts, and would not die of a closed pipe).
@Suite("command sinks")
struct CommandSinkTests {
    init() { TestBackends.register() }

    @Test("a command starts with no blocked or ignored signals, even from a Dispatch thread that blocks them")
    func cleanSignalState() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-signals-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let status = directory.appendingPathComponent("status").path
        signal(SIGPIPE, SIG_IGN) // as the service does
        let outcome = DispatchQueue(label: "alert delivery").sync {
            var blocked = sigset_t(), before = sigset_t()
            sigfillset(&blocked)
            pthread_sigmask(SIG_BLOCK, &blocked, &before) // as libdispatch's worker threads do
            defer { pthread_sigmask(SIG_SETMASK, &before, nil) }
            return CommandSink.run(["/bin/sh", "-c", "grep -E '^Sig(Blk|Ign):' /proc/self/status > \"$0\"", status],
                                              input: Data("{}".utf8), timeout: 10)
        }
        #expect(throws: Never.self) { try outcome.get() }
        var masks: [String: UInt64] = [:]
        for line in try String(contentsOfFile: status, encoding: .utf8).split(separator: "\n") {
            let parts = line.split(separator: "\t")
            masks[String(parts[0])] = UInt64(parts[1], radix: 16)
        }
        #expect(masks["SigBlk:"] == 0)
        // Signals 1-31 (glibc keeps 32 and 33 for itself and sets them up when it needs them).
        #expect(masks["SigIgn:"].map { $0 & 0x7fff_ffff } == 0)
    }
}

@Suite("webhook sinks")
struct WebhookSinkTests {
    init() { TestBackends.register() }

    let lab = ServiceLab.shared

    /// The sink of a configuration with one webhook to `url` (and `extra` keys).
    func sink(_ url: String, extra: String = "") throws -> SinkConfiguration {
        let configuration = try ServiceConfiguration.parse(yaml: """
            targets: [{host: example.com}]
            alerts:
              sinks:
                - {name: hook, type: webhook, url: "\(url)", timeout: 3s\(extra)}
            """, file: "test.yaml", baseDirectory: lab.directory.path)
        return try #require(configuration.alerts.sinks.first)
    }

    func deliver(to sink: SinkConfiguration) -> String? {
        let result = sink.kind.send(Data("{}".utf8), headers: [:]) {}
        if case .failure(let error) = result { return error.description }
        return nil
    }

    @Test("an https webhook verifies against its ca_file (relative to the configuration), else the system store")
    func httpsWithCAFile() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try lab.intermediate.issue(.server(["127.0.0.1"])), lab.intermediate]))
        let url = "https://127.0.0.1:\(server.port)/hook"
        let trusted = try sink(url, extra: ", ca_file: root.pem")
        #expect(trusted.kind as? WebhookSink == WebhookSink(url: URL(string: url)!, secret: nil, timeout: 3, caFile: lab.rootFile))
        #expect(deliver(to: trusted) == nil)
        let failure = deliver(to: try sink(url))
        #expect(failure?.contains("did not verify") == true, "\(String(describing: failure))")
    }

    @Test("a redirect is a failed delivery, not followed")
    func redirect() throws {
        let receiver = try LabWebhookReceiver()
        receiver.respond(with: 302)
        #expect(deliver(to: try sink("http://127.0.0.1:\(receiver.port)/")) == "HTTP 302 (redirects are not followed)")
    }

    /// The configuration errors of a webhook sink with `extra` keys.
    func errors(_ extra: String) -> [String] {
        do {
            _ = try sink("https://127.0.0.1/", extra: extra)
            Issue.record("expected an error")
        } catch let errors as ConfigurationErrors {
            return errors.errors.map(\.message)
        } catch {
            Issue.record("unexpected \(error)")
        }
        return []
    }

    @Test("an unreadable ca_file, or one without a certificate, is a configuration error")
    func unreadableCAFile() {
        #expect(errors(", ca_file: missing.pem") == ["ca_file \(lab.directory.path)/missing.pem cannot be read"])
        let junk = lab.directory.appendingPathComponent("junk.pem")
        #expect(FileManager.default.createFile(atPath: junk.path, contents: Data("not a certificate".utf8)))
        #expect(errors(", ca_file: junk.pem") == ["ca_file \(junk.path) holds no certificate (PEM or DER)"])
    }

    @Test("a webhook's ca_file may be DER")
    func derCAFile() throws {
        let der = lab.directory.appendingPathComponent("root.der")
        try Data(lab.root.der).write(to: der)
        let server = try LabTLSServer(LabServerConfiguration(chain: [try lab.intermediate.issue(.server(["127.0.0.1"])), lab.intermediate]))
        #expect(deliver(to: try sink("https://127.0.0.1:\(server.port)/", extra: ", ca_file: root.der")) == nil)
    }
}
