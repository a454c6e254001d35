/// What an app's URLSession load required on each iOS version, for "oldest iOS that connects"
/// (docs/apple-rules.md section 8): the handshake the version's client makes (the client table's
/// simulation), the app's ATS rules for the host (iOS 9 and later), and the trust rules as that
/// version applied them. A chain failure that no version forgives (expired, untrusted, wrong name)
/// means no version connects.
public enum IOSVersionRules {
    /// A trust rule that began with an iOS version.
    public struct Rule: Sendable {
        /// The findings it stands for.
        public var findings: Set<FindingID>
        /// The first iOS version that applies it to an app's loads.
        public var since: [Int]
        /// The first version that applies it to issuing CAs (the findings at depth 1 and up), when later.
        public var issuingCAsSince: [Int]? = nil
        public var source: String
    }

    /// ATS arrived with iOS 9: the rules an app with ATS on applies from then on.
    public static let atsSince = [9]

    /// The same rules on issuing CAs began with iOS 13 (Apple support HT210176).
    public static let issuingCASince = [13]

    public static let rules: [Rule] = [
        Rule(findings: [.atsSignatureHash, .atsKeySize], since: atsSince, issuingCAsSince: issuingCASince,
             source: "App Transport Security (iOS 9): SHA-256 or better, RSA 2048 / ECC 256 bits or more (NSAppTransportSecurity); on issuing CAs from iOS 13 (HT210176)"),
        Rule(findings: [.trustCertificateTransparency], since: [12, 1, 1],
             source: "Apple's Certificate Transparency policy, enforced from iOS 12.1.1 (Apple support HT205280)"),
        Rule(findings: [.trustEKU, .trustLifetime], since: [13],
             source: "Requirements for trusted certificates in iOS 13 and macOS 10.15 (Apple support HT210176): serverAuth EKU, at most 825 days; 398 days for certificates issued from 2020-09-01 (HT211025)"),
    ]

    /// The version a client stands for: its iOS version, or the current one for the modelled client.
    static func version(of client: ClientSimulationResult) -> [Int]? {
        SimulatedClientRegistry.client(short: client.short).flatMap { $0.iOSVersion ?? ($0.isIOS ? [Int.max] : nil) }
    }

    /// The first iOS version that applies the rule `finding` fails, read from the certificates (not
    /// from the message, which quotes certificate text): ATS's key and digest rules on the leaf from
    /// iOS 9, on issuing CAs from iOS 13; a host named only in the CN of a leaf without subjectAltNames
    /// from iOS 13 (earlier versions matched the CN); serverAuth from iOS 13, except an extendedKeyUsage
    /// without any server usage, which every version refused. Nil: a failure every version applies.
    static func since(_ finding: Finding, leaf: CertificateSummary?, hostname: String?) -> [Int]? {
        switch finding.id {
        case .trustHostnameMismatch:
            guard let leaf, let hostname else { return nil }
            return HostnameMatcher.namedOnlyByCommonName(host: hostname, leaf: leaf) ? [13] : nil
        case .trustEKU where (finding.depth ?? 0) == 0:
            guard let leaf else { return [13] }
            return CertificateRules.leafUsageAllowsServer(leaf) ? [13] : nil
        default:
            guard let rule = rules.first(where: { $0.findings.contains(finding.id) }) else { return nil }
            return (finding.depth ?? 0) > 0 ? rule.issuingCAsSince ?? rule.since : rule.since
        }
    }

    /// The oldest iOS with ATS whose client connects to the server under the app's rules, or why none does.
    /// - Parameters:
    ///   - clients: the client table's iOS clients, simulated from their ClientHellos.
    ///   - chainFailures: the chain's failures of Apple's trust rules under the current iOS (empty
    ///     when the app evaluates trust itself, or the chain passes).
    ///   - minimumTLSVersion, forwardSecrecy: the app's ATS rules for the host.
    ///   - leaf, hostname: the chain's leaf and the name the app asks for (the dating of some failures reads them).
    public static func oldest(_ clients: [ClientSimulationResult], chainFailures: [Finding], leaf: CertificateSummary? = nil,
                              hostname: String? = nil, minimumTLSVersion: TLSVersion,
                              forwardSecrecy: Bool) -> (client: ClientSimulationResult?, reason: String?) {
        let since = { (finding: Finding) in Self.since(finding, leaf: leaf, hostname: hostname) }
        let permanent = chainFailures.filter { since($0) == nil }
        if let first = permanent.first {
            return (nil, "the chain fails a trust rule every iOS applies (\(first.id))")
        }
        let ordered = atsClients(clients)
        if let client = ordered.first(where: { refusal(of: $0, chainFailures: chainFailures, since: since, minimumTLSVersion: minimumTLSVersion,
                                                       forwardSecrecy: forwardSecrecy) == nil }) {
            return (client, nil)
        }
        if chainFailures.contains(where: { ($0.id == .atsSignatureHash || $0.id == .atsKeySize) && ($0.depth ?? 0) == 0 }) {
            return (nil, "the chain fails ATS's certificate rules, which every iOS with ATS applies (iOS 9 and later)")
        }
        return (nil, ordered.isEmpty ? "no iOS client with ATS was simulated" : "no iOS client with ATS (iOS 9 and later) connects under the app's rules")
    }

    /// When older iOS versions connect and the newest simulated does not (a suite later clients
    /// dropped, a rule a later version began): the newest that connects, and the newest simulated
    /// with why it fails. Nil when the newest connects, or none does.
    public static func newestStop(_ clients: [ClientSimulationResult], chainFailures: [Finding], leaf: CertificateSummary? = nil,
                                  hostname: String? = nil, minimumTLSVersion: TLSVersion,
                                  forwardSecrecy: Bool) -> (connecting: ClientSimulationResult, newest: ClientSimulationResult, reason: String)? {
        let since = { (finding: Finding) in Self.since(finding, leaf: leaf, hostname: hostname) }
        guard !chainFailures.contains(where: { since($0) == nil }) else { return nil }
        let judged = atsClients(clients).map { client in
            (client, refusal(of: client, chainFailures: chainFailures, since: since, minimumTLSVersion: minimumTLSVersion, forwardSecrecy: forwardSecrecy))
        }
        guard let newest = judged.last, let reason = newest.1, let connecting = judged.last(where: { $0.1 == nil })?.0 else { return nil }
        return (connecting, newest.0, reason)
    }

    /// The table's iOS clients with ATS (iOS 9 and later), oldest first.
    static func atsClients(_ clients: [ClientSimulationResult]) -> [ClientSimulationResult] {
        clients.filter { version(of: $0).map { !$0.lexicographicallyPrecedes(atsSince) } ?? false }
            .sorted { version(of: $0)!.lexicographicallyPrecedes(version(of: $1)!) }
    }

    /// Why `client` does not connect under the app's rules, or nil when it does.
    static func refusal(of client: ClientSimulationResult, chainFailures: [Finding], since: (Finding) -> [Int]?,
                        minimumTLSVersion: TLSVersion, forwardSecrecy: Bool) -> String? {
        guard client.connects else { return client.failure ?? "no handshake" }
        let clientVersion = version(of: client)!
        if let failure = chainFailures.first(where: { since($0).map { !clientVersion.lexicographicallyPrecedes($0) } ?? false }) {
            return "\(failure.id), a rule since iOS \(since(failure)!.map(String.init).joined(separator: "."))"
        }
        guard let negotiated = client.protocolVersion.flatMap(TLSVersion.init(rawValue:)), negotiated >= minimumTLSVersion else {
            return "negotiates \(client.protocolVersion ?? "no version"), under the minimum \(minimumTLSVersion.displayName)"
        }
        if forwardSecrecy, client.group?.hasPrefix("RSA") == true { return "RSA key exchange, without forward secrecy" }
        return nil
    }
}
