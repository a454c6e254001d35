import Foundation
import TLSAuditCore
import TLSAuditStore

/// A fleet node's work: due scans claimed from the fleet's queue in PostgreSQL (`FleetWork`), each
/// under a lease whose epoch fences its result, and each finished scan's next due time written
/// back. The due times, the backoff and the per-host cap are the fleet's, not the node's clock.
/// While PostgreSQL does not answer, the nodes split the targets among themselves (rendezvous
/// hashing over the nodes alive at the last heartbeat) and each scans its share on its own
/// schedule (`LocalSchedule`) until it does.
final class FleetClaimSource: WorkSource, @unchecked Sendable {
    // @unchecked: every mutable property is only touched on the scheduler's queue.
    private weak var scheduler: ScanScheduler?
    private let fleet: FleetWork
    private let node: NodeIdentity
    /// The claim each scan in flight runs under (its lease is renewed by the heartbeat).
    private var claims: [String: FleetClaim] = [:]
    /// The claim of the scan between `finishing` and `finished`.
    private var finishingClaim: FleetClaim?
    private var claimPending = false
    private var nextClaimAt = SchedulerTime.distantPast
    private var lastClaimFull = false
    /// The last claim got fewer scans than asked for while due work stayed unclaimed (its hosts
    /// at their caps): a lease this node releases is claimed again at once, not after a poll.
    private var dueWorkLeft = false
    /// A scan under a claim completed since the last claim was sent.
    private var completedSinceClaim = false
    private var fleetReachable = true
    /// No claim before the node runs a fleet configuration version (a reload), or it would claim
    /// targets it does not know and give them back.
    private var runsFleetConfiguration = false
    /// As of the last heartbeat: when each work row is due, and the nodes alive.
    private var fleetDue: [FleetRowKey: SchedulerTime] = [:]
    private var liveNodes: [FleetView.Node] = []
    /// While PostgreSQL does not answer: this node's share of the targets (by key), scanned on
    /// its own schedule until PostgreSQL answers again.
    private var outageShare: [String: FleetClaim] = [:]
    private let outage = LocalSchedule(keys: [])

    init(fleet: FleetWork, node: NodeIdentity) {
        self.fleet = fleet
        self.node = node
        outage.willLaunch = { [unowned self] key in
            if let share = outageShare[key] { claims[key] = share }
        }
    }

    func attach(to scheduler: ScanScheduler) {
        self.scheduler = scheduler
        outage.attach(to: scheduler)
    }

    func targetsChanged(reloaded: Bool) {
        outage.targetsChanged(reloaded: reloaded)
        if reloaded { runsFleetConfiguration = true }
    }

    /// Claims as many due scans as there are free workers: again at once when the claim filled
    /// them all; as soon as a scan completes when due work was left behind its hosts' caps (the
    /// completion is written first, so its lease no longer counts); else after a jittered poll.
    /// While PostgreSQL does not answer, scans this node's share of the targets when due, and
    /// tries to reach it every poll.
    func launchDue(now: SchedulerTime) {
        guard let scheduler else { return }
        let configuration = scheduler.configuration
        let poll = configuration.fleet.poll
        if !fleetReachable {
            outage.launchDue(now: now)
            guard !claimPending, now >= nextClaimAt else { return }
            claimPending = true
            fleet.reconnect(callbackQueue: scheduler.callbackQueue) { [self] reached in
                claimPending = false
                guard reached else {
                    nextClaimAt = .now.adding(poll)
                    return
                }
                // The other nodes write what they scanned meanwhile at their first contact, within
                // a poll: claiming waits two, so that nothing they just scanned is claimed as due.
                scheduler.logger.notice("PostgreSQL answers again: what this node scanned meanwhile is written; claiming from the fleet's queue again")
                fleetReachable = true
                outageShare = [:]
                outage.schedule([])
                nextClaimAt = .now.adding(2 * poll)
            }
            return
        }
        let free = scheduler.freeWorkers
        // After a full claim, claim again once a quarter of the workers are free (not for every
        // one: each claim is a transaction); after one that left due work behind its hosts' caps,
        // when one of this node's scans completed; otherwise at the next (jittered) poll, which
        // bounds how late the node sees work it was not told about.
        let due = now >= nextClaimAt && (!lastClaimFull || free >= max(1, configuration.concurrency / 4))
            || dueWorkLeft && completedSinceClaim
        guard runsFleetConfiguration, !claimPending, due, free > 0 else { return }
        claimPending = true
        completedSinceClaim = false
        fleet.claim(limit: free, perHostCap: configuration.perHostConcurrency, lease: configuration.fleet.lease,
                    callbackQueue: scheduler.callbackQueue) { [self] outcome in
            claimPending = false
            switch outcome {
            case .success(let result):
                let claimed = result.claims
                var unknown: [FleetClaim] = []
                for claim in claimed {
                    // Its own scan still running (its lease ran out meanwhile): keeping the new lease
                    // keeps the target this node's, renewed with the scan in flight and cleared when
                    // it completes; giving it back would let another node scan it at the same time.
                    // The new claim (a new lease epoch) is the one its result is written under.
                    if scheduler.isInFlight(claim.target) {
                        if claims[claim.target] != nil { claims[claim.target] = claim }
                        continue
                    }
                    guard !scheduler.stopping, scheduler.target(claim.target) != nil else {
                        unknown.append(claim)
                        continue
                    }
                    claims[claim.target] = claim
                    scheduler.launch(claim.target)
                }
                fleet.release(unknown)
                // A full claim: more may be due, claim again on the next tick. Otherwise after a
                // poll, jittered: nodes' claims fall at random phases, so the work due spreads
                // over them instead of going to whichever polls first after each due time.
                lastClaimFull = claimed.count >= free && unknown.isEmpty
                nextClaimAt = lastClaimFull ? .now : .now.adding(poll * Double.random(in: 0.5...1.5))
                // Scans given back are due again at once: not claimed again before the poll.
                dueWorkLeft = result.dueLeft && unknown.isEmpty
                // Scans that completed while this claim ran have released their leases by now.
                if dueWorkLeft && completedSinceClaim { scheduler.launchDueTargets() }
            case .failure(let error) where (error as? StoreError)?.kind != .unavailable:
                // PostgreSQL answered with an error (a timeout, a deadlock): not an outage; the
                // others go on claiming, so this node must not scan a share of its own.
                scheduler.logger.error("cannot claim scans: \(error); trying again after a poll")
                dueWorkLeft = false
                nextClaimAt = .now.adding(poll)
            case .failure(let error):
                fleetReachable = false
                dueWorkLeft = false
                beginOutage()
                scheduler.logger.error("cannot claim scans: \(error); scanning this node's share (\(outageShare.count) of \(scheduler.targetCount) targets) until PostgreSQL answers")
                nextClaimAt = .now.adding(poll)
            }
        }
    }

    /// The work row a target has for this node: `*` (any vantage), this node's vantage, or none.
    private func rowVantage(_ target: TargetConfiguration) -> String? {
        switch target.vantages {
        case .any: return FleetVantages.anyRow
        case .all: return node.vantage
        case .list(let names): return names.contains(node.vantage) ? node.vantage : nil
        }
    }

    /// PostgreSQL stopped answering: every node splits the targets the same way, from the same
    /// view of the live nodes (rendezvous hashing: each row goes to the live node, of its vantage
    /// for a vantage row, with the highest hash of target and node name), so each target is
    /// scanned by one node. A row due already counts as just scanned (some node may have it in
    /// flight): due again after its interval.
    private func beginOutage() {
        guard let scheduler else { return }
        let me = FleetView.Node(name: node.name, vantage: node.vantage)
        let nodes = liveNodes.contains(me) ? liveNodes : liveNodes + [me]
        let now = SchedulerTime.now
        outageShare = [:]
        for key in scheduler.targetKeys {
            guard let (target, schedule) = scheduler.target(key), let vantage = rowVantage(target) else { continue }
            let candidates = vantage == FleetVantages.anyRow ? nodes : nodes.filter { $0.vantage == vantage }
            let owner = candidates.max { StableHash.fnv1a(key + "\u{0}" + $0.name) < StableHash.fnv1a(key + "\u{0}" + $1.name) }
            guard owner?.name == node.name else { continue }
            outageShare[key] = FleetClaim(target: key, vantage: vantage, consecutiveFailures: schedule.consecutiveFailures)
            let due = fleetDue[FleetRowKey(target: key, vantage: vantage)] ?? now
            scheduler.setNextDue(key, due > now ? due : now.adding(target.interval))
        }
        outage.schedule(Set(outageShare.keys))
    }

    func finishing(_ key: String, scans: inout [StoredScan]) -> Int? {
        finishingClaim = claims.removeValue(forKey: key)
        // The claim's token goes with each result: PostgreSQL refuses the write once it is lost.
        if let fence = finishingClaim?.fence { for index in scans.indices { scans[index].fence = fence } }
        // The failures in a row are the fleet's (whichever node saw them).
        return finishingClaim?.consecutiveFailures
    }

    func finished(_ key: String, schedule: TargetSchedule?) {
        let claim = finishingClaim
        finishingClaim = nil
        defer { if claim?.epoch != nil { claimAgainAfterCompletion() } }
        let endedAt = ProcessInfo.processInfo.systemUptime
        guard let schedule else { // removed by a reload meanwhile
            if let claim { fleet.completed(FleetCompletion(claim: claim, consecutiveFailures: 0, delay: 0, endedAt: endedAt)) }
            return
        }
        if outageShare[key] != nil { outage.finished(key, schedule: schedule) }
        if var claim {
            fleet.completed(FleetCompletion(claim: claim, consecutiveFailures: schedule.consecutiveFailures,
                                            delay: schedule.nextDue.interval(since: .now), endedAt: endedAt))
            claim.consecutiveFailures = schedule.consecutiveFailures
            if outageShare[key] != nil { outageShare[key] = claim }
        }
    }

    /// A scan under a claim completed; its completion is queued before any claim, so its lease
    /// is released first. Claims again at once when the last claim left due work behind.
    private func claimAgainAfterCompletion() {
        guard let scheduler, fleetReachable, !scheduler.stopping else { return }
        completedSinceClaim = true
        launchDue(now: .now)
    }

    /// What the last heartbeat saw of the fleet.
    func see(_ view: FleetView) {
        scheduler?.callbackQueue.async { [self] in
            let now = SchedulerTime.now
            for (key, due) in view.dueIn { fleetDue[key] = now.adding(due) }
            liveNodes = view.live
        }
    }

    /// What the fleet heartbeat reports: the claims in flight (their leases are renewed), scans
    /// per minute over the last minute, and scans completed since the start.
    func heartbeat(configurationVersion: Int64?) -> FleetHeartbeat {
        guard let scheduler else {
            return FleetHeartbeat(configurationVersion: nil, inFlight: [], scansPerMinute: 0, scansTotal: 0, poll: 1, lease: 1)
        }
        return scheduler.callbackQueue.sync {
            let completions = scheduler.completions
            return FleetHeartbeat(configurationVersion: configurationVersion, inFlight: Array(claims.values),
                                  scansPerMinute: Double(completions.lastMinute), scansTotal: completions.total,
                                  poll: scheduler.configuration.fleet.poll, lease: scheduler.configuration.fleet.lease)
        }
    }
}
