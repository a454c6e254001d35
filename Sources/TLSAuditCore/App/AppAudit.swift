import Foundation

/// `tlsaudit app audit`'s judge: each host the app calls, by the app's own ATS rules for it
/// (`AppTransportSecurityPolicy.effectivePolicy(for:)`) on the `ats` probe that stands for them;
/// then, per exception-domain entry, the keys whose removal changes no covered host's outcome,
/// read off the same probes (each configuration was probed), and the corrected dictionary.
public enum AppAudit {
    /// One host as probed: the `ats` matrix of handshakes, or why there was none.
    public struct ProbedHost: Sendable {
        public var host: String
        public var port: Int
        public var address: String?
        public var probes: ATSProbes?
        public var failure: ProbeFailure?
        /// The app loads this host over plain `http://`: no TLS is probed; `plainHTTPAnswer` is what
        /// `GET /` got (nil: not asked, because ATS blocks the load).
        public var plainHTTP = false
        public var plainHTTPAnswer: PlainHTTPAnswer?
        /// Given by the caller (`--host`); false for a plist domain probed only because the plist
        /// names it, which never changes the exit status.
        public var requested = true

        public init(host: String, port: Int, address: String?, probes: ATSProbes?, failure: ProbeFailure?) {
            self.host = host
            self.port = port
            self.address = address
            self.probes = probes
            self.failure = failure
        }
    }

    /// A plain `http://` load under `effective`: ATS blocks it (-1022) unless the host's rules allow
    /// insecure loads (NSAllowsArbitraryLoads, NSAllowsLocalNetworking or the entry's
    /// NSExceptionAllowsInsecureHTTPLoads); allowed, it connects when an HTTP server answered.
    static func plainHTTPOutcome(_ effective: EffectiveHostPolicy, answer: PlainHTTPAnswer?) -> Outcome {
        guard effective.allowsInsecureHTTPLoads else {
            return Outcome(connects: false, reasons: [FindingID.atsInsecureHTTPLoad.rawValue],
                           detail: "ATS blocks plain http:// loads from this host: no NSAllowsArbitraryLoads or NSExceptionAllowsInsecureHTTPLoads applies to it (the load never leaves the device)",
                           probe: "plain-http", pin: nil, afnetworking: nil)
        }
        let (reason, detail): (String?, String) = switch answer ?? .closed {
        case .status:
            (nil, "plain HTTP allowed by \(effective.entry.map { "NSExceptionDomains entry '\($0)'" } ?? "the global rules"): the app loads it without TLS, so anyone on the network path can read and change the traffic")
        case .noConnection(let category, let message):
            ("failure.\(category.rawValue)", "plain HTTP is allowed for this host, but no HTTP server answered: \(message)")
        case .closed:
            (Self.noHTTPAnswer, "plain HTTP is allowed for this host, but the server closed the connection without an HTTP answer (a TLS server given an HTTP request does that: is the URL meant to be https://?)")
        case .timedOut:
            (Self.httpTimeout, "plain HTTP is allowed for this host, but the server accepted the connection and sent nothing before the timeout")
        case .notHTTP(let quoted):
            (Self.notHTTP, "plain HTTP is allowed for this host, but the server answered with something that is not HTTP: \(quoted)")
        }
        return Outcome(connects: reason == nil, reasons: reason.map { [$0] } ?? [], detail: detail, probe: "plain-http", pin: nil, afnetworking: nil)
    }

    /// The reasons of a plain-HTTP load that reached a server but got no HTTP answer (docs/findings.md,
    /// `app audit`); `AppleLoadErrors` maps them to the NSURLError the load logs.
    static let noHTTPAnswer = "http.no-answer"
    static let notHTTP = "http.not-http"
    static let httpTimeout = "http.timeout"

    /// A TCP connection was made (an answer came, or the server closed or stayed silent on it).
    static func connected(_ answer: PlainHTTPAnswer?) -> Bool {
        switch answer {
        case .none, .noConnection: false
        case .status, .closed, .timedOut, .notHTTP: true
        }
    }

    /// Whether a host connects under some rules, and why not: what "the outcome changes" compares.
    public struct Outcome: Equatable, Sendable {
        public var connects: Bool
        /// Finding ids, empty when it connects.
        public var reasons: [String]
        public var detail: String
        /// The configuration judged (`ATSConfigurationName`).
        public var probe: String
        /// NSPinnedDomains' evaluation, when an entry pins the host.
        public var pin: PinEvaluation?
        /// AFSecurityPolicy's evaluation, when the app has one (`--afnetworking`).
        public var afnetworking: PinEvaluation?
        /// ATS applies to the host (it is not off by arbitrary loads or local networking).
        public var atsEnforced = true
        /// AFNetworking's own evaluation refused the server (its pins, or its trust check in mode
        /// none): it cancels the challenge.
        public var refusedByAFNetworking = false
        /// The error the app's load reports when it does not connect.
        public var error: AppleLoadError? {
            if refusedByAFNetworking, !connects { return AppleLoadErrors.cancelled }
            return AppleLoadErrors.error(for: reasons, atsEnforced: atsEnforced, pinnedByAFNetworking: afnetworking?.state == .mismatch)
        }
    }

    /// The audit of `hosts` under `policy`; `afnetworking`, when given, is the AFSecurityPolicy the
    /// app sets for every host (its pinned set the bundle's certificates).
    /// - Parameters:
    ///   - trustEvaluation: how the app answers the server-trust challenge (`afnetworking` when
    ///     `afnetworking` is given); the system's default handling unless the caller says otherwise.
    ///   - findings: what the caller found about the app itself (AFNetworking's policy, its bundle).
    public static func audit(_ hosts: [ProbedHost], policy: AppTransportSecurityPolicy, app: String, bundleIdentifier: String?,
                             trustStore: String, toolVersion: String, afnetworking: PinPolicy? = nil,
                             afnetworkingSettings: AppAuditReport.AFNetworkingSettings? = nil,
                             trustEvaluation: AppTrustEvaluation = .system, findings: [Finding] = [],
                             privateAnchors: Bool = false) -> AppAuditReport {
        let trustEvaluation: AppTrustEvaluation = afnetworking != nil ? .afnetworking : trustEvaluation
        let diagnostics = hosts.map { $0.probes.map(ATSDiagnostics.judge) }
        var judged: [AppAuditReport.Host] = []
        var outcomes: [Outcome?] = []
        for (index, probed) in hosts.enumerated() {
            let effective = policy.effectivePolicy(for: probed.host)
            if probed.plainHTTP {
                let outcome = plainHTTPOutcome(effective, answer: probed.plainHTTPAnswer)
                var host = AppAuditReport.Host(
                    host: probed.host, port: probed.port, address: probed.address, connects: outcome.connects,
                    reachable: outcome.connects || !effective.allowsInsecureHTTPLoads || Self.connected(probed.plainHTTPAnswer),
                    entry: effective.entry, rule: effective.reason,
                    probe: outcome.probe, reasons: outcome.reasons, detail: outcome.detail, pin: nil, pinMessage: nil, serverFixes: [],
                    exceptionNeeded: effective.allowsInsecureHTTPLoads ? [:] : ["NSExceptionAllowsInsecureHTTPLoads": "YES"])
                host.scheme = "http"
                host.requested = probed.requested
                host.error = outcome.error
                judged.append(host)
                // A server that gave no HTTP answer proves nothing about the exception keys.
                outcomes.append(outcome.connects || !effective.allowsInsecureHTTPLoads ? outcome : nil)
                continue
            }
            guard let probes = probed.probes, let diagnostic = diagnostics[index], probes.noTLSServer == nil else {
                let failure = probed.failure ?? probed.probes?.noTLSServer
                judged.append(AppAuditReport.Host(
                    host: probed.host, port: probed.port, address: probed.address, connects: false, reachable: false,
                    entry: effective.entry, rule: effective.reason, probe: effective.atsProbe(appEvaluatesTrust: afnetworking != nil).configuration,
                    reasons: [failure.map { "failure.\($0.category.rawValue)" } ?? "failure.internal-error"],
                    detail: failure?.description ?? "not reached", pin: nil, pinMessage: nil, serverFixes: [], exceptionNeeded: [:]))
                judged[judged.count - 1].requested = probed.requested
                judged[judged.count - 1].error = failure.map { AppleLoadErrors.error(for: $0.category) } ?? AppleLoadErrors.cannotConnect
                outcomes.append(nil)
                continue
            }
            let outcome = Self.outcome(effective, probes: probes, diagnostics: diagnostic, host: probed.host, afnetworking: afnetworking,
                                       trustEvaluation: trustEvaluation)
            outcomes.append(outcome)
            let needed = outcome.connects || effective.arbitraryLoads ? nil
                : smallestException(effective, probes: probes, diagnostics: diagnostic, host: probed.host, afnetworking: afnetworking,
                                    trustEvaluation: trustEvaluation)
            var host = AppAuditReport.Host(
                host: probed.host, port: probed.port, address: probed.address, connects: outcome.connects, reachable: true,
                entry: effective.entry, rule: effective.reason, probe: outcome.probe, reasons: outcome.reasons, detail: outcome.detail,
                pin: outcome.pin.map { $0.state == .mismatch ? "mismatch" : "match" }, pinMessage: outcome.pin?.message,
                // A host that connects keeps only the advice to send an intermediate the device fetched.
                serverFixes: outcome.connects ? diagnostic.serverFixes.filter { $0.hasPrefix(ATSDiagnostics.sendIntermediateFix) }
                    : outcome.reasons.contains(where: { $0.hasPrefix("tls.client-certificate-") }) ? [] : diagnostic.serverFixes,
                exceptionNeeded: needed ?? [:])
            host.error = outcome.error
            host.requested = probed.requested
            host.afnetworking = outcome.afnetworking
            // The oldest iOS with ATS whose client connects under the app's own rules for the host.
            if outcome.connects, let clients = diagnostic.iosClients {
                host.oldestConnectingIos = IOSVersionRules.oldest(clients, chainFailures: [], minimumTLSVersion: effective.minimumTLSVersion,
                                                                  forwardSecrecy: effective.requiresForwardSecrecy).client
                    .map { "\($0.client): \($0.summary)" }
            }
            judged.append(host)
        }

        /// Whether every host of `indices` keeps its outcome (connects the same, for the same
        /// reasons) under `altered`, judged on the probes already taken. An unreachable host proves
        /// nothing either way: false, and the key stays.
        func unchanged(under altered: AppTransportSecurityPolicy, _ indices: [Int]) -> Bool {
            changed(under: altered, indices) == [] && indices.allSatisfy { outcomes[$0] != nil }
        }
        /// The outcome of host `index` under `altered`, judged on the probes already taken (nil when it was not reached).
        func outcome(under altered: AppTransportSecurityPolicy, _ index: Int) -> Outcome? {
            guard outcomes[index] != nil else { return nil }
            if hosts[index].plainHTTP {
                return plainHTTPOutcome(altered.effectivePolicy(for: hosts[index].host), answer: hosts[index].plainHTTPAnswer)
            }
            guard let probes = hosts[index].probes, let diagnostic = diagnostics[index] else { return nil }
            return Self.outcome(altered.effectivePolicy(for: hosts[index].host), probes: probes, diagnostics: diagnostic,
                                host: hosts[index].host, afnetworking: afnetworking, trustEvaluation: trustEvaluation)
        }
        /// The hosts of `indices` whose outcome `altered` changes.
        func changedIndices(under altered: AppTransportSecurityPolicy, _ indices: [Int]) -> [Int] {
            indices.filter { index in
                guard let before = outcomes[index], let after = outcome(under: altered, index) else { return false }
                return after.connects != before.connects || after.reasons != before.reasons
            }
        }
        func changed(under altered: AppTransportSecurityPolicy, _ indices: [Int]) -> [String] {
            changedIndices(under: altered, indices).map { hosts[$0].host }
        }

        var entries: [AppAuditReport.Entry] = []
        for (position, entry) in policy.exceptionDomains.enumerated() {
            let covered = judged.indices.filter { judged[$0].entry == entry.domain }
            guard !covered.isEmpty else {
                entries.append(AppAuditReport.Entry(domain: entry.domain, declared: entry.declaredKeys, unneeded: [], hosts: [],
                    note: "no audited host uses this entry: give the hosts it covers with --host to judge its keys"))
                continue
            }
            var unneeded: [String] = [], harmful: [String] = [], fixedByRemoval: Set<String> = []
            for key in entry.declaredKeys {
                guard var without = Self.removing(key, from: entry) else { continue }
                without.declaredKeys.removeAll { $0 == key }
                var altered = policy
                altered.exceptionDomains[position] = without
                if unchanged(under: altered, covered) {
                    unneeded.append(key)
                    continue
                }
                // Harmful: without it, hosts that fail connect, and none that connects fails.
                let differing = changedIndices(under: altered, covered)
                if !differing.isEmpty, differing.allSatisfy({ outcomes[$0]?.connects == false && outcome(under: altered, $0)?.connects == true }) {
                    harmful.append(key)
                    fixedByRemoval.formUnion(differing.map { judged[$0].host })
                }
            }
            let names = covered.map { judged[$0].host }
            let exceptionKeys = entry.declaredKeys.filter { Self.removing($0, from: entry) != nil }
            var note: String
            if !harmful.isEmpty {
                note = "\(harmful.joined(separator: ", ")) makes \(fixedByRemoval.sorted().joined(separator: ", ")) fail: without it they connect (probed without it)"
                if !unneeded.isEmpty { note += "; removing \(unneeded.joined(separator: ", ")) changes no covered host's outcome" }
            } else if !unneeded.isEmpty, unneeded.count == exceptionKeys.count, covered.allSatisfy({ !judged[$0].connects }) {
                let liftable = covered.filter { !judged[$0].exceptionNeeded.isEmpty }
                note = liftable.isEmpty
                    ? "none of its keys helps: the hosts fail for a reason no ATS key lifts (\(Set(covered.flatMap { judged[$0].reasons }).sorted().joined(separator: ", ")))"
                    : "none of its keys helps: " + liftable.map { index in
                        "\(judged[index].host) needs \(judged[index].exceptionNeeded.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: ", "))"
                    }.joined(separator: "; ")
                    + (unneeded.contains(where: { $0.hasSuffix("AllowsInsecureHTTPLoads") })
                       ? "; the app still needs NSExceptionAllowsInsecureHTTPLoads if it loads http:// URLs from these hosts" : "")
            } else if unneeded.isEmpty {
                note = "removing any declared key changes some covered host's outcome"
            } else {
                note = "removing \(unneeded.joined(separator: ", ")) changes no covered host's outcome (probed without it)"
                    + (unneeded.contains(where: { $0.hasSuffix("AllowsInsecureHTTPLoads") })
                       ? "; the app still needs NSExceptionAllowsInsecureHTTPLoads if it loads http:// URLs from these hosts" : "")
            }
            let transparencyFailures = covered.filter { judged[$0].reasons.contains(FindingID.trustCertificateTransparency.rawValue) }
            if entry.requiresCertificateTransparency == true, !unneeded.contains("NSRequiresCertificateTransparency"), !transparencyFailures.isEmpty {
                note += "; NSRequiresCertificateTransparency makes \(transparencyFailures.map { judged[$0].host }.joined(separator: ", ")) fail"
                    + " (Apple calls the key obsolete: current systems require CT for publicly trusted certificates anyway)"
            }
            var judgedEntry = AppAuditReport.Entry(domain: entry.domain, declared: entry.declaredKeys, unneeded: unneeded, hosts: names, note: note)
            judgedEntry.harmful = harmful.isEmpty ? nil : harmful
            entries.append(judgedEntry)
        }
        /// The per-domain entries under which the hosts of `indices` that `altered` breaks connect
        /// again (nil when one of them has none): what replaces a global key needed only for them.
        func perDomain(under altered: AppTransportSecurityPolicy, _ indices: [Int]) -> [String: [String: String]]? {
            var entries: [String: [String: String]] = [:]
            for index in indices where outcomes[index]?.connects == true {
                let effective = altered.effectivePolicy(for: hosts[index].host)
                if hosts[index].plainHTTP {
                    if !plainHTTPOutcome(effective, answer: .status(200)).connects { entries[hosts[index].host] = ["NSExceptionAllowsInsecureHTTPLoads": "YES"] }
                    continue
                }
                guard let probes = hosts[index].probes, let diagnostic = diagnostics[index] else { return nil }
                if Self.outcome(effective, probes: probes, diagnostics: diagnostic, host: hosts[index].host, afnetworking: afnetworking,
                                trustEvaluation: trustEvaluation).connects { continue }
                guard let keys = smallestException(effective, probes: probes, diagnostics: diagnostic, host: hosts[index].host,
                                                   afnetworking: afnetworking, trustEvaluation: trustEvaluation) else { return nil }
                entries[hosts[index].host] = keys
            }
            return entries.isEmpty ? nil : entries
        }
        let global = globalKeys(policy, hosts: Array(judged.indices), changed: changed, unchanged: unchanged, perDomain: perDomain)
        var report = AppAuditReport(toolVersion: toolVersion, app: app, bundleIdentifier: bundleIdentifier, trustStore: trustStore,
                                    problems: policy.diagnostics.map(\.description), hosts: judged, entries: entries, global: global,
                                    afnetworking: afnetworkingSettings, trustEvaluation: trustEvaluation,
                                    findings: findings + evaluationFindings(trustEvaluation, hosts: judged),
                                    correctedDictionary: correctedDictionary(policy, entries: entries, global: global, hosts: judged))
        if privateAnchors { report.anchors = AppAudit.privateAnchorsNote }
        return report
    }

    /// What `anchors` says when the operator's own roots judged the chains.
    public static let privateAnchorsNote = "chains were judged against the anchors of --ca-file as an app's own anchors (SecTrustSetAnchorCertificates): these verdicts hold for such an app, and on devices that trust that root through a configuration profile (MDM), which also accept a leaf without serverAuth (trust.eku says when); elsewhere the chain is untrusted (-1202)"

    /// A delegate that accepts everything is a hazard wherever ATS leaves trust to it.
    static func evaluationFindings(_ evaluation: AppTrustEvaluation, hosts: [AppAuditReport.Host]) -> [Finding] {
        guard evaluation == .acceptAll else { return [] }
        let exposed = hosts.filter { $0.probe.hasPrefix(ATSConfigurationName.insecureHTTPLoads) || $0.probe == ATSConfigurationName.arbitraryLoadsOwnTrustEvaluation }
        let scope = exposed.isEmpty ? "no audited host lets it decide today (ATS evaluates their trust), but any exception that allows insecure loads would"
            : "it decides for \(exposed.map(\.host).joined(separator: ", ")): anyone on the network path can impersonate those servers"
        return [Finding(.pinAcceptsAnyCertificate, .warning,
                        "The app's URLSession delegate accepts every server certificate (--trust-evaluation accept-all): \(scope). Evaluate trust (performDefaultHandling) or pin the server's key.")]
    }

    /// The global keys the app declares, each judged over every audited host the way an entry's keys
    /// are: removed from the policy, every host judged again on the probes already taken.
    /// NSAllowsArbitraryLoadsForMedia and ...InWebContent concern AV Foundation and web views, which
    /// a TLS probe of URLSession loads cannot stand for: not judged (their presence still makes iOS
    /// ignore NSAllowsArbitraryLoads, which is said when it changes some host).
    static func globalKeys(_ policy: AppTransportSecurityPolicy, hosts: [Int], changed: (AppTransportSecurityPolicy, [Int]) -> [String],
                           unchanged: (AppTransportSecurityPolicy, [Int]) -> Bool,
                           perDomain: (AppTransportSecurityPolicy, [Int]) -> [String: [String: String]]?) -> [AppAuditReport.GlobalKey] {
        var keys: [AppAuditReport.GlobalKey] = []
        for (key, value) in globalValues(policy) {
            guard let value else { continue }
            var altered = policy
            altered.arbitraryLoadsOverriddenBy.removeAll { $0 == key }
            switch key {
            case "NSAllowsArbitraryLoads": altered.allowsArbitraryLoads = nil
            case "NSAllowsArbitraryLoadsForMedia": altered.allowsArbitraryLoadsForMedia = nil
            case "NSAllowsArbitraryLoadsInWebContent": altered.allowsArbitraryLoadsInWebContent = nil
            default: altered.allowsLocalNetworking = nil
            }
            let moved = changed(altered, hosts)
            if key == "NSAllowsArbitraryLoadsForMedia" || key == "NSAllowsArbitraryLoadsInWebContent" {
                let loads = key.hasSuffix("ForMedia") ? "AV Foundation" : "WKWebView"
                keys.append(.init(key: key, value: value, status: .notJudged, hosts: moved,
                    note: "not judged: affects \(loads) loads only, which a TLS probe of URLSession loads cannot stand for"
                        + (moved.isEmpty ? "" : "; its presence makes iOS ignore NSAllowsArbitraryLoads, and without it \(moved.joined(separator: ", ")) would change outcome")))
                continue
            }
            let unneeded = unchanged(altered, hosts)
            var note: String
            if unneeded {
                note = key == "NSAllowsArbitraryLoads" && !policy.arbitraryLoadsInEffect && policy.allowsArbitraryLoads == true
                    ? "ignored on iOS 10 and later because \(policy.arbitraryLoadsOverriddenBy.joined(separator: " and ")) is present: removing it changes no audited host's outcome"
                    : "removing it changes no audited host's outcome (probed without it)"
                if key == "NSAllowsArbitraryLoads", policy.allowsArbitraryLoads == true {
                    note += "; it also permits plain http:// loads: the app still needs it (or NSExceptionAllowsInsecureHTTPLoads per domain) if it loads http:// URLs"
                }
            } else if moved.isEmpty {
                note = "kept: a host it may affect could not be reached, so removing it was not judged"
            } else {
                note = "needed: without it \(moved.joined(separator: ", ")) \(moved.count == 1 ? "changes" : "change") outcome"
            }
            var judged = AppAuditReport.GlobalKey(key: key, value: value, status: unneeded ? .unneeded : .needed, hosts: moved, note: note)
            if key == "NSAllowsArbitraryLoads", !unneeded, !moved.isEmpty, let entries = perDomain(altered, hosts) {
                // ATS off for every host where a few need less: per-domain entries instead (the corrected dictionary uses them).
                judged.replacement = entries
                judged.note += "; per-domain entries do the same with ATS kept for every other host: "
                    + entries.keys.sorted().map { "\($0) (\(ATSDiagnostics.keys(entries[$0]!)))" }.joined(separator: ", ")
                    + " (the corrected dictionary uses them; add NSExceptionAllowsInsecureHTTPLoads for any other host the app loads over http://)"
            }
            keys.append(judged)
        }
        return keys
    }

    /// The four global booleans as written (`YES`/`NO`), `present` for a key that is there with a
    /// value of another type (it still counts for the iOS 10 override), nil when absent.
    static func globalValues(_ policy: AppTransportSecurityPolicy) -> [(String, String?)] {
        func written(_ key: String, _ value: Bool?) -> (String, String?) {
            (key, value.map { $0 ? "YES" : "NO" } ?? (policy.arbitraryLoadsOverriddenBy.contains(key) ? "present" : nil))
        }
        return [written("NSAllowsArbitraryLoads", policy.allowsArbitraryLoads),
                written("NSAllowsArbitraryLoadsForMedia", policy.allowsArbitraryLoadsForMedia),
                written("NSAllowsArbitraryLoadsInWebContent", policy.allowsArbitraryLoadsInWebContent),
                written("NSAllowsLocalNetworking", policy.allowsLocalNetworking)]
    }

    /// The outcome on the probe that stands for `effective` (the single per-host judgement of
    /// `app audit` and of the service's app targets, which may pass only that configuration):
    /// the configuration's verdict; the TLS version the selection still requires of the handshake;
    /// Certificate Transparency (Apple's policy for publicly trusted chains, or for any trusted chain
    /// of an entry with NSRequiresCertificateTransparency = YES); then the NSPinnedDomains pins and
    /// AFNetworking's AFSecurityPolicy on that probe's chain (pinning adds to normal trust).
    /// - Parameter afnetworking: the app's AFSecurityPolicy for every host (`--afnetworking`); the
    ///   app then evaluates server trust itself where ATS lets it (`atsProbe(appEvaluatesTrust:)`).
    public static func outcome(_ effective: EffectiveHostPolicy, probes: ATSProbes, diagnostics: ATSDiagnostics, host: String,
                               afnetworking: PinPolicy? = nil, trustEvaluation: AppTrustEvaluation = .system) -> Outcome {
        let evaluation: AppTrustEvaluation = afnetworking != nil ? .afnetworking : trustEvaluation
        let selection = effective.atsProbe(appEvaluatesTrust: evaluation.replacesSystemEvaluation)
        var row = diagnostics.configurations.first { $0.name == selection.configuration }
        let chosen = probes.configurations.first { $0.name == selection.configuration }
        if !evaluation.replacesSystemEvaluation, row?.ownTrustEvaluation == true, let chosen {
            // No delegate of its own: the system's default trust evaluation stands whatever the plist declares.
            row = ATSDiagnostics.judgedWithSystemTrust(chosen, probes: probes)
        }
        // The chain: the chosen probe's, else the first any probe got (pins and CT still have a chain to speak of).
        let source = chosen?.chain != nil ? chosen : probes.configurations.first { $0.chain != nil }
        let chain = source?.chain
        let context = probes.trustContext(hostname: host)
        let trustErrors = chain.map { TrustEvaluator.evaluate(presented: $0.presented, building: $0.building, context: context) }?
            .filter(\.isTrustError) ?? []
        var reasons: [String] = []
        var detail = row?.detail ?? "not probed"
        if let row, !row.pass {
            switch row.failure {
            case .forwardSecrecy?: reasons = [FindingID.atsForwardSecrecy.rawValue]
            case .trust?: reasons = Set(trustErrors.map(\.id.rawValue)).sorted()
            case .handshake?, nil:
                reasons = switch chosen?.failure?.category {
                case .clientCertificateRequired?: [FindingID.tlsClientCertificateRequired.rawValue]
                case .clientCertificateRejected?: [FindingID.tlsClientCertificateRejected.rawValue]
                default: [FindingID.atsHandshake.rawValue]
                }
            }
            if reasons.isEmpty { reasons = [FindingID.atsTrust.rawValue] }
        } else if row == nil {
            reasons = ["ats.handshake"]
        } else if let minimum = selection.minimumNegotiatedVersion, let negotiated = chosen?.handshake?.protocolVersion, negotiated < minimum {
            reasons = [FindingID.atsTLSVersion.rawValue]
            detail = "negotiated \(negotiated.displayName), but the app accepts \(minimum.displayName) or newer for this host (\(selection.note))"
        }
        var transparencyErrors: [Finding] = []
        if reasons.isEmpty, let source, let chain, let transparency = Self.certificateTransparency(
            effective, chain: chain, scts: source.scts, judgesTrust: source.judgesTrust || !evaluation.replacesSystemEvaluation, probes: probes),
           let finding = AddressAssessment.transparencyFinding(transparency.policy) {
            if finding.severity == .error {
                transparencyErrors = [finding]
                reasons.append(FindingID.trustCertificateTransparency.rawValue)
            }
            detail += "; Certificate Transparency: \(transparency.policy.reason)"
        }
        func evaluate(_ policy: PinPolicy) -> PinEvaluation? {
            guard let chain else { return nil }
            return AddressAssessment.pinEvaluation(policy, presented: chain.presented, path: chain.building.path,
                                                   trustErrors: trustErrors + transparencyErrors, context: context,
                                                   buildWithPinnedAnchors: source?.buildWithPinnedAnchors)
        }
        let pin = effective.pins.flatMap { evaluate($0.pinPolicy) }
        if let afnetworking, let refusal = AFNetworkingPolicy.refusal(afnetworking), row?.failure == nil || row?.failure == .trust {
            // AFNetworking cancels every challenge (a handshake that fails never raises one) before it looks at the server.
            return Outcome(connects: false, reasons: [refusal.rawValue], detail: detail, probe: selection.configuration, pin: pin,
                           afnetworking: nil, atsEnforced: !effective.arbitraryLoads, refusedByAFNetworking: true)
        }
        let afnetworkingPin = afnetworking.flatMap(evaluate)
        // Only what the system let through reaches AFNetworking's evaluation.
        var refusedByAFNetworking = afnetworkingPin?.state == .mismatch && reasons.isEmpty && pin?.state != .mismatch
        if [pin, afnetworkingPin].contains(where: { $0?.state == .mismatch }) { reasons.append(FindingID.pinMismatch.rawValue) }
        if let afnetworking, afnetworkingPin?.state == PinEvaluation.State.none, !afnetworking.allowInvalidCertificates, reasons.isEmpty {
            // Mode none: AFNetworking's own trust evaluation must pass (step 3), where ATS left trust to the app.
            reasons = Set(trustErrors.filter(afnetworking.appliesUnderTrustPolicy).map(\.id.rawValue)).sorted()
            refusedByAFNetworking = !reasons.isEmpty
        }
        return Outcome(connects: reasons.isEmpty, reasons: reasons, detail: detail, probe: selection.configuration, pin: pin,
                       afnetworking: afnetworkingPin, atsEnforced: !effective.arbitraryLoads, refusedByAFNetworking: refusedByAFNetworking)
    }

    /// The smallest per-domain exception under which `host` connects, judged by `outcome` with the
    /// app's own trust evaluation on the probes already taken (one judge for `app audit`'s corrected
    /// dictionary and `ats`'s advice): the TLS-version and forward-secrecy exceptions, smallest
    /// first, then, only where the app evaluates trust itself, NSExceptionAllowsInsecureHTTPLoads
    /// with them. Nil when none works (a pin, the chain under the system's evaluation, a client
    /// certificate or the handshake itself stands in the way).
    public static func smallestException(_ effective: EffectiveHostPolicy, probes: ATSProbes, diagnostics: ATSDiagnostics, host: String,
                                         afnetworking: PinPolicy? = nil, trustEvaluation: AppTrustEvaluation = .system) -> [String: String]? {
        let evaluation: AppTrustEvaluation = afnetworking != nil ? .afnetworking : trustEvaluation
        // Default ATS first: a host that fails only because of its entry's own keys (a TLS 1.3
        // minimum on a TLS 1.2 server) needs no exception ([:]); its harmful key is said on the entry.
        let candidates = [ATSConfigurationName.defaultATS] + ATSDiagnostics.exceptionOrder.filter { $0 != ATSConfigurationName.arbitraryLoads }
            + (evaluation.replacesSystemEvaluation ? ATSDiagnostics.ownTrustOrder : [])
        for name in candidates {
            guard let probe = probes.configurations.first(where: { $0.name == name }) else { continue }
            var candidate = effective
            candidate.source = .exceptionDomain(host)
            candidate.arbitraryLoads = false
            candidate.minimumTLSVersion = probe.exception["NSExceptionMinimumTLSVersion"]
                .flatMap { AppTransportSecurityPolicy.tlsVersionValues[$0] } ?? .tls1_2
            candidate.requiresForwardSecrecy = probe.exception["NSExceptionRequiresForwardSecrecy"] != "NO"
            candidate.allowsInsecureHTTPLoads = probe.exception["NSExceptionAllowsInsecureHTTPLoads"] == "YES"
            let judged = outcome(candidate, probes: probes, diagnostics: diagnostics, host: host, afnetworking: afnetworking,
                                 trustEvaluation: evaluation)
            if judged.connects, judged.probe == name { return probe.exception }
        }
        return nil
    }

    /// Apple's CT policy on `chain` with the SCTs its handshake showed: required for a publicly
    /// trusted chain whose trust the system evaluates (iOS 12.1.1 and later, whatever the app
    /// declares), and for any trusted chain of a host whose entry says NSRequiresCertificateTransparency
    /// = YES (docs/apple-rules.md section 6). Nil without a leaf.
    static func certificateTransparency(_ effective: EffectiveHostPolicy, chain: ProbedChainPath, scts: [SignedCertificateTimestamp],
                                        judgesTrust: Bool, probes: ATSProbes) -> CertificateTransparencyReport? {
        guard let leaf = chain.presented.first else { return nil }
        let applicability: AppleCTPolicy.Applicability
        if effective.requiresCertificateTransparency {
            applicability = chain.building.anchored ? .required
                : .notRequired("the chain is not trusted (its trust finding says why), so CT is not evaluated for it")
        } else if judgesTrust {
            applicability = AddressAssessment.ctApplicability(leaf: leaf, building: chain.building, publicTrust: !probes.privateAnchors)
        } else {
            applicability = .notRequired("the app evaluates server trust itself on this host")
        }
        return AppleCTPolicy.evaluate(scts, leaf: leaf, logs: probes.ctLogs, at: probes.time, applicability: applicability)
    }

    /// `entry` without the exception `key` (its legacy spelling too); nil for a key that is not an
    /// exception. NSRequiresCertificateTransparency is judged like one: it can only make a host fail,
    /// so it is unneeded whenever it changes nothing.
    static func removing(_ key: String, from entry: AppTransportSecurityPolicy.ExceptionDomain) -> AppTransportSecurityPolicy.ExceptionDomain? {
        var copy = entry
        switch key {
        case "NSExceptionAllowsInsecureHTTPLoads", "NSThirdPartyExceptionAllowsInsecureHTTPLoads": copy.allowsInsecureHTTPLoads = nil
        case "NSExceptionMinimumTLSVersion", "NSThirdPartyExceptionMinimumTLSVersion": copy.minimumTLSVersion = nil
        case "NSExceptionRequiresForwardSecrecy", "NSThirdPartyExceptionRequiresForwardSecrecy": copy.requiresForwardSecrecy = nil
        case "NSIncludesSubdomains": copy.includesSubdomains = false
        case "NSRequiresCertificateTransparency": copy.requiresCertificateTransparency = nil
        default: return nil
        }
        return copy
    }

    /// NSAppTransportSecurity as it should read: the global keys without the unneeded ones, each
    /// exception entry without its unneeded keys (an entry left empty goes), an entry for each failing
    /// host that an exception would make connect. NSPinnedDomains is not repeated (unchanged).
    static func correctedDictionary(_ policy: AppTransportSecurityPolicy, entries: [AppAuditReport.Entry],
                                    global: [AppAuditReport.GlobalKey], hosts: [AppAuditReport.Host]) -> String {
        var out = "<key>NSAppTransportSecurity</key>\n<dict>\n"
        let unneededGlobal = Set(global.filter { $0.status == .unneeded || $0.replacement != nil }.map(\.key))
        for (key, value) in globalValues(policy) where !unneededGlobal.contains(key) {
            if let value, value != "present" { out += ATSDiagnostics.plistEntry(key, value, indent: "  ") }
        }
        var domains: [(String, [(String, String)])] = []
        for (entry, var judged) in zip(policy.exceptionDomains, entries) {
            judged.unneeded += judged.harmful ?? [] // A harmful key goes as an unneeded one does.
            var keys: [(String, String)] = []
            if entry.includesSubdomains, !judged.unneeded.contains("NSIncludesSubdomains") { keys.append(("NSIncludesSubdomains", "YES")) }
            if let value = entry.allowsInsecureHTTPLoads, !judged.unneeded.contains(where: { $0.hasSuffix("AllowsInsecureHTTPLoads") }) {
                keys.append(("NSExceptionAllowsInsecureHTTPLoads", value ? "YES" : "NO"))
            }
            if let value = entry.minimumTLSVersion, !judged.unneeded.contains(where: { $0.hasSuffix("MinimumTLSVersion") }) {
                keys.append(("NSExceptionMinimumTLSVersion", "TLSv" + value.displayName.dropFirst(4))) // TLS 1.0 -> TLSv1.0
            }
            if let value = entry.requiresForwardSecrecy, !judged.unneeded.contains(where: { $0.hasSuffix("RequiresForwardSecrecy") }) {
                keys.append(("NSExceptionRequiresForwardSecrecy", value ? "YES" : "NO"))
            }
            if let value = entry.requiresCertificateTransparency, !judged.unneeded.contains("NSRequiresCertificateTransparency") {
                keys.append(("NSRequiresCertificateTransparency", value ? "YES" : "NO"))
            }
            if !keys.isEmpty { domains.append((entry.domain, keys)) }
        }
        for host in hosts where !host.connects && host.reachable && !host.exceptionNeeded.isEmpty {
            let needed = host.exceptionNeeded.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            // A host under an entry gets the keys it lacks in that entry; one without, an entry of its own.
            let domain = host.entry ?? host.host
            if let index = domains.firstIndex(where: { $0.0 == domain }) {
                domains[index].1 = domains[index].1.filter { key in !needed.contains { $0.0 == key.0 } } + needed
            } else {
                domains.append((domain, needed))
            }
        }
        for key in global {
            for (domain, keys) in (key.replacement ?? [:]).sorted(by: { $0.key < $1.key }) where !domains.contains(where: { $0.0 == domain }) {
                domains.append((domain, keys.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
            }
        }
        if !domains.isEmpty {
            out += "  <key>NSExceptionDomains</key>\n  <dict>\n"
            for (domain, keys) in domains {
                out += ATSDiagnostics.legacyTLSComment(keys.first { $0.0 == "NSExceptionMinimumTLSVersion" }?.1)
                out += "    <key>\(domain)</key>\n    <dict>\n"
                for (key, value) in keys { out += ATSDiagnostics.plistEntry(key, value, indent: "      ") }
                out += "    </dict>\n"
            }
            out += "  </dict>\n"
        }
        return out + "</dict>\n"
    }
}
