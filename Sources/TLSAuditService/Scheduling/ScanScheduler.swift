import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization
import TLSAuditCore
import TLSAuditProbe
import TLSAuditStore

/// The scheduler, built on Dispatch: one serial queue owns all scheduling state, a timer on it
/// asks the work source for due targets, and a fixed pool of worker threads (`JobPool`) runs the
/// blocking probes (a probe waits in poll(2); the pool's size, not the number of targets, bounds
/// the threads).
///
/// Guarantees: per-target interval; first runs spread over a start-up window; a global cap and a
/// per-host cap on scans in flight; never two scans of one target at once; exponential backoff
/// for unreachable targets; every scan bounded by its timeouts.
///
/// What is due comes from a `WorkSource`: the node's own schedule (`LocalSchedule`), or a fleet's
/// claims (`FleetClaimSource`). The scheduler keeps each target's due time and failures in a row,
/// launches, completes and hands results to the writer.
final class ScanScheduler: @unchecked Sendable {
    // @unchecked: every mutable property below is only touched on `queue`, as is the source's state.
    private let queue = DispatchQueue(label: "tlsaudit.scheduler")
    private var timer: DispatchSourceTimer?
    let logger: Logger
    private let scanner: TLSScanner
    private let writer: ResultWriter
    private let pool: JobPool
    private let idle = DispatchGroup()
    private let source: any WorkSource

    /// A target's scheduling state. Its settings stay in `configuration.targets` (at `index`):
    /// a copy here would double the largest structure the service holds (100,000 targets: 60 MB).
    private struct Entry {
        var index: Int
        var trustStore: TrustStore
        var schedule: TargetSchedule
        var scans = 0
    }

    private var entries: [String: Entry] = [:]
    private(set) var configuration: ServiceConfiguration
    private var running = 0
    /// Targets with a scan in flight, kept apart from `entries` so that a reload that removes and
    /// re-adds a target cannot start a second scan of it.
    private var inFlight: Set<String> = []
    private var perHost: [String: Int] = [:]
    private(set) var stopping = false
    /// Scans completed in each of the last 60 seconds (a fleet heartbeat's scans per minute), and in all.
    private var recentCompletions = MinuteCounter()
    private var completedTotal: Int64 = 0
    /// CPU seconds the scheduler's own work took (its queue: choosing, launching and completing
    /// scans), apart from the probes and the store: logged at the stop, per scan.
    private var schedulingCPU: Double = 0
    /// The node's identity in results (fleet mode).
    private let node: NodeIdentity?
    /// Called on the scheduler queue after each completed target scan (tests and the demo watch it).
    var onScanCompleted: (@Sendable (String, Int) -> Void)?
    /// Called on the scheduler's queue after each launch round with the scans due but waiting
    /// (for a worker, or for their host's cap) and the scans running (the metrics).
    var onQueueLength: (@Sendable (Int, Int) -> Void)?
    /// Called on the scheduler's queue when the wall clock stepped (by the seconds given, negative: back).
    var onClockStep: (@Sendable (Double) -> Void)?
    /// Wall-clock time less monotonic time at the last tick: a change of more than 2 s is a step.
    private var wallClockOffset: Double?
    /// The latest wall-clock time seen at a tick: while the wall clock stands more than 2 s behind
    /// it (stepped back, until it passes that time again), scans are recorded at times older than
    /// ones already recorded (`StoredScan.afterClockStepBack`).
    private var latestWallClock: Double?

    /// `node`: the fleet node whose identity goes with each result (nil outside a fleet).
    init(configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore], scanner: TLSScanner,
         writer: ResultWriter, logger: Logger, source: any WorkSource, node: NodeIdentity? = nil) {
        self.source = source
        self.node = node
        self.configuration = configuration
        self.scanner = scanner
        self.writer = writer
        self.logger = logger
        pool = JobPool(threads: configuration.concurrency)
        entries = Self.entries(for: configuration, trustStores: trustStores, keeping: [:], now: .now)
        source.attach(to: self)
        source.targetsChanged(reloaded: false)
    }

    /// Starts the timer. First runs are spread over a window that grows with the number of
    /// targets per worker, so a thousand targets do not all connect in the first second.
    func start() {
        queue.sync {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now(), repeating: .milliseconds(100), leeway: .milliseconds(20))
            timer.setEventHandler { [weak self] in self?.measured { $0.launchDueTargets() } }
            timer.resume()
            self.timer = timer
            logger.info("scheduler started", metadata: [
                "targets": "\(entries.count)", "concurrency": "\(configuration.concurrency)",
                "per_host_concurrency": "\(configuration.perHostConcurrency)",
            ])
        }
    }

    /// Initial due times: each target gets a stable slot (from its key) in a window of
    /// `min(interval, 2 s per round of workers)`.
    private static func entries(for configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore],
                                keeping old: [String: Entry], of oldTargets: [TargetConfiguration] = [],
                                now: SchedulerTime) -> [String: Entry] {
        let rounds = max(1.0, Double(configuration.targets.count) / Double(configuration.concurrency))
        var result: [String: Entry] = [:]
        result.reserveCapacity(configuration.targets.count)
        for (index, target) in configuration.targets.enumerated() {
            guard let store = trustStores[target.trust] else { continue }
            if var existing = old[target.key] {
                if oldTargets[existing.index].interval != target.interval {
                    existing.schedule.nextDue = min(existing.schedule.nextDue, now.adding(target.interval))
                }
                existing.index = index
                existing.trustStore = store
                result[target.key] = existing
                continue
            }
            let window = min(target.interval, rounds * 2)
            let slot = Double(StableHash.fnv1a(target.key) % 10_000) / 10_000
            result[target.key] = Entry(index: index, trustStore: store,
                                       schedule: TargetSchedule(nextDue: now.adding(window * slot), consecutiveFailures: 0))
        }
        return result
    }

    /// Whether the scheduler's queue runs a block within `timeout` seconds (it is not stuck).
    func answers(within timeout: Double) -> Bool {
        queue.answer(within: timeout) { () } != nil
    }

    /// Replaces the configuration (SIGHUP): new targets are added, removed ones stop being
    /// scheduled (a scan in flight finishes), unchanged ones keep their timing and backoff.
    func apply(_ configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore]) {
        queue.sync {
            let before = Set(entries.keys)
            entries = Self.entries(for: configuration, trustStores: trustStores, keeping: entries,
                                   of: self.configuration.targets, now: .now)
            self.configuration = configuration
            source.targetsChanged(reloaded: true)
            pool.grow(to: configuration.concurrency)
            let after = Set(entries.keys)
            logger.notice("configuration applied", metadata: [
                "targets": "\(after.count)", "added": "\(after.subtracting(before).count)",
                "removed": "\(before.subtracting(after).count)",
            ])
        }
    }

    /// Asks the work source for what is due (on each tick, and when the source asks again).
    func launchDueTargets() {
        guard !stopping else { return }
        noticeClockStep()
        source.launchDue(now: .now)
    }

    /// A wall-clock step (NTP, a VM restored from a snapshot, `date -s`) moves no due time (they are
    /// on the monotonic clock) but does move the times scans are recorded at: logged and counted.
    private func noticeClockStep() {
        let wall = Date().timeIntervalSince1970
        let offset = wall - ProcessInfo.processInfo.systemUptime
        defer {
            wallClockOffset = offset
            latestWallClock = max(latestWallClock ?? wall, wall)
        }
        guard let previous = wallClockOffset, abs(offset - previous) > 2 else { return }
        let step = offset - previous
        logger.warning("the wall clock stepped \(step < 0 ? "back" : "forward") by \(Int(abs(step).rounded())) s: schedules keep to the monotonic clock; scans are recorded at the new wall-clock time", metadata: [
            "step_s": "\(Int(step.rounded()))",
        ])
        onClockStep?(step)
    }

    // MARK: - What a work source reads and does (on `queue`)

    /// The scheduler's queue, where a work source's state lives and its answers come back.
    var callbackQueue: DispatchQueue { queue }

    /// Workers free for another scan.
    var freeWorkers: Int { configuration.concurrency - running }

    /// Every target's key.
    var targetKeys: [String] { Array(entries.keys) }

    /// How many targets there are.
    var targetCount: Int { entries.count }

    /// A target's settings and schedule, nil for a key the configuration no longer has.
    func target(_ key: String) -> (settings: TargetConfiguration, schedule: TargetSchedule)? {
        entries[key].map { (configuration.targets[$0.index], $0.schedule) }
    }

    /// Moves a target's next due time.
    func setNextDue(_ key: String, _ due: SchedulerTime) { entries[key]?.schedule.nextDue = due }

    /// Whether a scan of `key` is running.
    func isInFlight(_ key: String) -> Bool { inFlight.contains(key) }

    /// Whether the host of `key` has a scan slot free under its per-host cap.
    func hostHasRoom(for key: String) -> Bool {
        guard let entry = entries[key] else { return false }
        return perHost[configuration.targets[entry.index].host, default: 0] < configuration.perHostConcurrency
    }

    /// Tells the metrics how many scans are due but waiting and how many run.
    func reportQueue(waiting: Int) { onQueueLength?(waiting, running) }

    /// Starts a scan of `key` on a worker; its results come back to `complete` on the queue.
    func launch(_ key: String) {
        guard let entry = entries[key] else { return }
        inFlight.insert(key)
        running += 1
        let target = configuration.targets[entry.index]
        perHost[target.host, default: 0] += 1
        idle.enter()
        let store = entry.trustStore
        let node = self.node
        let launchedBehind = wallClockStandsBehind()
        pool.submit { [self] in
            let scans = scanner.scans(of: target, trustStore: store, node: node)
            // Handed to the writer from the scheduler's queue, under what the source holds then
            // (a fleet claim renewed by a new lease while the scan ran has a newer epoch).
            queue.async { self.measured { $0.complete(target, scans: scans, launchedBehind: launchedBehind) } }
        }
    }

    /// Whether the wall clock now stands more than 2 s behind the latest time it has shown (stepped back).
    private func wallClockStandsBehind() -> Bool {
        latestWallClock.map { Date().timeIntervalSince1970 < $0 - 2 } ?? false
    }

    /// `launchedBehind`: the wall clock stood behind when the scan was launched. A scan started
    /// while the clock stood back and finished after it jumped forward again is recorded at a
    /// time older than ones already recorded, as is one finished while it still stands back.
    private func complete(_ target: TargetConfiguration, scans: [StoredScan], launchedBehind: Bool) {
        running -= 1
        perHost[target.host, default: 1] -= 1
        if perHost[target.host] == 0 { perHost[target.host] = nil }
        inFlight.remove(target.key)
        defer { idle.leave() }
        var scans = scans
        let sourceFailures = source.finishing(target.key, scans: &scans)
        if launchedBehind || wallClockStandsBehind() {
            for index in scans.indices { scans[index].afterClockStepBack = true }
        }
        writer.submit(scans)
        recentCompletions.record(at: ProcessInfo.processInfo.systemUptime)
        completedTotal += 1
        guard var entry = entries[target.key] else { // removed by a reload meanwhile
            source.finished(target.key, schedule: nil)
            return
        }
        entry.scans += 1
        if let sourceFailures { entry.schedule.consecutiveFailures = sourceFailures }
        let unreachable = scans.allSatisfy { $0.result.status == .failed && $0.result.handshake == nil && $0.result.chain == nil }
        if unreachable {
            entry.schedule.consecutiveFailures += 1
            let backoff = min(max(target.interval, configuration.maxBackoff),
                              target.interval * pow(2, Double(min(entry.schedule.consecutiveFailures, 20))))
            entry.schedule.nextDue = .now.adding(backoff)
            logger.warning("target unreachable", metadata: [
                "target": "\(target.key)", "failures": "\(entry.schedule.consecutiveFailures)",
                "reason": "\(scans.first?.result.error?.description ?? "?")", "next_attempt_s": "\(Int(backoff))",
            ])
        } else {
            if entry.schedule.consecutiveFailures > 0 {
                logger.notice("target reachable again", metadata: ["target": "\(target.key)"])
            }
            entry.schedule.consecutiveFailures = 0
            entry.schedule.nextDue = .now.adding(target.interval)
        }
        entries[target.key] = entry
        onScanCompleted?(target.key, entry.scans)
        source.finished(target.key, schedule: entry.schedule)
    }

    /// Runs `work` on the scheduler's queue (the caller is on it), adding its CPU time to `schedulingCPU`.
    private func measured(_ work: (ScanScheduler) -> Void) {
        let started = Self.threadCPUSeconds()
        work(self)
        schedulingCPU += Self.threadCPUSeconds() - started
    }

    private static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Stops launching scans, waits for those in flight until `deadline`, and returns how many
    /// were still running then (their results are not stored).
    func stop(deadline: Date) -> Int {
        queue.sync {
            stopping = true
            timer?.cancel()
            timer = nil
            logger.notice("scheduler stopping", metadata: [
                "targets": "\(entries.count)", "scans": "\(completedTotal)",
                "scheduling_cpu_ms": "\(Int(schedulingCPU * 1000))",
                "scheduling_cpu_us_per_scan": "\(completedTotal > 0 ? Int(schedulingCPU * 1e6 / Double(completedTotal)) : 0)",
            ])
        }
        let waited = idle.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow))
        return waited == .success ? 0 : queue.sync { running }
    }

    /// Scans completed over the last minute and since the start (on `queue`).
    var completions: (lastMinute: Int, total: Int64) {
        (recentCompletions.count(at: ProcessInfo.processInfo.systemUptime), completedTotal)
    }

    /// Completed scans per target so far.
    func scanCounts() -> [String: Int] {
        queue.sync { entries.mapValues(\.scans) }
    }

    /// A cheap round trip through the scheduler queue: the watchdog pings only when this returns.
    func isResponsive(within seconds: Double) -> Bool {
        let done = DispatchSemaphore(value: 0)
        queue.async { done.signal() }
        return done.wait(timeout: .now() + seconds) == .success
    }
}

extension AddressSetting {
    /// The resolver filter for this setting (an explicit list is handled as connect-to addresses).
    var selection: AddressSelection {
        switch self {
        case .all, .list: .all
        case .ipv4: .ipv4
        case .ipv6: .ipv6
        }
    }
}
