public import Foundation
public import TLSAuditModel
import TLSAuditSupport

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

/// A stored version of the fleet's configuration.
public struct FleetConfigurationVersion: Sendable, Hashable {
    public var version: Int64
    public var appliedAt: Date
    public var appliedBy: String
    public var document: String
    public var sha256: String

    package init(version: Int64, appliedAt: Date, appliedBy: String, document: String, sha256: String) {
        self.version = version
        self.appliedAt = appliedAt
        self.appliedBy = appliedBy
        self.document = document
        self.sha256 = sha256
    }
}

/// One node as `fleet status` lists it.
public struct FleetNodeStatus: Sendable, Hashable, Codable {
    public var name: String
    public var vantage: String
    public var configurationVersion: Int64?
    public var startedAt: Date
    public var heartbeatAt: Date
    /// Seconds since the last heartbeat, on the database server's clock.
    public var heartbeatAge: Double
    public var inFlight: Int
    public var scansPerMinute: Double
    public var scansTotal: Int64
    public var process: String?
    public var poll: Double
    public var lease: Double
    /// The PostgreSQL server the node's last heartbeat reached (`host:port`; nil before v18-node-server).
    public var databaseServer: String?

    /// Lost: no heartbeat for three of its polls plus its lease (its scans are others' by then).
    public var lost: Bool { Self.isLost(heartbeatAge: heartbeatAge, poll: poll, lease: lease) }

    /// The rule `lost` applies, for a node known only by its row.
    package static func isLost(heartbeatAge: Double, poll: Double, lease: Double) -> Bool { heartbeatAge > 3 * poll + lease }

    package init(name: String, vantage: String, configurationVersion: Int64?, startedAt: Date, heartbeatAt: Date, heartbeatAge: Double, inFlight: Int, scansPerMinute: Double, scansTotal: Int64, process: String?, poll: Double, lease: Double, databaseServer: String?) {
        self.name = name
        self.vantage = vantage
        self.configurationVersion = configurationVersion
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
        self.heartbeatAge = heartbeatAge
        self.inFlight = inFlight
        self.scansPerMinute = scansPerMinute
        self.scansTotal = scansTotal
        self.process = process
        self.poll = poll
        self.lease = lease
        self.databaseServer = databaseServer
    }
}

/// The work queue at a glance (`fleet status`).
public struct FleetWorkSummary: Sendable, Hashable, Codable {
    /// Rows in the queue: one per target, or per target and vantage.
    public var scans: Int
    /// Scans some node holds a lease on now.
    public var leased: Int
    /// Scans due and not claimed yet.
    public var waiting: Int
    /// Seconds the longest-waiting due scan has waited.
    public var longestWait: Double

    package init(scans: Int, leased: Int, waiting: Int, longestWait: Double) {
        self.scans = scans
        self.leased = leased
        self.waiting = waiting
        self.longestWait = longestWait
    }
}

/// What one claim got: the scans claimed, and whether due work stayed unclaimed when they were
/// fewer than asked for (a host at its cap held it back: a lease released frees it at once).
public struct FleetClaims: Sendable {
    public var claims: [FleetClaim]
    public var dueLeft: Bool

    package init(claims: [FleetClaim], dueLeft: Bool) {
        self.claims = claims
        self.dueLeft = dueLeft
    }
}

/// Another process holds this node's name: alive at this node's start (a twin, or the same
/// node started twice), or it took the name over since (`serve --replace-node`).
public struct FleetNameConflict: Error, CustomStringConvertible {
    public var name: String
    public var host: String?
    public var process: String?
    public var startedAt: Date
    public var heartbeatAge: Double
    /// True when met at this node's start; false when the name was taken from this node while it ran.
    public var duringStart: Bool

    public var description: String {
        let other = "\(process ?? "a process") on \(host ?? "an unknown host"), started \(Timestamp.format(startedAt)), "
            + "last heartbeat \(String(format: "%.1f", heartbeatAge)) s ago"
        return duringStart
            ? "another node named \(name) is alive (\(other)): give this node another name (node: {name: ...}), stop the other one, or start this one with --replace-node if the other is gone for good"
            : "node name \(name) was taken over by \(other) (started with --replace-node): this node stops"
    }

    package init(name: String, host: String?, process: String?, startedAt: Date, heartbeatAge: Double, duringStart: Bool) {
        self.name = name
        self.host = host
        self.process = process
        self.startedAt = startedAt
        self.heartbeatAge = heartbeatAge
        self.duringStart = duringStart
    }
}
