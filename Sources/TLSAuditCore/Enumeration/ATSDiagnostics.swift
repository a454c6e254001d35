/// One ATS configuration an app can declare, and whether a current Apple client under it accepts
/// the server.
public struct ATSConfigurationResult: Hashable, Codable, Sendable {
    /// Why a configuration fails.
    public enum Failure: String, Codable, Sendable {
        /// No handshake: no protocol version or suite in common with what the client offers.
        case handshake
        /// The handshake has no forward secrecy and the configuration requires it.
        case forwardSecrecy = "forward-secrecy"
        /// Apple's trust rules for all TLS (no ATS key lifts them).
        case trust
    }

    /// `default`, `documented-list`, `TLSv1.3`, `no-forward-secrecy`, `insecure-http-loads`, ...
    public var name: String
    /// The Info.plist keys of this configuration (empty for the default).
    public var exception: [String: String]
    public var pass: Bool
    /// Why it fails, or what was negotiated.
    public var detail: String
    /// The kind of failure; nil when it passes.
    public var failure: Failure?
    /// A diagnostic line, not a configuration to recommend (the documented list, stricter minimums,
    /// what a permissive OpenSSL client gets).
    public var diagnostic: Bool
    /// The app evaluates server trust itself (NSExceptionAllowsInsecureHTTPLoads): trust is not judged.
    public var ownTrustEvaluation: Bool

    public init(name: String, exception: [String: String], pass: Bool, detail: String, failure: Failure? = nil,
                diagnostic: Bool = false, ownTrustEvaluation: Bool = false) {
        self.name = name
        self.exception = exception
        self.pass = pass
        self.detail = detail
        self.failure = pass ? nil : failure
        self.diagnostic = diagnostic
        self.ownTrustEvaluation = ownTrustEvaluation
    }
}

/// What a permissive client (every suite OpenSSL has, TLS 1.0-1.3) negotiated: what the server speaks.
public struct ServerOffer: Hashable, Codable, Sendable {
    public var protocolVersion: TLSVersion
    public var cipher: CipherSuiteDescription
    public var forwardSecrecy: Bool

    public init(protocolVersion: TLSVersion, cipher: CipherSuiteDescription, forwardSecrecy: Bool) {
        self.protocolVersion = protocolVersion
        self.cipher = cipher
        self.forwardSecrecy = forwardSecrecy
    }
}

/// `tlsaudit ats`: what `nscurl --ats-diagnostics` tells on macOS, judged by what current iOS and
/// macOS clients offer and accept (docs/apple-rules.md sections 1, 2 and 5), and what to change: the
/// server first, then the smallest app-side exception, if any works at all.
public struct ATSDiagnostics: Hashable, Codable, Sendable {
    public static let schemaVersion = "tlsaudit.ats/2"

    public var schema: String = schemaVersion
    public var target: String
    public var address: String
    /// The store the chains were judged against (`apple` unless `--trust-store`/`--ca-file` said otherwise).
    public var trustStore: String?
    /// Every probe, `default` (a current client with default ATS) first.
    public var configurations: [ATSConfigurationResult]
    /// The `default` row again (schema 1 kept the current-client probe here).
    public var runtime: ATSConfigurationResult
    /// What a permissive OpenSSL client negotiated, when anything.
    public var serverOffer: ServerOffer?
    /// Apple's trust rules the chain breaks: no Info.plist key lifts them.
    public var trustProblems: [String]
    /// What to change on the server, most important first (empty when nothing needs to change).
    public var serverFixes: [String]
    /// The smallest app-side change that works, and its cost; or why none does.
    public var appSide: String
    /// Whether current Apple clients connect with default ATS, and why not.
    public var currentClients: String
    /// The whole conclusion in one paragraph: `currentClients`, the first server fix, `appSide`.
    public var recommendation: String
    /// The exception keys to declare (empty: none needed, or none helps).
    public var exception: [String: String]
    /// Ready to paste under NSAppTransportSecurity (nil when none is needed or none helps).
    public var infoPlist: String?
    /// 0 when a current Apple client connects with default ATS; 1 otherwise.
    public var exitCode: Int32
    /// The iOS clients of the client table (README, Client simulation), oldest first, each from its
    /// recorded ClientHello (the current one modelled), judged on the handshake and key sizes only
    /// (trust is the configurations' job); nil when they were not simulated.
    public var iosClients: [ClientSimulationResult]?
    /// The oldest of `iosClients` that connects (`Ios`: the JSON key `oldest_connecting_ios` reads back); nil when none does or none was simulated.
    public var oldestConnectingIos: ClientSimulationResult?
    /// What an app with default ATS and the system's trust evaluation logs when it does not connect
    /// (docs/apple-rules.md section 7); nil when it connects.
    public var error: AppleLoadError?
    /// The server demands a client certificate: no suite, version or exception advice applies.
    public var clientCertificateRequired = false
    /// The trust evaluation the app-side advice needs (`app audit --afnetworking` syntax); nil: the system's.
    public var appTrustEvaluation: String?
    /// The key the advice pins (`sha256/BASE64=`), with `appTrustEvaluation`.
    public var appPin: String?
    /// Set when the operator's own anchors judged the chain: the verdict holds only on devices that trust that root.
    public var anchors: String?
    /// Why no iOS connects, when `oldest_connecting_ios` is absent though the clients were simulated.
    public var oldestIosNote: String?
    /// Set only when older iOS versions connect and the newest simulated does not: the newest that
    /// connects, and the newest simulated (its short name) with why it fails.
    public var newestConnectingIos: ClientSimulationResult?
    public var newestIosRefusal: IOSRefusal?

    /// One iOS client that does not connect, and why.
    public struct IOSRefusal: Hashable, Codable, Sendable {
        public var client: String
        public var reason: String
    }

    /// `oldest iOS that connects: Safari 9 iOS 9 (TLSv1.2 ...)`, or that none of them does; nil when
    /// the iOS clients were not simulated. `newestStop` (`IOSVersionRules.newestStop`): where
    /// connecting stops, said so that the line does not read as "this version and every later one".
    public static func oldestIOSLine(_ clients: [ClientSimulationResult]?, oldest: ClientSimulationResult?, reason: String? = nil,
                                     newestStop: (connecting: ClientSimulationResult, newest: ClientSimulationResult, reason: String)? = nil) -> String? {
        guard let clients, !clients.isEmpty else { return nil }
        if let reason { return "oldest iOS that connects: none (\(reason))" }
        let scope = "of \(clients.count) iOS clients simulated from their ClientHellos, with ATS's and each version's trust rules (iOS 9 and later), docs/apple-rules.md section 8"
        guard let oldest else { return "oldest iOS that connects: none (\(scope))" }
        if let stop = newestStop {
            return "oldest iOS that connects: \(oldest.client) (\(oldest.summary)); the newest that connects is \(stop.connecting.client): "
                + "\(stop.newest.client), the newest simulated, does not (\(stop.reason)); \(scope)"
        }
        return "oldest iOS that connects: \(oldest.client) (\(oldest.summary); \(scope))"
    }

    /// Where connecting stops among the iOS versions (`IOSVersionRules.newestStop`), for `oldestIOSLine`.
    public var newestIosStop: (connecting: ClientSimulationResult, newest: ClientSimulationResult, reason: String)? {
        get {
            guard let connecting = newestConnectingIos, let refusal = newestIosRefusal, let newest = iosClients?.last(where: { $0.short == refusal.client })
            else { return nil }
            return (connecting, newest, refusal.reason)
        }
        set {
            newestConnectingIos = newValue?.connecting
            newestIosRefusal = newValue.map { IOSRefusal(client: $0.newest.short, reason: $0.reason) }
        }
    }

    /// The app-side rows, smallest relaxation first.
    static let exceptionOrder = [ATSConfigurationName.noForwardSecrecy, ATSConfigurationName.tls11, ATSConfigurationName.tls11NoForwardSecrecy,
                                 ATSConfigurationName.tls10, ATSConfigurationName.tls10NoForwardSecrecy, ATSConfigurationName.arbitraryLoads]
    static let ownTrustOrder = [ATSConfigurationName.insecureHTTPLoads, ATSConfigurationName.insecureHTTPLoadsNoForwardSecrecy,
                                ATSConfigurationName.insecureHTTPLoadsTLS10, ATSConfigurationName.insecureHTTPLoadsTLS10NoForwardSecrecy]

    /// - `trustFailures`: the chain's failures of Apple's trust rules (SHA-2, RSA >= 2048, a trusted
    ///   chain with the name in a SAN, EKU, lifetime), from any handshake that got a chain.
    /// - `privateAnchors`: the chain was judged against the operator's own CA (`--ca-file`).
    /// - `offerGroup`, `leafKey`: the key-exchange group of the permissive handshake and the leaf's
    ///   key, which say why a server that accepts a suite Apple's clients offer still refused them.
    /// - `atsOnlyFailures`: the chain's failures of ATS's own certificate rules that trustd's rules
    ///   for all TLS do not have (a SHA-224 signature): they get a server fix, and turning ATS off lifts them.
    public init(target: String, address: String, configurations: [ATSConfigurationResult], serverOffer: ServerOffer?,
                trustFailures: [Finding], atsOnlyFailures: [Finding] = [], privateAnchors: Bool, domain: String, offerGroup: String? = nil,
                leafKey: PublicKeyDescription? = nil) {
        self.target = target
        self.address = address
        self.configurations = configurations
        let row = { (name: String) in configurations.first { $0.name == name } }
        let defaultRow = row(ATSConfigurationName.defaultATS) ?? ATSConfigurationResult(name: ATSConfigurationName.defaultATS, exception: [:], pass: false, detail: "not probed",
                                                                  failure: .handshake)
        runtime = defaultRow
        self.serverOffer = serverOffer
        trustProblems = trustFailures.map(\.message)
        let fixes = Self.serverFixes(defaultRow: defaultRow, offer: serverOffer, trustFailures: trustFailures + atsOnlyFailures,
                                     privateAnchors: privateAnchors, offerGroup: offerGroup, leafKey: leafKey)
        serverFixes = fixes
        let documentedOnly = !defaultRow.pass && row(ATSConfigurationName.documentedList)?.pass == true

        if defaultRow.pass {
            recommendation = privateAnchors
                ? "no exception needed for an app that makes the private root its own anchor, nor on devices that trust it through a configuration profile or MDM; elsewhere the chain is untrusted"
                : "no exception needed: a current iPhone or Mac with default ATS connects"
            appSide = "none needed"
            currentClients = recommendation
            exception = [:]
            infoPlist = nil
            exitCode = 0
            return
        }
        exitCode = 1
        currentClients = documentedOnly
            ? "the server passes Apple's documented ATS list, but current iOS and macOS clients cannot connect (\(defaultRow.detail))"
            : "current iOS and macOS clients with default ATS cannot connect (\(defaultRow.detail))"
        let candidates = trustFailures.isEmpty ? Self.exceptionOrder : []
        if let passing = candidates.compactMap(row).first(where: \.pass) {
            if passing.name == ATSConfigurationName.arbitraryLoads {
                appSide = "only NSAllowsArbitraryLoads works (for every domain of the app: no per-domain exception is enough); it turns ATS off"
                exception = passing.exception
                infoPlist = Self.plist(domain: domain, exception: [:], arbitraryLoads: true)
            } else {
                appSide = "the smallest exception that works: " + Self.keys(passing.exception)
                exception = passing.exception
                infoPlist = Self.plist(domain: domain, exception: passing.exception)
            }
        } else if let own = Self.ownTrustOrder.compactMap(row).first(where: \.pass) {
            let rules = trustFailures.isEmpty ? "" : "No Info.plist exception makes the default trust evaluation pass. "
            appSide = rules + "The only app-side way is " + Self.keys(own.exception)
                + " for \(domain) with the app's own server trust evaluation (AFNetworking allowInvalidCertificates = YES with the server's certificate pinned): the app then accepts whatever its own code accepts, and without a pin anyone on the network path can impersonate the server"
            exception = own.exception
            infoPlist = Self.plist(domain: domain, exception: own.exception)
        } else {
            appSide = "no exception makes current Apple clients connect: they never offer what this server needs (\(defaultRow.detail)); only a server change helps"
            exception = [:]
            infoPlist = nil
        }
        recommendation = "\(currentClients). Fix on the server: \(fixes.first ?? "see the matrix"). In the app: \(appSide)"
    }

    /// `Key = value, Key = value`.
    static func keys(_ exception: [String: String]) -> String {
        exception.keys.sorted().map { "\($0) = \(exception[$0]!)" }.joined(separator: ", ")
    }

    /// The key-exchange groups current Apple clients offer, as OpenSSL names a negotiated one: X25519
    /// and the curves of the keys they take.
    static let appleGroups = CertificateRules.acceptedCurves.union(["x25519", "X25519"])

    /// The leaf key can sign a `version` handshake only with schemes Apple's clients do not offer:
    /// EdDSA, RSA-PSS (id-RSASSA-PSS), and P-521 in TLS 1.3 (`ClientContext.appleSignatureAlgorithms`).
    static func keySignsNothingAppleOffers(_ key: PublicKeyDescription, version: TLSVersion) -> Bool {
        if key.isRSAPSS || key.isEdDSA { return true }
        return key.isEC && version == .tls1_3 && ["secp521r1", "P-521"].contains(key.curve ?? "")
    }

    /// What to change on the server: the handshake first (nothing else matters until current
    /// clients can connect), then the certificate.
    static func serverFixes(defaultRow: ATSConfigurationResult, offer: ServerOffer?, trustFailures: [Finding],
                            privateAnchors: Bool, offerGroup: String? = nil, leafKey: PublicKeyDescription? = nil) -> [String] {
        var fixes: [String] = []
        if defaultRow.failure == .handshake || defaultRow.failure == .forwardSecrecy {
            // The example suite fits the leaf's key: an ECDSA certificate cannot serve an ECDHE_RSA suite.
            let example = leafKey?.isEC == true ? "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" : "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
            let suites = "ECDHE with AES-GCM or CHACHA20-POLY1305 (e.g. \(example)), or TLS 1.3"
            if let offer {
                let suite = offer.cipher.iana
                if offer.protocolVersion < .tls1_2 {
                    fixes.append("enable TLS 1.2 or 1.3 with \(suites): the server speaks only \(offer.protocolVersion.displayName) (with \(suite)), which ATS refuses")
                } else if suite.contains("_DHE_") {
                    fixes.append("enable \(suites): the server chose \(suite), and Apple clients never offer DHE suites")
                } else if !offer.forwardSecrecy {
                    fixes.append("enable \(suites): the server chose \(suite), static-RSA key exchange without forward secrecy")
                } else if suite.hasSuffix("_CBC_SHA256") || suite.hasSuffix("_CBC_SHA384") {
                    fixes.append("enable \(suites): the server chose \(suite), a CBC-SHA256/SHA384 suite that current Apple clients no longer offer")
                } else if offer.protocolVersion == .tls1_3 || ATSRequirements.runtimeTLS12Suites.contains(suite) {
                    // Apple's clients offer this suite: what they could not agree on is the group or the signature.
                    if let group = offerGroup, !Self.appleGroups.contains(group) {
                        fixes.append("enable X25519 or P-256 for key exchange: the server chose \(suite), which current Apple clients offer, with the group \(group), which they do not (they offer X25519, P-256, P-384 and P-521)")
                    } else if let key = leafKey, Self.keySignsNothingAppleOffers(key, version: offer.protocolVersion) {
                        fixes.append("serve a certificate with an RSA key of 2048 bits or more or an ECDSA P-256 or P-384 key: the server accepts \(suite), which current Apple clients offer, "
                            + "but its certificate's key (\(key.summary)) can sign \(offer.protocolVersion.displayName) only with a signature algorithm they do not offer "
                            + "(they offer ECDSA P-256/P-384, RSA-PSS and PKCS #1; none for P-521 in TLS 1.3, RSA-PSS keys or EdDSA)")
                    } else {
                        // Neither the suite, the group nor the key: the server's own signature-algorithm
                        // setting, or a failure that was not a refusal.
                        fixes.append("make the server complete a handshake with a current client (\(defaultRow.detail)): it accepts \(suite) from a permissive client, "
                            + "so compare its signature algorithms and groups with what Apple's clients offer (docs/apple-rules.md section 5)")
                    }
                } else {
                    fixes.append("enable TLS 1.2 or 1.3 with \(suites): the server chose \(offer.protocolVersion.displayName) with \(suite), which current Apple clients do not offer")
                }
            } else {
                fixes.append("make the server complete a TLS 1.2 or 1.3 handshake with \(defaultRow.detail.isEmpty ? "a current client" : "a current client (\(defaultRow.detail))")")
            }
        }
        var seen = Set<String>()
        for failure in trustFailures {
            guard let fix = certificateFix(failure, privateAnchors: privateAnchors), seen.insert(fix).inserted else { continue }
            fixes.append(fix)
        }
        return fixes
    }

    /// The certificate change that removes one trust failure: the finding's advice from
    /// `FindingCatalog`, then its message.
    static func certificateFix(_ failure: Finding, privateAnchors: Bool) -> String? {
        guard failure.id != .atsTrust else { return nil } // The trust.* findings behind it say what to change.
        let at = failure.depth.map { $0 == 0 ? "the leaf" : "the CA certificate at depth \($0)" } ?? "the chain"
        let advice = FindingCatalog[failure.id]?.fix?.detailed(certificate: at, privateAnchors: privateAnchors) ?? "fix the certificate"
        return "\(advice): \(failure.message)"
    }

    static func plist(domain: String, exception: [String: String], arbitraryLoads: Bool = false) -> String {
        if arbitraryLoads {
            return "<key>NSAppTransportSecurity</key>\n<dict>\n  <key>NSAllowsArbitraryLoads</key>\n  <true/>\n</dict>\n"
        }
        var out = "<key>NSAppTransportSecurity</key>\n<dict>\n  <key>NSExceptionDomains</key>\n  <dict>\n"
        out += legacyTLSComment(exception["NSExceptionMinimumTLSVersion"])
        out += "    <key>\(domain)</key>\n    <dict>\n"
        for key in exception.keys.sorted() { out += plistEntry(key, exception[key]!, indent: "      ") }
        out += "    </dict>\n  </dict>\n</dict>\n"
        return out
    }

    /// An XML comment above an entry whose NSExceptionMinimumTLSVersion allows TLS 1.0 or 1.1: Apple's
    /// deprecation (docs/apple-rules.md section 8); empty for any other minimum.
    static func legacyTLSComment(_ minimumTLSVersion: String?) -> String {
        guard let version = minimumTLSVersion, version == "TLSv1.0" || version == "TLSv1.1" else { return "" }
        return "    <!-- \(version): deprecated since iOS 15, iPadOS 15 and macOS 12, and Apple will remove it: fix the server -->\n"
    }

    /// NSExceptionAllowsInsecureHTTPLoads for `domain`, ready to paste.
    public static func plistForInsecureLoads(domain: String) -> String {
        plist(domain: domain, exception: ["NSExceptionAllowsInsecureHTTPLoads": "YES"])
    }

    /// One key and its value as plist XML lines: `YES`/`NO` as booleans, anything else as a string.
    static func plistEntry(_ key: String, _ value: String, indent: String) -> String {
        "\(indent)<key>\(key)</key>\n" + (value == "NO" ? "\(indent)<false/>\n" : value == "YES" ? "\(indent)<true/>\n" : "\(indent)<string>\(value)</string>\n")
    }
}
