import Foundation
import TLSAuditProcess

/// `type: command`: runs `argv` (no shell) with the alert JSON on stdin; success is exit status 0.
struct CommandSink: AlertSink {
    static let type = "command"
    static let keys = ["argv"]

    var argv: [String]
    var timeout: Double

    static func configured(_ entry: SinkEntry, parser: inout ConfigurationParser) -> CommandSink? {
        guard let argvNode = entry.mapping["argv"], case .sequence(let sequence) = argvNode, !sequence.isEmpty else {
            parser.report(entry.node, "a command sink needs 'argv': a list, program first (run without a shell)")
            return nil
        }
        return CommandSink(argv: sequence.compactMap { parser.string($0, "an argument") }, timeout: entry.timeout)
    }

    func send(_ body: Data, headers: [String: String], log: () -> Void) -> Result<Void, SinkDeliveryError> {
        Self.run(argv, input: body, timeout: timeout)
    }

    static func run(_ argv: [String], input: Data, timeout: Double) -> Result<Void, SinkDeliveryError> {
        guard let program = argv.first, let executable = resolve(program) else {
            return .failure(SinkDeliveryError(description: "command not found: \(argv.first ?? "(empty)")"))
        }
        // A ChildProcess starts with default signal handling and no blocked signals, whatever this
        // process ignores (SIGPIPE, SIGHUP) or the delivering thread blocks (Dispatch threads block
        // SIGTERM): a command that inherited those could not be stopped by SIGTERM, nor could
        // anything it starts, and would not die of a closed pipe.
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = Array(argv.dropFirst())
        let stdin = Pipe()
        process.standardInput = stdin
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice // a chatty command must not fill a pipe and hang
        do {
            try process.run()
        } catch {
            return .failure(SinkDeliveryError(description: "cannot run \(executable): \(error)"))
        }
        // Fed from its own thread: a command that does not read a large input (a report) must not
        // block us past the deadline; terminating it ends the write with EPIPE (SIGPIPE is ignored).
        let writer = stdin.fileHandleForWriting
        Thread {
            try? writer.write(contentsOf: input)
            try? writer.close()
        }.start()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning {
            process.terminate()
            let grace = Date().addingTimeInterval(2)
            while process.isRunning && Date() < grace { Thread.sleep(forTimeInterval: 0.02) }
            if process.isRunning {
                process.signal(SIGKILL)
                process.waitUntilExit()
            }
            return .failure(SinkDeliveryError(description: "\(program) did not finish within \(timeout) s"))
        }
        guard process.terminationStatus == 0 else {
            return .failure(SinkDeliveryError(description: "\(program) exited with status \(process.terminationStatus)"))
        }
        return .success(())
    }

    /// An absolute path, or the first match on PATH.
    static func resolve(_ program: String) -> String? {
        if program.utf8.contains(UInt8(ascii: "/")) { return FileManager.default.isExecutableFile(atPath: program) ? program : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(program)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
