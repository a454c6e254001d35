import Foundation
import Logging
import TLSAuditStore

/// A node's link to the fleet's work queue: claims, completions and releases run on one serial
/// queue of their own (they block on PostgreSQL, the scheduler must not); heartbeats, which renew
/// the leases of the scans in flight, on another (with a connection of the pool to itself), so that
/// a slow claim or a long flush never delays a renewal. Completions that cannot be written (PostgreSQL
/// down) wait in memory, in order, and go with the next call that works: a target's next due time
/// is never lost, only written late.
final class FleetWork: @unchecked Sendable {
    // @unchecked: `pendingCompletions`, `flushScheduled` and `claimMilliseconds` are only touched on `queue`; the
    // heartbeat's state (timer, report, onView, viewTime, started, heartbeatFailing) on `heartbeatQueue`.
    let fleet: any FleetCoordinator
    private let queue = DispatchQueue(label: "tlsaudit.fleet")
    private let heartbeatQueue = DispatchQueue(label: "tlsaudit.fleet.heartbeat")
    private let logger: Logger
    private var pendingCompletions: [FleetCompletion] = []
    private var heartbeatTimer: DispatchSourceTimer?
    private var heartbeatFailing = false
    private var started = false
    /// What each heartbeat reports and who gets the view (set by `startHeartbeat`).
    private var report: (@Sendable () -> FleetHeartbeat)?
    private var onView: (@Sendable (FleetView) -> Void)?
    /// The server time of the last view (changes since then are asked for next).
    private var viewTime = 0.0
    /// Completions kept at most while PostgreSQL is down (the oldest are dropped beyond: their
    /// targets are simply due at once when it answers again).
    private let capacity = 100_000
    /// How long each claim took (milliseconds; the last 100,000), for the statistics at the stop.
    private var claimMilliseconds: [Double] = []

    init(fleet: any FleetCoordinator, logger: Logger) {
        self.fleet = fleet
        self.logger = logger
    }

    /// Claims up to `limit` due scans, after writing the completions queued before it (their
    /// leases no longer count against their hosts' caps); `done` gets the outcome on `callbackQueue`.
    func claim(limit: Int, perHostCap: Int, lease: Double, callbackQueue: DispatchQueue,
               done: @escaping @Sendable (Result<FleetClaims, any Error>) -> Void) {
        queue.async { [self] in
            flushCompletions()
            let started = ProcessInfo.processInfo.systemUptime
            let outcome = Result { try fleet.claim(limit: limit, perHostCap: perHostCap, lease: lease) }
            if case .success(let claimed) = outcome, !claimed.claims.isEmpty {
                if claimMilliseconds.count >= 100_000 { claimMilliseconds.removeFirst(50_000) }
                claimMilliseconds.append((ProcessInfo.processInfo.systemUptime - started) * 1000)
            }
            callbackQueue.async { done(outcome) }
        }
    }

    /// After an outage: writes the completions kept meanwhile; `done` gets true when PostgreSQL
    /// answered and every one of them is written.
    func reconnect(callbackQueue: DispatchQueue, done: @escaping @Sendable (Bool) -> Void) {
        queue.async { [self] in
            let answered = (try? fleet.ping()) != nil
            if answered { flushCompletions() }
            let flushed = answered && pendingCompletions.isEmpty
            callbackQueue.async { done(flushed) }
        }
    }

    /// Queues a finished scan's write-back: written with the others that finish within 50 ms (one
    /// statement for all of them), or before the next claim, whichever comes first; later when
    /// PostgreSQL does not answer.
    func completed(_ completion: FleetCompletion) {
        queue.async { [self] in
            pendingCompletions.append(completion)
            if pendingCompletions.count > capacity { pendingCompletions.removeFirst(pendingCompletions.count - capacity) }
            guard !flushScheduled else { return }
            flushScheduled = true
            queue.asyncAfter(deadline: .now() + 0.05) { [self] in
                flushScheduled = false
                flushCompletions()
            }
        }
    }

    /// A write-back of the completions is scheduled (on `queue`).
    private var flushScheduled = false

    /// Gives claims back unscanned.
    func release(_ claims: [FleetClaim]) {
        guard !claims.isEmpty else { return }
        queue.async { [self] in
            do { try fleet.release(claims) } catch { logger.warning("cannot give claimed scans back (their leases will expire): \(error)") }
        }
    }

    private func flushCompletions() {
        guard !pendingCompletions.isEmpty else { return }
        do {
            try fleet.complete(pendingCompletions)
            pendingCompletions = []
        } catch {
            // Said once by the claim or heartbeat that fails alike.
        }
    }

    /// Called (on the heartbeat's queue) when another process took this node's name over.
    var onNameConflict: (@Sendable (FleetNameConflict) -> Void)?
    /// The first heartbeat's `replacing` (`serve --replace-node`).
    private var replacing = false

    /// Heartbeats every `period` seconds with what `report` says (called on this queue), renewing
    /// the leases of the scans in flight for `lease` seconds.
    /// `view` gets what the node knows of the fleet after each heartbeat that worked. The first
    /// heartbeat runs before this returns: it throws `FleetNameConflict` when another live process
    /// holds the node's name (unless `replacing`), and then no heartbeat runs.
    func startHeartbeat(period: Double, replacing: Bool, report: @escaping @Sendable () -> FleetHeartbeat,
                        view: @escaping @Sendable (FleetView) -> Void) throws {
        try heartbeatQueue.sync { [self] in
            self.replacing = replacing
            self.report = report
            onView = view
            do {
                try fleet.heartbeat(report(), starting: true, replacing: replacing, process: "pid \(getpid())")
                started = true
            } catch let conflict as FleetNameConflict {
                throw conflict
            } catch {
                // PostgreSQL not answering: the timer's heartbeats take the name when it does.
            }
        }
        heartbeatQueue.async { [self] in
            let timer = DispatchSource.makeTimerSource(queue: heartbeatQueue)
            timer.schedule(deadline: .now(), repeating: period)
            timer.setEventHandler { [weak self] in self?.beatAndShare() }
            timer.resume()
            heartbeatTimer = timer
        }
    }

    /// A heartbeat now (after the node took a new configuration version: `fleet status` shows it at once).
    func heartbeatNow() {
        heartbeatQueue.async { [self] in beatAndShare() }
    }

    /// One heartbeat (on `heartbeatQueue`), its view handed to `onView` when it worked.
    private func beatAndShare() {
        guard let report, let view = beat(report()) else { return }
        onView?(view)
    }

    private func beat(_ heartbeat: FleetHeartbeat) -> FleetView? {
        do {
            try fleet.heartbeat(heartbeat, starting: !started, replacing: replacing, process: "pid \(getpid())")
            try fleet.renew(heartbeat.inFlight, lease: heartbeat.lease)
            queue.async { [self] in flushCompletions() } // PostgreSQL answers: what waits can go
            let view = try fleet.view(changedSince: viewTime)
            viewTime = view.serverTime
            started = true
            if heartbeatFailing { logger.notice("fleet heartbeat: PostgreSQL answers again") }
            heartbeatFailing = false
            return view
        } catch let conflict as FleetNameConflict {
            heartbeatTimer?.cancel()
            heartbeatTimer = nil
            logger.critical("\(conflict)")
            onNameConflict?(conflict)
            return nil
        } catch {
            if !heartbeatFailing { logger.error("fleet heartbeat failed: \(error)") }
            heartbeatFailing = true
            return nil
        }
    }

    /// Stops the heartbeat and writes the completions still waiting (when PostgreSQL answers).
    func stop() {
        heartbeatQueue.sync {
            heartbeatTimer?.cancel()
            heartbeatTimer = nil
        }
        queue.sync {
            flushCompletions()
            if !pendingCompletions.isEmpty {
                logger.warning("stopping with scans whose next due time could not be written; they are due again at once",
                               metadata: ["scans": "\(pendingCompletions.count)"])
            }
            let sorted = claimMilliseconds.sorted()
            func percentile(_ fraction: Double) -> String {
                sorted.isEmpty ? "-" : String(format: "%.2f", sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))])
            }
            let traffic = fleet.traffic
            logger.notice("fleet statistics", metadata: [
                "claims": "\(sorted.count)", "claim_ms_p50": "\(percentile(0.5))", "claim_ms_p99": "\(percentile(0.99))",
                "statements": "\(traffic.statements)", "bytes_sent": "\(traffic.sent)", "bytes_received": "\(traffic.received)",
            ])
        }
    }
}
