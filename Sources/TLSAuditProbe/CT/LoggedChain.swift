import COpenSSL
public import Foundation
public import TLSAuditModel

/// A logged certificate made ready for the pin forecast: its chain as logged (the certificate
/// first), summarized, the path built from it against a root store, and the path builder a
/// certificate-mode pin check anchors on the pinned certificates with, all as a scan makes them.
/// A precertificate is judged as the certificate it announces: its CT poison extension (which no
/// final certificate carries) is not held against it.
public struct LoggedChain: Sendable {
    public var presented: [CertificateSummary]
    public var building: PathBuildingResult
    public var buildWithPinnedAnchors: @Sendable ([Data]) -> PathBuildingResult?

    /// The CT poison extension (RFC 6962 §3.1) of a precertificate.
    static let poison = "1.3.6.1.4.1.11129.2.4.3"

    /// Parses the entry's certificates. A precertificate must be the one the log's leaf holds
    /// (its TBSCertificate without the poison, its issuer's key hash): `extra_data` is not in the
    /// tree. Anything that does not hold is malformed.
    public init(_ entry: ParsedLogEntry, store: TrustStore, at time: Date) throws(CTLogFailure) {
        if let problem = entry.extraDataProblem, entry.precertificate {
            throw CTLogFailure(.malformed, "a precertificate that cannot be judged: \(problem)")
        }
        var certificates: [X509Certificate] = []
        for der in [entry.certificate] + entry.chain {
            guard let certificate = try? X509Certificate(der: der) else {
                throw CTLogFailure(.malformed, "a logged certificate that does not parse (\(der.count) bytes)")
            }
            certificates.append(certificate)
        }
        if entry.precertificate {
            guard let tbs = entry.tbsCertificate, Self.tbsWithoutPoison(certificates[0]) == tbs else {
                throw CTLogFailure(.malformed, "the precertificate in extra_data is not the one the log's leaf holds")
            }
            guard let keyHash = entry.issuerKeyHash, certificates.count > 1,
                  Digest.sha256(certificates[1].spkiDER()) == keyHash else {
                throw CTLogFailure(.malformed, "the precertificate's chain does not start with the issuer the log's leaf names")
            }
        }
        let precertificate = entry.precertificate
        presented = certificates.map { $0.summary().judged(at: time) }
        building = PathBuilder.build(presented: certificates, store: store, summaries: presented).judged(at: time)
        let builder = PathBuilder.pinnedAnchorBuilder(presented: certificates, at: time)
        if precertificate {
            buildWithPinnedAnchors = { pinned in builder(pinned).map { LoggedChain.finalForm($0) } }
        } else {
            buildWithPinnedAnchors = builder
        }
        if precertificate {
            presented[0].unhandledCriticalExtensions.removeAll { $0 == Self.poison }
            building = Self.finalForm(building)
        }
    }

    /// A precertificate's path as its certificate's would be: no unknown critical extension at the leaf for the poison.
    static func finalForm(_ building: PathBuildingResult) -> PathBuildingResult {
        var building = building
        guard var leaf = building.path.first?.certificate, leaf.unhandledCriticalExtensions.contains(poison) else { return building }
        leaf.unhandledCriticalExtensions.removeAll { $0 == poison }
        building.path[0].certificate = leaf
        if leaf.unhandledCriticalExtensions.isEmpty {
            building.issues.removeAll { $0.kind == .unknownCriticalExtension && $0.depth == 0 }
        }
        return building
    }

    /// The TBSCertificate of `certificate` without its poison extension, as the log's leaf holds it.
    static func tbsWithoutPoison(_ certificate: X509Certificate) -> [UInt8]? {
        certificate.tbsCertificate(without: NID_ct_precert_poison)
    }

    /// The certificate's DNS names (its SANs: Apple's clients read no common name).
    public var names: [String] { presented.first?.subjectAlternativeNames.dns ?? [] }
}
