import COpenSSL
import Foundation
public import TLSAuditModel

/// The anchors a chain is verified against: the system store or the operator's own CA file.
public final class TrustStore: @unchecked Sendable {
    // @unchecked: the X509_STORE is filled in init and only read afterwards; OpenSSL locks
    // its internal lookups, so many threads may verify against it at once.
    let pointer: OpaquePointer
    /// `system` or `ca-file:/path`.
    public let label: String
    /// Accept a path that ends in any certificate of the store, not only a self-signed root
    /// (how AFNetworking's certificate pinning treats pinned certificates as anchors).
    let partialChain: Bool
    /// Paths built against this store, by the presented certificates' fingerprints and the leaf's
    /// index: the candidates depend on nothing else (dates and names are judged apart, and choose
    /// among them), and a fleet presents the same few chains. Builds with no anchored path are not kept (a CA installed in the system
    /// store while the service runs must count at the next scan), nor chains over 32 KB. At most
    /// 256 (some 3 MB), forgotten all at once when full.
    let builtPaths = SleepingLock<[BuiltPathKey: PathCandidates]>([:])

    struct BuiltPathKey: Hashable {
        var fingerprints: [String]
        var leafIndex: Int
        /// Built with `aia_fetch`: may hold fetched intermediates.
        var fetchesMissing: Bool
    }

    /// The system store (`/etc/ssl/certs` on Debian, OpenSSL's default paths).
    public static func system() throws -> TrustStore {
        guard let store = X509_STORE_new() else { throw OpenSSLFailure("cannot allocate a trust store") }
        guard X509_STORE_set_default_paths(store) == 1 else {
            X509_STORE_free(store)
            throw OpenSSLFailure("cannot load the system trust store")
        }
        return TrustStore(pointer: store, label: "system")
    }

    /// Anchors from a PEM file (one or more certificates).
    public init(caFile path: String) throws {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw OpenSSLFailure("cannot read CA file \(path)")
        }
        let certificates = try CertificateFile.load(path: path)
        guard !certificates.isEmpty else { throw OpenSSLFailure("\(path) holds no certificate") }
        guard let store = X509_STORE_new() else { throw OpenSSLFailure("cannot allocate a trust store") }
        for certificate in certificates {
            X509_STORE_add_cert(store, certificate.pointer)
        }
        OpenSSLErrors.clear()
        pointer = store
        label = "ca-file:\(path)"
        partialChain = false
    }

    /// A store holding exactly `anchors`, each trusted on its own (partial chains allowed).
    init(pinnedAnchors anchors: [X509Certificate]) throws {
        guard let store = X509_STORE_new() else { throw OpenSSLFailure("cannot allocate a trust store") }
        for certificate in anchors { X509_STORE_add_cert(store, certificate.pointer) }
        OpenSSLErrors.clear()
        pointer = store
        label = "pinned-certificate"
        partialChain = true
    }

    private init(pointer: OpaquePointer, label: String) {
        self.pointer = pointer
        self.label = label
        partialChain = false
    }

    deinit { X509_STORE_free(pointer) }

    /// The summary of a certificate this store holds (an anchor in a built path); summaries are
    /// kept by DER (`X509Certificate.summary`), so an anchor is summarised once, not once per scan.
    func summary(ofStoreCertificate certificate: OpaquePointer) -> CertificateSummary {
        X509Certificate(borrowing: certificate).summary()
    }
}

/// Reads certificates from PEM or DER files.
public enum CertificateFile {
    /// Every certificate in a PEM file (several allowed) or a single DER certificate.
    /// Files are read up to `InputLimits.certificateFileBytes` and `InputLimits.certificatesPerFile`.
    static func load(path: String) throws -> [X509Certificate] {
        let bytes: [UInt8]
        do { bytes = try InputLimits.read(path, limit: InputLimits.certificateFileBytes, what: "certificate file") } catch {
            throw OpenSSLFailure(error.description)
        }
        return try parse(bytes, name: path)
    }

    static func parse(_ bytes: [UInt8], name: String) throws -> [X509Certificate] {
        if let text = String(bytes: bytes, encoding: .utf8), text.contains("-----BEGIN") {
            guard let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) else { throw OpenSSLFailure("out of memory") }
            defer { BIO_free(bio) }
            var certificates: [X509Certificate] = []
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(X509Certificate(takingOwnershipOf: certificate))
                if certificates.count > InputLimits.certificatesPerFile {
                    OpenSSLErrors.clear()
                    throw OpenSSLFailure("\(name) holds more than \(InputLimits.certificatesPerFile) certificates, the most tlsaudit reads from one file")
                }
            }
            OpenSSLErrors.clear() // The loop ends on a "no start line" error.
            guard !certificates.isEmpty else { throw OpenSSLFailure("\(name): no readable PEM certificate") }
            return certificates
        }
        return [try X509Certificate(der: bytes)]
    }

    /// Summaries of every certificate in a file, in file order.
    public static func summaries(path: String) throws -> [CertificateSummary] {
        try load(path: path).map { $0.summary() }
    }
}
