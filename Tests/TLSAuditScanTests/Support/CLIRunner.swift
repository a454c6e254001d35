import Foundation
import Testing
import TLSAuditCore

/// Runs the built `tlsaudit` binary, the way a user does.
enum CLI {
    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
        var seconds: Double

        /// The JSON report of `scan --format json`.
        func report(sourceLocation: SourceLocation = #_sourceLocation) throws -> ScanReport {
            do {
                return try JSONDecoder.tlsaudit.decode(ScanReport.self, from: Data(stdout.utf8))
            } catch {
                Issue.record("stdout is not a scan report: \(error)\nstdout: \(stdout.prefix(2000))\nstderr: \(stderr)",
                             sourceLocation: sourceLocation)
                throw error
            }
        }
    }

    /// The binary next to the test bundle (same build directory), or `TLSAUDIT_BINARY`.
    static let binary: String = {
        if let explicit = ProcessInfo.processInfo.environment["TLSAUDIT_BINARY"] { return explicit }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("tlsaudit").path
    }()

    /// Runs `tlsaudit ARGS`, killing it if it outlives `limit` seconds.
    static func run(_ arguments: [String], limit: Double = 60, environment: [String: String] = [:]) throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let started = ContinuousClock.now
        try process.run()
        // SIGKILL: a child started from a test thread may inherit SIGTERM blocked.
        let killer = DispatchWorkItem { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit, execute: killer)
        // Read both pipes before waiting, so a large output cannot block the child.
        let group = DispatchGroup()
        nonisolated(unsafe) var stdoutData = Data()
        nonisolated(unsafe) var stderrData = Data()
        DispatchQueue.global().async(group: group) { stdoutData = out.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { stderrData = err.fileHandleForReading.readDataToEndOfFile() }
        process.waitUntilExit()
        group.wait()
        killer.cancel()
        let elapsed = ContinuousClock.now - started
        return Output(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                      stderr: String(decoding: stderrData, as: UTF8.self),
                      seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// What `runMeasured` saw of the process besides its output.
    struct Measured {
        var output: Output
        /// Peak resident set size of the process alone (wait4's rusage), in MiB.
        var peakMiB: Double
        var stdoutBytes: Int
    }

    /// Runs `tlsaudit ARGS` with posix_spawn and reaps it with wait4, so that the peak memory of
    /// this one process is known (Foundation's Process reaps the child itself). Output goes to files.
    static func runMeasured(_ arguments: [String], limit: Double = 120) throws -> Measured {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-measured-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outPath = directory.appendingPathComponent("stdout").path
        let errPath = directory.appendingPathComponent("stderr").path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([binary] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let started = ContinuousClock.now
        let spawned = posix_spawn(&pid, binary, &actions, nil, argv, environ)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL) }
        let child = pid
        let killer = DispatchWorkItem { kill(child, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit, execute: killer)
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0, errno == EINTR {}
        killer.cancel()
        let elapsed = ContinuousClock.now - started
        let stdoutData = FileManager.default.contents(atPath: outPath) ?? Data()
        let stderrData = FileManager.default.contents(atPath: errPath) ?? Data()
        // WEXITSTATUS, or 128 + the signal as a shell reports it.
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let output = Output(status: exit, stdout: String(decoding: stdoutData, as: UTF8.self),
                            stderr: String(decoding: stderrData, as: UTF8.self),
                            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        return Measured(output: output, peakMiB: Double(usage.ru_maxrss) / 1024, stdoutBytes: stdoutData.count)
    }

    /// `tlsaudit scan --format json --ca-file ROOT --connect-to 127.0.0.1 HOST:PORT ...`.
    static func scan(port: Int, host: String = TestPKI.hostname, connectTo: String = "127.0.0.1",
                     extra: [String] = []) throws -> Output {
        try run(["scan", "--format", "json", "--ca-file", TestPKI.shared.rootFile, "--connect-to", connectTo,
                 "--timeout", "5", "\(host):\(port)"] + extra)
    }
}

extension ScanReport {
    /// The only address of the only target.
    var single: AddressScanResult {
        get throws {
            let target = try #require(targets.first)
            return try #require(target.addresses.first)
        }
    }
}

extension AddressScanResult {
    /// Error-severity finding ids.
    var errorIDs: Set<String> { Set(findings.filter { $0.severity == .error }.map(\.id.rawValue)) }

    func finding(_ id: String) -> Finding? { findings.first { $0.id.rawValue == id } }
}
