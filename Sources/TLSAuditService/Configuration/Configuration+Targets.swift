public import TLSAuditCore
import TLSAuditProbe
import Yams
import TLSAuditSupport

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
        policy.trustsAppleRoots ? .apple : .system
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
    /// The client identity presented when the server asks for a certificate (`client_identity:`).
    public var clientCredentials: ClientCredentials?

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
        target.clientCredentials = clientCredentials
        return target
    }
}

/// `targets:`, `groups:` and `defaults:`: the settings a target inherits and how each resolves.
extension ConfigurationParser {
    static let settingKeys = ["port", "sni", "addresses", "interval", "timeout", "policy", "trust", "tags", "pins", "revocation", "aia_fetch",
                              "vantage", "starttls", "checks", "headers_path", "app", "client_identity"]
    static let targetKeys = ["host", "name"] + settingKeys
    static let groupKeys = ["name", "targets"] + settingKeys

    /// Settings a target inherits; every field optional until resolved.
    struct Settings: Sendable, Hashable {
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
        var clientCredentials: ClientCredentials?
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
                     app: other.app ?? app, clientCredentials: other.clientCredentials ?? clientCredentials,
                     portFromDefaults: other.port == nil && portFromDefaults, policyFromDefaults: other.policy == nil && policyFromDefaults)
        }
    }

    mutating func groups(_ node: Node, defaults: Settings) -> [TargetConfiguration] {
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
            if let name {
                if modules.contains(where: { $0.name == name }) {
                    warnings.append(ConfigurationError(file: file, line: entry.mark?.line,
                                                       message: "group name '\(name)' is given twice: /probe?module=\(name) uses the first"))
                } else {
                    modules.append(ProbeModule(name: name, settings: inherited))
                }
            }
            if let list = group["targets"] {
                targets += targetList(list, inherited: inherited, group: name)
            } else {
                report(entry, "group '\(name ?? "?")' has no 'targets'")
            }
        }
        return targets
    }

    mutating func targetList(_ node: Node, inherited: Settings, group: String?) -> [TargetConfiguration] {
        guard case .sequence(let sequence) = node else {
            report(node, "'targets' must be a list of HOST[:PORT] strings or mappings with a 'host'")
            return []
        }
        return sequence.compactMap { target($0, inherited: inherited, group: group) }
    }

    mutating func target(_ node: Node, inherited: Settings, group: String?) -> TargetConfiguration? {
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
        var configured = Self.resolve(host: host, name: name, settings: inherited.overridden(by: own), group: group)
        if let app = configured.app {
            if !configured.policy.isAppTransportSecurity {
                report(node, "target '\(configured.key)': 'app' judges the target as the app's client, under ats-runtime (or ats); policy \(configured.policy.rawValue) cannot apply")
            }
        }
        return configured
    }

    /// A target on `host` named `name` (nil: `HOST:PORT`) with every setting resolved from
    /// `resolved` (defaults, group and the target's own, already merged): the port and policy of
    /// its STARTTLS protocol, its SNI, its trust store. The same for configured targets and for
    /// `/probe`'s targets in a module.
    static func resolve(host: String, name: String?, settings resolved: Settings, group: String?) -> TargetConfiguration {
        let starttlsSetting = resolved.starttls ?? .auto
        var port = resolved.port ?? SettingBounds.port.defaultValue
        if case .named(let named) = starttlsSetting, resolved.port == nil || resolved.portFromDefaults { port = named.defaultPort }
        let starttls = starttlsSetting.use(port: port)
        // `defaults:` name a policy for HTTPS targets: a STARTTLS target takes its own default unless it or its group names one.
        let policy = resolved.policy.flatMap { starttls != nil && resolved.policyFromDefaults ? nil : $0 } ?? CompliancePolicy.default(starttls: starttls)
        let shownHost = HostText.bracketed(host)
        let sni = resolved.sni ?? (IPAddress.canonical(host) == nil ? host : nil)
        var configured = TargetConfiguration(key: name ?? "\(shownHost):\(port)", host: host, port: port, sni: sni,
                                   addresses: resolved.addresses ?? .all, interval: resolved.interval ?? SettingBounds.interval.defaultValue,
                                   timeout: resolved.timeout ?? SettingBounds.timeout.defaultValue,
                                   policy: policy, trust: resolved.trust ?? .default(for: policy),
                                   tags: resolved.tags, group: group,
                                   pins: resolved.pins, revocation: resolved.revocation ?? SettingBounds.revocation,
                                   aiaFetch: resolved.aiaFetch ?? false, vantages: resolved.vantages ?? .any, starttls: starttls,
                                   checks: resolved.checks ?? [], headersPath: resolved.headersPath)
        configured.clientCredentials = resolved.clientCredentials
        if let app = resolved.app {
            configured.app = app
            // The app's tag names the app in status, reports, the API and the metrics.
            if !configured.tags.contains(app.tag) { configured.tags.append(app.tag) }
        }
        return configured
    }

    /// The target settings present in a mapping (defaults, a group or a target).
    mutating func settings(_ mapping: Node.Mapping) -> Settings {
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
        if let node = mapping["client_identity"] { settings.clientCredentials = clientIdentity(node) }
        if let node = mapping["vantage"] { settings.vantages = vantages(node) }
        if let node = mapping["checks"] {
            let names: [Node] = if case .sequence(let sequence) = node { Array(sequence) } else { [node] }
            var checks: Set<OptionalCheck> = []
            for name in names {
                guard let text = string(name, "a check name") else { continue }
                if let check = AddressChecks.named(text) {
                    checks.insert(check.name)
                } else {
                    report(name, "checks: '\(text)' is not a check (\(AddressChecks.names))")
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

    mutating func addresses(_ node: Node) -> AddressSetting? {
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
    mutating func trust(_ node: Node) -> TrustSetting? {
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
}
