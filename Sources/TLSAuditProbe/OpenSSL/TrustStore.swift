import COpenSSL
import Foundation
import Synchronization
public import TLSAuditCore

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
    /// Anchored paths built against this store, by the presented certificates' fingerprints and the
    /// leaf's index: the result depends on nothing else (dates and names are judged apart), and a
    /// fleet presents the same few chains. Failed builds are not kept (a CA installed in the system
    /// store while the service runs must count at the next scan), nor chains over 32 KB. At most
    /// 256 (some 3 MB), forgotten all at once when full.
    let builtPaths = Mutex<[BuiltPathKey: PathBuildingResult]>([:])

    struct BuiltPathKey: Hashable {
        var fingerprints: [String]
        var leafIndex: Int
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

/// Builds the path from a presented chain to an anchor with OpenSSL's X509_verify_cert,
/// collecting every error by depth instead of stopping at the first.
enum PathBuilder {
    /// Collects errors from the verify callback (C callbacks cannot capture, so this rides in app data).
    private final class Collector {
        var issues: [(code: Int32, depth: Int32)] = []
    }

    /// Builds from `presented[leafIndex]` (the leaf; 0 for a server's chain) using every other
    /// presented certificate as an untrusted intermediate candidate.
    /// `summaries`, when given, are the presented certificates' summaries (same order): reused for
    /// path elements that are presented certificates instead of being computed again. The path's
    /// summaries carry no `daysLeft` (a built path is reused across scans): callers judge them at
    /// their own time.
    static func build(presented: [X509Certificate], leafIndex: Int = 0, store: TrustStore,
                      summaries: [CertificateSummary]? = nil) -> PathBuildingResult {
        guard presented.indices.contains(leafIndex) else { return PathBuildingResult(path: [], anchored: false, issues: []) }
        let known = summaries.flatMap { $0.count == presented.count ? $0 : nil }
        let presentedFingerprints = known?.map(\.sha256Fingerprint) ?? presented.map { Digest.sha256($0.der).hex }
        let key = TrustStore.BuiltPathKey(fingerprints: presentedFingerprints, leafIndex: leafIndex)
        if let built = store.builtPaths.withLock({ $0[key] }) { return built }
        let result = verify(presented: presented, leafIndex: leafIndex, store: store, known: known,
                            presentedFingerprints: presentedFingerprints)
        guard result.anchored, let known, known.reduce(0, { $0 + $1.der.count }) <= 32_768 else { return result }
        store.builtPaths.withLock { built in
            if built.count >= 256 { built.removeAll(keepingCapacity: true) }
            built[key] = result
        }
        return result
    }

    /// Runs X509_verify_cert for `build`.
    private static func verify(presented: [X509Certificate], leafIndex: Int, store: TrustStore,
                               known: [CertificateSummary]?, presentedFingerprints: [String]) -> PathBuildingResult {
        let leaf = presented[leafIndex]
        guard let context = X509_STORE_CTX_new(), let untrusted = tlsaudit_sk_X509_new_null() else {
            return PathBuildingResult(path: [], anchored: false, issues: [])
        }
        defer {
            X509_STORE_CTX_free(context)
            tlsaudit_sk_X509_free(untrusted)
        }
        for (index, certificate) in presented.enumerated() where index != leafIndex {
            _ = tlsaudit_sk_X509_push(untrusted, certificate.pointer)
        }
        guard X509_STORE_CTX_init(context, store.pointer, leaf.pointer, untrusted) == 1 else {
            OpenSSLErrors.clear()
            return PathBuildingResult(path: [], anchored: false, issues: [])
        }
        // Dates are checked by TrustEvaluator (inclusive notAfter, injectable time).
        // RFC 5280 policy processing (requireExplicitPolicy, policy mappings, inhibitAnyPolicy) with
        // anyPolicy as the initial policy set; OpenSSL needs the set given explicitly.
        X509_STORE_CTX_set_flags(context, UInt(X509_V_FLAG_NO_CHECK_TIME) | UInt(X509_V_FLAG_POLICY_CHECK)
                                 | (store.partialChain ? UInt(X509_V_FLAG_PARTIAL_CHAIN) : 0))
        if let parameters = X509_STORE_CTX_get0_param(context), let anyPolicy = OBJ_txt2obj("2.5.29.32.0", 1) {
            X509_VERIFY_PARAM_add0_policy(parameters, anyPolicy) // takes ownership
        }
        let collector = Collector()
        let unmanaged = Unmanaged.passRetained(collector)
        defer { unmanaged.release() }
        _ = tlsaudit_X509_STORE_CTX_set_app_data(context, unmanaged.toOpaque())
        X509_STORE_CTX_set_verify_cb(context) { ok, context in
            guard ok == 0, let context, let raw = tlsaudit_X509_STORE_CTX_get_app_data(context) else { return ok }
            let collector = Unmanaged<Collector>.fromOpaque(raw).takeUnretainedValue()
            collector.issues.append((X509_STORE_CTX_get_error(context), X509_STORE_CTX_get_error_depth(context)))
            return 1 // Keep going: record every problem, not just the first.
        }
        let verified = X509_verify_cert(context) == 1
        OpenSSLErrors.clear()

        var path: [PathElement] = []
        if let chain = X509_STORE_CTX_get1_chain(context) {
            defer { tlsaudit_sk_X509_pop_free(chain) }
            for index in 0..<tlsaudit_sk_X509_num(chain) {
                guard let pointer = tlsaudit_sk_X509_value(chain, index) else { continue }
                // OpenSSL's chain holds the very X509 objects it was given for presented certificates.
                let summary: CertificateSummary
                if let same = presented.firstIndex(where: { $0.pointer == pointer }) {
                    summary = known?[same] ?? X509Certificate(borrowing: pointer).summary()
                } else {
                    summary = store.summary(ofStoreCertificate: pointer)
                }
                let presentedIndex = presentedFingerprints.firstIndex(of: summary.sha256Fingerprint)
                path.append(PathElement(certificate: summary, source: presentedIndex == nil ? .trustStore : .presented,
                                        presentedIndex: presentedIndex))
            }
        }
        for index in path.indices { path[index].certificate.daysLeft = nil }
        var issues: [PathBuildingIssue] = []
        for (code, depth) in collector.issues {
            let issue = PathBuildingIssue(kind: kind(of: code), depth: Int(depth), code: Int(code),
                                          detail: String(cString: X509_verify_cert_error_string(Int(code))))
            if !issues.contains(issue) { issues.append(issue) }
        }
        let anchored = verified && issues.allSatisfy { $0.kind != .untrustedRoot && $0.kind != .missingIssuer && $0.kind != .selfSignedLeaf }
        return PathBuildingResult(path: path, anchored: anchored && !path.isEmpty, issues: issues)
    }

    static func kind(of code: Int32) -> PathBuildingIssue.Kind {
        switch code {
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT: .selfSignedLeaf
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN: .untrustedRoot
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE: .missingIssuer
        case X509_V_ERR_CERT_SIGNATURE_FAILURE, X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE,
             X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY: .badSignature
        case X509_V_ERR_INVALID_CA, X509_V_ERR_INVALID_NON_CA: .issuerNotCA
        case X509_V_ERR_PATH_LENGTH_EXCEEDED: .pathLengthExceeded
        case X509_V_ERR_PERMITTED_VIOLATION, X509_V_ERR_EXCLUDED_VIOLATION,
             X509_V_ERR_SUBTREE_MINMAX, X509_V_ERR_UNSUPPORTED_NAME_SYNTAX,
             X509_V_ERR_UNSUPPORTED_CONSTRAINT_TYPE, X509_V_ERR_UNSUPPORTED_CONSTRAINT_SYNTAX: .nameConstraintViolation
        case X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION: .unknownCriticalExtension
        case X509_V_ERR_KEYUSAGE_NO_CERTSIGN: .keyUsage
        case X509_V_ERR_NO_EXPLICIT_POLICY, X509_V_ERR_INVALID_POLICY_EXTENSION: .policy
        default: .other
        }
    }
}
