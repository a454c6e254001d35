import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditService
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// Faults below the process: an OS-level loss of what was not synced, a damaged or newer database,
/// a shared-memory file that cannot be written. Each one against the real service.
extension DurabilityTests {
    /// Runs a shell command (mkfs, mount, chattr), failing the test with its output when it fails.
    @discardableResult
    func shell(_ command: String) throws -> String {
        let output = try Binary.run(["-c", command], program: "/bin/sh")
        guard output.status == 0 else { throw HarnessError(message: "\(command) failed: \(output.stdout)\(output.stderr)") }
        return output.stdout
    }

    /// Runs Python's sqlite3 (SQLite's own library, a second process) on `database`.
    @discardableResult
    func python(_ script: String, _ arguments: [String] = []) throws -> String {
        let python = try LabPrerequisite.program(["/usr/bin/python3", "/usr/local/bin/python3"], package: "python3")
        let output = try Binary.run(["-c", script] + arguments, program: python)
        guard output.status == 0 else { throw HarnessError(message: "python failed: \(output.stderr)") }
        return output.stdout
    }

    /// A small ext4 file system of the test's own, mounted from an image in `workspace` with
    /// `options`; returns the mount point and its loop device. The caller unmounts it.
    func loopExt4(_ workspace: URL, size: String, options: String) throws -> (mountPoint: String, device: String, image: String) {
        let image = workspace.appendingPathComponent("ext4.img").path
        let mountPoint = workspace.appendingPathComponent("mnt").path
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try shell("truncate -s \(size) \(image) && mkfs.ext4 -q -F \(image) && mount -o \(options) \(image) \(mountPoint)")
        let device = try shell("basename $(findmnt -n -o SOURCE \(mountPoint))").trimmingCharacters(in: .whitespacesAndNewlines)
        return (mountPoint, device, image)
    }

    @Test("the connection that writes runs synchronous=FULL (GRDB's WAL set-up had set NORMAL after the store's own FULL)")
    func writerSyncsEveryCommit() throws {
        let workspace = try lab.workspace("synchronous")
        let store = try SQLiteScanStore(path: workspace.appendingPathComponent("db.sqlite").path, sha256: Digest.sha256Hex)
        #expect(try store.writerSynchronous() == 2, "PRAGMA synchronous on the writer: 2 is FULL, 1 NORMAL")
    }

    @Test("an OS-level loss of everything not synced (ext4 with errors=remount-ro, trigger_fs_error): every scan logged as stored is there after remounting")
    func fileSystemErrorLosesNothingLogged() throws {
        try LabPrerequisite.root(for: "mounts a loop ext4 file system and triggers an error on it")
        let servers = try (0..<4).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("ext4")
        let (mountPoint, device, image) = try loopExt4(workspace, size: "64M", options: "loop,errors=remount-ro")
        defer { _ = try? shell("umount \(mountPoint) 2>/dev/null || umount --lazy \(mountPoint)") }
        let database = mountPoint + "/db.sqlite"
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: servers), workspace: workspace)
        // Past ext4's 5 s journal commit, so the file's creation is on disk and only unsynced data is at stake.
        service.wait("scans stored for 7 s", timeout: 30) { service.storedScans.count >= 40 && (service.storedScans.last?.startedAt ?? 0) > (service.storedScans.first?.startedAt ?? 0) + 7 }
        try shell("echo 1 > /sys/fs/ext4/\(device)/trigger_fs_error")
        Thread.sleep(forTimeInterval: 1)
        service.signal(SIGKILL)
        _ = service.waitForExit(timeout: 10)
        let logged = service.storedScans.count
        try shell("umount \(mountPoint) && mount -o loop \(image) \(mountPoint)")
        try expectStored(after: nil, service: service, database: database)
        #expect(logged >= 40)
    }

    /// A migrated database with one more migration than this version knows.
    func newerSQLiteDatabase(_ workspace: URL) throws -> String {
        let database = workspace.appendingPathComponent("db.sqlite").path
        do { _ = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex) }
        try python("import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"INSERT INTO grdb_migrations VALUES ('v99-from-the-future')\"); c.commit()",
                   [database])
        return database
    }

    @Test("a SQLite database migrated by a newer tlsaudit: serve exits 2 naming the migration, check-config --test-connection exits 2, nothing is written")
    func newerSQLiteSchema() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let workspace = try lab.workspace("newer-sqlite")
        let database = try newerSQLiteDatabase(workspace)
        let config = try writeConfig(workspace, database: database, servers: [server])
        let service = try ServiceProcess(config: config, workspace: workspace)
        #expect(service.waitForExit(timeout: 20) == 2, "\(service.log.suffix(2000))")
        #expect(!service.lines(containing: "v99-from-the-future").isEmpty)
        #expect(service.storedScans.isEmpty)
        let check = try Binary.run(["check-config", config, "--test-connection"])
        #expect(check.status == 2)
        #expect(check.stderr.contains("v99-from-the-future"), "\(check.stderr)")
        let rows = try python("import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM observation').fetchone()[0])", [database])
        #expect(rows.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
    }

    /// A database with scans, folded into one file (no WAL), then damaged by `damage` (Python, `path` and `page_size` set).
    func damagedDatabase(_ workspace: URL, damage: String) throws -> String {
        let database = workspace.appendingPathComponent("db.sqlite").path
        do {
            let store = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex)
            let server = try lab.goodServer()
            defer { server.stop() }
            let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: lab.rootFile)), judge: AddressAssessment.judge)
            let target = ScanTarget(original: "t", host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname,
                                    connectTo: [ConnectAddress(host: "127.0.0.1")])
            let result = scanner.scan(target).addresses[0]
            let scans = (0..<400).map { index in
                var shifted = result
                shifted.startedAt = result.startedAt.addingTimeInterval(Double(index))
                return StoredScan(target: "t\(index % 40)", host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname, result: shifted)
            }
            _ = try store.record(scans, decide: AlertSettings.decision(nil))
            try store.compact()
        }
        try python("""
            import sqlite3, sys
            path = sys.argv[1]
            connection = sqlite3.connect(path)
            page_size = connection.execute('PRAGMA page_size').fetchone()[0]
            connection.close()
            \(damage)
            """, [database])
        return database
    }

    /// `damagedDatabase`'s damage: every page of index `index` overwritten with a table leaf's
    /// header and garbage (`quick_check` finds the wrong page type).
    static func overwritingPages(of index: String) -> String {
        """
        connection = sqlite3.connect(path)
        pages = [row[0] for row in connection.execute("SELECT pageno FROM dbstat WHERE name = '\(index)'")]
        connection.close()
        assert pages, 'no pages for the index'
        with open(path, 'r+b') as f:
            for page in pages:
                f.seek((page - 1) * page_size)
                f.write(bytes([0x0d]) + bytes(range(256)) * (page_size // 256 - 1) + bytes(255))
        """
    }

    @Test("page 1 damaged: serve refuses at once with the path and what to do (exit 2), not 'cannot open' forever")
    func damagedFirstPage() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let workspace = try lab.workspace("page1")
        let database = try damagedDatabase(workspace, damage: """
            with open(path, 'r+b') as f:
                f.write(b'this is not the SQLite header, it is garbage..' * 2)
            """)
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: [server]), workspace: workspace)
        #expect(service.waitForExit(timeout: 20) == 2, "\(service.log.suffix(2000))")
        #expect(service.lines(containing: "cannot open").count <= 1)
        let refusal = service.lines(containing: database).joined()
        #expect(refusal.contains("damaged"), "\(service.log.suffix(2000))")
        #expect(refusal.contains("restore"))
    }

    @Test("an index page damaged: the start's quick_check refuses the file (exit 2) instead of writing scans into it")
    func damagedIndexPage() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let workspace = try lab.workspace("index-page")
        let database = try damagedDatabase(workspace, damage: Self.overwritingPages(of: "observation_time_status"))
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: [server]), workspace: workspace)
        #expect(service.waitForExit(timeout: 20) == 2, "\(service.log.suffix(2000))")
        #expect(service.storedScans.isEmpty)
        #expect(service.lines(containing: "quick_check").contains { $0.contains(database) }, "\(service.log.suffix(2000))")
    }

    /// A real scan of `server` (or, `refused`, of a port nobody listens on), as `target`, at `time`.
    func keptScan(_ server: LabTLSServer, target: String, at time: Date, refused: Bool = false) throws -> StoredScan {
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: lab.rootFile)), judge: AddressAssessment.judge)
        let port = refused ? try LabPorts.unusedPort() : server.port
        var result = scanner.scan(ScanTarget(original: target, host: ServiceLab.hostname, port: port, sni: ServiceLab.hostname,
                                             connectTo: [ConnectAddress(host: "127.0.0.1")])).addresses[0]
        result.startedAt = time
        return StoredScan(target: target, host: ServiceLab.hostname, port: port, sni: ServiceLab.hostname, result: result)
    }

    /// A spill file as a stopped run leaves it beside `database` (one JSON line per result).
    func writeKept(_ scans: [StoredScan], beside database: String) throws -> String {
        let path = database + ".unstored-1.jsonl"
        var lines = Data()
        for scan in scans { lines += try JSONEncoder().encode(scan) + Data("\n".utf8) }
        try lines.write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("results kept from an earlier run wait for the start's quick_check: a database it finds damaged gets none of them (exit 2, the file stays)")
    func keptResultsWaitForTheCheck() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let workspace = try lab.workspace("kept-check")
        // An index no write of known certificates' scans touches: quick_check finds the damage, a
        // commit of the kept results would not.
        let database = try damagedDatabase(workspace, damage: Self.overwritingPages(of: "certificate_not_after"))
        let now = Date()
        let kept = try writeKept(try (0..<5).map { try keptScan(server, target: "t\($0)", at: now.addingTimeInterval(Double($0))) }, beside: database)
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: [server]), workspace: workspace)
        #expect(service.waitForExit(timeout: 20) == 2, "\(service.log.suffix(2000))")
        #expect(service.lines(containing: "quick_check").contains { $0.contains(database) }, "\(service.log.suffix(2000))")
        #expect(service.lines(containing: "stored the scan results an earlier run could not store").isEmpty,
                "nothing kept is stored into the damaged file")
        #expect(FileManager.default.fileExists(atPath: kept), "the kept results stay in their file for a repaired database")
    }

    @Test("a kept result taken after a clock step back is stored by its time when a later start replays it: the newer state stored since stays")
    func replayedStepBackScanKeepsTheNewerState() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        let workspace = try lab.workspace("kept-step-back")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let newest = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 60).rounded())
        do {
            let store = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex)
            _ = try store.record([try keptScan(server, target: "kept", at: newest)], decide: AlertSettings.decision(nil))
        }
        // Kept by a run whose clock had stepped back, before the newer scan was stored.
        var stepped = try keptScan(server, target: "kept", at: newest.addingTimeInterval(-100), refused: true)
        stepped.afterClockStepBack = true
        _ = try writeKept([stepped], beside: database)
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: [server]), workspace: workspace)
        service.wait("the kept result stored") { !service.lines(containing: "stored the scan results an earlier run could not store").isEmpty }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        let store = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
        let state = try #require(try store.status(of: "kept").first)
        #expect(state.status == .completed && state.lastScanAt == newest, "the newer scan's state: \(state.status) at \(state.lastScanAt)")
        #expect(try store.history(target: "kept", limit: 10).count == 2, "the kept result is in the history")
    }

    @Test("damage found while running: storing stops, results go to the spill file, exit 75; a repaired database stores them at the next start")
    func damageWhileRunning() throws {
        let servers = try (0..<2).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("damage-running")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = try writeConfig(workspace, database: database, servers: servers)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans stored") { service.storedScans.count >= 20 }
        // Paused, the writer's pages are folded into the file and the index every insert touches is
        // overwritten there; the checkpoint also tells the writer its cached pages are stale.
        var damaged = false
        for _ in 0..<20 where !damaged {
            service.signal(SIGSTOP)
            let done = try python("""
                import sqlite3, sys, os
                path = sys.argv[1]
                connection = sqlite3.connect(path, timeout=0.2)
                busy, frames, copied = connection.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone()
                if busy or frames != 0:
                    print('busy'); sys.exit(0)
                page_size = connection.execute('PRAGMA page_size').fetchone()[0]
                # Indexes every batch writes: an unchanged scan adds no observation, but updates its address's state.
                pages = [row[0] for row in connection.execute(
                    "SELECT pageno FROM dbstat WHERE name IN ('observation_time_status', 'sqlite_autoindex_target_state_1')")]
                connection.close()
                with open(path, 'r+b') as f:
                    for page in pages:
                        f.seek((page - 1) * page_size)
                        f.write(os.urandom(page_size))
                print('damaged')
                """, [database])
            damaged = done.contains("damaged")
            service.signal(SIGCONT)
            if !damaged { Thread.sleep(forTimeInterval: 0.2) }
        }
        #expect(damaged, "the checkpoint never found the writer idle")
        service.wait("the damage noticed") { !service.lines(containing: "the database is damaged").isEmpty }
        let storedBefore = service.storedScans.count
        service.wait("results kept in the spill file") { service.lines(containing: "not stored (the database is damaged)").count >= 3 }
        #expect(service.storedScans.count == storedBefore, "nothing is logged as stored into a damaged file")
        #expect(service.process.isRunning)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 75)
        let spills = SpillLocations(base: database).waiting()
        #expect(spills.count == 1)
        let kept = try String(contentsOfFile: try #require(spills.first), encoding: .utf8).split(separator: "\n").count
        #expect(kept >= 3)
        // The stop names the file as this run's, not as one an earlier run left.
        let keptLines = service.lines(containing: "kept for the next start")
        #expect(keptLines.count == 1 && keptLines.first?.contains((spills[0] as NSString).lastPathComponent) == true, "\(keptLines)")
        #expect(service.lines(containing: "kept from an earlier run are still not stored").isEmpty)

        // Repaired (here: the damaged file moved away, a new one made): the next start stores what was kept.
        for suffix in ["", "-wal", "-shm"] { rename(database + suffix, database + ".damaged" + suffix) }
        let restarted = try ServiceProcess(config: config, workspace: workspace)
        restarted.wait("the kept results stored") { !restarted.lines(containing: "stored the scan results an earlier run could not store").isEmpty }
        restarted.signal(SIGTERM)
        #expect(restarted.waitForExit(timeout: 15) == 0)
        _ = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex)
        let stored = try storedScanTimes(database)
        let total = ["t0", "t1"].reduce(0) { $0 + (stored[$1]?.count ?? 0) }
        #expect(total >= kept)
    }

    @Test("an immutable -shm file: a clear error instead of SIGBUS; storing resumes once it is writable")
    func immutableSharedMemory() throws {
        try LabPrerequisite.root(for: "sets the immutable attribute with chattr")
        let servers = try (0..<2).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("shm")
        // chattr needs a file system with attributes: a small ext4 of the test's own.
        let mountPoint = try loopExt4(workspace, size: "32M", options: "loop").mountPoint
        defer { _ = try? shell("chattr -i \(mountPoint)/db.sqlite-shm 2>/dev/null; umount \(mountPoint) 2>/dev/null || umount --lazy \(mountPoint)") }
        let database = mountPoint + "/db.sqlite"
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: servers), workspace: workspace)
        service.wait("scans stored") { service.storedScans.count >= 6 }
        try shell("chattr +i \(database)-shm")
        service.wait("the shared-memory error") { !service.lines(containing: "shared-memory file").isEmpty }
        Thread.sleep(forTimeInterval: 2)
        #expect(service.process.isRunning, "exit status \(service.process.isRunning ? 0 : service.process.terminationStatus)")
        let whileImmutable = service.storedScans.count
        try shell("chattr -i \(database)-shm")
        service.wait("storing to resume", timeout: 30) { service.storedScans.count > whileImmutable + 4 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        try expectNothingLost(service, database: database)
    }
}
