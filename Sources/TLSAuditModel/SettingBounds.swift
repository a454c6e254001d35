/// Every setting a user can give twice (as a command-line option and as a configuration key):
/// its default and its one allowed range, in one place. The CLI and the configuration read them
/// here; README ("Settings and their ranges") lists them.
public enum SettingBounds {
    /// A setting's default and the values allowed.
    public struct Bound<Value: Comparable & Sendable>: Sendable {
        public let defaultValue: Value
        public let range: ClosedRange<Value>
        /// How the range is said in messages, e.g. "between 0.1 and 300 seconds".
        public let described: String

        /// Nil when `value` is allowed, else the message for `name` (an option or a key).
        public func problem(_ value: Value, name: String) -> String? {
            range.contains(value) ? nil : "\(name) must be \(described)"
        }
    }

    /// Seconds for each of name resolution, TCP connect and TLS handshake (and, after the
    /// handshake, for fetching revocation answers and missing intermediates).
    public static let timeout = Bound(defaultValue: 10.0, range: 0.1...300, described: "between 0.1 and 300 seconds")
    /// Addresses probed at once.
    public static let concurrency = Bound(defaultValue: 64, range: 1...4096, described: "between 1 and 4096")
    /// Scans of one host at once (the service).
    public static let perHostConcurrency = Bound(defaultValue: 4, range: 1...256, described: "between 1 and 256")
    /// Seconds between scans of a target (the service).
    public static let interval = Bound(defaultValue: 300.0, range: 0.1...3_153_600_000, described: "between 100 ms and 100 years")
    /// TCP port of a target.
    public static let port = Bound(defaultValue: 443, range: 1...65535, described: "between 1 and 65535")
    /// Seconds a scan is kept (the service; each address's latest scan is always kept).
    public static let retention = Bound(defaultValue: 90.0 * 86_400, range: 3_600...3_153_600_000, described: "between 1 hour and 100 years")
    /// Longest wait before retrying an unreachable target (the service).
    public static let maxBackoff = Bound(defaultValue: 3_600.0, range: 1...3_153_600_000, described: "between 1 second and 100 years")
    /// Seconds an alert delivery may take.
    public static let sinkTimeout = Bound(defaultValue: 10.0, range: 0.1...300, described: "between 0.1 and 300 seconds")
    /// Revocation checking when a target does not set it.
    public static let revocation = RevocationMode.soft
    /// Seconds a compliance report covers, up to its end (`report --since`, a report's `since`).
    public static let reportPeriod = Bound(defaultValue: 7.0 * 86_400, range: 60...3_153_600_000,
                                           described: "a duration of at least a minute, like 24h, 7d or 30d")
    /// A report lists the certificates expiring within this many seconds (`--expiring-within`, `expiring_within`).
    public static let expiringWithin = Bound(defaultValue: 30.0 * 86_400, range: 0...3_153_600_000,
                                             described: "a duration from 0 to 100 years, like 30d")
    /// `expiringWithin`'s default in whole days, as reports count them.
    public static var expiringWithinDays: Int { Int(expiringWithin.defaultValue / 86_400) }
    /// The compliance goal of a report's trend, in percent (`report --goal`).
    public static let goal = Bound(defaultValue: 95.0, range: 0...100, described: "a percentage from 0 to 100")
    /// Seconds scans and deliveries in flight may run on after SIGTERM (`serve --shutdown-grace`):
    /// the default is well within the systemd unit's TimeoutStopSec=30.
    public static let shutdownGrace = Bound(defaultValue: 15.0, range: 0...3_600, described: "between 0 and 3600 seconds")
    /// Seconds a fleet node's claim on a scan lasts unless renewed (a dead node's scans are taken
    /// over after it): `fleet: lease:`.
    public static let lease = Bound(defaultValue: 60.0, range: 5...3_600, described: "between 5 seconds and 1 hour")
    /// Seconds between a fleet node's claims, heartbeats and configuration checks: `fleet: poll:`.
    public static let fleetPoll = Bound(defaultValue: 2.0, range: 0.2...60, described: "between 200 ms and 60 seconds")
    /// Seconds an HTTP connection may stay idle or stalled mid-request: `http: idle_timeout:`.
    public static let httpIdleTimeout = Bound(defaultValue: 10.0, range: 1...300, described: "between 1 second and 5 minutes")
    /// Connections open at once per HTTP listener: `http: max_connections:`.
    public static let httpConnections = Bound(defaultValue: 256.0, range: 1...10_000, described: "between 1 and 10000")
    /// Seconds a `/probe` request may take at most (less when Prometheus' scrape timeout is shorter): `http: probe: timeout:`.
    public static let probeTimeout = Bound(defaultValue: 10.0, range: 0.5...300, described: "between 500 ms and 5 minutes")
    /// `/probe` scans running at once (more wait for a slot until their timeout): `http: probe: concurrency:`.
    public static let probeConcurrency = Bound(defaultValue: 8, range: 1...256, described: "between 1 and 256")
}
