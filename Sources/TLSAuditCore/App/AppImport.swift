import Foundation
import TLSAuditSupport

/// `tlsaudit app import`: an app's hosts as service targets judged by the app's own rules for
/// each (`app:`), its NSPinnedDomains pins checked (`pins:`), tagged `app:BUNDLE_ID`.
public enum AppImport {
    /// One host the app calls, as the service should reach it.
    public struct Host: Sendable {
        public var host: String
        public var port: Int
        /// IP addresses to connect to instead of resolving the name (`addresses:`); empty: resolve.
        public var addresses: [String]

        public init(host: String, port: Int, addresses: [String] = []) {
            self.host = host
            self.port = port
            self.addresses = addresses
        }
    }

    /// A configuration file (YAML) with one group for the app: every host with the rules the app
    /// gives it. `trust` is the YAML value of `trust:` (nil: the policy's, Apple's root store).
    /// `afnetworking`: the app's AFSecurityPolicy, its pins written as `certificateFiles` (the
    /// bundle's certificates saved beside the configuration) when given, else as pin values.
    public static func configuration(_ policy: AppTransportSecurityPolicy, bundle: String, source: String, hosts: [Host],
                                     trust: String?, timeout: Double?, afnetworking: PinPolicy? = nil,
                                     certificateFiles: [String] = [], trustEvaluation: AppTrustEvaluation = .system,
                                     clientIdentity: String? = nil) -> String {
        var out = "# Written by `tlsaudit app import` from \(source) (\(bundle)).\n"
        out += "# Each target is judged by the app's own ATS rules for its host (app:), as `tlsaudit app audit`\n"
        out += "# judges it; NSPinnedDomains pins are checked (pins:). Serve it as it is, or paste the group into tlsaudit.yaml.\n"
        for problem in policy.diagnostics { out += "# PLIST \(problem.description)\n" }
        out += "groups:\n"
        out += "  - name: \(quotedYAML("app " + bundle))\n"
        out += "    tags: [\(quotedYAML(AppHostRules.tagPrefix + bundle))]\n"
        out += "    policy: ats-runtime\n"
        // As on the device (and in `app audit`): trustd fetches a missing intermediate from the AIA.
        out += "    aia_fetch: true\n"
        if let trust { out += "    trust: \(trust)\n" }
        if let timeout { out += "    timeout: \(DurationText.text(timeout))\n" }
        if let clientIdentity { out += "    client_identity: \(clientIdentity)\n" }
        out += "    targets:\n"
        for host in hosts {
            let effective = policy.effectivePolicy(for: host.host)
            let rules = policy.hostRules(for: host.host, bundle: bundle, afnetworking: afnetworking, trustEvaluation: trustEvaluation)
            out += "      # \(effective.reason)\n"
            out += "      - host: \(quotedYAML(host.host))\n"
            out += "        port: \(host.port)\n"
            if !host.addresses.isEmpty { out += "        addresses: [\(host.addresses.map(quotedYAML).joined(separator: ", "))]\n" }
            out += "        app:\n"
            out += "          bundle: \(quotedYAML(bundle))\n"
            if let entry = rules.entry { out += "          entry: \(quotedYAML(entry))\n" }
            if !rules.reliesOn.isEmpty { out += "          relies_on: [\(rules.reliesOn.map(quotedYAML).joined(separator: ", "))]\n" }
            if rules.arbitraryLoads {
                out += "          arbitrary_loads: true\n"
            } else {
                out += "          minimum_tls_version: \(quotedYAML(appleSpelling(rules.minimumTLSVersion)))\n"
                out += "          requires_forward_secrecy: \(rules.requiresForwardSecrecy)\n"
                out += "          allows_insecure_http_loads: \(rules.allowsInsecureHTTPLoads)\n"
            }
            out += "          requires_certificate_transparency: \(rules.requiresCertificateTransparency)\n"
            if afnetworking == nil, trustEvaluation != .system { out += "          trust_evaluation: \(trustEvaluation.rawValue)\n" }
            if let afnetworking { out += afnetworkingBlock(afnetworking, certificateFiles: certificateFiles) }
            if let pins = effective.pins {
                out += "        # \(effective.pinReason)\n"
                out += "        pins:\n"
                out += "          domain: \(quotedYAML(pins.domain))\n"
                if pins.includesSubdomains { out += "          include_subdomains: true\n" }
                if !pins.leafIdentities.isEmpty {
                    out += "          leaf_identities: [\(pins.leafIdentities.map(quotedYAML).joined(separator: ", "))]\n"
                }
                if !pins.caIdentities.isEmpty {
                    out += "          ca_identities: [\(pins.caIdentities.map(quotedYAML).joined(separator: ", "))]\n"
                }
            }
        }
        return out
    }

    /// `app: afnetworking:` in the `pins:` block's AFNetworking form.
    static func afnetworkingBlock(_ policy: PinPolicy, certificateFiles: [String]) -> String {
        var out = "          afnetworking:\n"
        out += "            mode: \(policy.mode.rawValue)\n"
        let values: [String] = if policy.mode == .certificate, !certificateFiles.isEmpty {
            certificateFiles.map { "{file: \(quotedYAML($0))}" }
        } else {
            policy.pins.map { pin in
                switch pin {
                case .spki(let value): quotedYAML("sha256/" + value)
                case .certificate(let fingerprint): quotedYAML(fingerprint)
                }
            }
        }
        if !values.isEmpty { out += "            pins: [\(values.joined(separator: ", "))]\n" }
        out += "            allow_invalid_certificates: \(policy.allowInvalidCertificates)\n"
        out += "            validates_domain_name: \(policy.validatesDomainName)\n"
        return out
    }

    /// `TLSv1.0` for TLS 1.0: the spelling of NSExceptionMinimumTLSVersion and of `app: minimum_tls_version`.
    public static func appleSpelling(_ version: TLSVersion) -> String {
        AppTransportSecurityPolicy.tlsVersionValues.first { $0.value == version }?.key ?? version.rawValue
    }

    /// A YAML double-quoted scalar (JSON's escaping is valid YAML).
    public static func quotedYAML(_ text: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let data = (try? encoder.encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
