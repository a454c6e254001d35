import Foundation
import Logging
import Synchronization
import TLSAuditCore
import TLSAuditMonitoring
import TLSAuditProbe

/// Keeps `serve`'s trust inputs (the CT log list, the distrust table, Apple's roots) current. At
/// start each is loaded from its source (a URL's last known good copy when the URL cannot be had,
/// else the shipped snapshot); then each configured source is read again every `refresh:`, and a
/// verified input never older than the one in force replaces it for the scans that follow. Each
/// input's age and refresh outcome go to the metrics and the log; a stale or failing input raises
/// an alert through the sinks, once per transition (and one when it is current again).
public final class TrustInputKeeper: @unchecked Sendable {
    // @unchecked: `scanner` and `onAppleRoots` are set once before the timers start.
    /// Refreshes failed in a row that make an input `refresh-failing`.
    public static let failuresBeforeAlert = 3

    private let settings: TrustInputSettings
    private let metrics: ScanMetrics
    private let logger: Logger
    private let status = Mutex<[TrustInputKind: TrustInputStatus]>([:])
    private var timers: [DispatchSourceTimer] = []
    /// Takes a new CT log list or distrust table for later scans.
    var scanner: TLSScanner?
    /// Called after new Apple roots are installed (the service's stores are rebuilt).
    var onAppleRoots: (@Sendable () -> Void)?
    /// Stores and sends an alert; false when it was stored already.
    var raise: (@Sendable (Alert) throws -> Bool)?
    /// The latest alert about an input (its target `trust-input:KIND`), to know the condition it left.
    var latestAlert: (@Sendable (String) -> Alert?)?

    /// The inputs at start: the CT log list and distrust table for the scanner's options (Apple's
    /// roots are installed in `TrustStore`).
    private(set) var ctLogs = CTLogList.shipped
    private(set) var distrustTable: DistrustTable?

    init(settings: TrustInputSettings, metrics: ScanMetrics, logger: Logger) {
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        for setting in settings.all {
            switch setting.kind {
            case .ctLogList:
                let (list, failure) = load(setting, CTLogList.self, shipped: .shipped)
                ctLogs = list ?? .shipped
                record(setting, inForce: ctLogs.version, error: failure, at: Date(), fetched: fetchedAtStart(setting))
            case .distrust:
                let (table, failure) = load(setting, DistrustTable.self, shipped: .shipped)
                distrustTable = table
                record(setting, inForce: (distrustTable ?? .shipped).version, error: failure, at: Date(), fetched: fetchedAtStart(setting))
            case .appleRoots:
                // Apple's roots from the shipped snapshot are read on first use, not here (start-up).
                let (roots, failure) = load(setting, AppleRootStore.self, shipped: nil)
                if let roots { install(roots) }
                record(setting, inForce: roots?.version, error: failure, at: Date(), fetched: fetchedAtStart(setting))
            }
        }
    }

    /// The inputs' status now (for the API, the status page and `trust status`).
    var current: [TrustInputStatus] {
        let known = status.withLock { $0 }
        return TrustInputKind.allCases.compactMap { known[$0] }
    }

    /// Checks each input's condition (alerting on transitions) and starts a refresh timer per configured source.
    func start() {
        checkConditions()
        for setting in settings.all where setting.source != nil {
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
            let first = refreshAtStart.withLock { $0.contains(setting.kind) } ? 0 : setting.refresh
            timer.schedule(deadline: .now() + first, repeating: setting.refresh)
            timer.setEventHandler { [weak self] in self?.refresh(setting) }
            timer.resume()
            timers.append(timer)
        }
        // Ages grow without refreshes: conditions are checked hourly as well.
        let hourly = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        hourly.schedule(deadline: .now() + 3_600, repeating: 3_600)
        hourly.setEventHandler { [weak self] in self?.checkConditions() }
        hourly.resume()
        timers.append(hourly)
    }

    func stop() {
        for timer in timers { timer.cancel() }
        timers.removeAll()
    }

    /// Reads the input again now; a newer verified one replaces the one in force.
    func refresh(_ setting: TrustInputSetting) {
        let now = Date()
        switch setting.kind {
        case .ctLogList:
            let before = scanner?.ctLogs ?? ctLogs
            refresh(setting, CTLogList.self, inForce: before, at: now) { [scanner] list in
                guard list.source != before.source || list.publishedAt != before.publishedAt || list.keysIdentity != before.keysIdentity else { return false }
                scanner?.replaceCTLogs(list)
                return true
            }
        case .distrust:
            let before = scanner?.distrustTable ?? distrustTable ?? .shipped
            refresh(setting, DistrustTable.self, inForce: before, at: now) { [scanner] table in
                guard table != before else { return false }
                scanner?.replaceDistrustTable(table)
                return true
            }
        case .appleRoots:
            let before = TrustStore.appleRoots
            refresh(setting, AppleRootStore.self, inForce: before, at: now) { [self] roots in
                guard roots.sha256 != before.sha256 else { return false }
                install(roots)
                onAppleRoots?()
                return true
            }
        }
        checkConditions()
    }

    private func refresh<Input: VerifiableTrustInput>(_ setting: TrustInputSetting, _ type: Input.Type, inForce: Input, at now: Date,
                                                       replace: (Input) -> Bool) {
        guard let source = setting.source else { return }
        do {
            let (input, note) = try TrustInputSource.load(Input.self, from: source, signature: setting.signature,
                                                          lastKnownGood: setting.lastKnownGood, inForce: inForce)
            if let note {
                logger.warning("\(Input.kind.title) not refreshed: the one in force stays", metadata: ["input": "\(Input.kind.rawValue)", "reason": "\(note)"])
                record(setting, inForce: inForce.version, error: note, at: now)
                return
            }
            if replace(input) {
                scanner?.noteInputChange(input.version.label, at: now)
                logger.notice("\(Input.kind.title) updated", metadata: ["input": "\(Input.kind.rawValue)", "from": "\(inForce.version.label)",
                                                                          "to": "\(input.version.label)", "entries": "\(input.version.entries)"])
                record(setting, inForce: input.version, error: nil, at: now)
            } else {
                record(setting, inForce: inForce.version, error: nil, at: now)
            }
        } catch {
            logger.warning("\(Input.kind.title) not refreshed: the one in force stays", metadata: ["input": "\(Input.kind.rawValue)", "reason": "\(error)"])
            record(setting, inForce: inForce.version, error: "\(error)", at: now)
        }
    }

    /// The input from its configured source at start: the last known good copy when the source
    /// cannot be had, else `shipped` (nil: none, or no source configured), saying so in the log;
    /// with the reason when it is not the source's (counted as a first failed refresh).
    private func load<Input: VerifiableTrustInput>(_ setting: TrustInputSetting, _ type: Input.Type,
                                                   shipped: Input?) -> (input: Input?, failure: String?) {
        guard let source = setting.source else { return (nil, nil) }
        // A URL with a kept copy: start from the copy at once and fetch right after start (a
        // source that hangs must not hold the start for its 30 s).
        if setting.isURL, let path = setting.lastKnownGood, let kept = TrustInputSource.keptCopy(Input.self)(path) {
            refreshAtStart.withLock { $0.insert(Input.kind) }
            logger.info("\(Input.kind.title) in force: the last known good copy, fetched again now",
                        metadata: ["input": "\(Input.kind.rawValue)", "source": "\(kept.version.source)", "entries": "\(kept.version.entries)"])
            return (kept, nil)
        }
        do {
            let (input, note) = try TrustInputSource.load(Input.self, from: source, signature: setting.signature,
                                                          lastKnownGood: setting.lastKnownGood)
            if let note {
                logger.warning("\(Input.kind.title) not refreshed", metadata: ["input": "\(Input.kind.rawValue)", "reason": "\(note)"])
            }
            logger.info("\(Input.kind.title) in force", metadata: ["input": "\(Input.kind.rawValue)", "source": "\(input.version.source)",
                                                                    "entries": "\(input.version.entries)"])
            return (input, note)
        } catch {
            logger.warning("\(Input.kind.title) cannot be had: the snapshot shipped with tlsaudit stays in force",
                           metadata: ["input": "\(Input.kind.rawValue)", "reason": "\(error)"])
            return (shipped, "\(error)")
        }
    }

    /// Inputs started from their kept copy: fetched as soon as the service runs.
    private let refreshAtStart = Mutex<Set<TrustInputKind>>([])

    private func install(_ roots: AppleRootStore) {
        do { try TrustStore.installAppleRoots(roots) } catch {
            logger.error("Apple's roots from \(roots.source) cannot be made a trust store: the ones in force stay", metadata: ["reason": "\(error)"])
        }
    }

    /// Whether the input's source was read at start (not only its kept copy).
    private func fetchedAtStart(_ setting: TrustInputSetting) -> Bool {
        setting.source != nil && !refreshAtStart.withLock { $0.contains(setting.kind) }
    }

    /// Records a load or refresh (`fetched`: its source was read): the status, its metrics.
    private func record(_ setting: TrustInputSetting, inForce version: TrustInputVersion?, error: String?, at now: Date, fetched: Bool = true) {
        let version = version ?? AppleRootStore.shippedVersion
        let updated = status.withLock { known -> TrustInputStatus in
            var entry = known[setting.kind] ?? TrustInputStatus(inForce: version, configuredSource: setting.source, maxAge: setting.maxAge,
                                                                lastRefreshAt: nil, lastError: nil, consecutiveFailures: 0,
                                                                failuresBeforeAlert: Self.failuresBeforeAlert)
            entry.inForce = version
            if setting.source != nil, fetched { entry.lastRefreshAt = now }
            entry.lastError = error
            entry.consecutiveFailures = error == nil ? 0 : entry.consecutiveFailures + 1
            known[setting.kind] = entry
            return entry
        }
        metrics.recordTrustInput(setting.kind.rawValue, published: version.publishedAt?.timeIntervalSince1970, refreshed: error == nil,
                                 at: (updated.lastRefreshAt ?? now).timeIntervalSince1970, maxAge: setting.maxAge,
                                 failures: updated.consecutiveFailures)
    }

    /// Raises an alert for each configured input whose condition (current, stale, refresh-failing)
    /// differs from the one its latest alert left (current when there is none), and for one that is
    /// current again after a successful refresh. Inputs with no
    /// configured source (the shipped snapshots) are shown stale, not alerted on.
    func checkConditions(now: Date? = nil) {
        // Each input's refresh timer checks every input, on a concurrent queue: two checks at once
        // would each read the condition the last alert left and each raise the same transition.
        // The time is read once the lock is held: a check that waited is not older than the one before it.
        checking.withLock { _ in checkConditionsAlone(now: now ?? Date()) }
    }

    /// One check at a time (`checkConditions`).
    private let checking = Mutex(())

    private func checkConditionsAlone(now: Date) {
        for entry in current {
            if let published = entry.inForce.publishedAt {
                metrics.recordTrustInputAge(entry.inForce.input.rawValue, seconds: max(0, now.timeIntervalSince(published)))
            }
        }
        for entry in current where entry.configuredSource != nil {
            let condition = entry.condition(at: now)
            let target = "trust-input:\(entry.inForce.input.rawValue)"
            let previous = latestAlert?(target).map(Self.condition(of:)) ?? "current"
            // Current again only once a refresh succeeded (a restart without network is not a recovery).
            guard condition != previous, condition != "current" || (entry.lastRefreshAt != nil && entry.consecutiveFailures == 0) else { continue }
            let alert = Self.alert(entry, condition: condition, target: target, at: now)
            do {
                if try raise?(alert) == true {
                    logger.notice("trust input \(condition)", metadata: ["input": "\(entry.inForce.input.rawValue)", "alert": "\(alert.id)"])
                }
            } catch {
                logger.error("cannot store the trust input alert: \(error)", metadata: ["input": "\(entry.inForce.input.rawValue)"])
            }
        }
    }

    static func condition(of alert: Alert) -> String {
        switch alert.kind {
        case .trustInputStale: "stale"
        case .trustInputRefreshFailing: "refresh-failing"
        default: "current"
        }
    }

    static func alert(_ entry: TrustInputStatus, condition: String, target: String, at now: Date) -> Alert {
        let input = entry.inForce
        let age = input.ageDays(at: now).map { "\($0) days old" } ?? "of unknown age"
        let (kind, severity, summary): (AlertKind, AlertSeverity, String) = switch condition {
        case "stale":
            (.trustInputStale, .warning, "the \(input.input.title) in force (\(input.label)) is \(age), older than its max_age of \(Int(entry.maxAge / 86_400)) days: verdicts that depend on it may be wrong until it is refreshed")
        case "refresh-failing":
            (.trustInputRefreshFailing, .warning, "the \(input.input.title) could not be refreshed \(entry.consecutiveFailures) times in a row (\(entry.lastError ?? "")); \(input.label) stays in force")
        default:
            (.trustInputCurrent, .info, "the \(input.input.title) is current again: \(input.label), \(age)")
        }
        var changes = ["input": input.input.rawValue, "in_force": input.label, "condition": condition]
        if let days = input.ageDays(at: now) { changes["age_days"] = String(days) }
        if let error = entry.lastError { changes["error"] = error }
        return Alert(id: "\(target)-\(condition)-\(Int(now.timeIntervalSince1970 * 1000))", kind: kind, severity: severity, target: target,
                     host: "", port: 0, address: entry.configuredSource ?? input.source, createdAt: now, summary: summary, changes: changes)
    }
}
