/// Which vantage points scan a target.
public enum FleetVantages: Sendable, Hashable {
    /// Any one node, whatever its vantage (the default).
    case any
    /// Every vantage point the fleet has.
    case all
    /// Each of these vantage points.
    case list([String])

    /// The work row's vantage for "any one vantage".
    public static let anyRow = "*"
}

/// A target as the fleet's work queue knows it.
public struct FleetTarget: Sendable, Hashable {
    public var key: String
    public var host: String
    public var interval: Double
    public var vantages: FleetVantages

    public init(key: String, host: String, interval: Double, vantages: FleetVantages) {
        self.key = key
        self.host = host
        self.interval = interval
        self.vantages = vantages
    }
}
