import Foundation
import GRDB
import Testing
import TLSAuditLab
import TLSAuditServiceLab

/// Wall-clock steps: the schedule keeps to the monotonic clock. The service runs under
/// an LD_PRELOAD shim (Fixtures/clock_shift.c) that shifts only its CLOCK_REALTIME by what a file
/// says, so the test steps the service's wall clock while its own and the kernel's stay put.
@Suite("wall-clock steps")
struct ClockStepTests {
    let lab = ServiceLab.shared

    /// The shim, built with the toolchain's clang into `workspace`.
    func shim(in workspace: URL) throws -> String {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/clock_shift.c").path
        let library = workspace.appendingPathComponent("libclockshift.so").path
        let built = try Binary.run(["clang", "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"], program: "/usr/bin/env")
        #expect(built.status == 0, "\(built.stderr)")
        return library
    }

    @Test("a step back of 60 s and a day forward and back: scans go on at the same rate, and each step is logged once; a scan started while the clock stood back and finished after it jumped ahead extends its run")
    func steps() throws {
        let server = try lab.goodServer()
        defer { server.stop() }
        // The 21st target's connections go through a relay that can hold one across the jump ahead.
        let relay = try LabGatedRelay(to: server.port)
        defer { relay.stop() }
        let workspace = try lab.workspace("clock-steps")
        let library = try shim(in: workspace)
        let shift = workspace.appendingPathComponent("shift").path
        try "0\n".write(toFile: shift, atomically: true, encoding: .utf8)
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        let targets = (1...20).map { ("t\($0)", server.port) } + [("held", relay.port)]
        try lab.configuration(database: database, targets: targets, perHostConcurrency: 32).write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace,
                                         environment: ["LD_PRELOAD": library, "CLOCK_SHIFT_FILE": shift])
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("every target scanned once") { Set(service.storedScans.map(\.target)).count == 21 }

        /// Scans stored in 4 s of the test's (unshifted) time, after `seconds` written to the shim's file
        /// (and the relay's held connection let through once the scheduler has seen the step).
        func scans(afterShift seconds: Int, releasing: Bool = false) throws -> Int {
            try "\(seconds)\n".write(toFile: shift, atomically: true, encoding: .utf8)
            if releasing {
                Thread.sleep(forTimeInterval: 0.4)
                relay.release()
                Thread.sleep(forTimeInterval: 0.6)
            } else {
                Thread.sleep(forTimeInterval: 1)
            }
            let before = service.storedScans.count
            Thread.sleep(forTimeInterval: 4)
            return service.storedScans.count - before
        }
        let steady = try scans(afterShift: 0)
        let afterBack = try scans(afterShift: -60)
        // The held target's next scan starts while the clock still stands 60 s back, and ends after the jump ahead.
        relay.hold()
        let deadline = Date().addingTimeInterval(5)
        while relay.waiting == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(relay.waiting == 1, "no scan of the held target started while the clock stood back")
        let dayAhead = try scans(afterShift: 86_400, releasing: true)
        let dayBack = try scans(afterShift: 0)
        // 20 targets every second: about 80 in 4 s. Before the monotonic schedule, 60 s back gave
        // none (every due time lay a minute ahead).
        #expect(steady >= 40, "steady: \(steady)")
        for (name, count) in [("60 s back", afterBack), ("a day ahead", dayAhead), ("back from a day ahead", dayBack)] {
            #expect(Double(count) >= Double(steady) * 0.6, "\(name): \(count) scans against \(steady) before any step")
        }
        let logged = service.lines(containing: "the wall clock stepped")
        #expect(logged.count == 3, "\(logged)")
        #expect(logged.first?.contains("stepped back by 60 s") == true, "\(logged)")
        #expect(logged.dropFirst().first?.contains("forward by 86460 s") == true, "\(logged)")
        #expect(service.lines(containing: "scheduler started").count == 1)
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        // The state follows the newest observation by arrival, not by wall time: after the return
        // from a day ahead, each address's state is its newest observation, not the one a day ahead.
        let behind = try DatabaseQueue(path: database).read { db in
            try Int.fetchOne(db, sql: """
                SELECT count(*) FROM target_state s
                WHERE s.last_observation_id <> (SELECT max(id) FROM observation o WHERE o.target = s.target AND o.address = s.address)
                """) ?? -1
        }
        #expect(behind == 0, "\(behind) of 21 addresses keep a state older than their newest observation")
        // Unchanged scans taken while the clock stood behind extend their address's run, as any
        // unchanged scan does: one observation per address (the old code stored one per scan; and
        // one more for the held target when the flag was decided only when a scan ended).
        let observations = try DatabaseQueue(path: database).read { db in
            try Int.fetchOne(db, sql: "SELECT max(n) FROM (SELECT count(*) AS n FROM observation GROUP BY target, address)") ?? -1
        }
        #expect(observations == 1, "an address has \(observations) observations")
    }
}
