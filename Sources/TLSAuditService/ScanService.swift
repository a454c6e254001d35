import Foundation
public import Logging
public import ServiceLifecycle
public import TLSAuditMonitoring
import Synchronization
import TLSAuditCore
import TLSAuditProbe
import TLSAuditReport
import TLSAuditStore
import TLSAuditSupport

/// The long-running service: scans every configured target on its schedule, forever, and keeps
/// the history in the store. SIGTERM/SIGINT (via ServiceGroup) stop it gracefully; SIGHUP reloads
/// the configuration atomically (an invalid one is refused and the old one keeps running).
public final class ScanService: Service, @unchecked Sendable {
    // @unchecked: `configuration` and `configuredTargets` are only replaced on `control`; everything else is immutable or Sendable.
    private let configurationPath: String?
    private var configuration: ServiceConfiguration
    /// The store `configuration.database` names, found once (a reload keeps the database: it
    /// changes at a restart).
    private let location: any StoreLocation
    /// `configuration`'s targets with their groups, for the API (made when it is applied, not per request).
    private var configuredTargets: ConfiguredTargets?
    private let logger: Logger
    private let writer: ResultWriter
    private let dispatcher: AlertDispatcher
    private let scheduler: ScanScheduler
    private let reports: ReportScheduler
    /// `/probe`'s scans (the listener's multi-target exporter endpoint).
    private let prober: ServiceProber
    private let notifier = SystemdNotifier()
    /// The Prometheus metrics the HTTP listener serves (kept up to date when it is on).
    public let metrics = ScanMetrics()
    private let control = DispatchQueue(label: "tlsaudit.service")
    private var housekeeping: [DispatchSourceTimer] = []
    /// The scanner every scan goes through (its CT log list is replaced by the refresh).
    private let scanner: TLSScanner
    /// Fleet mode (a PostgreSQL database): the work queue, and the fleet configuration version
    /// this node runs (nil until it picked one up); the watcher stops when `fleetStopping` is set.
    private let fleet: FleetWork?
    /// Fleet mode: the scheduler's work source (claims from the fleet's queue).
    private let fleetClaims: FleetClaimSource?
    private let splitView: SplitViewDetector?
    /// The CT log list, the distrust table and Apple's roots, kept current.
    let trustInputs: TrustInputKeeper
    private let fleetVersion = Mutex<Int64?>(nil)
    private let fleetStopping = Atomic<Bool>(false)
    /// The fleet configuration version this node could not run (logged once, not retried until a newer one).
    private var refusedFleetVersion: Int64?
    /// On `control`: the schema was brought up to date (once, before the first configuration
    /// check), and the wait for a first `fleet apply` was said (once, not every poll).
    private var fleetSchemaReady = false
    private var saidWaitingForApply = false
    /// How long in-flight scans and alert deliveries may run on after SIGTERM before they are abandoned.
    public let shutdownGrace: Double
    /// Scan results that could not be stored by the time the service stopped (kept in the spill
    /// file for the next start when it could be written): `serve` then exits 75.
    public private(set) var unstoredAtExit = 0
    /// A failure no retry cures, met while running (a schema a newer version migrated, this
    /// node's name held by another live node): the service stopped itself and `serve` exits 2.
    public var unrecoverableError: String? { fatalStop.withLock { $0 } }
    private let fatalStop = Mutex<String?>(nil)
    /// Fleet mode: take the node's name over even while another process's heartbeat holds it.
    private let replaceNode: Bool

    /// Stops the service for `reason` (the first reason given is kept).
    private func stopForGood(_ reason: String) {
        fatalStop.withLock { if $0 == nil { $0 = reason } }
    }

    /// Builds the service from a validated configuration. `configurationPath` is what SIGHUP rereads.
    public init(configuration: ServiceConfiguration, configurationPath: String?, logger: Logger,
                shutdownGrace: Double = ServiceConfiguration.defaultShutdownGrace, replaceNode: Bool = false) throws {
        self.replaceNode = replaceNode
        ProcessMemory.tuneForService()
        self.configuration = configuration
        configuredTargets = configuration.configuredTargets
        self.configurationPath = configurationPath
        self.logger = logger
        self.shutdownGrace = shutdownGrace
        let location = try configuration.location()
        self.location = location
        // A URL naming a primary and its standbys: each change of server is one line and one count.
        let backend = StoreBackends.backend(of: configuration.database)?.name ?? "the database"
        location.watchServers { [logger, metrics] server, previous in
            guard let previous else {
                logger.info("\(backend): connected to \(server.address) (\(server.role))")
                metrics.recordDatabaseServer(server.address, role: server.role, changed: false)
                return
            }
            logger.notice("\(backend): now connected to \(server.address) (\(server.role)), before to \(previous.address) (\(previous.role)): a failover or a switch-over")
            metrics.recordDatabaseServer(server.address, role: server.role, changed: true)
        }
        // At start the store must be usable as far as this version can tell: a file SQLite cannot
        // open as a database or a schema a newer version migrated is refused (`serve` exits 2;
        // `run` then checks a SQLite file's pages before the first commit). A store that cannot be
        // reached or written yet is the writer's to retry.
        do {
            _ = try location.open()
        } catch let error as StoreError where error.isFatal {
            throw error
        } catch {}
        writer = ResultWriter(openStore: { try location.open() }, alerting: configuration.alerts.settings,
                              logger: logger)
        writer.spill = configuration.spillLocations
        dispatcher = AlertDispatcher(configuration: configuration.alerts, writer: writer, logger: logger)
        // Kept only when there is a listener to serve them.
        if configuration.http.enabled {
            writer.onCommit = { [metrics] scans, seconds, committed in
                metrics.recordStoreWrite(seconds: seconds, succeeded: committed)
                if committed { metrics.record(scans) }
            }
        }
        dispatcher.onAttempt = { [metrics] sink, delivered in metrics.recordDelivery(sink: sink, delivered: delivered) }
        writer.onAlerts = { [dispatcher, logger, metrics] alerts in
            metrics.recordAlerts(alerts)
            for alert in alerts {
                logger.notice("alert raised", metadata: ["alert": "\(alert.id)", "kind": "\(alert.kind.rawValue)",
                                                        "severity": "\(alert.severity.rawValue)", "target": "\(alert.target)",
                                                        "address": "\(alert.address)"])
            }
            dispatcher.poke()
        }
        reports = ReportScheduler(configuration: configuration, writer: writer, logger: logger)
        var options = ScanOptions(trustStore: try TrustStore.system())
        // A scan's opt-in checks use its one slot of the host's per_host_concurrency.
        options.checkConnections = 1
        options.revocationAnswers = StoredRevocationAnswers(logger: logger) { try location.open() }
        let trustInputs = TrustInputKeeper(settings: configuration.trustInputs, metrics: metrics, logger: logger)
        options.ctLogs = trustInputs.ctLogs
        options.distrust = configuration.distrust
        if let table = trustInputs.distrustTable {
            options.distrust = options.distrust ?? DistrustSetting()
            options.distrust?.table = table
        }
        let scanner = try TLSScanner(options: options, judge: AddressAssessment.judge)
        self.scanner = scanner
        trustInputs.scanner = scanner
        self.trustInputs = trustInputs
        if let coordinator = location.fleet(node: configuration.node.name, vantage: configuration.node.vantage) {
            splitView = SplitViewDetector(configuration: configuration)
            writer.splitView = splitView
            fleet = FleetWork(fleet: coordinator, logger: logger)
        } else {
            fleet = nil
            splitView = nil
        }
        let stores = try Self.trustStores(for: configuration)
        // Where the work comes from: the fleet's claims, or this node's own schedule.
        fleetClaims = fleet.map { FleetClaimSource(fleet: $0, node: configuration.node) }
        scheduler = ScanScheduler(configuration: configuration, trustStores: stores, scanner: scanner, writer: writer,
                                  logger: logger, source: fleetClaims ?? LocalSchedule(), node: fleet == nil ? nil : configuration.node)
        prober = ServiceProber(scanner: scanner, configuration: configuration, trustStores: stores)
        metrics.recordBuild(version: TLSAuditVersion.current, openssl: OpenSSLLibrary.version)
        scheduler.onQueueLength = { [metrics] waiting, running in metrics.recordQueue(waiting: waiting, running: running) }
        scheduler.onClockStep = { [metrics] seconds in metrics.recordClockStep(seconds: seconds) }
        ProcessMemory.releaseFreeMemory()
    }

    /// Loads every trust store the configuration names (once per distinct setting).
    static func trustStores(for configuration: ServiceConfiguration) throws -> [TrustSetting: TrustStore] {
        try trustStores(for: Set(configuration.targets.map(\.trust)))
    }

    /// Loads each trust store of `settings`.
    static func trustStores(for settings: Set<TrustSetting>) throws -> [TrustSetting: TrustStore] {
        var stores: [TrustSetting: TrustStore] = [:]
        for setting in settings {
            switch setting {
            case .system: stores[setting] = try TrustStore.system()
            case .apple: stores[setting] = TrustStore.apple
            case .file(let path): stores[setting] = try TrustStore(caFile: path, label: setting.label)
            case .caFile(let path): stores[setting] = try TrustStore(caFile: path)
            }
        }
        return stores
    }

    /// Called after each completed target scan with the target's key and its number of scans so far.
    public var onScanCompleted: (@Sendable (String, Int) -> Void)? {
        get { scheduler.onScanCompleted }
        set { scheduler.onScanCompleted = newValue }
    }

    public func run() async throws {
        logger.info("tlsaudit service starting", metadata: [
            "database": "\(configuration.database)", "targets": "\(configuration.targets.count)",
            "config": "\(configurationPath ?? "(built in)")", "scheduled_reports": "\(configuration.reports.count)",
        ])
        writer.onFatal = { [weak self] error in self?.stopForGood("\(error)") }
        if let check = location.checkBeforeFirstCommit {
            writer.checkBeforeFirstCommit(check.name, check.run)
        }
        writer.replaySpills(configuration.spillLocations)
        scheduler.start()
        if let fleet { startFleet(fleet) }
        dispatcher.start(singleNode: fleet == nil)
        reports.start()
        startHousekeeping()
        // The pin forecast: the CT logs followed for certificates the configured pins would refuse.
        // Its settings and the names it watches are read each round: a reload (SIGHUP) or a fleet's
        // applied configuration applies them. In a fleet each log is followed by the node that claims it.
        let ctWatcher = CTWatcher(settings: { [weak self] in
            guard let self else { return nil }
            return control.sync { configuration.ctFollow }
        }, writer: writer, scanner: scanner, targets: { [weak self] in
            guard let self else { return [] }
            return control.sync { configuration.targets.map(\.scanTarget) }
        }, owner: fleet == nil ? nil : configuration.node.name, metrics: metrics, logger: logger)
        ctWatcher.start()
        notifier.ready(status: "scanning \(configuration.targets.count) targets")

        var listenerFailure: (any Error)?
        let stopItself: @Sendable () -> Bool = { [weak self] in self?.unrecoverableError != nil }
        if configuration.http.enabled {
            let location = self.location
            let api = APIRoutes(openStore: { try location.open() }, configuredTargets: { [weak self] in
                guard let self else { return nil }
                return control.sync { configuredTargets }
            }, summarize: { store, query in
                var request = ReportRequest(since: query.since, end: query.at, targets: query.targets,
                                            expiringWithinDays: APIRoutes.summaryExpiringWithinDays)
                request.tags = query.tags
                return try JSONDocumentEncoder.tlsaudit.encode(SummaryDocument(ReportGenerator.report(from: store, request)))
            }, trustInputs: { [trustInputs] in trustInputs.current })
            let listener = HTTPListener(settings: configuration.http, metrics: metrics, api: api, prober: prober, logger: logger) { [scheduler, writer] in
                await Self.onThread { Self.readiness(scheduler: scheduler, writer: writer) }
            }
            // The first to end: a termination request, or the listener failing (its address in use).
            // At a termination request the listener stops gracefully (answering requests in progress),
            // for at most 2 s before it is cancelled.
            enum Ended { case listener((any Error)?), termination, patience }
            listenerFailure = await withTaskGroup(of: Ended.self) { group in
                group.addTask {
                    do { try await listener.run() } catch { return .listener(error) }
                    return .listener(nil)
                }
                group.addTask { await Self.waitForTermination(stopItself: stopItself); return .termination }
                var failure: (any Error)?
                if case .listener(let error) = await group.next() {
                    failure = error
                } else {
                    await listener.stop()
                    group.addTask { try? await Task.sleep(for: .seconds(2)); return .patience }
                    _ = await group.next()
                }
                group.cancelAll()
                return failure
            }
            if let listenerFailure { logger.critical("the http listener failed: \(listenerFailure); stopping the service") }
        } else {
            await Self.waitForTermination(stopItself: stopItself)
        }
        if let fatal = unrecoverableError { logger.critical("stopping: \(fatal)") }

        // One deadline for everything that may still be running: scans, then alert deliveries.
        let deadline = Date().addingTimeInterval(shutdownGrace)
        notifier.stopping()
        logger.notice("shutting down: no new scans; waiting for scans in flight", metadata: ["grace_s": "\(Int(shutdownGrace))"])
        dispatcher.beginStopping()
        stopHousekeeping()
        reports.stop()
        ctWatcher.beginStopping()
        fleetStopping.store(true, ordering: .relaxed)
        let abandoned = await Self.onThread { [scheduler] in scheduler.stop(deadline: deadline) }
        if let fleet { await Self.onThread { fleet.stop() } }
        // The CT follower's step in progress ends within the same deadline, before the writer finishes.
        await Self.onThread { ctWatcher.finish(by: max(deadline, Date().addingTimeInterval(1))) }
        let spill = configuration.spillLocations
        let finish = await Self.onThread { [writer] in writer.finish(spill: spill, deadline: deadline) }
        // A delivery that just began gets a moment even when the scans used the whole grace.
        let deliveryDeadline = max(deadline, Date().addingTimeInterval(0.2))
        _ = await Self.onThread { [dispatcher] in dispatcher.stop(deadline: deliveryDeadline) }
        report(finish)
        logger.notice("tlsaudit service stopped", metadata: ["abandoned_scans": "\(abandoned)"])
        if let listenerFailure { throw listenerFailure }
    }

    /// `/readyz`: the scheduler's queue answers and the last commit to the store succeeded.
    private static func readiness(scheduler: ScanScheduler, writer: ResultWriter) -> Readiness {
        let scheduling = scheduler.answers(within: 2)
        let failing = writer.isFailing(answeringWithin: 2)
        return Readiness(ready: scheduling && failing == false, checks: [
            "scheduler: " + (scheduling ? "answering" : "not answering within 2 s"),
            "store: " + (failing == nil ? "writer busy for over 2 s" : failing! ? "failing (results kept in memory and retried)" : "writable"),
        ])
    }

    /// Until SIGTERM or SIGINT: ServiceGroup's graceful shutdown, or one caught by
    /// `ServiceSignals` (before ServiceGroup listened, or instead of it), or until `stopItself`.
    private static func waitForTermination(stopItself: @escaping @Sendable () -> Bool) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await gracefulShutdown() }
            group.addTask {
                while !ServiceSignals.terminationRequested, !stopItself(), !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Says what happened to the results still unstored at the stop, and sets `unstoredAtExit`:
    /// results spilled or lost, results dropped earlier, and spill files an earlier start could
    /// not store all make `serve` exit 75.
    private func report(_ finish: ResultWriter.Finish) {
        if let damaged = finish.damaged {
            logger.critical("the database was found damaged; repair or restore it before the next start: \(damaged)")
        }
        if finish.dropped > 0 {
            logger.critical("scan results were dropped while the store was failing (the in-memory queue was full)",
                            metadata: ["dropped": "\(finish.dropped)"])
        }
        // The spill directories are listed once: the next start reads what is there.
        let waiting = configuration.spillLocations.waiting()
        let readNextStart = Set(waiting.map(SpillLocations.absolute))
        let kept = finish.files.filter { readNextStart.contains(SpillLocations.absolute($0)) }
        if !kept.isEmpty {
            logger.error("stopped with scan results that could not be stored; they are kept for the next start",
                         metadata: ["unstored": "\(finish.unstored)", "file": "\(kept.joined(separator: ", "))"])
        }
        for file in finish.files where !readNextStart.contains(SpillLocations.absolute(file)) {
            // Written before a reload moved spill_directory: the next start looks only in the new one.
            logger.critical("scan results that could not be stored are kept in \(file), where the next start does not look: move the file into the spill directory")
        }
        if finish.lost > 0 {
            logger.critical("stopped with scan results that could not be stored, and they cannot be kept: \(finish.error ?? "no location")",
                            metadata: ["unstored": "\(finish.unstored)", "lost": "\(finish.lost)"])
        }
        let ours = Set(finish.files.map(SpillLocations.absolute))
        let earlier = waiting.filter { !ours.contains(SpillLocations.absolute($0)) }
        if !earlier.isEmpty {
            logger.error("results kept from an earlier run are still not stored", metadata: ["files": "\(earlier.count)"])
        }
        unstoredAtExit = finish.unstored + finish.dropped + earlier.count
    }

    /// Runs blocking work off the cooperative pool.
    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }

    // MARK: - Reload, retention, watchdog

    /// Rereads the configuration file; applies it only when valid (atomically), else keeps the old one.
    /// In a fleet, targets and settings come from `tlsaudit fleet apply`: SIGHUP checks for a newer version.
    public func reload() {
        control.async { [self] in
            if let fleet {
                logger.notice("fleet mode: the configuration comes from 'tlsaudit fleet apply'; checking for a newer version")
                checkFleetConfiguration(fleet)
                return
            }
            guard let configurationPath else {
                logger.warning("SIGHUP ignored: the service runs on a built-in configuration")
                return
            }
            notifier.reloading()
            defer { notifier.ready(status: "scanning \(configuration.targets.count) targets") }
            let candidate: ServiceConfiguration
            do {
                candidate = try ServiceConfiguration.load(path: configurationPath)
            } catch let error as ConfigurationErrors {
                for problem in error.errors {
                    logger.error("configuration refused: \(problem)")
                }
                logger.error("reload refused: keeping the running configuration", metadata: ["errors": "\(error.errors.count)"])
                return
            } catch {
                logger.error("reload refused: \(error); keeping the running configuration")
                return
            }
            let stores: [TrustSetting: TrustStore]
            do {
                stores = try Self.trustStores(for: candidate)
            } catch {
                logger.error("reload refused: \(error); keeping the running configuration")
                return
            }
            if candidate.database != configuration.database {
                logger.warning("the database path changed; the new path takes effect after a restart",
                               metadata: ["running": "\(configuration.database)", "configured": "\(candidate.database)"])
            }
            var applied = candidate
            applied.database = configuration.database
            // Results that cannot be stored go from now on where the next start (reading this
            // configuration) looks; files already waiting where it will not look are named.
            let stranded = Set(configuration.spillLocations.waiting()).subtracting(applied.spillLocations.waiting())
            writer.apply(spill: applied.spillLocations)
            if !stranded.isEmpty {
                let moves = stranded.sorted().map { "\($0) -> \(applied.spillLocations.besideDatabase($0))" }
                logger.warning("results kept from earlier runs wait in files the new spill_directory no longer covers; the next start will not read them: move each beside the database",
                               metadata: ["files": "\(moves.joined(separator: ", "))"])
            }
            install(applied, trustStores: stores)
            logger.notice("configuration reloaded", metadata: ["targets": "\(applied.targets.count)"])
        }
    }

    /// Runs `applied` from now on (on `control`).
    private func install(_ applied: ServiceConfiguration, trustStores stores: [TrustSetting: TrustStore]) {
        scheduler.apply(applied, trustStores: stores)
        prober.install(applied, trustStores: stores)
        metrics.keepOnly(targets: Set(applied.targets.map(\.key)))
        writer.apply(applied.alerts.settings)
        dispatcher.apply(applied.alerts)
        reports.apply(applied)
        splitView?.apply(applied)
        configuration = applied
        configuredTargets = applied.configuredTargets
        ProcessMemory.releaseFreeMemory()
    }

    // MARK: - Fleet

    /// Starts the thread that picks up new fleet configuration versions: announced by NOTIFY, and
    /// polled every `fleet.poll` in case a notification was missed. Its first check brings the
    /// schema up to date and starts the heartbeat.
    private func startFleet(_ fleet: FleetWork) {
        let thread = Thread { [weak self] in
            var first = true
            while let self, !fleetStopping.load(ordering: .relaxed) {
                if !first {
                    let poll = control.sync { configuration.fleet.poll }
                    _ = fleet.fleet.waitForConfiguration(timeout: poll)
                }
                first = false
                guard !fleetStopping.load(ordering: .relaxed) else { break }
                control.sync { checkFleetConfiguration(fleet) }
            }
        }
        thread.start()
    }

    /// Picks up the fleet's newest configuration version when it is newer than the one running
    /// (on `control`). Before the first `fleet apply`, the node's own file becomes version 1.
    private func checkFleetConfiguration(_ fleet: FleetWork) {
        do {
            let running = fleetVersion.withLock { $0 }
            if !fleetSchemaReady {
                _ = try location.open() // brings the schema up to date
                fleetSchemaReady = true
                // Heartbeats from now: before, the fleet's tables may not exist yet. The first one,
                // here, takes the node's name (refused while another live process holds it).
                fleet.onNameConflict = { [weak self] conflict in self?.stopForGood("\(conflict)") }
                try fleet.startHeartbeat(period: configuration.fleet.poll, replacing: replaceNode, report: { [weak self] in
                    guard let self, let fleetClaims else {
                        return FleetHeartbeat(configurationVersion: nil, inFlight: [], scansPerMinute: 0, scansTotal: 0, poll: 1, lease: 1)
                    }
                    return fleetClaims.heartbeat(configurationVersion: fleetVersion.withLock { $0 })
                }, view: { [weak self] view in self?.fleetClaims?.see(view) })
            }
            guard let latest = try fleet.fleet.latestVersion() else {
                try bootstrapFleetConfiguration(fleet)
                return
            }
            guard latest > (running ?? 0), latest != refusedFleetVersion, let version = try fleet.fleet.latestConfiguration() else { return }
            try adopt(version, fleet: fleet)
        } catch let conflict as FleetNameConflict {
            stopForGood("\(conflict)")
        } catch let error as StoreError where error.kind == .incompatible {
            stopForGood("\(error)") // PostgreSQL answered at last, with a newer tlsaudit's schema
        } catch {
            logger.error("cannot read the fleet configuration: \(error)")
        }
    }

    /// No version stored yet: this node's file becomes version 1 (a node started without one waits for `fleet apply`).
    private func bootstrapFleetConfiguration(_ fleet: FleetWork) throws {
        guard let configurationPath, !configuration.targets.isEmpty else {
            if !saidWaitingForApply { logger.notice("the fleet has no configuration yet: waiting for 'tlsaudit fleet apply FILE'") }
            saidWaitingForApply = true
            return
        }
        let document = try String(contentsOfFile: configurationPath, encoding: .utf8)
        let version = try fleet.fleet.apply(document: document, sha256: Digest.sha256Hex(Array(document.utf8)),
                                            targets: configuration.fleetTargets, appliedBy: "\(configuration.node.name) (first start)",
                                            onlyIfFirst: true)
        logger.notice("the fleet had no configuration: this node's file is version \(version) (unless another node's came first)",
                      metadata: ["file": "\(configurationPath)"])
        guard let stored = try fleet.fleet.latestConfiguration() else { return }
        try adopt(stored, fleet: fleet)
    }

    /// Runs a fleet configuration version, keeping this node's own settings (database, node,
    /// state directory). A version this node cannot run (a CA file missing here) is refused and
    /// logged once; the node keeps running what it ran.
    private func adopt(_ version: FleetConfigurationVersion, fleet: FleetWork) throws {
        let baseDirectory = configurationPath.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
            ?? FileManager.default.currentDirectoryPath
        let candidate: ServiceConfiguration
        let stores: [TrustSetting: TrustStore]
        do {
            candidate = try ServiceConfiguration.parse(yaml: version.document, file: "fleet configuration version \(version.version)",
                                                       baseDirectory: baseDirectory)
            stores = try Self.trustStores(for: candidate)
        } catch {
            refusedFleetVersion = version.version
            logger.error("this node cannot run fleet configuration version \(version.version); it keeps running version \(fleetVersion.withLock { $0 }.map(String.init) ?? "none"): \(error)")
            return
        }
        var applied = candidate
        applied.database = configuration.database
        applied.node = configuration.node
        applied.spillDirectory = configuration.spillDirectory
        applied.spillFallbackDirectory = configuration.spillFallbackDirectory
        try fleet.fleet.ensureRows(forEveryVantageOf: applied.fleetTargets)
        install(applied, trustStores: stores)
        fleetVersion.withLock { $0 = version.version }
        fleet.heartbeatNow()
        logger.notice("fleet configuration version \(version.version) running", metadata: [
            "targets": "\(applied.targets.count)", "applied_by": "\(version.appliedBy)",
        ])
    }

    private func startHousekeeping() {
        // SIGHUP is caught by ServiceSignals from the first instant; one received before now
        // (during start-up) is applied on the first tick.
        let hangup = DispatchSource.makeTimerSource(queue: control)
        hangup.schedule(deadline: .now(), repeating: .milliseconds(100))
        hangup.setEventHandler { [weak self] in
            guard ServiceSignals.takeHangup() else { return }
            self?.logger.notice("SIGHUP: reloading the configuration")
            self?.reload()
        }
        hangup.resume()
        housekeeping.append(hangup)

        trustInputs.raise = { [writer] alert in try writer.raise(alert) }
        trustInputs.latestAlert = { [writer] target in try? writer.perform { try $0.alerts(of: target, limit: 1).first?.alert } }
        trustInputs.onAppleRoots = { [weak self] in
            // Stores handed out before keep the old roots: `trust: apple` targets get the new ones.
            self?.control.async { [weak self] in
                guard let self else { return }
                do { install(configuration, trustStores: try Self.trustStores(for: configuration)) } catch {
                    logger.error("cannot apply the new Apple roots: \(error)")
                }
            }
        }
        trustInputs.start()
        let retention = DispatchSource.makeTimerSource(queue: control)
        retention.schedule(deadline: .now() + 60, repeating: 3600)
        retention.setEventHandler { [weak self] in self?.applyRetention() }
        retention.resume()
        housekeeping.append(retention)

        if let interval = notifier.watchdogInterval {
            let watchdog = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
            watchdog.schedule(deadline: .now(), repeating: interval / 2)
            watchdog.setEventHandler { [scheduler, notifier] in
                // Only a scheduler that still answers keeps systemd from restarting us.
                if scheduler.isResponsive(within: interval / 4) { notifier.watchdog() }
            }
            watchdog.resume()
            housekeeping.append(watchdog)
        }
    }

    private func stopHousekeeping() {
        control.sync {
            housekeeping.forEach { $0.cancel() }
            housekeeping = []
        }
        trustInputs.stop()
    }

    private func applyRetention() {
        let cutoff = Date().addingTimeInterval(-configuration.retention)
        do {
            let pruned = try writer.perform { try $0.prune(olderThan: cutoff) }
            if pruned.observations > 0 || pruned.certificates > 0 {
                logger.info("retention applied", metadata: [
                    "observations_deleted": "\(pruned.observations)", "certificates_deleted": "\(pruned.certificates)",
                ])
            }
        } catch {
            logger.error("retention failed: \(error)")
        }
    }

    /// Runs the service under a ServiceGroup that turns SIGTERM and SIGINT into a graceful shutdown.
    public func runUntilTerminated() async throws {
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(service: self, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
    }
}
