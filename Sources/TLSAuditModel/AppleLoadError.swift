/// The error an app's URLSession load reports for a host it cannot reach, as Xcode's console
/// shows it: the `NSURLErrorDomain` code and, where Apple's logs carry one, the SecureTransport
/// code under `kCFStreamErrorDomainSSL` (`_kCFStreamErrorCodeKey`). docs/apple-rules.md section 7
/// has the table from finding to code with each row's source.
public struct AppleLoadError: Codable, Hashable, Sendable, CustomStringConvertible {
    /// `NSURLErrorDomain` code (`-1202`).
    public var code: Int
    /// Its constant (`NSURLErrorServerCertificateUntrusted`).
    public var name: String
    /// The `kCFStreamErrorDomainSSL` code logged with it (`-9813`), when one is.
    public var sslCode: Int?
    /// Its SecureTransport constant (`errSSLNoRootCert`).
    public var sslName: String?
    /// Where the mapping comes from: a public source, or `not confirmed` where none says it.
    public var source: String

    public init(code: Int, name: String, sslCode: Int? = nil, sslName: String? = nil, source: String) {
        self.code = code
        self.name = name
        self.sslCode = sslCode
        self.sslName = sslName
        self.source = source
    }

    /// `NSURLErrorDomain -1202 NSURLErrorServerCertificateUntrusted (kCFStreamErrorDomainSSL -9813 errSSLNoRootCert)`.
    public var description: String {
        "NSURLErrorDomain \(code) \(name)" + (sslCode.map { " (kCFStreamErrorDomainSSL \($0)\(sslName.map { " \($0)" } ?? ""))" } ?? "")
    }
}
