import TLSAuditModel

/// Which `Host` a request may give: the address its connection arrived at (the listen address; for
/// `:PORT`, the machine's address the client dialled), the listen host as configured, `localhost`,
/// or a name in `allowed_hosts`; with or without the listener's port, IPv6 in brackets. A page that
/// rebinds its own name to a loopback address still sends its own name, and is refused.
struct HostRule: Sendable {
    /// Lowercased names and canonical IP addresses.
    let names: Set<String>

    init(listenHost: String, allowed: [String]) {
        names = Set(([listenHost, "localhost"] + allowed).map(Self.normalized))
    }

    /// Whether `authority` (`HOST`, `HOST:PORT`, `[IPV6]` or `[IPV6]:PORT`; nil: no `Host`) names
    /// the listener whose connection's local end is `localAddress` port `localPort`.
    func accepts(_ authority: String?, localAddress: String?, localPort: Int?) -> Bool {
        guard let authority, let (host, port) = try? ScanTarget.splitHostPort(authority, defaultPort: 0),
              port == 0 || port == localPort else { return false }
        let name = Self.normalized(host)
        return names.contains(name) || localAddress.map(Self.normalized) == name
    }

    static func normalized(_ host: String) -> String { IPAddress.canonical(host) ?? host.lowercased() }
}
