import Foundation

/// The ATS rules one iOS app gives one host, as `tlsaudit app import` writes them into a target's
/// `app:` setting: the target is then judged as that app's client judges it (docs/apple-rules.md
/// section 6), not as a generic Apple client.
public struct AppHostRules: Sendable, Hashable, Codable {
    /// The app's CFBundleIdentifier (the target's `app:BUNDLE_ID` tag names the same app).
    public var bundle: String
    /// The NSExceptionDomains key that applies to the host, or nil (default ATS, arbitrary loads, local networking).
    public var entry: String?
    /// The exception keys that entry declares (or `NSAllowsArbitraryLoads` / `NSAllowsLocalNetworking`
    /// when ATS is off for the host): what a passing verdict relies on.
    public var reliesOn: [String]
    /// The lowest TLS version the app's client accepts for the host.
    public var minimumTLSVersion: TLSVersion
    public var requiresForwardSecrecy: Bool
    public var allowsInsecureHTTPLoads: Bool
    /// ATS is off for the host (NSAllowsArbitraryLoads or NSAllowsLocalNetworking).
    public var arbitraryLoads: Bool
    public var requiresCertificateTransparency: Bool
    /// The `tlsaudit ats` configuration (`ATSConfigurationName`) that stands for these rules: the
    /// handshake each scan makes as the app's client. Derived from the rules when the configuration is read.
    public var configuration: String
    /// When set, the configuration offers older versions than the app accepts: its handshake counts
    /// only when it negotiated this version or newer.
    public var minimumNegotiatedVersion: TLSVersion?
    /// The app pins with AFNetworking: its AFSecurityPolicy (the bundle's certificates as the pinned
    /// set), evaluated on the app configuration's chain as `app audit --afnetworking` evaluates it.
    public var afnetworking: PinPolicy?
    /// How the app answers the server-trust challenge (`trust_evaluation:`); nil: the system's
    /// default handling, or AFNetworking's when `afnetworking` is set.
    public var trustEvaluation: AppTrustEvaluation?

    /// The trust evaluation in force: AFNetworking's when the app pins with it, else as declared, else the system's.
    public var evaluation: AppTrustEvaluation { afnetworking != nil ? .afnetworking : trustEvaluation ?? .system }

    public init(bundle: String, entry: String?, reliesOn: [String], minimumTLSVersion: TLSVersion, requiresForwardSecrecy: Bool,
                allowsInsecureHTTPLoads: Bool, arbitraryLoads: Bool, requiresCertificateTransparency: Bool,
                configuration: String, minimumNegotiatedVersion: TLSVersion?, afnetworking: PinPolicy? = nil) {
        self.bundle = bundle
        self.entry = entry
        self.reliesOn = reliesOn
        self.minimumTLSVersion = minimumTLSVersion
        self.requiresForwardSecrecy = requiresForwardSecrecy
        self.allowsInsecureHTTPLoads = allowsInsecureHTTPLoads
        self.arbitraryLoads = arbitraryLoads
        self.requiresCertificateTransparency = requiresCertificateTransparency
        self.configuration = configuration
        self.minimumNegotiatedVersion = minimumNegotiatedVersion
        self.afnetworking = afnetworking
    }

    /// The tag a target judged by these rules carries (`app:BUNDLE_ID`).
    public var tag: String { AppHostRules.tagPrefix + bundle }

    /// Tags that name an app start with this.
    public static let tagPrefix = "app:"
}

/// What a scan found for a target judged by an app's rules (`AppHostRules`): whether that app's
/// client connects, and what a passing verdict relies on. Stored with the scan.
public struct AppHostOutcome: Sendable, Hashable, Codable {
    public var bundle: String
    /// The NSExceptionDomains key that applied, or nil.
    public var entry: String?
    /// The exception keys the verdict relies on: those the entry (or global key) declares, when the
    /// app's client connects where a generic Apple client does not; empty otherwise.
    public var reliesOn: [String]
    /// The `tlsaudit ats` configuration probed as the app's client.
    public var configuration: String
    /// The app's client connects (handshake, trust as the app evaluates it; pins are the target's `pins:`).
    public var connects: Bool
    /// Why it does not connect: finding ids, empty when it connects.
    public var reasons: [String]
    /// The app configuration's handshake, in a sentence.
    public var detail: String
    /// What the app's load reports when it does not connect (NSURLErrorDomain and SSL codes,
    /// docs/apple-rules.md section 7); nil when it connects.
    public var error: AppleLoadError?

    public init(bundle: String, entry: String?, reliesOn: [String], configuration: String, connects: Bool, reasons: [String],
                detail: String) {
        self.bundle = bundle
        self.entry = entry
        self.reliesOn = reliesOn
        self.configuration = configuration
        self.connects = connects
        self.reasons = reasons
        self.detail = detail
    }

    /// What a compliant verdict relies on, in words: "NSExceptionDomains 'a.example' (NSExceptionMinimumTLSVersion)",
    /// "default ATS" when nothing relaxed is needed (and the entry that applies, if one does).
    public var reliance: String {
        guard !reliesOn.isEmpty else {
            return "default ATS" + (entry.map { " (NSExceptionDomains '\($0)' applies; none of its exceptions is needed)" } ?? "")
        }
        if let entry { return "NSExceptionDomains '\(entry)' (\(reliesOn.joined(separator: ", ")))" }
        return reliesOn.joined(separator: ", ")
    }
}
