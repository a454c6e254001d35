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
/// launches due targets, and a fixed pool of worker threads runs the blocking probes (a probe
/// waits in poll(2); the pool's size, not the number of targets, bounds the threads).
///
/// Guarantees: per-target interval; first runs spread over a start-up window; a global cap and a
/// per-host cap on scans in flight; never two scans of one target at once; exponential backoff
/// for unreachable targets; every scan bounded by its timeouts.
///
/// In a fleet (`fleet` set), the due times, the backoff and the per-host cap are the fleet's: the
/// scheduler claims due scans from PostgreSQL instead of reading its own clock, and writes each
/// finished scan's next due time back. While PostgreSQL does not answer, the nodes split the
/// targets among themselves (rendezvous hashing over the nodes alive at the last heartbeat) and
/// each scans its share on its own schedule until it does.
final class ScanScheduler: @unchecked Sendable {
    // @unchecked: every mutable property below is only touched on `queue`.
    private let queue = DispatchQueue(label: "tlsaudit.scheduler")
    private var timer: DispatchSourceTimer?
    private let logger: Logger
    private let scanner: TLSScanner
    private let writer: ResultWriter
    private let pool: JobPool
    private let idle = DispatchGroup()

    /// A target's scheduling state. Its settings stay in `configuration.targets` (at `index`):
    /// a copy here would double the largest structure the service holds (100,000 targets: 60 MB).
    private struct Entry {
        var index: Int
        var trustStore: TrustStore
        var nextDue: SchedulerTime
        var consecutiveFailures = 0
        var scans = 0
    }

    private var entries: [String: Entry] = [:]
    /// The entries by due time (standalone; in a fleet, PostgreSQL's queue says what is due).
    private var dueQueue = DueQueue()
    /// When the queue length was last reported (counting the due targets costs one visit each).
    private var queueReportedAt = SchedulerTime.distantPast
    private var configuration: ServiceConfiguration
    private var running = 0
    /// Targets with a scan in flight, kept apart from `entries` so that a reload that removes and
    /// re-adds a target cannot start a second scan of it.
    private var inFlight: Set<String> = []
    private var perHost: [String: Int] = [:]
    private var stopping = false
    /// Fleet mode: the work queue and the claims in flight.
    private let fleet: FleetWork?
    private var claims: [String: FleetClaim] = [:]
    private var claimPending = false
    private var nextClaimAt = SchedulerTime.distantPast
    private var lastClaimFull = false
    /// The last claim got fewer scans than asked for while due work stayed unclaimed (its hosts
    /// at their caps): a lease this node releases is claimed again at once, not after a poll.
    private var dueWorkLeft = false
    /// A scan under a claim completed since the last claim was sent.
    private var completedSinceClaim = false
    private var fleetReachable = true
    /// Fleet mode: no claim before the node runs a fleet configuration version (`apply`), or
    /// it would claim targets it does not know and give them back.
    private var runsFleetConfiguration = false
    /// Fleet mode, as of the last heartbeat: when each work row is due, and the nodes alive.
    private var fleetDue: [FleetRowKey: SchedulerTime] = [:]
    private var liveNodes: [FleetView.Node] = []
    /// While PostgreSQL does not answer: this node's share of the targets (by key), scanned on
    /// its own schedule until PostgreSQL answers again.
    private var outageShare: [String: FleetClaim] = [:]
    /// Scans completed in each of the last 60 seconds (the heartbeat's scans per minute), and in all.
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
    var onQueue: (@Sendable (Int, Int) -> Void)?
    /// Called on the scheduler's queue when the wall clock stepped (by the seconds given, negative: back).
    var onClockStep: (@Sendable (Double) -> Void)?
    /// Wall-clock time less monotonic time at the last tick: a change of more than 2 s is a step.
    private var wallClockOffset: Double?
    /// The latest wall-clock time seen at a tick: while the wall clock stands more than 2 s behind
    /// it (stepped back, until it passes that time again), scans are recorded at times older than
    /// ones already recorded (`StoredScan.afterClockStepBack`).
    private var latestWallClock: Double?

    init(configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore], scanner: TLSScanner,
         writer: ResultWriter, logger: Logger, fleet: FleetWork? = nil) {
        self.fleet = fleet
        node = fleet == nil ? nil : configuration.node
        self.configuration = configuration
        self.scanner = scanner
        self.writer = writer
        self.logger = logger
        pool = JobPool(threads: configuration.concurrency)
        entries = Self.entries(for: configuration, trustStores: trustStores, keeping: [:], now: .now)
        rebuildDueQueue()
    }

    /// The settings of an entry's target.
    private func target(of entry: Entry) -> TargetConfiguration { configuration.targets[entry.index] }

    /// The due times afresh (at the start, after a reload, as a fleet's outage begins and ends):
    /// every entry's standalone; in a fleet, those of this node's outage share (none while
    /// PostgreSQL answers: its queue says what is due).
    private func rebuildDueQueue() {
        let keys = fleet == nil ? Array(entries.keys) : Array(outageShare.keys)
        dueQueue = DueQueue(keys.compactMap { key in entries[key].map { DueQueue.Item(due: $0.nextDue, key: key) } })
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
                    existing.nextDue = min(existing.nextDue, now.adding(target.interval))
                }
                existing.index = index
                existing.trustStore = store
                result[target.key] = existing
                continue
            }
            let window = min(target.interval, rounds * 2)
            let slot = Double(StableHash.fnv1a(target.key) % 10_000) / 10_000
            result[target.key] = Entry(index: index, trustStore: store, nextDue: now.adding(window * slot))
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
            rebuildDueQueue()
            self.configuration = configuration
            runsFleetConfiguration = true
            pool.grow(to: configuration.concurrency)
            let after = Set(entries.keys)
            logger.notice("configuration applied", metadata: [
                "targets": "\(after.count)", "added": "\(after.subtracting(before).count)",
                "removed": "\(before.subtracting(after).count)",
            ])
        }
    }

    private func launchDueTargets() {
        guard !stopping else { return }
        noticeClockStep()
        if let fleet {
            launchClaimedTargets(fleet)
            return
        }
        launchDueFromQueue(now: .now)
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

    /// Launches due targets, earliest first, within the global and per-host caps: O(log n) per
    /// target launched (or skipped). A target whose host is at its cap waits for the next tick;
    /// at most `concurrency` such targets are looked at per tick. In a fleet's outage, a target of
    /// this node's share is launched under its share's claim.
    private func launchDueFromQueue(now: SchedulerTime) {
        var waitingForHost: [DueQueue.Item] = []
        var launched = 0
        while running < configuration.concurrency, waitingForHost.count < configuration.concurrency,
              let first = dueQueue.first, first.due <= now {
            dueQueue.popFirst()
            // Stale: the target was removed, is in flight, or is due at another time now.
            guard let entry = entries[first.key], entry.nextDue == first.due, !inFlight.contains(first.key) else { continue }
            let host = configuration.targets[entry.index].host
            guard perHost[host, default: 0] < configuration.perHostConcurrency else {
                waitingForHost.append(first)
                continue
            }
            if let share = outageShare[first.key] { claims[first.key] = share }
            launch(first.key)
            launched += 1
        }
        for item in waitingForHost { dueQueue.push(item) }
        if now.interval(since: queueReportedAt) >= 1 || launched > 0 && running < configuration.concurrency {
            queueReportedAt = now
            onQueue?(dueQueue.countDue(at: now, limit: entries.count), running)
        }
    }

    /// Fleet mode: claims as many due scans as there are free workers: again at once when the
    /// claim filled them all; as soon as a scan completes when due work was left behind its hosts'
    /// caps (the completion is written first, so its lease no longer counts); else after a
    /// jittered poll. While PostgreSQL does not answer, scans this node's share of the targets
    /// when due, and tries to reach it every poll.
    private func launchClaimedTargets(_ fleet: FleetWork) {
        let now = SchedulerTime.now
        let poll = configuration.fleet.poll
        if !fleetReachable {
            launchDueFromQueue(now: now)
            guard !claimPending, now >= nextClaimAt else { return }
            claimPending = true
            fleet.reconnect(callbackQueue: queue) { [self] reached in
                claimPending = false
                guard reached else {
                    nextClaimAt = .now.adding(poll)
                    return
                }
                // The other nodes write what they scanned meanwhile at their first contact, within
                // a poll: claiming waits two, so that nothing they just scanned is claimed as due.
                logger.notice("PostgreSQL answers again: what this node scanned meanwhile is written; claiming from the fleet's queue again")
                fleetReachable = true
                outageShare = [:]
                rebuildDueQueue()
                nextClaimAt = .now.adding(2 * poll)
            }
            return
        }
        let free = configuration.concurrency - running
        // After a full claim, claim again once a quarter of the workers are free (not for every
        // one: each claim is a transaction); after one that left due work behind its hosts' caps,
        // when one of this node's scans completed; otherwise at the next (jittered) poll, which
        // bounds how late the node sees work it was not told about.
        let due = now >= nextClaimAt && (!lastClaimFull || free >= max(1, configuration.concurrency / 4))
            || dueWorkLeft && completedSinceClaim
        guard runsFleetConfiguration, !claimPending, due, free > 0 else { return }
        claimPending = true
        completedSinceClaim = false
        fleet.claim(limit: free, perHostCap: configuration.perHostConcurrency, lease: configuration.fleet.lease,
                    callbackQueue: queue) { [self] outcome in
            claimPending = false
            switch outcome {
            case .success(let result):
                let claimed = result.claims
                var unknown: [FleetClaim] = []
                for claim in claimed {
                    // Its own scan still running (its lease ran out meanwhile): keeping the new lease
                    // keeps the target this node's, renewed with the scan in flight and cleared when
                    // it completes; giving it back would let another node scan it at the same time.
                    // The new claim (a new lease epoch) is the one its result is written under.
                    if inFlight.contains(claim.target) {
                        if claims[claim.target] != nil { claims[claim.target] = claim }
                        continue
                    }
                    guard !stopping, entries[claim.target] != nil else {
                        unknown.append(claim)
                        continue
                    }
                    claims[claim.target] = claim
                    launch(claim.target)
                }
                fleet.release(unknown)
                // A full claim: more may be due, claim again on the next tick. Otherwise after a
                // poll, jittered: nodes' claims fall at random phases, so the work due spreads
                // over them instead of going to whichever polls first after each due time.
                lastClaimFull = claimed.count >= free && unknown.isEmpty
                nextClaimAt = lastClaimFull ? .now : .now.adding(poll * Double.random(in: 0.5...1.5))
                // Scans given back are due again at once: not claimed again before the poll.
                dueWorkLeft = result.dueLeft && unknown.isEmpty
                // Scans that completed while this claim ran have released their leases by now.
                if dueWorkLeft && completedSinceClaim { launchDueTargets() }
            case .failure(let error) where (error as? StoreError)?.kind != .unavailable:
                // PostgreSQL answered with an error (a timeout, a deadlock): not an outage; the
                // others go on claiming, so this node must not scan a share of its own.
                logger.error("cannot claim scans: \(error); trying again after a poll")
                dueWorkLeft = false
                nextClaimAt = .now.adding(poll)
            case .failure(let error):
                fleetReachable = false
                dueWorkLeft = false
                beginOutage()
                logger.error("cannot claim scans: \(error); scanning this node's share (\(outageShare.count) of \(entries.count) targets) until PostgreSQL answers")
                nextClaimAt = .now.adding(poll)
            }
        }
    }

    /// The work row a target has for this node: `*` (any vantage), this node's vantage, or none.
    private func rowVantage(_ target: TargetConfiguration) -> String? {
        guard let node else { return nil }
        switch target.vantages {
        case .any: return FleetVantages.anyRow
        case .all: return node.vantage
        case .list(let names): return names.contains(node.vantage) ? node.vantage : nil
        }
    }

    /// PostgreSQL stopped answering: every node splits the targets the same way, from the same
    /// view of the live nodes (rendezvous hashing: each row goes to the live node, of its vantage
    /// for a vantage row, with the highest hash of target and node name), so each target is
    /// scanned by one node. A row due already counts as just scanned (some node may have it in
    /// flight): due again after its interval.
    private func beginOutage() {
        guard let node else { return }
        let me = FleetView.Node(name: node.name, vantage: node.vantage)
        let nodes = liveNodes.contains(me) ? liveNodes : liveNodes + [me]
        let now = SchedulerTime.now
        outageShare = [:]
        for (key, entry) in entries {
            let target = target(of: entry)
            guard let vantage = rowVantage(target) else { continue }
            let candidates = vantage == FleetVantages.anyRow ? nodes : nodes.filter { $0.vantage == vantage }
            let owner = candidates.max { StableHash.fnv1a(key + "\u{0}" + $0.name) < StableHash.fnv1a(key + "\u{0}" + $1.name) }
            guard owner?.name == node.name else { continue }
            outageShare[key] = FleetClaim(target: key, vantage: vantage, consecutiveFailures: entry.consecutiveFailures)
            let due = fleetDue[FleetRowKey(target: key, vantage: vantage)] ?? now
            entries[key]?.nextDue = due > now ? due : now.adding(target.interval)
        }
        rebuildDueQueue()
    }

    /// What the last heartbeat saw of the fleet.
    func see(_ view: FleetView) {
        queue.async { [self] in
            let now = SchedulerTime.now
            for (key, due) in view.dueIn { fleetDue[key] = now.adding(due) }
            liveNodes = view.live
        }
    }

    private func launch(_ key: String) {
        guard let entry = entries[key] else { return }
        inFlight.insert(key)
        running += 1
        let target = target(of: entry)
        perHost[target.host, default: 0] += 1
        idle.enter()
        let store = entry.trustStore
        pool.submit { [self] in
            let scans = self.scan(target, trustStore: store)
            // Handed to the writer from the scheduler's queue, under the claim held now (a claim
            // renewed by a new lease while the scan ran has a newer epoch than at the launch).
            self.queue.async { self.measured { $0.complete(target, scans: scans) } }
        }
    }

    /// Runs on a worker thread: resolve, probe each address, package the results.
    private func scan(_ configured: TargetConfiguration, trustStore: TrustStore) -> [StoredScan] {
        scanner.scans(of: configured, trustStore: trustStore, node: node)
    }

    private func complete(_ target: TargetConfiguration, scans: [StoredScan]) {
        running -= 1
        perHost[target.host, default: 1] -= 1
        if perHost[target.host] == 0 { perHost[target.host] = nil }
        inFlight.remove(target.key)
        defer { idle.leave() }
        let claim = claims.removeValue(forKey: target.key)
        defer { if claim?.epoch != nil { claimAgainAfterCompletion() } }
        // The fleet claim's token goes with each result: PostgreSQL refuses the write once it is lost.
        var scans = scans
        if let fence = claim?.fence { for index in scans.indices { scans[index].fence = fence } }
        if let latest = latestWallClock, Date().timeIntervalSince1970 < latest - 2 {
            for index in scans.indices { scans[index].afterClockStepBack = true }
        }
        writer.submit(scans)
        recentCompletions.record(at: ProcessInfo.processInfo.systemUptime)
        completedTotal += 1
        guard var entry = entries[target.key] else { // removed by a reload meanwhile
            if let claim { fleet?.completed(FleetCompletion(claim: claim, consecutiveFailures: 0, delay: 0,
                                                              endedAt: ProcessInfo.processInfo.systemUptime)) }
            return
        }
        entry.scans += 1
        // In a fleet, the failures in a row are the fleet's (whichever node saw them).
        if let claim { entry.consecutiveFailures = claim.consecutiveFailures }
        let unreachable = scans.allSatisfy { $0.result.status == .failed && $0.result.handshake == nil && $0.result.chain == nil }
        if unreachable {
            entry.consecutiveFailures += 1
            let backoff = min(max(target.interval, configuration.maxBackoff),
                              target.interval * pow(2, Double(min(entry.consecutiveFailures, 20))))
            entry.nextDue = .now.adding(backoff)
            logger.warning("target unreachable", metadata: [
                "target": "\(target.key)", "failures": "\(entry.consecutiveFailures)",
                "reason": "\(scans.first?.result.error?.description ?? "?")", "next_attempt_s": "\(Int(backoff))",
            ])
        } else {
            if entry.consecutiveFailures > 0 {
                logger.notice("target reachable again", metadata: ["target": "\(target.key)"])
            }
            entry.consecutiveFailures = 0
            entry.nextDue = .now.adding(target.interval)
        }
        entries[target.key] = entry
        if fleet == nil || outageShare[target.key] != nil { dueQueue.push(DueQueue.Item(due: entry.nextDue, key: target.key)) }
        if var claim {
            let delay = entry.nextDue.interval(since: .now)
            fleet?.completed(FleetCompletion(claim: claim, consecutiveFailures: entry.consecutiveFailures, delay: delay,
                                             endedAt: ProcessInfo.processInfo.systemUptime))
            claim.consecutiveFailures = entry.consecutiveFailures
            if outageShare[target.key] != nil { outageShare[target.key] = claim }
        }
        onScanCompleted?(target.key, entry.scans)
    }

    /// Fleet mode: a scan under a claim completed; its completion is queued before any claim, so
    /// its lease is released first. Claims again at once when the last claim left due work behind.
    private func claimAgainAfterCompletion() {
        guard let fleet, fleetReachable, !stopping else { return }
        completedSinceClaim = true
        launchClaimedTargets(fleet)
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

    /// What the fleet heartbeat reports: the claims in flight (their leases are renewed), scans
    /// per minute over the last minute, and scans completed since the start.
    func fleetHeartbeat(configurationVersion: Int64?) -> FleetHeartbeat {
        queue.sync {
            FleetHeartbeat(configurationVersion: configurationVersion, inFlight: Array(claims.values),
                                  scansPerMinute: Double(recentCompletions.count(at: ProcessInfo.processInfo.systemUptime)),
                                  scansTotal: completedTotal, poll: configuration.fleet.poll, lease: configuration.fleet.lease)
        }
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

/// A pool of long-lived worker threads pulling jobs from a queue. Jobs block (in poll), so
/// the thread count is the concurrency; it can grow on reload but never shrinks below it.
final class JobPool: Sendable {
    private let state = Mutex<(jobs: [@Sendable () -> Void], threads: Int)>(([], 0))
    private let available = DispatchSemaphore(value: 0)

    init(threads: Int) { grow(to: threads) }

    func grow(to count: Int) {
        let toStart = state.withLock { state -> Int in
            let missing = max(0, count - state.threads)
            state.threads += missing
            return missing
        }
        for _ in 0..<toStart {
            let thread = Thread { [self] in
                while true {
                    available.wait()
                    let job = state.withLock { $0.jobs.isEmpty ? nil : $0.jobs.removeFirst() }
                    job?()
                }
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        state.withLock { $0.jobs.append(job) }
        available.signal()
    }
}
