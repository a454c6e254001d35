import Foundation
import Synchronization
import TLSAuditModel
import TLSAuditStore

/// The series of each address's latest scan, kept as a few values per address and written out at
/// each scrape. An address costs about 120 bytes: its target and address strings (shared with the
/// scan's), a few numbers and flags, and references to what many addresses share: a chain's
/// certificate labels (rendered once) and a list of failed rules, kept once however many addresses
/// show them. (As one swift-prometheus gauge per series, 10,000 addresses took 140 MiB more.)
final class AddressSeriesTable: Sendable {
    /// An address of a target.
    struct Key: Hashable, Comparable {
        var target: String
        var address: String

        static func < (lhs: Key, rhs: Key) -> Bool { (lhs.target, lhs.address) < (rhs.target, rhs.address) }
    }

    /// One address's latest scan.
    struct Entry {
        var lastScan: Double
        /// The earliest notAfter of the chain as clients see it; NaN when there is no chain.
        var chainExpiry: Double
        var chain: ChainLabels?
        var failedRules: RuleList?
        var ocsp: OCSP?
        var policy: CompliancePolicy
        var pinState: PinEvaluation.State
        var version: TLSVersion?
        var reached: Bool
        var compliant: Bool
        /// Whether a stapled OCSP response was present; nil without a handshake.
        var stapled: Bool?
        /// The apps whose rules judge the target (its `app:` tags and the scan's app outcome), escaped; mostly empty.
        var apps: [String] = []
    }

    /// The leaf's OCSP answer, stapled or fetched (rare enough to live behind a reference).
    final class OCSP: Sendable {
        let status: Double
        let thisUpdate: Double?
        let nextUpdate: Double?
        let revokedAt: Double?

        init(status: Double, thisUpdate: Double? = nil, nextUpdate: Double? = nil, revokedAt: Double? = nil) {
            self.status = status
            self.thisUpdate = thisUpdate
            self.nextUpdate = nextUpdate
            self.revokedAt = revokedAt
        }
    }

    /// A certificate's ssl_exporter labels (rendered and escaped once) and dates.
    final class CertificateLabels: Sendable {
        let labels: String
        /// `chain_no="0",` and the labels, for the verified-chain families.
        let verifiedLabels: String
        let notAfter: Double
        let notBefore: Double

        init(_ certificate: CertificateSummary) {
            labels = ScanMetrics.certificateLabels(certificate).map { "\($0.0)=\"\(AddressSeriesTable.escape($0.1))\"" }
                .joined(separator: ",")
            verifiedLabels = "chain_no=\"0\"," + labels
            notAfter = certificate.notAfter.timeIntervalSince1970
            notBefore = certificate.notBefore.timeIntervalSince1970
        }
    }

    /// The certificates an address sent and those of its verified chain.
    final class ChainLabels: Sendable {
        let presented: [CertificateLabels]
        let verified: [CertificateLabels]

        init(presented: [CertificateLabels], verified: [CertificateLabels]) {
            self.presented = presented
            self.verified = verified
        }
    }

    /// A scan's failed rules, escaped.
    final class RuleList: Sendable {
        let rules: [String]

        init(_ rules: [String]) { self.rules = rules }
    }

    private struct State {
        /// The entries in the order they came, found by `positions`.
        var rows: [(key: Key, entry: Entry)] = []
        var positions: [Key: Int] = [:]
        /// Positions in `rows` ordered by key; rows added since it was sorted are not in it yet.
        var order: [Int32] = []
        var certificates = WeakPool<CertificateLabels>()
        var chains = WeakPool<ChainLabels>()
        var ruleLists = WeakPool<RuleList>()
        var recordsSinceSweep = 0

        mutating func sortIfNeeded() {
            guard order.count != rows.count else { return }
            order = Array(0..<Int32(rows.count))
            order.sort { [rows] in rows[Int($0)].key < rows[Int($1)].key }
        }
    }

    private let state = Mutex(State())

    /// Replaces the entry of the scan's address.
    func record(_ scan: StoredScan) {
        let result = scan.result
        let chain = result.chain
        let leafOCSP = chain?.revocation?.checks.first { $0.depth == 0 && [.stapledOCSP, .ocsp].contains($0.source) }
        var ocsp = leafOCSP.map {
            OCSP(status: ScanMetrics.ocspStatus($0.status.rawValue) ?? 2, thisUpdate: $0.thisUpdate?.timeIntervalSince1970,
                 nextUpdate: $0.nextUpdate?.timeIntervalSince1970, revokedAt: $0.revokedAt?.timeIntervalSince1970)
        }
        if ocsp == nil, let status = result.handshake?.stapledOCSP?.certificateStatus.flatMap(ScanMetrics.ocspStatus) {
            ocsp = OCSP(status: status)
        }
        let presented = chain?.presented ?? []
        let verified = chain.map { $0.anchored ? $0.path.map(\.certificate) : [] } ?? []
        let chainKey = presented.map(\.sha256Fingerprint).joined(separator: ",") + "/" + verified.map(\.sha256Fingerprint).joined(separator: ",")
        let rules = result.ats.failedRules.map { AddressSeriesTable.escape($0.rawValue) }
        var apps = TargetTags.apps(in: scan.tags)
        if let bundle = result.app?.bundle, !apps.contains(bundle) { apps.append(bundle) }
        state.withLock { state in
            var chainLabels: ChainLabels?
            if !presented.isEmpty || !verified.isEmpty {
                chainLabels = state.chains[chainKey]
                if chainLabels == nil {
                    func labels(_ certificate: CertificateSummary) -> CertificateLabels {
                        state.certificates.value(for: certificate.sha256Fingerprint) { CertificateLabels(certificate) }
                    }
                    let made = ChainLabels(presented: presented.map(labels), verified: verified.map(labels))
                    state.chains[chainKey] = made
                    chainLabels = made
                }
            }
            let entry = Entry(
                lastScan: result.startedAt.timeIntervalSince1970,
                chainExpiry: chain?.certificates.map(\.notAfter).min()?.timeIntervalSince1970 ?? .nan,
                chain: chainLabels,
                failedRules: rules.isEmpty ? nil : state.ruleLists.value(for: rules.joined(separator: ",")) { RuleList(rules) },
                ocsp: ocsp, policy: result.ats.policy, pinState: result.pin?.state ?? .none,
                version: result.handshake?.protocolVersion, reached: result.status == .completed, compliant: result.ats.compliant,
                stapled: result.handshake.map { $0.stapledOCSP != nil }, apps: apps.map(AddressSeriesTable.escape))
            let key = Key(target: scan.target, address: result.address)
            if let position = state.positions[key] {
                state.rows[position].entry = entry
            } else {
                state.positions[key] = state.rows.count
                state.rows.append((key, entry))
            }
            state.recordsSinceSweep += 1
            if state.recordsSinceSweep >= 10_000 {
                state.certificates.sweep()
                state.chains.sweep()
                state.ruleLists.sweep()
                state.recordsSinceSweep = 0
            }
        }
    }

    /// Drops the entries of targets not in `targets` (the configured keys; a vantage's `KEY@VANTAGE` stays with its key).
    func keepOnly(targets: Set<String>) {
        state.withLock { state in
            state.rows.removeAll { !VantageTarget.isStored($0.key.target, of: targets) }
            state.positions = Dictionary(uniqueKeysWithValues: state.rows.enumerated().map { ($0.element.key, $0.offset) })
            state.order = []
            state.sortIfNeeded()
        }
    }

    var count: Int { state.withLock { $0.rows.count } }

    /// Up to `limit` entries in key order, the first after `key` (from the first when nil): a
    /// scrape reads the table a batch at a time instead of copying it whole. Entries added since
    /// the scrape began may be missing (they are in the next one).
    func entries(after key: Key?, limit: Int) -> [(key: Key, entry: Entry)] {
        state.withLock { state in
            if key == nil { state.sortIfNeeded() }
            var low = 0, high = state.order.count
            if let key {
                while low < high {
                    let middle = (low + high) / 2
                    if state.rows[Int(state.order[middle])].key <= key { low = middle + 1 } else { high = middle }
                }
            }
            return state.order[low..<min(low + limit, state.order.count)].map { state.rows[Int($0)] }
        }
    }

    /// Whether any entry is one `matches` (families most addresses lack are written only when one has them).
    func contains(where matches: (Entry) -> Bool) -> Bool {
        state.withLock { $0.rows.contains { matches($0.entry) } }
    }

    /// Every family's HELP, TYPE and samples (the same in the text format and OpenMetrics: all are
    /// gauges), handed to `emit` in chunks of about `chunkBytes`, the table read `batch` entries at
    /// a time: a scrape of 10,000 addresses (about 30 MB) never sits whole in memory, nor does a
    /// copy of the table.
    func write(chunkBytes: Int = 64 * 1024, batch: Int = 256, _ emit: ([UInt8]) async throws -> Void) async throws {
        var out: [UInt8] = []
        out.reserveCapacity(chunkBytes + 4_096)
        func appendEscaped(_ value: String) {
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
                case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
                case UInt8(ascii: "\n"): out.append(contentsOf: "\\n".utf8)
                default: out.append(byte)
                }
            }
        }
        func family(_ name: String, _ help: String, _ samples: (Entry, (String, Double) -> Void) -> Void) async throws {
            var rows = entries(after: nil, limit: batch)
            guard !rows.isEmpty else { return }
            out.append(contentsOf: "# HELP \(name) \(help)\n# TYPE \(name) gauge\n".utf8)
            while let last = rows.last?.key {
                for (key, entry) in rows {
                    samples(entry) { labels, value in
                        out.append(contentsOf: name.utf8)
                        out.append(contentsOf: "{target=\"".utf8)
                        appendEscaped(key.target)
                        out.append(contentsOf: "\",address=\"".utf8)
                        appendEscaped(key.address)
                        out.append(UInt8(ascii: "\""))
                        if !labels.isEmpty {
                            out.append(UInt8(ascii: ","))
                            out.append(contentsOf: labels.utf8)
                        }
                        out.append(contentsOf: "} ".utf8)
                        out.append(contentsOf: Self.number(value).utf8)
                        out.append(UInt8(ascii: "\n"))
                    }
                    if out.count >= chunkBytes {
                        try await emit(out)
                        out.removeAll(keepingCapacity: true)
                    }
                }
                rows = entries(after: last, limit: batch)
            }
        }
        try await family("ssl_probe_success", "The probe connected and completed the handshake (0/1).") { entry, sample in
            sample("", entry.reached ? 1 : 0)
        }
        // An info metric rather than an `app` label on every family: ssl_exporter's label sets stay
        // as they are, and a query joins it where it wants the app (README, Metrics).
        if contains(where: { !$0.apps.isEmpty }) {
            try await family("tlsaudit_target_app_info", "The app whose ATS rules judge the target (an app:BUNDLE_ID tag; always 1).") { entry, sample in
                for app in entry.apps { sample("app=\"\(app)\"", 1) }
            }
        }
        try await family("tlsaudit_last_scan_timestamp_seconds", "When the latest scan started.") { entry, sample in sample("", entry.lastScan) }
        try await family("tlsaudit_compliant", "The latest scan complies with the target's policy (0/1).") { entry, sample in
            sample("policy=\"\(entry.policy.rawValue)\"", entry.compliant ? 1 : 0)
        }
        try await family("tlsaudit_rule_failed", "A rule of the target's policy the latest scan fails (always 1).") { entry, sample in
            for rule in entry.failedRules?.rules ?? [] { sample("rule=\"\(rule)\"", 1) }
        }
        try await family("tlsaudit_pin_state", "The latest scan's pin state: match, mismatch or none (always 1).") { entry, sample in
            sample("state=\"\(entry.pinState.rawValue)\"", 1)
        }
        // blackbox_exporter's name for the same fact too, so that its rules and dashboards work.
        for (name, help) in [("ssl_tls_version_info", "The TLS version negotiated (always 1)."),
                             ("probe_tls_version_info", "The TLS version negotiated (always 1; blackbox_exporter's name).")] {
            try await family(name, help) { entry, sample in
                if let version = entry.version { sample("version=\"\(version.displayName)\"", 1) }
            }
        }
        try await family("probe_ssl_earliest_cert_expiry",
                         "The earliest notAfter of the certificates the server sent, in seconds since the epoch (blackbox_exporter's name).") { entry, sample in
            if let earliest = entry.chain?.presented.map(\.notAfter).min() { sample("", earliest) }
        }
        try await family("ssl_ocsp_response_stapled", "A stapled OCSP response was present (0/1).") { entry, sample in
            if let stapled = entry.stapled { sample("", stapled ? 1 : 0) }
        }
        try await family("ssl_ocsp_response_status", "The leaf's OCSP status, stapled or fetched: 0 good, 1 revoked, 2 unknown.") { entry, sample in
            if let ocsp = entry.ocsp { sample("", ocsp.status) }
        }
        for (name, help, value) in [
            ("ssl_ocsp_response_this_update", "thisUpdate of the leaf's OCSP response, in seconds since the epoch.", \OCSP.thisUpdate),
            ("ssl_ocsp_response_next_update", "nextUpdate of the leaf's OCSP response, in seconds since the epoch.", \OCSP.nextUpdate),
            ("ssl_ocsp_response_revoked_at", "When the leaf's OCSP response says it was revoked, in seconds since the epoch.", \OCSP.revokedAt),
        ] where contains(where: { $0.ocsp?[keyPath: value] != nil }) {
            try await family(name, help) { entry, sample in
                if let time = entry.ocsp?[keyPath: value] { sample("", time) }
            }
        }
        try await family("ssl_cert_not_after", "NotAfter of each certificate the server sent, in seconds since the epoch.") { entry, sample in
            for certificate in entry.chain?.presented ?? [] { sample(certificate.labels, certificate.notAfter) }
        }
        try await family("ssl_cert_not_before", "NotBefore of each certificate the server sent, in seconds since the epoch.") { entry, sample in
            for certificate in entry.chain?.presented ?? [] { sample(certificate.labels, certificate.notBefore) }
        }
        try await family("ssl_verified_cert_not_after", "NotAfter of each certificate of the verified chain, in seconds since the epoch.") { entry, sample in
            for certificate in entry.chain?.verified ?? [] { sample(certificate.verifiedLabels, certificate.notAfter) }
        }
        try await family("ssl_verified_cert_not_before", "NotBefore of each certificate of the verified chain, in seconds since the epoch.") { entry, sample in
            for certificate in entry.chain?.verified ?? [] { sample(certificate.verifiedLabels, certificate.notBefore) }
        }
        try await family("tlsaudit_chain_expiry_timestamp_seconds",
                         "The earliest notAfter of the chain the latest scan saw, in seconds since the epoch.") { entry, sample in
            if !entry.chainExpiry.isNaN { sample("", entry.chainExpiry) }
        }
        if !out.isEmpty { try await emit(out) }
    }

    /// A label value as the text format writes it: backslash, double quote and line feed escaped.
    static func escape(_ value: String) -> String {
        guard value.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return value }
        return value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// A value as swift-prometheus writes it (Swift's shortest round-trip form).
    static func number(_ value: Double) -> String { "\(value)" }
}

/// Objects kept once by a key while something else holds them: one nobody holds any more goes at the next sweep.
struct WeakPool<Value: AnyObject> {
    private struct Reference {
        weak var value: Value?
    }

    private var references: [String: Reference] = [:]

    /// The value kept for `key` while something holds it.
    subscript(key: String) -> Value? {
        get { references[key]?.value }
        set { references[key] = Reference(value: newValue) }
    }

    /// The value kept for `key`, or the one `make` returns (then kept).
    mutating func value(for key: String, _ make: () -> Value) -> Value {
        if let known = self[key] { return known }
        let made = make()
        self[key] = made
        return made
    }

    /// Forgets the keys whose values are gone.
    mutating func sweep() {
        references = references.filter { $0.value.value != nil }
    }
}
