import Foundation

extension AppHostRules {
    /// The rules `effective` gives its host, for a target's `app:` setting: with the `ats`
    /// configuration that stands for them and the keys a passing verdict relies on.
    public init(bundle: String, effective: EffectiveHostPolicy, declaredKeys: [String], afnetworking: PinPolicy? = nil,
                trustEvaluation: AppTrustEvaluation = .system) {
        let probe = effective.atsProbe(appEvaluatesTrust: trustEvaluation.replacesSystemEvaluation || afnetworking != nil)
        var relied: [String]
        switch effective.source {
        case .exceptionDomain:
            // The keys that relax something; NSIncludesSubdomains only when it is how the entry reaches the host.
            relied = declaredKeys.filter { AppAudit.relaxes($0) && $0 != "NSIncludesSubdomains" }
            if effective.entry != effective.host, declaredKeys.contains("NSIncludesSubdomains") { relied.insert("NSIncludesSubdomains", at: 0) }
        case .arbitraryLoads: relied = ["NSAllowsArbitraryLoads"]
        case .localNetworking: relied = ["NSAllowsLocalNetworking"]
        case .defaultATS: relied = []
        }
        self.init(bundle: bundle, entry: effective.entry, reliesOn: relied, minimumTLSVersion: effective.minimumTLSVersion,
                  requiresForwardSecrecy: effective.requiresForwardSecrecy, allowsInsecureHTTPLoads: effective.allowsInsecureHTTPLoads,
                  arbitraryLoads: effective.arbitraryLoads, requiresCertificateTransparency: effective.requiresCertificateTransparency,
                  configuration: probe.configuration, minimumNegotiatedVersion: probe.minimumNegotiatedVersion,
                  afnetworking: afnetworking)
        if trustEvaluation != .system, afnetworking == nil { self.trustEvaluation = trustEvaluation }
    }

    /// These rules as a configuration file's `app:` gives them, completed: ATS off lifts the
    /// minimums as the app's model does (`EffectiveHostPolicy.turnOffATS`), and the configuration
    /// that stands for them is derived (only the rules are written).
    public var derived: AppHostRules {
        var effective = EffectiveHostPolicy(self, host: entry ?? "")
        if arbitraryLoads { effective.turnOffATS() }
        let probe = effective.atsProbe(appEvaluatesTrust: evaluation.replacesSystemEvaluation)
        var copy = self
        copy.minimumTLSVersion = effective.minimumTLSVersion
        copy.requiresForwardSecrecy = effective.requiresForwardSecrecy
        copy.allowsInsecureHTTPLoads = effective.allowsInsecureHTTPLoads
        copy.configuration = probe.configuration
        copy.minimumNegotiatedVersion = probe.minimumNegotiatedVersion
        return copy
    }
}

extension AppTransportSecurityPolicy {
    /// The rules this app (`bundle`) gives `host`, as `app import` writes them into a target's `app:`:
    /// the effective policy, and the keys of the entry that applies.
    public func hostRules(for host: String, bundle: String, afnetworking: PinPolicy? = nil,
                          trustEvaluation: AppTrustEvaluation = .system) -> AppHostRules {
        let effective = effectivePolicy(for: host)
        let declared = effective.entry.flatMap { entry in exceptionDomains.first { $0.domain == entry } }?.declaredKeys ?? []
        return AppHostRules(bundle: bundle, effective: effective, declaredKeys: declared, afnetworking: afnetworking,
                            trustEvaluation: trustEvaluation)
    }
}

extension AppHostOutcome {
    /// The outcome for a target judged by `rules`: what the app's client found.
    init(_ rules: AppHostRules, connects: Bool, reasons: [String], detail: String) {
        self.init(bundle: rules.bundle, entry: rules.entry, reliesOn: rules.reliesOn, configuration: rules.configuration,
                  connects: connects, reasons: reasons, detail: detail)
    }
}

extension EffectiveHostPolicy {
    /// The policy a target's `app:` rules stand for (pins are the target's `pins:`, not repeated here).
    public init(_ rules: AppHostRules, host: String) {
        let source: Source = if let entry = rules.entry { .exceptionDomain(entry) }
            else if rules.reliesOn == ["NSAllowsLocalNetworking"] { .localNetworking }
            else if rules.arbitraryLoads { .arbitraryLoads }
            else { .defaultATS }
        self.init(host: AppTransportSecurityPolicy.normalized(host), minimumTLSVersion: rules.minimumTLSVersion,
                  requiresForwardSecrecy: rules.requiresForwardSecrecy, allowsInsecureHTTPLoads: rules.allowsInsecureHTTPLoads,
                  arbitraryLoads: rules.arbitraryLoads, requiresCertificateTransparency: rules.requiresCertificateTransparency,
                  pins: nil, source: source, reason: "app \(rules.bundle): " + (rules.entry.map { "NSExceptionDomains entry '\($0)'" } ?? "its global rules"),
                  pinReason: "the target's pins")
    }
}

extension AddressAssessment {
    /// Whether the app's client connects, judged on the probe of its configuration exactly as
    /// `tlsaudit app audit` judges it (`AppAudit.outcome`), so both give the same per-host answer;
    /// with the app's AFSecurityPolicy evaluation when it has one.
    public static func appOutcome(_ rules: AppHostRules, host: String, probes: ATSProbes?,
                                  failure: ProbeFailure?) -> (outcome: AppHostOutcome, afnetworking: PinEvaluation?) {
        guard let probes, failure == nil, probes.noTLSServer == nil else {
            let failure = failure ?? probes?.noTLSServer
            var unreached = AppHostOutcome(rules, connects: false, reasons: [failure.map { "failure.\($0.category.rawValue)" } ?? "failure.internal-error"],
                                           detail: failure?.description ?? "not reached")
            unreached.error = failure.map { AppleLoadErrors.error(for: $0.category) } ?? AppleLoadErrors.cannotConnect
            return (unreached, nil)
        }
        let outcome = AppAudit.outcome(EffectiveHostPolicy(rules, host: host), probes: probes, diagnostics: ATSDiagnostics.judge(probes),
                                       host: host, afnetworking: rules.afnetworking, trustEvaluation: rules.evaluation)
        var judged = AppHostOutcome(rules, connects: outcome.connects, reasons: outcome.reasons, detail: outcome.detail)
        judged.error = outcome.error
        return (judged, outcome.afnetworking)
    }

    /// The rules of a generic Apple client that an app's exception lifts when that app's client
    /// connects: the transport rules always; ATS's digest rule (SHA-224) where ATS is off; trust too
    /// when the app evaluates it itself (insecure HTTP loads).
    static func liftedRules(configuration: String) -> Set<FindingID> {
        var lifted: Set<FindingID> = [.atsTLSVersion, .atsForwardSecrecy, .atsCipherSuite, .atsHandshake]
        // The configuration names say what they relax (`ATSConfigurationName`).
        if configuration.hasPrefix(ATSConfigurationName.arbitraryLoads) {
            lifted.insert(.atsSignatureHash)
        }
        if configuration.hasPrefix(ATSConfigurationName.insecureHTTPLoads) || configuration == ATSConfigurationName.arbitraryLoadsOwnTrustEvaluation {
            lifted.formUnion([.atsTrust, .atsSignatureHash, .atsKeySize])
        }
        return lifted
    }

    /// The findings and verdict of a target judged by an app's rules: when the app's client
    /// connects, what its exception lifts is kept as information naming the exception relied on;
    /// when it does not, the verdict fails even where a generic client would pass.
    public static func applying(_ outcome: AppHostOutcome, to findings: [Finding],
                                policy: CompliancePolicy) -> (findings: [Finding], verdict: PolicyVerdict, lifted: Bool) {
        var adjusted = findings
        var lifted = false
        if outcome.connects {
            let liftable = liftedRules(configuration: outcome.configuration)
            for index in adjusted.indices where adjusted[index].severity == .error && liftable.contains(adjusted[index].id) {
                adjusted[index].severity = .info
                lifted = true
                adjusted[index].message = "Lifted for app \(outcome.bundle) by \(outcome.reliance): " + adjusted[index].message
            }
        } else if policy.verdict(from: adjusted).compliant, outcome.reasons != [FindingID.pinMismatch.rawValue] {
            // (A pin mismatch alone is the pin's verdict: `pin.mismatch`, counted with the pins.)
            adjusted.append(Finding(.atsHandshake, .error,
                "App \(outcome.bundle)'s client (ATS configuration \(outcome.configuration)) does not connect: \(outcome.detail) (\(outcome.reasons.joined(separator: ", ")))."))
        }
        let sorted = sort(adjusted)
        return (sorted, policy.verdict(from: sorted), lifted)
    }
}

extension AppAudit {
    /// `key` is an exception that relaxes a rule (not a requirement such as NSRequiresCertificateTransparency).
    static func relaxes(_ key: String) -> Bool { removing(key, from: .init(domain: "")) != nil }
}
