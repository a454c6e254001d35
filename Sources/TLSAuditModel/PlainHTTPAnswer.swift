/// What a plain `http://` load (`GET /` over TCP, no TLS) got from a server: what `app audit`
/// judges a host the app loads over HTTP on, and which NSURLError the app would log.
public enum PlainHTTPAnswer: Sendable, Equatable {
    /// An HTTP response head with this status.
    case status(Int)
    /// No TCP connection (refused, unreachable, timed out): the category and the probe's message.
    case noConnection(ProbeFailureCategory, String)
    /// Connected, then closed without an answer (or within the start of an HTTP response): a TLS
    /// server given an HTTP request (OpenSSL closes without an alert).
    case closed
    /// Connected, and nothing came before the timeout.
    case timedOut
    /// Connected, and the answer is not HTTP: its first bytes, quoted (a TLS alert, garbage).
    case notHTTP(String)
}
