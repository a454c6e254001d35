import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditServiceLab
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// A full disk and a read-only filesystem, for real: the database lives on a small tmpfs that the
/// test fills, remounts read-only, then frees. (Mounting needs root, as in CI.)
@Suite("storage failures", .serialized)
struct DurabilityTests {
    let lab = ServiceLab.shared

    func mount(_ arguments: [String]) throws {
        let process = ChildProcess()
        try LabPrerequisite.root(for: "mounts a small tmpfs to fill it")
        process.executableURL = URL(fileURLWithPath: try LabPrerequisite.program(["/bin/mount", "/usr/bin/mount"], package: "mount"))
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HarnessError(message: "mount \(arguments.joined(separator: " ")) failed (this test needs root)")
        }
    }

    func writeConfig(_ workspace: URL, database: String, servers: [LabTLSServer]) throws -> String {
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: servers.enumerated().map { ("t\($0.offset)", $0.element.port) },
                              interval: "100ms").write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }

    /// Every scan the log reports stored is in the database, and the file is sound.
    func expectNothingLost(_ service: ServiceProcess, database: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).integrityCheck() == "ok", sourceLocation: sourceLocation)
        try expectStored(after: nil, service: service, database: database, sourceLocation: sourceLocation)
    }

    @Test("a full disk: a clear error, the service keeps running, nothing stored is lost, storing resumes")
    func fullDisk() throws {
        let servers = try (0..<4).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("disk")
        let disk = workspace.appendingPathComponent("disk")
        let unmount = try tmpfs(disk, size: "400k")
        defer { unmount() }
        let database = disk.appendingPathComponent("db.sqlite").path
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: servers),
                                         workspace: workspace)

        service.wait("the disk to fill", timeout: 60) { !service.lines(containing: "disk (or database) is full").isEmpty }
        #expect(service.process.isRunning)
        Thread.sleep(forTimeInterval: 0.5)
        let storedWhileFull = service.storedScans.count
        Thread.sleep(forTimeInterval: 1)
        #expect(service.storedScans.count == storedWhileFull, "nothing is claimed stored while the disk is full")

        try mount(["-o", "remount,size=64m", disk.path])
        service.wait("storing to resume") { !service.lines(containing: "storing works again").isEmpty }
        service.wait("new scans stored") { service.storedScans.count > storedWhileFull + 8 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        try expectNothingLost(service, database: database)
    }

    /// A tmpfs of `size` at `directory` (made), unmounted lazily by the returned closure.
    func tmpfs(_ directory: URL, size: String) throws -> () -> Void {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try mount(["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", directory.path])
        return {
            let umount = ChildProcess()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = ["--lazy", directory.path]
            try? umount.run()
            umount.waitUntilExit()
        }
    }

    /// The `unstored=N` and `lost=N` of the stop's log lines (0 when absent).
    func stopCounts(_ service: ServiceProcess) -> (unstored: Int, lost: Int) {
        func value(_ key: String) -> Int {
            service.lines(containing: "stopped with scan results").compactMap { line -> Int? in
                guard let range = line.range(of: "\(key)=") else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }.max() ?? 0
        }
        return (value("unstored"), value("lost"))
    }

    @Test("SIGTERM while the database's file system is full: the unstored results go to spill_directory on another file system (exit 75, counted exactly), and the next start stores every one of them")
    func fullDiskAtStop() throws {
        let servers = try (0..<4).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("disk-at-stop")
        let disk = workspace.appendingPathComponent("disk")
        let unmount = try tmpfs(disk, size: "400k")
        defer { unmount() }
        let spill = workspace.appendingPathComponent("spill")
        try FileManager.default.createDirectory(at: spill, withIntermediateDirectories: true)
        let database = disk.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: servers.enumerated().map { ("t\($0.offset)", $0.element.port) },
                              interval: "100ms", extra: "spill_directory: \(spill.path)").write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("the disk to fill", timeout: 60) { !service.lines(containing: "disk (or database) is full").isEmpty }
        Thread.sleep(forTimeInterval: 1)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 30) == 75, "\(service.log.suffix(2000))")
        let (unstored, lost) = stopCounts(service)
        #expect(unstored > 0 && lost == 0, "\(service.lines(containing: "stopped with"))")
        let files = try FileManager.default.contentsOfDirectory(atPath: spill.path).filter { $0.hasSuffix(".jsonl") }
        #expect(files.count == 1 && files.first?.hasPrefix("db.sqlite-") == true, "\(files)")
        let kept = try files.first.map { try String(contentsOfFile: spill.appendingPathComponent($0).path, encoding: .utf8) } ?? ""
        #expect(kept.split(separator: "\n").count == unstored, "the file holds exactly the results the stop counted")

        // Space again: the next start stores them all, from the other file system, and removes the file.
        try mount(["-o", "remount,size=64m", disk.path])
        let restarted = try ServiceProcess(config: config, workspace: workspace)
        restarted.wait("the kept results stored") { !restarted.lines(containing: "stored the scan results an earlier run could not store").isEmpty }
        #expect(restarted.lines(containing: "stored the scan results an earlier run could not store").first?.contains("stored=\(unstored)") == true,
                "\(restarted.lines(containing: "earlier run"))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: spill.path).filter { $0.hasSuffix(".jsonl") }.isEmpty)
        restarted.wait("new scans stored") { restarted.storedScans.count >= 4 }
        restarted.signal(SIGTERM)
        #expect(restarted.waitForExit(timeout: 15) == 0)
        // (The disk may fill before the first run stores anything: then all it scanned was spilled.)
        if !service.storedScans.isEmpty { try expectNothingLost(service, database: database) }
        try expectNothingLost(restarted, database: database)
        let storedTimes = try storedScanTimes(database)
        let decoder = JSONDecoder()
        let spilled = try kept.split(separator: "\n").map { try decoder.decode(StoredScan.self, from: Data($0.utf8)) }
        let missing = spilled.filter { scan in !(storedTimes[scan.target] ?? []).contains { abs($0 - scan.result.startedAt.timeIntervalSince1970) < 0.001 } }
        #expect(missing.isEmpty, "\(missing.count) of \(spilled.count) spilled results are not in the database")
    }

    @Test("no location can take the unstored results at the stop (the configuration's directory full too): they stay in memory and the stop waits; space freed within the grace keeps every one of them")
    func everyLocationFullAtStop() throws {
        let servers = try (0..<4).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("disk-nowhere")
        let disk = workspace.appendingPathComponent("disk")
        let unmount = try tmpfs(disk, size: "400k")
        defer { unmount() }
        let database = disk.appendingPathComponent("db.sqlite").path
        // The configuration on the full file system too: its directory is the state directory.
        let config = disk.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: database, targets: servers.enumerated().map { ("t\($0.offset)", $0.element.port) },
                              interval: "100ms").write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace, extraArguments: ["--shutdown-grace", "20"])
        service.wait("the disk to fill", timeout: 60) { !service.lines(containing: "disk (or database) is full").isEmpty }
        Thread.sleep(forTimeInterval: 1)
        service.signal(SIGTERM)
        service.wait("the stop to wait for a location") { !service.lines(containing: "cannot be stored or kept in any file").isEmpty }
        #expect(service.process.isRunning, "the stop waits within its grace")
        try mount(["-o", "remount,size=64m", disk.path])
        let status = service.waitForExit(timeout: 30)
        #expect(status == 75 || status == 0, "\(service.log.suffix(2000))")
        #expect(stopCounts(service).lost == 0, "\(service.lines(containing: "stopped with"))")
        // Whatever was kept is stored at the next start; then every scan logged as stored is there.
        let restarted = try ServiceProcess(config: config, workspace: workspace)
        restarted.wait("a scan stored") { !restarted.storedScans.isEmpty }
        if status == 75 {
            restarted.wait("the kept results stored") { !restarted.lines(containing: "stored the scan results an earlier run could not store").isEmpty }
        }
        restarted.signal(SIGTERM)
        #expect(restarted.waitForExit(timeout: 15) == 0)
        if !service.storedScans.isEmpty { try expectNothingLost(service, database: database) }
        try expectNothingLost(restarted, database: database)
    }

    @Test("a read-only database: a clear error, the service keeps running, storing resumes once it is writable")
    func readOnlyDatabase() throws {
        let servers = try (0..<2).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("readonly")
        chmod(workspace.path, 0o777)
        let database = workspace.appendingPathComponent("db.sqlite").path
        _ = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex) // An existing, migrated database...
        chown(database, 65534, 65534)
        chmod(database, 0o444)                   // ...that the service's user may not write.
        let config = try writeConfig(workspace, database: database, servers: servers)
        chmod(config, 0o644)
        // Root ignores file modes: run the service as nobody, as systemd's DynamicUser would.
        try LabPrerequisite.root(for: "runs the service as nobody with setpriv")
        let setpriv = try LabPrerequisite.program(["/usr/bin/setpriv"], package: "util-linux")
        let service = try ServiceProcess(config: config, workspace: workspace,
                                         launcher: [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"])
        service.wait("the read-only error") { !service.lines(containing: "the database is read-only").isEmpty }
        #expect(service.process.isRunning)
        #expect(service.storedScans.isEmpty)
        // What an operator does: make the database and its WAL files writable (SQLite gives the
        // -shm file the database's mode when it creates it).
        for suffix in ["", "-wal", "-shm"] { chmod(database + suffix, 0o644) }
        service.wait("storing to resume", timeout: 30) { !service.lines(containing: "storing works again").isEmpty }
        service.wait("scans stored") { service.storedScans.count >= 4 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        try expectNothingLost(service, database: database)
    }

    /// Every scan logged as stored after the last log line containing `marker` (every one, for nil) is in `database`.
    func expectStored(after marker: String?, service: ServiceProcess, database: String,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let logged = service.storedScans(after: marker)
        _ = try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex) // opens (and checks) it as the service would
        let storedTimes = try storedScanTimes(database)
        let missing = logged.filter { scan in !(storedTimes[scan.target] ?? []).contains { abs($0 - scan.startedAt) < 0.001 } }
        #expect(!logged.isEmpty, sourceLocation: sourceLocation)
        #expect(missing.isEmpty, "\(missing.count) of \(logged.count) scans logged as stored after '\(marker ?? "the start")' are missing",
                sourceLocation: sourceLocation)
    }

    @Test("a database deleted, its directory removed and recreated, or the file replaced: noticed, reopened, nothing logged as stored is lost")
    func vanishingDatabase() throws {
        let servers = try (0..<3).map { _ in try lab.goodServer() }
        defer { servers.forEach { $0.stop() } }
        let workspace = try lab.workspace("vanish")
        let directory = workspace.appendingPathComponent("state")
        let database = directory.appendingPathComponent("db.sqlite").path
        let service = try ServiceProcess(config: try writeConfig(workspace, database: database, servers: servers),
                                         workspace: workspace)
        service.wait("scans stored") { service.storedScans.count >= 6 }

        // 1. The database and its -wal and -shm files deleted (before: 700 scans logged as stored into the deleted file).
        for suffix in ["", "-wal", "-shm"] { unlink(database + suffix) }
        service.wait("the deletion noticed") { !service.lines(containing: "was deleted").isEmpty }
        service.wait("scans stored in the new file") { service.storedScans(after: "was deleted").count >= 6 }
        #expect(FileManager.default.fileExists(atPath: database))
        try expectStored(after: "was deleted", service: service, database: database)

        // 2. The whole directory removed, then made again by the operator.
        try FileManager.default.removeItem(at: directory)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        service.wait("the second deletion noticed") { service.lines(containing: "was deleted").count >= 2 }
        service.wait("scans stored in the third file") { service.storedScans(after: "was deleted").count >= 6 }
        try expectStored(after: "was deleted", service: service, database: database)

        // 3. The file replaced by another database (a restored backup, say).
        let other = workspace.appendingPathComponent("other.sqlite").path
        do { _ = try SQLiteScanStore(path: other, sha256: Digest.sha256Hex) }
        #expect(rename(other, database) == 0)
        service.wait("the replacement noticed") { !service.lines(containing: "was replaced").isEmpty }
        service.wait("scans stored in the replacement") { service.storedScans(after: "was replaced").count >= 6 }
        #expect(service.process.isRunning)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        try expectStored(after: "was replaced", service: service, database: database)
        #expect(try SQLiteScanStore(path: database, create: false, sha256: Digest.sha256Hex).integrityCheck() == "ok")
    }
}
