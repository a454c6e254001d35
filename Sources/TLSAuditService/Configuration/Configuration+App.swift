import Foundation
import TLSAuditCore
import Yams

/// `app:`, an iOS app's ATS rules for a target.
extension ConfigurationParser {
    static let appKeys = ["bundle", "entry", "relies_on", "minimum_tls_version", "requires_forward_secrecy", "allows_insecure_http_loads",
                          "arbitrary_loads", "requires_certificate_transparency", "afnetworking", "trust_evaluation"]

    /// `app:`, the ATS rules one iOS app gives the target (`tlsaudit app import` writes it): `bundle`
    /// (required), `entry` (the NSExceptionDomains key that applies), `relies_on` (its keys), and the
    /// effective rules, Apple's defaults when absent: `minimum_tls_version` (TLSv1.2),
    /// `requires_forward_secrecy` (true), `allows_insecure_http_loads`, `arbitrary_loads`,
    /// `requires_certificate_transparency` (false); `afnetworking`, the app's AFSecurityPolicy as a
    /// `pins:` block in AFNetworking's form (mode, pins, allow_invalid_certificates, validates_domain_name);
    /// `trust_evaluation`, how the app answers the server-trust challenge: `system` (the default),
    /// `afnetworking` (implied by `afnetworking:`) or `accept-all`.
    /// `client_identity: {certificate: PEM, key: PEM}` or `{pkcs12: FILE, password_file: FILE}`: the
    /// identity presented when a server asks for a client certificate (as an app answers
    /// URLSession's client-certificate challenge). Files that cannot be read stop the configuration.
    mutating func clientIdentity(_ node: Node) -> ClientCredentials? {
        let expected = "'client_identity' must be a mapping with 'certificate' and 'key' (PEM), or 'pkcs12' (and 'password_file')"
        guard let mapping = section(node, expected, allowed: ["certificate", "key", "pkcs12", "password_file"], in: "client_identity") else { return nil }
        func readable(_ key: String) -> String? {
            guard let value = mapping[key], let path = string(value, "a file path").map(absolutePath) else { return nil }
            if !FileManager.default.isReadableFile(atPath: path) { report(value, "client_identity \(key) \(path) cannot be read") }
            return path
        }
        if mapping["pkcs12"] != nil {
            if mapping["certificate"] != nil || mapping["key"] != nil { report(node, "client_identity takes 'pkcs12' or 'certificate' and 'key', not both") }
            guard let pkcs12 = readable("pkcs12") else { return nil }
            var password = ""
            if let passwordFile = readable("password_file"), let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) {
                password = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            }
            return ClientCredentials(pkcs12Path: pkcs12, password: password)
        }
        guard let certificate = readable("certificate"), let key = readable("key") else {
            if mapping["certificate"] == nil || mapping["key"] == nil { report(node, expected) }
            return nil
        }
        return ClientCredentials(certificatePath: certificate, keyPath: key)
    }

    mutating func appRules(_ node: Node) -> AppHostRules? {
        guard let mapping = section(node, "'app' must be a mapping with 'bundle' and the app's ATS rules for the target (tlsaudit app import writes it)",
                                    allowed: Self.appKeys, in: "app") else { return nil }
        guard let bundleNode = mapping["bundle"], let bundle = string(bundleNode, "a bundle identifier") else {
            if mapping["bundle"] == nil { report(node, "app: 'bundle' (the app's CFBundleIdentifier) is required") }
            return nil
        }
        var rules = AppHostRules(bundle: bundle, entry: nil, reliesOn: [], minimumTLSVersion: .tls1_2, requiresForwardSecrecy: true,
                                 allowsInsecureHTTPLoads: false, arbitraryLoads: false, requiresCertificateTransparency: false,
                                 configuration: "", minimumNegotiatedVersion: nil)
        if let value = mapping["entry"] { rules.entry = string(value, "an NSExceptionDomains key") }
        if let value = mapping["relies_on"] {
            if case .sequence(let keys) = value { rules.reliesOn = keys.compactMap { string($0, "an ATS key") } }
            else { report(value, "app relies_on must be a list of ATS keys") }
        }
        if let value = mapping["minimum_tls_version"], let text = string(value, "TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3") {
            if let version = AppTransportSecurityPolicy.tlsVersionValues[text] { rules.minimumTLSVersion = version }
            else { report(value, "app minimum_tls_version '\(text)': expected TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3 (Apple's spelling)") }
        }
        if let value = mapping["requires_forward_secrecy"], let flag = boolean(value) { rules.requiresForwardSecrecy = flag }
        if let value = mapping["allows_insecure_http_loads"], let flag = boolean(value) { rules.allowsInsecureHTTPLoads = flag }
        if let value = mapping["arbitrary_loads"], let flag = boolean(value) { rules.arbitraryLoads = flag }
        if let value = mapping["requires_certificate_transparency"], let flag = boolean(value) { rules.requiresCertificateTransparency = flag }
        if let value = mapping["trust_evaluation"], let text = string(value, "system, afnetworking or accept-all") {
            if let evaluation = AppTrustEvaluation(rawValue: text) { rules.trustEvaluation = evaluation }
            else { report(value, "app trust_evaluation '\(text)': expected system (the default), afnetworking (with afnetworking:) or accept-all") }
        }
        if let value = mapping["afnetworking"], let policy = pins(value) {
            if policy.mode == .none && !policy.allowInvalidCertificates || !policy.leafIdentities.isEmpty || !policy.caIdentities.isEmpty {
                report(value, "app afnetworking: an AFSecurityPolicy (mode certificate or public-key with pins, or mode none with allow_invalid_certificates); NSPinnedDomains identities go in the target's pins:")
            } else {
                rules.afnetworking = policy
            }
        }
        if rules.trustEvaluation == .afnetworking, rules.afnetworking == nil {
            report(mapping["trust_evaluation"] ?? node, "app trust_evaluation: afnetworking needs the app's AFSecurityPolicy in afnetworking:")
        } else if rules.afnetworking != nil, let declared = rules.trustEvaluation, declared != .afnetworking {
            report(mapping["trust_evaluation"] ?? node, "app trust_evaluation: \(declared.rawValue) contradicts afnetworking: (the app's trust evaluation is AFNetworking's)")
        }
        return rules.derived
    }
}
