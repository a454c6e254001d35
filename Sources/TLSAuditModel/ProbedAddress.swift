public import Foundation

/// What the probe saw at one address, before any judgement: the handshake (or why there was
/// none), the chain as sent, the path as built, the revocation facts. The scanner's callers judge
/// it with `AddressAssessment.judge` (the probe only probes).
public struct ProbedAddress: Sendable {
    public var address: String
    public var family: String
    public var port: Int
    public var startedAt: Date
    public var durationMs: Int
    public var handshake: HandshakeObservation?
    /// Why an Apple-shaped ClientHello was refused, when a permissive one then succeeded.
    public var atsClientRefusal: String?
    public var failure: ProbeFailure?
    /// The chain as sent, with days left at `time`.
    public var presented: [CertificateSummary]
    /// The path chosen at `time`.
    public var building: PathBuildingResult
    /// The chain report to keep (nil when nothing was sent).
    public var chain: ChainReport?
    /// The moment certificates are judged at.
    public var time: Date
    /// The path anchors in a public root store (`apple`, `system`): the rules for publicly trusted
    /// certificates apply (Certificate Transparency, the 398-day limit), whichever store judged.
    public var publicTrust: Bool
    /// Every SCT for the leaf (embedded, TLS extension, stapled OCSP), its signature checked.
    public var scts: [SignedCertificateTimestamp] = []
    /// The log list the SCTs were checked against.
    public var ctLogs: CTLogList = .shipped
    /// The date-bounded distrust in force (nil: the shipped table, by the policy's vendor).
    public var distrust: DistrustSetting?
    /// Builds the path again with the given certificates as the only anchors (partial chains
    /// allowed), for certificate-mode pins: path building is the probe's, judging the path is not.
    public var buildWithPinnedAnchors: @Sendable ([Data]) -> PathBuildingResult?
    /// The opt-in checks' reports (`checks:`, and what a Mozilla policy needs), taken before judging.
    public var enumeration: EnumerationReport?
    public var inventory: ServerInventory?
    public var headers: HTTPHeadersReport?
    public var vulnerabilities: VulnerabilityReport?
    public var clients: ClientSimulationReport?
    /// The reports of the opt-in checks without a field of their own, by check name.
    public var checkReports: [String: CheckReport] = [:]
    /// For a target judged by an app's rules (`ScanTarget.app`): the probe of that app's `ats` configuration.
    public var appProbes: ATSProbes?

    public init(address: String, family: String, port: Int, startedAt: Date, durationMs: Int, handshake: HandshakeObservation?,
                atsClientRefusal: String?, failure: ProbeFailure?, presented: [CertificateSummary], building: PathBuildingResult,
                chain: ChainReport?, time: Date, publicTrust: Bool,
                buildWithPinnedAnchors: @escaping @Sendable ([Data]) -> PathBuildingResult?) {
        self.address = address
        self.family = family
        self.port = port
        self.startedAt = startedAt
        self.durationMs = durationMs
        self.handshake = handshake
        self.atsClientRefusal = atsClientRefusal
        self.failure = failure
        self.presented = presented
        self.building = building
        self.chain = chain
        self.time = time
        self.publicTrust = publicTrust
        self.buildWithPinnedAnchors = buildWithPinnedAnchors
    }
}
/// What `verify`'s probe read from certificate files: the chain as given, the leaf chosen, the path
/// as built and the revocation facts, at the evaluation time.
public struct ProbedChain: Sendable {
    public var inputs: [String]
    public var host: String?
    public var time: Date
    /// In input order, with days left at `time`.
    public var presented: [CertificateSummary]
    public var leafIndex: Int
    public var building: PathBuildingResult
    public var chain: ChainReport
    /// The path anchors in a public root store (see `ProbedAddress.publicTrust`).
    public var publicTrust: Bool
    /// The leaf's embedded SCTs, their signatures checked.
    public var scts: [SignedCertificateTimestamp] = []
    /// The log list the SCTs were checked against.
    public var ctLogs: CTLogList = .shipped
    /// The date-bounded distrust in force (nil: the shipped table, by the policy's vendor).
    public var distrust: DistrustSetting?

    public init(inputs: [String], host: String?, time: Date, presented: [CertificateSummary], leafIndex: Int,
                building: PathBuildingResult, chain: ChainReport, publicTrust: Bool) {
        self.inputs = inputs
        self.host = host
        self.time = time
        self.presented = presented
        self.leafIndex = leafIndex
        self.building = building
        self.chain = chain
        self.publicTrust = publicTrust
    }
}
