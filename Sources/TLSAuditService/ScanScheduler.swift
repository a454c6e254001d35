import Foundation
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
final class ScanScheduler: @unchecked Sendable {
    // @unchecked: every mutable property below is only touched on `queue`.
    private let queue = DispatchQueue(label: "tlsaudit.scheduler")
    private var timer: DispatchSourceTimer?
    private let logger: Logger
    private let scanner: TLSScanner
    private let writer: ResultWriter
    private let pool: JobPool
    private let idle = DispatchGroup()

    private struct Entry {
        var target: TargetConfiguration
        var trustStore: TrustStore
        var nextDue: Date
        var consecutiveFailures = 0
        var scans = 0
    }

    private var entries: [String: Entry] = [:]
    private var configuration: ServiceConfiguration
    private var running = 0
    /// Targets with a scan in flight, kept apart from `entries` so that a reload that removes and
    /// re-adds a target cannot start a second scan of it.
    private var inFlight: Set<String> = []
    private var perHost: [String: Int] = [:]
    private var stopping = false
    /// Called on the scheduler queue after each completed target scan (tests and the demo watch it).
    var onScanCompleted: (@Sendable (String, Int) -> Void)?

    init(configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore], scanner: TLSScanner,
         writer: ResultWriter, logger: Logger) {
        self.configuration = configuration
        self.scanner = scanner
        self.writer = writer
        self.logger = logger
        pool = JobPool(threads: configuration.concurrency)
        entries = Self.entries(for: configuration, trustStores: trustStores, keeping: [:], now: Date())
    }

    /// Starts the timer. First runs are spread over a window that grows with the number of
    /// targets per worker, so a thousand targets do not all connect in the first second.
    func start() {
        queue.sync {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now(), repeating: .milliseconds(100), leeway: .milliseconds(20))
            timer.setEventHandler { [weak self] in self?.launchDueTargets() }
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
                                keeping old: [String: Entry], now: Date) -> [String: Entry] {
        let rounds = max(1.0, Double(configuration.targets.count) / Double(configuration.concurrency))
        var result: [String: Entry] = [:]
        for target in configuration.targets {
            guard let store = trustStores[target.trust] else { continue }
            if var existing = old[target.key] {
                if existing.target.interval != target.interval {
                    existing.nextDue = min(existing.nextDue, now.addingTimeInterval(target.interval))
                }
                existing.target = target
                existing.trustStore = store
                result[target.key] = existing
                continue
            }
            let window = min(target.interval, rounds * 2)
            let slot = Double(StableHash.fnv1a(target.key) % 10_000) / 10_000
            result[target.key] = Entry(target: target, trustStore: store, nextDue: now.addingTimeInterval(window * slot))
        }
        return result
    }

    /// Replaces the configuration (SIGHUP): new targets are added, removed ones stop being
    /// scheduled (a scan in flight finishes), unchanged ones keep their timing and backoff.
    func apply(_ configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore]) {
        queue.sync {
            let before = Set(entries.keys)
            entries = Self.entries(for: configuration, trustStores: trustStores, keeping: entries, now: Date())
            self.configuration = configuration
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
        let now = Date()
        let due = entries.values.filter { !inFlight.contains($0.target.key) && $0.nextDue <= now }.sorted { $0.nextDue < $1.nextDue }
        for entry in due {
            guard running < configuration.concurrency else { break }
            let host = entry.target.host
            guard perHost[host, default: 0] < configuration.perHostConcurrency else { continue }
            launch(entry.target.key)
        }
    }

    private func launch(_ key: String) {
        guard let entry = entries[key] else { return }
        inFlight.insert(key)
        running += 1
        perHost[entry.target.host, default: 0] += 1
        idle.enter()
        let target = entry.target
        let store = entry.trustStore
        pool.submit { [self] in
            let scans = self.scan(target, trustStore: store)
            self.writer.submit(scans)
            self.queue.async { self.complete(target, scans: scans) }
        }
    }

    /// Runs on a worker thread: resolve, probe each address, package the results.
    private func scan(_ configured: TargetConfiguration, trustStore: TrustStore) -> [StoredScan] {
        let target = configured.scanTarget
        let started = Date()
        var results: [AddressScanResult] = []
        switch scanner.addresses(for: target, selection: configured.addresses.selection) {
        case .success(let addresses):
            results = addresses.map { scanner.probe($0, target: target, trustStore: trustStore) }
        case .failure(let failure):
            results = [AddressScanResult(address: "-", family: "none", port: configured.port, status: .failed,
                                         startedAt: started, durationMs: Int(Date().timeIntervalSince(started) * 1000),
                                         handshake: nil, error: failure, chain: nil, findings: [],
                                         ats: AddressAssessment.notScanned(configured.policy))]
        }
        return results.map { StoredScan(target: configured.key, host: configured.host, port: configured.port,
                                        sni: target.sni, result: $0) }
    }

    private func complete(_ target: TargetConfiguration, scans: [StoredScan]) {
        running -= 1
        perHost[target.host, default: 1] -= 1
        if perHost[target.host] == 0 { perHost[target.host] = nil }
        inFlight.remove(target.key)
        defer { idle.leave() }
        guard var entry = entries[target.key] else { return } // removed by a reload meanwhile
        entry.scans += 1
        let unreachable = scans.allSatisfy { $0.result.status == .failed && $0.result.handshake == nil && $0.result.chain == nil }
        if unreachable {
            entry.consecutiveFailures += 1
            let backoff = min(max(target.interval, configuration.maxBackoff),
                              target.interval * pow(2, Double(min(entry.consecutiveFailures, 20))))
            entry.nextDue = Date().addingTimeInterval(backoff)
            logger.warning("target unreachable", metadata: [
                "target": "\(target.key)", "failures": "\(entry.consecutiveFailures)",
                "reason": "\(scans.first?.result.error?.description ?? "?")", "next_attempt_s": "\(Int(backoff))",
            ])
        } else {
            if entry.consecutiveFailures > 0 {
                logger.notice("target reachable again", metadata: ["target": "\(target.key)"])
            }
            entry.consecutiveFailures = 0
            entry.nextDue = Date().addingTimeInterval(target.interval)
        }
        entries[target.key] = entry
        onScanCompleted?(target.key, entry.scans)
    }

    /// Stops launching scans, waits for those in flight until `deadline`, and returns how many
    /// were still running then (their results are not stored).
    func stop(deadline: Date) -> Int {
        queue.sync {
            stopping = true
            timer?.cancel()
            timer = nil
        }
        let waited = idle.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow))
        return waited == .success ? 0 : queue.sync { running }
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
