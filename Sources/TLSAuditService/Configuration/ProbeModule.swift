public import TLSAuditCore

/// The settings `/probe` scans a requested target with: a configuration group's (`module=NAME`) or
/// the `defaults:` (no module), applied to any `HOST[:PORT]` as they would be to a target listed
/// in that group: its policy, trust store, STARTTLS protocol, pins, revocation and checks.
public struct ProbeModule: Sendable, Hashable {
    /// The group's name; nil for the defaults.
    public let name: String?
    let settings: ConfigurationParser.Settings

    init(name: String?, settings: ConfigurationParser.Settings) {
        self.name = name
        self.settings = settings
    }

    /// The target `text` names (`HOST`, `HOST:PORT`, `[IPV6]:PORT`) with the module's settings, keyed
    /// `HOST:PORT`; the port is the module's (or its STARTTLS protocol's) when the text gives none.
    public func target(_ text: String) throws(ScanTarget.ParseError) -> TargetConfiguration {
        guard !text.isEmpty, text.utf8.count <= 260 else { throw ScanTarget.ParseError(description: "a target is HOST[:PORT], up to 260 characters") }
        // Port 0 stands for "not given": the module's port applies.
        let (host, port) = try ScanTarget.splitHostPort(text, defaultPort: 0)
        guard !host.isEmpty, !host.contains("*" as Character) else { throw ScanTarget.ParseError(description: "\(text): not a host name or address") }
        var own = ConfigurationParser.Settings()
        if port != 0 { own.port = port }
        return ConfigurationParser.resolve(host: host, name: nil, settings: settings.overridden(by: own), group: name)
    }
}
