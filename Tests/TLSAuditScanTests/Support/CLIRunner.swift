import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditProcess

/// Runs the built `tlsaudit` binary, the way a user does.
enum CLI {
    typealias Output = LabCommand.Output

    /// The binary next to the test bundle (same build directory), or `TLSAUDIT_BINARY`.
    static var binary: String { LabCommand.tlsaudit }

    /// Runs `tlsaudit ARGS` (or another `program`), killing it if it outlives `limit` seconds.
    static func run(_ arguments: [String], limit: Double = 60, environment: [String: String] = [:], program: String = binary) throws -> Output {
        try LabCommand.run(arguments, program: program, limit: limit, environment: environment)
    }

    /// What `runMeasured` saw of the process besides its output.
    struct Measured {
        var output: Output
        /// Peak resident set size of the process alone (wait4's rusage), in MiB.
        var peakMiB: Double
        var stdoutBytes: Int
    }

    /// Runs `tlsaudit ARGS` under a small Python parent that reaps it with wait4, so that the peak
    /// memory of this one process is known. (A child forked or vforked from the test runner itself
    /// inherits the runner's high-water mark in ru_maxrss; Python's is far below tlsaudit's.)
    static func runMeasured(_ arguments: [String], limit: Double = 120) throws -> Measured {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-measured-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outPath = directory.appendingPathComponent("stdout").path
        let errPath = directory.appendingPathComponent("stderr").path
        let script = """
            import os, subprocess, sys, time
            out, err, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
            with open(out, "wb") as o, open(err, "wb") as e:
                child = subprocess.Popen(sys.argv[4:], stdin=subprocess.DEVNULL, stdout=o, stderr=e)
            deadline = time.monotonic() + limit
            while True:
                pid, status, usage = os.wait4(child.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    child.kill()
                time.sleep(0.002)
            code = os.waitstatus_to_exitcode(status)
            print(code if code >= 0 else 128 - code, usage.ru_maxrss)
            """
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try LabPrerequisite.program(["python3"], package: "python3"))
        process.arguments = ["-c", script, outPath, errPath, String(limit), binary] + arguments
        let report = Pipe()
        process.standardOutput = report
        process.standardError = FileHandle.nullDevice
        let started = ContinuousClock.now
        try process.run()
        let reportData = report.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let elapsed = ContinuousClock.now - started
        let fields = String(decoding: reportData, as: UTF8.self).split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        guard process.terminationStatus == 0, fields.count == 2 else {
            throw MeasureError(description: "python3 could not run tlsaudit (install python3; .ci/run has it)")
        }
        let stdoutData = FileManager.default.contents(atPath: outPath) ?? Data()
        let stderrData = FileManager.default.contents(atPath: errPath) ?? Data()
        let output = Output(status: Int32(fields[0]), stdout: String(decoding: stdoutData, as: UTF8.self),
                            stderr: String(decoding: stderrData, as: UTF8.self),
                            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        return Measured(output: output, peakMiB: Double(fields[1]) / 1024, stdoutBytes: stdoutData.count)
    }

    struct MeasureError: Error, CustomStringConvertible {
        var description: String
    }

    /// Writes `certificates` (PEM, in the order given) to one file and runs
    /// `tlsaudit verify --format json --chain FILE --roots ROOTS [--host HOST] EXTRA...` on it.
    static func verify(_ certificates: [LabCertificate], roots: String = TestPKI.shared.rootFile, host: String? = TestPKI.hostname,
                       extra: [String] = []) throws -> (status: Int32, report: VerifyReport) {
        let file = TestPKI.shared.directory.appendingPathComponent("chain-\(UUID().uuidString.prefix(8)).pem")
        try certificates.map(\.pem).joined().write(to: file, atomically: true, encoding: .utf8)
        var arguments = ["verify", "--chain", file.path, "--roots", roots, "--format", "json"] + extra
        if let host { arguments += ["--host", host] }
        let output = try run(arguments)
        return (output.status, try JSONDecoder.tlsaudit.decode(VerifyReport.self, from: Data(output.stdout.utf8)))
    }

    /// `tlsaudit scan --format json --ca-file ROOT --connect-to 127.0.0.1 HOST:PORT ...`.
    static func scan(port: Int, host: String = TestPKI.hostname, connectTo: String = "127.0.0.1",
                     extra: [String] = []) throws -> Output {
        try run(["scan", "--format", "json", "--ca-file", TestPKI.shared.rootFile, "--connect-to", connectTo,
                 "--timeout", "5", "\(host):\(port)"] + extra)
    }
}

extension LabCommand.Output {
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
