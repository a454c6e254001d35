/// How a host is written before `:port` and in a URL's authority: an IPv6 address in brackets.
public enum HostText {
    /// `host`, in brackets when it is an IPv6 address (`[::1]`): the one kind of host with colons.
    public static func bracketed(_ host: String) -> String {
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    }

    /// `host:port`, `[v6]:port`.
    public static func withPort(_ host: String, _ port: Int) -> String { "\(bracketed(host)):\(port)" }
}
