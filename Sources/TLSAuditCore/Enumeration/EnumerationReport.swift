import Foundation

/// One suite a server accepted, with what the handshake showed.
public struct AcceptedSuite: Hashable, Codable, Sendable {
    public var cipher: CipherSuiteDescription
    public var keyExchange: KeyExchangeDescription

    public init(cipher: CipherSuiteDescription, keyExchange: KeyExchangeDescription) {
        self.cipher = cipher
        self.keyExchange = keyExchange
    }
}

/// What one protocol version gave.
public struct ProtocolSupport: Hashable, Codable, Sendable {
    public enum Status: String, Codable, Sendable {
        case accepted
        case rejected
        /// Not tried (this libssl cannot offer it and no hand-built hello was sent), or the probe failed.
        case notTested = "not-tested"
    }

    /// `SSLv2`, `SSLv3`, `TLSv1`, `TLSv1.1`, `TLSv1.2`, `TLSv1.3`.
    public var version: String
    public var status: Status
    /// How it was decided, in plain words.
    public var detail: String
    /// Accepted suites in the order the server chose them.
    public var suites: [AcceptedSuite]
    /// `server` (the server enforces its order), `client` (it follows the client's), or nil (fewer than two suites).
    public var preference: String?

    public init(version: String, status: Status, detail: String, suites: [AcceptedSuite] = [], preference: String? = nil) {
        self.version = version
        self.status = status
        self.detail = detail
        self.suites = suites
        self.preference = preference
    }
}

/// Every version and suite one address accepts (`scan --enumerate`).
public struct EnumerationReport: Hashable, Codable, Sendable {
    public var address: String
    public var protocols: [ProtocolSupport]
    public var findings: [Finding]
    /// Handshakes made.
    public var probes: Int
    public var durationMs: Int

    public init(address: String, protocols: [ProtocolSupport], findings: [Finding], probes: Int, durationMs: Int) {
        self.address = address
        self.protocols = protocols
        self.findings = findings
        self.probes = probes
        self.durationMs = durationMs
    }

    /// Findings about what the server still accepts.
    public static func findings(for protocols: [ProtocolSupport]) -> [Finding] {
        var findings: [Finding] = []
        for support in protocols where support.status == .accepted {
            switch support.version {
            case "SSLv2", "SSLv3":
                findings.append(Finding(.tlsLegacyProtocol, .error, "The server accepts \(support.version), broken for decades."))
            case "TLSv1", "TLSv1.1":
                findings.append(Finding(.tlsLegacyProtocol, .warning,
                    "The server accepts \(support.version == "TLSv1" ? "TLS 1.0" : "TLS 1.1"), deprecated by RFC 8996."))
            default:
                break
            }
            for suite in support.suites {
                if let key = suite.keyExchange.ephemeralKey, key.type == "DH", key.bits < 2048 {
                    findings.append(Finding(.tlsWeakDH, .warning,
                        "\(suite.cipher.iana) over \(support.version) uses a \(key.bits)-bit Diffie-Hellman group."))
                }
            }
            if let first = support.suites.first, support.preference == "server", !first.keyExchange.forwardSecrecy,
               support.suites.contains(where: \.keyExchange.forwardSecrecy) {
                findings.append(Finding(.tlsPrefersWeakSuite, .warning,
                    "Over \(support.version) the server prefers \(first.cipher.iana), without forward secrecy, over suites it has that offer it."))
            }
        }
        let anonymous = protocols.flatMap(\.suites).filter { $0.cipher.authentication == "NULL" }
        if !anonymous.isEmpty {
            let names = Set(anonymous.map(\.cipher.iana)).sorted().prefix(4).joined(separator: ", ")
            findings.append(Finding(.tlsAnonymousSuites, .error,
                "The server accepts anonymous suites, with no server authentication at all (anyone in the middle can answer): \(names)."))
        }
        let staticRSA = protocols.flatMap(\.suites).filter { !$0.keyExchange.forwardSecrecy }
        if !staticRSA.isEmpty {
            let names = Set(staticRSA.map(\.cipher.iana)).sorted().prefix(4).joined(separator: ", ")
            findings.append(Finding(.tlsNonForwardSecretSuites, .info, "The server accepts suites without forward secrecy: \(names)."))
        }
        return findings
    }
}

extension FindingID {
    /// The server accepts SSL 2/3 (error) or TLS 1.0/1.1 (warning).
    public static let tlsLegacyProtocol: FindingID = "tls.legacy-protocol"
    /// With its own order, the server picks a suite without forward secrecy first.
    public static let tlsPrefersWeakSuite: FindingID = "tls.prefers-weak-suite"
    /// Some accepted suite authenticates nobody (aNULL).
    public static let tlsAnonymousSuites: FindingID = "tls.anonymous-suites"
    /// Some accepted suite has no forward secrecy.
    public static let tlsNonForwardSecretSuites: FindingID = "tls.non-forward-secret-suites"
}
