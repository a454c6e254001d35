import CProcess
import Foundation
public import Prometheus
import Synchronization
public import TLSAuditModel
public import TLSAuditStore

/// The service's Prometheus metrics: tlsaudit's own counters, gauges and histograms in a
/// swift-prometheus registry, and per target address the series of its latest scan
/// (`AddressSeriesTable`; ssl_exporter's names and labels where the meaning is the same, so
/// existing dashboards and rules work).
///
/// Cardinality: per-address series carry `target` and `address`; certificate series add
/// ssl_exporter's certificate labels, which change when a certificate is renewed; the series of
/// an address are replaced by those of its next scan (the old ones are dropped, not left to grow).
/// Other label values come from closed sets: rule (finding) ids, pin states, failure categories,
/// alert kinds and severities, the configured sink names.
public final class ScanMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    /// The series of each address's latest scan (written out at each scrape).
    private let addresses = AddressSeriesTable()
    private let scanDuration: ValueHistogram
    private let storeWrite: ValueHistogram
    private let residentMemory: Gauge
    private let openDescriptors: Gauge
    private let started: Gauge
    private let queueWaiting: Gauge
    private let queueRunning: Gauge
    /// The PostgreSQL server and role last recorded (`recordDatabaseServer`).
    private let databaseServer = Mutex<(String, String)?>(nil)

    public init() {
        scanDuration = registry.makeValueHistogram(descriptor: Self.named("tlsaudit_scan_duration_seconds", "Time from the connection to the verdict of one address's scan."), buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
        storeWrite = registry.makeValueHistogram(descriptor: Self.named("tlsaudit_store_write_seconds", "Time to commit one batch of scan results to the store."), buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5])
        residentMemory = registry.makeGauge(descriptor: Self.named("process_resident_memory_bytes", "Resident memory size in bytes."))
        openDescriptors = registry.makeGauge(descriptor: Self.named("process_open_fds", "Number of open file descriptors."))
        started = registry.makeGauge(descriptor: Self.named("process_start_time_seconds", "Start time of the process since unix epoch in seconds."))
        started.set(Date().timeIntervalSince1970)
        queueWaiting = registry.makeGauge(descriptor: Self.named("tlsaudit_queue_waiting_scans",
                                                                 "Scans due and waiting for a worker or for their host's cap."))
        queueRunning = registry.makeGauge(descriptor: Self.named("tlsaudit_queue_running_scans", "Scans running now."))
    }

    /// `tlsaudit_build_info{version, openssl}`: always 1, the labels say what runs.
    public func recordBuild(version: String, openssl: String) {
        registry.makeGauge(descriptor: Self.named("tlsaudit_build_info", "The tlsaudit version and the OpenSSL library it runs with (always 1)."),
                           labels: [("version", version), ("openssl", openssl)]).set(1.0)
    }

    /// A trust input's state: its publication time (`tlsaudit_trust_input_published_timestamp_seconds`,
    /// so that its age is `time() - ...`), whether its last refresh succeeded, and when that was.
    /// Times in seconds since 1970.
    /// The trust input's age now (seconds since its publication).
    public func recordTrustInputAge(_ input: String, seconds: Double) {
        registry.makeGauge(descriptor: Self.named("tlsaudit_trust_input_age_seconds",
                                                  "Seconds since the trust input in force was published (set at each refresh and hourly)."),
                           labels: [("input", input)]).set(seconds)
    }

    public func recordTrustInput(_ input: String, published: Double?, refreshed: Bool, at time: Double, maxAge: Double, failures: Int) {
        let labels = [("input", input)]
        if let published {
            registry.makeGauge(descriptor: Self.named("tlsaudit_trust_input_published_timestamp_seconds",
                                                      "When the trust input in force was published (its age is time() minus this)."),
                               labels: labels).set(published)
        }
        registry.makeGauge(descriptor: Self.named("tlsaudit_trust_input_max_age_seconds",
                                                  "The age past which the trust input is stale (max_age:); alert on time() - published > this."),
                           labels: labels).set(maxAge)
        registry.makeGauge(descriptor: Self.named("tlsaudit_trust_input_refresh_success",
                                                  "1 when the last refresh of the trust input succeeded, 0 when it failed (the last good one stays in force)."),
                           labels: labels).set(refreshed ? 1.0 : 0.0)
        registry.makeGauge(descriptor: Self.named("tlsaudit_trust_input_refresh_failures",
                                                  "Refreshes of the trust input that failed in a row."),
                           labels: labels).set(Double(failures))
        registry.makeGauge(descriptor: Self.named("tlsaudit_trust_input_last_refresh_timestamp_seconds", "When the trust input was last refreshed (tried)."),
                           labels: labels).set(time)
    }

    /// A `/probe` request answered (`scanned`, `timed-out`), or not (`busy`, `refused`).
    func recordProbe(outcome: String) {
        registry.makeCounter(descriptor: Self.named("tlsaudit_probe_requests_total", "/probe requests by outcome: scanned, timed-out, busy (no slot), refused (400, 403)."),
                             labels: [("outcome", outcome)]).increment()
    }

    /// The scheduler's queue after a launch round.
    public func recordQueue(waiting: Int, running: Int) {
        queueWaiting.set(Double(waiting))
        queueRunning.set(Double(running))
    }

    // MARK: - Recording

    /// Replaces the series of each scanned address with those of its new scan, and counts the scans.
    public func record(_ scans: [StoredScan]) {
        for scan in scans {
            let result = scan.result
            scanDuration.record(Double(result.durationMs) / 1000)
            let category = result.status == .failed ? (result.error?.category.rawValue ?? "unknown") : "none"
            registry.makeCounter(descriptor: Self.named("tlsaudit_scans_total", "Scans stored, by status and failure category."), labels: [("status", result.status.rawValue), ("category", category)]).increment()
            addresses.record(scan)
        }
    }

    /// Drops the series of targets no longer configured.
    public func keepOnly(targets: Set<String>) {
        addresses.keepOnly(targets: targets)
    }

    /// The PostgreSQL server the store's connections reach (`tlsaudit_database_server_info{server, role}`,
    /// the one now at 1, one before at 0), and a change of it (`tlsaudit_database_server_changes_total`).
    public func recordDatabaseServer(_ server: String, role: String, changed: Bool) {
        let previous = databaseServer.withLock { current -> (String, String)? in
            defer { current = (server, role) }
            return current
        }
        func info(_ server: String, _ role: String) -> Gauge {
            registry.makeGauge(descriptor: Self.named("tlsaudit_database_server_info",
                                                      "The PostgreSQL server the store's connections reach now (1), and the ones before (0)."),
                               labels: [("server", server), ("role", role)])
        }
        if let previous { info(previous.0, previous.1).set(Double(0)) }
        info(server, role).set(Double(1))
        if changed {
            registry.makeCounter(descriptor: Self.named("tlsaudit_database_server_changes_total",
                                                        "Times the store's connections reached another PostgreSQL server than before (a failover or a switch-over)."))
                .increment()
        }
    }

    /// The wall clock stepped by `seconds` (negative: back) against the monotonic clock the scheduler runs on.
    public func recordClockStep(seconds: Double) {
        registry.makeCounter(descriptor: Self.named("tlsaudit_clock_steps_total",
                                                    "Wall-clock steps seen (more than 2 s against the monotonic clock), by direction; schedules do not move, recorded times do."),
                             labels: [("direction", seconds < 0 ? "back" : "forward")]).increment()
    }

    /// Where the CT follower stands in a log after a step: the size of the newest verified head,
    /// its time, the next entry to read, how long it has been behind (0 when caught up), whether
    /// the log is held for a problem (a fork, a rewind, entries not the tree's).
    public func recordCTLog(_ log: String, treeSize: UInt64, headTimestamp: Double?, nextIndex: UInt64, lagSeconds: Double,
                            read: Int, matched: Int, problem: Bool) {
        let labels = [("log", log)]
        registry.makeGauge(descriptor: Self.named("tlsaudit_ct_log_tree_size", "Entries in the CT log's newest verified tree head."), labels: labels)
            .set(Double(treeSize))
        if let headTimestamp {
            registry.makeGauge(descriptor: Self.named("tlsaudit_ct_log_head_timestamp_seconds", "When the log signed its newest verified tree head."),
                               labels: labels).set(headTimestamp)
        }
        registry.makeGauge(descriptor: Self.named("tlsaudit_ct_log_position", "The next entry of the log the follower reads."), labels: labels)
            .set(Double(nextIndex))
        registry.makeGauge(descriptor: Self.named("tlsaudit_ct_log_lag_entries", "Entries of the newest verified head not read yet."), labels: labels)
            .set(Double(treeSize - min(treeSize, nextIndex)))
        registry.makeGauge(descriptor: Self.named("tlsaudit_ct_log_lag_seconds", "How long the follower has been behind the log's head (0 when caught up)."),
                           labels: labels).set(lagSeconds)
        registry.makeGauge(descriptor: Self.named("tlsaudit_ct_log_inconsistent", "1 while the log is held for a fork, a rewind or entries that are not its tree's."),
                           labels: labels).set(problem ? 1.0 : 0.0)
        if read > 0 {
            registry.makeCounter(descriptor: Self.named("tlsaudit_ct_log_entries_read_total", "Entries read and verified."), labels: labels)
                .increment(by: Int64(read))
        }
        if matched > 0 {
            registry.makeCounter(descriptor: Self.named("tlsaudit_ct_log_entries_matched_total", "Entries read that named a pinned or watched name."),
                                 labels: labels).increment(by: Int64(matched))
        }
    }

    /// A CT log request that failed, by kind (`unreachable`, `rate-limited`, `refused`, `malformed`, `bad-signature`).
    public func recordCTLogFailure(_ log: String, kind: String) {
        registry.makeCounter(descriptor: Self.named("tlsaudit_ct_log_fetch_errors_total", "CT log requests that failed, by kind; the log is retried later."),
                             labels: [("log", log), ("kind", kind)]).increment()
    }

    /// A batch committed to the store (or refused) after `seconds`.
    public func recordStoreWrite(seconds: Double, succeeded: Bool) {
        storeWrite.record(seconds)
        if !succeeded {
            registry.makeCounter(descriptor: Self.named("tlsaudit_store_write_failures_total", "Batches of scan results the store refused (kept and retried)."))
                .increment()
        }
    }

    /// Alerts raised (stored with their deliveries pending).
    public func recordAlerts(_ alerts: [Alert]) {
        for alert in alerts {
            registry.makeCounter(descriptor: Self.named("tlsaudit_alerts_raised_total", "Alerts raised, by kind and severity."), labels: [("kind", alert.kind.rawValue), ("severity", alert.severity.rawValue)]).increment()
        }
    }

    /// One delivery attempt of an alert to a sink: `delivered` or `failed` (retried later).
    public func recordDelivery(sink: String, delivered: Bool) {
        registry.makeCounter(descriptor: Self.named("tlsaudit_alert_deliveries_total", "Alert delivery attempts, by sink and outcome."), labels: [("sink", sink), ("state", delivered ? "delivered" : "failed")]).increment()
    }

    /// The exposition in the Prometheus text format 0.0.4, or in OpenMetrics 1.0 (what Prometheus
    /// asks for first: a counter's family named without `_total` in its TYPE and HELP lines, and
    /// `# EOF` at the end), handed to `emit` in chunks (the process gauges are read now).
    public func exposition(openMetrics: Bool = false, _ emit: ([UInt8]) async throws -> Void) async throws {
        if let resident = ProcessFigures.residentBytes() { residentMemory.set(Double(resident)) }
        if let descriptors = ProcessFigures.openDescriptors() { openDescriptors.set(Double(descriptors)) }
        let own = registry.emitToBuffer()
        try await emit(openMetrics ? Self.openMetrics(fromText: String(decoding: own, as: UTF8.self)) : own)
        try await addresses.write(emit)
        if openMetrics { try await emit(Array("# EOF\n".utf8)) }
    }

    /// tlsaudit's own series in OpenMetrics (without the `# EOF`): a counter's family is named
    /// without `_total` in its TYPE and HELP lines.
    static func openMetrics(fromText text: String) -> [UInt8] {
        var counters: Set<Substring> = []
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") && line.hasSuffix(" counter") {
            counters.insert(line.dropFirst("# TYPE ".count).dropLast(" counter".count))
        }
        var output = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                let rest = line.dropFirst(7)
                let name = rest.prefix { $0 != " " }
                if counters.contains(name), name.hasSuffix("_total") {
                    output += line.prefix(7) + name.dropLast("_total".count) + rest.dropFirst(name.count) + "\n"
                    continue
                }
            }
            output += line + "\n"
        }
        return Array(output.utf8)
    }

    /// A metric's name and help text (the name as given: tlsaudit's and ssl_exporter's names carry their units).
    static func named(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    // MARK: - Labels

    /// ssl_exporter's certificate labels: serial (decimal), issuer and subject common names,
    /// and the names it carries, lists framed by commas.
    static func certificateLabels(_ certificate: CertificateSummary) -> [(String, String)] {
        func framed(_ values: [String]) -> String { values.isEmpty ? "" : "," + values.joined(separator: ",") + "," }
        return [
            ("serial_no", Self.decimal(hex: certificate.serial)),
            ("issuer_cn", DistinguishedName.attribute("CN", of: certificate.issuer) ?? ""),
            ("cn", certificate.commonName ?? ""),
            ("dnsnames", framed(certificate.subjectAlternativeNames.dns)),
            ("ips", framed(certificate.subjectAlternativeNames.ip)),
            ("emails", framed(certificate.subjectAlternativeNames.email)),
            ("ou", DistinguishedName.attribute("OU", of: certificate.subject) ?? ""),
        ]
    }

    /// A hexadecimal serial number as a decimal string (as Go's big.Int prints it for ssl_exporter).
    static func decimal(hex: String) -> String {
        var digits: [UInt8] = [0] // little-endian base-10 digits
        for character in hex.lowercased() {
            guard let nibble = character.hexDigitValue else { continue }
            var carry = nibble
            for index in digits.indices {
                let value = Int(digits[index]) * 16 + carry
                digits[index] = UInt8(value % 10)
                carry = value / 10
            }
            while carry > 0 {
                digits.append(UInt8(carry % 10))
                carry /= 10
            }
        }
        while digits.count > 1, digits.last == 0 { digits.removeLast() }
        return String(digits.reversed().map { Character(String($0)) })
    }

    static func ocspStatus(_ status: String) -> Double? {
        switch status.lowercased() {
        case "good": 0
        case "revoked": 1
        case "unknown": 2
        default: nil
        }
    }
}

/// What /proc says of this process.
enum ProcessFigures {
    static func residentBytes() -> Int? {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Returns the whole free pages of malloc's arenas to the system (glibc's malloc_trim).
    static func releaseFreeMemory() {
        tlsaudit_release_free_memory()
    }

    static func openDescriptors() -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { max(0, $0.count - 1) }
    }
}
