import COpenSSL
public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
public import TLSAuditModel
import TLSAuditSupport

/// Which resolved addresses to probe.
public enum AddressSelection: String, Sendable, CaseIterable {
    case all
    case ipv4
    case ipv6
}

/// How a scan connects and what it trusts.
public struct ScanOptions: Sendable {
    /// Bound, in seconds, on each of: name resolution, TCP connect, TLS handshake.
    public var timeout: Double
    /// Addresses probed at once.
    public var concurrency: Int
    public var trustStore: TrustStore
    public var clientCredentials: ClientCredentials?
    public var addresses: AddressSelection
    /// The moment certificates are judged at; `nil` means the time of each probe.
    public var evaluationTime: Date?
    /// Revocation checking of targets that do not set their own (soft-fail by default).
    public var revocation: RevocationMode
    /// Where revocation answers are kept across restarts (the service's database).
    public var revocationAnswers: (any RevocationAnswerStore)?
    /// Fetch an intermediate the server does not send from its caIssuers URL, for targets that do
    /// not set their own (off by default: most clients do not).
    public var aiaFetch = false
    /// The Certificate Transparency log list SCTs are verified against (`--ct-log-list`, `ct: {log_list:}`).
    public var ctLogs: CTLogList = .shipped
    /// The date-bounded distrust to judge chains by (nil: the shipped table, by the policy's vendor).
    public var distrust: DistrustSetting?
    /// Connections at once to one address for a target's opt-in checks (`checks:`): the service
    /// uses 1, so that a scan holds one connection of its host's budget (`per_host_concurrency`).
    public var checkConnections = 5
    /// Checks beyond `AddressChecks.shipped` a target may ask for, run after the shipped ones in
    /// this order (a program's own: the shipped ones, which policies judging a whole configuration
    /// need, always run).
    public var additionalChecks: [any AddressCheck] = []

    public init(timeout: Double = SettingBounds.timeout.defaultValue, concurrency: Int = SettingBounds.concurrency.defaultValue,
                trustStore: TrustStore, clientCredentials: ClientCredentials? = nil, addresses: AddressSelection = .all,
                evaluationTime: Date? = nil, revocation: RevocationMode = SettingBounds.revocation) {
        self.timeout = timeout
        self.concurrency = concurrency
        self.trustStore = trustStore
        self.clientCredentials = clientCredentials
        self.addresses = addresses
        self.evaluationTime = evaluationTime
        self.revocation = revocation
    }
}

/// How the scanner's caller judges what the probe saw at an address (`AddressAssessment.judge`).
public typealias AddressJudge = @Sendable (ProbedAddress, ScanTarget) -> AddressScanResult

/// Scans targets: resolves each name to all its addresses, probes every address with an
/// ATS-shaped ClientHello (and a permissive one when that is refused), builds the chain, fetches
/// revocation answers, and hands what it saw to the caller's judge.
public final class TLSScanner: Sendable {
    public let options: ScanOptions
    /// The caller's judge, applied to each address as it is probed (so that results can be stored
    /// while the rest are scanned); the probe itself judges nothing.
    let judge: AddressJudge
    /// Configured client contexts by client identity and ClientHello profile (the enumerator uses
    /// them too), made on first use: `SSL_CTX_new` costs OpenSSL 3 some 2.7 million instructions,
    /// and a scan of a server that takes the default policy's hello uses one profile of the three.
    /// The scan's own identity's (none, or `options.clientCredentials`) with the default policy's
    /// profile is made at init, so that an identity that does not load fails the scanner; a
    /// target's own identity (`ScanTarget.clientCredentials`) loads at its first probe.
    private let contexts: Mutex<[ContextKey: ClientContext]>

    private struct ContextKey: Hashable {
        var credentials: ClientCredentials?
        var profile: ClientProfile
    }
    /// A CT log list that replaced `options.ctLogs` while the process runs (the service's refresh).
    private let refreshedCTLogs = Mutex<CTLogList?>(nil)

    /// The CT log list SCTs are checked against now: the refreshed one, else the options'.
    public var ctLogs: CTLogList { refreshedCTLogs.withLock { $0 } ?? options.ctLogs }

    /// Makes `list` the one every later scan checks SCTs against.
    public func replaceCTLogs(_ list: CTLogList) { refreshedCTLogs.withLock { $0 = list } }

    private let refreshedDistrust = Mutex<DistrustTable?>(nil)

    /// The distrust table in force: the refreshed one, else the options' (nil: the shipped one).
    public var distrustTable: DistrustTable? { refreshedDistrust.withLock { $0 } ?? options.distrust?.table }

    /// Makes `table` the one every later scan judges date-bounded distrust by.
    public func replaceDistrustTable(_ table: DistrustTable) { refreshedDistrust.withLock { $0 = table } }

    private let lastInputChange = Mutex<(label: String, at: Date)?>(nil)

    /// Notes that a refresh put the input `label` in force at `time` (for `judgedWith`).
    public func noteInputChange(_ label: String, at time: Date) { lastInputChange.withLock { $0 = (label, time) } }

    /// The trust inputs a scan against `store` is judged with now: the CT log list, the distrust
    /// table, and Apple's roots when `store` is theirs; with the input a refresh changed last.
    public func judgedWith(store: TrustStore) -> JudgedWith {
        var inputs = [ctLogs.version.label, (distrustTable ?? .shipped).version.label]
        if store.label == "apple" { inputs.append(TrustStore.appleRoots.version.label) }
        let change = lastInputChange.withLock { $0 }
        return JudgedWith(inputs: inputs, changed: change?.label, changedAt: change?.at)
    }

    /// The date-bounded distrust scans judge by: the options' setting with the table in force.
    public var distrust: DistrustSetting? {
        guard let table = refreshedDistrust.withLock({ $0 }) else { return options.distrust }
        var setting = options.distrust ?? DistrustSetting()
        setting.table = table
        return setting
    }

    public init(options: ScanOptions, judge: @escaping AddressJudge) throws {
        ignoreSIGPIPE
        self.options = options
        self.judge = judge
        let first = ContextKey(credentials: options.clientCredentials, profile: .atsRuntime)
        contexts = Mutex([first: try ClientContext(profile: first.profile, credentials: first.credentials)])
    }

    /// The scan's context for `profile` (presenting the scan's client identity, if any).
    func sharedContext(_ profile: ClientProfile) throws(ProbeFailure) -> ClientContext {
        try context(profile, credentials: options.clientCredentials)
    }

    /// The context for `profile` that presents `target`'s client identity (the scan's when it has none).
    func context(_ profile: ClientProfile, for target: ScanTarget) throws(ProbeFailure) -> ClientContext {
        try context(profile, credentials: target.clientCredentials ?? options.clientCredentials)
    }

    /// The context for `profile` presenting `credentials`, made on first use.
    private func context(_ profile: ClientProfile, credentials: ClientCredentials?) throws(ProbeFailure) -> ClientContext {
        let key = ContextKey(credentials: credentials, profile: profile)
        let made: Result<ClientContext, ProbeFailure> = contexts.withLock { contexts in
            if let known = contexts[key] { return .success(known) }
            do {
                let context = try ClientContext(profile: profile, credentials: credentials)
                contexts[key] = context
                return .success(context)
            } catch {
                if let credentials, credentials != options.clientCredentials {
                    return .failure(ProbeFailure(.internalError, "cannot load the client identity \(credentials.label): \(error)"))
                }
                return .failure(ProbeFailure(.internalError, "cannot make the \(profile.rawValue) client context: \(error)"))
            }
        }
        return try made.get()
    }

    /// Scans every target, `options.concurrency` addresses at a time. `progress` is called
    /// (from worker threads) after each address with the number done and the total known so far;
    /// `completed` once per target whose addresses are all probed (from a worker thread, with the
    /// target's index), so that callers can store results while the rest are still being scanned.
    public func scan(_ targets: [ScanTarget], progress: (@Sendable (Int, Int) -> Void)? = nil,
                     completed: (@Sendable (Int, TargetScanResult) -> Void)? = nil) -> [TargetScanResult] {
        scan(targets, progress: progress, completed: completed, until: nil).map { $0! }
    }

    /// `scan`, except that no address is begun once `stopped` returns true (an interrupted run): a
    /// target is nil unless every one of its addresses was probed (`completed` is called for those
    /// only). Probes begun before the stop are finished, each within its timeout.
    public func scan(_ targets: [ScanTarget], progress: (@Sendable (Int, Int) -> Void)? = nil,
                     completed: (@Sendable (Int, TargetScanResult) -> Void)? = nil,
                     until stopped: (@Sendable () -> Bool)?) -> [TargetScanResult?] {
        // Phase 1: resolve every target (bounded by the timeout each); literal addresses need no thread.
        let needsResolver = targets.contains { target in
            Self.destinations(of: target).contains { Resolver.numericAddress($0.host, port: $0.port) == nil }
        }
        let resolved: [Result<[SocketAddress], ProbeFailure>?] = needsResolver
            ? WorkerPool.map(targets, concurrency: options.concurrency, until: stopped) { self.addresses(for: $0) }
            : targets.map { self.addresses(for: $0) }
        // A target not resolved before the stop is not scanned.
        var unfinished = Set(resolved.indices.filter { resolved[$0] == nil })
        let resolutions = resolved.map { $0 ?? .success([]) }
        var results: [TargetScanResult] = targets.enumerated().map { index, target in
            let failure: ProbeFailure? = if case .failure(let error) = resolutions[index] { error } else { nil }
            var result = TargetScanResult(target: target.original, host: target.host, port: target.port, sni: target.sni,
                                          connectTo: target.connectTo.isEmpty ? nil : target.connectTo.map(\.description), error: failure,
                                          addresses: [])
            result.starttls = target.starttls
            result.implicitTLS = target.starttls == nil ? STARTTLSProtocol.implicitTLSService(port: target.port) : nil
            return result
        }
        // Phase 2: one job per address; `slot` is the address's place within its target.
        var jobs: [(target: Int, slot: Int, address: SocketAddress)] = []
        for (index, resolution) in resolutions.enumerated() {
            if case .success(let addresses) = resolution {
                jobs += addresses.enumerated().map { (index, $0, $1) }
            }
        }
        let total = jobs.count
        let done = Atomic<Int>(0)
        let skeletons = results
        // Each target's addresses as they finish, for `completed` (without it, nothing to gather).
        let slots = SleepingLock(completed == nil ? [] : resolutions.map { resolution in
            [AddressScanResult?](repeating: nil, count: (try? resolution.get())?.count ?? 0)
        })
        let probed = WorkerPool.map(jobs, concurrency: options.concurrency, until: stopped) { job in
            let result = self.probe(job.address, target: targets[job.target])
            let count = done.add(1, ordering: .relaxed).newValue
            progress?(count, total)
            if let completed {
                let finished: [AddressScanResult]? = slots.withLock { slots in
                    slots[job.target][job.slot] = result
                    let filled = slots[job.target].compactMap { $0 }
                    return filled.count == slots[job.target].count ? filled : nil
                }
                if let finished {
                    var target = skeletons[job.target]
                    target.addresses = AddressScanResult.sharingSSLv2Keys(finished)
                    completed(job.target, target)
                }
            }
            return result
        }
        for (job, result) in zip(jobs, probed) {
            guard let result else {
                unfinished.insert(job.target)
                continue
            }
            results[job.target].addresses.append(result)
        }
        for index in results.indices { results[index].addresses = AddressScanResult.sharingSSLv2Keys(results[index].addresses) }
        return results.indices.map { unfinished.contains($0) ? nil : results[$0] }
    }

    /// Scans one target.
    public func scan(_ target: ScanTarget) -> TargetScanResult {
        scan([target])[0]
    }

    /// Where a target is reached: its `connectTo` addresses when given, else its own host; each
    /// with its port (the target's when the address names none).
    static func destinations(of target: ScanTarget) -> [(host: String, port: Int)] {
        target.connectTo.isEmpty ? [(target.host, target.port)] : target.connectTo.map { ($0.host, $0.port ?? target.port) }
    }

    /// The addresses to probe: the `connectTo` addresses when given, else every A and AAAA record,
    /// filtered by `selection` (default: the scanner's option).
    public func addresses(for target: ScanTarget, selection: AddressSelection? = nil) -> Result<[SocketAddress], ProbeFailure> {
        let selection = selection ?? options.addresses
        let destinations = Self.destinations(of: target)
        do {
            var all: [SocketAddress] = []
            for destination in destinations {
                let found: [SocketAddress]
                if let literal = Resolver.numericAddress(destination.host, port: destination.port) {
                    found = [literal]
                } else {
                    found = try Resolver.resolve(host: destination.host, port: destination.port, timeout: target.timeout ?? options.timeout)
                }
                all += found.filter { !all.contains($0) }
            }
            let selected = all.filter { address in
                switch selection {
                case .all: true
                case .ipv4: address.family == .ipv4
                case .ipv6: address.family == .ipv6
                }
            }
            guard !selected.isEmpty else {
                let names = destinations.map(\.host).joined(separator: ", ")
                return .failure(ProbeFailure(.dnsFailure, "\(names) has no \(selection.rawValue) address"))
            }
            return .success(selected)
        } catch {
            return .failure(error)
        }
    }

    /// Probes one address: connect, the policy's handshake, permissive fallback when refused, judge.
    /// `trustStore` overrides the scanner's anchors for this target.
    public func probe(_ address: SocketAddress, target: ScanTarget, trustStore: TrustStore? = nil) -> AddressScanResult {
        let started = Date()
        let clock = ContinuousClock.now
        let timeout = target.timeout ?? options.timeout
        let firstProfile = target.policy.clientProfile
        var attempt: HandshakeAttempt
        var atsRefusal: String?
        // The handshake deadline starts after connect: connect and handshake are each bounded.
        var handshakeDeadline = Deadline(after: timeout)
        do {
            let socket = try TCPSocket.open(to: address, target: target, deadline: Deadline(after: timeout), timeout: timeout)
            handshakeDeadline = Deadline(after: timeout)
            attempt = HandshakeProbe.handshake(socket: socket, address: address, sni: target.sni, context: try context(firstProfile, for: target),
                                               deadline: handshakeDeadline, timeout: timeout)
        } catch {
            attempt = .failed(error)
        }
        if attempt.observation == nil, firstProfile != .permissive, let failure = attempt.failure,
           Self.worthRetryingPermissively(failure) {
            // An iOS-like ClientHello was refused: find out what the server does accept, within the same deadline.
            do {
                let socket = try TCPSocket.open(to: address, target: target, deadline: handshakeDeadline, timeout: timeout)
                let permissive = HandshakeProbe.handshake(socket: socket, address: address, sni: target.sni,
                                                          context: try context(.permissive, for: target), deadline: handshakeDeadline,
                                                          timeout: timeout)
                if permissive.observation != nil {
                    atsRefusal = failure.description
                    attempt = permissive
                } else if let second = permissive.failure {
                    var combined = second
                    combined.message += " (an ATS-shaped ClientHello also failed: \(failure.description))"
                    attempt = HandshakeAttempt(observation: nil, failure: combined,
                                               presented: permissive.presented.isEmpty ? attempt.presented : permissive.presented)
                }
            } catch where error.category == .internalError {
                // This tlsaudit could not send the permissive hello (its client context did not
                // configure): said, not taken for the server going away.
                var combined = error
                combined.message += " (an ATS-shaped ClientHello failed: \(failure.description))"
                attempt = HandshakeAttempt(observation: nil, failure: combined, presented: attempt.presented)
            } catch {
                // The server went away between attempts: report the first failure.
            }
        }
        let durationMs = milliseconds(since: clock)
        var probed = observe(attempt, address: address, target: target, trustStore: trustStore ?? options.trustStore,
                             atsRefusal: atsRefusal, started: started, durationMs: durationMs)
        // The opt-in checks, and everything a policy judging the whole configuration needs, before judging.
        let wholeConfiguration = target.policy.judgesWholeConfiguration
        if probed.failure == nil, !target.checks.isEmpty || wholeConfiguration {
            let enumerator = Enumerator(scanner: self, perHostConcurrency: options.checkConnections)
            if wholeConfiguration { probed.enumeration = enumerator.enumerate(address, target: target) }
            let context = AddressCheckContext(address: address, target: target, enumerator: enumerator)
            for check in AddressChecks.shipped + options.additionalChecks where check.isWanted(by: target) {
                check.run(context, into: &probed)
            }
        }
        if probed.failure == nil, let app = target.app {
            // The handshake the app's own client makes (its ATS configuration), judged as `app audit` judges it.
            probed.appProbes = Enumerator(scanner: self, perHostConcurrency: 1)
                .atsProbes(address, target: target, trustStore: trustStore ?? options.trustStore, only: [app.configuration])
        }
        return judge(probed, target)
    }

    /// Only refusals are retried: timeouts, refused connections and non-TLS peers would fail again.
    static func worthRetryingPermissively(_ failure: ProbeFailure) -> Bool {
        switch failure.category {
        case .tlsAlert, .handshakeFailed, .closedDuringHandshake: true
        default: false
        }
    }

    /// What the probe saw, ready for the caller's judge: the chain as sent, the path as built
    /// (missing intermediates fetched when asked) and the revocation facts, all at the evaluation time.
    private func observe(_ attempt: HandshakeAttempt, address: SocketAddress, target: ScanTarget, trustStore: TrustStore,
                         atsRefusal: String?, started: Date, durationMs: Int) -> ProbedAddress {
        let time = options.evaluationTime ?? started
        let presented = attempt.presented.map { $0.summary().judged(at: time) }
        var chain: ChainReport?
        var building = PathBuildingResult(path: [], anchored: false, issues: [])
        if !attempt.presented.isEmpty {
            // Missing intermediates and revocation answers are fetched within one more timeout, after the handshake.
            let fetchDeadline = Deadline(after: target.timeout ?? options.timeout)
            building = PathBuilder.build(presented: attempt.presented, store: trustStore, summaries: presented,
                                         fetchMissing: (target.aiaFetch ?? options.aiaFetch) ? fetchDeadline : nil)
                .judged(at: time)
            let revocation = RevocationChecker(mode: target.revocation ?? options.revocation, answers: options.revocationAnswers)
                .check(path: building.path, presented: attempt.presented, stapled: attempt.stapledResponse,
                       handshake: attempt.observation != nil, time: time, deadline: fetchDeadline)
            chain = ChainReport(presented: presented, path: building.path, anchored: building.anchored,
                                trustStore: trustStore.label, issues: building.issues, revocation: revocation)
            chain?.anchorIn = PublicRoots.anchorIn(building)
        }
        let sent = attempt.presented
        var probed = ProbedAddress(
            address: address.host, family: address.family.rawValue, port: address.port, startedAt: started, durationMs: durationMs,
            handshake: attempt.observation, atsClientRefusal: atsRefusal, failure: attempt.failure, presented: presented,
            building: building, chain: chain, time: time, publicTrust: chain?.publicTrust ?? false,
            buildWithPinnedAnchors: PathBuilder.pinnedAnchorBuilder(presented: sent + PathBuilder.fetchedIssuers(of: building), at: time))
        let ctLogs = self.ctLogs
        probed.ctLogs = ctLogs
        probed.distrust = distrust
        if attempt.observation != nil, let leaf = sent.first {
            probed.scts = SCTVerifier.check(leaf: leaf, issuer: SCTVerifier.issuer(ofLeafOf: building.path, presented: sent, leaf: leaf, store: trustStore),
                                            delivered: attempt.deliveredSCTs, logs: ctLogs)
        }
        return probed
    }
}

/// A write to a socket the peer closed raises SIGPIPE, whose default action kills the process:
/// OpenSSL's socket BIO does not pass MSG_NOSIGNAL. Ignored once, before the first connection.
package let ignoreSIGPIPE: Void = {
    signal(SIGPIPE, SIG_IGN)
}()

/// Runs blocking jobs on up to `concurrency` threads. It starts `initialWorkers` and adds as many
/// again each time all of its workers have been blocked (`BlockingWait`) at four checks a
/// millisecond apart, so a slow or distant network gets every connection asked for within a few
/// tens of milliseconds, while fast servers (loopback, a LAN) are scanned by a few threads, whose
/// stacks and malloc arenas are not paid for: a 200-target loopback job at `--concurrency 64` ran on
/// 4 workers instead of 64, with 0.93x the CPU and 0.98x the wall time. While some worker is busy
/// the checks space out, doubling up to `longestCheckInterval` (a check that finds them all blocked
/// goes back to one a millisecond): on fast servers the pool's watcher no longer wakes every
/// millisecond of the job only to find work going on.
enum WorkerPool {
    /// Threads started at once: twice the cores.
    static var initialWorkers: Int { max(2, 2 * ActiveProcessors.count) }
    /// The longest wait between two checks of the workers, in milliseconds: growing from 4
    /// workers to 64 still takes well under 50 ms on a slow network.
    static let longestCheckInterval = 4

    static func map<Input: Sendable, Output: Sendable>(_ inputs: [Input], concurrency: Int,
                                                        _ body: @escaping @Sendable (Input) -> Output) -> [Output] {
        map(inputs, concurrency: concurrency, until: nil, body).map { $0! }
    }

    /// `map`, except that no input is begun once `stopped` returns true: those inputs' outputs are nil
    /// (inputs begun before are finished).
    static func map<Input: Sendable, Output: Sendable>(_ inputs: [Input], concurrency: Int, until stopped: (@Sendable () -> Bool)?,
                                                        _ body: @escaping @Sendable (Input) -> Output) -> [Output?] {
        guard !inputs.isEmpty else { return [] }
        let results = SleepingLock<[Output?]>(Array(repeating: nil, count: inputs.count))
        let next = Atomic<Int>(0)
        let group = DispatchGroup()
        let pool = BlockingWait.Pool()
        func startWorker() {
            group.enter()
            let thread = Thread {
                BlockingWait.enter(pool)
                while true {
                    if let stopped, stopped() { break }
                    let index = next.add(1, ordering: .relaxed).oldValue
                    guard index < inputs.count else { break }
                    let output = body(inputs[index])
                    results.withLock { $0[index] = output }
                }
                group.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        let limit = max(1, min(concurrency, inputs.count))
        var started = min(limit, initialWorkers)
        for _ in 0..<started { startWorker() }
        // The calling thread watches the pool. When it is itself a worker of an outer pool, it
        // counts as blocked there only while this pool's workers all are (busy ones are work).
        let outer = BlockingWait.current
        var countedInOuter = false
        var allBlockedChecks = 0
        var checkInterval = 1
        while true {
            if outer == nil, started >= limit {
                group.wait() // nothing left to watch
                break
            }
            guard group.wait(timeout: .now() + .milliseconds(checkInterval)) == .timedOut else { break }
            let allBlocked = pool.blocked >= started
            checkInterval = allBlocked ? 1 : min(2 * checkInterval, longestCheckInterval)
            if let outer, allBlocked != countedInOuter {
                outer.add(allBlocked ? 1 : -1)
                countedInOuter = allBlocked
            }
            guard started < limit, next.load(ordering: .relaxed) < inputs.count, !(stopped?() ?? false) else { continue }
            allBlockedChecks = allBlocked ? allBlockedChecks + 1 : 0
            guard allBlockedChecks >= 4 else { continue }
            let more = min(started, limit - started)
            for _ in 0..<more { startWorker() }
            started += more
            allBlockedChecks = 0
        }
        if countedInOuter { outer?.add(-1) }
        return results.withLock { $0 }
    }
}

/// Counts, per `WorkerPool`, the workers that are blocked: on the network in poll(2), in a name
/// lookup, pausing before a busy server is asked again, or waiting on a nested pool whose own
/// workers are all blocked. A pool grows only while all of its workers are.
enum BlockingWait {
    /// One pool's count of blocked workers.
    final class Pool: Sendable {
        private let count = Atomic<Int>(0)
        var blocked: Int { count.load(ordering: .relaxed) }
        func add(_ delta: Int) { count.add(delta, ordering: .relaxed) }
    }

    /// The pool of the calling thread (set by its worker threads), or nil outside pools.
    static var current: Pool? {
        pthread_getspecific(key).map { Unmanaged<Pool>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Makes the calling thread a worker of `pool` (for its lifetime; the pool outlives its workers).
    static func enter(_ pool: Pool) {
        pthread_setspecific(key, Unmanaged.passUnretained(pool).toOpaque())
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `body`, counted as blocked in the calling thread's pool.
    @inline(__always)
    static func around<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        guard let pool = current else { return try body() }
        pool.add(1)
        defer { pool.add(-1) }
        return try body()
    }
}
