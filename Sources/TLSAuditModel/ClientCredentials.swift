/// The client identity presented to servers that ask for a certificate (mutual TLS), as an app
/// answers URLSession's client-certificate challenge: a PEM certificate chain and key, or a PKCS#12
/// file (what an app bundles and opens with `SecPKCS12Import`) and its password.
public struct ClientCredentials: Sendable, Hashable, Codable {
    /// PEM file with the certificate (and its chain).
    public var certificatePath: String?
    /// PEM file with the private key.
    public var keyPath: String?
    /// PKCS#12 (`.p12`/`.pfx`) file with the key, the certificate and optionally its chain.
    public var pkcs12Path: String?
    /// The PKCS#12 file's password (empty when none); never printed.
    public var password: String?

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }

    public init(pkcs12Path: String, password: String?) {
        self.pkcs12Path = pkcs12Path
        self.password = password
    }

    /// The file(s) it names, for messages (never the password).
    public var label: String { pkcs12Path ?? [certificatePath, keyPath].compactMap { $0 }.joined(separator: " + ") }
}
