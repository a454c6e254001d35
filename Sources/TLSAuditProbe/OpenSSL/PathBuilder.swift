import COpenSSL
import Foundation
import TLSAuditModel
import TLSAuditSupport

/// Builds paths from a presented chain to the anchors the way webpki, Go's crypto/x509 and
/// BoringSSL do: every certificate whose subject names the issuer and whose key verifies the
/// signature is a candidate (anchors first, then the certificates sent), a candidate that leads
/// nowhere is left for the next one, and every complete path is then verified by OpenSSL's
/// X509_verify_cert alone, collecting every error by depth. Which path counts is chosen when the
/// result is judged at a date (`PathCandidates.judged(at:)`): the first with the fewest problems.
enum PathBuilder {
    /// Bounds on the search, against chains of hundreds of certificates, many certificates with
    /// one subject, and loops: certificates in one path, complete paths kept, signature checks.
    enum Limits {
        static let pathLength = 12
        static let completePaths = 8
        static let signatureChecks = 64
    }

    /// The certificates of `building`'s path that were fetched from caIssuers URLs (`aia_fetch`),
    /// as candidates for a second build (AFNetworking's certificate mode: the device fetches them too).
    static func fetchedIssuers(of building: PathBuildingResult) -> [X509Certificate] {
        building.path.filter { $0.source == .aiaFetched }.compactMap { try? X509Certificate(der: Array($0.certificate.der)) }
    }

    /// A builder of `presented`'s path with only the given certificates (DER) as anchors, partial
    /// chains allowed (a pinned leaf is its own anchor), judged at `time`: AFNetworking's certificate
    /// mode (`ProbedAddress.buildWithPinnedAnchors`, `ATSConfigurationProbe.buildWithPinnedAnchors`).
    static func pinnedAnchorBuilder(presented: [X509Certificate], at time: Date) -> @Sendable ([Data]) -> PathBuildingResult? {
        { pinned in
            let anchors = pinned.compactMap { try? X509Certificate(der: Array($0)) }
            guard !anchors.isEmpty, let store = try? TrustStore(pinnedAnchors: anchors) else { return nil }
            var result = build(presented: presented, store: store).judged(at: time)
            // On an iPhone the root-store rules come with Apple's roots only (trustd's system anchors).
            result.anchorIsPublic = PublicRoots.anchorIn(result)?.contains("apple") ?? false
            return result
        }
    }

    /// Builds from `presented[leafIndex]` (the leaf; 0 for a server's chain) using every other
    /// presented certificate as an untrusted intermediate candidate.
    /// `summaries`, when given, are the presented certificates' summaries (same order): reused for
    /// path elements that are presented certificates instead of being computed again. The paths'
    /// summaries carry no `daysLeft` (built paths are reused across scans): callers judge them at
    /// their own time. With `fetchMissing` (`aia_fetch`), a path that reaches no anchor is extended
    /// with the certificates its last certificate's caIssuers URLs give, up to three times, every
    /// fetch done by that deadline.
    static func build(presented: [X509Certificate], leafIndex: Int = 0, store: TrustStore,
                      summaries: [CertificateSummary]? = nil, fetchMissing: Deadline? = nil) -> PathCandidates {
        guard presented.indices.contains(leafIndex) else {
            return PathCandidates([PathBuildingResult(path: [], anchored: false, issues: [])])
        }
        let known = summaries.flatMap { $0.count == presented.count ? $0 : nil }
        let presentedFingerprints = known?.map(\.sha256Fingerprint) ?? presented.map { Digest.sha256($0.der).hex }
        let key = TrustStore.BuiltPathKey(fingerprints: presentedFingerprints, leafIndex: leafIndex, fetchesMissing: fetchMissing != nil)
        if let built = store.builtPaths.withLock({ $0[key] }) { return built }

        var labels = PathLabels(presented: presented, known: known, fingerprints: presentedFingerprints, store: store, fetched: [])
        var result = candidates(leafIndex: leafIndex, store: store, labels: labels)
        if let deadline = fetchMissing {
            for _ in 0..<3 where !result.candidates.contains(where: \.anchored) {
                let fetched = fetchIssuers(of: result.candidates[0].path.last, among: presented + labels.fetched, deadline: deadline)
                guard !fetched.isEmpty else { break }
                labels.fetched += fetched
                result = candidates(leafIndex: leafIndex, store: store, labels: labels)
            }
        }
        guard result.candidates.contains(where: \.anchored), let known, known.reduce(0, { $0 + $1.der.count }) <= 32_768 else {
            return result
        }
        store.builtPaths.withLock { built in
            if built.count >= 256 { built.removeAll(keepingCapacity: true) }
            built[key] = result
        }
        return result
    }

    /// OpenSSL's own path, then every other complete path the search finds, each verified.
    private static func candidates(leafIndex: Int, store: TrustStore, labels: PathLabels) -> PathCandidates {
        let leaf = labels.presented[leafIndex].pointer
        let untrusted = labels.presented.enumerated().filter { $0.offset != leafIndex }.map(\.element.pointer)
            + labels.fetched.map(\.pointer)
        let openSSLChoice = verify(leaf: leaf, untrusted: untrusted, store: store.pointer, partialChain: store.partialChain, labels: labels)
        var candidates = [openSSLChoice]
        var searchLimitReached = false
        if store.searchesAlternatives { // Pinned certificates get OpenSSL's own path, as AFNetworking gets it.
            let search = CandidateSearch(leaf: leaf, others: untrusted, store: store)
            searchLimitReached = search.limitReached
            let chosen = openSSLChoice.path.map(\.certificate.sha256Fingerprint)
            for path in search.shortestFirst {
                let elements = path.map(labels.element(for:))
                guard elements.map(\.certificate.sha256Fingerprint) != chosen else { continue }
                candidates.append(verify(leaf: path[0].pointer,
                                         untrusted: path.dropFirst().filter { !$0.fromStore }.map(\.pointer),
                                         anchors: path.filter(\.fromStore).map(\.pointer), partialChain: store.partialChain,
                                         labels: labels, searched: path.map(\.pointer)))
            }
            // OpenSSL refuses only the same certificate twice, so among roots that cross-sign each
            // other its path may walk a loop (A by B, B by A, A by C): the search's paths come first then.
            if Self.loops(openSSLChoice.path), candidates.count > 1 { candidates.append(candidates.removeFirst()) }
        }
        return PathCandidates(candidates, searchLimitReached: searchLimitReached)
    }

    /// Whether `path` holds one subject and key twice (`CandidateSearch.sameSubjectAndKey`).
    private static func loops(_ path: [PathElement]) -> Bool {
        Set(path.map { [$0.certificate.subject, $0.certificate.spkiSHA256] }).count < path.count
    }

    /// The certificates the caIssuers URLs of `last` (the end of a path that reaches no anchor)
    /// give, but those already known; nothing for a self-signed certificate.
    private static func fetchIssuers(of last: PathElement?, among known: [X509Certificate], deadline: Deadline) -> [X509Certificate] {
        guard let last, !last.certificate.isSelfSigned,
              let certificate = known.first(where: { Digest.sha256($0.der).hex == last.certificate.sha256Fingerprint }) else { return [] }
        let knownDER = Set(known.map(\.der))
        var fetched: [X509Certificate] = []
        for url in certificate.caIssuersURLs.prefix(2) where HTTPClient.fetches(url) {
            let answer = RevocationCache.shared.fetch("aia \(url)", url: url, deadline: deadline, answers: nil,
                                                      request: ("GET", [], []), maximumBody: 65_536) { body in
                (X509Certificate.fromIssuerAnswer(body).prefix(4).map { $0 }, nil as Date?)
            }
            if case .success(let certificates) = answer {
                fetched += certificates.filter { !knownDER.contains($0.der) && !fetched.map(\.der).contains($0.der) }
            }
        }
        return fetched
    }

    /// One certificate of a candidate path and where it came from.
    struct Node {
        var pointer: OpaquePointer
        var fromStore: Bool
    }

    /// The depth-first search for complete paths (ending in a self-signed anchor, or in any anchor
    /// of a partial-chain store), within `Limits`.
    final class CandidateSearch {
        private(set) var paths: [[Node]] = []
        private(set) var limitReached = false
        private var signatureChecks = 0
        private let others: [OpaquePointer]
        private let lookup: OpaquePointer?
        /// Any anchor ends a path, not only a self-signed one (`TrustStore.partialChain`).
        private let anyAnchorEnds: Bool
        /// Stacks returned by the store's lookups, freed with the search: they keep the anchors alive.
        private var lookedUp: [OpaquePointer] = []

        /// The complete paths, shorter ones first (in the order found among equals): through a mesh
        /// of cross-signs the depth-first search may reach an anchor the long way round first.
        var shortestFirst: [[Node]] {
            paths.enumerated().sorted { ($0.element.count, $0.offset) < ($1.element.count, $1.offset) }.map(\.element)
        }

        init(leaf: OpaquePointer, others: [OpaquePointer], store: TrustStore) {
            self.others = others
            anyAnchorEnds = store.partialChain
            lookup = X509_STORE_CTX_new()
            guard let lookup, X509_STORE_CTX_init(lookup, store.pointer, leaf, nil) == 1 else {
                OpenSSLErrors.clear()
                return
            }
            if anchors(named: X509_get_subject_name(leaf)).contains(where: { X509_cmp($0, leaf) == 0 }) {
                paths.append([Node(pointer: leaf, fromStore: true)]) // The leaf itself is trusted.
            } else {
                extend([Node(pointer: leaf, fromStore: false)])
            }
            OpenSSLErrors.clear()
        }

        deinit {
            for stack in lookedUp { tlsaudit_sk_X509_pop_free(stack) }
            if let lookup { X509_STORE_CTX_free(lookup) }
        }

        private func extend(_ path: [Node]) {
            guard paths.count < Limits.completePaths, path.count < Limits.pathLength else {
                limitReached = true
                return
            }
            let current = path[path.count - 1].pointer
            let issuerName = X509_get_issuer_name(current)
            let anchors = likelyFirst(anchors(named: issuerName), for: current)
            for anchor in anchors where !path.contains(where: { Self.sameSubjectAndKey($0.pointer, anchor) }) {
                guard signs(anchor, current) else { continue }
                let extended = path + [Node(pointer: anchor, fromStore: true)]
                if anyAnchorEnds || X509_self_signed(anchor, 0) == 1 { paths.append(extended) } else { extend(extended) }
                if limitReached { return }
            }
            if X509_self_signed(current, 0) == 1 { return } // A root that is not an anchor ends nowhere.
            let named = others.filter { X509_NAME_cmp(X509_get_subject_name($0), issuerName) == 0 }
            for candidate in likelyFirst(named, for: current) {
                // A sent copy of an anchor was tried as the anchor; a subject and key appear once per path.
                guard !anchors.contains(where: { X509_cmp($0, candidate) == 0 }),
                      !path.contains(where: { Self.sameSubjectAndKey($0.pointer, candidate) }),
                      signs(candidate, current) else { continue }
                extend(path + [Node(pointer: candidate, fromStore: false)])
                if limitReached { return }
            }
        }

        /// Whether two certificates certify one key under one name. A path that comes back to a
        /// subject and key it already holds is a loop, whichever certificate (a cross-sign) carries
        /// them the second time: dropping the loop gives a shorter path to the same anchor (Go's
        /// rule). In a mesh of roots cross-signing each other, comparing whole certificates instead
        /// walked every cross-sign of every root and spent the search's bounds on those loops.
        static func sameSubjectAndKey(_ first: OpaquePointer, _ second: OpaquePointer) -> Bool {
            X509_NAME_cmp(X509_get_subject_name(first), X509_get_subject_name(second)) == 0
                && EVP_PKEY_eq(X509_get0_pubkey(first), X509_get0_pubkey(second)) == 1
        }

        /// `issuers` with those whose subject key identifier is `certificate`'s authority key
        /// identifier first and those whose identifier differs last (Go's order), each group in input order.
        private func likelyFirst(_ issuers: [OpaquePointer], for certificate: OpaquePointer) -> [OpaquePointer] {
            guard issuers.count > 1, let authority = X509_get0_authority_key_id(certificate) else { return issuers }
            func rank(_ issuer: OpaquePointer) -> Int {
                guard let subject = X509_get0_subject_key_id(issuer) else { return 1 }
                return ASN1_OCTET_STRING_cmp(subject, authority) == 0 ? 0 : 2
            }
            return issuers.enumerated().sorted { (rank($0.element), $0.offset) < (rank($1.element), $1.offset) }.map(\.element)
        }

        /// Whether `issuer`'s key verifies `certificate`'s signature (counted against the limit).
        private func signs(_ issuer: OpaquePointer, _ certificate: OpaquePointer) -> Bool {
            guard signatureChecks < Limits.signatureChecks else {
                limitReached = true
                return false
            }
            signatureChecks += 1
            guard let key = X509_get0_pubkey(issuer) else { return false }
            return X509_verify(certificate, key) == 1
        }

        /// The store's certificates with subject `name` (loaded from the hashed directory on demand).
        private func anchors(named name: OpaquePointer?) -> [OpaquePointer] {
            guard let lookup, let name, let stack = X509_STORE_CTX_get1_certs(lookup, name) else {
                OpenSSLErrors.clear()
                return []
            }
            lookedUp.append(stack)
            return (0..<tlsaudit_sk_X509_num(stack)).compactMap { tlsaudit_sk_X509_value(stack, $0) }
        }
    }

    /// Turns OpenSSL's certificates back into path elements with their summaries and sources.
    struct PathLabels {
        var presented: [X509Certificate]
        var known: [CertificateSummary]?
        var fingerprints: [String]
        var store: TrustStore
        /// Certificates fetched from caIssuers URLs (`aia_fetch`).
        var fetched: [X509Certificate]

        func element(for node: Node) -> PathElement { element(for: node.pointer) }

        func element(for pointer: OpaquePointer) -> PathElement {
            // OpenSSL's chain holds the very X509 objects it was given for presented certificates.
            let summary: CertificateSummary
            if let same = presented.firstIndex(where: { $0.pointer == pointer }) {
                summary = known?[same] ?? X509Certificate(borrowing: pointer).summary()
            } else {
                summary = store.summary(ofStoreCertificate: pointer)
            }
            let presentedIndex = fingerprints.firstIndex(of: summary.sha256Fingerprint)
            let source: CertificateSource = presentedIndex != nil ? .presented
                : fetched.contains(where: { $0.pointer == pointer }) ? .aiaFetched : .trustStore
            var element = PathElement(certificate: summary, source: source, presentedIndex: presentedIndex)
            element.certificate.daysLeft = nil
            return element
        }
    }

    /// Verifies the path OpenSSL builds from `leaf` over exactly `untrusted` to exactly `anchors`
    /// (a candidate path found by the search).
    private static func verify(leaf: OpaquePointer, untrusted: [OpaquePointer], anchors: [OpaquePointer], partialChain: Bool,
                               labels: PathLabels, searched: [OpaquePointer]) -> PathBuildingResult {
        guard let store = X509_STORE_new() else { return PathBuildingResult(path: [], anchored: false, issues: []) }
        defer { X509_STORE_free(store) }
        linkIssuersAsTrustd(store)
        for anchor in anchors { X509_STORE_add_cert(store, anchor) }
        OpenSSLErrors.clear()
        return verify(leaf: leaf, untrusted: untrusted, store: store, partialChain: partialChain, labels: labels, searched: searched)
    }

    /// Runs X509_verify_cert on `leaf` with `untrusted` intermediates against `store`. For a path
    /// the search found (`searched`, each link's signature checked), a certificate whose extensions
    /// OpenSSL refused (`X509Certificate.extensionsRefused`) that an anchor issued stops OpenSSL's
    /// chain building with no error reported (X509_self_signed cannot cache its extensions:
    /// X509_V_ERR_UNSPECIFIED) where trustd reads them. The path then stands as the search found it, judged by
    /// TrustEvaluator's own rules (issuers, pathLen, keyUsage, EKU, DNS and IP names and their
    /// constraints, dates), unless a certificate on it carries what only OpenSSL's verification
    /// judges (`judgedByOpenSSLOnly`): then it stays unverified.
    private static func verify(leaf: OpaquePointer, untrusted: [OpaquePointer], store: OpaquePointer, partialChain: Bool,
                               labels: PathLabels, searched: [OpaquePointer]? = nil) -> PathBuildingResult {
        guard let context = X509_STORE_CTX_new(), let stack = tlsaudit_sk_X509_new_null() else {
            return PathBuildingResult(path: [], anchored: false, issues: [])
        }
        defer {
            X509_STORE_CTX_free(context)
            tlsaudit_sk_X509_free(stack)
        }
        for certificate in untrusted { _ = tlsaudit_sk_X509_push(stack, certificate) }
        guard X509_STORE_CTX_init(context, store, leaf, stack) == 1 else {
            OpenSSLErrors.clear()
            return PathBuildingResult(path: [], anchored: false, issues: [])
        }
        // Dates are checked by TrustEvaluator (inclusive notAfter, injectable time).
        // RFC 5280 policy processing (requireExplicitPolicy, policy mappings, inhibitAnyPolicy) with
        // anyPolicy as the initial policy set; OpenSSL needs the set given explicitly.
        // Critical extensions are judged by TrustEvaluator against the list trustd parses
        // (`AppleExtensionParsers.recognizes`), not OpenSSL's.
        X509_STORE_CTX_set_flags(context, UInt(X509_V_FLAG_NO_CHECK_TIME) | UInt(X509_V_FLAG_POLICY_CHECK) | UInt(X509_V_FLAG_IGNORE_CRITICAL)
                                 | (partialChain ? UInt(X509_V_FLAG_PARTIAL_CHAIN) : 0))
        if let parameters = X509_STORE_CTX_get0_param(context), let anyPolicy = OBJ_txt2obj("2.5.29.32.0", 1) {
            X509_VERIFY_PARAM_add0_policy(parameters, anyPolicy) // takes ownership
        }
        let collector = VerifyErrorCollector()
        let verified = collector.verify(context)

        var path: [PathElement] = []
        var refusedByOpenSSL: [Bool] = []
        if let chain = X509_STORE_CTX_get1_chain(context) {
            defer { tlsaudit_sk_X509_pop_free(chain) }
            for index in 0..<tlsaudit_sk_X509_num(chain) {
                guard let pointer = tlsaudit_sk_X509_value(chain, index) else { continue }
                path.append(labels.element(for: pointer))
                refusedByOpenSSL.append(X509Certificate.extensionsRefused(pointer))
            }
        }
        // OpenSSL's chain stopped at a refused certificate (see above).
        if !verified, collector.issues.isEmpty, X509_STORE_CTX_get_error(context) == X509_V_ERR_UNSPECIFIED,
           let searched, refusedByOpenSSL.last == true, !searched.contains(where: judgedByOpenSSLOnly) {
            return PathBuildingResult(path: searched.map(labels.element(for:)), anchored: true, issues: [])
        }
        var issues: [PathBuildingIssue] = []
        let certificates = path.map(\.certificate)
        for (code, depth) in collector.issues {
            let issue = PathBuildingIssue(kind: kind(of: code), depth: Int(depth), code: Int(code),
                                          detail: String(cString: X509_verify_cert_error_string(Int(code))))
            // A v1 or v2 CA is judged by trustd's rule (`CertificateRules.actsAsCA`), not OpenSSL's.
            if issue.kind == .issuerNotCA, certificates.indices.contains(issue.depth), certificates[issue.depth].version < 3,
               CertificateRules.actsAsCA(path: certificates, depth: issue.depth) { continue }
            // Extensions OpenSSL refused (`X509Certificate.extensionsRefusedByOpenSSL`) are judged as
            // trustd reads them: its parsers' refusals are `trust.invalid` of their own
            // (`appleRefusals`), and whether the certificate is a CA by the basicConstraints read.
            if refusedByOpenSSL.indices.contains(issue.depth), refusedByOpenSSL[issue.depth] {
                if issue.code == Int(X509_V_ERR_INVALID_EXTENSION) { continue }
                if issue.kind == .issuerNotCA, CertificateRules.actsAsCA(path: certificates, depth: issue.depth) { continue }
            }
            if !issues.contains(issue) { issues.append(issue) }
        }
        let anchored = verified && issues.allSatisfy { $0.kind != .untrustedRoot && $0.kind != .missingIssuer && $0.kind != .selfSignedLeaf }
        return PathBuildingResult(path: path, anchored: anchored && !path.isEmpty, issues: issues)
    }

    /// Whether `issuer` issued `subject` as trustd links them: the issuer's subject is the
    /// subject's issuer name and, when both identifiers are present, the authorityKeyIdentifier's
    /// keyIdentifier is the issuer's subjectKeyIdentifier (`SecPolicyCheckIdLinkage`). The
    /// authorityKeyIdentifier's authorityCertIssuer and authorityCertSerialNumber, which OpenSSL also
    /// compares (`X509_check_akid`), are never read by trustd: a leaf naming the serial of an
    /// intermediate since reissued with the same key still chains to the new one. An issuer whose
    /// keyUsage lacks keyCertSign is linked (as OpenSSL's own check_issued links it) and judged
    /// for it afterwards (`trust.key-usage`). When OpenSSL refused either certificate's extensions
    /// (`EXFLAG_INVALID`, where its check answers X509_V_ERR_UNSPECIFIED and links nothing), names
    /// and key identifiers are compared from the DER, as trustd reads them.
    static func issued(_ subject: OpaquePointer, by issuer: OpaquePointer) -> Bool {
        let result = X509_check_issued(issuer, subject)
        OpenSSLErrors.clear()
        if result == X509_V_ERR_UNSPECIFIED, X509Certificate.extensionsRefused(subject) || X509Certificate.extensionsRefused(issuer) {
            guard X509_NAME_cmp(X509_get_subject_name(issuer), X509_get_issuer_name(subject)) == 0 else { return false }
            guard let authority = X509Certificate.keyIdentifiers(subject).authority,
                  let key = X509Certificate.keyIdentifiers(issuer).subject else { return true }
            return authority == key
        }
        return [X509_V_OK, X509_V_ERR_AKID_ISSUER_SERIAL_MISMATCH, X509_V_ERR_KEYUSAGE_NO_CERTSIGN].contains(result)
    }

    /// Whether `x509` holds what only OpenSSL's verification judges: name constraints (TrustEvaluator
    /// checks DNS and IP names, not directoryName or e-mail ones) and the policy extensions
    /// (policyConstraints, policyMappings, inhibitAnyPolicy).
    private static func judgedByOpenSSLOnly(_ x509: OpaquePointer) -> Bool {
        [NID_name_constraints, NID_policy_constraints, NID_policy_mappings, NID_inhibit_any_policy]
            .contains { X509_get_ext_by_NID(x509, $0, -1) >= 0 }
    }

    /// Makes `store`'s verifications link certificates with `issued(_:by:)` (OpenSSL's check_issued).
    static func linkIssuersAsTrustd(_ store: OpaquePointer) {
        X509_STORE_set_check_issued(store) { _, subject, issuer in
            guard let subject, let issuer else { return 0 }
            return PathBuilder.issued(subject, by: issuer) ? 1 : 0
        }
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

/// Runs X509_verify_cert collecting every error by depth instead of stopping at the first (C
/// callbacks cannot capture, so the collector rides in the context's app data).
final class VerifyErrorCollector {
    private(set) var issues: [(code: Int32, depth: Int32)] = []

    /// Verifies with `context` (initialised by the caller); true when OpenSSL found no error.
    func verify(_ context: OpaquePointer) -> Bool {
        let unmanaged = Unmanaged.passRetained(self)
        defer { unmanaged.release() }
        _ = tlsaudit_X509_STORE_CTX_set_app_data(context, unmanaged.toOpaque())
        X509_STORE_CTX_set_verify_cb(context) { ok, context in
            guard ok == 0, let context, let raw = tlsaudit_X509_STORE_CTX_get_app_data(context) else { return ok }
            let collector = Unmanaged<VerifyErrorCollector>.fromOpaque(raw).takeUnretainedValue()
            collector.issues.append((X509_STORE_CTX_get_error(context), X509_STORE_CTX_get_error_depth(context)))
            return 1 // Keep going: record every problem, not just the first.
        }
        let verified = X509_verify_cert(context) == 1
        OpenSSLErrors.clear()
        return verified
    }
}
