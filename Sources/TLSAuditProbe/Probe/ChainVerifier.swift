public import Foundation
public import TLSAuditModel

/// `verify`'s probe: the same path building and revocation checking as a scan, on certificate files
/// instead of a live server (judged by the caller with `AddressAssessment.judge(_:toolVersion:)`).
/// Input may be PEM (several certificates) or DER, in any order, with extras.
public enum ChainVerifier {
    /// Reads every certificate of `files`, picks the leaf (or takes `leafIndex`; `namesHost` is the
    /// caller's name matcher, which prefers a leaf naming the host), builds the path.
    /// Revocation is checked in `revocation` mode from `evidence` when given (offline), else fetched
    /// within `timeout` seconds, as a scan does; with `aiaFetch`, a missing intermediate is fetched
    /// from its caIssuers URL within the same time.
    public static func probe(files: [String], roots: TrustStore, host: String?, at time: Date, leafIndex chosenLeaf: Int? = nil,
                             namesHost: (SubjectAlternativeNames) -> Bool = { _ in false },
                             revocation: RevocationMode = SettingBounds.revocation, evidence: OfflineRevocationEvidence? = nil,
                             timeout: Double = SettingBounds.timeout.defaultValue, aiaFetch: Bool = false,
                             ctLogs: CTLogList = .shipped) throws -> ProbedChain {
        var certificates: [X509Certificate] = []
        var seen = Set<[UInt8]>()
        for file in files {
            // A certificate given twice (repeated chains, a bundle and its parts) is one candidate for path building.
            certificates += try CertificateFile.load(path: file).filter { seen.insert($0.der).inserted }
        }
        guard !certificates.isEmpty else { throw OpenSSLFailure("no certificate in \(files.joined(separator: ", "))") }
        let presented = certificates.map { $0.summary().judged(at: time) }
        let leafIndex = chosenLeaf.map { min(max(0, $0), presented.count - 1) } ?? chooseLeaf(presented, namesHost: namesHost)
        let deadline = Deadline(after: timeout)
        let building = PathBuilder.build(presented: certificates, leafIndex: leafIndex, store: roots, summaries: presented,
                                         fetchMissing: aiaFetch ? deadline : nil)
            .judged(at: time)
        let revocationReport = RevocationChecker(mode: revocation, offline: evidence.flatMap { $0.isEmpty ? nil : $0 })
            .check(path: building.path, presented: certificates, stapled: nil, handshake: false, time: time, deadline: deadline)
        var chain = ChainReport(presented: presented, path: building.path, anchored: building.anchored,
                                trustStore: roots.label, issues: building.issues, revocation: revocationReport)
        chain.anchorIn = PublicRoots.anchorIn(building)
        var probed = ProbedChain(inputs: files, host: host, time: time, presented: presented, leafIndex: leafIndex, building: building,
                                 chain: chain, publicTrust: chain.publicTrust)
        let leaf = certificates[leafIndex]
        probed.scts = SCTVerifier.check(leaf: leaf, issuer: SCTVerifier.issuer(ofLeafOf: building.path, presented: certificates, leaf: leaf, store: roots),
                                        delivered: [], logs: ctLogs)
        probed.ctLogs = ctLogs
        return probed
    }

    /// The leaf: a certificate that issued none of the others, preferring one that names the host,
    /// then the first such certificate in input order (leaf-first is the convention).
    static func chooseLeaf(_ certificates: [CertificateSummary], namesHost: (SubjectAlternativeNames) -> Bool) -> Int {
        // A CA that issued another certificate of the input is not the leaf (a CA:FALSE
        // certificate that signed one still may be: the leaf-signed-leaf case).
        let issuers = Set(certificates.filter { !$0.isSelfSigned }.map(\.issuer))
        let candidates = certificates.indices.filter { index in
            let certificate = certificates[index]
            return !(certificate.isCA && issuers.contains(certificate.subject)) || certificates.count == 1
        }
        if let match = candidates.first(where: { namesHost(certificates[$0].subjectAlternativeNames) }) {
            return match
        }
        return candidates.first ?? 0
    }
}
