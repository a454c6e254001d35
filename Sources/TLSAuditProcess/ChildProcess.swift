import CProcess
public import Foundation
import TLSAuditSupport
#if canImport(Glibc)
import Glibc
#endif

/// A program run with posix_spawn, in place of Foundation's `Process`, whose Linux `run()` in this
/// toolchain (Swift 6.3.1) copies 256 bytes out of each `/proc/self/fd` entry that readdir returns,
/// past the end of readdir's buffer when an entry ends it: a SIGSEGV of the whole process, now and
/// then (swift-corelibs-foundation #5472; it crashed this project's test run, and `tlsaudit serve`
/// runs command sinks). It also changes the whole parent's working directory while it starts a
/// child that needs another. Here the child closes every descriptor above 2 itself
/// (`closefrom`), changes its own directory, starts in a process group of its own (a Ctrl-C meant
/// for a foreground `tlsaudit serve` does not reach a command sink mid-delivery; the service stops
/// it) and with every signal at its default action and none blocked, whatever the parent ignores or
/// the starting thread blocks. A child still running when its `ChildProcess` goes away is reaped
/// when it ends, by a thread of its own (no zombie), as Foundation's `Process` did.
///
/// The same members as `Process` for what this project uses: set the executable, arguments,
/// environment, directory and standard streams (a `Pipe`, a `FileHandle`, `FileHandle.nullDevice`
/// or nil for /dev/null; by default the parent's), `run()`, then wait or poll. Any thread may poll
/// `isRunning` while another waits.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: the configuration is set before `run()` on one thread; afterwards only `ended`,
    // behind its lock, changes.
    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    public var executableURL: URL?
    public var arguments: [String]?
    /// The child's whole environment; nil: the parent's.
    public var environment: [String: String]?
    /// nil: the parent's working directory.
    public var currentDirectoryURL: URL?
    public var standardInput: Any? = FileHandle.standardInput
    public var standardOutput: Any? = FileHandle.standardOutput
    public var standardError: Any? = FileHandle.standardError

    public private(set) var processIdentifier: Int32 = 0
    /// The wait status once the child is reaped.
    private let ended = SleepingLock<Int32?>(nil)

    public init() {}

    deinit {
        let pid = processIdentifier
        guard pid > 0, ended.withLock({ $0 }) == nil else { return }
        var raw: Int32 = 0
        if waitpid(pid, &raw, WNOHANG) == pid { return }
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        }
    }

    /// Starts the program; throws when it cannot be started (no such file, not executable, a
    /// directory that does not exist: the child's exec fails, and posix_spawn reports it).
    public func run() throws {
        guard processIdentifier == 0 else { throw ChildProcessError("the process was already started") }
        guard let executable = executableURL?.path else { throw ChildProcessError("no executable") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEndsToClose: [FileHandle] = []
        func check(_ code: Int32, _ what: String) throws {
            guard code == 0 else { throw ChildProcessError("cannot run \(executable): \(what): \(String(cString: strerror(code)))") }
        }
        for (descriptor, stream, childReads) in [(STDIN_FILENO, standardInput, true), (STDOUT_FILENO, standardOutput, false),
                                                 (STDERR_FILENO, standardError, false)] {
            if stream == nil || (stream as? FileHandle) === FileHandle.nullDevice {
                try check(posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", childReads ? O_RDONLY : O_WRONLY, 0), "/dev/null")
                continue
            }
            switch stream {
            case let pipe as Pipe:
                let childEnd = childReads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                try check(posix_spawn_file_actions_adddup2(&actions, childEnd.fileDescriptor, descriptor), "standard stream \(descriptor)")
                parentEndsToClose.append(childEnd)
            case let handle as FileHandle:
                if handle.fileDescriptor != descriptor {
                    try check(posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, descriptor), "standard stream \(descriptor)")
                }
            default:
                throw ChildProcessError("a standard stream must be a Pipe, a FileHandle or nil")
            }
        }
        try check(tlsaudit_spawn_close_from(&actions, 3), "closefrom")
        if let directory = currentDirectoryURL?.path { try check(tlsaudit_spawn_change_directory(&actions, directory), directory) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        sigdelset(&all, SIGKILL)
        sigdelset(&all, SIGSTOP)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + (arguments ?? [])).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var environmentEntries: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { environmentEntries?.forEach { free($0) } }
        var pid: pid_t = 0
        let status: Int32
        if environmentEntries != nil {
            status = posix_spawn(&pid, executable, &actions, &attributes, &argv, &environmentEntries!)
        } else {
            status = posix_spawn(&pid, executable, &actions, &attributes, &argv, environ)
        }
        guard status == 0 else {
            throw ChildProcessError("cannot run \(executable): \(String(cString: strerror(status)))")
        }
        processIdentifier = pid
        // The child has its copies: the parent's would keep a reader from ever seeing end of file.
        for handle in parentEndsToClose { try? handle.close() }
    }

    /// Whether the child still runs (it is reaped when it has ended).
    public var isRunning: Bool {
        guard processIdentifier > 0 else { return false }
        return reap(blocking: false) == nil
    }

    /// Waits until the child ends.
    public func waitUntilExit() {
        guard processIdentifier > 0 else { return }
        _ = reap(blocking: true)
    }

    /// The exit status, or the number of the signal that ended it. Only once it has ended.
    public var terminationStatus: Int32 {
        let status = endedStatus
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    public var terminationReason: TerminationReason { endedStatus & 0x7f == 0 ? .exit : .uncaughtSignal }

    /// The wait status of a child that has ended (asking before is a programming error).
    private var endedStatus: Int32 {
        guard let status = ended.withLock({ $0 }) else { preconditionFailure("the process has not ended") }
        return status
    }

    /// SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// SIGINT.
    public func interrupt() { signal(SIGINT) }

    /// Sends `number` while the child has not been reaped (never to a reused process id).
    public func signal(_ number: Int32) {
        ended.withLock { status in
            if status == nil, processIdentifier > 0 { kill(processIdentifier, number) }
        }
    }

    /// The wait status, reaping the child under the lock; with `blocking`, after waiting for it to
    /// end without reaping it (waitid's WNOWAIT), so that threads polling and waiting agree.
    private func reap(blocking: Bool) -> Int32? {
        if let status = ended.withLock({ $0 }) { return status }
        if blocking {
            var info = siginfo_t()
            while waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT) < 0, errno == EINTR {}
        }
        return ended.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(processIdentifier, &raw, WNOHANG) } while result < 0 && errno == EINTR
            if result == processIdentifier { status = raw }
            return status
        }
    }
}

/// Why a child process could not be started.
public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
