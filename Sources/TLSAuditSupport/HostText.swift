/// How a host is written before `:port` and in a URL's authority: an IPv6 address in brackets.
public enum HostText {
    /// `host`, in brackets when it is an IPv6 address (`[::1]`): the one kind of host with colons.
    public static func bracketed(_ host: String) -> String {
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    }

    /// `host` without a trailing dot (`example.com.` -> `example.com`): the form a server name is
    /// sent in (RFC 6066) and NSPinnedDomains compares.
    public static func withoutTrailingDot(_ host: String) -> String {
        host.hasSuffix(".") ? String(host.dropLast()) : host
    }

    /// `host:port`, `[v6]:port`.
    public static func withPort(_ host: String, _ port: Int) -> String { "\(bracketed(host)):\(port)" }
}
