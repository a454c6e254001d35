import Foundation
import Logging
import Synchronization
import TLSAuditCore
import TLSAuditProbe
import TLSAuditStore

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

    /// Starts delivering. `singleNode`: this process alone delivers from the store (no fleet), so
    /// claims a killed earlier run left are its own: every pending delivery is due at once instead
    /// of waiting out their lease or backoff.
    func start(singleNode: Bool) {
        queue.async {
            if singleNode {
                do { try self.writer.perform { try $0.releaseEveryDelivery(dueAt: Date()) } } catch {
                    self.logger.warning("pending alerts from the previous run wait for their retry time: \(error)")
                }
            }
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            timer.schedule(deadline: .now(), repeating: .milliseconds(500))
            timer.setEventHandler { [weak self] in self?.deliverDue() }
            timer.resume()
            self.timer = timer
            let resend = DispatchSource.makeTimerSource(queue: self.queue)
            resend.schedule(deadline: .now() + Self.resendRound, repeating: Self.resendRound)
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
        let recent = RecentAlerts { [self] in readRecent() }
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
            let outcome = sink.kind.deliver(delivery.alert, recent: recent, logger: logger)
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

    /// Alerts read for the sinks that need the recent ones (`RecentAlerts`: Alertmanager's, to find
    /// what a clearing alert clears and what fires now).
    static let recentAlerts = 5_000

    private func readRecent() -> [Alert]? { try? writer.perform { try $0.alerts(limit: Self.recentAlerts).map(\.alert) } }

    /// Seconds between the rounds in which sinks that re-send what is firing (`AlertSink.resendsFiring`)
    /// do so: well under Alertmanager's default 5 min resolve_timeout.
    static let resendRound: Double = 60

    /// Asks each sink that re-sends what is firing to do so. Failures are logged; the next round retries.
    private func resendFiring() {
        let resending = sinks.withLock { $0 }.values.filter(\.kind.resendsFiring)
        guard !resending.isEmpty, !stopping.load(ordering: .relaxed),
              let recent = readRecent() else { return }
        for sink in resending {
            sink.kind.resendFiring(recent: recent, minimumSeverity: sink.minimumSeverity, sink: sink.name, logger: logger)
        }
    }
}
