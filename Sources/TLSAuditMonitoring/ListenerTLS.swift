import Hummingbird
import HummingbirdCore
#if ListenerTLS
import HummingbirdTLS
import NIOSSL
#endif

/// HTTPS for the listener (`http: tls:`): compiled only with the `ListenerTLS` package trait,
/// since it alone brings swift-nio-ssl and its BoringSSL, about a fifth of a clean build (README,
/// "Build cost"). Without it the listener serves plain HTTP and check-config refuses `http: tls:`.
public enum ListenerTLS {
    /// Whether this build serves HTTPS.
    #if ListenerTLS
    public static let available = true
    #else
    public static let available = false
    #endif

    /// What to do in a build without it.
    public static let howToBuild = "this tlsaudit was built without HTTPS for its listener: build it with "
        + "`swift build -c release --traits ListenerTLS` (the Debian package from scripts/package has it), "
        + "or serve the listener on loopback behind a TLS-terminating proxy"

    /// The listener's server: `http1`, over TLS 1.2 and later with `files` when given.
    static func server(_ http1: HTTPServerBuilder, files: HTTPSettings.TLSFiles?) throws -> HTTPServerBuilder {
        guard let files else { return http1 }
        #if ListenerTLS
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(files.certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: files.key, format: .pem)))
        configuration.minimumTLSVersion = .tlsv12
        return try .tls(http1, tlsConfiguration: configuration)
        #else
        _ = files
        throw ListenerTLSUnavailable()
        #endif
    }
}

/// `http: tls:` in a build without the `ListenerTLS` trait (check-config refuses it first).
public struct ListenerTLSUnavailable: Error, CustomStringConvertible {
    public var description: String { "http tls: " + ListenerTLS.howToBuild }
}
