import Foundation
public import Logging
public import ServiceLifecycle
import Synchronization
import TLSAuditCore
import TLSAuditProbe
import TLSAuditStore

/// The long-running service: scans every configured target on its schedule, forever, and keeps
/// the history in the store. SIGTERM/SIGINT (via ServiceGroup) stop it gracefully; SIGHUP reloads
/// the configuration atomically (an invalid one is refused and the old one keeps running).
public final class ScanService: Service, @unchecked Sendable {
    // @unchecked: `configuration` is only replaced on `control`; everything else is immutable or Sendable.
    private let configurationPath: String?
    private var configuration: ServiceConfiguration
    private let logger: Logger
    private let writer: ResultWriter
    private let dispatcher: AlertDispatcher
    private let scheduler: ScanScheduler
    private let reports: ReportScheduler
    private let notifier = SystemdNotifier()
    private let control = DispatchQueue(label: "tlsaudit.service")
    private var housekeeping: [DispatchSourceTimer] = []
    private var hangupSource: DispatchSourceSignal?
    /// How long in-flight scans may run on after SIGTERM before they are abandoned.
    public let shutdownGrace: Double

    /// Builds the service from a validated configuration. `configurationPath` is what SIGHUP rereads.
    public init(configuration: ServiceConfiguration, configurationPath: String?, logger: Logger,
                shutdownGrace: Double = 15) throws {
        self.configuration = configuration
        self.configurationPath = configurationPath
        self.logger = logger
        self.shutdownGrace = shutdownGrace
        let database = configuration.database
        writer = ResultWriter(openStore: { try SQLiteScanStore(path: database) }, alerting: configuration.alerts.settings,
                              logger: logger)
        dispatcher = AlertDispatcher(configuration: configuration.alerts, writer: writer, logger: logger)
        writer.onAlerts = { [dispatcher, logger] alerts in
            for alert in alerts {
                logger.notice("alert raised", metadata: ["alert": "\(alert.id)", "kind": "\(alert.kind.rawValue)",
                                                        "severity": "\(alert.severity.rawValue)", "target": "\(alert.target)",
                                                        "address": "\(alert.address)"])
            }
            dispatcher.poke()
        }
        reports = ReportScheduler(configuration: configuration, writer: writer, logger: logger)
        let scanner = try TLSScanner(options: ScanOptions(trustStore: try TrustStore.system()))
        scheduler = ScanScheduler(configuration: configuration, trustStores: try Self.trustStores(for: configuration),
                                  scanner: scanner, writer: writer, logger: logger)
    }

    /// Loads every trust store the configuration names (once per distinct setting).
    static func trustStores(for configuration: ServiceConfiguration) throws -> [TrustSetting: TrustStore] {
        var stores: [TrustSetting: TrustStore] = [:]
        for setting in Set(configuration.targets.map(\.trust)) {
            switch setting {
            case .system: stores[setting] = try TrustStore.system()
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
        scheduler.start()
        dispatcher.start()
        reports.start()
        startHousekeeping()
        notifier.ready(status: "scanning \(configuration.targets.count) targets")

        // Wait for SIGTERM / SIGINT (ServiceGroup turns them into graceful shutdown).
        try? await gracefulShutdown()

        notifier.stopping()
        logger.notice("shutting down: no new scans; waiting for scans in flight", metadata: ["grace_s": "\(Int(shutdownGrace))"])
        stopHousekeeping()
        reports.stop()
        let abandoned = await Self.onThread { [scheduler, shutdownGrace] in
            scheduler.stop(deadline: Date().addingTimeInterval(shutdownGrace))
        }
        let unstored = await Self.onThread { [writer] in writer.flush() }
        dispatcher.stop()
        if unstored > 0 {
            logger.error("stopped with scan results that could not be stored", metadata: ["unstored": "\(unstored)"])
        }
        logger.notice("tlsaudit service stopped", metadata: ["abandoned_scans": "\(abandoned)"])
    }

    /// Runs blocking work off the cooperative pool.
    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }

    // MARK: - Reload, retention, watchdog

    /// Rereads the configuration file; applies it only when valid (atomically), else keeps the old one.
    public func reload() {
        control.async { [self] in
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
            scheduler.apply(applied, trustStores: stores)
            writer.apply(applied.alerts.settings)
            dispatcher.apply(applied.alerts)
            reports.apply(applied)
            configuration = applied
            logger.notice("configuration reloaded", metadata: ["targets": "\(applied.targets.count)"])
        }
    }

    private func startHousekeeping() {
        signal(SIGHUP, SIG_IGN)
        let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: control)
        hangup.setEventHandler { [weak self] in
            self?.logger.notice("SIGHUP: reloading the configuration")
            self?.reload()
        }
        hangup.resume()
        hangupSource = hangup

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
            hangupSource?.cancel()
            hangupSource = nil
        }
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
