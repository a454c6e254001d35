public import Foundation
import Logging
import Synchronization
public import TLSAuditCore
import TLSAuditProbe
public import TLSAuditStore

/// Where alerts go. Names are the keys of delivery state in the database.
public struct SinkConfiguration: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// A log line through swift-log, at the alert's severity.
        case log
        /// HTTP POST of the alert JSON; `secret` adds `X-Tlsaudit-Signature: sha256=HEX` (HMAC-SHA256 of the body).
        /// An https URL's certificate must verify against the system trust store, or `caFile` when set.
        case webhook(url: URL, secret: String?, timeout: Double, caFile: String? = nil)
        /// Runs `argv` (no shell) with the alert JSON on stdin; success is exit status 0.
        case command(argv: [String], timeout: Double)
        /// Alertmanager's API v2 at `url` (its base, like `http://127.0.0.1:9093`): see `AlertmanagerSink`.
        case alertmanager(url: URL, timeout: Double, caFile: String? = nil)
    }

    public var name: String
    public var kind: Kind
    public var minimumSeverity: AlertSeverity

    /// How long one delivery may take.
    var timeout: Double {
        switch kind {
        case .log: 0
        case .webhook(_, _, let timeout, _), .command(_, let timeout), .alertmanager(_, let timeout, _): timeout
        }
    }

    public init(name: String, kind: Kind, minimumSeverity: AlertSeverity = .info) {
        self.name = name
        self.kind = kind
        self.minimumSeverity = minimumSeverity
    }
}

/// The `alerts:` section: when to raise alerts and where to send them.
public struct AlertConfiguration: Sendable, Hashable {
    public var rules: AlertRules
    public var sinks: [SinkConfiguration]

    public init(rules: AlertRules = AlertRules(), sinks: [SinkConfiguration] = [SinkConfiguration(name: "log", kind: .log)]) {
        self.rules = rules
        self.sinks = sinks
    }

    var settings: AlertSettings {
        AlertSettings(rules: rules, sinks: sinks.map { AlertSettings.Sink(name: $0.name, minimumSeverity: $0.minimumSeverity) })
    }
}

extension AlertSettings {
    /// What a store calls inside its write: the alert detector with these rules, and the sinks
    /// each alert goes to (`nil`: the default rules and no sink, as `scan --database` stores).
    public static func decision(_ settings: AlertSettings?) -> AlertDecision {
        { previous, scan, observationID in
            let (alerts, memory) = decide(settings, previous: previous, result: scan.result, target: scan.target,
                                          host: scan.host, port: scan.port, observationID: observationID)
            return AlertOutcome(alerts: alerts, memory: memory)
        }
    }
}

/// Delivers stored alerts to their sinks: at least once (a delivery is marked done only after the
/// sink accepted it), retried with backoff while a sink is down, and resumed after a restart from
/// the database. Receivers deduplicate on the alert's `id` (also sent as `X-Tlsaudit-Alert-Id`).
final class AlertDispatcher: @unchecked Sendable {
    // @unchecked: `timer` is touched on `queue` only; `sinks` is behind a Mutex.
    private let queue = DispatchQueue(label: "tlsaudit.alerts")
    private var timer: DispatchSourceTimer?
    private var resendTimer: DispatchSourceTimer?
    /// Called on `queue` after each delivery attempt with the sink's name and whether it was delivered (the metrics).
    var onAttempt: (@Sendable (String, Bool) -> Void)?
    private let sinks: Mutex<[String: SinkConfiguration]>
    private let writer: ResultWriter
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)

    init(configuration: AlertConfiguration, writer: ResultWriter, logger: Logger) {
        sinks = Mutex(Dictionary(configuration.sinks.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }))
        self.writer = writer
        self.logger = logger
    }

    func apply(_ configuration: AlertConfiguration) {
        sinks.withLock { $0 = Dictionary(configuration.sinks.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }) }
    }

    func start() {
        queue.async {
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            timer.schedule(deadline: .now(), repeating: .milliseconds(500))
            timer.setEventHandler { [weak self] in self?.deliverDue() }
            timer.resume()
            self.timer = timer
            let resend = DispatchSource.makeTimerSource(queue: self.queue)
            resend.schedule(deadline: .now() + AlertmanagerSink.resendInterval, repeating: AlertmanagerSink.resendInterval)
            resend.setEventHandler { [weak self] in self?.resendFiring() }
            resend.resume()
            self.resendTimer = resend
        }
    }

    /// Starts no delivery from now on (the one in progress runs on).
    func beginStopping() { stopping.store(true, ordering: .relaxed) }

    /// Stops: waits for the delivery in progress until `deadline`, then abandons it. Returns false
    /// when one was abandoned. Undelivered alerts, abandoned ones included, stay pending in the
    /// database and are delivered after the restart (at least once: an abandoned delivery that
    /// reached its sink is sent again).
    func stop(deadline: Date) -> Bool {
        stopping.store(true, ordering: .relaxed)
        let stopped = DispatchSemaphore(value: 0)
        queue.async {
            self.timer?.cancel()
            self.timer = nil
            self.resendTimer?.cancel()
            self.resendTimer = nil
            stopped.signal()
        }
        guard stopped.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow)) == .success else {
            logger.warning("an alert delivery in flight was abandoned at the end of the shutdown grace; it stays pending and is retried after the restart")
            return false
        }
        return true
    }

    /// Asks for a delivery round now (after new alerts were stored).
    func poke() { queue.async { self.deliverDue() } }

    private func deliverDue() {
        guard timer != nil else { return }
        let configured = sinks.withLock { $0 }
        // Claimed under a lease that covers every claimed delivery taking its sink's whole
        // timeout: in a fleet, no other node delivers them meanwhile; if this node dies, another
        // takes them over after the lease. Those not attempted are given back at once.
        let batch = 10
        let lease = 30 + Double(batch) * (configured.values.map(\.timeout).max() ?? SettingBounds.sinkTimeout.defaultValue)
        let due: [PendingDelivery]
        do {
            due = try writer.perform { try $0.claimDeliveries(dueBy: Date(), sinks: Array(configured.keys), limit: batch, lease: lease) }
        } catch {
            return // The writer already logs store problems.
        }
        var failing: Set<String> = []
        var unattempted: [PendingDelivery] = []
        defer {
            if !unattempted.isEmpty { _ = try? writer.perform { try $0.releaseDeliveries(unattempted, dueAt: Date()) } }
            // A full batch delivered: more may be due.
            if due.count == batch, failing.isEmpty, !stopping.load(ordering: .relaxed) { queue.async { self.deliverDue() } }
        }
        var recent: [Alert]?
        for delivery in due {
            // Stop between deliveries when the service stops; a sink that just failed waits for its retry.
            guard !stopping.load(ordering: .relaxed), !failing.contains(delivery.sink),
                  let sink = configured[delivery.sink] else {
                unattempted.append(delivery)
                continue
            }
            // Claimed minutes ago, perhaps (a pause, a slow sink before it): sent only while the claim holds.
            guard (try? writer.perform { try $0.stillHolds(delivery) }) == true else {
                logger.warning("alert delivery skipped: this node's claim on it ended (another node may have taken it over)",
                               metadata: ["alert": "\(delivery.alert.id)", "sink": "\(sink.name)"])
                continue
            }
            let outcome: Result<Void, DeliveryError>
            if case .alertmanager(let url, let timeout, let caFile) = sink.kind {
                if recent == nil { recent = try? writer.perform { try $0.alerts(limit: Self.recentAlerts).map(\.alert) } }
                let documents = AlertmanagerSink.documents(delivering: delivery.alert, recent: recent ?? [])
                outcome = documents.isEmpty ? .success(()) : Self.postAlertmanager(documents, url: url, timeout: timeout, caFile: caFile)
            } else {
                outcome = Self.deliver(delivery.alert, to: sink, logger: logger)
            }
            onAttempt?(sink.name, (try? outcome.get()) != nil)
            do {
                switch outcome {
                case .success:
                    try writer.perform { try $0.markDelivered(alertID: delivery.alert.id, sink: sink.name, at: Date(), leaseEpoch: delivery.leaseEpoch) }
                    logger.info("alert delivered", metadata: ["alert": "\(delivery.alert.id)", "kind": "\(delivery.alert.kind.rawValue)",
                                                             "sink": "\(sink.name)", "target": "\(delivery.alert.target)"])
                case .failure(let error):
                    failing.insert(sink.name)
                    let wait = min(300, pow(2, Double(min(delivery.attempts, 9))))
                    try writer.perform {
                        try $0.markFailed(alertID: delivery.alert.id, sink: sink.name, error: error.description,
                                          retryAt: Date().addingTimeInterval(wait), leaseEpoch: delivery.leaseEpoch)
                    }
                    logger.warning("alert delivery failed; will retry", metadata: [
                        "alert": "\(delivery.alert.id)", "sink": "\(sink.name)", "attempt": "\(delivery.attempts + 1)",
                        "retry_in_s": "\(Int(wait))", "error": "\(error.description)",
                    ])
                }
            } catch {
                logger.error("cannot record an alert delivery: \(error)")
            }
        }
    }

    struct DeliveryError: Error, CustomStringConvertible {
        var description: String
    }

    /// One delivery attempt, bounded by the sink's timeout.
    static func deliver(_ alert: Alert, to sink: SinkConfiguration, logger: Logger) -> Result<Void, DeliveryError> {
        let body: Data
        do {
            body = try JSONDocumentEncoder.tlsauditCompact.encode(alert) + Data("\n".utf8)
        } catch {
            return .failure(DeliveryError(description: "cannot encode the alert: \(error)"))
        }
        return send(body, headers: ["X-Tlsaudit-Alert-Id": alert.id], to: sink) {
            let level: Logger.Level = switch alert.severity {
            case .critical: .critical
            case .error: .error
            case .warning: .warning
            case .info: .notice
            }
            var metadata: Logger.Metadata = ["alert": "\(alert.id)", "kind": "\(alert.kind.rawValue)", "target": "\(alert.target)",
                                             "address": "\(alert.address)"]
            for (key, value) in alert.changes { metadata[key] = "\(value)" }
            logger.log(level: level, "ALERT \(alert.text)", metadata: metadata)
        }
    }

    /// Alerts read to find what a clearing alert clears and what fires now (Alertmanager sinks).
    static let recentAlerts = 5_000

    static func postAlertmanager(_ documents: [[String: Any]], url: URL, timeout: Double, caFile: String?) -> Result<Void, DeliveryError> {
        do {
            return postWebhook(url: AlertmanagerSink.endpoint(url), body: try AlertmanagerSink.body(documents), secret: nil,
                               headers: [:], timeout: timeout, caFile: caFile)
        } catch {
            return .failure(DeliveryError(description: "cannot encode the alerts: \(error)"))
        }
    }

    /// Sends every firing condition again to each Alertmanager sink (Alertmanager resolves an
    /// alert not re-sent within its resolve_timeout). Failures are logged; the next round retries.
    private func resendFiring() {
        let targets = sinks.withLock { $0 }.values.compactMap { sink -> (SinkConfiguration, URL, Double, String?)? in
            guard case .alertmanager(let url, let timeout, let caFile) = sink.kind else { return nil }
            return (sink, url, timeout, caFile)
        }
        guard !targets.isEmpty, !stopping.load(ordering: .relaxed),
              let recent = try? writer.perform({ try $0.alerts(limit: Self.recentAlerts).map(\.alert) }) else { return }
        let firing = AlertmanagerSink.firing(recent)
        for (sink, url, timeout, caFile) in targets {
            let documents = firing.filter { $0.severity >= sink.minimumSeverity }.map { AlertmanagerSink.document(for: $0) }
            guard !documents.isEmpty else { continue }
            if case .failure(let error) = Self.postAlertmanager(documents, url: url, timeout: timeout, caFile: caFile) {
                logger.warning("cannot re-send the firing alerts to Alertmanager; next try in \(Int(AlertmanagerSink.resendInterval)) s",
                               metadata: ["sink": "\(sink.name)", "firing": "\(documents.count)", "error": "\(error.description)"])
            }
        }
    }

    /// One attempt at delivering a JSON `body` to `sink` (alerts and scheduled reports alike): a
    /// webhook POSTs it with `headers`, a command gets it on stdin, a log sink runs `log` instead.
    static func send(_ body: Data, headers: [String: String], to sink: SinkConfiguration,
                     log: () -> Void) -> Result<Void, DeliveryError> {
        switch sink.kind {
        case .log:
            log()
            return .success(())
        case .webhook(let url, let secret, let timeout, let caFile):
            return postWebhook(url: url, body: body, secret: secret, headers: headers, timeout: timeout, caFile: caFile)
        case .command(let argv, let timeout):
            return runCommand(argv, input: body, timeout: timeout)
        case .alertmanager:
            return .failure(DeliveryError(description: "an Alertmanager sink takes alerts, not reports"))
        }
    }

    /// One HTTP POST of a JSON body, signed when there is a secret; success is a 2xx answer within
    /// `timeout` (a redirect is a failure: it is not followed). Proxies come from the environment
    /// (`https_proxy`, `http_proxy`, `no_proxy`: see `HTTPProxySettings`).
    static func postWebhook(url: URL, body: Data, secret: String?, headers: [String: String],
                            timeout: Double, caFile: String? = nil) -> Result<Void, DeliveryError> {
        var fields: [(name: String, value: String)] = [("Content-Type", "application/json"), ("User-Agent", "tlsaudit")]
        fields += headers.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        if let secret {
            let signature = MessageAuthentication.hmacSHA256Hex(key: Array(secret.utf8), message: Array(body))
            fields.append((name: "X-Tlsaudit-Signature", value: "sha256=\(signature)"))
        }
        do {
            let response = try HTTPClient.post(url, body: Array(body), headers: fields, timeout: timeout, caFile: caFile)
            guard (200..<300).contains(response.status) else {
                let redirect = (300..<400).contains(response.status) ? " (redirects are not followed)" : ""
                return .failure(DeliveryError(description: "HTTP \(response.status)\(redirect)"))
            }
            return .success(())
        } catch {
            return .failure(DeliveryError(description: error.description))
        }
    }

    static func runCommand(_ argv: [String], input: Data, timeout: Double) -> Result<Void, DeliveryError> {
        guard let program = argv.first, let executable = resolve(program) else {
            return .failure(DeliveryError(description: "command not found: \(argv.first ?? "(empty)")"))
        }
        let process = Process()
        // Through `env --default-signal`: the command starts with default signal handling and no
        // blocked signals, whatever this process ignores (SIGPIPE, SIGHUP) or the delivering thread
        // blocks (Dispatch threads block SIGTERM): a command that inherited those could not be
        // stopped by SIGTERM, nor could anything it starts, and would not die of a closed pipe.
        if let env = Self.signalResettingEnv, !executable.contains("=") {
            process.executableURL = URL(fileURLWithPath: env)
            process.arguments = ["--default-signal", executable] + argv.dropFirst()
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = Array(argv.dropFirst())
        }
        let stdin = Pipe()
        process.standardInput = stdin
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice // a chatty command must not fill a pipe and hang
        do {
            try process.run()
        } catch {
            return .failure(DeliveryError(description: "cannot run \(executable): \(error)"))
        }
        // Fed from its own thread: a command that does not read a large input (a report) must not
        // block us past the deadline; terminating it ends the write with EPIPE (SIGPIPE is ignored).
        let writer = stdin.fileHandleForWriting
        Thread {
            try? writer.write(contentsOf: input)
            try? writer.close()
        }.start()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning {
            process.terminate()
            let grace = Date().addingTimeInterval(2)
            while process.isRunning && Date() < grace { Thread.sleep(forTimeInterval: 0.02) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            return .failure(DeliveryError(description: "\(program) did not finish within \(timeout) s"))
        }
        guard process.terminationStatus == 0 else {
            return .failure(DeliveryError(description: "\(program) exited with status \(process.terminationStatus)"))
        }
        return .success(())
    }

    /// GNU env (coreutils 8.31 and later) when it is there: `--default-signal` resets every signal's
    /// handling and unblocks them all before it runs the command. (A path with `=` would be read as
    /// an assignment: such commands run directly.)
    static let signalResettingEnv: String? = {
        let env = "/usr/bin/env"
        guard FileManager.default.isExecutableFile(atPath: env) else { return nil }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: env)
        probe.arguments = ["--default-signal", "/bin/true"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return nil }
        probe.waitUntilExit()
        return probe.terminationStatus == 0 ? env : nil
    }()

    /// An absolute path, or the first match on PATH.
    static func resolve(_ program: String) -> String? {
        if program.contains("/") { return FileManager.default.isExecutableFile(atPath: program) ? program : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(program)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
