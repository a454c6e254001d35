import Foundation
import TLSAuditCore
public import TLSAuditStore

extension ReportData {
    /// Reads what a compliance report over `query` needs from `store`, in one read snapshot: the
    /// state of every target address at `query.end`, the fleet's counts over the period and the
    /// verdict changes (one ordered pass over the stored verdict changes, or over every scan when
    /// `query.policy` asks for another policy: each distinct content judged again by `rejudge` once
    /// per validity state), and the period's alerts. Nothing is rescanned or written.
    public static func read(_ query: ReportQuery, from store: any ScanStore, rejudge: @escaping Rejudging) throws -> ReportData {
        try store.readReportFacts { facts in
            var reader = ReportReader(query: query, facts: facts, rejudge: rejudge)
            return try reader.read()
        }
    }
}

/// One read of the report data from the store's facts: the trend, the transitions and the
/// re-judging are computed here, the store only streams what it keeps.
struct ReportReader {
    let query: ReportQuery
    let facts: any ReportFactReader
    /// The caller's judge, for `query.policy`.
    let rejudge: Rejudging
    /// Verdicts re-judged under `query.policy`, by observation content key.
    private var rejudged: [String: Judged] = [:]
    /// Observations judged again so far.
    private var judgements = 0
    /// Prefetched: latest scans by observation id, their certificate references.
    private var latest: [Int64: ScanFacts] = [:]
    private var chains: [Int64: [ChainReference]] = [:]
    /// Certificates of current chains, by fingerprint.
    private var certificates: [String: ReportCertificate] = [:]
    /// Prefetched: the last reachable scan of each address whose latest scan failed.
    private var lastReachable: [AddressKey: ScanFacts] = [:]

    init(query: ReportQuery, facts: any ReportFactReader, rejudge: @escaping Rejudging) {
        self.query = query
        self.facts = facts
        self.rejudge = rejudge
    }

    /// An address of the fleet, as the pass tracks it.
    struct Tracked {
        var condition: AddressCondition?
        /// The last verdict of a scan that reached the server: transitions compare these.
        var lastReachable: (condition: AddressCondition, rules: StoredRules)?
    }

    /// A verdict as the pass compares them: the failed rules kept as stored, so that a million
    /// scans are not decoded one by one (only changes are).
    struct PassVerdict {
        var condition: AddressCondition
        var policy: CompliancePolicy
        var rules: StoredRules
        /// The trust errors and the conformance lints among the findings (current state only).
        var findings: [(id: FindingID, severity: Severity)] = []
    }

    mutating func read() throws -> ReportData {
        let fleet = try facts.addresses().filter(query.includes)
        let targets = Set(fleet.map(\.key.target))
        let counted = query.restricted ? targets : nil
        facts.willCountScans(after: query.start, through: query.end, targets: counted)
        var addresses: [ReportAddress] = []
        var timeline = Timeline(query: query)
        latest = try facts.latestScans(upTo: query.end, policy: query.policy)
        chains = try facts.latestChainReferences()
        // The last reachable scan of every address whose latest failed, at once.
        let failed = fleet.compactMap { member -> AddressKey? in
            guard member.lastScanAt <= query.end, let scan = latest[member.lastObservationID], scan.status == .failed else { return nil }
            return member.key
        }
        lastReachable = try facts.lastReachableScans(of: failed, atOrBefore: query.end, policy: query.policy)
        let missing = lastReachable.values.map(\.observationID).filter { chains[$0] == nil }
        for (id, references) in try facts.chainReferences(observationIDs: missing) { chains[id] = references }
        // Every certificate the current chains name, at once.
        let named = Set(chains.values.joined().map(\.fingerprint)).subtracting(certificates.keys)
        for (fingerprint, certificate) in try facts.certificates(fingerprints: Array(named)) {
            certificates[fingerprint] = certificate
        }
        // Each scan's own verdicts: where every address stood at the start, from the stored changes.
        let standings = query.policy == nil ? try facts.standings(at: query.start) : [:]
        for member in fleet {
            guard let current = try currentState(member) else { continue }
            addresses.append(current)
            let start = query.policy == nil ? Self.tracked(standings[member.key])
                : try stateAtStart(member.key)
            timeline.track(member.key, at: start)
        }
        if query.policy == nil {
            // Each scan's own verdict: the stored changes tell the whole story.
            try facts.forEachVerdictChange(after: query.start, through: query.end) { change in
                try timeline.apply(PassVerdict(condition: change.condition, policy: change.policy, rules: change.failedRules),
                                   key: change.key, at: change.at)
            }
        } else if let policy = query.policy {
            // Another policy: every scan judged again (identical observations once).
            try facts.forEachScan(after: query.start, through: query.end, policy: policy) { scan in
                guard timeline.tracks(scan.key) else { return }
                try timeline.apply(try passVerdict(scan), key: scan.key, at: scan.startedAt)
            }
        }
        let scans = try facts.scanCounts(after: query.start, through: query.end, targets: counted)
        let (trend, transitions) = try timeline.finish()
        // A split view's alert is about the configured target, whose vantages are stored as KEY@VANTAGE.
        let configured = targets.union(targets.map { VantageTarget.split($0).key })
        let alerts = try facts.alerts(after: query.start, through: query.end).filter { configured.contains($0.target) }
        return ReportData(query: query, addresses: addresses, trend: trend, transitions: transitions, alerts: alerts,
                          scans: scans.all, failedScans: scans.failed, rejudged: judgements)
    }

    private static func tracked(_ standing: VerdictStanding?) -> Tracked {
        var state = Tracked()
        state.condition = standing?.last?.condition
        if let reachable = standing?.lastReachable { state.lastReachable = (reachable.condition, reachable.failedRules) }
        return state
    }

    /// The fleet's counts over time and the verdict changes, fed verdicts in time order.
    struct Timeline {
        let query: ReportQuery
        private var tracked: [AddressKey: Tracked] = [:]
        private var counts: [AddressCondition: Int] = [:]
        private var trend: [ReportTrendSample] = []
        private var nextSample: Date
        private var transitions: [ReportTransition] = []

        init(query: ReportQuery) {
            self.query = query
            nextSample = query.start
        }

        func tracks(_ key: AddressKey) -> Bool { tracked[key] != nil }

        mutating func track(_ key: AddressKey, at start: Tracked) {
            tracked[key] = start
            if let condition = start.condition { counts[condition, default: 0] += 1 }
        }

        /// Samples every step strictly before `time` not yet sampled.
        private mutating func sample(before time: Date) {
            while nextSample < time, nextSample < query.end {
                trend.append(ReportTrendSample(at: nextSample, compliant: counts[.compliant] ?? 0,
                                               notCompliant: counts[.notCompliant] ?? 0, unreachable: counts[.unreachable] ?? 0))
                nextSample = nextSample.addingTimeInterval(query.step)
            }
        }

        mutating func apply(_ verdict: PassVerdict, key: AddressKey, at time: Date) throws {
            guard var state = tracked[key] else { return }
            if trend.isEmpty { sample(before: query.start.addingTimeInterval(0.001)) }
            sample(before: time)
            if let old = state.condition { counts[old, default: 0] -= 1 }
            counts[verdict.condition, default: 0] += 1
            state.condition = verdict.condition
            if verdict.condition != .unreachable {
                if let previous = state.lastReachable,
                   let transition = try ReportReader.transition(from: previous, to: verdict, at: time, key: key) {
                    transitions.append(transition)
                }
                state.lastReachable = (verdict.condition, verdict.rules)
            }
            tracked[key] = state
        }

        /// The trend (start, every step, end) and the transitions.
        mutating func finish() throws -> ([ReportTrendSample], [ReportTransition]) {
            if trend.isEmpty { sample(before: query.start.addingTimeInterval(0.001)) }
            sample(before: query.end)
            trend.append(ReportTrendSample(at: query.end, compliant: counts[.compliant] ?? 0,
                                           notCompliant: counts[.notCompliant] ?? 0, unreachable: counts[.unreachable] ?? 0))
            return (trend, transitions)
        }
    }

    // MARK: - The current state

    /// The address as of `query.end`: its last scan, the last that reached it, and that scan's chain.
    /// Nil when it was first scanned after the end.
    private mutating func currentState(_ member: StoredAddress) throws -> ReportAddress? {
        let key = member.key
        let last: ScanFacts?
        if member.lastScanAt <= query.end {
            // The usual case, a report up to now: prefetched, the scan the current state points at.
            last = latest[member.lastObservationID]
        } else {
            last = try facts.lastScan(target: key.target, address: key.address, atOrBefore: query.end, reachableOnly: false,
                                      policy: query.policy, details: true)
        }
        guard let last, let details = last.details else { return nil }
        let verdict = try self.verdict(last)
        // The last scan that reached the server: usually that same one; prefetched in `read` for
        // an address whose current scan failed.
        let prefetched = member.lastScanAt <= query.end && last.status == .failed
        let reachable = verdict.condition != .unreachable ? last
            : prefetched ? lastReachable[key]
            : try facts.lastScan(target: key.target, address: key.address, atOrBefore: query.end, reachableOnly: true,
                                 policy: query.policy, details: true)
        var chain: [ReportCertificate] = []
        if let id = reachable?.observationID {
            let references = try chains[id] ?? facts.chainReferences(observationID: id)
            let path = references.filter { $0.role == "path" }
            chain = try (path.isEmpty ? references : path).compactMap { reference in
                guard var certificate = try certificate(reference.fingerprint) else { return nil }
                certificate.depth = reference.position
                return certificate
            }
        }
        return ReportAddress(
            target: key.target, address: key.address, host: last.host, port: details.port, lastScanAt: last.startedAt,
            verdict: verdict, pinState: reachable?.details?.pinState ?? .none, pinMessage: reachable?.details?.pinMessage,
            protocolVersion: details.protocolVersion, cipher: details.cipher,
            failureCategory: details.failureCategory, failureMessage: details.failureMessage,
            lastReachableAt: reachable?.startedAt, chain: chain, inventory: reachable?.details?.inventory,
            headers: reachable?.details?.headers, vulnerabilities: reachable?.details?.vulnerabilities,
            clients: reachable?.details?.clients, checkReports: reachable?.details?.checkReports, tags: member.tags, app: details.app)
    }

    /// A stored certificate's dates and names, read once per report (a fleet shares its CAs).
    private mutating func certificate(_ fingerprint: String) throws -> ReportCertificate? {
        if let known = certificates[fingerprint] { return known }
        let certificate = try facts.certificate(fingerprint: fingerprint)
        certificates[fingerprint] = certificate
        return certificate
    }

    /// Where the address stood when the period began under `query.policy`: its last scan before the
    /// start, and the last one of those that reached the server. (Under each scan's own verdicts
    /// the stored standings say it for every address at once.)
    private mutating func stateAtStart(_ key: AddressKey) throws -> Tracked {
        var state = Tracked()
        for reachableOnly in [false, true] {
            guard let scan = try facts.lastScan(target: key.target, address: key.address, atOrBefore: query.start,
                                                reachableOnly: reachableOnly, policy: query.policy, details: false) else { break }
            let verdict = try passVerdict(scan)
            if !reachableOnly { state.condition = verdict.condition }
            if verdict.condition != .unreachable {
                state.lastReachable = (verdict.condition, verdict.rules)
                break
            }
        }
        return state
    }

    // MARK: - Verdicts

    /// One observation content judged under `query.policy`: its certificates' validity windows, and
    /// its verdict for each validity state met so far (the only way time changes a verdict).
    private struct Judged {
        var windows: [(notBefore: Date, notAfter: Date)]
        var verdicts: [[Bool]: PassVerdict] = [:]

        init(_ result: AddressScanResult) {
            let certificates = (result.chain?.presented ?? []) + (result.chain?.path.map(\.certificate) ?? [])
            windows = certificates.map { ($0.notBefore, $0.notAfter) }
        }

        func validity(at time: Date) -> [Bool] {
            windows.map { time >= $0.notBefore && time <= $0.notAfter }
        }
    }

    /// A scan's verdict as counted: under the report's policy, with a pin mismatch never compliant
    /// under any policy (`CountedVerdict`).
    private mutating func passVerdict(_ scan: ScanFacts) throws -> PassVerdict {
        var verdict = try policyVerdict(scan)
        if scan.pinMismatch {
            verdict.condition = verdict.condition == .compliant ? .notCompliant : verdict.condition
            verdict.rules = try StoredRules(CountedVerdict.reasons(try verdict.rules.decoded(), pinState: .mismatch))
        }
        return verdict
    }

    /// The verdict under the report's policy alone (stored, or judged again).
    private mutating func policyVerdict(_ scan: ScanFacts) throws -> PassVerdict {
        let policy = query.policy ?? scan.ownPolicy
        if let stored = scan.verdict {
            return PassVerdict(condition: AddressCondition(status: scan.status, hasChain: scan.hasChain, compliant: stored.compliant),
                               policy: policy, rules: stored.failedRules, findings: stored.findings)
        }
        guard let content = scan.contentKey else {
            throw StoreError(.corrupt, "observation \(scan.observationID): no verdict is stored under its own policy")
        }
        if let known = rejudged[content], let verdict = known.verdicts[known.validity(at: scan.startedAt)] { return verdict }
        guard let result = try facts.result(observationID: scan.observationID) else {
            throw StoreError(.other, "observation \(scan.observationID) vanished while reading")
        }
        let judged = rejudge(result, scan.sni ?? scan.host, policy, result.startedAt)
        judgements += 1
        let verdict = PassVerdict(
            condition: AddressCondition(status: scan.status, hasChain: scan.hasChain, compliant: judged.verdict.compliant),
            policy: policy, rules: try StoredRules(judged.verdict.failedRules),
            findings: judged.findings.map { ($0.id, $0.severity) })
        var entry = rejudged[content] ?? Judged(result)
        entry.verdicts[entry.validity(at: scan.startedAt)] = verdict
        rejudged[content] = entry
        return verdict
    }

    /// The verdict of a current scan, with the trust errors and lints behind it.
    private mutating func verdict(_ scan: ScanFacts) throws -> ReportVerdict {
        let verdict = try passVerdict(scan)
        var report = ReportVerdict(condition: verdict.condition, policy: verdict.policy, failedRules: try verdict.rules.decoded(),
                                   trustErrors: verdict.findings.filter { Finding.isTrustError(id: $0.id, severity: $0.severity) }
                                       .map(\.id))
        var seen = Set<FindingID>()
        report.lints = verdict.findings.map(\.id).filter { $0.isLint && seen.insert($0).inserted }
        return report
    }

    /// A new failure or a fix between two verdicts of scans that reached the server.
    fileprivate static func transition(from previous: (condition: AddressCondition, rules: StoredRules), to verdict: PassVerdict,
                                       at time: Date, key: AddressKey) throws -> ReportTransition? {
        guard previous.condition != verdict.condition || previous.rules != verdict.rules else { return nil }
        let before = try previous.rules.decoded()
        let now = try verdict.rules.decoded()
        func make(_ kind: ReportTransition.Kind, _ rules: [FindingID]) -> ReportTransition {
            ReportTransition(kind: kind, target: key.target, address: key.address, at: time, policy: verdict.policy, rules: rules)
        }
        switch (previous.condition, verdict.condition) {
        case (.compliant, .notCompliant):
            return make(.newFailure, now)
        case (.notCompliant, .compliant):
            return make(.fix, before)
        case (.notCompliant, .notCompliant):
            let added = now.filter { !before.contains($0) }
            return added.isEmpty ? nil : make(.newFailure, added)
        default:
            return nil
        }
    }
}
