import Foundation
import Synchronization
public import TLSAuditModel
public import TLSAuditStore

/// The fleet's coordination on PostgreSQL: the configuration's versions, the nodes' heartbeats
/// and the work queue. No coordinator process: due scans are claimed with `FOR UPDATE SKIP
/// LOCKED` under a lease, the per-host cap holds fleet-wide because a claim locks the host's row
/// first, and a dead node's leases simply expire. Times are the server's clock.
public final class PostgresFleet: Sendable {
    /// The channel `fleet apply` notifies with the new version's number.
    static let configurationChannel = "tlsaudit_configuration"
    /// The advisory lock `fleet apply` holds: versions are numbered and synced one at a time.
    static let applyLockKey: Int64 = 0x746C_7361_6170_706C // "tlsappl"

    public let node: String
    public let vantage: String
    private let pool: PostgresPool
    private let settings: PostgresSettings
    /// The connection that LISTENs (opened on first wait, again after it broke).
    private let listener = Mutex<PostgresConnectionBox?>(nil)

    /// Connects (the schema must be current: open the store first, which migrates it).
    public init(_ settings: PostgresSettings, node: String, vantage: String) {
        var own = settings
        own.poolSize = 3 // claims and completions, heartbeats, configuration checks: each its own
        self.settings = own
        self.node = node
        self.vantage = vantage
        pool = PostgresPool(own)
    }

    // MARK: - Configuration

    /// Stores `document` as the fleet's next configuration version and brings the work queue in
    /// line with `targets` in the same transaction; nodes are notified. Returns the version.
    /// `onlyIfFirst`: store it only when the fleet has no version yet (a node's first start: two
    /// nodes starting together must not both make theirs the fleet's); else return the newest.
    public func apply(document: String, sha256: String, targets: [FleetTarget], appliedBy: String,
                      onlyIfFirst: Bool = false) throws -> Int64 {
        try pool.withConnection { connection in
            try connection.transaction {
                try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int(Self.applyLockKey)])
                if onlyIfFirst, let newest = try connection.execute("SELECT max(version) AS version FROM fleet_configuration")
                    .int(0, "version") {
                    return newest
                }
                let inserted = try connection.execute("""
                    INSERT INTO fleet_configuration (applied_at, applied_by, document, sha256)
                    VALUES (extract(epoch FROM now()), $1, $2, $3) RETURNING version
                    """, [.text(appliedBy), .text(document), .text(sha256)])
                guard let version = inserted.int(0, "version") else { throw StoreError(.other, "the new version has no number") }
                try Self.sync(targets, on: connection)
                try connection.execute("SELECT pg_notify($1, $2)", [.text(Self.configurationChannel), .text(String(version))])
                return version
            }
        }
    }

    /// The work queue made to match `targets`: rows of removed targets (and of vantages a target
    /// no longer has) deleted, new ones added with their first run spread over the next
    /// `min(interval, 10 s)`, intervals updated (a shorter one brings the next run forward; an
    /// unchanged one keeps each row's due time, backoff included).
    private static func sync(_ targets: [FleetTarget], on connection: PostgresConnection) throws {
        var rows: (target: [String], vantage: [String], host: [String], interval: [Double], offset: [Double]) = ([], [], [], [], [])
        for target in targets {
            let vantages: [String] = switch target.vantages {
            case .any: [FleetVantages.anyRow]
            case .list(let names): names
            case .all: [] // one row per vantage a node announced: below
            }
            for vantage in vantages {
                rows.target.append(target.key)
                rows.vantage.append(vantage)
                rows.host.append(target.host)
                rows.interval.append(target.interval)
                rows.offset.append(min(target.interval, 10) * Double(StableHash.fnv1a(target.key) % 10_000) / 10_000)
            }
        }
        let every = targets.filter { $0.vantages == .all }
        try insertHosts(of: targets, on: connection)
        let desired = """
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[], $5::float8[])
                AS d(target, vantage, host, scan_interval, first_offset)
            """
        let parameters: [PostgresValue?] = [.texts(rows.target), .texts(rows.vantage), .texts(rows.host),
                                            .doubles(rows.interval), .doubles(rows.offset)]
        try connection.execute("""
            WITH desired AS (\(desired))
            DELETE FROM fleet_work w
            WHERE NOT EXISTS (SELECT 1 FROM desired d WHERE d.target = w.target AND d.vantage = w.vantage)
              AND NOT (w.target = ANY($6::text[]) AND w.vantage <> '*')
            """, parameters + [.texts(every.map(\.key))])
        try connection.execute("""
            WITH desired AS (\(desired))
            INSERT INTO fleet_work (target, vantage, host, scan_interval, next_due)
            SELECT target, vantage, host, scan_interval, extract(epoch FROM now()) + first_offset FROM desired
            ON CONFLICT (target, vantage) DO UPDATE SET host = EXCLUDED.host, scan_interval = EXCLUDED.scan_interval,
                updated_at = extract(epoch FROM clock_timestamp()),
                next_due = CASE WHEN EXCLUDED.scan_interval < fleet_work.scan_interval
                    THEN LEAST(fleet_work.next_due, coalesce(fleet_work.last_done_at, EXCLUDED.next_due) + EXCLUDED.scan_interval)
                    ELSE fleet_work.next_due END
            """, parameters)
        // Targets scanned from every vantage: a row for each vantage a node has announced (a node
        // of a new vantage adds its own rows when it starts: `ensureRows`).
        try insertEveryVantageRows(every, vantages: nil, on: connection)
    }

    /// The host rows claims lock (one per host; kept when a host's last target goes).
    private static func insertHosts(of targets: [FleetTarget], on connection: PostgresConnection) throws {
        try connection.execute("INSERT INTO fleet_host (host) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING",
                               [.texts(Array(Set(targets.map(\.host))))])
    }

    private static func insertEveryVantageRows(_ targets: [FleetTarget], vantages: String?, on connection: PostgresConnection) throws {
        guard !targets.isEmpty else { return }
        try connection.execute("""
            INSERT INTO fleet_work (target, vantage, host, scan_interval, next_due)
            SELECT t.target, n.vantage, t.host, t.scan_interval, extract(epoch FROM now())
            FROM unnest($1::text[], $2::text[], $3::float8[]) AS t(target, host, scan_interval)
            CROSS JOIN (SELECT DISTINCT vantage FROM fleet_node WHERE $4::text IS NULL OR vantage = $4::text
                        UNION SELECT $4::text WHERE $4::text IS NOT NULL) AS n
            ON CONFLICT (target, vantage) DO UPDATE SET host = EXCLUDED.host, scan_interval = EXCLUDED.scan_interval
            """, [.texts(targets.map(\.key)), .texts(targets.map(\.host)), .doubles(targets.map(\.interval)), vantages.map { .text($0) }])
    }

    /// Rows for this node's vantage of the targets scanned from every vantage (a node of a
    /// vantage the fleet did not have yet adds them when it picks a configuration up).
    public func ensureRows(forEveryVantageOf targets: [FleetTarget]) throws {
        let every = targets.filter { $0.vantages == .all }
        guard !every.isEmpty else { return }
        try pool.withConnection { connection in
            try connection.transaction {
                try Self.insertHosts(of: every, on: connection)
                try Self.insertEveryVantageRows(every, vantages: vantage, on: connection)
            }
        }
    }

    /// The newest configuration version, nil before the first `fleet apply`.
    public func latestConfiguration() throws -> FleetConfigurationVersion? {
        try pool.withConnection { connection in
            let rows = try connection.execute("""
                SELECT version, applied_at, applied_by, document, sha256 FROM fleet_configuration ORDER BY version DESC LIMIT 1
                """)
            guard rows.count == 1, let version = rows.int(0, "version") else { return nil }
            return FleetConfigurationVersion(version: version, appliedAt: Date(timeIntervalSince1970: rows.double(0, "applied_at") ?? 0),
                                             appliedBy: rows.text(0, "applied_by") ?? "", document: rows.text(0, "document") ?? "",
                                             sha256: rows.text(0, "sha256") ?? "")
        }
    }

    /// The newest version's number (cheap: what polling asks).
    public func latestVersion() throws -> Int64? {
        try pool.withConnection { try $0.execute("SELECT max(version) AS version FROM fleet_configuration").int(0, "version") }
    }

    /// Waits up to `timeout` seconds for `fleet apply` to announce a version (LISTEN/NOTIFY).
    /// Returns true when one was announced; false after the timeout or when the listening
    /// connection broke (callers poll `latestVersion` either way, so nothing is missed).
    public func waitForConfiguration(timeout: Double) -> Bool {
        do {
            let connection = try listener.withLock { box throws -> PostgresConnection in
                if let box, box.connection.isUsable { return box.connection }
                let connection = try PostgresConnection(settings)
                try connection.execute("LISTEN \(Self.configurationChannel)")
                box = PostgresConnectionBox(connection: connection)
                return connection
            }
            return try !connection.notifications(waitingUpTo: timeout).isEmpty
        } catch {
            listener.withLock { $0 = nil }
            Thread.sleep(forTimeInterval: max(0, min(timeout, 1)))
            return false
        }
    }

    // MARK: - Nodes

    /// Says this node is alive (creating its row on the first call; `starting` resets its start
    /// time), with what it runs and how busy it is. The row belongs to this process (`instance`):
    /// at the start it is taken over only when its holder is lost (no heartbeat for three polls
    /// plus its lease), was this host's process that is gone now (a restart after a crash), or
    /// `replacing` is set; otherwise, and whenever another process has taken the name since,
    /// it throws `FleetNameConflict` and nothing is written.
    public func heartbeat(_ beat: FleetHeartbeat, starting: Bool = false, replacing: Bool = false, process: String) throws {
        try pool.withConnection { connection in
            try connection.transaction {
                // One name at a time: two processes starting under it together do not both take it.
                try connection.execute("SELECT pg_advisory_xact_lock(hashtext('tlsaudit node ' || $1))", [.text(node)])
                let holder = try connection.execute("""
                    SELECT instance, host, process, started_at, extract(epoch FROM now()) - heartbeat_at AS age, poll, lease
                    FROM fleet_node WHERE name = $1 FOR UPDATE
                    """, [.text(node)])
                if holder.count > 0, holder.text(0, "instance") != instance {
                    let conflict = FleetNameConflict(
                        name: node, host: holder.text(0, "host"), process: holder.text(0, "process"),
                        startedAt: Date(timeIntervalSince1970: holder.double(0, "started_at") ?? 0),
                        heartbeatAge: holder.double(0, "age") ?? 0, duringStart: starting)
                    let lost = FleetNodeStatus.isLost(heartbeatAge: conflict.heartbeatAge, poll: holder.double(0, "poll") ?? 0,
                                                      lease: holder.double(0, "lease") ?? 0)
                    // A row an older tlsaudit wrote names no host: its process is looked for here (a rolling upgrade).
                    let sameHost = conflict.host == Self.hostName || holder.text(0, "instance") == nil
                    let goneFromThisHost = sameHost && conflict.process.flatMap(Self.processIsGone) == true
                    guard starting, replacing || lost || goneFromThisHost else {
                        throw conflict
                    }
                }
                try connection.execute("""
                    INSERT INTO fleet_node (name, vantage, configuration_version, started_at, heartbeat_at, in_flight,
                        scans_per_minute, scans_total, process, poll, lease, instance, host, database_server)
                    VALUES ($1, $2, $3, extract(epoch FROM now()), extract(epoch FROM now()), $4, $5, $6, $7, $9, $10, $11, $12, $13)
                    ON CONFLICT (name) DO UPDATE SET vantage = EXCLUDED.vantage, poll = EXCLUDED.poll, lease = EXCLUDED.lease,
                        configuration_version = EXCLUDED.configuration_version, heartbeat_at = EXCLUDED.heartbeat_at,
                        in_flight = EXCLUDED.in_flight, scans_per_minute = EXCLUDED.scans_per_minute,
                        scans_total = EXCLUDED.scans_total, process = EXCLUDED.process,
                        instance = EXCLUDED.instance, host = EXCLUDED.host, database_server = EXCLUDED.database_server,
                        started_at = CASE WHEN $8 THEN EXCLUDED.started_at ELSE fleet_node.started_at END
                    """, [.text(node), .text(vantage), beat.configurationVersion.map { .int($0) }, .int(Int64(beat.inFlight.count)),
                          .double(beat.scansPerMinute), .int(beat.scansTotal), .text(process), .bool(starting),
                          .double(beat.poll), .double(beat.lease), .text(instance), .text(Self.hostName), .text(connection.server)])
            }
        }
    }

    /// This process's claim on its node name (a new one each start).
    public let instance = UUID().uuidString

    /// How many of a work row's lapsed claims (`lost_epochs`) are remembered: a claim that lapsed
    /// so many takeovers ago has its late result stored by its time, as an expired claim's is.
    static let lostEpochsKept = 16

    /// `lost_epochs` with the row's claim of the moment (`w.lease_epoch`, lapsed) added, the
    /// newest `lostEpochsKept` kept.
    static let lostEpochsWithLapsedClaim =
        "(w.lost_epochs || w.lease_epoch)[greatest(1, cardinality(w.lost_epochs) - \(lostEpochsKept - 2)):]"

    /// This machine's name, as `fleet status` and a refused twin show it.
    static let hostName: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map(UInt8.init(bitPattern:)), as: UTF8.self)
    }()

    /// Whether the process a `process` column names ("pid N") no longer runs on this host. Our
    /// own pid there is an earlier run's (a container restarted: pid 1 again), not ours: the
    /// row's instance is another.
    static func processIsGone(_ process: String) -> Bool? {
        guard process.hasPrefix("pid "), let pid = Int32(process.dropFirst(4)) else { return nil }
        return pid == getpid() || kill(pid, 0) != 0 && errno == ESRCH
    }

    /// The nodes alive now (a heartbeat within three of their polls) and the work rows changed
    /// since `since` (server time; 0 for all of them).
    public func view(changedSince since: Double) throws -> FleetView {
        try pool.withConnection { connection in
            let nodes = try connection.execute("""
                SELECT name, vantage FROM fleet_node WHERE heartbeat_at >= extract(epoch FROM now()) - 3 * poll
                """)
            let rows = try connection.execute("""
                SELECT target, vantage, next_due - extract(epoch FROM now()) AS due_in, extract(epoch FROM now()) AS server_time
                FROM fleet_work WHERE updated_at >= $1
                """, [.double(since > 0 ? since - 5 : 0)]) // a few seconds again: a write committed late is not missed
            var dueIn: [FleetRowKey: Double] = [:]
            for row in 0..<rows.count {
                dueIn[FleetRowKey(target: rows.text(row, "target") ?? "", vantage: rows.text(row, "vantage") ?? "")] = rows.double(row, "due_in")
            }
            let time = rows.count > 0 ? rows.double(0, "server_time")
                : try connection.execute("SELECT extract(epoch FROM now()) AS now").double(0, "now")
            return FleetView(live: (0..<nodes.count).map { FleetView.Node(name: nodes.text($0, "name") ?? "", vantage: nodes.text($0, "vantage") ?? "") },
                             dueIn: dueIn, serverTime: time ?? since)
        }
    }

    /// Every node that ever announced itself, by name.
    public func nodes() throws -> [FleetNodeStatus] {
        try pool.withConnection { connection in
            let rows = try connection.execute("""
                SELECT name, vantage, configuration_version, started_at, heartbeat_at,
                       extract(epoch FROM now()) - heartbeat_at AS age, in_flight, scans_per_minute, scans_total, process, poll, lease,
                       database_server
                FROM fleet_node ORDER BY name COLLATE "C"
                """)
            return (0..<rows.count).map { row in
                FleetNodeStatus(name: rows.text(row, "name") ?? "", vantage: rows.text(row, "vantage") ?? "",
                                configurationVersion: rows.int(row, "configuration_version"),
                                startedAt: Date(timeIntervalSince1970: rows.double(row, "started_at") ?? 0),
                                heartbeatAt: Date(timeIntervalSince1970: rows.double(row, "heartbeat_at") ?? 0),
                                heartbeatAge: rows.double(row, "age") ?? 0, inFlight: Int(rows.int(row, "in_flight") ?? 0),
                                scansPerMinute: rows.double(row, "scans_per_minute") ?? 0, scansTotal: rows.int(row, "scans_total") ?? 0,
                                process: rows.text(row, "process"), poll: rows.double(row, "poll") ?? 0,
                                lease: rows.double(row, "lease") ?? 0, databaseServer: rows.text(row, "database_server"))
            }
        }
    }

    /// The work queue at a glance: scans known, leased now, due and waiting (and the longest wait).
    public func workSummary() throws -> FleetWorkSummary {
        try pool.withConnection { connection in
            let rows = try connection.execute("""
                SELECT count(*) AS total,
                       count(*) FILTER (WHERE lease_until >= extract(epoch FROM now())) AS leased,
                       count(*) FILTER (WHERE next_due <= extract(epoch FROM now())
                                        AND (lease_until IS NULL OR lease_until < extract(epoch FROM now()))) AS waiting,
                       coalesce(max(extract(epoch FROM now()) - next_due) FILTER (WHERE next_due <= extract(epoch FROM now())
                                        AND (lease_until IS NULL OR lease_until < extract(epoch FROM now()))), 0) AS longest_wait
                FROM fleet_work
                """)
            return FleetWorkSummary(scans: Int(rows.int(0, "total") ?? 0), leased: Int(rows.int(0, "leased") ?? 0),
                                    waiting: Int(rows.int(0, "waiting") ?? 0), longestWait: rows.double(0, "longest_wait") ?? 0)
        }
    }

    // MARK: - Work

    /// Throws unless PostgreSQL answers.
    public func ping() throws {
        _ = try pool.withConnection { try $0.execute("SELECT 1") }
    }

    /// Claims up to `limit` due scans for this node's vantage under a lease of `lease` seconds,
    /// keeping at most `perHostCap` leases per host fleet-wide. The hosts of the longest-due work
    /// (four times `limit` rows of hosts below their cap, by the due-time index: a host at its cap
    /// does not hold the others back, and the cost does not grow with the backlog) are locked
    /// first (`FOR UPDATE SKIP LOCKED`: a host another node is claiming right now is skipped, not
    /// waited for; a host at its cap is not picked); the leases are counted again after the locks
    /// are held, in a new snapshot, so no concurrent claim can push a host past its cap. A row
    /// still held under a lapsed lease (its scan never completed) is taken over, and the lapsed
    /// claim's epoch is remembered as lost: its result is refused once a newer one is stored.
    /// A claim of fewer than `limit` also says whether due work stayed unclaimed (`dueLeft`: held
    /// back by its host's cap, or by another node's claim of the moment).
    public func claim(limit: Int, perHostCap: Int, lease: Double) throws -> FleetClaims {
        guard limit > 0 else { return FleetClaims(claims: [], dueLeft: false) }
        return try pool.withConnection { connection in
            try connection.transaction {
                let claims = try Self.claim(limit: limit, perHostCap: perHostCap, lease: lease, node: node, vantage: vantage,
                                            on: connection)
                guard claims.count < limit else { return FleetClaims(claims: claims, dueLeft: false) }
                // This transaction's own new leases count: only rows still unleased are left.
                let left = try connection.execute("""
                    SELECT EXISTS (SELECT 1 FROM fleet_work WHERE vantage IN ('*', $1) AND next_due <= extract(epoch FROM now())
                                   AND (lease_until IS NULL OR lease_until < extract(epoch FROM now()))) AS left
                    """, [.text(vantage)])
                return FleetClaims(claims: claims, dueLeft: left.bool(0, "left") ?? false)
            }
        }
    }

    /// The claim's two statements (in the caller's transaction).
    private static func claim(limit: Int, perHostCap: Int, lease: Double, node: String, vantage: String,
                              on connection: PostgresConnection) throws -> [FleetClaim] {
        let hosts = try connection.execute("""
            SELECT h.host FROM fleet_host h
            WHERE h.host IN (SELECT w.host FROM fleet_work w
                             WHERE w.vantage IN ('*', $1) AND w.next_due <= extract(epoch FROM now())
                               AND (w.lease_until IS NULL OR w.lease_until < extract(epoch FROM now()))
                               AND (SELECT count(*) FROM fleet_work l
                                    WHERE l.host = w.host AND l.lease_until >= extract(epoch FROM now())) < $3
                             ORDER BY w.next_due LIMIT $4)
            LIMIT $2 FOR UPDATE OF h SKIP LOCKED
            """, [.text(vantage), .int(Int64(limit)), .int(Int64(perHostCap)), .int(Int64(limit * 4))])
        let locked = (0..<hosts.count).compactMap { hosts.text($0, "host") }
        guard !locked.isEmpty else { return [] }
        let claimed = try connection.execute("""
            WITH free AS (
                SELECT target, vantage, host, next_due FROM fleet_work
                WHERE host = ANY($1::text[]) AND vantage IN ('*', $2) AND next_due <= extract(epoch FROM now())
                  AND (lease_until IS NULL OR lease_until < extract(epoch FROM now()))
                FOR UPDATE SKIP LOCKED
            ), busy AS (
                SELECT host, count(*) AS leased FROM fleet_work
                WHERE host = ANY($1::text[]) AND lease_until >= extract(epoch FROM now()) GROUP BY host
            ), ranked AS (
                SELECT f.target, f.vantage, f.next_due,
                       row_number() OVER (PARTITION BY f.host ORDER BY f.next_due, f.target) + coalesce(b.leased, 0) AS slot
                FROM free f LEFT JOIN busy b ON b.host = f.host
            ), chosen AS (
                SELECT target, vantage FROM ranked WHERE slot <= $3 ORDER BY next_due LIMIT $4
            )
            UPDATE fleet_work w SET lease_owner = $5, lease_until = extract(epoch FROM now()) + $6, lease_epoch = nextval('fleet_lease_epoch'),
                lost_epochs = CASE WHEN w.lease_owner IS NULL THEN w.lost_epochs ELSE \(Self.lostEpochsWithLapsedClaim) END
            FROM chosen WHERE w.target = chosen.target AND w.vantage = chosen.vantage
            RETURNING w.target, w.vantage, w.consecutive_failures, w.lease_epoch
            """, [.texts(locked), .text(vantage), .int(Int64(perHostCap)), .int(Int64(limit)), .text(node), .double(lease)])
        return (0..<claimed.count).map { row in
            FleetClaim(target: claimed.text(row, "target") ?? "", vantage: claimed.text(row, "vantage") ?? "",
                       consecutiveFailures: Int(claimed.int(row, "consecutive_failures") ?? 0),
                       epoch: claimed.int(row, "lease_epoch") ?? 0)
        }
    }

    /// Writes finished scans back: lease released, failures in a row (the fleet's shared backoff)
    /// and the next due time. A row claimed again since this node's claim (its lease epoch moved
    /// on: this node was paused past its lease) is left to its new holder; a scan made without a
    /// claim (PostgreSQL was down) is written only while nobody holds the row, after the claims'
    /// completions (an outage may have queued both for one row, the claim's first). Such a scan
    /// that ends another node's lapsed lease records that claim as lost, as a claim taking it
    /// over would.
    public func complete(_ completions: [FleetCompletion]) throws {
        guard !completions.isEmpty else { return }
        let now = ProcessInfo.processInfo.systemUptime
        // The last completion of each row (an outage may have queued several), of claims and of
        // scans without a claim apart: one statement each.
        var claimed: [FleetRowKey: FleetCompletion] = [:]
        var unclaimed: [FleetRowKey: FleetCompletion] = [:]
        for completion in completions {
            let key = FleetRowKey(target: completion.claim.target, vantage: completion.claim.vantage)
            if completion.claim.epoch == nil { unclaimed[key] = completion } else { claimed[key] = completion }
        }
        _ = try pool.withConnection { connection in
            for rows in [Array(claimed.values), Array(unclaimed.values)] where !rows.isEmpty {
                // Written late (PostgreSQL was down): the delay counts from the scan's end.
                let ages = rows.map { max(0, now - $0.endedAt) }
                // The rows are locked in key order first: two nodes writing overlapping rows after
                // an outage lock them in one order.
                try connection.execute(prepared: """
                    WITH done AS (
                        SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::float8[], $5::float8[], $6::bigint[])
                            AS u(target, vantage, failures, delay, age, epoch)
                    ), locked AS (
                        SELECT w.target, w.vantage FROM fleet_work w JOIN done d ON d.target = w.target AND d.vantage = w.vantage
                        ORDER BY w.target COLLATE "C", w.vantage COLLATE "C" FOR UPDATE OF w
                    )
                    UPDATE fleet_work w SET lease_owner = NULL, lease_until = NULL, consecutive_failures = d.failures,
                        updated_at = extract(epoch FROM clock_timestamp()),
                        next_due = extract(epoch FROM now()) + d.delay, last_node = $7, last_done_at = extract(epoch FROM now()) - d.age,
                        done_epoch = coalesce(nullif(d.epoch, -1), w.done_epoch),
                        lost_epochs = CASE WHEN d.epoch = -1 AND w.lease_owner <> $7 THEN \(Self.lostEpochsWithLapsedClaim)
                                           ELSE w.lost_epochs END
                    FROM done d
                    WHERE w.target = d.target AND w.vantage = d.vantage AND (w.target, w.vantage) IN (SELECT target, vantage FROM locked)
                      AND CASE WHEN d.epoch <> -1 THEN w.lease_epoch = d.epoch
                               ELSE w.lease_owner IS NULL OR w.lease_until < extract(epoch FROM now()) END
                    """, [.texts(rows.map(\.claim.target)), .texts(rows.map(\.claim.vantage)), .ints(rows.map { Int64($0.consecutiveFailures) }),
                          .doubles(zip(rows, ages).map { $0.delay - $1 }), .doubles(ages), .ints(rows.map { $0.claim.epoch ?? -1 }), .text(node)])
            }
        }
    }

    /// Gives claimed scans back unscanned (a target this node's configuration does not know yet):
    /// due again at once for another node.
    public func release(_ claims: [FleetClaim]) throws {
        guard !claims.isEmpty else { return }
        _ = try pool.withConnection { connection in
            try connection.execute("""
                WITH held AS (\(Self.lockingHeldRows))
                UPDATE fleet_work w SET lease_owner = NULL, lease_until = NULL
                FROM held WHERE w.target = held.target AND w.vantage = held.vantage
                """, [.text(node), .texts(claims.map(\.target)), .texts(claims.map(\.vantage)), .ints(claims.map { $0.epoch ?? -1 })])
        }
    }

    /// Extends the leases of the scans this node has in flight (called with each heartbeat); a
    /// lease that ran out is not revived (another node may hold the row now, and reviving it would
    /// bypass the host lock that keeps the per-host cap).
    public func renew(_ claims: [FleetClaim], lease: Double) throws {
        guard !claims.isEmpty else { return }
        _ = try pool.withConnection { connection in
            try connection.execute("""
                WITH held AS (\(Self.lockingHeldRows))
                UPDATE fleet_work w SET lease_until = extract(epoch FROM now()) + $5
                FROM held WHERE w.target = held.target AND w.vantage = held.vantage AND w.lease_until >= extract(epoch FROM now())
                """, [.text(node), .texts(claims.map(\.target)), .texts(claims.map(\.vantage)), .ints(claims.map { $0.epoch ?? -1 }),
                      .double(lease)])
        }
    }

    /// The work rows this node holds under the claims given as `$2` targets, `$3` vantages and
    /// `$4` epochs (`$1` the node), locked in byte order of their keys: every statement that locks
    /// several work rows (the result writer's fence check, completions, renewals, releases) locks
    /// them in this one order, so two of them never wait on each other in a circle.
    static let lockingHeldRows = """
        SELECT w.target, w.vantage FROM fleet_work w
        JOIN unnest($2::text[], $3::text[], $4::bigint[]) AS c(target, vantage, epoch)
          ON w.target = c.target AND w.vantage = c.vantage AND w.lease_epoch = c.epoch
        WHERE w.lease_owner = $1
        ORDER BY w.target COLLATE "C", w.vantage COLLATE "C" FOR UPDATE OF w
        """
}
