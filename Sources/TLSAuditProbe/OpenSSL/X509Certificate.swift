import COpenSSL
import COpenSSLProbeLibrary
import Foundation
public import TLSAuditModel
import TLSAuditSupport

/// Owns one OpenSSL `X509`, freed on deinit. Immutable after init.
package final class X509Certificate: @unchecked Sendable {
    // @unchecked: the X509 is never mutated after init, and OpenSSL's X509 reads are thread-safe.
    package let pointer: OpaquePointer

    /// Adopts a reference the caller owns (e.g. from `d2i_X509` or `X509_dup`).
    package init(takingOwnershipOf pointer: OpaquePointer) {
        self.pointer = pointer
    }

    /// Takes a new reference to a certificate someone else owns (e.g. from `SSL_get_peer_cert_chain`).
    package convenience init(borrowing pointer: OpaquePointer) {
        X509_up_ref(pointer)
        self.init(takingOwnershipOf: pointer)
    }

    /// Parses one DER certificate (in the probe's library context, as the handshakes' are).
    package convenience init(der: [UInt8]) throws {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            var certificate = Self.newInLibraryContext()
            // d2i_X509 fills the X509 given (keeping its library context), or frees it and sets it to NULL.
            return d2i_X509(&certificate, &cursor, buffer.count)
        }
        guard let parsed else { throw OpenSSLFailure("not a DER X.509 certificate") }
        self.init(takingOwnershipOf: parsed)
    }

    /// An empty X509 of the library context tlsaudit parses certificates in: the probe's
    /// (`tlsaudit_probe_library_context`, where a key is decoded at a fraction of the default
    /// context's cost), the default one when it could not be made. Passed to `d2i_X509` or
    /// `PEM_read_bio_X509` to be filled, as libssl parses a server's certificates.
    package static func newInLibraryContext() -> OpaquePointer? {
        X509_new_ex(tlsaudit_probe_library_context(), nil)
    }

    deinit { X509_free(pointer) }

    /// The name of the OpenSSL provider that decoded the public key (`tlsaudit-probe` for a
    /// certificate parsed in the probe's library context: a handshake's, `init(der:)`'s, a PEM
    /// file's; `default` for one made or parsed in the default context: the lab's, an OCSP
    /// response's); nil when the key did not decode.
    package var keyProviderName: String? {
        guard let key = X509_get0_pubkey(pointer), let provider = EVP_PKEY_get0_provider(key) else {
            OpenSSLErrors.clear()
            return nil
        }
        return OSSL_PROVIDER_get0_name(provider).map { String(cString: $0) }
    }

    /// The DER encoding.
    package var der: [UInt8] {
        let length = i2d_X509(pointer, nil)
        guard length > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_X509(pointer, &cursor)
        }
        return bytes
    }

    /// Summaries by DER: a scan meets the same few certificates again and again (one leaf behind
    /// many names, one root in every path), and a summary depends on the bytes alone. At most 256
    /// (some 1.5 MB with their DER), forgotten all at once when full.
    private static let summaries = SleepingLock<[BytesKey: CertificateSummary]>([:])
    private static let summariesKept = 256
    /// Certificates over 16 KB (a hostile server's) are not kept: the cache stays within a few MB.
    private static let summaryBytesKept = 16_384

    /// The summary already made of `der`, if any.
    private static func knownSummary(_ der: [UInt8]) -> CertificateSummary? {
        der.count <= summaryBytesKept ? summaries.withLock { $0[BytesKey(der)] } : nil
    }

    /// Everything tlsaudit records about this certificate.
    package func summary() -> CertificateSummary {
        let derBytes = der
        if let known = Self.knownSummary(derBytes) { return known }
        let summary = summarize(derBytes)
        guard derBytes.count <= Self.summaryBytesKept else { return summary }
        Self.summaries.withLock { summaries in
            if summaries.count >= Self.summariesKept { summaries.removeAll(keepingCapacity: true) }
            summaries[BytesKey(derBytes)] = summary
        }
        return summary
    }

    /// The summary of the certificate `der`: a summary already made of these bytes without parsing
    /// them again (a parse decodes the key through OpenSSL 3's provider decoders), else parsed.
    package static func summary(der: [UInt8]) throws -> CertificateSummary {
        if let known = knownSummary(der) { return known }
        return try X509Certificate(der: der).summary()
    }

    private func summarize(_ derBytes: [UInt8]) -> CertificateSummary {
        let (signatureAlgorithm, signatureHash) = signature()
        let notBefore = Self.time(X509_get0_notBefore(pointer)), notAfter = Self.time(X509_get0_notAfter(pointer))
        var summary = CertificateSummary(
            subject: Self.rfc2253(X509_get_subject_name(pointer)),
            issuer: Self.rfc2253(X509_get_issuer_name(pointer)),
            commonName: commonName(),
            serial: serialHex(),
            version: Int(X509_get_version(pointer)) + 1,
            notBefore: notBefore.date ?? .distantFuture, // Unreadable: never valid.
            notAfter: notAfter.date ?? .distantPast,
            signatureAlgorithm: signatureAlgorithm,
            signatureHash: signatureHash,
            publicKey: publicKeyDescription(),
            basicConstraints: basicConstraints(),
            keyUsage: keyUsage(),
            extendedKeyUsage: extendedKeyUsage(),
            subjectAlternativeNames: subjectAlternativeNames(),
            unhandledCriticalExtensions: unhandledCriticalExtensions(),
            isSelfSigned: X509_self_signed(pointer, 1) == 1,
            sha256Fingerprint: Digest.sha256(derBytes).hex,
            spkiSHA256: Digest.sha256(spkiDER()).base64,
            der: Data(derBytes))
        summary.nameConstraints = nameConstraints()
        summary.profile = profile()
        let times = [("notBefore", notBefore), ("notAfter", notAfter)]
        let encoding = times.compactMap { field, time in time.date == nil ? nil : time.problem.map { "\(field): \($0)" } }
        let unreadable = times.compactMap { field, time in time.date == nil ? "\(field): \(time.problem ?? "unreadable")" : nil }
        summary.profile?.validityEncoding = encoding.isEmpty ? nil : encoding
        summary.profile?.unreadableValidity = unreadable.isEmpty ? nil : unreadable
        let refusals = times.compactMap { field, time in time.appleProblem.map { "its \(field) \($0)" } }
            + CertificateFields.appleParseProblems(der: derBytes) + extensionRefusals(summary.profile?.extensions ?? [])
        summary.profile?.appleRefusals = refusals.isEmpty ? nil : refusals
        return summary
    }

    /// The extension problems for which trustd refuses a certificate: an extension that appears
    /// twice (its `DuplicateExtension` check) and one whose value trustd's parser refuses
    /// (`AppleExtensionParsers`; the `UnparseableExtension` check, and when critical the
    /// certificate is not even created).
    private func extensionRefusals(_ names: [String]) -> [String] {
        var seen = Set<String>(), repeated: [String] = []
        for name in names where !seen.insert(name).inserted && !repeated.contains(name) { repeated.append(name) }
        var refusals = repeated.map { "it holds the \($0) extension twice (RFC 5280 4.2; trustd's DuplicateExtension check)" }
        for index in 0..<X509_get_ext_count(pointer) {
            guard let ext = X509_get_ext(pointer, index), let object = X509_EXTENSION_get_object(ext),
                  let oid = ObjectIdentifier.contents(object), let value = X509_EXTENSION_get_data(ext) else { continue }
            guard let problem = AppleExtensionParsers.problem(oid: oid, value: ASN1Text.bytes(UnsafePointer(value))) else { continue }
            refusals.append("its \(ObjectIdentifier.name(object)) extension \(problem) (trustd's UnparseableExtension check)")
        }
        return refusals
    }

    /// Key identifiers, criticality and AIA locations, for the conformance lints.
    private func profile() -> CertificateProfile {
        var critical: [String] = [], present: [String] = []
        for index in 0..<X509_get_ext_count(pointer) {
            guard let ext = X509_get_ext(pointer, index), let object = X509_EXTENSION_get_object(ext) else { continue }
            let name = ObjectIdentifier.name(object)
            present.append(name)
            if X509_EXTENSION_get_critical(ext) == 1 { critical.append(name) }
        }
        let malformed = (accessSyntaxProblem().map { [$0] } ?? [])
            + accessDescriptions().filter { $0.uri == nil }.map { "\($0.method): a location of type \($0.locationType), not a URI" }
        let (authorityKeyID, subjectKeyID) = keyIdentifiers()
        var profile = CertificateProfile(
            authorityKeyIdentifier: X509_get_ext_by_NID(pointer, NID_authority_key_identifier, -1) >= 0,
            authorityKeyIdentifierHasKeyID: authorityKeyID != nil,
            subjectKeyIdentifier: X509_get_ext_by_NID(pointer, NID_subject_key_identifier, -1) >= 0,
            criticalExtensions: critical, extensions: present, malformedAccessDescriptions: malformed,
            emptySubject: X509_NAME_entry_count(X509_get_subject_name(pointer)) == 0)
        profile.authorityKeyIdentifierExtras = (X509_get0_authority_issuer(pointer) != nil ? ["authorityCertIssuer"] : [])
            + (X509_get0_authority_serial(pointer) != nil ? ["authorityCertSerialNumber"] : [])
        if let authorityKeyID, let subjectKeyID {
            profile.authorityKeyIDMatchesSubjectKeyID = authorityKeyID == subjectKeyID
        }
        OpenSSLErrors.clear()
        return profile
    }

    /// The authorityKeyIdentifier's keyIdentifier and the subjectKeyIdentifier, when present; read
    /// from the DER when OpenSSL refused the extensions (its getters then answer nil).
    private func keyIdentifiers() -> (authority: [UInt8]?, subject: [UInt8]?) { Self.keyIdentifiers(pointer) }

    static func keyIdentifiers(_ x509: OpaquePointer) -> (authority: [UInt8]?, subject: [UInt8]?) {
        if extensionsRefused(x509) {
            return (extensionValue(x509, nid: NID_authority_key_identifier).flatMap(AppleExtensionParsers.authorityKeyID),
                    extensionValue(x509, nid: NID_subject_key_identifier).flatMap(AppleExtensionParsers.subjectKeyID))
        }
        return (X509_get0_authority_key_id(x509).map { ASN1Text.bytes(UnsafePointer($0)) },
                X509_get0_subject_key_id(x509).map { ASN1Text.bytes(UnsafePointer($0)) })
    }

    /// Why the authority information access extension is no AuthorityInfoAccessSyntax (RFC 5280
    /// 4.2.2.1: one or more AccessDescriptions, in one extension); nil when absent or well formed.
    private func accessSyntaxProblem() -> String? {
        var found: Int32 = 0 // -1: absent, -2: more than one, else the criticality
        guard let raw = X509_get_ext_d2i(pointer, NID_info_access, &found, nil) else {
            OpenSSLErrors.clear()
            return switch found {
            case -1: nil
            case -2: "more than one instance of the extension"
            default: "a value that does not decode as AuthorityInfoAccessSyntax"
            }
        }
        let access = OpaquePointer(raw)
        defer { tlsaudit_AUTHORITY_INFO_ACCESS_free(access) }
        return tlsaudit_sk_ACCESS_DESCRIPTION_num(access) == 0 ? "no access description (it takes one or more)" : nil
    }

    /// The entries of the authority information access extension: the access method's name and
    /// NID, the location's GENERAL_NAME type, and its URI when it is one.
    func accessDescriptions() -> [(method: String, nid: Int32, locationType: Int32, uri: String?)] {
        guard let raw = X509_get_ext_d2i(pointer, NID_info_access, nil, nil) else {
            OpenSSLErrors.clear()
            return []
        }
        let access = OpaquePointer(raw)
        defer { tlsaudit_AUTHORITY_INFO_ACCESS_free(access) }
        return (0..<tlsaudit_sk_ACCESS_DESCRIPTION_num(access)).compactMap { index in
            guard let description = tlsaudit_sk_ACCESS_DESCRIPTION_value(access, index) else { return nil }
            let method = tlsaudit_ACCESS_DESCRIPTION_method(description)
            let type = tlsaudit_ACCESS_DESCRIPTION_location_type(description)
            let uri = type == GEN_URI ? tlsaudit_ACCESS_DESCRIPTION_location(description)
                .flatMap(tlsaudit_GENERAL_NAME_string).map(ASN1Text.latin1) : nil
            return (method.map { ObjectIdentifier.name($0) } ?? "?", method.map(OBJ_obj2nid) ?? NID_undef, type, uri)
        }
    }

    private func nameConstraints() -> NameConstraints? {
        guard let raw = X509_get_ext_d2i(pointer, NID_name_constraints, nil, nil) else { return nil }
        let constraints = raw.assumingMemoryBound(to: NAME_CONSTRAINTS.self)
        defer { tlsaudit_NAME_CONSTRAINTS_free(constraints) }
        /// The DNS and IP subtrees of one list, and whether it has subtrees of other types.
        func read(_ subtrees: OpaquePointer?) -> (dns: [String], ip: [String], other: Bool) {
            var dns: [String] = []
            var ip: [String] = []
            var other = false
            guard let subtrees else { return (dns, ip, other) }
            for index in 0..<tlsaudit_sk_GENERAL_SUBTREE_num(subtrees) {
                guard let base = tlsaudit_GENERAL_SUBTREE_base(subtrees, index) else { continue }
                let value = tlsaudit_GENERAL_NAME_string(base)
                switch tlsaudit_GENERAL_NAME_type(base) {
                case GEN_DNS: dns.append(value.map(ASN1Text.latin1) ?? "")
                case GEN_IPADD: ip.append(value.map(ASN1Text.cidr) ?? "")
                default: other = true
                }
            }
            return (dns, ip, other)
        }
        let permitted = read(tlsaudit_NAME_CONSTRAINTS_permitted(constraints))
        let excluded = read(tlsaudit_NAME_CONSTRAINTS_excluded(constraints))
        let result = NameConstraints(permittedDNS: permitted.dns, excludedDNS: excluded.dns, permittedIP: permitted.ip,
                                     excludedIP: excluded.ip, otherTypes: permitted.other || excluded.other)
        return result
    }

    /// DER of the SubjectPublicKeyInfo (the input of an SPKI pin).
    /// The TBSCertificate (DER, re-encoded) without the extension `required` (nil when the
    /// certificate has none) and without those of `optional` it has: what a CT log's leaf holds
    /// for a precertificate, or what its SCTs sign for a certificate with embedded SCTs.
    func tbsCertificate(without required: Int32, alsoWithout optional: [Int32] = []) -> [UInt8]? {
        guard let copy = X509_dup(pointer) else { return nil }
        defer { X509_free(copy) }
        let index = X509_get_ext_by_NID(copy, required, -1)
        guard index >= 0, let removed = X509_delete_ext(copy, index) else { OpenSSLErrors.clear(); return nil }
        X509_EXTENSION_free(removed)
        for nid in optional {
            let other = X509_get_ext_by_NID(copy, nid, -1)
            if other >= 0, let extra = X509_delete_ext(copy, other) { X509_EXTENSION_free(extra) }
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_re_X509_tbs(copy, &out)
        guard length > 0, let out else { OpenSSLErrors.clear(); return nil }
        defer { tlsaudit_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    package func spkiDER() -> [UInt8] {
        guard let spki = X509_get_X509_PUBKEY(pointer) else { return [] }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_PUBKEY(spki, &out)
        guard length > 0, let out else { return [] }
        defer { tlsaudit_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    // MARK: - Fields

    static func rfc2253(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        X509_NAME_print_ex(bio, name, 0, tlsaudit_XN_FLAG_RFC2253)
        return MemoryBIO.string(bio)
    }

    private func commonName() -> String? {
        guard let name = X509_get_subject_name(pointer) else { return nil }
        let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index),
              let data = X509_NAME_ENTRY_get_data(entry) else { return nil }
        return ASN1Text.utf8(UnsafePointer(data))
    }

    private func serialHex() -> String {
        X509_get_serialNumber(pointer).flatMap { ASN1Text.hex(UnsafePointer($0)) } ?? ""
    }

    /// A validity time read from its ASN.1 text (`CertificateTime`: every X.680 form).
    static func time(_ time: UnsafePointer<ASN1_TIME>?) -> CertificateTime {
        guard let time, let data = ASN1_STRING_get0_data(time) else { return CertificateTime(date: nil, problem: "absent") }
        let text = Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(time))))
        return CertificateTime.read(text, generalized: ASN1_STRING_type(time) == V_ASN1_GENERALIZEDTIME)
    }

    static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        var moment = tm()
        guard let time, ASN1_TIME_to_tm(time, &moment) == 1 else { return .distantPast }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&moment)))
    }

    private func signature() -> (algorithm: String, hash: String?) {
        let nid = X509_get_signature_nid(pointer)
        let algorithm = String(cString: OBJ_nid2ln(nid))
        var digestNID: Int32 = NID_undef
        var keyNID: Int32 = NID_undef
        var bits: Int32 = 0
        var flags: UInt32 = 0
        guard X509_get_signature_info(pointer, &digestNID, &keyNID, &bits, &flags) == 1, digestNID != NID_undef else {
            return (algorithm, Self.hashFromAlgorithmName(algorithm))
        }
        return (algorithm, Self.hashName(nid: digestNID) ?? Self.hashFromAlgorithmName(algorithm))
    }

    /// A digest's OpenSSL short name as tlsaudit writes hashes (`SHA256`; `SHA3-256` becomes
    /// `SHA3256`), in the standard library: Foundation's `replacingOccurrences` goes through
    /// NSString and CFString's search, which showed in the profile of every summary.
    static func hashName(nid: Int32) -> String? {
        guard let name = OBJ_nid2sn(nid) else { return nil }
        return String(cString: name).uppercased().filter { $0 != "-" }
    }

    /// Fallback for algorithms OpenSSL cannot describe (e.g. signed with a digest compiled out).
    static func hashFromAlgorithmName(_ name: String) -> String? {
        let upper = name.uppercased()
        for digest in ["SHA512", "SHA384", "SHA256", "SHA224", "SHA1", "MD5", "MD4", "MD2"] where upper.contains(digest) {
            return digest
        }
        if upper.contains("SHA-1") || upper.hasSuffix("SHA") { return "SHA1" }
        return nil
    }

    private func publicKeyDescription() -> PublicKeyDescription {
        guard let key = X509_get0_pubkey(pointer) else { return PublicKeyDescription(type: "unknown", bits: 0) }
        return PublicKeyInfo.describe(key)
    }

    private var extensionFlags: UInt32 { X509_get_extension_flags(pointer) }

    /// Whether OpenSSL refused to cache this certificate's extensions (`EXFLAG_INVALID`: one that does
    /// not decode, a keyUsage with no bit set, a zero-length pathLenConstraint, one extension twice).
    /// Its getters then answer as if keyUsage, pathLen and the key identifiers were absent, and it
    /// links no issuer; what trustd reads of them is read from the DER instead
    /// (`AppleExtensionParsers`), and trustd's own refusals are judged apart (`appleRefusals`).
    private var extensionsRefusedByOpenSSL: Bool { Self.extensionsRefused(pointer) }

    /// Whether OpenSSL refused to cache `x509`'s extensions (`EXFLAG_INVALID`).
    static func extensionsRefused(_ x509: OpaquePointer) -> Bool {
        X509_get_extension_flags(x509) & UInt32(EXFLAG_INVALID) != 0
    }

    /// The value (the extnValue's contents) of the first extension `nid` of `x509`.
    static func extensionValue(_ x509: OpaquePointer, nid: Int32) -> [UInt8]? {
        let index = X509_get_ext_by_NID(x509, nid, -1)
        guard index >= 0, let ext = X509_get_ext(x509, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        return ASN1Text.bytes(UnsafePointer(data))
    }

    private func basicConstraints() -> BasicConstraints? {
        let index = X509_get_ext_by_NID(pointer, NID_basic_constraints, -1)
        let critical = index >= 0 && X509_EXTENSION_get_critical(X509_get_ext(pointer, index)) == 1
        if extensionsRefusedByOpenSSL, let value = Self.extensionValue(pointer, nid: NID_basic_constraints),
           let read = AppleExtensionParsers.basicConstraints(value) {
            return BasicConstraints(isCA: read.isCA, pathLength: read.isCA ? read.pathLength : nil, critical: critical)
        }
        guard extensionFlags & UInt32(EXFLAG_BCONS) != 0 else { return nil }
        let isCA = extensionFlags & UInt32(EXFLAG_CA) != 0
        let pathLength = X509_get_pathlen(pointer)
        return BasicConstraints(isCA: isCA, pathLength: isCA && pathLength >= 0 ? Int(pathLength) : nil, critical: critical)
    }

    private static let keyUsageNames: [(UInt32, String)] = [
        (UInt32(KU_DIGITAL_SIGNATURE), "digitalSignature"), (UInt32(KU_NON_REPUDIATION), "nonRepudiation"),
        (UInt32(KU_KEY_ENCIPHERMENT), "keyEncipherment"), (UInt32(KU_DATA_ENCIPHERMENT), "dataEncipherment"),
        (UInt32(KU_KEY_AGREEMENT), "keyAgreement"), (UInt32(KU_KEY_CERT_SIGN), "keyCertSign"),
        (UInt32(KU_CRL_SIGN), "cRLSign"), (UInt32(KU_ENCIPHER_ONLY), "encipherOnly"),
        (UInt32(KU_DECIPHER_ONLY), "decipherOnly"),
    ]

    private func keyUsage() -> [String]? {
        let bits: UInt32
        if extensionsRefusedByOpenSSL {
            // A value trustd's parser refuses grants nothing (the certificate is refused for it
            // anyway). No bit set: trustd keeps no usage, and checks none unless it is critical.
            let index = X509_get_ext_by_NID(pointer, NID_key_usage, -1)
            guard index >= 0, let value = Self.extensionValue(pointer, nid: NID_key_usage) else { return nil }
            bits = AppleExtensionParsers.keyUsageBits(value) ?? 0
            if bits == 0, X509_EXTENSION_get_critical(X509_get_ext(pointer, index)) != 1 { return nil }
        } else {
            guard extensionFlags & UInt32(EXFLAG_KUSAGE) != 0 else { return nil }
            bits = X509_get_key_usage(pointer)
        }
        return Self.keyUsageNames.filter { bits & $0.0 != 0 }.map(\.1)
    }

    private func extendedKeyUsage() -> [String]? {
        var critical: Int32 = 0
        guard let raw = X509_get_ext_d2i(pointer, NID_ext_key_usage, &critical, nil) else {
            // Present but unparsable is reported as an empty list: it grants nothing.
            return X509_get_ext_by_NID(pointer, NID_ext_key_usage, -1) >= 0 ? [] : nil
        }
        let stack = OpaquePointer(raw)
        defer { tlsaudit_EXTENDED_KEY_USAGE_free(stack) }
        var usages: [String] = []
        for index in 0..<tlsaudit_sk_ASN1_OBJECT_num(stack) {
            guard let object = tlsaudit_sk_ASN1_OBJECT_value(stack, index) else { continue }
            usages.append(ObjectIdentifier.name(object))
        }
        return usages
    }

    private func subjectAlternativeNames() -> SubjectAlternativeNames {
        var names = SubjectAlternativeNames()
        guard let raw = X509_get_ext_d2i(pointer, NID_subject_alt_name, nil, nil) else {
            OpenSSLErrors.clear()
            return subjectAlternativeNamesByTag()
        }
        let stack = OpaquePointer(raw)
        defer { tlsaudit_GENERAL_NAMES_free(stack) }
        for index in 0..<tlsaudit_sk_GENERAL_NAME_num(stack) {
            guard let entry = tlsaudit_sk_GENERAL_NAME_value(stack, index) else { continue }
            let value = tlsaudit_GENERAL_NAME_string(entry)
            switch tlsaudit_GENERAL_NAME_type(entry) {
            case GEN_DNS: names.dns.append(value.map(ASN1Text.latin1) ?? "")
            case GEN_EMAIL: names.email.append(value.map(ASN1Text.latin1) ?? "")
            case GEN_URI: names.uri.append(value.map(ASN1Text.latin1) ?? "")
            case GEN_IPADD: names.ip.append(value.map(ASN1Text.ipAddress) ?? "")
            default: names.other += 1
            }
        }
        return names
    }

    /// The subjectAltName entries as trustd reads them, by tag, for a value OpenSSL cannot decode
    /// whole (an otherName, x400Address or ediPartyName whose contents do not decode, a constructed
    /// URI): trustd still matches the dNSName and iPAddress entries beside them. Empty when trustd
    /// refuses the value too (the certificate is then refused for it).
    private func subjectAlternativeNamesByTag() -> SubjectAlternativeNames {
        var names = SubjectAlternativeNames()
        guard let value = Self.extensionValue(pointer, nid: NID_subject_alt_name),
              let entries = AppleExtensionParsers.generalNameEntries(value) else { return names }
        for (tag, contents) in entries {
            switch tag {
            case 0x82: names.dns.append(ASN1Text.latin1(contents))
            case 0x81: names.email.append(ASN1Text.latin1(contents))
            case 0x86: names.uri.append(ASN1Text.latin1(contents))
            case 0x87: names.ip.append(ASN1Text.ipAddress(contents))
            default: names.other += 1
            }
        }
        return names
    }

    /// Critical extensions trustd does not know (`AppleExtensionParsers.recognizes`): each fails the chain.
    private func unhandledCriticalExtensions() -> [String] {
        var oids: [String] = []
        for index in 0..<X509_get_ext_count(pointer) {
            guard let ext = X509_get_ext(pointer, index), X509_EXTENSION_get_critical(ext) == 1,
                  let object = X509_EXTENSION_get_object(ext), let oid = ObjectIdentifier.contents(object) else { continue }
            if !AppleExtensionParsers.recognizes(oid: oid) { oids.append(ObjectIdentifier.dotted(object)) }
        }
        return oids
    }
}

/// Describes keys (certificate keys and ephemeral key-exchange keys).
enum PublicKeyInfo {
    static func describe(_ key: OpaquePointer) -> PublicKeyDescription {
        let bits = Int(EVP_PKEY_get_bits(key))
        let typeName = EVP_PKEY_get0_type_name(key).map { String(cString: $0) } ?? String(cString: OBJ_nid2sn(EVP_PKEY_get_base_id(key)))
        var curve: String?
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        if EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, &buffer, buffer.count, &length) == 1 {
            curve = buffer.nulTerminatedString
        }
        return PublicKeyDescription(type: typeName, bits: bits, curve: curve)
    }
}

enum ObjectIdentifier {
    /// `serverAuth` for known OIDs, the dotted form otherwise.
    static func name(_ object: OpaquePointer) -> String {
        let nid = OBJ_obj2nid(object)
        if nid != NID_undef, let short = OBJ_nid2sn(nid) { return String(cString: short) }
        return dotted(object)
    }

    /// The OID's content octets (its DER without tag and length), as `AppleExtensionParsers` keys them.
    static func contents(_ object: OpaquePointer) -> [UInt8]? {
        guard let data = OBJ_get0_data(object) else { return nil }
        return Array(UnsafeBufferPointer(start: data, count: Int(OBJ_length(object))))
    }

    static func dotted(_ object: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        OBJ_obj2txt(&buffer, Int32(buffer.count), object, 1)
        return buffer.nulTerminatedString
    }
}

/// Reading ASN.1 strings.
enum ASN1Text {
    /// An INTEGER as uppercase hex (`-` first when negative), as `BN_bn2hex` writes it.
    static func hex(_ integer: UnsafePointer<ASN1_INTEGER>) -> String? {
        guard let bignum = ASN1_INTEGER_to_BN(integer, nil) else { return nil }
        defer { BN_free(bignum) }
        guard let hex = BN_bn2hex(bignum) else { return nil }
        defer { tlsaudit_OPENSSL_free(hex) }
        return String(cString: hex)
    }

    static func utf8(_ string: UnsafePointer<ASN1_STRING>) -> String? {
        var out: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&out, string)
        guard length >= 0, let out else { return nil }
        defer { tlsaudit_OPENSSL_free(out) }
        return String(decoding: UnsafeBufferPointer(start: out, count: Int(length)), as: UTF8.self)
    }

    /// IA5String content as is (non-ASCII bytes kept visible, never dropped).
    static func latin1(_ string: UnsafePointer<ASN1_STRING>) -> String { latin1(bytes(string)) }

    static func latin1(_ bytes: [UInt8]) -> String {
        bytes.map { byte in
            (0x20..<0x7f).contains(byte) ? String(UnicodeScalar(byte)) : String(format: "\\x%02x", byte)
        }.joined()
    }

    static func ipAddress(_ string: UnsafePointer<ASN1_STRING>) -> String { ipAddress(bytes(string)) }

    static func ipAddress(_ raw: [UInt8]) -> String {
        switch raw.count {
        case 4: return raw.map(String.init).joined(separator: ".")
        case 16:
            var address = in6_addr()
            withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: raw) }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
            return buffer.nulTerminatedString
        default: return raw.hex
        }
    }

    /// An iPAddress name constraint (address then mask, 8 or 32 bytes) as CIDR text.
    static func cidr(_ string: UnsafePointer<ASN1_STRING>) -> String {
        let raw = bytes(string)
        guard raw.count == 8 || raw.count == 32 else { return raw.hex }
        let half = raw.count / 2
        let prefix = raw[half...].reduce(0) { $0 + $1.nonzeroBitCount }
        let address: String
        if half == 4 {
            address = raw[..<4].map(String.init).joined(separator: ".")
        } else {
            var v6 = in6_addr()
            withUnsafeMutableBytes(of: &v6) { $0.copyBytes(from: raw[..<16]) }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count))
            address = buffer.nulTerminatedString
        }
        return "\(address)/\(prefix)"
    }

    static func bytes(_ string: UnsafePointer<ASN1_STRING>) -> [UInt8] {
        let length = Int(ASN1_STRING_length(string))
        guard length > 0, let data = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: length))
    }
}

/// Reading a memory BIO.
package enum MemoryBIO {
    package static func string(_ bio: OpaquePointer) -> String {
        String(decoding: bytes(bio), as: UTF8.self)
    }

    package static func bytes(_ bio: OpaquePointer) -> [UInt8] {
        var data: UnsafeMutablePointer<CChar>?
        let length = tlsaudit_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }
}

/// SHA-256 through OpenSSL: the package's one implementation.
public enum Digest {
    /// `sha256` as lowercase hex, for the modules that are handed a `SHA256Hex`.
    public static let sha256Hex: SHA256Hex = { sha256($0).hex }

    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = EVP_Digest(bytes, bytes.count, &out, &length, sha256Method.pointer, nil)
        return out
    }

    /// SHA-256 fetched once: `EVP_sha256()` is fetched again from the provider on every digest,
    /// 30K instructions of locked look-ups around hashing a few hundred bytes (a stored scan
    /// hashes two such texts). Never freed: it lives as long as the process.
    private static let sha256Method = MethodPointer(EVP_MD_fetch(nil, "SHA2-256", nil) ?? EVP_sha256())

    /// An `EVP_MD` shared by threads (OpenSSL's methods are immutable once fetched).
    private struct MethodPointer: @unchecked Sendable {
        let pointer: OpaquePointer?
        init(_ pointer: OpaquePointer?) { self.pointer = pointer }
    }
}

extension Array where Element == UInt8 {
    var base64: String { Data(self).base64EncodedString() }
}
