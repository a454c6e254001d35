/// AFNetworking's AFSecurityPolicy as an app builds it: what `evaluateServerTrust:forDomain:`
/// refuses before it looks at a server (docs/apple-rules.md section 4).
public enum AFNetworkingPolicy {
    /// Why AFNetworking fails every server under `policy`, if it does: its own refusal of
    /// `allowInvalidCertificates` with `validatesDomainName` and nothing pinned, or a pinning mode
    /// whose pinned set is empty (no anchor to build to, no key to match).
    public static func refusal(_ policy: PinPolicy) -> FindingID? {
        if policy.allowInvalidCertificates, policy.validatesDomainName, policy.mode == .none || policy.pins.isEmpty {
            return .pinAFNetworkingRefused
        }
        if policy.mode != .none, policy.pins.isEmpty { return .pinNoPinnedCertificate }
        return nil
    }

    /// The refusal as a finding of the audit, with what to change.
    public static func refusalFinding(_ policy: PinPolicy, bundle: String) -> Finding? {
        switch refusal(policy) {
        case .pinAFNetworkingRefused?:
            return Finding(.pinAFNetworkingRefused, .error,
                "AFNetworking refuses this AFSecurityPolicy for every server: allowInvalidCertificates = YES with validatesDomainName = YES and "
                + (policy.mode == .none ? "AFSSLPinningModeNone" : "no pinned certificate")
                + " (evaluateServerTrust:forDomain: returns NO, the challenge is cancelled: NSURLErrorDomain -999). Pin the server's certificate or key, or set allowInvalidCertificates = NO.")
        case .pinNoPinnedCertificate?:
            return Finding(.pinNoPinnedCertificate, .error,
                "AFSSLPinningMode \(policy.mode.rawValue) with nothing pinned: the pinned set is the .cer certificates at the top of \(bundle), and it has none AFNetworking can read, so AFNetworking refuses every server (NSURLErrorDomain -999). Bundle the pinned certificates as DER files named *.cer.")
        default:
            return nil
        }
    }
}
