import COpenSSL
public import Foundation
import TLSAuditProbe
import TLSAuditModel
import TLSAuditSupport

/// A Certificate Transparency log made in the lab: a P-256 key that signs SCTs (RFC 6962 §3.2)
/// over lab certificates, and the log list entry an operator's `--ct-log-list` would give it.
public final class LabCTLog: @unchecked Sendable {
    // @unchecked: immutable after init.
    public let description: String
    public let operatorName: String
    let key: LabPrivateKey

    public init(_ description: String, operator operatorName: String) throws {
        self.description = description
        self.operatorName = operatorName
        key = try LabPrivateKey(.ec(curve: "P-256"))
    }

    /// DER SubjectPublicKeyInfo of the log's key.
    public var publicKey: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(key.pointer, &out)
        guard length > 0, let out else { return [] }
        defer { tlsaudit_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// The log id: SHA-256 of the key, base64.
    public var id: String { Data(Digest.sha256(publicKey)).base64EncodedString() }

    /// A v3 log list entry for this log in `state` since `since`, read at `url` when given (a `LabCTLogServer`'s).
    public func listEntry(state: String = "usable", since: Date = Date(timeIntervalSince1970: 1_500_000_000), key: [UInt8]? = nil,
                          url: String? = nil) -> [String: Any] {
        var entry: [String: Any] = ["description": description, "log_id": id, "key": Data(key ?? publicKey).base64EncodedString(),
                                    "state": [state: ["timestamp": Timestamp.format(since)]]]
        if let url {
            entry["url"] = url
            entry["mmd"] = 86_400
        }
        return entry
    }

    /// A v3 log list file of `entries` (log, state, since), grouped by operator; `replacingKey` gives
    /// a log another key in the list (its id unchanged), so its signatures fail.
    public static func listFile(_ entries: [(log: LabCTLog, state: String, since: Date)], replacingKeyOf replaced: LabCTLog? = nil,
                                published: Date = Date()) throws -> Data {
        var operators: [String: [[String: Any]]] = [:]
        var order: [String] = []
        for entry in entries {
            if operators[entry.log.operatorName] == nil { order.append(entry.log.operatorName) }
            let otherKey = replaced === entry.log ? try LabCTLog("replacement", operator: "nobody").publicKey : nil
            operators[entry.log.operatorName, default: []].append(entry.log.listEntry(state: entry.state, since: entry.since, key: otherKey))
        }
        let list: [String: Any] = ["version": "lab", "log_list_timestamp": Timestamp.format(published),
                                   "operators": order.map { ["name": $0, "email": ["ct@\($0).test"], "logs": operators[$0]!] }]
        return try JSONSerialization.data(withJSONObject: list, options: [.sortedKeys])
    }

    /// An SCT (TLS encoding) over `certificate` as delivered in the TLS extension or OCSP (x509_entry).
    public func sct(for certificate: LabCertificate, at time: Date = Date().addingTimeInterval(-3_600)) -> [UInt8] {
        sign(entry: [0, 0] + Self.prefixed(certificate.der, 3), at: time)
    }

    /// An SCT over a precertificate entry (`[0, 1]` + issuer key hash + TBSCertificate), for embedding.
    public func sct(precertificateEntry entry: [UInt8], at time: Date) -> [UInt8] { sign(entry: entry, at: time) }

    private func sign(entry: [UInt8], at time: Date) -> [UInt8] {
        let milliseconds = Self.milliseconds(time)
        let signed = SCTVerifier.signedData(timestampMs: milliseconds, entry: entry, extensions: [])
        return Self.encode(logID: Digest.sha256(publicKey), timestamp: SCTVerifier.bigEndian(milliseconds),
                           signature: signature(over: signed))
    }

    /// The log's ECDSA signature (SHA-256, DER) over `data`.
    func signature(over data: [UInt8]) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: 128)
        var length = signature.count
        guard let context = EVP_MD_CTX_new() else { return [] }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer) == 1,
              EVP_DigestSign(context, &signature, &length, data, data.count) == 1 else { return [] }
        return Array(signature.prefix(length))
    }

    /// A TreeHeadSignature (RFC 6962 §3.5) as a DigitallySigned: SHA-256 (4), ECDSA (3), the signature.
    public func treeHeadSignature(treeSize: UInt64, timestampMs: UInt64, rootHash: [UInt8]) -> [UInt8] {
        let signature = signature(over: SignedTreeHead.signedData(treeSize: treeSize, timestampMs: timestampMs, rootHash: rootHash))
        return [4, 3] + Self.prefixed(signature, 2)
    }

    private static func milliseconds(_ time: Date) -> UInt64 { UInt64(max(0, time.timeIntervalSince1970 * 1000)) }

    /// An SCT in the TLS encoding with any log id and signature (forgeries, unknown logs).
    public static func forged(logID: [UInt8], at time: Date, signature: [UInt8]) -> [UInt8] {
        encode(logID: logID, timestamp: SCTVerifier.bigEndian(milliseconds(time)), signature: signature)
    }

    private static func encode(logID: [UInt8], timestamp: [UInt8], signature: [UInt8]) -> [UInt8] {
        // version, log id, timestamp, extensions, hash sha256 (4), signature ecdsa (3), signature
        [0] + logID + timestamp + [0, 0] + [4, 3] + prefixed(signature, 2)
    }

    /// A SignedCertificateTimestampList: each SCT length-prefixed, the whole list too.
    public static func list(_ scts: [[UInt8]]) -> [UInt8] { prefixed(scts.flatMap { prefixed($0, 2) }, 2) }

    static func prefixed(_ bytes: [UInt8], _ width: Int) -> [UInt8] { SCTVerifier.lengthPrefixed(bytes, bytes: width) }

    /// DER OCTET STRING around `bytes` (an SCT list extension's value).
    static func octetString(_ bytes: [UInt8]) -> [UInt8] {
        let count = bytes.count
        let length: [UInt8] = count < 128 ? [UInt8(count)]
            : count < 256 ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xff)]
        return [0x04] + length + bytes
    }

    /// `openssl s_server -serverinfo` content: the signed_certificate_timestamp extension (18) with
    /// `scts`, in the v2 format whose context sends it in a TLS 1.2 ServerHello and in a TLS 1.3
    /// Certificate entry (client hello, 1.2 server hello, 1.3 certificate, ignored on resumption).
    public static func serverInfoPEM(_ scts: [[UInt8]]) -> String {
        let context: [UInt8] = [0, 0, 0x11, 0xC0]
        let block = context + [0, 18] + prefixed(list(scts), 2)
        let base64 = Data(block).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN SERVERINFOV2 FOR signed_certificate_timestamp-----\n\(base64)\n-----END SERVERINFOV2 FOR signed_certificate_timestamp-----\n"
    }
}

extension LabCertificate {
    /// A certificate for `request` issued by this one with `scts` embedded: each closure is given the
    /// precertificate entry (issuer key hash and TBSCertificate without the SCT list) and returns an SCT.
    public func issue(_ request: LabCertificateRequest, embedding scts: [([UInt8]) -> [UInt8]]) throws -> LabCertificate {
        let issued = try issue(request)
        let x509 = issued.certificate.pointer
        // The TBS as signed (its signature algorithm set) is what the precertificate's would be.
        let tbs = issued.tbsDER
        guard !tbs.isEmpty else { throw OpenSSLFailure("cannot encode the TBSCertificate") }
        let entry = [0, 1] + Digest.sha256(certificate.spkiDER()) + LabCTLog.prefixed(tbs, 3)
        let value = LabCTLog.octetString(LabCTLog.list(scts.map { $0(entry) }))
        let hex = value.map { String(format: "%02X", $0) }.joined(separator: ":")
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, certificate.pointer, x509, nil, nil, 0)
        guard let ext = X509V3_EXT_nconf(nil, &context, "1.3.6.1.4.1.11129.2.4.2", "DER:\(hex)") else {
            throw OpenSSLFailure("cannot build the SCT list extension")
        }
        X509_add_ext(x509, ext, -1)
        X509_EXTENSION_free(ext)
        guard X509_sign(x509, key.pointer, EVP_sha256()) > 0 else { throw OpenSSLFailure("cannot sign \(request.commonName)") }
        return issued
    }

    /// A DER OCSP response (good, signed by this issuer) for `leaf` whose single response carries
    /// `scts` in the SCT list extension (1.3.6.1.4.1.11129.2.4.5), as a CA's responder may.
    public func ocspResponse(for leaf: LabCertificate, carrying scts: [[UInt8]]) throws -> [UInt8] {
        guard let basic = OCSP_BASICRESP_new() else { throw OpenSSLFailure("cannot allocate an OCSP response") }
        defer { OCSP_BASICRESP_free(basic) }
        guard let id = OCSP_cert_to_id(nil, leaf.certificate.pointer, certificate.pointer),
              let thisUpdate = ASN1_TIME_set(nil, time_t(Date().timeIntervalSince1970 - 3_600)),
              let nextUpdate = ASN1_TIME_set(nil, time_t(Date().timeIntervalSince1970 + 86_400)) else {
            throw OpenSSLFailure("cannot make the OCSP certificate id")
        }
        defer {
            OCSP_CERTID_free(id)
            ASN1_STRING_free(thisUpdate)
            ASN1_STRING_free(nextUpdate)
        }
        guard let single = OCSP_basic_add1_status(basic, id, V_OCSP_CERTSTATUS_GOOD, 0, nil, thisUpdate, nextUpdate) else {
            throw OpenSSLFailure("cannot add the OCSP status")
        }
        let value = LabCTLog.list(scts)
        guard let octets = ASN1_OCTET_STRING_new() else { throw OpenSSLFailure("out of memory") }
        defer { ASN1_OCTET_STRING_free(octets) }
        let wrapped = LabCTLog.octetString(value)
        ASN1_OCTET_STRING_set(octets, wrapped, Int32(wrapped.count))
        guard let ext = X509_EXTENSION_create_by_NID(nil, NID_ct_cert_scts, 0, octets) else { throw OpenSSLFailure("cannot build the extension") }
        defer { X509_EXTENSION_free(ext) }
        OCSP_SINGLERESP_add_ext(single, ext, -1)
        guard OCSP_basic_sign(basic, certificate.pointer, key.pointer, EVP_sha256(), nil, UInt(OCSP_NOCERTS)) == 1,
              let response = OCSP_response_create(Int32(OCSP_RESPONSE_STATUS_SUCCESSFUL), basic) else {
            throw OpenSSLFailure("cannot sign the OCSP response")
        }
        defer { OCSP_RESPONSE_free(response) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_OCSP_RESPONSE(response, &out)
        guard length > 0, let out else { throw OpenSSLFailure("cannot encode the OCSP response") }
        defer { tlsaudit_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
