public import Foundation

/// The output of `tlsaudit app audit`: each host the app calls judged by the app's own ATS rules,
/// and each exception-domain entry's keys that change nothing. Schema `tlsaudit.app/1` (docs/app.schema.json).
public struct AppAuditReport: Codable, Sendable {
    public static let schemaVersion = "tlsaudit.app/1"

    /// One host the app calls.
    public struct Host: Codable, Sendable {
        public var host: String
        public var port: Int
        /// The address probed (nil when the name did not resolve).
        public var address: String?
        /// A current Apple client running this app connects (ATS rules for this host, trust, pins).
        public var connects: Bool
        /// A TLS server answered (false: nothing to judge; the exit status is 2).
        public var reachable: Bool
        /// The NSExceptionDomains key that applied, or nil.
        public var entry: String?
        /// Which rule applied and why.
        public var rule: String
        /// The `tlsaudit ats` configuration that stands for this app's rules for this host.
        public var probe: String
        /// Why it does not connect: finding ids (`ats.handshake`, `ats.forward-secrecy`, `trust.*`, `pin.mismatch`), empty when it connects.
        public var reasons: [String]
        /// The detail of the probe that decided.
        public var detail: String
        /// NSPinnedDomains: `match`, `mismatch`, or absent when no entry pins the host.
        public var pin: String?
        public var pinMessage: String?
        /// What to change on the server, most important first (when it does not connect).
        public var serverFixes: [String]
        /// The smallest exception that would make it connect, as `ats` computes it (empty: none needed or none helps).
        public var exceptionNeeded: [String: String]
        /// `--afnetworking`: AFSecurityPolicy's evaluation of the chain with the bundle's certificates
        /// as its pinned set (`mismatch` adds `pin.mismatch`); absent without the option.
        public var afnetworking: PinEvaluation?
        /// The oldest iOS of the client table that connects to the host, simulated from its
        /// ClientHello (`ats`' `oldest_connecting_ios`); absent when none does or the host was not reached.
        public var oldestConnectingIos: String?
        /// What the app's load reports when it does not connect: the NSURLErrorDomain code and the
        /// SecureTransport code Apple's logs show with it (docs/apple-rules.md section 7).
        public var error: AppleLoadError?
        /// `http`: the app loads this host over plain `http://` (no TLS was probed); absent for HTTPS.
        public var scheme: String?
        /// Given with --host/--hosts-file (or the plist's domains when no host was given); false for a
        /// plist domain probed by --probe-plist-domains, which never changes the exit status.
        public var requested = true

        public init(host: String, port: Int, address: String?, connects: Bool, reachable: Bool, entry: String?, rule: String,
                    probe: String, reasons: [String], detail: String, pin: String?, pinMessage: String?, serverFixes: [String],
                    exceptionNeeded: [String: String]) {
            self.host = host
            self.port = port
            self.address = address
            self.connects = connects
            self.reachable = reachable
            self.entry = entry
            self.rule = rule
            self.probe = probe
            self.reasons = reasons
            self.detail = detail
            self.pin = pin
            self.pinMessage = pinMessage
            self.serverFixes = serverFixes
            self.exceptionNeeded = exceptionNeeded
        }
    }

    /// One NSExceptionDomains entry, over the audited hosts it covers.
    public struct Entry: Codable, Sendable {
        public var domain: String
        /// The keys it declares, as written.
        public var declared: [String]
        /// Declared keys whose removal changes no covered host's outcome (found on the probes without the key).
        public var unneeded: [String]
        /// Declared keys without which covered hosts that fail connect (and none that connects fails):
        /// they break the hosts (a TLS 1.3 minimum on a TLS 1.2 server). Nil when none.
        public var harmful: [String]?
        /// The audited hosts this entry applies to.
        public var hosts: [String]
        /// What the audit concluded, in a sentence.
        public var note: String

        public init(domain: String, declared: [String], unneeded: [String], hosts: [String], note: String) {
            self.domain = domain
            self.declared = declared
            self.unneeded = unneeded
            self.hosts = hosts
            self.note = note
        }
    }

    /// One global key of NSAppTransportSecurity, over every audited host.
    public struct GlobalKey: Codable, Sendable {
        public enum Status: String, Codable, Sendable {
            /// Removing it changes some audited host's outcome (found on the probes without it).
            case needed
            /// Removing it changes no audited host's outcome: drop it.
            case unneeded
            /// A TLS probe of URLSession loads cannot tell (AV Foundation or web-view loads only).
            case notJudged = "not-judged"
        }

        public var key: String
        /// `YES` or `NO` as written (`present` when the value is not a boolean but the key still counts).
        public var value: String
        public var status: Status
        /// The audited hosts whose outcome changes without the key.
        public var hosts: [String]
        /// What the audit concluded, in a sentence.
        public var note: String
        /// `NSAllowsArbitraryLoads` needed only for some hosts: the per-domain entries (host -> keys)
        /// under which those hosts connect without it; the corrected dictionary uses them instead.
        public var replacement: [String: [String: String]]?

        public init(key: String, value: String, status: Status, hosts: [String], note: String) {
            self.key = key
            self.value = value
            self.status = status
            self.hosts = hosts
            self.note = note
        }
    }

    /// `--afnetworking`: the AFSecurityPolicy every host was judged with.
    public struct AFNetworkingSettings: Codable, Sendable {
        /// AFSSLPinningMode: `none`, `certificate`, `public-key`.
        public var mode: PinMode
        public var allowInvalidCertificates: Bool
        public var validatesDomainName: Bool
        /// The bundle's certificate files that make the pinned set (AFNetworking's `certificatesInBundle`).
        public var certificates: [String]

        public init(mode: PinMode, allowInvalidCertificates: Bool, validatesDomainName: Bool, certificates: [String]) {
            self.mode = mode
            self.allowInvalidCertificates = allowInvalidCertificates
            self.validatesDomainName = validatesDomainName
            self.certificates = certificates
        }
    }

    public var schema: String = schemaVersion
    public var toolVersion: String
    /// The file audited.
    public var app: String
    public var bundleIdentifier: String?
    /// The store chains were judged against.
    public var trustStore: String
    /// Problems in the app's NSAppTransportSecurity (wrong types, unknown keys), with their key paths.
    public var problems: [String]
    public var hosts: [Host]
    public var entries: [Entry]
    /// The global keys the app declares (NSAllowsArbitraryLoads, ...ForMedia, ...InWebContent,
    /// NSAllowsLocalNetworking), each judged over every audited host.
    public var global: [GlobalKey]
    public var afnetworking: AFNetworkingSettings?
    /// How the app answers the server-trust challenge (`--trust-evaluation`): `system` (the default),
    /// `afnetworking` or `accept-all`.
    public var trustEvaluation: AppTrustEvaluation = .system
    /// What the audit found about the app itself: AFNetworking's policy and bundle (`pin.*`), a
    /// delegate that accepts any certificate. Errors count for the exit status.
    public var findings: [Finding] = []
    /// Set when chains were judged against the operator's own anchors (`--ca-file`): the verdicts
    /// hold only on devices that trust that root.
    public var anchors: String?
    /// Domains the Info.plist names that were not probed (give them with --host, or --probe-plist-domains).
    public var notProbed: [String] = []
    /// NSAppTransportSecurity's exception domains without the unneeded keys, with the missing
    /// exceptions added: plist XML to paste.
    public var correctedDictionary: String
    /// 0 every host connects and no exception (entry or global key) is unneeded; 1 a host fails or a
    /// key is unneeded; 2 a host could not be reached.
    public var exitCode: Int32

    public init(toolVersion: String, app: String, bundleIdentifier: String?, trustStore: String, problems: [String],
                hosts: [Host], entries: [Entry], global: [GlobalKey] = [], afnetworking: AFNetworkingSettings? = nil,
                trustEvaluation: AppTrustEvaluation = .system, findings: [Finding] = [], correctedDictionary: String) {
        self.toolVersion = toolVersion
        self.app = app
        self.bundleIdentifier = bundleIdentifier
        self.trustStore = trustStore
        self.problems = problems
        self.hosts = hosts
        self.entries = entries
        self.global = global
        self.afnetworking = afnetworking
        self.trustEvaluation = trustEvaluation
        self.findings = findings
        self.correctedDictionary = correctedDictionary
        let counted = hosts.filter(\.requested)
        exitCode = counted.contains { !$0.reachable } ? 2
            : counted.contains { !$0.connects } || entries.contains { !$0.unneeded.isEmpty } || global.contains { $0.status == .unneeded }
                || findings.contains { $0.severity == .error } ? 1 : 0
    }
}
