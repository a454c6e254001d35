public import Foundation
import TLSAuditSupport

/// AFNetworking's AFSSLPinningMode.
public enum PinMode: String, Codable, Sendable, CaseIterable {
    /// No pinning: system trust only.
    case none
    /// Some certificate of the chain equals a pinned certificate (SHA-256 of the DER).
    case certificate
    /// Some public key of the chain equals a pinned key (SHA-256 of the SubjectPublicKeyInfo).
    case publicKey = "public-key"
}

/// One pinned value.
public enum PinValue: Hashable, Codable, Sendable, CustomStringConvertible {
    /// Base64 SHA-256 of a SubjectPublicKeyInfo (Apple's SPKI-SHA256-BASE64, HPKP pin-sha256).
    case spki(String)
    /// Lowercase hex SHA-256 of a certificate's DER.
    case certificate(String)

    public var description: String {
        switch self {
        case .spki(let value): "sha256/\(value)"
        case .certificate(let value): "cert-sha256:\(value)"
        }
    }

    /// Parses `sha256/BASE64=`, a bare 44-character base64 SPKI pin, or a SHA-256 hex
    /// fingerprint with or without colons. Returns nil for anything else.
    public static func parse(_ text: String) -> PinValue? {
        let trimmed = text.trimmingWhitespace()
        let base64 = trimmed.hasPrefix("sha256/") ? String(trimmed.dropFirst(7)) : trimmed
        if base64.count == 44, base64.hasSuffix("="), Data(base64Encoded: base64)?.count == 32 {
            return .spki(base64)
        }
        let hex = trimmed.replacingOccurrences(of: ":", with: "").lowercased()
        if hex.count == 64, hex.allSatisfy(\.isHexDigit) {
            return .certificate(hex)
        }
        return nil
    }
}

/// A target's pinning, in either of the two forms users bring:
/// The NSPinnedDomains key a `PinPolicy`'s identities were declared under, and its NSIncludesSubdomains.
public struct PinnedDomainScope: Hashable, Codable, Sendable {
    /// The key, lower case.
    public var domain: String
    /// NSIncludesSubdomains: the names one label below `domain` are pinned too.
    public var includesSubdomains: Bool

    public init(domain: String, includesSubdomains: Bool) {
        self.domain = domain.lowercased()
        self.includesSubdomains = includesSubdomains
    }
}

/// AFNetworking's AFSecurityPolicy (mode + pins + flags), or Apple's NSPinnedDomains
/// (leaf and CA SPKI identities). See docs/apple-rules.md section 4.
public struct PinPolicy: Hashable, Codable, Sendable {
    /// AFNetworking mode; `none` for an NSPinnedDomains-style policy.
    public var mode: PinMode
    /// AFNetworking pins: SPKI pins in public-key mode, certificate fingerprints in certificate mode.
    public var pins: [PinValue]
    /// NSPinnedLeafIdentities: the leaf's SPKI must be one of these.
    public var leafIdentities: [String]
    /// NSPinnedCAIdentities: some CA certificate of the chain must have one of these SPKIs.
    public var caIdentities: [String]
    public var allowInvalidCertificates: Bool
    public var validatesDomainName: Bool
    /// Certificate mode: the DER of the pinned certificates when they were given as files (as an
    /// app bundles them), so that they anchor the chain even when the server does not send them.
    public var pinnedCertificates: [Data] = []
    /// The NSPinnedDomains entry these identities come from (`pins: {domain:, include_subdomains:}`,
    /// as `pins import` and `app import` write them): with NSIncludesSubdomains the pins hold for
    /// the names one label below the domain too, which the CT pin forecast watches.
    public var pinnedDomain: PinnedDomainScope?

    public init(mode: PinMode = .none, pins: [PinValue] = [], leafIdentities: [String] = [], caIdentities: [String] = [],
                allowInvalidCertificates: Bool = false, validatesDomainName: Bool = true) {
        self.mode = mode
        self.pins = pins
        self.leafIdentities = leafIdentities
        self.caIdentities = caIdentities
        self.allowInvalidCertificates = allowInvalidCertificates
        self.validatesDomainName = validatesDomainName
    }

    /// True when the policy pins anything (a policy with mode none and no identities only checks trust).
    public var pinsSomething: Bool { mode != .none || !leafIdentities.isEmpty || !caIdentities.isEmpty }

    /// Configuration problems, AFNetworking's refusal first. Empty when the policy is usable.
    public var problems: [String] {
        var problems: [String] = []
        if allowInvalidCertificates, validatesDomainName, mode == .none || pins.isEmpty,
           leafIdentities.isEmpty, caIdentities.isEmpty {
            problems.append("AFNetworking refuses a domain with allow_invalid_certificates and validates_domain_name but no pins: you must use pinning")
        }
        if mode != .none, pins.isEmpty {
            problems.append("mode \(mode.rawValue) needs at least one pin")
        }
        if mode == .publicKey, pins.contains(where: { if case .certificate = $0 { true } else { false } }) {
            problems.append("public-key mode compares SPKI pins: give 'sha256/BASE64=' values or certificate files, not certificate fingerprints")
        }
        if mode == .certificate, pins.contains(where: { if case .spki = $0 { true } else { false } }) {
            problems.append("certificate mode compares whole certificates: give SHA-256 fingerprints or certificate files, not SPKI pins")
        }
        if mode != .none, !leafIdentities.isEmpty || !caIdentities.isEmpty {
            problems.append("use either AFNetworking pins (mode, pins) or Apple identities (leaf_identities, ca_identities), not both")
        }
        return problems
    }

    /// Advice that does not stop the policy from working.
    public var warnings: [String] {
        var warnings: [String] = []
        let count = pins.count + leafIdentities.count + caIdentities.count
        if pinsSomething, count == 1 {
            warnings.append("only one pin and no backup pin: a key rotation will break every pinned client")
        }
        if acceptsAnyCertificate {
            warnings.append("mode none with allow_invalid_certificates: true and validates_domain_name: false accepts any certificate at all (AFNetworking evaluates nothing): every scan says so in pin.accepts-any-certificate")
        } else if !validatesDomainName {
            warnings.append("validates_domain_name: false accepts a certificate issued for another name (AFNetworking made true the default under every policy in 2.5.3, the fix of 2.5.2's security vulnerability): every scan says so in pin.domain-name-not-validated")
        }
        return warnings
    }

    /// The warnings every scan of the target carries about the policy itself (docs/findings.md, "Pins").
    public var policyFindings: [Finding] {
        if acceptsAnyCertificate {
            return [Finding(.pinAcceptsAnyCertificate, .warning,
                "The client's policy (mode none, allow_invalid_certificates, no validates_domain_name) accepts any certificate at all: anyone on the path can impersonate this server to the app.")]
        }
        if !validatesDomainName {
            return [Finding(.pinDomainNameNotValidated, .warning,
                "The client's AFNetworking policy has validates_domain_name: false, so it accepts a certificate issued for another name (any that its trust evaluation and pins let through): whoever holds one can impersonate this server to the app (AFNetworking 2.5.3 made the name check the default under every policy, fixing 2.5.2's security vulnerability).")]
        }
        return []
    }

    /// True for the one setting under which AFNetworking accepts any certificate at all: mode
    /// none, invalid certificates allowed, no name validation.
    public var acceptsAnyCertificate: Bool {
        mode == .none && leafIdentities.isEmpty && caIdentities.isEmpty && allowInvalidCertificates && !validatesDomainName
    }
}
