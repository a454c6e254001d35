// The fleet's work queue as the scheduler and a fleet store exchange it: claims, completions,
// heartbeats and the view of the live nodes (the PostgreSQL fleet, `PostgresFleet`, keeps the queue).

/// A scan this node holds a lease on: the target and the work row's vantage (`*` or its own),
/// and the failures in a row the fleet has seen for it (shared backoff).
public struct FleetClaim: Sendable, Hashable {
    public var target: String
    public var vantage: String
    public var consecutiveFailures: Int
    /// The lease epoch this claim raised the row to (its fencing token); nil for a scan of this
    /// node's share while PostgreSQL did not answer (no claim was made).
    public var epoch: Int64?

    public init(target: String, vantage: String, consecutiveFailures: Int, epoch: Int64? = nil) {
        self.target = target
        self.vantage = vantage
        self.consecutiveFailures = consecutiveFailures
        self.epoch = epoch
    }

    /// The fencing token a scan under this claim is stored with (nil without a claim).
    public var fence: ScanFence? {
        epoch.map { ScanFence(workTarget: target, workVantage: vantage, epoch: $0) }
    }
}

/// A finished scan, to be written back to the work queue: when the target is due again.
public struct FleetCompletion: Sendable, Hashable {
    public var claim: FleetClaim
    public var consecutiveFailures: Int
    /// Seconds from the scan's end to its next run.
    public var delay: Double
    /// When the scan ended, on this node's monotonic clock (`ProcessInfo.systemUptime`): a
    /// completion written late still counts its delay from the scan's end.
    public var endedAt: Double

    public init(claim: FleetClaim, consecutiveFailures: Int, delay: Double, endedAt: Double) {
        self.claim = claim
        self.consecutiveFailures = consecutiveFailures
        self.delay = delay
        self.endedAt = endedAt
    }
}

/// What a node reports with each heartbeat.
public struct FleetHeartbeat: Sendable, Hashable {
    public var configurationVersion: Int64?
    public var inFlight: [FleetClaim]
    public var scansPerMinute: Double
    public var scansTotal: Int64
    /// The node's poll period and lease, by which the others judge it lost.
    public var poll: Double
    public var lease: Double

    public init(configurationVersion: Int64?, inFlight: [FleetClaim], scansPerMinute: Double, scansTotal: Int64,
                poll: Double, lease: Double) {
        self.configurationVersion = configurationVersion
        self.inFlight = inFlight
        self.scansPerMinute = scansPerMinute
        self.scansTotal = scansTotal
        self.poll = poll
        self.lease = lease
    }
}

/// What a node knows of the fleet as of its last heartbeat: the nodes alive, and when each work
/// row it has seen change is due. While PostgreSQL does not answer, the nodes split the work
/// among themselves from this (rendezvous hashing over the live nodes) without talking.
public struct FleetView: Sendable {
    public struct Node: Sendable, Hashable {
        public var name: String
        public var vantage: String

        public init(name: String, vantage: String) {
            self.name = name
            self.vantage = vantage
        }
    }

    public var live: [Node]
    /// Seconds until each row is due, by target then row vantage (negative: overdue), for the
    /// rows changed since the previous view (all of them the first time).
    public var dueIn: [FleetRowKey: Double]
    /// The server's clock when read: the next view asks for changes since then.
    public var serverTime: Double

    public init(live: [Node], dueIn: [FleetRowKey: Double], serverTime: Double) {
        self.live = live
        self.dueIn = dueIn
        self.serverTime = serverTime
    }
}

/// A work row: a target and a row vantage (`*` or a vantage name).
public struct FleetRowKey: Sendable, Hashable {
    public var target: String
    public var vantage: String

    public init(target: String, vantage: String) {
        self.target = target
        self.vantage = vantage
    }
}
