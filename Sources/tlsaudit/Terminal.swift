import Foundation
import Synchronization
import TLSAuditCore
import TLSAuditSupport

enum Terminal {
    static func isTTY(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }
}

/// Standard output and standard error, written with write(2) (after whatever `print` buffered:
/// ArgumentParser's help and usage text).
///
/// When the reader of standard output has gone away (`tlsaudit scan ... | head`), the command ends
/// as Unix filters do, killed by SIGPIPE (status 141 in a shell), and loses nothing: a scan's
/// results are stored before its output is written. Any other failure to write the output (a full
/// disk behind `>`) is reported on standard error and exits 2. Failures to write standard error
/// are ignored: a warning nobody can read must not stop a command. (FileHandle's `write(_:)`
/// traps on any of these.)
enum StandardStream {
    case output
    case error

    /// Run first, before any file is opened: SIGPIPE is ignored (a closed pipe is an error of the
    /// write, handled above for standard output; the scanner's sockets need that too), and a
    /// standard descriptor the command was started without (`>&-`) is taken by /dev/null opened
    /// read-only, so that no file or socket opened later becomes "standard output" (writes to it
    /// then fail: "cannot write the output: Bad file descriptor", exit 2).
    static func prepare() {
        signal(SIGPIPE, SIG_IGN)
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
            let placeholder = open("/dev/null", O_RDONLY)
            if placeholder >= 0, placeholder != descriptor {
                dup2(placeholder, descriptor)
                close(placeholder)
            }
        }
    }

    func write(_ text: String) { write(Data(text.utf8)) }

    func write(_ data: Data) { write([data]) }

    /// Writes `pieces` one after the other (a document encoded in pieces: `encodeLineSegments`).
    func write(_ pieces: [Data]) {
        fflush(nil)
        let descriptor = self == .output ? STDOUT_FILENO : STDERR_FILENO
        var failure: Int32?
        for piece in pieces where failure == nil {
            failure = piece.withUnsafeBytes { DescriptorWrites.writeAll($0, to: descriptor) }
        }
        guard self == .output, let failure else { return }
        if failure == EPIPE {
            // Default action, unblocked in this thread (Dispatch threads block some signals).
            signal(SIGPIPE, SIG_DFL)
            var pipe = sigset_t()
            sigemptyset(&pipe)
            sigaddset(&pipe, SIGPIPE)
            pthread_sigmask(SIG_UNBLOCK, &pipe, nil)
            raise(SIGPIPE)
        }
        StandardStream.error.write("tlsaudit: cannot write the output: \(String(cString: strerror(failure)))\n")
        exit(2)
    }
}

/// A single self-overwriting progress line on stderr, shown only on a terminal.
final class ProgressLine: Sendable {
    /// Whether the line is drawn (stderr is a terminal and there is more than one target).
    let enabled: Bool
    private let lastDrawn = Mutex<ContinuousClock.Instant?>(nil)

    init(enabled: Bool) { self.enabled = enabled }

    func update(done: Int, total: Int) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let draw = lastDrawn.withLock { last -> Bool in
            // At most ten redraws a second, and always the last one.
            guard done == total || last.map({ now - $0 > .milliseconds(100) }) ?? true else { return false }
            last = now
            return true
        }
        if draw { StandardStream.error.write("\r\u{1B}[Kscanning: \(done)/\(total) addresses") }
    }

    func finish() {
        guard enabled else { return }
        StandardStream.error.write("\r\u{1B}[K")
    }
}
