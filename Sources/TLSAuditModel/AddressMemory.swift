public import Foundation

/// What the store keeps of a target address between scans: the inputs of change detection
/// (the alert detector in TLSAuditCore decides from it).
public struct AddressMemory: Hashable, Sendable {
    public var pinState: PinEvaluation.State?
    public var leafFingerprint: String?
    public var leafSPKI: String?
    /// Verdict of the last completed scan (failed scans do not change it).
    public var atsCompliant: Bool?
    public var failedRules: [FindingID]
    /// Trust of the last completed scan.
    public var trusted: Bool?
    public var consecutiveFailures: Int
    public var unreachableAlerted: Bool
    /// `fingerprint#level` marks of expiry alerts already raised.
    public var expiryMarks: Set<String>
    /// When the address's previous scan started (read with its state, for the detector: not kept apart).
    public var lastScanAt: Date?

    public init(pinState: PinEvaluation.State? = nil, leafFingerprint: String? = nil, leafSPKI: String? = nil,
                atsCompliant: Bool? = nil, failedRules: [FindingID] = [], trusted: Bool? = nil, consecutiveFailures: Int = 0,
                unreachableAlerted: Bool = false, expiryMarks: Set<String> = []) {
        self.pinState = pinState
        self.leafFingerprint = leafFingerprint
        self.leafSPKI = leafSPKI
        self.atsCompliant = atsCompliant
        self.failedRules = failedRules
        self.trusted = trusted
        self.consecutiveFailures = consecutiveFailures
        self.unreachableAlerted = unreachableAlerted
        self.expiryMarks = expiryMarks
    }
}

/// FNV-1a: a hash that is the same in every run (Swift's `hashValue` is seeded per process).
public enum StableHash {
    public static func fnv1a(_ text: String, seed: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var hash = seed
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
