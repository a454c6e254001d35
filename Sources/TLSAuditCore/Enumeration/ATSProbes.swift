import Foundation

extension ATSDiagnostics {
    /// How the server fix for a chain completed from a caIssuers URL begins: the one fix a host
    /// that connects still carries (`app audit`).
    public static let sendIntermediateFix = "send the intermediate CA certificate with the leaf"

    /// Judges each configuration as a current Apple client would, and draws the conclusion.
    public static func judge(_ probes: ATSProbes) -> ATSDiagnostics {
        let context = probes.trustContext(hostname: probes.domain)
        // Apple's trust rules for all TLS, judged on each chain a probe received (a server may send an
        // ECDSA certificate to ECDHE suites and an RSA one to static RSA), each distinct chain once.
        var judgedChains: [ProbedChainPath: (findings: [Finding], path: [CertificateSummary])] = [:]
        func judged(_ chain: ProbedChainPath?) -> (findings: [Finding], path: [CertificateSummary])? {
            guard let chain else { return nil }
            if let known = judgedChains[chain] { return known }
            let result = chainFailures(chain, context: context)
            judgedChains[chain] = result
            return result
        }
        var results: [ATSConfigurationResult] = []
        for configuration in probes.configurations {
            let own = judged(configuration.chain)
            let (pass, detail, failure) = judge(configuration, trustFailures: configuration.judgesTrust ? own?.findings ?? [] : [],
                                                path: own?.path ?? [])
            results.append(ATSConfigurationResult(name: configuration.name, exception: configuration.exception, pass: pass,
                                                  detail: detail, failure: failure, diagnostic: configuration.diagnostic,
                                                  ownTrustEvaluation: !configuration.judgesTrust && !configuration.diagnostic))
        }
        // What the server offers a permissive client (the last probe): its suite, group and leaf key.
        let permissive = probes.configurations.last
        let offer = permissive?.handshake.map {
            ServerOffer(protocolVersion: $0.protocolVersion, cipher: $0.cipher, forwardSecrecy: $0.keyExchange.forwardSecrecy)
        }
        // The conclusion speaks of the chain a current client gets (the default row's), else the first one seen.
        let conclusionSource = probes.configurations.first?.chain ?? probes.configurations.lazy.compactMap(\.chain).first
        let conclusionChain = judged(conclusionSource)
        // A SHA-224 signature breaks an ATS rule that turning ATS off lifts, not a trust rule.
        let (atsOnly, trustFailures) = (conclusionChain?.findings ?? []).reduce(into: ([Finding](), [Finding]())) { split, failure in
            if isATSOnlyFailure(failure, in: conclusionChain?.path ?? []) { split.0.append(failure) } else { split.1.append(failure) }
        }
        var diagnostics = ATSDiagnostics(target: probes.target, address: probes.address, configurations: results, serverOffer: offer,
                                         trustFailures: trustFailures, atsOnlyFailures: atsOnly, privateAnchors: probes.privateAnchors, domain: probes.domain,
                                         offerGroup: permissive?.handshake?.keyExchange.group,
                                         leafKey: permissive?.chain?.presented.first?.publicKey)
        diagnostics.trustStore = probes.trustStore
        // A chain completed from a caIssuers URL up to a trusted root: Apple's clients connect, most others do not.
        let fetched = (conclusionSource?.building.fetchedIntermediatesToSend ?? []).map(\.certificate.displayName)
        if !fetched.isEmpty {
            diagnostics.serverFixes.append(ATSDiagnostics.sendIntermediateFix + " (\(fetched.joined(separator: ", "))): an Apple client "
                + "fetches it from the caIssuers URL in the AIA and connects, but Android, Firefox and Java clients refuse the chain (chain.aia-fetched)")
        }
        diagnostics.iosClients = probes.iOSClients?.clients
        diagnostics.oldestConnectingIos = probes.iOSClients?.oldestConnectingIOS
        diagnostics.adviseApp(probes)
        return diagnostics
    }

    /// Apple's trust rules for all TLS on one chain: the errors (`trust.*` and the ATS certificate
    /// rules, without the summary `ats.trust`) and the path they were judged on.
    static func chainFailures(_ chain: ProbedChainPath, context: TrustContext) -> (findings: [Finding], path: [CertificateSummary]) {
        var trust = TrustEvaluator.evaluate(presented: chain.presented, building: chain.building, context: context)
        // A stapled response that says "revoked" fails the chain (trustd reads staples always).
        trust += (chain.stapledRevocation?.findings(names: chain.building.path.map(\.certificate.displayName)) ?? []).filter { $0.id == .trustRevoked }
        let rules = ATSRequirements.evaluateChain(presented: chain.presented, building: chain.building, trustFindings: trust)
        let failures = (rules + trust).filter { $0.severity == .error && $0.id != .atsTrust }
        return (failures, chain.building.path.isEmpty ? chain.presented : chain.building.path.map(\.certificate))
    }

    /// One configuration judged with the system's default trust evaluation, whatever it stands for:
    /// an app that leaves the server-trust challenge to the system gets no relief from
    /// NSExceptionAllowsInsecureHTTPLoads (`AppTrustEvaluation.system`).
    public static func judgedWithSystemTrust(_ configuration: ATSConfigurationProbe, probes: ATSProbes) -> ATSConfigurationResult {
        let context = probes.trustContext(hostname: probes.domain)
        let own = configuration.chain.map { chainFailures($0, context: context) }
        let (pass, detail, failure) = judge(configuration, trustFailures: own?.findings ?? [], path: own?.path ?? [])
        return ATSConfigurationResult(name: configuration.name, exception: configuration.exception, pass: pass, detail: detail,
                                      failure: failure, diagnostic: configuration.diagnostic)
    }

    /// Whether a failure is an ATS certificate rule that trustd's rules for all TLS do not have, so
    /// that turning ATS off for the host (NSAllowsArbitraryLoads) lifts it: a SHA-224 signature.
    /// (Key sizes are not: trustd's SSL policy asks RSA >= 2048 and ECC >= 256 bits of every TLS
    /// server chain, `SecPolicyAddStrongKeySizeOptions`, the same as ATS.)
    static func isATSOnlyFailure(_ failure: Finding, in path: [CertificateSummary]) -> Bool {
        guard failure.id == .atsSignatureHash, let depth = failure.depth, path.indices.contains(depth) else { return false }
        return CertificateRules.hasATSOnlyWeakSignature(path[depth])
    }

    /// Whether a current Apple client under one configuration accepts the handshake: it completed,
    /// with forward secrecy when required, and the chain meets Apple's trust rules (unless the app
    /// evaluates trust itself); ATS's own certificate rules only where ATS is on.
    static func judge(_ probe: ATSConfigurationProbe, trustFailures: [Finding],
                      path: [CertificateSummary]) -> (Bool, String, ATSConfigurationResult.Failure?) {
        guard let observation = probe.handshake, probe.failure == nil else {
            return (false, probe.failure?.description ?? "no handshake", .handshake)
        }
        let negotiated = "\(observation.protocolVersion.displayName), \(observation.cipher.iana)"
        if probe.forwardSecrecy, !observation.keyExchange.forwardSecrecy {
            return (false, "negotiated \(negotiated) without forward secrecy", .forwardSecrecy)
        }
        let atsOff = probe.name.hasPrefix(ATSConfigurationName.arbitraryLoads)
        let failures = trustFailures.filter { !(atsOff && isATSOnlyFailure($0, in: path)) }
        guard failures.isEmpty else {
            let reasons = failures.map { $0.message.hasPrefix("The ") ? "the" + $0.message.dropFirst(3) : $0.message }
            return (false, "negotiated \(negotiated), but " + RecordBudget.list(reasons, limit: 3, separator: " "), .trust)
        }
        return (true, "negotiated \(negotiated)", nil)
    }
}

extension ATSProbes {
    /// The trust context a current Apple client judges these probes' chains in: the name asked
    /// for, the time, public or private anchors, and Apple's date-bounded distrust.
    func trustContext(hostname: String) -> TrustContext {
        var context = TrustContext(hostname: hostname, time: time, publicTrust: !privateAnchors)
        context.distrust = DistrustCheck.make(distrust, policy: .atsRuntime, publicTrust: !privateAnchors,
                                              scts: configurations.first { !$0.scts.isEmpty }?.scts ?? [])
        return context
    }
}
