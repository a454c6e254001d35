import Foundation
public import TLSAuditCore
public import TLSAuditMonitoring
public import TLSAuditStore
import Yams

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
    /// The targets with their groups, as `status` and the API show them; nil when the file names
    /// none (a fleet node's: its targets come from `fleet apply`, and every stored one is shown).
    public var configuredTargets: ConfiguredTargets? {
        targets.isEmpty ? nil : ConfiguredTargets(targets.map { ($0.key, $0.group) })
    }
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
    /// What `/probe` scans a target with: the `defaults:` without `module=`, else the group it names.
    public var probeDefaults = ProbeModule(name: nil, settings: ConfigurationParser.Settings())
    public var probeModules: [ProbeModule] = []
    /// The trust inputs' sources and refresh (`ct:`, `distrust:`, `apple_roots:`); no source: the shipped snapshots.
    public var trustInputs = TrustInputSettings()
    /// Following CT logs for the pin forecast (`ct: {follow: true}`); nil: not followed.
    public var ctFollow: CTFollowSettings?
    /// `distrust: {list: FILE, vendor: apple|mozilla|chrome}`: date-bounded distrust (nil: the shipped table, by each target's policy).
    public var distrust: DistrustSetting?
    /// Where results wait when the store cannot take them at a stop (the state directory).
    public var spillDirectory: String = ServiceConfiguration.environmentStateDirectory ?? FileManager.default.currentDirectoryPath
    /// `spill_directory:`: where unstored results go first when the file beside the database cannot
    /// be written (a full disk); best on another file system.
    public var spillFallbackDirectory: String?

    /// The database `database` names, read by the store backend that claims it (`StoreBackends`).
    public func location() throws(StoreError) -> any StoreLocation { try StoreBackends.location(database) }

    /// The targets as the fleet's work queue knows them.
    public var fleetTargets: [FleetTarget] {
        targets.map { FleetTarget(key: $0.key, host: $0.host, interval: $0.interval, vantages: $0.vantages) }
    }

    /// The base name of the files results wait in across a restart: beside a SQLite file, or
    /// `tlsaudit-postgres` in the state directory for PostgreSQL.
    public var spillBase: String {
        (try? location())?.spillBase(stateDirectory: spillDirectory) ?? database
    }

    /// Every place unstored results may wait, in order: beside the database, `spill_directory`,
    /// `$RUNTIME_DIRECTORY` (systemd's RuntimeDirectory=), the state directory.
    public var spillLocations: SpillLocations {
        let runtime = ProcessInfo.processInfo.environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first.map(String.init)
        return SpillLocations(base: spillBase, fallbacks: [spillFallbackDirectory, runtime, spillDirectory].compactMap { $0 })
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
    /// `listenerTLS`: whether `http: tls:` can be served (this build's, unless a test asks as another build would).
    public static func parse(yaml: String, file: String, baseDirectory: String,
                             listenerTLS: Bool = ListenerTLS.available) throws(ConfigurationErrors) -> ServiceConfiguration {
        var parser = ConfigurationParser(file: file, baseDirectory: baseDirectory)
        parser.listenerTLS = listenerTLS
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
/// is an error (a typo must not silently disable a check). The top level is read here; each
/// section, with its keys, in the file named for it (Configuration+Targets.swift, +Alerts,
/// +Reports, +HTTP, +Fleet, +Database, +Pins, +App), the values they share in +Values.
struct ConfigurationParser {
    let file: String
    let baseDirectory: String
    var errors: [ConfigurationError] = []
    var warnings: [ConfigurationError] = []
    /// The line of each target parsed so far, in order (for duplicate reports).
    var targetLines: [Int?] = []
    /// Each named group's settings, in file order (`/probe`'s modules).
    var modules: [ProbeModule] = []
    /// Whether the build serves `http: tls:` (the `ListenerTLS` trait).
    var listenerTLS = ListenerTLS.available

    init(file: String, baseDirectory: String) {
        self.file = file
        self.baseDirectory = baseDirectory
    }

    static let topLevelKeys = ["database", "concurrency", "per_host_concurrency", "retention", "max_backoff",
                               "log_level", "alerts", "reports", "defaults", "groups", "targets", "node", "fleet", "http", "ct", "distrust", "apple_roots", "spill_directory"]
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

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
            if StoreBackends.urlScheme(of: path) != nil { // a URL: its backend reads it
                do {
                    _ = try StoreBackends.location(path)
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
        if let node = mapping["spill_directory"], let path = string(node, "a directory path") {
            let directory = path.hasPrefix("/") ? path
                : URL(fileURLWithPath: ServiceConfiguration.stateDirectory(forConfigurationIn: baseDirectory)).appendingPathComponent(path).path
            var isDirectory: ObjCBool = false
            if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) || !isDirectory.boolValue {
                report(node, "spill_directory \(directory) is not a directory")
            } else if access(directory, W_OK) != 0 {
                report(node, "spill_directory \(directory) is not writable by this user")
            }
            configuration.spillFallbackDirectory = directory
        }
        if let node = mapping["node"] { configuration.node = nodeIdentity(node) }
        if let node = mapping["fleet"] { configuration.fleet = fleetSettings(node) }
        if let node = mapping["http"] { configuration.http = httpSettings(node) }
        if let node = mapping["ct"] {
            configuration.trustInputs.ctLogList = certificateTransparency(node, database: configuration.database)
            configuration.ctFollow = certificateTransparencyFollowing(node)
        }
        if let node = mapping["distrust"] {
            (configuration.distrust, configuration.trustInputs.distrust) = distrust(node, database: configuration.database)
        }
        if let node = mapping["apple_roots"] { configuration.trustInputs.appleRoots = appleRoots(node, database: configuration.database) }
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
            configuration.reports = reports(node, sinks: configuration.alerts.sinks, database: configuration.database)
        }
        var targets: [TargetConfiguration] = []
        if let node = mapping["groups"] {
            targets += groups(node, defaults: defaults)
        }
        if let node = mapping["targets"] {
            targets += targetList(node, inherited: defaults, group: nil)
        }
        // A fleet node's own file may leave the targets to `tlsaudit fleet apply`.
        if mapping["targets"] == nil && mapping["groups"] == nil && !StoreBackends.offersFleet(configuration.database) {
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
        configuration.probeDefaults = ProbeModule(name: nil, settings: defaults)
        configuration.probeModules = modules
        configuration.warnings = warnings
        return configuration
    }
}
