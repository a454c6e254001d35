public import Foundation
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `tlsaudit` (or another program) to completion, the way a user does: the one
/// runner behind every test target's command helpers.
public enum LabCommand {
    /// What a run printed and how it ended.
    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        /// Wall-clock seconds from the start to the exit.
        public var seconds: Double

        public init(status: Int32, stdout: String, stderr: String, seconds: Double) {
            self.status = status
            self.stdout = stdout
            self.stderr = stderr
            self.seconds = seconds
        }
    }

    /// The binary next to the test bundle (same build directory), or `TLSAUDIT_BINARY`.
    public static let tlsaudit: String = {
        if let explicit = ProcessInfo.processInfo.environment["TLSAUDIT_BINARY"] { return explicit }
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("tlsaudit").path
    }()

    /// Runs `program ARGS` (in `directory`, with `environment` over this process's), reading both
    /// pipes while it runs (a large output cannot block it), and kills it with SIGKILL when it
    /// outlives `limit` seconds (a child started from a test thread may inherit SIGTERM blocked).
    public static func run(_ arguments: [String], program: String = tlsaudit, limit: Double = 60, directory: String? = nil,
                           environment: [String: String] = [:]) throws -> Output {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let started = ContinuousClock.now
        try process.run()
        let killer = DispatchWorkItem { process.signal(SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit, execute: killer)
        let group = DispatchGroup()
        nonisolated(unsafe) var stdout = Data()
        nonisolated(unsafe) var stderr = Data()
        DispatchQueue.global().async(group: group) { stdout = out.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { stderr = err.fileHandleForReading.readDataToEndOfFile() }
        process.waitUntilExit()
        group.wait()
        killer.cancel()
        let elapsed = ContinuousClock.now - started
        return Output(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr, as: UTF8.self),
                      seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}
