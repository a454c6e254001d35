public import Foundation
public import TLSAuditModel

/// A logged certificate made ready for the pin forecast: its chain as logged (the certificate
/// first), summarized, the path built from it against a root store, and the path builder a
/// certificate-mode pin check anchors on the pinned certificates with, all as a scan makes them.
public struct LoggedChain: Sendable {
    public var presented: [CertificateSummary]
    public var building: PathBuildingResult
    public var buildWithPinnedAnchors: @Sendable ([Data]) -> PathBuildingResult?

    /// Parses the entry's certificates (a certificate that does not parse is a malformed entry).
    public init(_ entry: ParsedLogEntry, store: TrustStore, at time: Date) throws(CTLogFailure) {
        var certificates: [X509Certificate] = []
        for der in [entry.certificate] + entry.chain {
            guard let certificate = try? X509Certificate(der: der) else {
                throw CTLogFailure(.malformed, "a logged certificate that does not parse (\(der.count) bytes)")
            }
            certificates.append(certificate)
        }
        presented = certificates.map { $0.summary().judged(at: time) }
        building = PathBuilder.build(presented: certificates, store: store, summaries: presented).judged(at: time)
        buildWithPinnedAnchors = PathBuilder.pinnedAnchorBuilder(presented: certificates, at: time)
    }

    /// The certificate's DNS names (SANs; the common name when it has none).
    public var names: [String] {
        guard let leaf = presented.first else { return [] }
        return leaf.subjectAlternativeNames.dns.isEmpty ? leaf.commonName.map { [$0] } ?? [] : leaf.subjectAlternativeNames.dns
    }
}
