import Foundation


extension AddressAssessment {
    /// Judges what the probe saw at an address for `target`: trust and revocation findings, the
    /// policy's rules, lints, the pins (AFNetworking's order), the verdict; the result kept within
    /// the record budget.
    public static func judge(_ probed: ProbedAddress, target: ScanTarget) -> AddressScanResult {
        var context = TrustContext(hostname: target.sni ?? target.host, time: probed.time, publicTrust: probed.chain?.judgedAsPublic ?? probed.publicTrust)
        context.distrust = DistrustCheck.make(probed.distrust, policy: target.policy, publicTrust: probed.publicTrust, scts: probed.scts)
        let presented = probed.presented, building = probed.building
        var findings: [Finding]
        var verdict: PolicyVerdict
        var handshake = probed.handshake
        if let leaf = presented.first {
            handshake?.certificateTransparency = certificateTransparencyReport(probed.scts, leaf: leaf, building: building,
                                                                               publicTrust: probed.publicTrust, logs: probed.ctLogs,
                                                                               at: probed.time)
        }
        if let observation = handshake {
            (findings, verdict) = assess(observation: observation, presented: presented, building: building,
                                         revocation: probed.chain?.revocation, context: context, policy: target.policy,
                                         atsClientRefusal: probed.atsClientRefusal,
                                         evidence: ConfigurationEvidence(enumeration: probed.enumeration?.judged(), inventory: probed.inventory,
                                                                         vulnerabilities: probed.vulnerabilities),
                                         checkFindings: CheckReport.findings(of: probed.checkReports))
        } else {
            findings = assessChainOnly(presented: presented, building: building, revocation: probed.chain?.revocation, context: context)
            verdict = notScanned(target.policy)
        }
        if probed.failure != nil { verdict = notScanned(target.policy) }
        var app: AppHostOutcome?
        var afnetworkingPin: PinEvaluation?
        if let rules = target.app {
            let (outcome, afnetworking) = appOutcome(rules, host: target.sni ?? target.host, probes: probed.appProbes, failure: probed.failure)
            app = outcome
            afnetworkingPin = afnetworking
            if probed.failure == nil, handshake != nil {
                let lifted: Bool
                (findings, verdict, lifted) = applying(outcome, to: findings, policy: target.policy)
                // A generic Apple client connects as well: the verdict relies on no exception.
                if outcome.connects, !lifted { app?.reliesOn = [] }
            }
        }
        var pin: PinEvaluation?
        if let pins = target.pins, !presented.isEmpty || probed.failure == nil {
            let evaluation = pinEvaluation(pins, probed: probed, findings: findings, context: context)
            pin = evaluation
            if evaluation.state == .mismatch {
                findings.insert(Finding(.pinMismatch, .error, "A pinned client refuses this server: \(evaluation.message)."), at: 0)
            }
            findings += pins.policyFindings
        }
        // The app's AFSecurityPolicy is its pins too: shown as the pin state unless the target's own pins already mismatch.
        if let afnetworkingPin, afnetworkingPin.state != .none, pin?.state != .mismatch, pin == nil || afnetworkingPin.state == .mismatch {
            pin = afnetworkingPin
            if afnetworkingPin.state == .mismatch {
                findings.insert(Finding(.pinMismatch, .error, "The app's AFSecurityPolicy refuses this server: \(afnetworkingPin.message)."), at: 0)
            }
        }
        var result = AddressScanResult(address: probed.address, family: probed.family, port: probed.port,
                                       status: probed.failure == nil ? .completed : .failed, startedAt: probed.startedAt,
                                       durationMs: probed.durationMs, handshake: handshake,
                                       atsClientRefusal: probed.handshake == nil ? nil : probed.atsClientRefusal, error: probed.failure,
                                       chain: probed.chain, findings: findings, ats: verdict, pin: pin)
            .with(inventory: probed.inventory, headers: probed.headers, vulnerabilities: probed.vulnerabilities, clients: probed.clients,
                  checkReports: probed.checkReports.isEmpty ? nil : probed.checkReports)
        result.enumeration = probed.enumeration?.judged()
        result.app = app
        return result.withinBudget()
    }

    /// The pin check, in AFNetworking's order. Certificate mode evaluates the chain a second time
    /// with the pinned certificates as its only anchors (partial chains allowed: a pinned leaf is
    /// its own anchor), with dates, and with the name when `validates_domain_name`.
    static func pinEvaluation(_ pins: PinPolicy, probed: ProbedAddress, findings: [Finding], context: TrustContext) -> PinEvaluation {
        pinEvaluation(pins, presented: probed.presented, path: probed.building.path, trustErrors: findings.filter(\.isTrustError),
                      context: context, buildWithPinnedAnchors: probed.buildWithPinnedAnchors)
    }

    /// The pin check of a chain (`presented`, its `path` against the target's anchors and that
    /// path's `trustErrors`), in AFNetworking's order: what `scan` does for `pins:` and `app audit`
    /// for `--afnetworking` on the probe that stands for the app's rules.
    static func pinEvaluation(_ pins: PinPolicy, presented: [CertificateSummary], path: [PathElement], trustErrors: [Finding],
                                     context: TrustContext, buildWithPinnedAnchors: (([Data]) -> PathBuildingResult?)?) -> PinEvaluation {
        pins.evaluate(presented: presented, path: path, trustErrors: trustErrors) { pinned in
            guard let pinnedBuilding = buildWithPinnedAnchors?(pinned) else {
                return PinnedAnchorEvaluation(path: [], errors: [Finding(.trustInvalid, .error, "the pinned certificates cannot be read")])
            }
            // trustd judges the leaf by the kind of anchor reached: a pinned root of Apple's store
            // brings its rules (serverAuth itself, 398 days), any other pin an app's own anchor's.
            let pinnedContext = TrustContext(hostname: pins.validatesDomainName ? context.hostname : nil, time: context.time,
                                             publicTrust: pinnedBuilding.anchorIsPublic ?? false)
            var errors = TrustEvaluator.evaluate(presented: presented, building: pinnedBuilding, context: pinnedContext)
                .filter { $0.severity == .error }
            if !pinnedBuilding.anchored, errors.isEmpty {
                errors.append(Finding(.trustInvalid, .error, "the chain does not lead to a pinned certificate"))
            }
            return PinnedAnchorEvaluation(path: pinnedBuilding.path.map(\.certificate), errors: errors)
        }
    }
}


extension AddressAssessment {
    /// Judges a chain read from files as a scan judges a server's (Apple's trust rules, revocation,
    /// lints), but for what only a server can show (presentation order, the handshake).
    public static func judge(_ probed: ProbedChain, toolVersion: String) -> VerifyReport {
        var context = TrustContext(hostname: probed.host, time: probed.time, publicTrust: probed.chain.judgedAsPublic, fromFiles: true)
        context.distrust = DistrustCheck.make(probed.distrust, policy: .default, publicTrust: probed.publicTrust, scts: probed.scts)
        // Trust judges the chain in path order, with the leaf first.
        var ordered = probed.presented
        ordered.swapAt(0, probed.leafIndex)
        let policy = CompliancePolicy.appleTrust
        var trust = trustFindings(presented: ordered, building: probed.building, revocation: probed.chain.revocation, context: context,
                                  clientFetchesRevocation: policy.fetchesRevocation)
            .filter { !$0.id.rawValue.hasPrefix("chain.") } // Presentation order is not a property of a file.
        let transparency = certificateTransparencyReport(probed.scts, leaf: ordered[0], building: probed.building,
                                                         publicTrust: probed.publicTrust, logs: probed.ctLogs, at: probed.time)
        if transparency.policy.required, !transparency.policy.satisfied {
            // A warning: a server may still deliver SCTs over the TLS extension or OCSP, which a file cannot show.
            trust.append(Finding(.trustCertificateTransparency, .warning,
                "The certificate's embedded SCTs do not meet Apple's Certificate Transparency policy (\(transparency.policy.reason)); a server must deliver more over the TLS extension or a stapled OCSP response."))
        } else if let provisional = transparencyFinding(transparency.policy) {
            trust.append(provisional)
        }
        var findings = sort(ATSRequirements.evaluateChain(presented: ordered, building: probed.building, trustFindings: trust, underATS: false) + trust
                            + lints(presented: ordered, building: probed.building))
        let verdict = policy.verdict(from: findings)
        var chain: ChainReport? = probed.chain
        RecordBudget.bound(chain: &chain, findings: &findings)
        var report = VerifyReport(toolVersion: toolVersion, evaluatedAt: probed.time, inputs: probed.inputs, host: probed.host,
                                  leafIndex: probed.leafIndex, chain: chain ?? probed.chain, findings: findings, verdict: verdict)
        report.certificateTransparency = transparency
        return report
    }
}
