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
}
