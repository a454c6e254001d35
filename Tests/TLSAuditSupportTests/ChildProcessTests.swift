import Foundation
import Testing
@testable import TLSAuditSupport
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// Child processes started with posix_spawn instead of Foundation's `Process`: streams, exit
/// statuses, signals, descriptors and working directory, as a child really sees them.
@Suite("child processes (posix_spawn)")
struct ChildProcessTests {
    /// Runs `arguments` with stdout and stderr in pipes; returns the process and both outputs.
    static func run(_ arguments: [String], directory: String? = nil, environment: [String: String]? = nil)
        throws -> (process: ChildProcess, stdout: String, stderr: String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.currentDirectoryURL = directory.map { URL(fileURLWithPath: $0) }
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = nil
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    @Test("output through pipes, the exit status, the environment given, and a program that cannot start")
    func statusAndStreams() throws {
        let ran = try Self.run(["/bin/sh", "-c", "echo out; echo err >&2; echo \"$GREETING\"; exit 3"], environment: ["GREETING": "hello"])
        #expect(ran.stdout == "out\nhello\n")
        #expect(ran.stderr == "err\n")
        #expect(ran.process.terminationStatus == 3)
        #expect(ran.process.terminationReason == .exit)
        #expect(!ran.process.isRunning)
        let missing = ChildProcess()
        missing.executableURL = URL(fileURLWithPath: "/nonexistent/program")
        #expect(throws: ChildProcessError.self) { try missing.run() }
        // Its input from a pipe, the parent's end closed after writing: the child sees end of file.
        let cat = ChildProcess()
        cat.executableURL = URL(fileURLWithPath: "/bin/cat")
        let input = Pipe(), output = Pipe()
        cat.standardInput = input
        cat.standardOutput = output
        try cat.run()
        try input.fileHandleForWriting.write(contentsOf: Data("through cat".utf8))
        try input.fileHandleForWriting.close()
        #expect(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "through cat")
        cat.waitUntilExit()
        #expect(cat.terminationStatus == 0)
    }

    @Test("the child has no descriptor of the parent's beyond 0-2, its own directory (the parent's unchanged), no blocked or ignored signal")
    func whatTheChildInherits() throws {
        let leaked = open("/dev/null", O_RDONLY) // no O_CLOEXEC: Process would pass it on
        #expect(leaked > 2)
        defer { close(leaked) }
        // ls opens /proc/self/fd as its descriptor 3 to list it: 0, 1, 2 and 3, nothing of ours.
        let descriptors = try Self.run(["/bin/ls", "/proc/self/fd"]).stdout.split(separator: "\n").compactMap { Int($0) }
        #expect(Set(descriptors) == [0, 1, 2, 3], "\(descriptors), the parent's \(leaked)")

        let before = FileManager.default.currentDirectoryPath
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try Self.run(["/bin/pwd"], directory: directory).stdout == directory + "\n")
        #expect(FileManager.default.currentDirectoryPath == before)

        // Block SIGTERM in this thread and ignore SIGPIPE (as the service does): the child has neither.
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        let oldPipe = signal(SIGPIPE, SIG_IGN)
        defer {
            pthread_sigmask(SIG_SETMASK, &previous, nil)
            signal(SIGPIPE, oldPipe)
        }
        let status = try Self.run(["/bin/cat", "/proc/self/status"]).stdout
        let masks = Dictionary(uniqueKeysWithValues: status.split(separator: "\n").compactMap { line -> (String, String)? in
            let parts = line.split(separator: ":", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces)) : nil
        })
        // The standard signals 1-31 (glibc keeps its own 32 and 33, which no program sets).
        func standard(_ mask: String?) -> UInt64? { mask.flatMap { UInt64($0, radix: 16) }.map { $0 & 0x7FFF_FFFF } }
        #expect(standard(masks["SigBlk"]) == 0, "\(masks["SigBlk"] ?? "none")")
        #expect(standard(masks["SigIgn"]) == 0, "\(masks["SigIgn"] ?? "none")")
    }

    @Test("a process group of its own; a child left running when its ChildProcess goes away is reaped when it ends (no zombie)")
    func groupAndReaping() throws {
        // /proc/self/stat of cat: "pid (comm) state ppid pgrp ...".
        let fields = try Self.run(["/bin/cat", "/proc/self/stat"]).stdout.split(separator: ")").last?.split(separator: " ") ?? []
        // After the command's name: state, parent, process group.
        #expect(fields.count > 3)
        let (parent, childGroup) = (fields.count > 2 ? Int32(fields[1]) : nil, fields.count > 2 ? Int32(fields[2]) : nil)
        #expect(parent == getpid())
        #expect(childGroup != nil && childGroup != getpgrp(), "the child's group \(childGroup ?? -1), ours \(getpgrp())")

        var pid: Int32 = 0
        do {
            let dropped = ChildProcess()
            dropped.executableURL = URL(fileURLWithPath: "/bin/sleep")
            dropped.arguments = ["0.2"]
            try dropped.run()
            pid = dropped.processIdentifier
        }
        #expect(pid > 0)
        let deadline = Date().addingTimeInterval(10)
        while FileManager.default.fileExists(atPath: "/proc/\(pid)"), Date() < deadline { usleep(20_000) }
        #expect(!FileManager.default.fileExists(atPath: "/proc/\(pid)"), "pid \(pid) was not reaped (a zombie stays in /proc)")
    }

    @Test("terminate ends it by SIGTERM; one thread polls while another waits, and both see it end")
    func signalsAndWaiting() throws {
        let sleeper = ChildProcess()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        #expect(sleeper.isRunning)
        sleeper.terminate()
        sleeper.waitUntilExit()
        #expect(sleeper.terminationReason == .uncaughtSignal)
        #expect(sleeper.terminationStatus == SIGTERM)
        sleeper.terminate() // reaped: no signal to a reused process id, no crash

        let short = ChildProcess()
        short.executableURL = URL(fileURLWithPath: "/bin/sleep")
        short.arguments = ["0.3"]
        try short.run()
        let polled = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var pollerSawEnd = false
        Thread {
            while short.isRunning { usleep(5_000) }
            pollerSawEnd = true
            polled.signal()
        }.start()
        short.waitUntilExit()
        #expect(polled.wait(timeout: .now() + 5) == .success)
        #expect(pollerSawEnd)
        #expect(short.terminationStatus == 0 && short.terminationReason == .exit)
    }
}
