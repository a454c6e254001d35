import COpenSSL
import Foundation
import TLSAuditProbe
#if canImport(Glibc)
import Glibc
#endif
public import TLSAuditModel
import TLSAuditSupport

/// How a lab server treats client certificates.
public enum LabClientCertificateMode: Sendable {
    case none
    /// Ask for one, accept the connection without.
    case optional
    /// Ask for one signed by this CA and fail the handshake without it.
    case required(trusting: LabCertificate)
}

/// Diffie-Hellman parameters for DHE suites.
public enum LabDHGroup: Sendable {
    /// Chosen by OpenSSL to match the certificate's strength (2048 bits for RSA-2048).
    case automatic
    /// RFC 2409 group 2, 1024 bits: the Logjam-era weak group.
    case weak1024
}

/// What a lab TLS server offers.
public struct LabServerConfiguration: Sendable {
    /// Leaf first, then whatever else the server should send (intermediates, extras, a root).
    public var chain: [LabCertificate]
    public var minVersion: TLSVersion?
    public var maxVersion: TLSVersion?
    /// TLS 1.2-and-below cipher list in OpenSSL syntax; `@SECLEVEL=0` is appended.
    public var cipherList: String?
    /// TLS 1.3 suites in OpenSSL syntax.
    public var tls13Suites: String?
    public var groups: String?
    /// Signature algorithms the server signs with, OpenSSL syntax (`RSA+SHA1`).
    public var signatureAlgorithms: String?
    public var dhGroup: LabDHGroup?
    public var clientCertificates: LabClientCertificateMode
    /// Prefer the server's cipher order over the client's.
    public var serverPreference: Bool
    /// `127.0.0.1` or `::1`.
    public var bindAddress: String
    /// 0 for an ephemeral port.
    public var port: Int
    /// A plaintext dialogue run on each connection before the TLS handshake (a STARTTLS server);
    /// it returns false to close the connection without TLS.
    public var plaintextDialogue: (@Sendable (LabConnection) -> Bool)?

    public init(chain: [LabCertificate], minVersion: TLSVersion? = nil, maxVersion: TLSVersion? = nil,
                cipherList: String? = nil, tls13Suites: String? = nil, groups: String? = nil,
                signatureAlgorithms: String? = nil, dhGroup: LabDHGroup? = nil, clientCertificates: LabClientCertificateMode = .none,
                serverPreference: Bool = true, bindAddress: String = "127.0.0.1", port: Int = 0) {
        self.chain = chain
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.cipherList = cipherList
        self.tls13Suites = tls13Suites
        self.groups = groups
        self.signatureAlgorithms = signatureAlgorithms
        self.dhGroup = dhGroup
        self.clientCertificates = clientCertificates
        self.serverPreference = serverPreference
        self.bindAddress = bindAddress
        self.port = port
    }
}

/// An in-process OpenSSL TLS server on a loopback ephemeral port, for tests, the demo and
/// benchmarks. Each connection is served on its own thread; the server stops on `stop()` or deinit.
public final class LabTLSServer: Sendable {
    public let port: Int
    public let address: String
    private let listener: LabListener
    private let context: ServerContext

    public init(_ configuration: LabServerConfiguration) throws {
        ignoreSIGPIPE
        let context = try ServerContext(configuration)
        self.context = context
        address = configuration.bindAddress
        listener = try LabListener(address: configuration.bindAddress, port: configuration.port) { fd in
            Self.serve(fd, context: context, dialogue: configuration.plaintextDialogue)
        }
        port = listener.port
    }

    /// `127.0.0.1:PORT` / `[::1]:PORT`.
    public var endpoint: String { HostText.withPort(address, port) }

    public func stop() { listener.stop() }

    private static func serve(_ fd: Int32, context: ServerContext, dialogue: (@Sendable (LabConnection) -> Bool)?) {
        defer { close(fd) }
        LabListener.setTimeouts(fd, seconds: 5)
        if let dialogue, !dialogue(LabConnection(fd)) { return }
        guard let ssl = SSL_new(context.pointer) else { return }
        defer { SSL_free(ssl) }
        SSL_set_fd(ssl, fd)
        guard SSL_accept(ssl) == 1 else {
            ERR_clear_error()
            return
        }
        // Answer one request line with a tiny HTTP response, then close cleanly.
        var buffer = [UInt8](repeating: 0, count: 4096)
        let received = SSL_read(ssl, &buffer, Int32(buffer.count))
        if received > 0 {
            let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n".utf8)
            SSL_write(ssl, response, Int32(response.count))
        }
        SSL_shutdown(ssl)
        ERR_clear_error()
    }
}

/// The server-side `SSL_CTX` of a lab server. Immutable after init.
final class ServerContext: @unchecked Sendable {
    // @unchecked: configured once in init, then only used for SSL_new.
    let pointer: OpaquePointer

    static let weakDHParameters = """
        -----BEGIN DH PARAMETERS-----
        MIGHAoGBAP//////////yQ/aoiFowjTExmKLgNwc0SkCTgiKZ8x0Agu+pjsTmyJR
        Sgh5jjQE3e+VGbPNOkMbMCsKbfJfFDdP4TVtbVHCReSFtXZiXn7G9ExC6aY37WsL
        /1y29Aa37e44a/taiZ+lrp8kEXxLH+ZJKGZR7OZTgf//////////AgEC
        -----END DH PARAMETERS-----
        """

    init(_ configuration: LabServerConfiguration) throws {
        guard let leaf = configuration.chain.first else { throw LabError("a lab server needs a certificate") }
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw OpenSSLFailure("cannot create a server context") }
        pointer = context
        SSL_CTX_set_security_level(context, 0)
        _ = tlsaudit_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))
        if configuration.serverPreference { SSL_CTX_set_options(context, tlsaudit_SSL_OP_CIPHER_SERVER_PREFERENCE) }
        _ = tlsaudit_SSL_CTX_set_min_proto_version(context, configuration.minVersion.map { Int32($0.wireValue) } ?? TLS1_VERSION)
        _ = tlsaudit_SSL_CTX_set_max_proto_version(context, configuration.maxVersion.map { Int32($0.wireValue) } ?? TLS1_3_VERSION)
        let cipherList = (configuration.cipherList ?? "ALL") + ":@SECLEVEL=0"
        guard SSL_CTX_set_cipher_list(context, cipherList) == 1 else { throw OpenSSLFailure("bad cipher list \(cipherList)") }
        if let suites = configuration.tls13Suites, SSL_CTX_set_ciphersuites(context, suites) != 1 {
            throw OpenSSLFailure("bad TLS 1.3 suites \(suites)")
        }
        if let groups = configuration.groups, tlsaudit_SSL_CTX_set1_groups_list(context, groups) != 1 {
            throw OpenSSLFailure("bad groups \(groups)")
        }
        if let signatures = configuration.signatureAlgorithms, tlsaudit_SSL_CTX_set1_sigalgs_list(context, signatures) != 1 {
            throw OpenSSLFailure("bad signature algorithms \(signatures)")
        }
        guard SSL_CTX_use_certificate(context, leaf.certificate.pointer) == 1,
              SSL_CTX_use_PrivateKey(context, leaf.key.pointer) == 1 else {
            throw OpenSSLFailure("cannot use the lab certificate")
        }
        for extra in configuration.chain.dropFirst() {
            // add1 takes its own reference.
            guard SSL_CTX_ctrl(context, SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(extra.certificate.pointer)) == 1 else {
                throw OpenSSLFailure("cannot add a chain certificate")
            }
        }
        switch configuration.dhGroup {
        case .automatic?:
            SSL_CTX_ctrl(context, SSL_CTRL_SET_DH_AUTO, 1, nil)
        case .weak1024?:
            let bytes = Array(Self.weakDHParameters.utf8)
            guard let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) else { throw LabError("out of memory") }
            defer { BIO_free(bio) }
            guard let parameters = PEM_read_bio_Parameters(bio, nil),
                  tlsaudit_SSL_CTX_set0_tmp_dh_pkey(context, parameters) == 1 else {
                throw OpenSSLFailure("cannot load the 1024-bit DH group")
            }
        case nil:
            break
        }
        switch configuration.clientCertificates {
        case .none:
            break
        case .optional:
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, acceptAnyClientCertificate)
        case .required(let authority):
            guard let store = SSL_CTX_get_cert_store(context) else { throw LabError("no certificate store") }
            X509_STORE_add_cert(store, authority.certificate.pointer)
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
        ERR_clear_error()
    }

    deinit { SSL_CTX_free(pointer) }
}

private let acceptAnyClientCertificate: @convention(c) (Int32, OpaquePointer?) -> Int32 = { _, _ in 1 }

