import TLSAuditStore

/// The node's own schedule: the due times of its targets in a heap (`DueQueue`), launched earliest
/// first. The work source of a standalone service, and a fleet node's during an outage of the
/// fleet's database (for its share of the targets: `FleetClaimSource`).
final class LocalSchedule: WorkSource {
    private weak var scheduler: ScanScheduler?
    private var dueQueue = DueQueue()
    /// When the queue length was last reported (counting the due targets costs one visit each).
    private var queueReportedAt = SchedulerTime.distantPast
    /// The targets scheduled: nil for all of the scheduler's.
    private var keys: Set<String>?
    /// Called just before a target is launched (a fleet's outage share sets the scan's claim).
    var willLaunch: ((String) -> Void)?

    /// `keys`: the targets to schedule; nil for all of them.
    init(keys: Set<String>? = nil) { self.keys = keys }

    func attach(to scheduler: ScanScheduler) { self.scheduler = scheduler }

    func targetsChanged(reloaded: Bool) { rebuild() }

    /// Schedules `keys` from now on (nil: every target), at their due times.
    func schedule(_ keys: Set<String>?) {
        self.keys = keys
        rebuild()
    }

    /// The due times afresh, from the scheduler's targets.
    private func rebuild() {
        guard let scheduler else { return }
        let keys = self.keys.map(Array.init) ?? scheduler.targetKeys
        dueQueue = DueQueue(keys.compactMap { key in scheduler.target(key).map { DueQueue.Item(due: $0.schedule.nextDue, key: key) } })
    }

    /// Launches due targets, earliest first, within the global and per-host caps: O(log n) per
    /// target launched (or skipped). A target whose host is at its cap waits for the next tick;
    /// at most `concurrency` such targets are looked at per tick.
    func launchDue(now: SchedulerTime) {
        guard let scheduler else { return }
        let concurrency = scheduler.configuration.concurrency
        var waitingForHost: [DueQueue.Item] = []
        var launched = 0
        while scheduler.freeWorkers > 0, waitingForHost.count < concurrency, let first = dueQueue.first, first.due <= now {
            dueQueue.popFirst()
            // Stale: the target was removed, is in flight, or is due at another time now.
            guard let target = scheduler.target(first.key), target.schedule.nextDue == first.due,
                  !scheduler.isInFlight(first.key) else { continue }
            guard scheduler.hostHasRoom(for: first.key) else {
                waitingForHost.append(first)
                continue
            }
            willLaunch?(first.key)
            scheduler.launch(first.key)
            launched += 1
        }
        for item in waitingForHost { dueQueue.push(item) }
        if now.interval(since: queueReportedAt) >= 1 || launched > 0 && scheduler.freeWorkers > 0 {
            queueReportedAt = now
            scheduler.reportQueue(waiting: dueQueue.countDue(at: now, limit: keys?.count ?? scheduler.targetCount))
        }
    }

    func finishing(_ key: String, scans: inout [StoredScan]) -> Int? { nil }

    func finished(_ key: String, schedule: TargetSchedule?) {
        guard let schedule, keys?.contains(key) ?? true else { return }
        dueQueue.push(DueQueue.Item(due: schedule.nextDue, key: key))
    }
}
