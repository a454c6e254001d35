import Foundation
import Synchronization
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditStore
import TLSAuditStoreConformance

/// The fleet's work queue on a real PostgreSQL: claims, leases, the fleet-wide per-host cap, shared
/// backoff and vantage rows, with many nodes claiming at once.
@Suite("fleet work queue on PostgreSQL", .serialized)
struct FleetQueueTests {
    /// A fresh database with the schema, and `nodes` fleet handles on it.
    func fleet(nodes: Int, vantage: (Int) -> String = { _ in "default" }) throws -> (url: String, nodes: [PostgresFleet]) {
        let name = "fleet_\(UUID().uuidString.prefix(8).lowercased())"
        try StoreConformance.postgresServer.createDatabase(name)
        let url = StoreConformance.postgresServer.url(database: name)
        _ = try PostgresScanStore(url: url, sha256: Digest.sha256Hex)
        let settings = try PostgresSettings.parse(url: url)
        return (url, (0..<nodes).map { PostgresFleet(settings, node: "node-\($0)", vantage: vantage($0)) })
    }

    func psql(_ url: String, _ sql: String) throws -> String {
        let database = String(url.split(separator: "/").last!.split(separator: "?").first!)
        return try StoreConformance.postgresServer.psql(sql, database: database).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("six nodes claiming at once: no target leased twice, never more than the per-host cap on a host fleet-wide, every due target claimed")
    func concurrentClaims() throws {
        let (url, nodes) = try fleet(nodes: 6)
        // Two busy hosts with 20 targets each, and 20 hosts with one target each.
        let targets = (0..<20).map { FleetTarget(key: "a-\($0)", host: "a.example", interval: 600, vantages: .any) }
            + (0..<20).map { FleetTarget(key: "b-\($0)", host: "b.example", interval: 600, vantages: .any) }
            + (0..<20).map { FleetTarget(key: "single-\($0)", host: "host-\($0).example", interval: 600, vantages: .any) }
        _ = try nodes[0].apply(document: "targets: []", sha256: "-", targets: targets, appliedBy: "test")
        _ = try psql(url, "UPDATE fleet_work SET next_due = 0") // all due now
        let claimed = Mutex<[FleetClaim]>([])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: nodes.count * 8) { index in
            do {
                let got = try nodes[index % nodes.count].claim(limit: 5, perHostCap: 3, lease: 60).claims
                claimed.withLock { $0 += got }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let all = claimed.withLock { $0 }
        #expect(all.count == Set(all.map(\.target)).count, "a target was claimed twice: \(all.map(\.target).sorted())")
        let perHost = Dictionary(grouping: all, by: { $0.target.split(separator: "-").first! }).mapValues(\.count)
        #expect(perHost["a"] == 3 && perHost["b"] == 3, "the per-host cap of 3 holds fleet-wide: \(perHost)")
        #expect(perHost["single"] == 20, "every single-target host claimed: \(perHost)")
        #expect(try psql(url, "SELECT max(n) FROM (SELECT count(*) AS n FROM fleet_work WHERE lease_until IS NOT NULL GROUP BY host) x") == "3")
    }

    @Test("a claim held back by its host's cap says due work is left; a full claim, or one that leaves only leased rows, says none")
    func dueWorkLeft() throws {
        let (url, nodes) = try fleet(nodes: 1)
        let targets = (0..<5).map { FleetTarget(key: "t-\($0)", host: "one.example", interval: 600, vantages: .any) }
        _ = try nodes[0].apply(document: "targets: []", sha256: "-", targets: targets, appliedBy: "test")
        _ = try psql(url, "UPDATE fleet_work SET next_due = 0")
        let capped = try nodes[0].claim(limit: 10, perHostCap: 2, lease: 60)
        #expect(capped.claims.count == 2 && capped.dueLeft, "\(capped)")
        let atCap = try nodes[0].claim(limit: 10, perHostCap: 2, lease: 60)
        #expect(atCap.claims.isEmpty && atCap.dueLeft, "the host at its cap: nothing claimed, three still due")
        let full = try nodes[0].claim(limit: 1, perHostCap: 5, lease: 60)
        #expect(full.claims.count == 1 && !full.dueLeft, "a full claim does not look further")
        let rest = try nodes[0].claim(limit: 10, perHostCap: 5, lease: 60)
        #expect(rest.claims.count == 2 && !rest.dueLeft, "every due row leased now: \(rest)")
    }

    @Test("a dead node's lease expires and another node claims its scan; shared backoff: the failures one node wrote are what the next claimer gets")
    func leaseExpiryAndSharedBackoff() throws {
        let (url, nodes) = try fleet(nodes: 2)
        _ = try nodes[0].apply(document: "targets: []", sha256: "-",
                               targets: [FleetTarget(key: "t", host: "t.example", interval: 60, vantages: .any)], appliedBy: "test")
        _ = try psql(url, "UPDATE fleet_work SET next_due = 0")
        let first = try nodes[0].claim(limit: 10, perHostCap: 4, lease: 1.5).claims
        #expect(first.map(\.target) == ["t"])
        #expect(try nodes[1].claim(limit: 10, perHostCap: 4, lease: 1.5).claims.isEmpty, "leased: not claimable")
        Thread.sleep(forTimeInterval: 1.7)
        try nodes[0].renew(first, lease: 30) // too late: an expired lease is not revived
        let taken = try nodes[1].claim(limit: 10, perHostCap: 4, lease: 30).claims
        #expect(taken.map(\.target) == ["t"], "the expired lease is taken over")
        // The first node's late completion does not touch the row the second node now holds.
        try nodes[0].complete([FleetCompletion(claim: first[0], consecutiveFailures: 9, delay: 600, endedAt: ProcessInfo.processInfo.systemUptime)])
        #expect(try psql(url, "SELECT lease_owner || ' ' || consecutive_failures FROM fleet_work") == "node-1 0")
        // node-1 saw it unreachable three times in a row: due at once, and the next claimer sees 3.
        try nodes[1].complete([FleetCompletion(claim: taken[0], consecutiveFailures: 3, delay: 0, endedAt: ProcessInfo.processInfo.systemUptime)])
        let next = try nodes[0].claim(limit: 10, perHostCap: 4, lease: 30).claims
        #expect(next.first?.consecutiveFailures == 3, "\(next)")
    }

    @Test("two writers out of order: a claim completed under its lease keeps its result though the next claim's newer result was stored first (history only: the state stays the newer scan's); a claim that lapsed unfinished and was taken over, by a claim or by a scan made while PostgreSQL was down, has its result refused; the last 16 lapsed claims are remembered")
    func completedClaimsKeepTheirResults() throws {
        let (url, nodes) = try fleet(nodes: 2)
        let store = try PostgresScanStore(url: url, sha256: Digest.sha256Hex)
        _ = try nodes[0].apply(document: "-", sha256: "-",
                               targets: [FleetTarget(key: "t", host: "t.example", interval: 60, vantages: .any)], appliedBy: "test")
        let start = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 100).rounded())
        /// A scan of `t` at `seconds` past `start`: a good one, or (`refused`) a refused connection.
        func scan(at seconds: Double, under claim: FleetClaim?, refused: Bool = false) -> StoredScan {
            var result = StoreConformance.samples[refused ? 1 : 0]
            result.startedAt = start.addingTimeInterval(seconds)
            return StoredScan(target: "t", host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result, fence: claim?.fence)
        }
        func claimDue(_ node: PostgresFleet, lease: Double = 30) throws -> FleetClaim {
            _ = try psql(url, "UPDATE fleet_work SET next_due = 0")
            return try #require(try node.claim(limit: 1, perHostCap: 1, lease: lease).claims.first)
        }
        func complete(_ node: PostgresFleet, _ claim: FleetClaim) throws {
            try node.complete([FleetCompletion(claim: claim, consecutiveFailures: 0, delay: 0, endedAt: ProcessInfo.processInfo.systemUptime)])
        }
        let decide = AlertSettings.decision(nil)
        func scansStored() throws -> Int { try store.history(target: "t", limit: 10).map { $0.run?.scans ?? 1 }.reduce(0, +) }
        func state() throws -> (at: Double, status: AddressScanResult.Status)? {
            try store.status(of: "t").first.map { ($0.lastScanAt.timeIntervalSince(start), $0.status) }
        }

        // node-0 scans (the connection refused) and completes; its writer is slow (PostgreSQL just
        // came back). node-1 claims the target due again, scans (a good handshake), and its writer
        // stores first; node-0's result arrives before node-1's completion is written.
        let first = try claimDue(nodes[0])
        try complete(nodes[0], first)
        let second = try claimDue(nodes[1])
        #expect(try store.record([scan(at: 10, under: second)], decide: decide).leaseLost.isEmpty)
        let late = try store.record([scan(at: 0, under: first, refused: true)], decide: decide)
        #expect(late.leaseLost.isEmpty, "a completed claim's result is not refused: \(late.leaseLost.map(\.fence))")
        try complete(nodes[1], second)
        #expect(try scansStored() == 2, "both scans are in the history")
        var now = try state()
        #expect(now?.at == 10 && now?.status == .completed, "the state is the newer scan's, not the late one's: \(String(describing: now))")

        // node-0's claim lapses while its scan is in flight (paused past the lease); node-1 takes the
        // target over and stores a newer scan: node-0's result is refused.
        let lapsed = try claimDue(nodes[0], lease: 0.3)
        Thread.sleep(forTimeInterval: 0.5)
        let takeover = try claimDue(nodes[1])
        #expect(takeover.epoch != lapsed.epoch, "the lapsed lease is taken over")
        #expect(try store.record([scan(at: 30, under: takeover)], decide: decide).leaseLost.isEmpty)
        try complete(nodes[0], lapsed) // too late: the row is node-1's
        #expect(try store.record([scan(at: 20, under: lapsed, refused: true)], decide: decide).leaseLost.count == 1,
                "the lapsed claim's result is refused")
        try complete(nodes[1], takeover)
        #expect(try scansStored() == 3, "the refused result is not stored")

        // node-0's claim lapses while PostgreSQL is down for node-1, which scans the target as its
        // share and writes that scan (no claim) when it answers again: node-0's result is refused.
        let lapsedInOutage = try claimDue(nodes[0], lease: 0.3)
        Thread.sleep(forTimeInterval: 0.5)
        let share = FleetClaim(target: "t", vantage: lapsedInOutage.vantage, consecutiveFailures: 0)
        try complete(nodes[1], share)
        #expect(try store.record([scan(at: 50, under: nil)], decide: decide).leaseLost.isEmpty)
        #expect(try store.record([scan(at: 40, under: lapsedInOutage, refused: true)], decide: decide).leaseLost.count == 1,
                "a claim ended by a scan made without one is lost too")
        now = try state()
        #expect(now?.at == 50 && now?.status == .completed, "\(String(describing: now))")

        // Seventeen claims lapse and are taken over in turn: the newest 16 are remembered.
        var epochs: [Int64] = []
        for index in 0..<17 {
            epochs.append(try #require(try claimDue(nodes[index % 2], lease: 0.05).epoch))
            Thread.sleep(forTimeInterval: 0.1)
        }
        _ = try claimDue(nodes[0])
        #expect(try psql(url, "SELECT array_to_string(lost_epochs, ',') FROM fleet_work")
                == epochs.suffix(16).map(String.init).joined(separator: ","))
    }

    @Test("vantage rows: 'any' is one row, 'all' one per vantage (a new vantage adds its own), a list one per named vantage; a removed target's rows go")
    func vantageRows() throws {
        let (url, nodes) = try fleet(nodes: 2, vantage: { $0 == 0 ? "eu" : "us" })
        for node in nodes {
            try node.heartbeat(FleetHeartbeat(configurationVersion: nil, inFlight: [], scansPerMinute: 0, scansTotal: 0, poll: 1, lease: 5),
                               starting: true, process: "test")
        }
        let targets = [FleetTarget(key: "anywhere", host: "x.example", interval: 60, vantages: .any),
                       FleetTarget(key: "everywhere", host: "y.example", interval: 60, vantages: .all),
                       FleetTarget(key: "asia", host: "z.example", interval: 60, vantages: .list(["ap"])),
                       FleetTarget(key: "gone", host: "z.example", interval: 60, vantages: .any)]
        _ = try nodes[0].apply(document: "-", sha256: "-", targets: targets, appliedBy: "test")
        #expect(try psql(url, "SELECT string_agg(target || '@' || vantage, ' ' ORDER BY target, vantage) FROM fleet_work")
                == "anywhere@* asia@ap everywhere@eu everywhere@us gone@*")
        let apNode = PostgresFleet(try PostgresSettings.parse(url: url), node: "node-ap", vantage: "ap")
        try apNode.ensureRows(forEveryVantageOf: targets)
        _ = try nodes[0].apply(document: "-", sha256: "-", targets: Array(targets.dropLast()), appliedBy: "test")
        #expect(try psql(url, "SELECT string_agg(target || '@' || vantage, ' ' ORDER BY target, vantage) FROM fleet_work")
                == "anywhere@* asia@ap everywhere@ap everywhere@eu everywhere@us")
        #expect(try nodes[0].latestConfiguration()?.version == 2)
    }

    @Test("two nodes starting together on an empty fleet: one first configuration, not two; applying again keeps each target's backoff unless its interval got shorter")
    func firstVersionAndBackoffAcrossApplies() throws {
        let (url, nodes) = try fleet(nodes: 2)
        let targets = [FleetTarget(key: "t", host: "t.example", interval: 60, vantages: .any)]
        let versions = Mutex<[Int64]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            if let version = try? nodes[index].apply(document: "node \(index)", sha256: "-", targets: targets, appliedBy: "node \(index)",
                                                     onlyIfFirst: true) {
                versions.withLock { $0.append(version) }
            }
        }
        #expect(versions.withLock { $0 } == [1, 1], "\(versions.withLock { $0 })")
        #expect(try psql(url, "SELECT count(*) FROM fleet_configuration") == "1")

        _ = try psql(url, "UPDATE fleet_work SET next_due = 0")
        let claim = try #require(try nodes[0].claim(limit: 1, perHostCap: 1, lease: 30).claims.first)
        // Unreachable four times in a row: backed off for ten minutes.
        try nodes[0].complete([FleetCompletion(claim: claim, consecutiveFailures: 4, delay: 600, endedAt: ProcessInfo.processInfo.systemUptime)])
        _ = try nodes[1].apply(document: "again", sha256: "-", targets: targets, appliedBy: "test")
        #expect(try psql(url, "SELECT next_due - extract(epoch FROM now()) > 500 FROM fleet_work") == "t", "the backoff survives an apply")
        _ = try nodes[1].apply(document: "shorter", sha256: "-",
                               targets: [FleetTarget(key: "t", host: "t.example", interval: 30, vantages: .any)], appliedBy: "test")
        #expect(try psql(url, "SELECT next_due - extract(epoch FROM now()) < 31 FROM fleet_work") == "t", "a shorter interval brings it forward")
    }
}
