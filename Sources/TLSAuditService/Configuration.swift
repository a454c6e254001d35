import Foundation
public import TLSAuditCore
public import TLSAuditStore
public import TLSAuditMonitoring
import TLSAuditProbe
import TLSAuditReport
import Yams

/// Which addresses of a target to probe.
public enum AddressSetting: Sendable, Hashable {
    case all, ipv4, ipv6
    /// Exactly these IP addresses (the name is still sent as SNI and checked).
    case list([String])
}

/// What a target's chain is verified against (`trust:`; unset, the policy's store: `apple` for the
/// Apple policies, `system` for the Mozilla ones).
public enum TrustSetting: Sendable, Hashable {
    /// Debian's store (Mozilla's roots), `/etc/ssl/certs`.
    case system
    /// The snapshot of Apple's root store shipped with tlsaudit.
    case apple
    /// A PEM bundle given as the store (`trust: {store: PATH}`).
    case file(String)
    /// The operator's own anchors (`trust: {ca_file: PATH}`).
    case caFile(String)

    public var label: String {
        switch self {
        case .system: "system"
        case .apple: "apple"
        case .file(let path): "file:\(path)"
        case .caFile(let path): "ca-file:\(path)"
        }
    }

    /// The store a policy judges against when the target names none.
    public static func `default`(for policy: CompliancePolicy) -> TrustSetting {
        policy.mozillaProfile == nil ? .apple : .system
    }
}

/// One target of the service, with every setting resolved (defaults, group, target).
public struct TargetConfiguration: Sendable, Hashable {
    /// The target's key in the database and in `status`: its `name`, or `host:port`.
    public var key: String
    public var host: String
    public var port: Int
    public var sni: String?
    public var addresses: AddressSetting
    /// Seconds between scans.
    public var interval: Double
    /// Seconds allowed for each of resolution, connect and handshake.
    public var timeout: Double
    public var policy: CompliancePolicy
    public var trust: TrustSetting
    public var tags: [String]
    public var group: String?
    /// Pins checked on every scan; nil when the target has none.
    public var pins: PinPolicy?
    /// Revocation checking (soft-fail unless configured).
    public var revocation: RevocationMode
    /// Fetch a missing intermediate from its caIssuers URL.
    public var aiaFetch: Bool
    /// In a fleet: scanned from any one vantage point (the default), from every one, or from those named.
    public var vantages: FleetVantages = .any
    /// The STARTTLS dialogue before each handshake (named with `starttls:` or inferred from a well-known port).
    public var starttls: STARTTLSUse?
    /// Opt-in checks run with each scan (`checks: [inventory]`).
    public var checks: Set<OptionalCheck> = []
    /// The path `checks: [headers]` asks for (default `/`).
    public var headersPath: String?
    /// Judged by one iOS app's ATS rules for this host (`app:`, as `tlsaudit app import` writes it).
    public var app: AppHostRules?

    public init(key: String, host: String, port: Int, sni: String?, addresses: AddressSetting, interval: Double,
                timeout: Double, policy: CompliancePolicy, trust: TrustSetting, tags: [String], group: String?,
                pins: PinPolicy? = nil, revocation: RevocationMode = .soft, aiaFetch: Bool = false,
                vantages: FleetVantages = .any, starttls: STARTTLSUse? = nil, checks: Set<OptionalCheck> = [],
                headersPath: String? = nil) {
        self.key = key
        self.host = host
        self.port = port
        self.sni = sni
        self.addresses = addresses
        self.interval = interval
        self.timeout = timeout
        self.policy = policy
        self.trust = trust
        self.tags = tags
        self.group = group
        self.pins = pins
        self.revocation = revocation
        self.aiaFetch = aiaFetch
        self.vantages = vantages
        self.starttls = starttls
        self.checks = checks
        self.headersPath = headersPath
    }

    /// The scanner's view of this target.
    public var scanTarget: ScanTarget {
        var target = ScanTarget(original: key, host: host, port: port, sni: sni)
        if case .list(let list) = addresses { target.connectTo = list.map { ConnectAddress(host: $0) } }
        target.policy = policy
        target.timeout = timeout
        target.pins = pins
        target.revocation = revocation
        target.aiaFetch = aiaFetch
        target.starttls = starttls
        target.checks = checks
        target.headersPath = headersPath
        target.app = app
        return target
    }
}

/// The whole service configuration (`tlsaudit.yaml`), validated.
public struct ServiceConfiguration: Sendable, Hashable {
    /// The SQLite file, or the `postgres://` URL of a fleet's database.
    public var database: String
    /// Scans in flight at once, over all targets.
    public var concurrency: Int
    /// Scans in flight at once against one host.
    public var perHostConcurrency: Int
    /// Scans older than this many seconds are deleted (the latest of each address is kept).
    public var retention: Double
    /// Longest wait between attempts at an unreachable target, in seconds.
    public var maxBackoff: Double
    /// swift-log level: trace, debug, info, notice, warning, error, critical.
    public var logLevel: String
    public var targets: [TargetConfiguration]
    /// When alerts are raised and where they go (default: the log only).
    public var alerts: AlertConfiguration
    /// Reports written on a schedule (default: none).
    public var reports: [ReportSchedule] = []
    /// Advice that does not make the file invalid (e.g. a single pin with no backup).
    public var warnings: [ConfigurationError] = []
    /// This node's name and vantage point in a fleet.
    public var node = NodeIdentity()
    /// How fleet nodes coordinate (lease and poll period).
    public var fleet = FleetSettings()
    /// The HTTP listener for metrics, health and the API (off by default).
    public var http = HTTPSettings()
    /// The CT log list file SCTs are verified against (`ct: {log_list:}`); nil: the shipped snapshot.
    public var ctLogList: String?
    /// Where results wait when the store cannot take them at a stop (the state directory).
    public var spillDirectory: String = ServiceConfiguration.environmentStateDirectory ?? FileManager.default.currentDirectoryPath

    /// The store `database` names: a SQLite file, or PostgreSQL for a `postgres://` URL.
    public func location() throws(StoreError) -> DatabaseLocation { try DatabaseLocation.parse(database) }

    /// The targets as the fleet's work queue knows them.
    public var fleetTargets: [FleetTarget] {
        targets.map { FleetTarget(key: $0.key, host: $0.host, interval: $0.interval, vantages: $0.vantages) }
    }

    /// The base name of the files results wait in across a restart: beside a SQLite file, or
    /// `tlsaudit-postgres` in the state directory for PostgreSQL.
    public var spillBase: String {
        DatabaseLocation.isPostgresURL(database)
            ? URL(fileURLWithPath: spillDirectory).appendingPathComponent("tlsaudit-postgres").path : database
    }

    /// `serve --shutdown-grace`'s default, in seconds (`SettingBounds.shutdownGrace`).
    public static let defaultShutdownGrace = SettingBounds.shutdownGrace.defaultValue

    public init(database: String, concurrency: Int, perHostConcurrency: Int, retention: Double, maxBackoff: Double,
                logLevel: String, targets: [TargetConfiguration], alerts: AlertConfiguration = AlertConfiguration()) {
        self.database = database
        self.concurrency = concurrency
        self.perHostConcurrency = perHostConcurrency
        self.retention = retention
        self.maxBackoff = maxBackoff
        self.logLevel = logLevel
        self.targets = targets
        self.alerts = alerts
    }

    /// Where the database goes when there is no configuration: `$STATE_DIRECTORY` (systemd's
    /// StateDirectory=) or the working directory.
    public static var defaultDatabase: String {
        let directory = environmentStateDirectory ?? FileManager.default.currentDirectoryPath
        return URL(fileURLWithPath: directory).appendingPathComponent("tlsaudit.sqlite").path
    }

    /// The configuration `serve` reads by default (the installed layout).
    public static let installedPath = "/etc/tlsaudit/tlsaudit.yaml"
    /// The unit's StateDirectory=tlsaudit.
    public static let installedStateDirectory = "/var/lib/tlsaudit"

    static var environmentStateDirectory: String? {
        ProcessInfo.processInfo.environment["STATE_DIRECTORY"]?.split(separator: ":").first.map(String.init)
    }

    /// The directory a relative `database:` is taken from, the same for `serve` and for every
    /// command given the configuration (`status`, `history`, `alerts`, `report --config`):
    /// `$STATE_DIRECTORY` when set (systemd sets it for the service); else, for a configuration in
    /// /etc/tlsaudit (installed with the unit), the unit's state directory /var/lib/tlsaudit; else
    /// the configuration file's own directory.
    public static func stateDirectory(forConfigurationIn directory: String) -> String {
        if let state = environmentStateDirectory { return state }
        let standardized = URL(fileURLWithPath: directory).standardizedFileURL.path
        if standardized == URL(fileURLWithPath: installedPath).deletingLastPathComponent().path { return installedStateDirectory }
        return standardized
    }

    /// Reads and validates a YAML file. Every problem is reported, each with file, line and what was expected.
    public static func load(path: String) throws(ConfigurationErrors) -> ServiceConfiguration {
        let bytes: [UInt8]
        do { bytes = try InputLimits.read(path, limit: InputLimits.configurationBytes, what: "configuration file") } catch {
            throw ConfigurationErrors([ConfigurationError(file: path, line: nil, message: error.description)])
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigurationErrors([ConfigurationError(file: path, line: nil, message: "the file is not UTF-8 text")])
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try parse(yaml: text, file: path, baseDirectory: directory)
    }

    /// Parses YAML text. Relative `ca_file` paths are taken from `baseDirectory` (the file's
    /// directory); a relative `database` from `stateDirectory(forConfigurationIn:)`.
    public static func parse(yaml: String, file: String, baseDirectory: String) throws(ConfigurationErrors) -> ServiceConfiguration {
        var parser = ConfigurationParser(file: file, baseDirectory: baseDirectory)
        let configuration = parser.parse(yaml)
        if !parser.errors.isEmpty || configuration == nil {
            // In file order; file-level problems (no line) last.
            throw ConfigurationErrors(parser.errors.enumerated().sorted {
                ($0.element.line ?? Int.max, $0.offset) < ($1.element.line ?? Int.max, $1.offset)
            }.map(\.element))
        }
        return configuration!
    }
}

/// A fleet node's name and vantage point (`node:`): the node's own, never taken from `fleet apply`.
public struct NodeIdentity: Sendable, Hashable {
    /// Unique in the fleet (default: the machine's host name).
    public var name: String
    /// Where the node sees the targets from (default: `default`).
    public var vantage: String

    public init(name: String = NodeIdentity.defaultName, vantage: String = "default") {
        self.name = name
        self.vantage = vantage
    }

    public static var defaultName: String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? ""
        return NodeIdentity.isValidName(host) ? host : "tlsaudit"
    }

    /// Letters, digits, `.`, `_` and `-`, up to 64 characters.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
    }
}

/// How fleet nodes coordinate (`fleet:`).
public struct FleetSettings: Sendable, Hashable {
    /// Seconds a claim on a scan lasts unless renewed.
    public var lease = SettingBounds.lease.defaultValue
    /// Seconds between claims, heartbeats and configuration checks.
    public var poll = SettingBounds.fleetPoll.defaultValue

    public init() {}
}

/// One problem in a configuration file.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var message: String

    public var description: String {
        line.map { "\(file):\($0): \(message)" } ?? "\(file): \(message)"
    }
}

/// Every problem found in a configuration file.
public struct ConfigurationErrors: Error, Sendable, CustomStringConvertible {
    public var errors: [ConfigurationError]
    public init(_ errors: [ConfigurationError]) { self.errors = errors }
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// Walks the YAML node tree by hand so that every error carries its line, and an unknown key
/// is an error (a typo must not silently disable a check).
struct ConfigurationParser {
    let file: String
    let baseDirectory: String
    var errors: [ConfigurationError] = []
    var warnings: [ConfigurationError] = []
    /// The line of each target parsed so far, in order (for duplicate reports).
    private var targetLines: [Int?] = []

    init(file: String, baseDirectory: String) {
        self.file = file
        self.baseDirectory = baseDirectory
    }

    static let topLevelKeys = ["database", "concurrency", "per_host_concurrency", "retention", "max_backoff",
                               "log_level", "alerts", "reports", "defaults", "groups", "targets", "node", "fleet", "http", "ct"]
    static let postgresKeys = ["host", "port", "database", "user", "password_file", "sslmode", "ca_file", "pool_size",
                               "statement_timeout"]
    static let reportKeys = ["name", "schedule", "at", "day", "timezone", "since", "formats", "directory", "policy",
                             "expiring_within", "keep", "sinks"]
    static let pinKeys = ["mode", "pins", "allow_invalid_certificates", "validates_domain_name", "leaf_identities", "ca_identities"]
    /// AFNetworking 2.x's `validatesCertificateChain`, refused with what became of it (AFNetworking's
    /// CHANGELOG, 2.6.0: "Full Certificate Chain Validation has been removed from AFSecurityPolicy", #2856).
    static let validatesCertificateChainRemoved = "validates_certificate_chain is AFNetworking 2.x's validatesCertificateChain, removed in AFNetworking 2.6.0 (so no 3.x or 4.x has it): a pinned policy now accepts the chain when any one of its certificates (or, in public-key mode, keys) is pinned. Remove the key and pin the one certificate of the chain you rely on in pins (AFNetworking's advice: the most suitable certificate of the chain)"
    static let alertKeys = ["unreachable_after", "expiry_thresholds", "first_scan", "sinks"]
    static let sinkKeys = ["name", "type", "url", "secret", "timeout", "min_severity", "argv", "ca_file"]
    static let settingKeys = ["port", "sni", "addresses", "interval", "timeout", "policy", "trust", "tags", "pins", "revocation", "aia_fetch",
                              "vantage", "starttls", "checks", "headers_path", "app"]
    static let targetKeys = ["host", "name"] + settingKeys
    static let groupKeys = ["name", "targets"] + settingKeys
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// Settings a target inherits; every field optional until resolved.
    struct Settings {
        var port: Int?
        var sni: String?
        var addresses: AddressSetting?
        var interval: Double?
        var timeout: Double?
        var policy: CompliancePolicy?
        var trust: TrustSetting?
        var tags: [String] = []
        var pins: PinPolicy?
        var revocation: RevocationMode?
        var aiaFetch: Bool?
        var vantages: FleetVantages?
        var starttls: STARTTLSSetting?
        var checks: Set<OptionalCheck>?
        var headersPath: String?
        var app: AppHostRules?
        /// The port and the policy came from `defaults:`, which are for HTTPS targets: a STARTTLS
        /// target takes its protocol's port and the trust policy instead.
        var portFromDefaults = false
        var policyFromDefaults = false

        /// `self` with `other`'s values where `other` sets them (tags accumulate; pins replace).
        func overridden(by other: Settings) -> Settings {
            Settings(port: other.port ?? port, sni: other.sni ?? sni, addresses: other.addresses ?? addresses,
                     interval: other.interval ?? interval, timeout: other.timeout ?? timeout,
                     policy: other.policy ?? policy, trust: other.trust ?? trust, tags: tags + other.tags,
                     pins: other.pins ?? pins, revocation: other.revocation ?? revocation, aiaFetch: other.aiaFetch ?? aiaFetch,
                     vantages: other.vantages ?? vantages, starttls: other.starttls ?? starttls, checks: other.checks ?? checks, headersPath: other.headersPath ?? headersPath,
                     app: other.app ?? app,
                     portFromDefaults: other.port == nil && portFromDefaults, policyFromDefaults: other.policy == nil && policyFromDefaults)
        }
    }

    mutating func parse(_ yaml: String) -> ServiceConfiguration? {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            report(nil, yamlMessage(error))
            return nil
        } catch {
            report(nil, "not valid YAML: \(error)")
            return nil
        }
        guard let root, case .mapping(let mapping) = root else {
            report(root, "the file must be a YAML mapping with a 'targets' list")
            return nil
        }
        checkKeys(mapping, allowed: Self.topLevelKeys, in: "the top level")
        // Without a `database:` key, tlsaudit.sqlite where a relative one would go (the same for serve and status).
        let defaultDatabase = URL(fileURLWithPath: ServiceConfiguration.stateDirectory(forConfigurationIn: baseDirectory))
            .appendingPathComponent("tlsaudit.sqlite").path
        var configuration = ServiceConfiguration(database: defaultDatabase, concurrency: SettingBounds.concurrency.defaultValue,
                                                 perHostConcurrency: SettingBounds.perHostConcurrency.defaultValue,
                                                 retention: SettingBounds.retention.defaultValue,
                                                 maxBackoff: SettingBounds.maxBackoff.defaultValue, logLevel: "info", targets: [])
        configuration.spillDirectory = ServiceConfiguration.stateDirectory(forConfigurationIn: baseDirectory)
        if let node = mapping["database"], case .mapping(let block) = node {
            if let url = postgresBlock(node, block) { configuration.database = url }
        } else if let node = mapping["database"], let path = string(node, "a file path, a postgres:// URL or a postgres: block") {
            if DatabaseLocation.isPostgresURL(path) {
                do {
                    _ = try DatabaseLocation.parse(path)
                    configuration.database = path
                } catch {
                    report(node, error.description)
                }
            } else {
                configuration.database = path.hasPrefix("/") ? path
                    : URL(fileURLWithPath: ServiceConfiguration.stateDirectory(forConfigurationIn: baseDirectory)).appendingPathComponent(path).path
            }
        }
        if let node = mapping["concurrency"], let value = integer(node, in: SettingBounds.concurrency.range) { configuration.concurrency = value }
        if let node = mapping["per_host_concurrency"], let value = integer(node, in: SettingBounds.perHostConcurrency.range) {
            configuration.perHostConcurrency = value
        }
        if let node = mapping["retention"], let value = duration(node, SettingBounds.retention) { configuration.retention = value }
        if let node = mapping["max_backoff"], let value = duration(node, SettingBounds.maxBackoff) { configuration.maxBackoff = value }
        if let node = mapping["log_level"], let level = string(node, "a log level") {
            if Self.logLevels.contains(level) {
                configuration.logLevel = level
            } else {
                report(node, "log_level '\(level)' is not one of \(Self.logLevels.joined(separator: ", "))")
            }
        }
        if let node = mapping["node"] { configuration.node = nodeIdentity(node) }
        if let node = mapping["fleet"] { configuration.fleet = fleetSettings(node) }
        if let node = mapping["http"] { configuration.http = httpSettings(node) }
        if let node = mapping["ct"] { configuration.ctLogList = certificateTransparency(node) }
        // The port and the policy are left unset here: their defaults depend on the target's STARTTLS protocol.
        let builtIn = Settings(addresses: .all, interval: SettingBounds.interval.defaultValue,
                               timeout: SettingBounds.timeout.defaultValue, trust: nil,
                               revocation: SettingBounds.revocation)
        var defaults = builtIn
        if let node = mapping["defaults"] {
            if case .mapping(let defaultsMapping) = node {
                checkKeys(defaultsMapping, allowed: Self.settingKeys, in: "defaults")
                defaults = builtIn.overridden(by: settings(defaultsMapping))
                defaults.portFromDefaults = defaults.port != nil
                defaults.policyFromDefaults = defaults.policy != nil
            } else {
                report(node, "'defaults' must be a mapping of target settings")
            }
        }
        if let node = mapping["alerts"] { configuration.alerts = alerts(node) }
        if let node = mapping["reports"] {
            configuration.reports = reports(node, sinks: configuration.alerts.sinks.map(\.name), database: configuration.database,
                                            alertOnly: Set(configuration.alerts.sinks.filter { if case .alertmanager = $0.kind { true } else { false } }.map(\.name)))
        }
        var targets: [TargetConfiguration] = []
        if let node = mapping["groups"] {
            targets += groups(node, defaults: defaults)
        }
        if let node = mapping["targets"] {
            targets += targetList(node, inherited: defaults, group: nil)
        }
        // A fleet node's own file may leave the targets to `tlsaudit fleet apply`.
        if mapping["targets"] == nil && mapping["groups"] == nil && !DatabaseLocation.isPostgresURL(configuration.database) {
            report(root, "no targets: add a 'targets' list (or 'groups')")
        }
        if targets.count > InputLimits.targets {
            report(root, "\(targets.count) targets; tlsaudit takes at most \(InputLimits.targets) in one configuration")
        }
        var seen: [String: Int] = [:]
        for (index, target) in targets.enumerated() {
            if let first = seen[target.key] {
                let line = targetLines[index]
                let firstLine = targetLines[first].map { "line \($0)" } ?? "an earlier entry"
                errors.append(ConfigurationError(file: file, line: line,
                    message: "target '\(target.key)' is already defined at \(firstLine); give one of them a distinct 'name'"))
            } else {
                seen[target.key] = index
            }
        }
        configuration.targets = targets
        configuration.warnings = warnings
        return configuration
    }

    // MARK: - Sections

    private mutating func groups(_ node: Node, defaults: Settings) -> [TargetConfiguration] {
        guard case .sequence(let sequence) = node else {
            report(node, "'groups' must be a list of groups, each with a 'name' and 'targets'")
            return []
        }
        var targets: [TargetConfiguration] = []
        for entry in sequence {
            guard case .mapping(let group) = entry else {
                report(entry, "a group must be a mapping with 'name' and 'targets'")
                continue
            }
            checkKeys(group, allowed: Self.groupKeys, in: "a group")
            let name = group["name"].flatMap { string($0, "a group name") }
            if name == nil, group["name"] == nil { report(entry, "a group needs a 'name'") }
            let inherited = defaults.overridden(by: settings(group))
            if let list = group["targets"] {
                targets += targetList(list, inherited: inherited, group: name)
            } else {
                report(entry, "group '\(name ?? "?")' has no 'targets'")
            }
        }
        return targets
    }

    private mutating func targetList(_ node: Node, inherited: Settings, group: String?) -> [TargetConfiguration] {
        guard case .sequence(let sequence) = node else {
            report(node, "'targets' must be a list of HOST[:PORT] strings or mappings with a 'host'")
            return []
        }
        return sequence.compactMap { target($0, inherited: inherited, group: group) }
    }

    private mutating func target(_ node: Node, inherited: Settings, group: String?) -> TargetConfiguration? {
        var own = Settings()
        var host: String
        var name: String?
        switch node {
        case .scalar(let scalar):
            do {
                // Port 0 stands for "not given": the inherited port applies.
                let (parsedHost, port) = try ScanTarget.splitHostPort(scalar.string, defaultPort: 0)
                host = parsedHost
                if port != 0 { own.port = port }
            } catch {
                report(node, "target '\(scalar.string)': \(error.description)")
                return nil
            }
        case .mapping(let mapping):
            checkKeys(mapping, allowed: Self.targetKeys, in: "a target")
            guard let hostNode = mapping["host"] else {
                report(node, "a target needs a 'host'")
                return nil
            }
            guard let value = string(hostNode, "a host name or IP address") else { return nil }
            do {
                _ = try ScanTarget.splitHostPort(value, defaultPort: SettingBounds.port.defaultValue)
            } catch {
                report(hostNode, "host '\(value)': \(error.description)")
                return nil
            }
            host = value.hasPrefix("[") && value.hasSuffix("]") ? String(value.dropFirst().dropLast()) : value
            name = mapping["name"].flatMap { string($0, "a target name") }
            own = settings(mapping)
        default:
            report(node, "a target must be 'HOST[:PORT]' or a mapping with a 'host'")
            return nil
        }
        targetLines.append(node.mark?.line)
        let resolved = inherited.overridden(by: own)
        let starttlsSetting = resolved.starttls ?? .auto
        var port = resolved.port ?? SettingBounds.port.defaultValue
        if case .named(let named) = starttlsSetting, resolved.port == nil || resolved.portFromDefaults { port = named.defaultPort }
        let starttls = starttlsSetting.use(port: port)
        // `defaults:` name a policy for HTTPS targets: a STARTTLS target takes its own default unless it or its group names one.
        let policy = resolved.policy.flatMap { starttls != nil && resolved.policyFromDefaults ? nil : $0 } ?? CompliancePolicy.default(starttls: starttls)
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let sni = resolved.sni ?? (IPAddress.canonical(host) == nil ? host : nil)
        var configured = TargetConfiguration(key: name ?? "\(shownHost):\(port)", host: host, port: port, sni: sni,
                                   addresses: resolved.addresses ?? .all, interval: resolved.interval ?? SettingBounds.interval.defaultValue,
                                   timeout: resolved.timeout ?? SettingBounds.timeout.defaultValue,
                                   policy: policy, trust: resolved.trust ?? .default(for: policy),
                                   tags: resolved.tags, group: group,
                                   pins: resolved.pins, revocation: resolved.revocation ?? SettingBounds.revocation,
                                   aiaFetch: resolved.aiaFetch ?? false, vantages: resolved.vantages ?? .any, starttls: starttls,
                                   checks: resolved.checks ?? [], headersPath: resolved.headersPath)
        if let app = resolved.app {
            configured.app = app
            // The app's tag names the app in status, reports, the API and the metrics.
            if !configured.tags.contains(app.tag) { configured.tags.append(app.tag) }
            if ![.ats, .atsRuntime].contains(configured.policy) {
                report(node, "target '\(configured.key)': 'app' judges the target as the app's client, under ats-runtime (or ats); policy \(configured.policy.rawValue) cannot apply")
            }
        }
        return configured
    }

    /// The target settings present in a mapping (defaults, a group or a target).
    private mutating func settings(_ mapping: Node.Mapping) -> Settings {
        var settings = Settings()
        if let node = mapping["port"] { settings.port = integer(node, in: SettingBounds.port.range) }
        if let node = mapping["sni"] { settings.sni = string(node, "a server name") }
        if let node = mapping["interval"] { settings.interval = duration(node, SettingBounds.interval) }
        if let node = mapping["timeout"] { settings.timeout = duration(node, SettingBounds.timeout) }
        if let node = mapping["policy"] { settings.policy = choice(node, "policy", expected: "a policy") }
        if let node = mapping["revocation"] { settings.revocation = choice(node, "revocation", expected: "a revocation mode") }
        if let node = mapping["aia_fetch"] { settings.aiaFetch = boolean(node) }
        if let node = mapping["addresses"] { settings.addresses = addresses(node) }
        if let node = mapping["trust"] { settings.trust = trust(node) }
        if let node = mapping["tags"] {
            if case .sequence(let sequence) = node {
                settings.tags = sequence.compactMap { string($0, "a tag") }
            } else if let tag = string(node, "a tag or a list of tags") {
                settings.tags = [tag]
            }
        }
        if let node = mapping["pins"] { settings.pins = pins(node) }
        if let node = mapping["app"] { settings.app = appRules(node) }
        if let node = mapping["vantage"] { settings.vantages = vantages(node) }
        if let node = mapping["checks"] {
            let names: [Node] = if case .sequence(let sequence) = node { Array(sequence) } else { [node] }
            var checks: Set<OptionalCheck> = []
            for name in names {
                guard let text = string(name, "a check name") else { continue }
                if let check = OptionalCheck(rawValue: text) {
                    checks.insert(check)
                } else {
                    report(name, "checks: '\(text)' is not a check (\(OptionalCheck.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
            }
            settings.checks = checks
        }
        if let node = mapping["headers_path"], let path = string(node, "a path like /health") {
            if path.hasPrefix("/"), !path.contains(where: { $0.isWhitespace || $0.isNewline }) {
                settings.headersPath = path
            } else {
                report(node, "headers_path '\(path)': a path starting with / and without spaces")
            }
        }
        if let node = mapping["starttls"], let text = string(node, "a STARTTLS protocol") {
            if let setting = STARTTLSSetting(text) {
                settings.starttls = setting
            } else {
                report(node, "starttls '\(text)': expected one of \(STARTTLSSetting.accepted)")
            }
        }
        return settings
    }

    static let appKeys = ["bundle", "entry", "relies_on", "minimum_tls_version", "requires_forward_secrecy", "allows_insecure_http_loads",
                          "arbitrary_loads", "requires_certificate_transparency", "afnetworking"]

    /// `app:`, the ATS rules one iOS app gives the target (`tlsaudit app import` writes it): `bundle`
    /// (required), `entry` (the NSExceptionDomains key that applies), `relies_on` (its keys), and the
    /// effective rules, Apple's defaults when absent: `minimum_tls_version` (TLSv1.2),
    /// `requires_forward_secrecy` (true), `allows_insecure_http_loads`, `arbitrary_loads`,
    /// `requires_certificate_transparency` (false); `afnetworking`, the app's AFSecurityPolicy as a
    /// `pins:` block in AFNetworking's form (mode, pins, allow_invalid_certificates, validates_domain_name).
    private mutating func appRules(_ node: Node) -> AppHostRules? {
        guard case .mapping(let mapping) = node else {
            report(node, "'app' must be a mapping with 'bundle' and the app's ATS rules for the target (tlsaudit app import writes it)")
            return nil
        }
        checkKeys(mapping, allowed: Self.appKeys, in: "app")
        guard let bundleNode = mapping["bundle"], let bundle = string(bundleNode, "a bundle identifier") else {
            if mapping["bundle"] == nil { report(node, "app: 'bundle' (the app's CFBundleIdentifier) is required") }
            return nil
        }
        var rules = AppHostRules(bundle: bundle, entry: nil, reliesOn: [], minimumTLSVersion: .tls1_2, requiresForwardSecrecy: true,
                                 allowsInsecureHTTPLoads: false, arbitraryLoads: false, requiresCertificateTransparency: false,
                                 configuration: "", minimumNegotiatedVersion: nil)
        if let value = mapping["entry"] { rules.entry = string(value, "an NSExceptionDomains key") }
        if let value = mapping["relies_on"] {
            if case .sequence(let keys) = value { rules.reliesOn = keys.compactMap { string($0, "an ATS key") } }
            else { report(value, "app relies_on must be a list of ATS keys") }
        }
        if let value = mapping["minimum_tls_version"], let text = string(value, "TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3") {
            if let version = AppTransportSecurityPolicy.tlsVersionValues[text] { rules.minimumTLSVersion = version }
            else { report(value, "app minimum_tls_version '\(text)': expected TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3 (Apple's spelling)") }
        }
        if let value = mapping["requires_forward_secrecy"], let flag = boolean(value) { rules.requiresForwardSecrecy = flag }
        if let value = mapping["allows_insecure_http_loads"], let flag = boolean(value) { rules.allowsInsecureHTTPLoads = flag }
        if let value = mapping["arbitrary_loads"], let flag = boolean(value) { rules.arbitraryLoads = flag }
        if let value = mapping["requires_certificate_transparency"], let flag = boolean(value) { rules.requiresCertificateTransparency = flag }
        if let value = mapping["afnetworking"], let policy = pins(value) {
            if policy.mode == .none && !policy.allowInvalidCertificates || !policy.leafIdentities.isEmpty || !policy.caIdentities.isEmpty {
                report(value, "app afnetworking: an AFSecurityPolicy (mode certificate or public-key with pins, or mode none with allow_invalid_certificates); NSPinnedDomains identities go in the target's pins:")
            } else {
                rules.afnetworking = policy
            }
        }
        if rules.arbitraryLoads {
            // ATS off lifts the minimums, as the app's own model does.
            rules.minimumTLSVersion = .tls1_0
            rules.requiresForwardSecrecy = false
            rules.allowsInsecureHTTPLoads = true
        }
        return rules.derived
    }

    /// `vantage: any` (the default), `all`, a vantage name or a list of them.
    private mutating func vantages(_ node: Node) -> FleetVantages? {
        if case .sequence(let sequence) = node {
            guard !sequence.isEmpty else {
                report(node, "vantage: an empty list; name at least one vantage point, or say 'any' or 'all'")
                return nil
            }
            let names = sequence.compactMap { fleetName($0, "vantage") }
            return names.count == sequence.count ? .list(Array(Set(names)).sorted()) : nil
        }
        guard let text = string(node, "any, all, a vantage name or a list of them") else { return nil }
        switch text {
        case "any": return .any
        case "all": return .all
        default: return fleetName(node, "vantage").map { .list([$0]) }
        }
    }

    /// A node or vantage name (`NodeIdentity.isValidName`, and not `any` or `all`, which `vantage:`
    /// reserves); reported as `what` otherwise.
    private mutating func fleetName(_ node: Node, _ what: String) -> String? {
        guard let name = string(node, "a \(what)") else { return nil }
        guard NodeIdentity.isValidName(name), !["any", "all"].contains(name) else {
            report(node, "\(what) '\(name)': use letters, digits, '.', '_' and '-' (up to 64; 'any' and 'all' are reserved)")
            return nil
        }
        return name
    }

    /// `node:` with `name` and `vantage`.
    private mutating func nodeIdentity(_ node: Node) -> NodeIdentity {
        var identity = NodeIdentity()
        guard case .mapping(let mapping) = node else {
            report(node, "'node' must be a mapping with 'name' and 'vantage'")
            return identity
        }
        checkKeys(mapping, allowed: ["name", "vantage"], in: "node")
        if let value = mapping["name"], let name = fleetName(value, "node name") { identity.name = name }
        if let value = mapping["vantage"], let vantage = fleetName(value, "node vantage") { identity.vantage = vantage }
        return identity
    }

    /// `fleet:` with `lease` and `poll`.
    private mutating func fleetSettings(_ node: Node) -> FleetSettings {
        var settings = FleetSettings()
        guard case .mapping(let mapping) = node else {
            report(node, "'fleet' must be a mapping with 'lease' and 'poll'")
            return settings
        }
        checkKeys(mapping, allowed: ["lease", "poll"], in: "fleet")
        if let value = mapping["lease"], let seconds = duration(value, SettingBounds.lease) { settings.lease = seconds }
        if let value = mapping["poll"], let seconds = duration(value, SettingBounds.fleetPoll) { settings.poll = seconds }
        if settings.lease < settings.poll * 3 {
            report(mapping["lease"] ?? node, "fleet lease (\(DurationText.text(settings.lease))) must be at least three polls (\(DurationText.text(settings.poll * 3))): leases are renewed every poll")
        }
        return settings
    }

    /// `http:` with `listen` (an address or a list), `bearer_token_file`, `basic_auth_file`, `tls`,
    /// `max_connections`, `idle_timeout`, `allowed_hosts` (a name or a list).
    private mutating func httpSettings(_ node: Node) -> HTTPSettings {
        var settings = HTTPSettings()
        guard case .mapping(let mapping) = node else {
            report(node, "'http' must be a mapping with 'listen' (like \"127.0.0.1:9219\" or a list)")
            return settings
        }
        checkKeys(mapping, allowed: ["listen", "bearer_token_file", "basic_auth_file", "max_connections", "idle_timeout", "tls", "allowed_hosts"],
                  in: "http")
        if let value = mapping["tls"] {
            if case .mapping(let tls) = value, let certificateNode = tls["certificate"], let keyNode = tls["key"] {
                checkKeys(tls, allowed: ["certificate", "key"], in: "http tls")
                let certificate = string(certificateNode, "a PEM certificate chain file").map(absolutePath)
                let key = string(keyNode, "a PEM private key file").map(absolutePath)
                if let certificate, (try? CertificateFile.summaries(path: certificate))?.isEmpty ?? true {
                    report(certificateNode, "http tls certificate \(certificate) cannot be read or holds no certificate")
                }
                if let key, !((try? String(contentsOfFile: key, encoding: .utf8))?.contains("PRIVATE KEY-----") ?? false) {
                    report(keyNode, "http tls key \(key) cannot be read or holds no PEM private key")
                }
                if let certificate, let key { settings.tls = HTTPSettings.TLSFiles(certificate: certificate, key: key) }
            } else {
                report(value, "http tls needs 'certificate' and 'key' (PEM files)")
            }
        }
        let addresses: [Node] = switch mapping["listen"] {
        case .sequence(let sequence)?: Array(sequence)
        case let value?: [value]
        case nil: []
        }
        if mapping["listen"] == nil { report(node, "http: 'listen' is required (like \"127.0.0.1:9219\")") }
        for value in addresses {
            guard let text = string(value, "an address like 127.0.0.1:9219 or [::1]:9219") else { continue }
            guard let listen = HTTPSettings.Listen.parse(text) else {
                report(value, "http listen '\(text)' is not HOST:PORT, [IPV6]:PORT or :PORT (a port from 0 to 65535)")
                continue
            }
            if settings.listen.contains(listen) { report(value, "http listen \(text) is given twice") }
            settings.listen.append(listen)
        }
        if let value = mapping["bearer_token_file"], let path = string(value, "a file path").map(absolutePath) {
            let token = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            if token == nil {
                report(value, "bearer_token_file \(path) cannot be read")
            } else if token!.isEmpty || token!.contains(where: \.isWhitespace) {
                report(value, "bearer_token_file \(path) must hold one token (no spaces)")
            }
            settings.bearerTokenFile = path
        }
        if let value = mapping["basic_auth_file"], let path = string(value, "an htpasswd file path").map(absolutePath) {
            do {
                _ = try AccessCredentials.users(htpasswd: String(contentsOfFile: path, encoding: .utf8), file: path)
            } catch let error as AccessFileError {
                report(value, "basic_auth_file \(error)")
            } catch {
                report(value, "basic_auth_file \(path) cannot be read")
            }
            settings.basicAuthFile = path
        }
        if let value = mapping["max_connections"],
           let count = integer(value, in: Int(SettingBounds.httpConnections.range.lowerBound)...Int(SettingBounds.httpConnections.range.upperBound)) {
            settings.maxConnections = count
        }
        if let value = mapping["idle_timeout"], let seconds = duration(value, SettingBounds.httpIdleTimeout) { settings.idleTimeout = seconds }
        if let value = mapping["allowed_hosts"] {
            let names: [Node] = if case .sequence(let sequence) = value { Array(sequence) } else { [value] }
            if names.isEmpty { report(value, "http allowed_hosts names no host (leave it out, or list names like dashboard.example.net)") }
            for node in names {
                guard let name = string(node, "a host name like dashboard.example.net") else { continue }
                guard HTTPSettings.isAllowedHost(name) else {
                    report(node, "http allowed_hosts '\(name)' is not a host name or IP address (no port, scheme, path or '*')")
                    continue
                }
                settings.allowedHosts.append(name)
            }
        }
        return settings
    }

    /// `database: {postgres: {host, port, database, user, password_file, sslmode, ca_file, pool_size,
    /// statement_timeout}}` as the `postgres://` URL it stands for (validated the same way).
    private mutating func postgresBlock(_ node: Node, _ block: Node.Mapping) -> String? {
        checkKeys(block, allowed: ["postgres"], in: "database")
        guard let inner = block["postgres"], case .mapping(let mapping) = inner else {
            report(node, "database: give a file path, a postgres:// URL, or a 'postgres:' block with host, port, database, user, password_file, sslmode, ca_file, pool_size")
            return nil
        }
        checkKeys(mapping, allowed: Self.postgresKeys, in: "database.postgres")
        guard let hostNode = mapping["host"], let host = string(hostNode, "a host name or address") else {
            report(inner, "database.postgres needs a 'host'")
            return nil
        }
        guard let databaseNode = mapping["database"], let database = string(databaseNode, "a database name") else {
            report(inner, "database.postgres needs a 'database'")
            return nil
        }
        var components = URLComponents()
        components.scheme = "postgres"
        components.host = host.contains(":") ? "[\(host)]" : host
        if let value = mapping["port"], let port = integer(value, in: SettingBounds.port.range) { components.port = port }
        if let value = mapping["user"], let user = string(value, "a user name") { components.user = user }
        components.path = "/" + database
        var query: [URLQueryItem] = []
        if let value = mapping["password_file"], let path = string(value, "a file path") {
            query.append(URLQueryItem(name: "password_file", value: absolutePath(path)))
        }
        if let value = mapping["sslmode"], let mode = string(value, "an sslmode") { query.append(URLQueryItem(name: "sslmode", value: mode)) }
        if let value = mapping["ca_file"], let path = certificateFile(value) { query.append(URLQueryItem(name: "sslrootcert", value: path)) }
        if let value = mapping["pool_size"], let size = integer(value, in: 1...64) { query.append(URLQueryItem(name: "pool_size", value: String(size))) }
        if let value = mapping["statement_timeout"], let seconds = duration(value, minimum: 0.1) {
            query.append(URLQueryItem(name: "statement_timeout", value: String(seconds)))
        }
        components.queryItems = query.isEmpty ? nil : query
        guard let url = components.string else {
            report(inner, "database.postgres: these values do not make a postgres:// URL")
            return nil
        }
        do {
            _ = try DatabaseLocation.parse(url)
        } catch {
            report(inner, error.description)
            return nil
        }
        return url
    }

    /// `pins:` in AFNetworking form (mode, pins, flags) or Apple's (leaf_identities, ca_identities).
    private mutating func pins(_ node: Node) -> PinPolicy? {
        guard case .mapping(let mapping) = node else {
            report(node, "pins must be a mapping: mode, pins, allow_invalid_certificates, validates_domain_name (AFNetworking) or leaf_identities, ca_identities (NSPinnedDomains)")
            return nil
        }
        if let dropped = mapping.first(where: { $0.key.scalar?.string == "validates_certificate_chain" })?.key {
            report(dropped, Self.validatesCertificateChainRemoved)
        }
        checkKeys(mapping.filter { $0.key.scalar?.string != "validates_certificate_chain" }, allowed: Self.pinKeys, in: "pins")
        var policy = PinPolicy()
        var explicitMode: PinMode?
        if let modeNode = mapping["mode"] { explicitMode = choice(modeNode, "mode", expected: "a pinning mode") }
        if let flag = mapping["allow_invalid_certificates"] { policy.allowInvalidCertificates = boolean(flag) ?? false }
        if let flag = mapping["validates_domain_name"] { policy.validatesDomainName = boolean(flag) ?? true }
        if let list = mapping["pins"] {
            (policy.pins, policy.pinnedCertificates) = pinValues(list, mode: explicitMode)
            if explicitMode == nil {
                let allSPKI = policy.pins.allSatisfy { if case .spki = $0 { true } else { false } }
                explicitMode = policy.pins.isEmpty ? PinMode.none : allSPKI ? .publicKey : .certificate
            }
        }
        policy.mode = explicitMode ?? .none
        for (key, keyPath) in [("leaf_identities", \PinPolicy.leafIdentities), ("ca_identities", \PinPolicy.caIdentities)] {
            guard let list = mapping[key] else { continue }
            guard case .sequence(let sequence) = list, !sequence.isEmpty else {
                report(list, "\(key) must be a non-empty list of SPKI pins (base64 SHA-256): an empty list pins nothing")
                continue
            }
            policy[keyPath: keyPath] = sequence.compactMap { entry in
                guard let text = string(entry, "an SPKI pin"), case .spki(let value)? = PinValue.parse(text) else {
                    report(entry, "\(key) entries must be SPKI pins: 44 characters of base64 (optionally 'sha256/...')")
                    return nil
                }
                return value
            }
        }
        for problem in policy.problems { report(node, "pins: \(problem)") }
        for warning in policy.warnings { warnings.append(ConfigurationError(file: file, line: node.mark?.line, message: "pins: \(warning)")) }
        return policy.problems.isEmpty ? policy : nil
    }

    /// Pin values: pin strings, or `{file: cert.pem}` (PEM, DER .cer/.crt; every certificate in the file).
    /// The pin values, and the DER of the certificates given as files in certificate mode (an app
    /// bundles the pinned certificates: AFNetworking anchors on them even when the server does not send them).
    private mutating func pinValues(_ node: Node, mode: PinMode?) -> ([PinValue], [Data]) {
        guard case .sequence(let sequence) = node else {
            report(node, "pins must be a list of 'sha256/BASE64=' SPKI pins, SHA-256 hex fingerprints or {file: PATH}")
            return ([], [])
        }
        var values: [PinValue] = []
        var certificates: [Data] = []
        for entry in sequence {
            switch entry {
            case .scalar(let scalar):
                if let value = PinValue.parse(scalar.string) {
                    values.append(value)
                } else {
                    report(entry, "'\(scalar.string)' is not a pin: expected 'sha256/' + 44 base64 characters, or a 64-digit SHA-256 hex fingerprint (colons allowed)")
                }
            case .mapping(let mapping):
                checkKeys(mapping, allowed: ["file"], in: "a pin")
                guard let fileNode = mapping["file"], let path = string(fileNode, "a certificate file") else { continue }
                let absolute = absolutePath(path)
                do {
                    for certificate in try CertificateFile.summaries(path: absolute) {
                        values.append(mode == .certificate ? .certificate(certificate.sha256Fingerprint) : .spki(certificate.spkiSHA256))
                        if mode == .certificate { certificates.append(certificate.der) }
                    }
                } catch {
                    report(fileNode, "cannot read a certificate from \(absolute): \(error)")
                }
            default:
                report(entry, "a pin must be a string or {file: PATH}")
            }
        }
        return (values, certificates)
    }

    private mutating func alerts(_ node: Node) -> AlertConfiguration {
        var configuration = AlertConfiguration()
        guard case .mapping(let mapping) = node else {
            report(node, "alerts must be a mapping: unreachable_after, expiry_thresholds, first_scan, sinks")
            return configuration
        }
        checkKeys(mapping, allowed: Self.alertKeys, in: "alerts")
        if let value = mapping["unreachable_after"], let count = integer(value, in: 1...10_000) {
            configuration.rules.unreachableAfter = count
        }
        if let value = mapping["first_scan"], let enabled = boolean(value) {
            configuration.rules.alertOnFirstScan = enabled
        }
        if let value = mapping["expiry_thresholds"] {
            if case .sequence(let sequence) = value, !sequence.isEmpty {
                configuration.rules.expiryThresholds = sequence.compactMap { integer($0, in: 0...3650) }
            } else {
                report(value, "expiry_thresholds must be a list of days, e.g. [30, 14, 7, 1]")
            }
        }
        if let value = mapping["sinks"] {
            guard case .sequence(let sequence) = value else {
                report(value, "sinks must be a list")
                return configuration
            }
            configuration.sinks = []
            for (index, entry) in sequence.enumerated() {
                guard let sink = sink(entry, index: index) else { continue }
                if configuration.sinks.contains(where: { $0.name == sink.name }) {
                    report(entry, "two sinks are named '\(sink.name)'; give one a distinct 'name'")
                } else {
                    configuration.sinks.append(sink)
                }
            }
        }
        return configuration
    }

    /// `reports:`: a list of scheduled reports.
    /// `alertOnly`: sinks that take alerts and not reports (Alertmanager).
    private mutating func reports(_ node: Node, sinks: [String], database: String, alertOnly: Set<String> = []) -> [ReportSchedule] {
        guard case .sequence(let sequence) = node else {
            report(node, "reports must be a list of scheduled reports, each with a 'schedule' (daily or weekly)")
            return []
        }
        var schedules: [ReportSchedule] = []
        for entry in sequence {
            guard case .mapping(let mapping) = entry else {
                report(entry, "a report must be a mapping with a 'schedule' (daily or weekly)")
                continue
            }
            checkKeys(mapping, allowed: Self.reportKeys, in: "a report")
            guard let scheduleNode = mapping["schedule"], let text = string(scheduleNode, "daily or weekly") else {
                report(entry, "a report needs a 'schedule': daily or weekly")
                continue
            }
            guard let frequency = ReportSchedule.Frequency(rawValue: text) else {
                report(scheduleNode, "schedule '\(text)' is not one of daily, weekly")
                continue
            }
            let name = mapping["name"].flatMap { string($0, "a report name") } ?? frequency.rawValue
            if name.contains("/") || name.hasPrefix(".") {
                report(mapping["name"] ?? entry, "a report name names files: no '/' and no leading '.'")
                continue
            }
            let directory = mapping["directory"].flatMap { string($0, "a directory") } ?? "reports"
            var schedule = ReportSchedule(
                name: name, frequency: frequency,
                directory: directory.hasPrefix("/") ? directory
                    : URL(fileURLWithPath: database).deletingLastPathComponent().appendingPathComponent(directory).path)
            if let atNode = mapping["at"], let text = string(atNode, "a time of day") {
                if let seconds = Self.timeOfDay(text) { schedule.timeOfDay = seconds } else {
                    report(atNode, "at must be a time of day, HH:MM or HH:MM:SS (24-hour), not '\(text)'")
                }
            }
            if let dayNode = mapping["day"], let text = string(dayNode, "a day of the week") {
                let days = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
                if let index = days.firstIndex(of: text.lowercased()) { schedule.weekday = index + 1 } else {
                    report(dayNode, "day must be one of \(days.joined(separator: ", "))")
                }
                if frequency == .daily { report(dayNode, "'day' applies to weekly reports only") }
            }
            if let zoneNode = mapping["timezone"], let text = string(zoneNode, "a time zone") {
                if let zone = TimeZone(identifier: text) { schedule.timeZone = zone } else {
                    report(zoneNode, "'\(text)' is not a time zone (an IANA name like UTC or Europe/Paris)")
                }
            }
            if let sinceNode = mapping["since"], let value = duration(sinceNode, SettingBounds.reportPeriod) { schedule.since = value }
            if let value = mapping["expiring_within"], let seconds = duration(value, SettingBounds.expiringWithin) {
                schedule.expiringWithinDays = Int(seconds / 86_400)
            }
            if let keepNode = mapping["keep"], let value = integer(keepNode, in: 0...100_000) { schedule.keep = value }
            if let policyNode = mapping["policy"], let policy: CompliancePolicy = choice(policyNode, "policy", expected: "a policy") {
                schedule.policy = policy
            }
            if let formatsNode = mapping["formats"] {
                let texts: [String]
                if case .sequence(let list) = formatsNode {
                    texts = list.compactMap { string($0, "a format") }
                } else {
                    texts = string(formatsNode, "a format or a list of formats").map { [$0] } ?? []
                }
                let formats = texts.compactMap(ReportFormat.init(rawValue:))
                if formats.count != texts.count || formats.isEmpty {
                    report(formatsNode, "formats must be a non-empty list of \(ReportFormat.allCases.map(\.rawValue).joined(separator: ", "))")
                } else {
                    schedule.formats = formats.enumerated().filter { !formats[..<$0.offset].contains($0.element) }.map(\.element)
                }
            }
            if let sinksNode = mapping["sinks"] {
                if case .sequence(let list) = sinksNode {
                    for item in list {
                        guard let text = string(item, "a sink name") else { continue }
                        if alertOnly.contains(text) {
                            report(item, "sink '\(text)' is an Alertmanager sink: it takes alerts, not reports")
                        } else if sinks.contains(text) { schedule.sinks.append(text) } else {
                            report(item, "no sink named '\(text)' in alerts.sinks (\(sinks.isEmpty ? "none defined" : sinks.joined(separator: ", ")))")
                        }
                    }
                } else {
                    report(sinksNode, "sinks must be a list of sink names from alerts.sinks")
                }
            }
            if schedules.contains(where: { $0.name == schedule.name }) {
                report(entry, "two reports are named '\(schedule.name)'; give one a distinct 'name'")
            } else {
                schedules.append(schedule)
            }
        }
        return schedules
    }

    /// `06:00` or `06:00:30`: seconds after midnight.
    static func timeOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
        guard (2...3).contains(parts.count), parts.allSatisfy({ $0 != nil }) else { return nil }
        let hour = parts[0]!, minute = parts[1]!, second = parts.count == 3 ? parts[2]! : 0
        guard (0..<24).contains(hour), (0..<60).contains(minute), (0..<60).contains(second) else { return nil }
        return hour * 3600 + minute * 60 + second
    }

    private mutating func sink(_ node: Node, index: Int) -> SinkConfiguration? {
        guard case .mapping(let mapping) = node else {
            report(node, "a sink must be a mapping with a 'type' (log, webhook, command, alertmanager)")
            return nil
        }
        checkKeys(mapping, allowed: Self.sinkKeys, in: "a sink")
        guard let typeNode = mapping["type"], let type = string(typeNode, "a sink type") else {
            report(node, "a sink needs a 'type': log, webhook, command or alertmanager")
            return nil
        }
        let timeout = mapping["timeout"].flatMap { duration($0, SettingBounds.sinkTimeout) } ?? SettingBounds.sinkTimeout.defaultValue
        if let timeoutNode = mapping["timeout"], timeout > ServiceConfiguration.defaultShutdownGrace {
            // README, "Stopping": deliveries do not hold up a stop beyond the grace.
            warnings.append(ConfigurationError(file: file, line: timeoutNode.mark?.line, message: """
                sink timeout \(Int(timeout)) s is longer than serve's --shutdown-grace (\(Int(ServiceConfiguration.defaultShutdownGrace)) s by \
                default, within the unit's TimeoutStopSec=30): a delivery still running at a stop is abandoned at the grace \
                and sent again after the restart
                """))
        }
        var minimum = AlertSeverity.info
        if let severityNode = mapping["min_severity"], let text = string(severityNode, "a severity") {
            if let severity = AlertSeverity(rawValue: text) {
                minimum = severity
            } else {
                report(severityNode, "min_severity must be one of \(AlertSeverity.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        let kind: SinkConfiguration.Kind
        switch type {
        case "log":
            kind = .log
        case "webhook":
            guard let url = httpURL(mapping["url"]) else {
                report(node, "a webhook sink needs a 'url' (http:// or https://)")
                return nil
            }
            let caFile = mapping["ca_file"].flatMap { certificateFile($0) }
            kind = .webhook(url: url, secret: mapping["secret"].flatMap { string($0, "a secret") }, timeout: timeout, caFile: caFile)
        case "command":
            guard let argvNode = mapping["argv"], case .sequence(let sequence) = argvNode, !sequence.isEmpty else {
                report(node, "a command sink needs 'argv': a list, program first (run without a shell)")
                return nil
            }
            kind = .command(argv: sequence.compactMap { string($0, "an argument") }, timeout: timeout)
        case "alertmanager":
            guard let url = httpURL(mapping["url"]) else {
                report(node, "an alertmanager sink needs a 'url': Alertmanager's base address, like http://127.0.0.1:9093")
                return nil
            }
            if mapping["secret"] != nil { report(mapping["secret"]!, "an alertmanager sink takes no 'secret' (Alertmanager does not check signatures)") }
            kind = .alertmanager(url: url, timeout: timeout, caFile: mapping["ca_file"].flatMap { certificateFile($0) })
        default:
            report(typeNode, "sink type '\(type)' is not one of log, webhook, command, alertmanager")
            return nil
        }
        let name = mapping["name"].flatMap { string($0, "a sink name") } ?? (index == 0 ? type : "\(type)-\(index + 1)")
        return SinkConfiguration(name: name, kind: kind, minimumSeverity: minimum)
    }

    /// A sink's `url`: an http:// or https:// URL with a host (nil when absent or not one).
    private mutating func httpURL(_ node: Node?) -> URL? {
        guard let node, let text = string(node, "a URL"), let url = URL(string: text),
              ["http", "https"].contains(url.scheme ?? ""), url.host != nil else { return nil }
        return url
    }

    private mutating func boolean(_ node: Node) -> Bool? {
        guard case .scalar(let scalar) = node else {
            report(node, "expected true or false")
            return nil
        }
        switch scalar.string.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            report(node, "expected true or false, not '\(scalar.string)'")
            return nil
        }
    }

    private mutating func addresses(_ node: Node) -> AddressSetting? {
        switch node {
        case .scalar(let scalar):
            switch scalar.string {
            case "all": return .all
            case "ipv4": return .ipv4
            case "ipv6": return .ipv6
            default:
                report(node, "addresses must be all, ipv4, ipv6 or a list of IP addresses, not '\(scalar.string)'")
                return nil
            }
        case .sequence(let sequence):
            var list: [String] = []
            for entry in sequence {
                guard let text = string(entry, "an IP address") else { continue }
                if IPAddress.canonical(text) == nil {
                    report(entry, "'\(text)' is not an IP address")
                } else {
                    list.append(text)
                }
            }
            if list.isEmpty { report(node, "the address list is empty") }
            return list.isEmpty ? nil : .list(list)
        default:
            report(node, "addresses must be all, ipv4, ipv6 or a list of IP addresses")
            return nil
        }
    }

    /// `trust: system | apple | {store: system | apple | PATH} | {ca_file: PATH}`.
    private mutating func trust(_ node: Node) -> TrustSetting? {
        let expected = "trust must be 'system', 'apple', or a mapping with 'store' (system, apple or a PEM file) or 'ca_file' (your own anchors)"
        switch node {
        case .scalar(let scalar) where scalar.string == "system": return .system
        case .scalar(let scalar) where scalar.string == "apple": return .apple
        case .mapping(let mapping):
            checkKeys(mapping, allowed: ["store", "ca_file"], in: "trust")
            if mapping["store"] != nil, mapping["ca_file"] != nil {
                report(node, "trust takes 'store' or 'ca_file', not both")
                return nil
            }
            if let storeNode = mapping["store"] {
                if case .scalar(let scalar) = storeNode, scalar.string == "system" { return .system }
                if case .scalar(let scalar) = storeNode, scalar.string == "apple" { return .apple }
                return certificateFile(storeNode).map { .file($0) }
            }
            guard let fileNode = mapping["ca_file"], let path = certificateFile(fileNode) else {
                report(node, expected)
                return nil
            }
            return .caFile(path)
        default:
            report(node, expected)
            return nil
        }
    }

    /// `ct: {log_list: FILE}`: the CT log list SCTs are verified against, read now so a bad file is reported here.
    private mutating func certificateTransparency(_ node: Node) -> String? {
        guard case .mapping(let mapping) = node else {
            report(node, "'ct' must be a mapping with 'log_list' (a CT log list file in the v3 JSON schema)")
            return nil
        }
        checkKeys(mapping, allowed: ["log_list"], in: "ct")
        guard let listNode = mapping["log_list"], let path = string(listNode, "a file path").map(absolutePath) else { return nil }
        do {
            _ = try CTLogList.load(path: path)
        } catch {
            report(listNode, "\(error)")
            return nil
        }
        return path
    }

    /// A path from the file, relative ones taken from the configuration's directory.
    private func absolutePath(_ path: String) -> String {
        path.hasPrefix("/") ? path : URL(fileURLWithPath: baseDirectory).appendingPathComponent(path).path
    }

    /// A PEM file's absolute path; reported (and still returned) when it cannot be read.
    /// A `ca_file`'s absolute path; reported (and still returned) when it cannot be read or holds
    /// no certificate, so that a broken file stops the configuration, not a scan or a delivery.
    private mutating func certificateFile(_ node: Node) -> String? {
        guard let path = string(node, "a PEM file path").map(absolutePath) else { return nil }
        if !FileManager.default.isReadableFile(atPath: path) {
            report(node, "ca_file \(path) cannot be read")
        } else if (try? CertificateFile.summaries(path: path))?.isEmpty ?? true {
            report(node, "ca_file \(path) holds no certificate (PEM or DER)")
        }
        return path
    }

    // MARK: - Scalars

    private mutating func string(_ node: Node, _ expected: String) -> String? {
        guard case .scalar(let scalar) = node, !scalar.string.isEmpty else {
            report(node, "expected \(expected)")
            return nil
        }
        return scalar.string
    }

    /// One of an enumeration's names; another is reported with the names allowed.
    private mutating func choice<Value: RawRepresentable & CaseIterable>(_ node: Node, _ key: String, expected: String) -> Value?
    where Value.RawValue == String {
        guard let text = string(node, expected) else { return nil }
        guard let value = Value(rawValue: text) else {
            report(node, "\(key) '\(text)' is not one of \(Value.allCases.map(\.rawValue).joined(separator: ", "))")
            return nil
        }
        return value
    }

    private mutating func integer(_ node: Node, in range: ClosedRange<Int>) -> Int? {
        guard case .scalar(let scalar) = node, let value = Int(scalar.string), range.contains(value) else {
            report(node, "expected a whole number from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return value
    }

    /// `30`, `30s`, `5m`, `2h`, `7d` (or `500ms`): seconds.
    /// A duration within `bound`'s range.
    private mutating func duration(_ node: Node, _ bound: SettingBounds.Bound<Double>) -> Double? {
        guard let seconds = duration(node, minimum: bound.range.lowerBound) else { return nil }
        guard seconds <= bound.range.upperBound else {
            report(node, "expected a duration \(bound.described)")
            return nil
        }
        return seconds
    }

    private mutating func duration(_ node: Node, minimum: Double) -> Double? {
        guard case .scalar(let scalar) = node, let seconds = DurationText.seconds(scalar.string) else {
            report(node, "expected a duration like 30s, 5m, 2h or 7d")
            return nil
        }
        guard seconds >= minimum else {
            report(node, "expected a duration of at least \(minimum < 1 ? "\(Int(minimum * 1000))ms" : "\(Int(minimum))s")")
            return nil
        }
        return seconds
    }

    // MARK: - Errors

    private mutating func checkKeys(_ mapping: some Sequence<(key: Node, value: Node)>, allowed: [String], in place: String) {
        for (key, _) in mapping {
            let name = key.scalar?.string ?? "?"
            guard !allowed.contains(name) else { continue }
            var message = "unknown key '\(name)' in \(place)"
            if let suggestion = allowed.min(by: { Self.distance($0, name) < Self.distance($1, name) }),
               Self.distance(suggestion, name) <= 2 {
                message += " (did you mean '\(suggestion)'?)"
            }
            report(key, message + "; expected one of: \(allowed.joined(separator: ", "))")
        }
    }

    private mutating func report(_ node: Node?, _ message: String) {
        errors.append(ConfigurationError(file: file, line: node?.mark?.line, message: message))
    }

    private func yamlMessage(_ error: YamlError) -> String {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _):
            return "line \(mark.line), column \(mark.column): not valid YAML: \(problem)"
        default:
            return "not valid YAML: \(error)"
        }
    }

    /// Levenshtein distance, for "did you mean".
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
