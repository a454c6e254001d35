public import Foundation
public import TLSAuditModel
import TLSAuditSupport

/// One probed address, ready to be stored: the result plus the target it belongs to.
public struct StoredScan: Sendable, Codable {
    /// The target's key (its configured name, or `host:port`).
    public var target: String
    public var host: String
    public var port: Int
    public var sni: String?
    public var result: AddressScanResult
    /// The fleet node that took the scan (nil for a single node).
    public var node: String?
    /// The vantage point it was taken from (nil for a single node).
    public var vantage: String?
    /// The fleet lease the scan was taken under (nil outside a fleet's claims): the store writes
    /// it only while that lease is still the work row's newest.
    public var fence: ScanFence?
    /// The target's configured tags (`tags:`; `app:BUNDLE_ID` for an imported app's targets).
    public var tags: [String] = []
    /// Taken while the wall clock stood behind a time it had already shown (stepped back): its
    /// recorded time may be older than its address's state although it is newer, so it replaces
    /// the state as a fenced scan does (in arrival order) instead of going to the history only.
    public var afterClockStepBack = false

    /// Whether the scan is ordered by its arrival (a fleet claim's, or one taken after a clock step back).
    var ordersByArrival: Bool { fence != nil || afterClockStepBack }

    public init(target: String, host: String, port: Int, sni: String?, result: AddressScanResult,
                node: String? = nil, vantage: String? = nil, fence: ScanFence? = nil) {
        self.target = target
        self.host = host
        self.port = port
        self.sni = sni
        self.result = result
        self.node = node
        self.vantage = vantage
        self.fence = fence
    }

    enum CodingKeys: String, CodingKey { case target, host, port, sni, result, node, vantage, fence, tags, afterClockStepBack }

    /// A result kept in a spill file by a version without tags reads back with none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(target: try container.decode(String.self, forKey: .target), host: try container.decode(String.self, forKey: .host),
                  port: try container.decode(Int.self, forKey: .port), sni: try container.decodeIfPresent(String.self, forKey: .sni),
                  result: try container.decode(AddressScanResult.self, forKey: .result),
                  node: try container.decodeIfPresent(String.self, forKey: .node),
                  vantage: try container.decodeIfPresent(String.self, forKey: .vantage),
                  fence: try container.decodeIfPresent(ScanFence.self, forKey: .fence))
        tags = try container.decodeIfPresent([String].self, forKey: .tags) ?? []
        afterClockStepBack = try container.decodeIfPresent(Bool.self, forKey: .afterClockStepBack) ?? false
    }
}

/// A fencing token: the fleet work row a scan was claimed from and the lease epoch of that claim.
/// Each claim of a row raises its epoch, so a node paused past its lease (SIGSTOP, a frozen VM)
/// holds an epoch that is no longer the row's when it wakes: its result is not written.
public struct ScanFence: Sendable, Codable, Hashable {
    public var workTarget: String
    public var workVantage: String
    public var epoch: Int64

    public init(workTarget: String, workVantage: String, epoch: Int64) {
        self.workTarget = workTarget
        self.workVantage = workVantage
        self.epoch = epoch
    }
}

/// What `record` did: the alerts the stored scans raised, and the scans not stored because the
/// lease they were taken under was lost (another node claimed the target meanwhile).
public struct RecordOutcome: Sendable {
    public var alerts: [Alert]
    public var leaseLost: [StoredScan]

    public init(alerts: [Alert], leaseLost: [StoredScan] = []) {
        self.alerts = alerts
        self.leaseLost = leaseLost
    }
}

/// The targets a configuration has in force, each with its group: which stored rows `status` and
/// the API show (a target removed from the configuration is not), and the group each row is in.
public struct ConfiguredTargets: Sendable {
    /// Configured key to its group (nil: in no group).
    public let groups: [String: String?]
    /// The configured keys.
    public let keys: Set<String>

    public init(_ targets: [(key: String, group: String?)]) {
        groups = Dictionary(targets.map { ($0.key, $0.group) }, uniquingKeysWith: { first, _ in first })
        keys = Set(groups.keys)
    }

    /// The rows of configured targets (and of their vantages, `KEY@VANTAGE`), each with its group.
    public func shown(_ rows: [TargetStatus]) -> [TargetStatus] {
        rows.compactMap { row in entry(row.target).map { group in row.in(group: group) } }
    }

    /// Every row, each the configuration names with its group (a target it no longer names, without).
    public func grouped(_ rows: [TargetStatus]) -> [TargetStatus] {
        rows.map { row in row.in(group: entry(row.target) ?? nil) }
    }

    /// A stored target's entry (its configured key's, for a vantage `KEY@VANTAGE`): its group, or nil when not configured.
    private func entry(_ stored: String) -> String?? {
        groups[stored] ?? groups[VantageTarget.split(stored).key]
    }
}

extension TargetStatus {
    /// The row with `group` as its group.
    fileprivate func `in`(group: String?) -> TargetStatus {
        var row = self
        row.group = group
        return row
    }
}

/// The JSON of `status --format json` and of the HTTP API's `/api/v1/status`.
public struct StatusDocument: Encodable, Sendable {
    public let schema = "tlsaudit.status/1"
    public let targets: [TargetStatus]

    public init(targets: [TargetStatus]) { self.targets = targets }
}

/// The current state of one target address: its last scan and what follows from it.
public struct TargetStatus: Sendable, Codable, Hashable {
    public var target: String
    public var address: String
    public var host: String
    public var port: Int
    public var lastScanAt: Date
    public var lastObservationID: Int64
    public var status: AddressScanResult.Status
    public var policy: CompliancePolicy
    public var compliant: Bool
    public var failedRules: [FindingID]
    /// The earliest notAfter over the chain (path as built, else as presented).
    public var earliestExpiry: Date?
    public var leafFingerprint: String?
    public var leafSPKI: String?
    public var failureCategory: ProbeFailureCategory?
    public var consecutiveFailures: Int
    public var lastSuccessAt: Date?
    /// Pin state: `none` until pins are configured for the target.
    public var pinState: PinEvaluation.State
    /// The `trust.*` errors of the latest scan (what is behind `ats.trust`: `trust.expired`, ...).
    public var trustErrors: [FindingID] = []
    /// The target's tags as of its latest scan.
    public var tags: [String] = []
    /// For a target judged by an app's rules: the latest scan's outcome for that app.
    public var app: AppHostOutcome?
    /// The configuration group the target is in (set from the configuration in force, when it is known).
    public var group: String?

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips.
    enum CodingKeys: String, CodingKey {
        case target, address, host, port, lastScanAt, lastObservationID = "lastObservationId", status, policy, compliant
        case failedRules, earliestExpiry, leafFingerprint, leafSPKI = "leafSpki", failureCategory, consecutiveFailures
        case lastSuccessAt, pinState, trustErrors, tags, app, group
    }

    /// The reasons to show: the failed rules, `ats.trust` replaced by the trust errors behind it.
    public var reasons: [FindingID] { TrustReasons.expand(failedRules, trustErrors: trustErrors) }

    public init(target: String, address: String, host: String, port: Int, lastScanAt: Date, lastObservationID: Int64,
                status: AddressScanResult.Status, policy: CompliancePolicy, compliant: Bool, failedRules: [FindingID],
                earliestExpiry: Date?, leafFingerprint: String?, leafSPKI: String?, failureCategory: ProbeFailureCategory?,
                consecutiveFailures: Int, lastSuccessAt: Date?, pinState: PinEvaluation.State) {
        self.target = target
        self.address = address
        self.host = host
        self.port = port
        self.lastScanAt = lastScanAt
        self.lastObservationID = lastObservationID
        self.status = status
        self.policy = policy
        self.compliant = compliant
        self.failedRules = failedRules
        self.earliestExpiry = earliestExpiry
        self.leafFingerprint = leafFingerprint
        self.leafSPKI = leafSPKI
        self.failureCategory = failureCategory
        self.consecutiveFailures = consecutiveFailures
        self.lastSuccessAt = lastSuccessAt
        self.pinState = pinState
    }
}

/// What a person needs instead of `ats.trust`: the specific trust errors.
public enum TrustReasons {
    /// `rules` with `ats.trust` replaced by `trustErrors` (deduplicated, in order), when there are any.
    public static func expand(_ rules: [FindingID], trustErrors: [FindingID]) -> [FindingID] {
        var seen = Set<FindingID>()
        let specific = trustErrors.filter { seen.insert($0).inserted }
        guard !specific.isEmpty, let index = rules.firstIndex(of: .atsTrust) else { return rules }
        var expanded = rules
        expanded.replaceSubrange(index...index, with: specific)
        return expanded
    }
}

/// One stored scan of a target address, as `history` lists it.
public struct HistoryEntry: Sendable, Codable, Hashable {
    public var observationID: Int64
    public var target: String
    public var address: String
    public var startedAt: Date
    public var durationMs: Int
    public var status: AddressScanResult.Status
    public var failureCategory: ProbeFailureCategory?
    public var failureMessage: String?
    public var protocolVersion: TLSVersion?
    public var cipher: String?
    public var leafFingerprint: String?
    public var leafSPKI: String?
    public var policy: CompliancePolicy
    public var compliant: Bool
    public var failedRules: [FindingID]
    public var findings: [Finding]
    /// The configuration inventory, when the target asked for it (`checks: [inventory]`).
    public var inventory: ServerInventory?
    /// HTTP security headers and the port-80 redirect, when the target asked for them (`checks: [headers]`).
    public var headers: HTTPHeadersReport?
    /// Heartbleed, CCS injection, ROBOT and the named verdicts (DROWN ... ClientHello tolerance), when the target asked for them (`checks: [vulnerabilities]`).
    public var vulnerabilities: VulnerabilityReport?
    /// Which simulated clients connect, when the target asked for it (`checks: [clients]`).
    public var clients: ClientSimulationReport?
    /// The reports of the opt-in checks without a field of their own, by check name.
    public var checkReports: [String: CheckReport]?
    /// When later scans showed the same content and verdict: the run they make with this one
    /// (nil for a scan seen once). `startedAt` and `durationMs` are the run's first scan's.
    public var run: RunSummary?
    /// The trust inputs the scan was judged with (scans by `serve`).
    public var judgedWith: JudgedWith?
    /// The input a refresh put in force between the address's previous entry and this one, when
    /// the verdict changed and the leaf did not: the change is the input's ("judged again with log list 54.1").
    public var judgedAgainWith: String?

    /// Sets `judgedAgainWith` on each of `entries` (newest first) from the older entry of its address.
    static func noteInputChanges(_ entries: inout [HistoryEntry]) {
        for index in entries.indices {
            let entry = entries[index]
            guard let older = entries[(index + 1)...].first(where: { $0.target == entry.target && $0.address == entry.address }),
                  older.status == .completed, entry.status == .completed, older.leafFingerprint == entry.leafFingerprint,
                  older.compliant != entry.compliant || older.failedRules != entry.failedRules else { continue }
            entries[index].judgedAgainWith = entry.judgedWith?.changedSince(older.run?.lastSeenAt ?? older.startedAt)
        }
    }

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips.
    enum CodingKeys: String, CodingKey {
        case observationID = "observationId", target, address, startedAt, durationMs, status, failureCategory, failureMessage
        case protocolVersion, cipher, leafFingerprint, leafSPKI = "leafSpki", policy, compliant, failedRules, findings, inventory, headers, vulnerabilities
        case clients, checkReports, run, judgedWith, judgedAgainWith
    }

    public init(observationID: Int64, target: String, address: String, startedAt: Date, durationMs: Int,
                status: AddressScanResult.Status, failureCategory: ProbeFailureCategory?, failureMessage: String?,
                protocolVersion: TLSVersion?, cipher: String?, leafFingerprint: String?, leafSPKI: String?,
                policy: CompliancePolicy, compliant: Bool, failedRules: [FindingID], findings: [Finding],
                inventory: ServerInventory? = nil, headers: HTTPHeadersReport? = nil, vulnerabilities: VulnerabilityReport? = nil,
                clients: ClientSimulationReport? = nil) {
        self.observationID = observationID
        self.target = target
        self.address = address
        self.startedAt = startedAt
        self.durationMs = durationMs
        self.status = status
        self.failureCategory = failureCategory
        self.failureMessage = failureMessage
        self.protocolVersion = protocolVersion
        self.cipher = cipher
        self.leafFingerprint = leafFingerprint
        self.leafSPKI = leafSPKI
        self.policy = policy
        self.compliant = compliant
        self.failedRules = failedRules
        self.findings = findings
        self.inventory = inventory
        self.headers = headers
        self.vulnerabilities = vulnerabilities
        self.clients = clients
    }
}

/// Scans of one address in a row with the same content and verdict, kept as one observation
/// (the first scan) and this summary of the others.
public struct RunSummary: Sendable, Codable, Hashable {
    /// Scans in the run, the first included.
    public var scans: Int
    /// When the newest of them started.
    public var lastSeenAt: Date
    /// Their durations (milliseconds).
    public var durationMinMs: Int
    public var durationMaxMs: Int
    public var durationMeanMs: Int

    package init(scans: Int, lastSeenAt: Date, durationMinMs: Int, durationMaxMs: Int, durationMeanMs: Int) {
        self.scans = scans
        self.lastSeenAt = lastSeenAt
        self.durationMinMs = durationMinMs
        self.durationMaxMs = durationMaxMs
        self.durationMeanMs = durationMeanMs
    }
}

/// What the retention job removed.
public struct PruneResult: Sendable, Hashable {
    public var observations: Int
    public var certificates: Int

    package init(observations: Int, certificates: Int) {
        self.observations = observations
        self.certificates = certificates
    }
}

/// Where scan history lives: the one interface the service, `status`, `history` and reports
/// use, made of one protocol per role. SQLite is the embedded default; PostgreSQL (for fleets of
/// scanners) is the other backend; both get their logic from `StoreEngine` (`EngineBackedStore`).
public protocol ScanStore: ScanRecords, AlertOutbox, ReportRunLedger, RevocationAnswers, CTLogLedger {
    /// Where the store is, for messages (a file path, or a URL without secrets).
    var displayLocation: String { get }
}

/// Scans and what is read back from them: results, the current state, history, report facts.
public protocol ScanRecords: Sendable {
    /// Stores scans in one transaction, with the alerts `decide` says they raise and a pending
    /// delivery per sink it names; when it returns all of it is durable. A scan older than the
    /// address's current state is kept in the history but neither changes that state nor raises
    /// alerts (state never moves back in time); a fenced scan whose lease was lost is not stored.
    func record(_ scans: [StoredScan], decide: AlertDecision) throws -> RecordOutcome
    /// The current state of every target address, ordered by target and address.
    func status() throws -> [TargetStatus]
    /// The current state of each address of the stored target `target` (exactly that key), ordered by address.
    func status(of target: String) throws -> [TargetStatus]
    /// The current state of every vantage of `target` (stored as `TARGET@VANTAGE`: `VantageTarget`).
    func vantageStatus(of target: String) throws -> [TargetStatus]
    /// The newest scans of a target (by key, host or `host:port`), newest first; a run of unchanged
    /// scans is one entry, its first scan with the run's summary (`HistoryEntry.run`).
    func history(target: String, limit: Int) throws -> [HistoryEntry]
    /// A stored result, rebuilt from its raw observations (for re-judging under another policy).
    func result(observationID: Int64) throws -> AddressScanResult?
    /// Calls `body` with every observation (a run's first scan: its repeats are in the `scan` view) started within `period`, oldest first, one row at a
    /// time from a cursor: memory stays bounded however many there are. `body` must not write to
    /// the store (the read holds a snapshot).
    func forEachObservation(startedIn period: ClosedRange<Date>, _ body: (ObservationRow) throws -> Void) throws
    /// Calls `body` with a reader of the stored facts a report is computed from, inside one read
    /// snapshot (consistent while scans keep being written); the reader is valid only within `body`.
    func readReportFacts<T>(_ body: (any ReportFactReader) throws -> T) throws -> T
    /// Deletes scans older than `cutoff`, except each target address's latest, and certificates
    /// no scan refers to any more.
    func prune(olderThan cutoff: Date) throws -> PruneResult
}

/// Alerts and their deliveries to each sink: stored with the scan that raised them, claimed
/// under a lease by the node that delivers them.
public protocol AlertOutbox: Sendable {
    /// Deliveries not yet made to one of `sinks` whose next attempt is due, oldest alert first
    /// (a sink removed from the configuration keeps its backlog without blocking the others).
    func pendingDeliveries(dueBy time: Date, sinks: [String], limit: Int) throws -> [PendingDelivery]
    /// Claims deliveries as `pendingDeliveries` lists them, for `lease` seconds: their next attempt
    /// moves to `time + lease`, so no other node of a fleet takes them meanwhile; one neither
    /// marked nor released by then (its node died) is due again.
    func claimDeliveries(dueBy time: Date, sinks: [String], limit: Int, lease: Double) throws -> [PendingDelivery]
    /// Gives claimed deliveries back unattempted: due again at `time`.
    func releaseDeliveries(_ deliveries: [PendingDelivery], dueAt time: Date) throws
    /// Makes every pending delivery due at `time`: a single node starting again, whose previous
    /// run may have been killed holding claims (their lease would otherwise hold the alert back).
    func releaseEveryDelivery(dueAt time: Date) throws
    /// Whether the claim `delivery` came with is still the delivery's newest and its lease still
    /// runs (asked right before sending: a node paused past the lease must not send).
    func stillHolds(_ delivery: PendingDelivery) throws -> Bool
    /// Records an attempt's outcome; with `leaseEpoch`, only while that claim is still the
    /// delivery's newest (a node that lost it records nothing).
    func markDelivered(alertID: String, sink: String, at time: Date, leaseEpoch: Int64?) throws
    func markFailed(alertID: String, sink: String, error: String, retryAt: Date, leaseEpoch: Int64?) throws
    /// The newest alerts with their delivery state.
    func alerts(limit: Int) throws -> [StoredAlert]
    /// The newest alerts of the stored target `target` with their delivery state.
    func alerts(of target: String, limit: Int) throws -> [StoredAlert]
    /// Stores an alert raised apart from a scan's write (a fleet's split view) with a pending
    /// delivery per sink named; false when an alert with its id is stored already (then nothing is).
    func recordAlert(_ alert: Alert, sinks: [String]) throws -> Bool
}

/// Scheduled report runs: which periods were written, and who writes the next.
public protocol ReportRunLedger: Sendable {
    /// The end of the period of the latest scheduled report `name` written, nil before the first.
    func lastReportRun(name: String) throws -> Date?
    /// Asks to write the scheduled report `name` for the period ending at `periodEnd`, as `owner`,
    /// for `lease` seconds: in a fleet exactly one node writes each report; one that dies while
    /// writing hands it over when its lease ends.
    func claimReportRun(name: String, periodEnd: Date, owner: String, lease: Double) throws -> ReportRunClaim
    /// Whether `owner` still holds the run's claim of `epoch` under a running lease (asked before
    /// writing the files and before sending them).
    func holdsReportRun(name: String, periodEnd: Date, owner: String, epoch: Int64) throws -> Bool
    /// Records that the scheduled report `name` for the period ending at `periodEnd` was written
    /// (`files`) and how its delivery to each sink went (by sink name); with `claim`, only while
    /// that claim is still the run's (false when it was not recorded for that reason).
    @discardableResult
    func recordReportRun(name: String, periodEnd: Date, files: [String], delivery: [String: ReportDelivery],
                         claim: (owner: String, epoch: Int64)?) throws -> Bool
}

/// Revocation answers (OCSP responses, CRLs) kept until they expire.
public protocol RevocationAnswers: Sendable {
    /// A revocation answer (OCSP response or CRL, as fetched) stored under `key` that has not expired at `time`.
    func revocationAnswer(for key: String, at time: Date) throws -> (body: [UInt8], expires: Date)?
    /// Keeps a revocation answer until `expires` (expired ones are dropped meanwhile).
    func saveRevocationAnswer(_ body: [UInt8], for key: String, expires: Date) throws
}

/// Where the Certificate Transparency follower stands in each log, kept across restarts.
public protocol CTLogLedger: Sendable {
    /// Every log's state, in log id order.
    func ctLogStates() throws -> [CTLogState]
    /// Keeps `state` (replacing the log's earlier one).
    func saveCTLogState(_ state: CTLogState) throws
    /// In a fleet, asks to follow the log `logID` as `owner` for `lease` seconds (on the database's
    /// clock): the claim's epoch when `owner` holds it (renewed; a new epoch when it was another's
    /// or had lapsed), nil while another node's lease runs. One follower per log.
    func claimCTLog(_ logID: String, owner: String, lease: Double) throws -> Int64?
    /// Keeps `state` only while `claim` is the log's current claim under a running lease; false
    /// when it is not (another node took the log over: this one must stop acting on it).
    func saveCTLogState(_ state: CTLogState, claim: (owner: String, epoch: Int64)) throws -> Bool
    /// Records what the follower judged of a logged certificate; a sighting already recorded (its
    /// id: the certificate's precertificate, or another log's copy) is left as it was.
    func recordCTSighting(_ sighting: CTSighting) throws
    /// Sightings of certificates valid from `since` on (all when nil), newest notBefore first, at most `limit`.
    func ctSightings(validFrom since: Date?, limit: Int) throws -> [CTSighting]
}

/// A certificate the CT follower saw logged for a pinned or watched name, and what it made of it.
public struct CTSighting: Hashable, Sendable, Codable {
    /// What the follower made of it.
    public enum Verdict: String, Sendable, Codable, CaseIterable {
        /// The pins of `judgedBy` refuse it: `pin.forecast-break`.
        case pinBreak = "break"
        /// The pins of `judgedBy` accept it.
        case covered
        /// Issued by a CA the `ct: watch` entry does not allow: `ct.unexpected-issuer`.
        case unexpectedIssuer = "unexpected-issuer"
        /// Watched, no pin and no issuer rule against it.
        case seen
    }

    /// Stable: the certificate (serial, issuer) and who judged it for which host.
    public var id: String
    public var seenAt: Date
    /// The log's description and the entry's index in it.
    public var log: String
    public var index: UInt64
    public var precertificate: Bool
    /// The host reached, and the configured target or watch entry whose rule judged it.
    public var host: String
    public var target: String
    /// Who pins or watches, in words (`target api`, `app com.example (AFSecurityPolicy)`, `ct: watch`).
    public var judgedBy: String
    public var verdict: Verdict
    public var serial: String
    public var issuer: String
    /// The certificate's SPKI pin (base64 SHA-256).
    public var spki: String
    public var notBefore: Date
    public var notAfter: Date

    public init(id: String, seenAt: Date, log: String, index: UInt64, precertificate: Bool, host: String, target: String, judgedBy: String,
                verdict: Verdict, serial: String, issuer: String, spki: String, notBefore: Date, notAfter: Date) {
        self.id = id
        self.seenAt = seenAt
        self.log = log
        self.index = index
        self.precertificate = precertificate
        self.host = host
        self.target = target
        self.judgedBy = judgedBy
        self.verdict = verdict
        self.serial = serial
        self.issuer = issuer
        self.spki = spki
        self.notBefore = notBefore
        self.notAfter = notAfter
    }
}

/// One log's state: the follower's position (its own JSON, read back as it wrote it) and what
/// the log last did wrong.
public struct CTLogState: Hashable, Sendable {
    /// The log's id (base64 SHA-256 of its key, as the log list names it).
    public var logID: String
    public var position: String
    /// A fork, a rewind, entries that are not the tree's: why the follower stopped acting on the log.
    public var problem: String?
    public var updatedAt: Date
    /// In a fleet, the node that follows the log and until when (its lease); nil on a single node.
    public var owner: String? = nil
    public var leaseUntil: Date? = nil

    public init(logID: String, position: String, problem: String? = nil, updatedAt: Date) {
        self.logID = logID
        self.position = position
        self.problem = problem
        self.updatedAt = updatedAt
    }
}

/// A store kept in a file (SQLite): what it commits is lost if the file at its path is no
/// longer the file it opened.
public protocol FileBackedStore {
    /// Throws `StoreError.Kind.vanished` when the file this store writes is no longer the file at
    /// its path (deleted, moved away or replaced while open): what it commits would be lost.
    func checkFileIdentity() throws
}

/// One stored observation as `forEachObservation` streams it: what identifies it and its verdict
/// under its own policy.
public struct ObservationRow: Sendable, Hashable {
    public var id: Int64
    public var target: String
    public var address: String
    public var startedAt: Date
    public var status: AddressScanResult.Status
    public var policy: CompliancePolicy?

    package init(id: Int64, target: String, address: String, startedAt: Date, status: AddressScanResult.Status, policy: CompliancePolicy?) {
        self.id = id
        self.target = target
        self.address = address
        self.startedAt = startedAt
        self.status = status
        self.policy = policy
    }
}

/// Errors from the store, with a plain message. `isFull` / `isReadOnly` let the service say
/// what is wrong and keep going.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable {
        case full, readOnly, corrupt, unavailable, other
        /// The open database file is no longer the one at its path.
        case vanished
        /// The schema has migrations this version does not know (a newer tlsaudit wrote it).
        case incompatible
        /// A stored value this version cannot read (a newer tlsaudit's, or damaged): the file's
        /// pages are sound as far as SQLite can tell, so it is not treated as damage.
        case unreadable
    }

    /// Failures that retrying cannot cure: the service refuses to start on them (exit 2), and a
    /// damaged database met while running stops storing (results go to the spill file).
    public var isFatal: Bool { kind == .incompatible || kind == .corrupt }
    public var kind: Kind
    public var description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// What one stored scan raises, decided by the caller (the service's alert detector and sink
/// choice) inside the write transaction, from what the store remembers of the address: the alerts,
/// each with the sinks to deliver it to, and what to remember now. The store only keeps the facts.
public struct AlertOutcome: Sendable {
    public var alerts: [(alert: Alert, sinks: [String])]
    public var memory: AddressMemory

    public init(alerts: [(alert: Alert, sinks: [String])], memory: AddressMemory) {
        self.alerts = alerts
        self.memory = memory
    }
}

/// Decides a stored scan's `AlertOutcome` from the address's previous memory (nil before its
/// first scan) and the id the observation was stored under.
public typealias AlertDecision = @Sendable (_ previous: AddressMemory?, _ scan: StoredScan, _ observationID: Int64) -> AlertOutcome

/// An alert still to be delivered to one sink.
/// Who writes a scheduled report's run.
public enum ReportRunClaim: Sendable, Hashable {
    /// The caller: it writes the report, then records the run; `epoch` is the claim's fencing
    /// token (each claim of the run raises it).
    case claimed(epoch: Int64)
    /// Another node holds the claim now (ask again later: it may die).
    case heldByAnother(String)
    /// The run is recorded already.
    case written
}

public struct PendingDelivery: Sendable {
    public var alert: Alert
    public var sink: String
    public var attempts: Int
    /// The claim's fencing token (0 when listed, not claimed).
    public var leaseEpoch: Int64 = 0

    package init(alert: Alert, sink: String, attempts: Int) {
        self.alert = alert
        self.sink = sink
        self.attempts = attempts
    }
}

/// Where an alert's delivery to one sink stands.
public enum DeliveryState: String, Sendable, Codable {
    /// Not delivered yet (attempts may have failed; `lastError` says why).
    case pending
    case delivered
}

/// How a scheduled report's delivery to one sink went. Stored as `delivered` or the error's text.
public enum ReportDelivery: Sendable, Hashable, Encodable {
    case delivered
    case failed(String)

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .delivered: try container.encode("delivered")
        case .failed(let error): try container.encode(error)
        }
    }
}

/// An alert as stored, with its delivery state per sink.
public struct StoredAlert: Sendable, Codable {
    public struct Delivery: Sendable, Codable, Hashable {
        public var sink: String
        public var state: DeliveryState
        public var attempts: Int
        public var lastError: String?

        package init(sink: String, state: DeliveryState, attempts: Int, lastError: String?) {
            self.sink = sink
            self.state = state
            self.attempts = attempts
            self.lastError = lastError
        }
    }

    public var alert: Alert
    public var deliveries: [Delivery]

    package init(alert: Alert, deliveries: [Delivery]) {
        self.alert = alert
        self.deliveries = deliveries
    }
}

extension AlertOutbox {
    /// `markDelivered` without a claim to check (a single writer, tests).
    public func markDelivered(alertID: String, sink: String, at time: Date) throws {
        try markDelivered(alertID: alertID, sink: sink, at: time, leaseEpoch: nil)
    }

    /// `markFailed` without a claim to check.
    public func markFailed(alertID: String, sink: String, error: String, retryAt: Date) throws {
        try markFailed(alertID: alertID, sink: sink, error: error, retryAt: retryAt, leaseEpoch: nil)
    }
}

extension ReportRunLedger {
    /// `recordReportRun` without a claim to check.
    public func recordReportRun(name: String, periodEnd: Date, files: [String], delivery: [String: ReportDelivery]) throws {
        try recordReportRun(name: name, periodEnd: periodEnd, files: files, delivery: delivery, claim: nil)
    }
}
