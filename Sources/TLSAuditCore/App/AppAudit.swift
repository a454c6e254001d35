public import Foundation

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

        public init(host: String, port: Int, address: String?, probes: ATSProbes?, failure: ProbeFailure?) {
            self.host = host
            self.port = port
            self.address = address
            self.probes = probes
            self.failure = failure
        }
    }

    /// Whether a host connects under some rules, and why not: what "the outcome changes" compares.
    struct Outcome: Equatable {
        var connects: Bool
        var reasons: [String]
        var detail: String
        var probe: String
        var pin: PinEvaluation?
    }

    /// The audit of `hosts` under `policy`.
    public static func audit(_ hosts: [ProbedHost], policy: AppTransportSecurityPolicy, app: String, bundleIdentifier: String?,
                             trustStore: String, toolVersion: String) -> AppAuditReport {
        let diagnostics = hosts.map { $0.probes.map(ATSDiagnostics.judge) }
        var judged: [AppAuditReport.Host] = []
        var outcomes: [Outcome?] = []
        for (index, probed) in hosts.enumerated() {
            let effective = policy.effectivePolicy(for: probed.host)
            guard let probes = probed.probes, let diagnostic = diagnostics[index], probes.noTLSServer == nil else {
                let failure = probed.failure ?? probed.probes?.noTLSServer
                judged.append(AppAuditReport.Host(
                    host: probed.host, port: probed.port, address: probed.address, connects: false, reachable: false,
                    entry: effective.entry, rule: effective.reason, probe: effective.atsProbe.configuration,
                    reasons: [failure.map { "failure.\($0.category.rawValue)" } ?? "failure.unreachable"],
                    detail: failure?.description ?? "not reached", pin: nil, pinMessage: nil, serverFixes: [], exceptionNeeded: [:]))
                outcomes.append(nil)
                continue
            }
            let outcome = Self.outcome(effective, probes: probes, diagnostics: diagnostic, host: probed.host)
            outcomes.append(outcome)
            judged.append(AppAuditReport.Host(
                host: probed.host, port: probed.port, address: probed.address, connects: outcome.connects, reachable: true,
                entry: effective.entry, rule: effective.reason, probe: outcome.probe, reasons: outcome.reasons, detail: outcome.detail,
                pin: outcome.pin.map { $0.state == .mismatch ? "mismatch" : "match" }, pinMessage: outcome.pin?.message,
                serverFixes: outcome.connects ? [] : diagnostic.serverFixes,
                exceptionNeeded: outcome.connects || effective.arbitraryLoads ? [:] : diagnostic.exception))
        }

        var entries: [AppAuditReport.Entry] = []
        for (position, entry) in policy.exceptionDomains.enumerated() {
            let covered = judged.indices.filter { judged[$0].entry == entry.domain }
            guard !covered.isEmpty else {
                entries.append(AppAuditReport.Entry(domain: entry.domain, declared: entry.declaredKeys, unneeded: [], hosts: [],
                    note: "no audited host uses this entry: give the hosts it covers with --host to judge its keys"))
                continue
            }
            var unneeded: [String] = []
            for key in entry.declaredKeys {
                guard var without = Self.removing(key, from: entry) else { continue }
                without.declaredKeys.removeAll { $0 == key }
                var altered = policy
                altered.exceptionDomains[position] = without
                let same = covered.allSatisfy { index in
                    guard let before = outcomes[index], let probes = hosts[index].probes, let diagnostic = diagnostics[index] else {
                        return false // An unreachable host proves nothing either way: the key stays.
                    }
                    let after = Self.outcome(altered.effectivePolicy(for: hosts[index].host), probes: probes, diagnostics: diagnostic,
                                             host: hosts[index].host)
                    return after.connects == before.connects && after.reasons == before.reasons
                }
                if same { unneeded.append(key) }
            }
            let names = covered.map { judged[$0].host }
            let exceptionKeys = entry.declaredKeys.filter { Self.removing($0, from: entry) != nil }
            let note: String
            if !unneeded.isEmpty, unneeded.count == exceptionKeys.count, covered.allSatisfy({ !judged[$0].connects }) {
                note = "none of its keys helps: the hosts fail for a reason no ATS key lifts (\(Set(covered.flatMap { judged[$0].reasons }).sorted().joined(separator: ", ")))"
            } else if unneeded.isEmpty {
                note = "every declared exception is needed by some host it covers"
            } else {
                note = "removing \(unneeded.joined(separator: ", ")) changes no covered host's outcome (probed without it)"
                    + (unneeded.contains(where: { $0.hasSuffix("AllowsInsecureHTTPLoads") })
                       ? "; the app still needs NSExceptionAllowsInsecureHTTPLoads if it loads http:// URLs from these hosts" : "")
            }
            entries.append(AppAuditReport.Entry(domain: entry.domain, declared: entry.declaredKeys, unneeded: unneeded, hosts: names, note: note))
        }
        return AppAuditReport(toolVersion: toolVersion, app: app, bundleIdentifier: bundleIdentifier, trustStore: trustStore,
                              problems: policy.diagnostics.map(\.description), hosts: judged, entries: entries,
                              correctedDictionary: correctedDictionary(policy, entries: entries, hosts: judged))
    }

    /// The outcome on the probe that stands for `effective`: the configuration's verdict, then the
    /// NSPinnedDomains pins on that probe's chain (pinning adds to normal trust).
    static func outcome(_ effective: EffectiveHostPolicy, probes: ATSProbes, diagnostics: ATSDiagnostics, host: String) -> Outcome {
        let selection = effective.atsProbe
        let row = diagnostics.configurations.first { $0.name == selection.configuration }
        let chain = probes.configurations.first { $0.name == selection.configuration }?.chain
            ?? probes.configurations.lazy.compactMap(\.chain).first
        let context = TrustContext(hostname: host, time: probes.time, publicTrust: !probes.privateAnchors)
        let trustErrors = chain.map { TrustEvaluator.evaluate(presented: $0.presented, building: $0.building, context: context) }?
            .filter { $0.severity == .error } ?? []
        var reasons: [String] = []
        if let row, !row.pass {
            switch row.failure {
            case .forwardSecrecy?: reasons = [FindingID.atsForwardSecrecy.rawValue]
            case .trust?: reasons = Set(trustErrors.map(\.id.rawValue)).sorted()
            case .handshake?, nil: reasons = ["ats.handshake"]
            }
            if reasons.isEmpty { reasons = [FindingID.atsTrust.rawValue] }
        } else if row == nil {
            reasons = ["ats.handshake"]
        }
        var pin: PinEvaluation?
        if let pins = effective.pins, let chain {
            let evaluation = pins.pinPolicy.evaluate(presented: chain.presented, path: chain.building.path, trustErrors: trustErrors) { _ in
                PinnedAnchorEvaluation(path: [], errors: [])
            }
            pin = evaluation
            if evaluation.state == .mismatch { reasons.append(FindingID.pinMismatch.rawValue) }
        }
        return Outcome(connects: reasons.isEmpty, reasons: reasons, detail: row?.detail ?? "not probed", probe: selection.configuration, pin: pin)
    }

    /// `entry` without the exception `key` (its legacy spelling too); nil for a key that is not an
    /// exception (NSRequiresCertificateTransparency asks for more, it lifts nothing).
    static func removing(_ key: String, from entry: AppTransportSecurityPolicy.ExceptionDomain) -> AppTransportSecurityPolicy.ExceptionDomain? {
        var copy = entry
        switch key {
        case "NSExceptionAllowsInsecureHTTPLoads", "NSThirdPartyExceptionAllowsInsecureHTTPLoads": copy.allowsInsecureHTTPLoads = nil
        case "NSExceptionMinimumTLSVersion", "NSThirdPartyExceptionMinimumTLSVersion": copy.minimumTLSVersion = nil
        case "NSExceptionRequiresForwardSecrecy", "NSThirdPartyExceptionRequiresForwardSecrecy": copy.requiresForwardSecrecy = nil
        case "NSIncludesSubdomains": copy.includesSubdomains = false
        default: return nil
        }
        return copy
    }

    /// NSAppTransportSecurity as it should read: the global keys as given, each exception entry
    /// without its unneeded keys (an entry left empty goes), an entry for each failing host that an
    /// exception would make connect. NSPinnedDomains is not repeated (unchanged).
    static func correctedDictionary(_ policy: AppTransportSecurityPolicy, entries: [AppAuditReport.Entry],
                                    hosts: [AppAuditReport.Host]) -> String {
        var out = "<key>NSAppTransportSecurity</key>\n<dict>\n"
        for (key, value) in [("NSAllowsArbitraryLoads", policy.allowsArbitraryLoads),
                             ("NSAllowsArbitraryLoadsForMedia", policy.allowsArbitraryLoadsForMedia),
                             ("NSAllowsArbitraryLoadsInWebContent", policy.allowsArbitraryLoadsInWebContent),
                             ("NSAllowsLocalNetworking", policy.allowsLocalNetworking)] {
            if let value { out += ATSDiagnostics.plistEntry(key, value ? "YES" : "NO", indent: "  ") }
        }
        var domains: [(String, [(String, String)])] = []
        for (entry, judged) in zip(policy.exceptionDomains, entries) {
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
            if let value = entry.requiresCertificateTransparency { keys.append(("NSRequiresCertificateTransparency", value ? "YES" : "NO")) }
            if !keys.isEmpty { domains.append((entry.domain, keys)) }
        }
        for host in hosts where !host.connects && host.reachable && host.entry == nil && !host.exceptionNeeded.isEmpty {
            guard !domains.contains(where: { $0.0 == host.host }) else { continue }
            domains.append((host.host, host.exceptionNeeded.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
        }
        if !domains.isEmpty {
            out += "  <key>NSExceptionDomains</key>\n  <dict>\n"
            for (domain, keys) in domains {
                out += "    <key>\(domain)</key>\n    <dict>\n"
                for (key, value) in keys { out += ATSDiagnostics.plistEntry(key, value, indent: "      ") }
                out += "    </dict>\n"
            }
            out += "  </dict>\n"
        }
        return out + "</dict>\n"
    }
}
