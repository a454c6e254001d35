import COpenSSL
import Foundation
public import TLSAuditModel
import TLSAuditSupport

/// The anchors a chain is verified against: a public root store by name (`system`, Debian's, which
/// is Mozilla's; `apple`, the snapshot of Apple's), or the operator's own anchors from a file.
public final class TrustStore: @unchecked Sendable {
    // @unchecked: the X509_STORE is filled in init and only read afterwards; OpenSSL locks
    // its internal lookups, so many threads may verify against it at once.
    let pointer: OpaquePointer
    /// `system`, `apple`, `file:/path` (`--trust-store FILE`), `ca-file:/path` (`--ca-file`) or `pinned-certificate`.
    public let label: String
    /// Any certificate of the store is an anchor, not only a self-signed root: a path ends at the
    /// first certificate the store holds (OpenSSL's partial-chain flag), as with Apple's
    /// `SecTrustSetAnchorCertificates`. True for anchors from files, false for the public stores.
    let partialChain: Bool
    /// A public root store by name (`system`, `apple`), not the operator's own anchors.
    public var isPublic: Bool { ChainReport.publicStores.contains(label) }
    /// Other complete paths are searched for besides OpenSSL's own (false for AFNetworking's pinned
    /// certificates, which get OpenSSL's path as AFNetworking does).
    let searchesAlternatives: Bool
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
        return TrustStore(pointer: store, label: "system", partialChain: false, searchesAlternatives: true)
    }

    /// The public root store of this name (`ChainReport.publicStoreNames`); nil for any other name.
    public static func publicStore(named name: String) throws -> TrustStore? {
        switch name {
        case "apple": apple
        case "system": try system()
        default: nil
        }
    }

    /// The store of the Apple root snapshot in force: the shipped one (`scripts/update-apple-roots`),
    /// read on first use, until `installAppleRoots` replaces it.
    public static var apple: TrustStore { appleInForce().store }

    /// The Apple root snapshot in force.
    public static var appleRoots: AppleRootStore { appleInForce().roots }

    /// Makes `roots` the snapshot `trust: apple` and the Apple policies judge against from now on
    /// (stores handed out before keep theirs).
    public static func installAppleRoots(_ roots: AppleRootStore) throws {
        let installed = try InstalledAppleRoots(roots)
        installedApple.withLock { $0 = installed }
    }

    /// The snapshot of Apple's root store shipped with tlsaudit, PEM.
    public static var appleSnapshotPEM: String { AppleRootStoreData.pem }

    /// The Apple roots in force, their store and their identities (for `PublicRoots`).
    final class InstalledAppleRoots: Sendable {
        let roots: AppleRootStore
        let store: TrustStore
        let identities: Set<String>

        init(_ roots: AppleRootStore) throws {
            self.roots = roots
            store = try TrustStore(certificates: roots.certificates, label: "apple", partialChain: false)
            identities = PublicRoots.identities(roots.certificates)
        }
    }

    /// Roots installed from a source (`installAppleRoots`); nil: the shipped snapshot is in force.
    private static let installedApple = SleepingLock<InstalledAppleRoots?>(nil)

    /// The shipped snapshot's store, made on first use.
    private static let shippedApple: InstalledAppleRoots = {
        do { return try InstalledAppleRoots(.shipped) } catch {
            fatalError("cannot make a trust store of Apple's roots: \(error)")
        }
    }()

    /// The identities of Apple roots installed from a source (nil: the shipped snapshot's).
    static var installedAppleIdentities: Set<String>? { installedApple.withLock { $0?.identities } }

    static func appleInForce() -> InstalledAppleRoots { installedApple.withLock { $0 } ?? shippedApple }

    /// Anchors from a PEM file (one or more certificates) or a DER certificate, each trusted on its
    /// own: a root, an intermediate or a leaf (a path ends at the first certificate it holds).
    /// `label` names the store in output: `ca-file:PATH` for `--ca-file`, `file:PATH` for `--trust-store FILE`.
    public convenience init(caFile path: String, label: String? = nil) throws {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw OpenSSLFailure("cannot read CA file \(path)")
        }
        let certificates = try CertificateFile.load(path: path)
        guard !certificates.isEmpty else { throw OpenSSLFailure("\(path) holds no certificate") }
        try self.init(certificates: certificates, label: label ?? "ca-file:\(path)", partialChain: true)
    }

    /// A store holding exactly `anchors`, each trusted on its own (partial chains allowed).
    convenience init(pinnedAnchors anchors: [X509Certificate]) throws {
        try self.init(certificates: anchors, label: "pinned-certificate", partialChain: true, searchesAlternatives: false)
    }

    private convenience init(certificates: [X509Certificate], label: String, partialChain: Bool, searchesAlternatives: Bool = true) throws {
        guard let store = X509_STORE_new() else { throw OpenSSLFailure("cannot allocate a trust store") }
        for certificate in certificates { X509_STORE_add_cert(store, certificate.pointer) }
        OpenSSLErrors.clear()
        self.init(pointer: store, label: label, partialChain: partialChain, searchesAlternatives: searchesAlternatives)
    }

    private init(pointer: OpaquePointer, label: String, partialChain: Bool, searchesAlternatives: Bool) {
        PathBuilder.linkIssuersAsTrustd(pointer)
        self.pointer = pointer
        self.label = label
        self.partialChain = partialChain
        self.searchesAlternatives = searchesAlternatives
    }

    deinit { X509_STORE_free(pointer) }

    /// The summary of a certificate this store holds (an anchor in a built path); summaries are
    /// kept by DER (`X509Certificate.summary`), so an anchor is summarised once, not once per scan.
    func summary(ofStoreCertificate certificate: OpaquePointer) -> CertificateSummary {
        X509Certificate(borrowing: certificate).summary()
    }
}

/// The public root stores a path's anchor may be in: the rules for publicly trusted certificates
/// (Certificate Transparency, the 398-day limit) follow the anchor, whichever store judged the chain.
public enum PublicRoots {
    /// The names of the public stores (`apple`, `system`) holding a certificate with `anchor`'s
    /// subject and key (a re-encoded or re-issued copy of a root is the same anchor).
    public static func stores(holding anchor: CertificateSummary) -> [String] {
        let key = identity(subject: anchor.subject, spki: anchor.spkiSHA256)
        var names: [String] = []
        if appleIdentities.contains(key) { names.append("apple") }
        if systemHolds(anchor, key: key) { names.append("system") }
        return names
    }

    /// The public stores holding an anchored path's anchor (nil when the path is not anchored).
    static func anchorIn(_ building: PathBuildingResult) -> [String]? {
        guard building.anchored, let anchor = building.path.last else { return nil }
        return stores(holding: anchor.certificate)
    }

    private static func identity(subject: String, spki: String) -> String { "\(spki) \(subject)" }

    /// Each certificate's identity from its subject and key alone (not its whole summary).
    static func identities(_ certificates: [X509Certificate]) -> Set<String> {
        Set(certificates.map { certificate in
            identity(subject: X509Certificate.rfc2253(X509_get_subject_name(certificate.pointer)), spki: Digest.sha256(certificate.spkiDER()).base64)
        })
    }

    /// The identities of Apple's roots in force: the shipped snapshot's, generated with it (no
    /// parsing at run time), or those of roots installed from a source.
    static var appleIdentities: Set<String> { TrustStore.installedAppleIdentities ?? AppleRootStoreData.identities }

    /// Whether OpenSSL's default file or directory (`SSL_CERT_FILE`, `SSL_CERT_DIR` honoured:
    /// Debian's `/etc/ssl/certs/ca-certificates.crt` and its hashed links) holds a certificate
    /// with `anchor`'s identity `key`. Answered per anchor, once (a fleet has few), without parsing
    /// the store: the directory by the anchor's subject hash (`HASH.N`, as OpenSSL looks it up),
    /// the file's certificates only where their DER holds the anchor's key.
    /// Looked up under the lock: the workers of a scan meet the same anchor at once, and each
    /// would otherwise read the same files again while the first one does.
    static func systemHolds(_ anchor: CertificateSummary, key: String) -> Bool {
        systemAnswers.withLock { answers in
            if let known = answers[key] { return known }
            let held = systemLookup(anchor, key: key)
            if answers.count >= 1_024 { answers.removeAll() }
            answers[key] = held
            return held
        }
    }

    private static let systemAnswers = SleepingLock<[String: Bool]>([:])

    private static func systemLookup(_ anchor: CertificateSummary, key: String) -> Bool {
        guard let fields = CertificateFields(der: Array(anchor.der)) else { return false }
        if directoryCertificates(subject: fields.subject).contains(where: { holds($0, identity: key) }) { return true }
        guard !systemFileCoveredByDirectory else { return false }
        let spki = Array(fields.subjectPublicKeyInfo)
        return systemFileCertificates.contains { $0.firstOffset(of: spki) != nil && holds($0, identity: key) }
    }

    /// Whether the certificate `der` has the identity `key` (subject and key), read from its DER's
    /// fields; parsed only when the subject matches and the key's bytes do not (a key encoded other
    /// than as OpenSSL writes it back, which the identities hash).
    private static func holds(_ der: [UInt8], identity key: String) -> Bool {
        guard let fields = CertificateFields(der: der), let subject = rfc2253(fields.subject) else { return false }
        if identity(subject: subject, spki: Digest.sha256(Array(fields.subjectPublicKeyInfo)).base64) == key { return true }
        guard key.hasSuffix(" " + subject), let certificate = try? X509Certificate(der: der) else { return false }
        return identities([certificate]).contains(key)
    }

    /// A DER Name in RFC 2253 form (as summaries write subjects), or nil when it does not decode.
    private static func rfc2253(_ name: ArraySlice<UInt8>) -> String? {
        withDecodedName(name) { X509Certificate.rfc2253($0) }
    }

    /// OpenSSL's hash of a DER Name (`X509_subject_name_hash`), in the form of the store's links.
    private static func subjectHash(_ name: ArraySlice<UInt8>) -> String? {
        withDecodedName(name) { decoded in
            var ok: Int32 = 0
            let hash = X509_NAME_hash_ex(decoded, nil, nil, &ok)
            return ok == 1 ? hash.hex(width: 8) : nil
        }
    }

    /// `body` of the X509_NAME decoded from a DER Name, freed after; nil when it does not decode.
    private static func withDecodedName<Result>(_ name: ArraySlice<UInt8>, _ body: (OpaquePointer) -> Result?) -> Result? {
        Array(name).withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            guard let decoded = d2i_X509_NAME(nil, &cursor, buffer.count) else {
                OpenSSLErrors.clear()
                return nil
            }
            defer { X509_NAME_free(decoded) }
            return body(decoded)
        }
    }

    /// The DER of the certificates the default directories hold under the subject hash of `subject`
    /// (`HASH.0`, `HASH.1`, ... up to the first missing, PEM, as OpenSSL looks them up), decoded
    /// from their PEM, not parsed.
    private static func directoryCertificates(subject: ArraySlice<UInt8>) -> [[UInt8]] {
        guard let hash = subjectHash(subject) else { return [] }
        var found: [[UInt8]] = []
        for directory in systemPaths.directories {
            for index in 0..<16 {
                let path = "\(directory)/\(hash).\(index)"
                guard FileManager.default.fileExists(atPath: path) else { break }
                if let bytes = try? InputLimits.read(path, limit: InputLimits.certificateFileBytes, what: "certificate file") {
                    found += pemCertificates(bytes, limit: InputLimits.certificatesPerFile)
                }
            }
        }
        return found
    }

    /// Whether the directory holds the file's certificates under their subject hashes, as Debian's
    /// `update-ca-certificates` makes them (the file is the concatenation of the directory's
    /// certificates): judged by the file's first certificate, once. Then the directory answers
    /// alone and the file is not read for each anchor; elsewhere (`SSL_CERT_FILE` naming another
    /// bundle than OpenSSL's default file, a bundle without hashed links) the file is searched too.
    private static let systemFileCoveredByDirectory: Bool = {
        // Its first certificate is in the first few KiB (reading the whole 220 KiB bundle cost a
        // one-target scan half a millisecond).
        guard isDefaultFile(systemPaths.file),
              let bytes = FileHandle(forReadingAtPath: systemPaths.file).flatMap({ try? $0.read(upToCount: 32 << 10) }).map(Array.init),
              let first = firstPEMCertificate(bytes), let fields = CertificateFields(der: first) else { return false }
        return directoryCertificates(subject: fields.subject).contains(first)
    }()

    /// Whether `path` is OpenSSL's default CA file (`SSL_CERT_FILE` is often set to the very file
    /// the default names through its link, `/etc/ssl/certs/ca-certificates.crt` on Debian).
    private static func isDefaultFile(_ path: String) -> Bool {
        let defaultFile = String(cString: X509_get_default_cert_file())
        guard path != defaultFile else { return true }
        func resolved(_ path: String) -> String? {
            guard let real = realpath(path, nil) else { return nil }
            defer { free(real) }
            return String(cString: real)
        }
        return resolved(path).map { $0 == resolved(defaultFile) } ?? false
    }

    /// The DER of the first PEM certificate in `bytes`.
    private static func firstPEMCertificate(_ bytes: [UInt8]) -> [UInt8]? {
        pemCertificates(bytes, limit: 1).first
    }

    private static let systemPaths: (file: String, directories: [String]) = {
        func environment(_ name: UnsafePointer<CChar>?) -> String? { name.flatMap { getenv($0) }.map { String(cString: $0) } }
        let file = environment(X509_get_default_cert_file_env()) ?? String(cString: X509_get_default_cert_file())
        let directory = environment(X509_get_default_cert_dir_env()) ?? String(cString: X509_get_default_cert_dir())
        return (file, directory.split(separator: ":").map(String.init))
    }()

    /// The DER of each certificate in the default file, decoded from its PEM once (not parsed).
    private static let systemFileCertificates: [[UInt8]] = {
        guard let bytes = try? InputLimits.read(systemPaths.file, limit: InputLimits.certificateFileBytes, what: "system CA file") else { return [] }
        return pemCertificates(bytes, limit: .max)
    }()

    /// The DER of the PEM certificates in `bytes`, at most `limit` (decoded, not parsed): the labels
    /// OpenSSL reads a certificate under (`CERTIFICATE`, `X509 CERTIFICATE`, `TRUSTED CERTIFICATE`,
    /// whose trust settings follow the certificate's DER and are ignored by `CertificateFields`).
    private static func pemCertificates(_ bytes: [UInt8], limit: Int) -> [[UInt8]] {
        let begin = Array("-----BEGIN ".utf8), dashes = Array("-----".utf8)
        let labels: Set<[UInt8]> = [Array("CERTIFICATE".utf8), Array("X509 CERTIFICATE".utf8), Array("TRUSTED CERTIFICATE".utf8)]
        var certificates: [[UInt8]] = []
        var position = 0
        while certificates.count < limit, let start = bytes.firstOffset(of: begin, from: position),
              let labelEnd = bytes.firstOffset(of: dashes, from: start + begin.count) {
            let label = Array(bytes[(start + begin.count)..<labelEnd])
            position = labelEnd + dashes.count
            guard labels.contains(label) else { continue }
            let end = Array("-----END ".utf8) + label + dashes
            guard let stop = bytes.firstOffset(of: end, from: position) else { break }
            let base64 = bytes[position..<stop].filter { $0 != 0x0A && $0 != 0x0D && $0 != 0x20 }
            if let der = Data(base64Encoded: Data(base64)) { certificates.append(Array(der)) }
            position = stop + end.count
        }
        return certificates
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
        // UTF-8 text holding a PEM header (checked in the standard library: Foundation's
        // String(bytes:encoding:) and contains showed in the start-up profile of `verify`).
        if bytes.firstOffset(of: Array("-----BEGIN".utf8)) != nil, String(validating: bytes, as: UTF8.self) != nil {
            guard let bio = BIO_new_mem_buf(bytes, Int32(bytes.count)) else { throw OpenSSLFailure("out of memory") }
            defer { BIO_free(bio) }
            var certificates: [X509Certificate] = []
            while true {
                var certificate = X509Certificate.newInLibraryContext()
                guard PEM_read_bio_X509(bio, &certificate, nil, nil) != nil, let certificate else {
                    // No further PEM block leaves the empty X509 allocated; a block that does not
                    // decode has had it freed (and set to NULL) already.
                    if let certificate { X509_free(certificate) }
                    break
                }
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

    /// The summary of one DER certificate (what an app's bundled `.cer` holds: AFNetworking reads
    /// DER only). Throws when the bytes are not one.
    public static func summary(der: [UInt8]) throws -> CertificateSummary {
        try X509Certificate.summary(der: der)
    }
}
