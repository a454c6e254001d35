import Foundation
import TLSAuditCore
import TLSAuditProbe
import Yams

/// `pins:`, in AFNetworking's form or NSPinnedDomains'.
extension ConfigurationParser {
    static let pinKeys = ["mode", "pins", "allow_invalid_certificates", "validates_domain_name", "leaf_identities", "ca_identities",
                          "domain", "include_subdomains"]

    /// AFNetworking 2.x's `validatesCertificateChain`, refused with what became of it (AFNetworking's
    /// CHANGELOG, 2.6.0: "Full Certificate Chain Validation has been removed from AFSecurityPolicy", #2856).
    static let validatesCertificateChainRemoved = "validates_certificate_chain is AFNetworking 2.x's validatesCertificateChain, removed in AFNetworking 2.6.0 (so no 3.x or 4.x has it): a pinned policy now accepts the chain when any one of its certificates (or, in public-key mode, keys) is pinned. Remove the key and pin the one certificate of the chain you rely on in pins (AFNetworking's advice: the most suitable certificate of the chain)"

    /// `pins:` in AFNetworking form (mode, pins, flags) or Apple's (leaf_identities, ca_identities).
    mutating func pins(_ node: Node) -> PinPolicy? {
        guard case .mapping(let mapping) = node else {
            report(node, "pins must be a mapping: mode, pins, allow_invalid_certificates, validates_domain_name (AFNetworking) or leaf_identities, ca_identities (NSPinnedDomains)")
            return nil
        }
        if let dropped = mapping.first(where: { $0.key.scalar?.string == "validates_certificate_chain" })?.key {
            report(dropped, Self.validatesCertificateChainRemoved)
        }
        checkKeys(mapping.filter { $0.key.scalar?.string != "validates_certificate_chain" }, allowed: Self.pinKeys, in: "pins")
        var policy = PinPolicy()
        var explicitMode: PinMode?
        if let modeNode = mapping["mode"] { explicitMode = choice(modeNode, "mode", expected: "a pinning mode") }
        if let flag = mapping["allow_invalid_certificates"] { policy.allowInvalidCertificates = boolean(flag) ?? false }
        if let flag = mapping["validates_domain_name"] { policy.validatesDomainName = boolean(flag) ?? true }
        if let list = mapping["pins"] {
            (policy.pins, policy.pinnedCertificates) = pinValues(list, mode: explicitMode)
            if explicitMode == nil {
                let allSPKI = policy.pins.allSatisfy { if case .spki = $0 { true } else { false } }
                explicitMode = policy.pins.isEmpty ? PinMode.none : allSPKI ? .publicKey : .certificate
            }
        }
        policy.mode = explicitMode ?? .none
        for (key, keyPath) in [("leaf_identities", \PinPolicy.leafIdentities), ("ca_identities", \PinPolicy.caIdentities)] {
            guard let list = mapping[key] else { continue }
            guard case .sequence(let sequence) = list, !sequence.isEmpty else {
                report(list, "\(key) must be a non-empty list of SPKI pins (base64 SHA-256): an empty list pins nothing")
                continue
            }
            policy[keyPath: keyPath] = sequence.compactMap { entry in
                guard let text = string(entry, "an SPKI pin"), case .spki(let value)? = PinValue.parse(text) else {
                    report(entry, "\(key) entries must be SPKI pins: 44 characters of base64 (optionally 'sha256/...')")
                    return nil
                }
                return value
            }
        }
        if let domainNode = mapping["domain"] {
            if let domain = string(domainNode, "the NSPinnedDomains key"), HostnameMatcher.isValidDNSName(domain.lowercased()) {
                let includes = mapping["include_subdomains"].flatMap { boolean($0) } ?? false
                policy.pinnedDomain = PinnedDomainScope(domain: domain, includesSubdomains: includes)
            } else {
                report(domainNode, "pins: domain must be the NSPinnedDomains key the identities come from (a DNS name)")
            }
        } else if let flag = mapping["include_subdomains"] {
            report(flag, "pins: include_subdomains goes with domain: the NSPinnedDomains key whose subdomains it reaches")
        }
        for problem in policy.problems { report(node, "pins: \(problem)") }
        for warning in policy.warnings { warnings.append(ConfigurationError(file: file, line: node.mark?.line, message: "pins: \(warning)")) }
        return policy.problems.isEmpty ? policy : nil
    }

    /// Pin values: pin strings, or `{file: cert.pem}` (PEM, DER .cer/.crt; every certificate in the file).
    /// The pin values, and the DER of the certificates given as files in certificate mode (an app
    /// bundles the pinned certificates: AFNetworking anchors on them even when the server does not send them).
    mutating func pinValues(_ node: Node, mode: PinMode?) -> ([PinValue], [Data]) {
        guard case .sequence(let sequence) = node else {
            report(node, "pins must be a list of 'sha256/BASE64=' SPKI pins, SHA-256 hex fingerprints or {file: PATH}")
            return ([], [])
        }
        var values: [PinValue] = []
        var certificates: [Data] = []
        for entry in sequence {
            switch entry {
            case .scalar(let scalar):
                if let value = PinValue.parse(scalar.string) {
                    values.append(value)
                } else {
                    report(entry, "'\(scalar.string)' is not a pin: expected 'sha256/' + 44 base64 characters, or a 64-digit SHA-256 hex fingerprint (colons allowed)")
                }
            case .mapping(let mapping):
                checkKeys(mapping, allowed: ["file"], in: "a pin")
                guard let fileNode = mapping["file"], let path = string(fileNode, "a certificate file") else { continue }
                let absolute = absolutePath(path)
                do {
                    for certificate in try CertificateFile.summaries(path: absolute) {
                        values.append(mode == .certificate ? .certificate(certificate.sha256Fingerprint) : .spki(certificate.spkiSHA256))
                        if mode == .certificate { certificates.append(certificate.der) }
                    }
                } catch {
                    report(fileNode, "cannot read a certificate from \(absolute): \(error)")
                }
            default:
                report(entry, "a pin must be a string or {file: PATH}")
            }
        }
        return (values, certificates)
    }
}
