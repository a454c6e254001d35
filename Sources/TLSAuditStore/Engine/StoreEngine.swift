public import Foundation
public import TLSAuditModel

/// The store's logic, written once over `SQLDatabase`: recording scans (observations, verdicts,
/// the address timeline, the remembered state and the alerts a scan raises), reading results,
/// history and report facts, the alert outbox, report runs and revocation answers. A backend
/// (`SQLiteScanStore`, `PostgresScanStore`) brings its connections, its dialect and its
/// migrations, and conforms to `EngineBackedStore` to get every `ScanStore` requirement from here.
public final class StoreEngine: Sendable {
    let database: any SQLDatabase
    /// The package's one SHA-256 (`Digest.sha256Hex` in the probe), for observation content hashes.
    let sha256: SHA256Hex
    let handshakeJSON = HandshakeJSONCache()
    /// Which fleet claims (fences) still stand, asked inside the write transaction; nil where
    /// there is no fleet (every fenced scan is stored).
    let standingFences: StandingFences?

    /// Given the fences of a batch's scans, each with the newest start time of its scans, says what
    /// each claim's results are now; runs in the batch's transaction (and may lock the claims until it ends).
    public typealias StandingFences = @Sendable ([ScanFence: Double], any SQLExecutor) throws -> [ScanFence: FenceStanding]

    /// What a claim's results are when they reach the store.
    public enum FenceStanding: Sendable {
        /// The claim is the work row's newest: its results come after every other and become the
        /// current state.
        case current
        /// The claim is no longer the row's, but its results stand: it completed under its lease
        /// (another node's writer stored the next claim's result first), or it lapsed with no
        /// newer result of its target stored (a writer retrying through an outage, a paused node).
        /// Stored as any unfenced scan is, as the current state when newest, else as history.
        case expired
        /// The claim lapsed before its scan completed, another claim took the target over and a
        /// newer result of it is stored, or the target left the fleet: not stored.
        case superseded
    }

    /// The statements a scan's write runs that the dialect spells, built once.
    let statements: Statements

    public init(database: any SQLDatabase, sha256: @escaping SHA256Hex, standingFences: StandingFences? = nil) {
        self.database = database
        self.sha256 = sha256
        self.standingFences = standingFences
        statements = Statements(database.dialect)
    }

    /// SQL of the write path that depends on the dialect, built once rather than per scan.
    struct Statements: Sendable {
        /// The timeline's state in force at a time: target, address, time.
        let timelineBefore: String
        /// The scan that follows a time (a run's first or one of its repeats), with its run's
        /// observation and counted verdict: target, address, time.
        let timelineNext: String
        /// Pending deliveries, each due at its alert's time: alert id, sink, `dialect.time(createdAt)`.
        let insertDeliveries: SQLBatch

        init(_ dialect: any SQLDialect) {
            timelineBefore = """
                SELECT condition, policy, failed_rules FROM address_change WHERE target = ? AND address = ? AND started_at <= ?
                ORDER BY started_at DESC, \(dialect.addressChangeID) DESC LIMIT 1
                """
            timelineNext = """
                SELECT o.id, s.started_at, o.status, o.trust_store IS NOT NULL, v.compliant, v.policy, v.failed_rules,
                    \(dialect.jsonText("v.pin", "state"))
                FROM scan s JOIN observation o ON o.id = s.observation_id JOIN verdict v ON v.observation_id = o.id AND v.policy = o.policy
                WHERE s.target = ? AND s.address = ? AND s.started_at > ? ORDER BY s.started_at, s.observation_id LIMIT 1
                """
            // The clock at each row's due time.
            insertDeliveries = BatchWrites.insertDeliveries(clock: dialect.clock("u.due"))
        }
    }
}

/// A store whose every `ScanStore` requirement is the engine's: a backend conforms by naming
/// its engine (and may still implement a requirement itself where it has a better way).
public protocol EngineBackedStore: ScanStore {
    var engine: StoreEngine { get }
}

extension EngineBackedStore {
    public func record(_ scans: [StoredScan], decide: AlertDecision) throws -> RecordOutcome {
        try engine.record(scans, decide: decide)
    }
    public func status() throws -> [TargetStatus] { try engine.status() }
    public func status(of target: String) throws -> [TargetStatus] { try engine.status(of: target) }
    public func vantageStatus(of target: String) throws -> [TargetStatus] { try engine.vantageStatus(of: target) }
    public func history(target: String, limit: Int) throws -> [HistoryEntry] { try engine.history(target: target, limit: limit) }
    public func result(observationID: Int64) throws -> AddressScanResult? { try engine.result(observationID: observationID) }
    public func forEachObservation(startedIn period: ClosedRange<Date>, _ body: (ObservationRow) throws -> Void) throws {
        try engine.forEachObservation(startedIn: period, body)
    }
    public func readReportFacts<T>(_ body: (any ReportFactReader) throws -> T) throws -> T { try engine.readReportFacts(body) }
    public func prune(olderThan cutoff: Date) throws -> PruneResult { try engine.prune(olderThan: cutoff) }

    public func pendingDeliveries(dueBy time: Date, sinks: [String], limit: Int) throws -> [PendingDelivery] {
        try engine.pendingDeliveries(dueBy: time, sinks: sinks, limit: limit)
    }
    public func claimDeliveries(dueBy time: Date, sinks: [String], limit: Int, lease: Double) throws -> [PendingDelivery] {
        try engine.claimDeliveries(dueBy: time, sinks: sinks, limit: limit, lease: lease)
    }
    public func releaseDeliveries(_ deliveries: [PendingDelivery], dueAt time: Date) throws {
        try engine.releaseDeliveries(deliveries, dueAt: time)
    }
    public func releaseEveryDelivery(dueAt time: Date) throws { try engine.releaseEveryDelivery(dueAt: time) }
    public func stillHolds(_ delivery: PendingDelivery) throws -> Bool { try engine.stillHolds(delivery) }
    public func markDelivered(alertID: String, sink: String, at time: Date, leaseEpoch: Int64?) throws {
        try engine.markDelivered(alertID: alertID, sink: sink, at: time, leaseEpoch: leaseEpoch)
    }
    public func markFailed(alertID: String, sink: String, error: String, retryAt: Date, leaseEpoch: Int64?) throws {
        try engine.markFailed(alertID: alertID, sink: sink, error: error, retryAt: retryAt, leaseEpoch: leaseEpoch)
    }
    public func alerts(limit: Int) throws -> [StoredAlert] { try engine.alerts(limit: limit) }
    public func alerts(of target: String, limit: Int) throws -> [StoredAlert] { try engine.alerts(of: target, limit: limit) }
    public func recordAlert(_ alert: Alert, sinks: [String]) throws -> Bool { try engine.recordAlert(alert, sinks: sinks) }

    public func lastReportRun(name: String) throws -> Date? { try engine.lastReportRun(name: name) }
    public func claimReportRun(name: String, periodEnd: Date, owner: String, lease: Double) throws -> ReportRunClaim {
        try engine.claimReportRun(name: name, periodEnd: periodEnd, owner: owner, lease: lease)
    }
    public func holdsReportRun(name: String, periodEnd: Date, owner: String, epoch: Int64) throws -> Bool {
        try engine.holdsReportRun(name: name, periodEnd: periodEnd, owner: owner, epoch: epoch)
    }
    public func recordReportRun(name: String, periodEnd: Date, files: [String], delivery: [String: ReportDelivery],
                                claim: (owner: String, epoch: Int64)?) throws -> Bool {
        try engine.recordReportRun(name: name, periodEnd: periodEnd, files: files, delivery: delivery, claim: claim)
    }

    public func ctLogStates() throws -> [CTLogState] { try engine.ctLogStates() }
    public func saveCTLogState(_ state: CTLogState) throws { try engine.saveCTLogState(state) }
    public func claimCTLog(_ logID: String, owner: String, lease: Double) throws -> Int64? {
        try engine.claimCTLog(logID, owner: owner, lease: lease)
    }
    public func saveCTLogState(_ state: CTLogState, claim: (owner: String, epoch: Int64)) throws -> Bool {
        try engine.saveCTLogState(state, claim: claim)
    }
    public func recordCTSighting(_ sighting: CTSighting) throws { try engine.recordCTSighting(sighting) }
    public func ctSightings(validFrom since: Date?, limit: Int) throws -> [CTSighting] { try engine.ctSightings(validFrom: since, limit: limit) }

    public func revocationAnswer(for key: String, at time: Date) throws -> (body: [UInt8], expires: Date)? {
        try engine.revocationAnswer(for: key, at: time)
    }
    public func saveRevocationAnswer(_ body: [UInt8], for key: String, expires: Date) throws {
        try engine.saveRevocationAnswer(body, for: key, expires: expires)
    }
}
