import Foundation

/// The outcome of checking one handshake against a target's pins.
public struct PinEvaluation: Hashable, Codable, Sendable {
    public enum State: String, Codable, Sendable {
        /// The pins match (and, where the policy requires it, the chain is trusted).
        case match
        /// No pin matches, or the policy's trust requirement fails: a pinned client refuses the server.
        case mismatch
        /// The target has no pins.
        case none
    }

    public var state: State
    /// One sentence: what matched, or what the server showed instead.
    public var message: String
    /// The pin that matched, when one did.
    public var matched: String?
    /// The leaf's SPKI pin and fingerprint as seen, for alerts.
    public var leafSPKI: String?
    public var leafFingerprint: String?

    // Raw values are what JSONDocumentEncoder.tlsaudit's snake_case conversion round-trips (`leaf_spki`).
    enum CodingKeys: String, CodingKey {
        case state, message, matched, leafSPKI = "leafSpki", leafFingerprint
    }

    public init(state: State, message: String, matched: String? = nil, leafSPKI: String? = nil, leafFingerprint: String? = nil) {
        self.state = state
        self.message = message
        self.matched = matched
        self.leafSPKI = leafSPKI
        self.leafFingerprint = leafFingerprint
    }
}
