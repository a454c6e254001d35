import COpenSSL
import Foundation
package import TLSAuditModel
import TLSAuditSupport

/// One SCT as received (RFC 6962 §3.2), its fields copied out of OpenSSL's parse.
struct ReceivedSCT: Sendable {
    var origin: SCTOrigin
    var version: Int32
    var logID: [UInt8]
    var timestampMs: UInt64
    var extensions: [UInt8]
    var signature: [UInt8]
    /// The signature algorithm's NID (sha256WithRSAEncryption, ecdsa-with-SHA256), `NID_undef` when unsupported.
    var signatureNID: Int32

    /// Every field that a signature check depends on, and the origin.
    var identity: [UInt8] {
        [UInt8(origin == .tlsExtension ? 1 : 2), UInt8(truncatingIfNeeded: version)] + logID + extensions + signature
            + SCTVerifier.bigEndian(timestampMs)
    }

    init(_ sct: OpaquePointer, origin: SCTOrigin) {
        self.origin = origin
        version = Int32(SCT_get_version(sct).rawValue)
        timestampMs = SCT_get_timestamp(sct)
        signatureNID = SCT_get_signature_nid(sct)
        func copy(_ read: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>) -> Int) -> [UInt8] {
            var start: UnsafeMutablePointer<UInt8>?
            let length = read(&start)
            guard length > 0, let start else { return [] }
            return Array(UnsafeBufferPointer(start: start, count: length))
        }
        logID = copy { SCT_get0_log_id(sct, $0) }
        extensions = copy { SCT_get0_extensions(sct, $0) }
        signature = copy { SCT_get0_signature(sct, $0) }
    }

    /// The SCTs a handshake delivered: the TLS extension's and the stapled OCSP response's
    /// (embedded ones are read from the leaf, `embedded(in:)`, so that `verify` reads them alike).
    static func delivered(_ ssl: OpaquePointer) -> [ReceivedSCT] {
        guard let all = SSL_get0_peer_scts(ssl) else { OpenSSLErrors.clear(); return [] }
        var received: [ReceivedSCT] = []
        for index in 0..<tlsaudit_sk_SCT_num(all) {
            guard let sct = tlsaudit_sk_SCT_value(all, index) else { continue }
            switch SCT_get_source(sct) {
            case SCT_SOURCE_TLS_EXTENSION: received.append(ReceivedSCT(sct, origin: .tlsExtension))
            case SCT_SOURCE_OCSP_STAPLED_RESPONSE: received.append(ReceivedSCT(sct, origin: .ocsp))
            default: break
            }
        }
        OpenSSLErrors.clear()
        return received
    }

    /// The SCTs embedded in a certificate's SCT list extension.
    static func embedded(in certificate: X509Certificate) -> [ReceivedSCT] {
        guard let raw = X509_get_ext_d2i(certificate.pointer, NID_ct_precert_scts, nil, nil) else {
            OpenSSLErrors.clear()
            return []
        }
        let list = OpaquePointer(raw)
        defer { tlsaudit_SCT_LIST_free(list) }
        return (0..<tlsaudit_sk_SCT_num(list)).compactMap { index in
            tlsaudit_sk_SCT_value(list, index).map { ReceivedSCT($0, origin: .embedded) }
        }
    }
}

/// Checks SCT signatures against a CT log list's keys, as RFC 6962 §3.2 defines the signed data:
/// over the certificate for SCTs delivered in the handshake, over the precertificate (the leaf's
/// TBSCertificate without its SCT list, and the SHA-256 of the issuer's key) for embedded ones.
package enum SCTVerifier {
    /// Checks already made, by everything a check depends on: a fleet presents the same few leaves
    /// at every scan, and a check costs some 0.1 ms per SCT (two ECDSA verifications and the
    /// precertificate's re-encoding). At most 256, forgotten all at once when full.
    private static let checked = SleepingLock<[CheckKey: [SignedCertificateTimestamp]]>([:])

    private struct CheckKey: Hashable {
        var leaf: BytesKey
        var issuerKey: BytesKey?
        var delivered: [BytesKey]
        var logs: Int
    }

    /// Every SCT of the leaf, embedded and `delivered`, with its signature checked. `issuer` is the
    /// certificate that signed the leaf (embedded SCTs name its key), nil when it is not known; it is
    /// found only when the leaf has embedded SCTs (finding it can cost a signature check).
    static func check(leaf: X509Certificate, issuer findIssuer: @autoclosure () -> X509Certificate?, delivered: [ReceivedSCT],
                      logs: CTLogList) -> [SignedCertificateTimestamp] {
        let embedded = ReceivedSCT.embedded(in: leaf)
        // No SCT at all: nothing to check, and the list is not touched (the shipped one stays unparsed).
        if delivered.isEmpty, embedded.isEmpty { return [] }
        let issuer = embedded.isEmpty ? nil : findIssuer()
        let key = CheckKey(leaf: BytesKey(leaf.der), issuerKey: issuer.map { BytesKey($0.spkiDER()) }, delivered: delivered.map { BytesKey($0.identity) },
                           logs: logs.keysIdentity)
        if let known = checked.withLock({ $0[key] }) { return known }
        let result = uncachedCheck(leaf: leaf, issuer: issuer, delivered: delivered, logs: logs)
        checked.withLock { checked in
            if checked.count >= 256 { checked.removeAll(keepingCapacity: true) }
            checked[key] = result
        }
        return result
    }

    static func uncachedCheck(leaf: X509Certificate, issuer: X509Certificate?, delivered: [ReceivedSCT], logs: CTLogList) -> [SignedCertificateTimestamp] {
        let received = ReceivedSCT.embedded(in: leaf) + delivered
        guard !received.isEmpty else { return [] }
        var precertificate: [UInt8]?? // Computed once, for the first embedded SCT.
        return received.map { sct in
            let logID = Data(sct.logID).base64EncodedString()
            let result: SCTSignatureCheck
            if let log = logs.log(id: logID) {
                let entry: [UInt8]?
                if sct.origin == .embedded {
                    if precertificate == nil { precertificate = .some(issuer.flatMap { precertificateEntry(leaf: leaf, issuer: $0) }) }
                    entry = precertificate ?? nil
                } else {
                    entry = certificateEntry(leaf)
                }
                if let entry {
                    result = verify(sct, entry: entry, key: log.key) ? .valid : .invalid
                } else {
                    result = .issuerUnknown
                }
            } else {
                result = .unknownLog
            }
            return SignedCertificateTimestamp(logID: logID, origin: sct.origin, timestampMs: Int64(clamping: sct.timestampMs), signature: result)
        }
    }

    /// Seconds per verification of every SCT of `leaf` and per summary of the same leaf (fresh
    /// parses, so no cache helps either), best of `runs`; and the SCTs as checked (`tlsaudit-bench sct`).
    package static func benchmark(leaf leafPath: String, issuer issuerPath: String, logs: CTLogList,
                                  runs: Int) throws -> (verify: Double, cached: Double, summarise: Double, scts: [SignedCertificateTimestamp]) {
        let leafDER = try CertificateFile.load(path: leafPath)[0].der, issuer = try CertificateFile.load(path: issuerPath)[0]
        func best(_ body: () throws -> Void) rethrows -> Double {
            var fastest = Double.infinity
            for _ in 0..<5 {
                let start = ContinuousClock.now
                for _ in 0..<runs { try body() }
                let elapsed = ContinuousClock.now - start
                fastest = min(fastest, elapsed.seconds / Double(runs))
            }
            return fastest
        }
        var scts: [SignedCertificateTimestamp] = []
        let parse = try best { _ = try X509Certificate(der: leafDER) }
        let verify = try best { scts = uncachedCheck(leaf: try X509Certificate(der: leafDER), issuer: issuer, delivered: [], logs: logs) } - parse
        let cached = try best { _ = check(leaf: try X509Certificate(der: leafDER), issuer: issuer, delivered: [], logs: logs) } - parse
        var summary = 0
        let summarise = try best {
            // 1,024 DERs in turn (signature bytes changed): the summary cache (256 kept) never answers.
            var modified = leafDER
            modified[modified.count - 1] = UInt8(truncatingIfNeeded: summary)
            modified[modified.count - 2] ^= UInt8(truncatingIfNeeded: (summary >> 8) & 3)
            summary = (summary + 1) % 1_024
            _ = try X509Certificate(der: modified).summary()
        } - parse
        return (verify, cached, summarise, scts)
    }

    /// `LogEntryType x509_entry` and the certificate, length-prefixed (uint24).
    static func certificateEntry(_ leaf: X509Certificate) -> [UInt8] {
        [0, 0] + lengthPrefixed(leaf.der, bytes: 3)
    }

    /// `LogEntryType precert_entry`: the issuer's key hash and the leaf's TBSCertificate with the
    /// SCT list extension removed (what the log signed before the SCTs were embedded).
    static func precertificateEntry(leaf: X509Certificate, issuer: X509Certificate) -> [UInt8]? {
        // A precertificate's poison extension is not in a final certificate; removed too if present, as OpenSSL does.
        guard let tbs = leaf.tbsCertificate(without: NID_ct_precert_scts, alsoWithout: [NID_ct_precert_poison]) else { return nil }
        return [0, 1] + Digest.sha256(issuer.spkiDER()) + lengthPrefixed(tbs, bytes: 3)
    }

    /// Verifies the log's signature over `digitally-signed struct { version, certificate_timestamp,
    /// timestamp, entry, extensions }` with the log's key (SHA-256 with ECDSA or RSA).
    static func verify(_ sct: ReceivedSCT, entry: [UInt8], key: [UInt8]) -> Bool {
        guard sct.version == 0, sct.signatureNID != NID_undef, !sct.signature.isEmpty else { return false }
        let signed = signedData(timestampMs: sct.timestampMs, entry: entry, extensions: sct.extensions)
        return DetachedSignature.verifySHA256(sct.signature, over: signed, keyDER: key)
    }

    /// What a log signs for an SCT (RFC 6962 §3.2): version v1, certificate_timestamp, the
    /// timestamp, the log entry (`certificateEntry`, `precertificateEntry`) and the extensions.
    package static func signedData(timestampMs: UInt64, entry: [UInt8], extensions: [UInt8]) -> [UInt8] {
        [0, 0] + bigEndian(timestampMs) + entry + lengthPrefixed(extensions, bytes: 2)
    }

    /// A 64-bit value as 8 bytes, most significant first.
    package static func bigEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    /// `bytes` after its length in `width` big-endian bytes (TLS vectors).
    package static func lengthPrefixed(_ bytes: [UInt8], bytes width: Int) -> [UInt8] {
        (0..<width).reversed().map { UInt8(truncatingIfNeeded: bytes.count >> (8 * $0)) } + bytes
    }

    /// The certificate that issued the path's leaf: the path's second certificate when it was sent or
    /// fetched from a caIssuers URL (its signature is checked already), else one of `presented` or
    /// the store that signed it.
    static func issuer(ofLeafOf path: [PathElement], presented: [X509Certificate], leaf: X509Certificate, store: TrustStore) -> X509Certificate? {
        if path.count > 1, let index = path[1].presentedIndex, presented.indices.contains(index) { return presented[index] }
        if path.count > 1, path[1].source == .aiaFetched, let fetched = try? X509Certificate(der: Array(path[1].certificate.der)) {
            return fetched
        }
        return issuer(of: leaf, among: presented, store: store)
    }

    /// The certificate among `candidates` (then the store) that issued `leaf`: its name and its key's signature.
    static func issuer(of leaf: X509Certificate, among candidates: [X509Certificate], store: TrustStore?) -> X509Certificate? {
        for candidate in candidates where candidate.pointer != leaf.pointer {
            if PathBuilder.issued(leaf.pointer, by: candidate.pointer), let key = X509_get0_pubkey(candidate.pointer),
               X509_verify(leaf.pointer, key) == 1 {
                OpenSSLErrors.clear()
                return candidate
            }
        }
        OpenSSLErrors.clear()
        guard let store, let context = X509_STORE_CTX_new() else { return nil }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store.pointer, leaf.pointer, nil) == 1 else { OpenSSLErrors.clear(); return nil }
        var found: OpaquePointer?
        let result = X509_STORE_CTX_get1_issuer(&found, context, leaf.pointer)
        OpenSSLErrors.clear()
        guard result == 1, let found else { return nil }
        return X509Certificate(takingOwnershipOf: found)
    }
}
