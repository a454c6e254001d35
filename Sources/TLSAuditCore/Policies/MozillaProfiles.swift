import Foundation

/// What the opt-in checks found at an address: the inputs of policies that judge a server's whole
/// configuration (Mozilla's profiles), beside the handshake and chain every policy judges.
public struct ConfigurationEvidence: Sendable {
    public var enumeration: EnumerationReport?
    public var inventory: ServerInventory?
    public var vulnerabilities: VulnerabilityReport?

    public init(enumeration: EnumerationReport?, inventory: ServerInventory?, vulnerabilities: VulnerabilityReport?) {
        self.enumeration = enumeration
        self.inventory = inventory
        self.vulnerabilities = vulnerabilities
    }
    /// Nothing found: no opt-in check ran.
    public static let none = ConfigurationEvidence(enumeration: nil, inventory: nil, vulnerabilities: nil)
}

/// One of Mozilla's server-side TLS configurations (guidelines version 5.7: the data sslyze 6
/// ships and checks `--mozilla_config` against), with the checks sslyze makes from it.
public struct MozillaProfile: Sendable {
    public let name: String
    /// Protocol versions allowed (tlsaudit's and Mozilla's names: `TLSv1.2`).
    let versions: Set<String>
    /// TLS 1.0-1.2 suites allowed (IANA names).
    let suites: Set<String>
    let tls13Suites: Set<String>
    /// Key-exchange groups allowed (tlsaudit's names), beside the post-quantum hybrids.
    let groups: Set<String>
    /// Smallest finite-field DH group allowed, in bits; nil: DH is not allowed at all.
    let minimumDHBits: Int?
    let minimumECDHBits: Int
    /// `ecdsa` and/or `rsa`: what the leaf's key may be.
    let certificateTypes: Set<String>
    /// The leaf's signature algorithm (OpenSSL's long names).
    let certificateSignatures: Set<String>
    let certificateCurves: Set<String>
    let minimumRSABits: Int?
    let maximumLifespanDays: Int

    static let tls13: Set<String> = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]
    static let curves: Set<String> = ["x25519", "secp256r1", "secp384r1"]
    static let intermediateSuites: Set<String> = [
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ]

    public static let modern = MozillaProfile(
        name: "modern", versions: ["TLSv1.3"], suites: [], tls13Suites: tls13, groups: curves, minimumDHBits: nil, minimumECDHBits: 256,
        certificateTypes: ["ecdsa"], certificateSignatures: ["ecdsa-with-SHA256", "ecdsa-with-SHA384", "ecdsa-with-SHA512"],
        certificateCurves: ["prime256v1", "secp384r1"], minimumRSABits: nil, maximumLifespanDays: 90)

    public static let intermediate = MozillaProfile(
        name: "intermediate", versions: ["TLSv1.2", "TLSv1.3"], suites: intermediateSuites, tls13Suites: tls13, groups: curves,
        minimumDHBits: 2048, minimumECDHBits: 256, certificateTypes: ["ecdsa", "rsa"],
        certificateSignatures: ["sha256WithRSAEncryption", "ecdsa-with-SHA256", "ecdsa-with-SHA384", "ecdsa-with-SHA512"],
        certificateCurves: ["prime256v1", "secp384r1"], minimumRSABits: 2048, maximumLifespanDays: 366)

    public static let old = MozillaProfile(
        name: "old", versions: ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"],
        suites: intermediateSuites.union([
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
            "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
            "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", "TLS_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_RSA_WITH_AES_128_CBC_SHA256", "TLS_RSA_WITH_AES_256_CBC_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA",
            "TLS_RSA_WITH_AES_256_CBC_SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        ]),
        tls13Suites: tls13, groups: curves, minimumDHBits: 1024, minimumECDHBits: 256, certificateTypes: ["rsa"],
        certificateSignatures: ["sha256WithRSAEncryption"], certificateCurves: ["prime256v1", "secp384r1"], minimumRSABits: 2048,
        maximumLifespanDays: 366)

    /// Why the server falls outside this profile: one error finding per rule broken, each with the
    /// reasons; `mozilla.incomplete` when a probe the profile needs gave no answer.
    func evaluate(leaf: CertificateSummary?, trustErrors: [Finding], evidence: ConfigurationEvidence) -> [Finding] {
        var findings: [Finding] = []
        func fail(_ id: FindingID, _ message: String) { findings.append(Finding(id, .error, "Mozilla \(name): \(message)")) }
        func listed(_ values: some Sequence<String>) -> String { RecordBudget.listWithinMessage(values.sorted()) }

        var legacyVersions = false
        if let enumeration = evidence.enumeration {
            let accepted = enumeration.protocols.filter { $0.status == .accepted }
            legacyVersions = accepted.contains { $0.version != TLSVersion.tls1_3.rawValue }
            let untested = enumeration.protocols.filter { $0.status == .notTested }.map(\.version)
            if !untested.isEmpty { fail(.mozillaIncomplete, "\(listed(untested)) could not be tested.") }
            let extraVersions = Set(accepted.map(\.version)).subtracting(versions)
            if !extraVersions.isEmpty { fail(.mozillaTLSVersions, "\(listed(extraVersions)) accepted; the profile allows \(listed(versions)).") }
            let suitesSeen = accepted.filter { $0.version != TLSVersion.tls1_3.rawValue }.flatMap(\.suites)
            let extraSuites = Set(suitesSeen.map(\.cipher.iana)).subtracting(suites)
            if !extraSuites.isEmpty { fail(.mozillaCipherSuites, "suites outside the profile accepted: \(listed(extraSuites)).") }
            let tls13Seen = accepted.filter { $0.version == TLSVersion.tls1_3.rawValue }.flatMap(\.suites)
            let extraTLS13 = Set(tls13Seen.map(\.cipher.iana)).subtracting(tls13Suites)
            if !extraTLS13.isEmpty { fail(.mozillaTLS13Suites, "TLS 1.3 suites outside the profile accepted: \(listed(extraTLS13)).") }
            let keys = accepted.flatMap(\.suites).compactMap(\.keyExchange.ephemeralKey)
            let dh = keys.filter { $0.type == "DH" || $0.type == "DHX" }.map(\.bits).min()
            if let dh {
                if let minimumDHBits, dh < minimumDHBits {
                    fail(.mozillaDHSize, "a \(dh)-bit DH group; the profile asks for \(minimumDHBits) bits or more.")
                } else if minimumDHBits == nil {
                    fail(.mozillaDHSize, "finite-field DH (\(dh) bits) is used; the profile has no DH.")
                }
            }
            // X25519 and X448 keys count as their curve's size (OpenSSL reports 253 and 448 bits).
            if let ecdh = keys.filter({ $0.type == "EC" }).map(\.bits).min(), ecdh < minimumECDHBits {
                fail(.mozillaECDHSize, "a \(ecdh)-bit ECDH curve; the profile asks for \(minimumECDHBits) bits or more.")
            }
        } else {
            fail(.mozillaIncomplete, "the versions and suites could not be enumerated.")
        }

        if let inventory = evidence.inventory {
            let hybrids = Set(inventory.postQuantumGroups)
            let finiteField = Set(inventory.groups.filter { $0.hasPrefix("ffdhe") })
            var extraGroups = Set(inventory.groups).subtracting(groups).subtracting(hybrids)
            if minimumDHBits != nil { extraGroups.subtract(finiteField) }
            if !extraGroups.isEmpty { fail(.mozillaGroups, "groups outside the profile accepted: \(listed(extraGroups)) (it allows \(listed(groups)) and the post-quantum hybrids).") }
            if legacyVersions {
                if inventory.compression.status == .yes { fail(.mozillaCompression, "TLS compression is on (CRIME).") }
                if inventory.secureRenegotiation.status == .no { fail(.mozillaSecureRenegotiation, "no secure renegotiation (RFC 5746).") }
                if inventory.extendedMasterSecret?.status == .no { fail(.mozillaExtendedMasterSecret, "no extended master secret in TLS 1.2 (RFC 7627).") }
            }
            if inventory.fallbackSCSV.status == .no { fail(.mozillaFallbackSCSV, "TLS_FALLBACK_SCSV is not honoured: \(inventory.fallbackSCSV.detail).") }
        } else {
            fail(.mozillaIncomplete, "the configuration inventory is missing.")
        }

        if let vulnerabilities = evidence.vulnerabilities {
            if vulnerabilities.heartbleed.status == .vulnerable { fail(.mozillaHeartbleed, "vulnerable to Heartbleed.") }
            if vulnerabilities.ccsInjection.status == .vulnerable { fail(.mozillaCCSInjection, "vulnerable to CCS injection.") }
            // As sslyze judges the profile: a strong oracle fails it (a weak one is still `vuln.robot`).
            if vulnerabilities.robot.status == .vulnerable, vulnerabilities.robot.oracle == "strong" { fail(.mozillaROBOT, "a strong ROBOT oracle.") }
        } else {
            fail(.mozillaIncomplete, "the vulnerability probes are missing.")
        }

        if !trustErrors.isEmpty { fail(.mozillaTrust, "the chain does not validate: \(listed(Set(trustErrors.map(\.id.rawValue)))).") }
        if let leaf {
            let type = leaf.publicKey.isRSA ? "rsa" : leaf.publicKey.isEC ? "ecdsa" : leaf.publicKey.type
            if !certificateTypes.contains(type) { fail(.mozillaCertificateType, "the certificate's key is \(type); the profile asks for \(listed(certificateTypes)).") }
            if !certificateSignatures.contains(leaf.signatureAlgorithm) {
                fail(.mozillaCertificateSignature, "the certificate is signed with \(leaf.signatureAlgorithm); the profile asks for \(listed(certificateSignatures)).")
            }
            if leaf.publicKey.isEC, let curve = leaf.publicKey.curve, !certificateCurves.contains(curve) {
                fail(.mozillaCertificateCurve, "the certificate's curve is \(curve); the profile asks for \(listed(certificateCurves)).")
            }
            if leaf.publicKey.isRSA, let minimumRSABits, leaf.publicKey.bits < minimumRSABits {
                fail(.mozillaRSAKeySize, "a \(leaf.publicKey.bits)-bit RSA key; the profile asks for \(minimumRSABits) bits or more.")
            }
            let days = Int(leaf.notAfter.timeIntervalSince(leaf.notBefore) / 86_400)
            if days > maximumLifespanDays {
                fail(.mozillaCertificateLifespan, "the certificate is valid for \(days) days; the profile allows \(maximumLifespanDays).")
            }
        }
        return findings
    }
}

/// Mozilla's profiles judge the policies `mozilla-modern`, `mozilla-intermediate` and `mozilla-old`.
extension MozillaProfile: PolicyJudge {
    public func findings(under policy: CompliancePolicy, observation: HandshakeObservation, presented: [CertificateSummary],
                         building: PathBuildingResult, trustFindings: [Finding], atsClientRefusal: String?,
                         evidence: ConfigurationEvidence) -> [Finding] {
        // An intermediate restricted without serverAuth is only a warning where Apple's clients accept
        // it (an operator's own anchors); Firefox refuses the chain, so the profile counts it.
        evaluate(leaf: presented.first, trustErrors: trustFindings.filter { $0.isTrustError || ($0.id == .trustEKU && ($0.depth ?? 0) > 0) },
                 evidence: evidence)
    }
}
