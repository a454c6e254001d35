import Foundation
import GRDB
import Testing
import TLSAuditProbe
import TLSAuditStore
import TLSAuditStoreConformance
@testable import TLSAuditSQLite
import TLSAuditProcess

/// What only the SQLite backend has: the schema snapshot new files are made from, its migration
/// names, its file's growth, a million rows streamed, its fencing order. (Every backend's common
/// behaviour: `StoreConformanceTests` in TLSAuditStoreTests.)
@Suite("SQLite backend")
struct SQLiteBackendTests {
    let suite = StoreConformance.sqlite

    @Test("a fenced scan behind its address's clock (a node whose clock runs behind) replaces the state and lists first in history")
    func fencedScanBehindLeadsHistory() throws {
        let store = try SQLiteScanStore(path: StoreConformance.newSQLitePath(), sha256: Digest.sha256Hex)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        func scan(_ sample: Int, at seconds: Double) -> StoredScan {
            var result = StoreConformance.samples[sample]
            result.startedAt = start.addingTimeInterval(seconds)
            return StoredScan(target: "fenced", host: "conformance.tlsaudit.test", port: 443, sni: nil, result: result)
        }
        _ = try store.record([0.0, 60].map { scan(0, at: $0) }, decide: suite.decide)
        var behind = scan(1, at: 30)
        behind.fence = ScanFence(workTarget: "fenced", workVantage: "", epoch: 2)
        _ = try store.record([behind], decide: suite.decide)
        let history = try store.history(target: "fenced", limit: 10)
        #expect(history.map(\.status) == [.failed, .completed], "\(history.map { ($0.status, $0.startedAt.timeIntervalSince(start)) })")
        #expect(try store.status().first?.lastObservationID == history.first?.observationID)
        // The next scan follows it (a fenced scan's state carries no run key: the next one opens its own).
        _ = try store.record([scan(1, at: 90)], decide: suite.decide)
        let after = try store.history(target: "fenced", limit: 10)
        #expect(after.map { $0.startedAt.timeIntervalSince(start) } == [90, 30, 0], "\(after.map { $0.startedAt.timeIntervalSince(start) })")
    }

    @Test("a new database is made from the schema snapshot: the schema and migrations the migrations make, and the snapshot is current")
    func schemaSnapshot() throws {
        let migrated = try SQLiteSchemaSnapshot.migrated()
        #expect(SQLiteSchemaSnapshot.migrations == migrated.migrations && SQLiteSchemaSnapshot.statements == migrated.statements,
                "SQLiteSchemaSnapshot.swift is not what the migrations make: swift run tlsaudit-bench schema-snapshot > Sources/TLSAuditSQLite/SQLiteSchemaSnapshot.swift")
        let path = StoreConformance.newSQLitePath()
        let store = try SQLiteScanStore(path: path, sha256: Digest.sha256Hex)
        #expect(try store.appliedMigrations() == migrated.migrations)
        let made = try DatabaseQueue(path: path).read(SQLiteSchemaSnapshot.schema(of:))
        #expect(made.statements == migrated.statements, "the schema of a new database is the migrations' schema")
        // Opened again, nothing is made twice (a database with tables is migrated, and here is up to
        // date), and no write lock is taken: it opens while another connection holds one.
        // (Another process holds it: GRDB leaves no transaction open between accesses.)
        let holder = ChildProcess()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = ["python3", "-c", """
            import sqlite3, sys, time
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            time.sleep(4)
            """, path]
        let pipe = Pipe()
        holder.standardOutput = pipe
        try holder.run()
        defer { holder.terminate(); holder.waitUntilExit() }
        #expect(String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self).contains("locked"))
        let opened = Date()
        _ = try SQLiteScanStore(path: path, busyTimeout: 2, sha256: Digest.sha256Hex)
        #expect(Date().timeIntervalSince(opened) < 1.5, "waited for the write lock")
        #expect(try DatabaseQueue(path: path).read(SQLiteSchemaSnapshot.schema(of:)).statements == migrated.statements)
    }

    @Test("runs: an unchanged scan extends its address's run and adds a few bytes; reports count every scan")
    func unchangedScans() throws {
        _ = try suite.unchangedScans { path in
            try DatabaseQueue(path: path).writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                return try Int.fetchOne(db, sql: "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()") ?? 0
            }
        }
    }

    @Test("migrations: a new store has every named migration, in order")
    func migrations() throws {
        let store = try SQLiteScanStore(path: try suite.newLocation(), sha256: Digest.sha256Hex)
        #expect(try store.appliedMigrations() == ["v1-initial", "v2-pin-state", "v3-alerts", "v4-reports", "v5-pin-counts", "v6-revocation", "v7-fleet", "v8-inventory", "v9-vulnerabilities", "v10-fencing", "v11-anchor-in", "v12-tags-app", "v13-report-claim", "v14-runs", "v15-clients", "v16-alert-target", "v17-judged-with", "v18-node-server", "v19-observation-order", "v20-check-reports", "v21-ct-logs", "v22-ct-sightings", "v23-ct-log-lease", "v24-lost-leases"])
    }

    @Test("streaming: a million observations read one at a time, in bounded memory")
    func streaming() throws {
        try suite.streaming(rows: 1_000_000) { path in
            // A million rows straight into the schema (recording them one by one would take minutes).
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(sql: """
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
                    INSERT INTO observation (target, host, port, address, family, started_at, duration_ms, status, policy)
                    SELECT 'bulk-' || (i % 1000), 'bulk.test', 443, '10.0.' || (i % 250) || '.1', 'ipv4', 1800000000 + i, 3,
                        'completed', 'ats-runtime' FROM n
                    """)
            }
        }
    }
}
