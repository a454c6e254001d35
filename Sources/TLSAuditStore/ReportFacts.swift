public import Foundation
public import TLSAuditModel

/// What a report reads from a store, inside one read snapshot (`ScanStore.readReportFacts`): the
/// stored facts and the stored verdicts, streamed or fetched in bulk. The report module computes the
/// trend, the transitions and any re-judging from them; the store decides nothing.
public protocol ReportFactReader {
    /// Every target address with a current state, ordered by target and address.
    func addresses() throws -> [StoredAddress]
    /// The scan each address's current state points at, when it started at or before `end`, with
    /// its verdict under `policy` (each scan's own when nil) and its details; by observation id.
    func latestScans(upTo end: Date, policy: CompliancePolicy?) throws -> [Int64: ScanFacts]
    /// The certificate references of the scans `latestScans` returns, by observation id, each
    /// list ordered by role and position.
    func latestChainReferences() throws -> [Int64: [ChainReference]]
    /// The newest scan of an address started at or before `time` (with `reachableOnly`, the newest
    /// that reached the server: completed, or with a chain), with its verdict under `policy` and,
    /// when `details`, what the report shows of it.
    func lastScan(target: String, address: String, atOrBefore time: Date, reachableOnly: Bool,
                  policy: CompliancePolicy?, details: Bool) throws -> ScanFacts?
    /// One scan's certificate references, ordered by role and position.
    func chainReferences(observationID: Int64) throws -> [ChainReference]
    /// A stored certificate's names and dates (depth 0).
    func certificate(fingerprint: String) throws -> ChainCertificate?
    /// Several at once, by fingerprint (one round trip where a store is remote).
    func certificates(fingerprints: [String]) throws -> [String: ChainCertificate]
    /// `chainReferences(observationID:)` for several scans at once, by scan.
    func chainReferences(observationIDs: [Int64]) throws -> [Int64: [ChainReference]]
    /// `lastScan(... reachableOnly: true, details: true)` for several addresses at once.
    func lastReachableScans(of keys: [AddressKey], atOrBefore time: Date, policy: CompliancePolicy?) throws -> [AddressKey: ScanFacts]
    /// Where every address stood at `time` by the stored verdict changes (each scan's own verdict).
    func standings(at time: Date) throws -> [AddressKey: VerdictStanding]
    /// Streams the stored verdict changes with `start < at <= end`, oldest first, from a cursor.
    func forEachVerdictChange(after start: Date, through end: Date, _ body: (VerdictChange) throws -> Void) throws
    /// Streams every scan with `start < startedAt <= end`, oldest first, from a cursor, with its
    /// stored verdict under `policy` where there is one (else the key of its content, to judge it again).
    func forEachScan(after start: Date, through end: Date, policy: CompliancePolicy,
                     _ body: (ScanFacts) throws -> Void) throws
    /// A stored result rebuilt from its rows (certificates decoded once per read).
    func result(observationID: Int64) throws -> AddressScanResult?
    /// A hint given before the other reads: `scanCounts` will be asked for this period; a reader
    /// may start counting now, beside the other reads (the default does nothing).
    func willCountScans(after start: Date, through end: Date, targets: Set<String>?)
    /// How many scans started in the period (of `targets` only, when given), and how many failed.
    func scanCounts(after start: Date, through end: Date, targets: Set<String>?) throws -> (all: Int, failed: Int)
    /// The alerts raised in the period, oldest first.
    func alerts(after start: Date, through end: Date) throws -> [AlertSummary]
}

/// A target address: the key of its current state and of its timeline.
public struct AddressKey: Sendable, Hashable {
    public var target: String
    public var address: String

    public init(target: String, address: String) {
        self.target = target
        self.address = address
    }
}

/// A target address with a current state: the scan it points at.
public struct StoredAddress: Sendable, Hashable {
    public var key: AddressKey
    public var lastObservationID: Int64
    public var lastScanAt: Date
    /// The target's configured tags as of that scan.
    public var tags: [String]

    package init(key: AddressKey, lastObservationID: Int64, lastScanAt: Date, tags: [String] = []) {
        self.key = key
        self.lastObservationID = lastObservationID
        self.lastScanAt = lastScanAt
        self.tags = tags
    }
}

/// A verdict's failed rules as stored (a JSON array of rule ids): compared as stored and decoded
/// only when needed, so that a million verdicts are not decoded one by one.
public struct StoredRules: Sendable, Hashable {
    public var json: String

    public init(json: String) {
        self.json = json
    }

    public init(_ rules: [FindingID]) throws {
        json = try StoredValues.json(rules)
    }

    /// The rule ids; `[]`, by far the most common, without a decoder.
    public func decoded() throws -> [FindingID] {
        try StoredValues.rules(json)
    }
}

/// One change of an address's verdict, as the store keeps its timeline: each scan's own policy,
/// with the pins counted (`CountedVerdict`).
public struct VerdictChange: Sendable {
    public var key: AddressKey
    public var at: Date
    public var condition: AddressCondition
    public var policy: CompliancePolicy
    public var failedRules: StoredRules

    package init(key: AddressKey, at: Date, condition: AddressCondition, policy: CompliancePolicy, failedRules: StoredRules) {
        self.key = key
        self.at = at
        self.condition = condition
        self.policy = policy
        self.failedRules = failedRules
    }
}

/// Where an address stood at an instant: its last verdict change, and the last one that reached the server.
public struct VerdictStanding: Sendable {
    public var last: VerdictChange?
    public var lastReachable: VerdictChange?

    package init(last: VerdictChange? = nil, lastReachable: VerdictChange? = nil) {
        self.last = last
        self.lastReachable = lastReachable
    }
}

/// A verdict as stored under one policy.
public struct StoredVerdict: Sendable {
    public var compliant: Bool
    public var failedRules: StoredRules
    /// The ids and severities of its findings (read with a scan's details only).
    public var findings: [(id: FindingID, severity: Severity)]

    package init(compliant: Bool, failedRules: StoredRules, findings: [(id: FindingID, severity: Severity)]) {
        self.compliant = compliant
        self.failedRules = failedRules
        self.findings = findings
    }
}

/// What a report shows of a scan beyond its verdict.
public struct ScanDetails: Sendable {
    public var port: Int
    public var failureCategory: ProbeFailureCategory?
    public var failureMessage: String?
    public var protocolVersion: TLSVersion?
    public var cipher: String?
    /// The pin check under the scan's own policy (`none` without pins).
    public var pinState: PinEvaluation.State
    public var pinMessage: String?
    /// The opt-in checks' reports (`checks: [inventory, headers, vulnerabilities]`), when the scan ran them.
    public var inventory: ServerInventory?
    public var headers: HTTPHeadersReport?
    public var vulnerabilities: VulnerabilityReport?
    /// The client simulation (`checks: [clients]`), when the scan ran it.
    public var clients: ClientSimulationReport?
    /// The reports of the opt-in checks without a column of their own, when the scan ran them.
    public var checkReports: [String: CheckReport]?
    /// For a target judged by an app's rules: whether that app's client connects, and on which exception.
    public var app: AppHostOutcome?

    package init(port: Int, failureCategory: ProbeFailureCategory? = nil, failureMessage: String? = nil, protocolVersion: TLSVersion? = nil, cipher: String? = nil, pinState: PinEvaluation.State, pinMessage: String? = nil) {
        self.port = port
        self.failureCategory = failureCategory
        self.failureMessage = failureMessage
        self.protocolVersion = protocolVersion
        self.cipher = cipher
        self.pinState = pinState
        self.pinMessage = pinMessage
    }
}

/// One stored scan with its verdict, as a report reads it.
public struct ScanFacts: Sendable {
    public var observationID: Int64
    public var key: AddressKey
    public var host: String
    public var sni: String?
    public var startedAt: Date
    public var status: AddressScanResult.Status
    /// The probe recorded a chain (it reached the server even when the handshake failed).
    public var hasChain: Bool
    /// The policy the scan was judged under when it was stored.
    public var ownPolicy: CompliancePolicy
    /// The verdict stored under the policy asked for (the scan's own when none was asked); nil
    /// when none is stored under it: the caller judges the scan again.
    public var verdict: StoredVerdict?
    /// Without a stored verdict: identical observations share this key (judge each once).
    public var contentKey: String?
    /// A verdict of the scan records a pin mismatch (pins do not depend on the policy).
    public var pinMismatch: Bool
    /// Present when asked for (current state reads).
    public var details: ScanDetails?

    package init(observationID: Int64, key: AddressKey, host: String, sni: String? = nil, startedAt: Date, status: AddressScanResult.Status, hasChain: Bool, ownPolicy: CompliancePolicy, verdict: StoredVerdict? = nil, contentKey: String? = nil, pinMismatch: Bool, details: ScanDetails? = nil) {
        self.observationID = observationID
        self.key = key
        self.host = host
        self.sni = sni
        self.startedAt = startedAt
        self.status = status
        self.hasChain = hasChain
        self.ownPolicy = ownPolicy
        self.verdict = verdict
        self.contentKey = contentKey
        self.pinMismatch = pinMismatch
        self.details = details
    }
}

/// A certificate reference of a scan: `presented` (as sent) or `path` (as built), at a position.
public struct ChainReference: Sendable, Hashable {
    public var role: String
    public var position: Int
    public var fingerprint: String

    package init(role: String, position: Int, fingerprint: String) {
        self.role = role
        self.position = position
        self.fingerprint = fingerprint
    }
}

/// A certificate of a chain: its names and dates.
public struct ChainCertificate: Sendable, Hashable {
    public var fingerprint: String
    public var subject: String
    public var commonName: String?
    public var issuer: String
    public var notBefore: Date
    public var notAfter: Date
    /// 0 for the leaf.
    public var depth: Int

    package init(fingerprint: String, subject: String, commonName: String? = nil, issuer: String, notBefore: Date, notAfter: Date, depth: Int) {
        self.fingerprint = fingerprint
        self.subject = subject
        self.commonName = commonName
        self.issuer = issuer
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.depth = depth
    }
}

/// An alert as a report lists it (read from its columns).
public struct AlertSummary: Sendable, Hashable {
    public var id: String
    public var createdAt: Date
    public var kind: AlertKind
    public var severity: AlertSeverity
    public var target: String
    public var address: String
    public var summary: String
    /// The alert's `changes`, for `certificate.changed` only (old and new fingerprints, same key).
    public var changes: [String: String]

    package init(id: String, createdAt: Date, kind: AlertKind, severity: AlertSeverity, target: String, address: String, summary: String, changes: [String: String]) {
        self.id = id
        self.createdAt = createdAt
        self.kind = kind
        self.severity = severity
        self.target = target
        self.address = address
        self.summary = summary
        self.changes = changes
    }
}
