/// How an app answers URLSession's server-trust challenge (`NSURLAuthenticationMethodServerTrust`):
/// the input `app audit --trust-evaluation`, `app import` and a target's `app: trust_evaluation:`
/// take. docs/apple-rules.md section 6 says what each does on a device.
public enum AppTrustEvaluation: String, Codable, Sendable, CaseIterable {
    /// The system's default handling (no delegate method, or `.performDefaultHandling`): the chain
    /// must pass the default trust evaluation whatever the Info.plist declares.
    /// NSExceptionAllowsInsecureHTTPLoads only lets an app evaluate trust itself; by itself it
    /// "doesn't change default server trust evaluation requirements" (Apple).
    case system
    /// AFNetworking's AFSecurityPolicy (`--afnetworking MODE`): evaluated in AFNetworking's order,
    /// where ATS leaves trust to the app (insecure HTTP loads, ATS off).
    case afnetworking
    /// A delegate that answers every challenge with `.useCredential` for the server's trust: where
    /// ATS leaves trust to the app, any certificate is accepted, so anyone on the network path can
    /// impersonate the server. Named so that an audit says so.
    case acceptAll = "accept-all"

    /// The app's own code decides trust where ATS lets it (insecure HTTP loads, ATS off).
    public var replacesSystemEvaluation: Bool { self != .system }

    /// In words, for reports.
    public var phrase: String {
        switch self {
        case .system: "the system's default trust evaluation"
        case .afnetworking: "AFNetworking's AFSecurityPolicy"
        case .acceptAll: "a delegate that accepts every server certificate"
        }
    }
}
