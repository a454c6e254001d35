import TLSAuditStore

/// Where a scheduler's work comes from: what is due now, and what a finished scan means for it.
/// `LocalSchedule` reads the node's own due times; `FleetClaimSource` claims due scans from a
/// fleet's queue. A new source is a new file conforming to this protocol, handed to
/// `ScanScheduler.init` where the service is assembled (`ScanService.init`).
///
/// Every method is called on the scheduler's queue, the one the source's state is confined to;
/// a source that waits on something (a database) does so on a queue of its own and comes back
/// through `ScanScheduler.callbackQueue`.
protocol WorkSource: AnyObject {
    /// Called once, before anything else: the scheduler the source launches scans through.
    func attach(to scheduler: ScanScheduler)
    /// The targets were set or replaced (`reloaded`: by a reload, not the start).
    func targetsChanged(reloaded: Bool)
    /// On each tick (every 100 ms) and when the source asks for one: launches what is due now,
    /// within the scheduler's caps (`ScanScheduler.launch`).
    func launchDue(now: SchedulerTime)
    /// A scan of `key` finished; `scans` are about to be stored. The source may mark them (a
    /// fleet lease's fence) and returns the failures in a row it counts for the target when it
    /// keeps that count itself (a fleet's, whichever node saw them), else nil.
    func finishing(_ key: String, scans: inout [StoredScan]) -> Int?
    /// After `finishing`: the target's schedule now (nil when a reload removed it meanwhile).
    func finished(_ key: String, schedule: TargetSchedule?)
}

/// A target's place in the schedule, as the scheduler keeps it and a work source reads it.
struct TargetSchedule {
    var nextDue: SchedulerTime
    var consecutiveFailures: Int
}
