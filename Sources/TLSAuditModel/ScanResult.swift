public import Foundation
public import TLSAuditSupport

/// What a server presented and the path tlsaudit built from it.
public struct ChainReport: Hashable, Codable, Sendable {
    /// Exactly as sent, in the order sent.
    public var presented: [CertificateSummary]
    /// Leaf to anchor, as built against the trust store.
    public var path: [PathElement]
    /// True when the path ends in a trusted anchor (other problems may still exist: see findings).
    public var anchored: Bool
    /// `system` or `ca-file:/path`.
    public var trustStore: String
    /// What the path builder reported (raw: kept so the chain can be judged again later).
    public var issues: [PathBuildingIssue]
    /// What revocation checking found (absent when it is off).
    public var revocation: RevocationReport?
    /// The public root stores holding the anchor (`apple`, `system`): empty for an operator's own
    /// anchor, absent when the path is not anchored (or the result was stored before this was kept).
    public var anchorIn: [String]?

    public init(presented: [CertificateSummary], path: [PathElement], anchored: Bool, trustStore: String,
                issues: [PathBuildingIssue], revocation: RevocationReport? = nil) {
        self.presented = presented
        self.path = path
        self.anchored = anchored
        self.trustStore = trustStore
        self.issues = issues
        self.revocation = revocation
    }

    /// The chain as clients see it: the path built, or what was sent when none could be built.
    public var certificates: [CertificateSummary] { path.isEmpty ? presented : path.map(\.certificate) }

    /// The names of the public root stores (`--trust-store apple|system`), in the order help lists
    /// them (`TrustStore.publicStore(named:)` opens each); any other store is an operator's.
    public static let publicStoreNames = ["apple", "system"]
    /// `publicStoreNames`, to look names up.
    public static let publicStores = Set(publicStoreNames)

    /// The rules for publicly trusted certificates apply (CT, the 398-day limit): the path anchors
    /// in a public root store's certificate, whichever store judged; for a result stored before
    /// `anchorIn` was kept, when the store that judged is a public one.
    public var publicTrust: Bool { anchored && (anchorIn.map { !$0.isEmpty } ?? Self.publicStores.contains(trustStore)) }

    /// Which of Apple's leaf rules judge the chain (serverAuth itself and 398 days under its root
    /// store, or those of an app's own anchors): the anchor's kind (`publicTrust`), or, for a path
    /// that anchors nowhere, the kind of store that judged it (the rules that apply once the chain
    /// is completed), as `ats` decides.
    public var judgedAsPublic: Bool { anchored ? publicTrust : Self.publicStores.contains(trustStore) }

    /// The path building result this report was made from.
    public var building: PathBuildingResult { PathBuildingResult(path: path, anchored: anchored, issues: issues) }
}

/// The result for one address of a target.
public struct AddressScanResult: Hashable, Codable, Sendable {
    public enum Status: String, Codable, Sendable {
        /// A handshake was observed.
        case completed
        /// No handshake could be observed (see `error`); some data (a chain) may still be present.
        case failed
    }

    public var address: String
    public var family: String
    public var port: Int
    public var status: Status
    public var startedAt: Date
    public var durationMs: Int
    public var handshake: HandshakeObservation?
    /// Why the policy's own ClientHello was refused, when the handshake comes from the permissive fallback.
    public var atsClientRefusal: String?
    public var error: ProbeFailure?
    public var chain: ChainReport?
    /// Every finding, most severe first.
    public var findings: [Finding]
    public var ats: PolicyVerdict
    /// The pin check, when the target has pins.
    public var pin: PinEvaluation?
    /// Every version and suite accepted (`scan --enumerate`).
    public var enumeration: EnumerationReport?
    /// The configuration inventory (`scan --checks inventory`, `checks: [inventory]`).
    public var inventory: ServerInventory?
    /// HTTP security headers and the port-80 redirect (`checks: [headers]`).
    public var headers: HTTPHeadersReport?
    /// Heartbleed, CCS injection, ROBOT and the named verdicts (`checks: [vulnerabilities]`).
    public var vulnerabilities: VulnerabilityReport?
    /// Which real clients connect, with what protocol, suite and group (`checks: [clients]`).
    public var clients: ClientSimulationReport?
    /// The reports of the opt-in checks that have no field of their own, by check name (nil when none ran).
    public var checkReports: [String: CheckReport]?
    /// For a target judged by an app's rules: whether that app's client connects, and on which exception.
    public var app: AppHostOutcome?
    /// The trust inputs the service judged this scan with (nil from `scan`, and for scans stored before).
    public var judgedWith: JudgedWith?

    /// This result with its opt-in checks' reports (as read back from a store).
    public func with(inventory: ServerInventory?, headers: HTTPHeadersReport?, vulnerabilities: VulnerabilityReport?,
                     enumeration: EnumerationReport? = nil, clients: ClientSimulationReport?,
                     checkReports: [String: CheckReport]?) -> AddressScanResult {
        var copy = self
        copy.enumeration = enumeration ?? self.enumeration
        copy.inventory = inventory
        copy.headers = headers
        copy.vulnerabilities = vulnerabilities
        copy.clients = clients
        copy.checkReports = checkReports
        return copy
    }

    public init(address: String, family: String, port: Int, status: Status, startedAt: Date, durationMs: Int,
                handshake: HandshakeObservation?, atsClientRefusal: String? = nil, error: ProbeFailure?,
                chain: ChainReport?, findings: [Finding], ats: PolicyVerdict, pin: PinEvaluation? = nil) {
        self.address = address
        self.family = family
        self.port = port
        self.status = status
        self.startedAt = startedAt
        self.durationMs = durationMs
        self.handshake = handshake
        self.atsClientRefusal = atsClientRefusal
        self.error = error
        self.chain = chain
        self.findings = findings
        self.ats = ats
        self.pin = pin
    }
}

extension AddressScanResult {
    /// The verdict every count uses (`scan`'s summary and exit code, `status`, `history`, reports):
    /// the policy's, and the pins'. A pin mismatch is never compliant.
    public var countedCompliant: Bool { status == .completed && ats.compliant && pin?.state != .mismatch }

    /// Why the address is not compliant: the policy's failed rules, then `pin.mismatch`.
    public var countedReasons: [FindingID] { CountedVerdict.reasons(ats.failedRules, pinState: pin?.state) }
}

/// The verdict as counted everywhere: the policy's rules plus the pins (a mismatch fails).
public enum CountedVerdict {
    public static let pinMismatch = FindingID.pinMismatch

    /// `compliant` unless the pins mismatch.
    public static func compliant(_ compliant: Bool, pinState: PinEvaluation.State?) -> Bool {
        compliant && pinState != .mismatch
    }

    /// `rules`, with `pin.mismatch` added when the pins mismatch.
    public static func reasons(_ rules: [FindingID], pinState: PinEvaluation.State?) -> [FindingID] {
        pinState == .mismatch && !rules.contains(pinMismatch) ? rules + [pinMismatch] : rules
    }
}

/// Where an address stands under a verdict.
public enum AddressCondition: String, Codable, Sendable, Hashable {
    case compliant
    case notCompliant = "not-compliant"
    /// No handshake and no chain: nothing could be judged.
    case unreachable

    /// The condition of one scan: unreachable when it saw neither a handshake nor a chain;
    /// compliant only when the handshake completed and the verdict says so.
    public init(status: AddressScanResult.Status, hasChain: Bool, compliant: Bool) {
        if status == .failed, !hasChain {
            self = .unreachable
        } else {
            self = compliant && status == .completed ? .compliant : .notCompliant
        }
    }
}

/// The result for one target (a name or address and a port).
public struct TargetScanResult: Hashable, Codable, Sendable {
    /// As the user wrote it.
    public var target: String
    public var host: String
    public var port: Int
    /// The server name sent (nil for IP literals without `--sni`).
    public var sni: String?
    /// The addresses connected to instead of resolving `host`, when `--connect-to` was given.
    public var connectTo: [String]?
    /// The STARTTLS dialogue run before each handshake, when there was one.
    public var starttls: STARTTLSUse?
    /// The service a well-known implicit-TLS port speaks (`imaps`), when the target is on one.
    public var implicitTLS: String?
    /// Set when the target could not be resolved at all.
    public var error: ProbeFailure?
    public var addresses: [AddressScanResult]

    public init(target: String, host: String, port: Int, sni: String?, connectTo: [String]?, error: ProbeFailure?,
                addresses: [AddressScanResult]) {
        self.target = target
        self.host = host
        self.port = port
        self.sni = sni
        self.connectTo = connectTo
        self.error = error
        self.addresses = addresses
    }
}

/// Counts over a whole scan.
public struct ScanSummary: Hashable, Codable, Sendable {
    public var targets: Int
    public var addresses: Int
    public var compliant: Int
    public var notCompliant: Int
    public var failed: Int
    /// Addresses whose pins did not match.
    public var pinMismatches: Int = 0

    public init(targets: Int, addresses: Int, compliant: Int, notCompliant: Int, failed: Int) {
        self.targets = targets
        self.addresses = addresses
        self.compliant = compliant
        self.notCompliant = notCompliant
        self.failed = failed
    }
}

/// The whole output of `tlsaudit scan`, versioned (see docs/scan-json.md).
public struct ScanReport: Codable, Sendable {
    /// Bumped on any incompatible change to this structure.
    public static let schemaVersion = "tlsaudit.scan/1"

    public var schema: String
    public var toolVersion: String
    public var generatedAt: Date
    public var trustStore: String
    public var timeoutSeconds: Double
    public var targets: [TargetScanResult]
    public var summary: ScanSummary
    /// The process exit code this report implies (see `exitCode(for:)`).
    public var exitCode: Int32

    public init(toolVersion: String, generatedAt: Date, trustStore: String, timeoutSeconds: Double,
                targets: [TargetScanResult]) {
        schema = Self.schemaVersion
        self.toolVersion = toolVersion
        self.generatedAt = generatedAt
        self.trustStore = trustStore
        self.timeoutSeconds = timeoutSeconds
        self.targets = targets
        // Counted in place: collecting the addresses (and filtering them) copied every result, whole.
        var addresses = 0, failed = 0, compliant = 0, notCompliant = 0, pinMismatches = 0
        for target in targets {
            if target.error != nil { failed += 1 }
            for address in target.addresses {
                addresses += 1
                if address.status == .failed { failed += 1 }
                // A pin mismatch is not compliant (CountedVerdict).
                if address.countedCompliant {
                    compliant += 1
                } else if address.status == .completed {
                    notCompliant += 1
                }
                if address.pin?.state == .mismatch { pinMismatches += 1 }
            }
        }
        summary = ScanSummary(targets: targets.count, addresses: addresses, compliant: compliant, notCompliant: notCompliant, failed: failed)
        summary.pinMismatches = pinMismatches
        exitCode = Self.exitCode(for: summary)
    }

    /// 0 every address compliant (and its pins match); 1 something not compliant or a pin
    /// mismatch; 2 something could not be scanned (2 wins over 1: an unscanned address could hide anything).
    public static func exitCode(for summary: ScanSummary) -> Int32 {
        if summary.failed > 0 { return 2 }
        if summary.notCompliant > 0 || summary.pinMismatches > 0 { return 1 }
        return 0
    }
}

// A scan's targets are encoded on all cores (declared in `JSONDocumentEncoder.domain`).
extension TargetScanResult: ConcurrentlyEncodable {}
