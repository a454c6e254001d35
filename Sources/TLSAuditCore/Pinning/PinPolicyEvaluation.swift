public import Foundation

/// How a chain fares when the pinned certificates are its only trust anchors (AFNetworking's
/// certificate mode, step 5 of docs/apple-rules.md section 4).
public struct PinnedAnchorEvaluation: Sendable {
    /// The path as built to a pinned anchor, leaf first (partial when none was reached).
    public var path: [CertificateSummary]
    /// Trust errors of that evaluation (dates, the name when validated, the path); empty when it passes.
    public var errors: [Finding]

    public init(path: [CertificateSummary], errors: [Finding]) {
        self.path = path
        self.errors = errors
    }
}

extension PinPolicy {
    /// Whether a trust error counts under AFNetworking's trust policy: with `validatesDomainName`
    /// the SSL policy (everything); without, basic X.509 (chain and dates), where the name and the
    /// SSL-only rules (serverAuth EKU, lifetime, Certificate Transparency) are not evaluated.
    func appliesUnderTrustPolicy(_ error: Finding) -> Bool {
        validatesDomainName || ![.trustHostnameMismatch, .trustEKU, .trustLifetime, .trustCertificateTransparency].contains(error.id)
    }

    /// Judges a chain the way the pinned client would, in AFNetworking's order (`AFSecurityPolicy
    /// evaluateServerTrust:forDomain:`, docs/apple-rules.md section 4) or with NSPinnedDomains' rules.
    ///
    /// - `trustErrors`: tlsaudit's trust findings of severity error for the chain against the
    ///   target's anchors (system store or `ca_file`), with the name check; hostname mismatches are
    ///   ignored when `validatesDomainName` is false (AFNetworking's basic X.509 policy).
    /// - `evaluateWithPinnedAnchors`: certificate mode's second evaluation, the chain judged with the
    ///   given pinned certificates as its only anchors (dates always, the name when
    ///   `validatesDomainName`); given the DER of every pinned certificate known (those of the chain,
    ///   and `pinnedCertificates`); computed by the caller, who can verify signatures.
    public func evaluate(presented: [CertificateSummary], path: [PathElement], trustErrors: [Finding],
                         evaluateWithPinnedAnchors: ([Data]) -> PinnedAnchorEvaluation) -> PinEvaluation {
        let leaf = presented.first
        func result(_ state: PinEvaluation.State, _ message: String, matched: String? = nil) -> PinEvaluation {
            PinEvaluation(state: state, message: message, matched: matched, leafSPKI: leaf?.spkiSHA256,
                          leafFingerprint: leaf?.sha256Fingerprint)
        }
        if acceptsAnyCertificate {
            return result(.match, "mode none with allow_invalid_certificates and without validates_domain_name accepts any certificate at all")
        }
        guard pinsSomething else { return result(.none, "no pins configured") }
        guard let leaf else { return result(.mismatch, "the server presented no certificate") }
        let relevantErrors = trustErrors.filter(appliesUnderTrustPolicy)
        func listed(_ errors: [Finding]) -> String { Set(errors.map(\.id.rawValue)).sorted().joined(separator: ", ") }
        // The chain the client uses: the path as built (anchor included). Extra certificates the
        // server sends are not part of it, so they cannot satisfy a pin.
        let chain = path.isEmpty ? presented : path.map(\.certificate)
        let seen = "leaf SPKI sha256/\(leaf.spkiSHA256), leaf certificate \(leaf.sha256Fingerprint)"

        if !leafIdentities.isEmpty || !caIdentities.isEmpty {
            // NSPinnedDomains: pinning adds to normal trust.
            if !relevantErrors.isEmpty {
                return result(.mismatch, "the chain is not trusted (\(listed(relevantErrors))), so pinning fails too")
            }
            if !leafIdentities.isEmpty, !leafIdentities.contains(leaf.spkiSHA256) {
                return result(.mismatch, "the leaf's SPKI is not in NSPinnedLeafIdentities: \(seen)")
            }
            let cas = chain.dropFirst()
            if !caIdentities.isEmpty {
                guard let ca = cas.first(where: { caIdentities.contains($0.spkiSHA256) }) else {
                    let shown = RecordBudget.list(cas.map { "\($0.displayName) sha256/\($0.spkiSHA256)" }, separator: "; ")
                    return result(.mismatch, "no CA of the chain is in NSPinnedCAIdentities (CAs seen: \(shown.isEmpty ? "none" : shown))")
                }
                return result(.match, "CA \(ca.displayName) matches a pinned CA identity", matched: "sha256/\(ca.spkiSHA256)")
            }
            return result(.match, "the leaf matches a pinned leaf identity", matched: "sha256/\(leaf.spkiSHA256)")
        }

        // Step 4: with invalid certificates not allowed, the normal trust evaluation comes first.
        if mode != .none, !allowInvalidCertificates, !relevantErrors.isEmpty {
            return result(.mismatch, "the chain is not trusted (\(listed(relevantErrors))) and allow_invalid_certificates is off")
        }
        switch mode {
        case .none:
            return result(.none, "no pins configured")
        case .publicKey:
            // Step 6: any public key of the chain; no anchored evaluation.
            let pinned = Set(pins.compactMap { if case .spki(let value) = $0 { value } else { nil } })
            guard let hit = chain.first(where: { pinned.contains($0.spkiSHA256) }) else {
                return result(.mismatch, "no public key of the chain is pinned: \(seen)")
            }
            return result(.match, "the public key of \(hit.displayName) is pinned", matched: "sha256/\(hit.spkiSHA256)")
        case .certificate:
            // Step 5: the pinned certificates become the only anchors, the chain is evaluated again
            // (dates always, the name when validated), and only then compared with the pins.
            let pinned = Set(pins.compactMap { if case .certificate(let value) = $0 { value } else { nil } })
            var anchors: [Data] = []
            for certificate in chain + presented where pinned.contains(certificate.sha256Fingerprint) && !anchors.contains(certificate.der) {
                anchors.append(certificate.der)
            }
            // The app's own copies (pins given as files): AFNetworking anchors on every pinned certificate.
            for der in pinnedCertificates where !anchors.contains(der) { anchors.append(der) }
            guard !anchors.isEmpty else {
                return result(.mismatch, "no certificate of the chain is pinned: \(seen)")
            }
            let evaluation = evaluateWithPinnedAnchors(anchors)
            let errors = evaluation.errors.filter(appliesUnderTrustPolicy)
            if !errors.isEmpty {
                return result(.mismatch, "the chain does not validate with the pinned certificates as its only anchors (\(listed(errors)))")
            }
            // AFNetworking walks the evaluated chain from the root end.
            guard let hit = evaluation.path.reversed().first(where: { pinned.contains($0.sha256Fingerprint) }) else {
                return result(.mismatch, "no certificate of the evaluated chain is pinned: \(seen)")
            }
            return result(.match, "certificate \(hit.displayName) is pinned", matched: hit.sha256Fingerprint)
        }
    }
}
