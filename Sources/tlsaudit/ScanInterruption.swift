#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import TLSAuditService
import TLSAuditSupport

/// Ctrl-C (SIGINT), SIGTERM and SIGHUP (the terminal closed, an ssh session dropped) during `scan
/// --database`: the first stops the scan from beginning
/// another address, lets the probes in flight finish (each connection within the timeout) and has
/// every target done stored, then the process ends by that signal; the second ends it at once,
/// as the default action would. Without it, an interrupted scan lost the results finished since
/// the last commit and those of the probes in flight.
/// (`@unchecked`: a dispatch source may be cancelled from any thread; the rest is a lock.)
final class ScanInterruption: @unchecked Sendable {
    /// Checks for the first signal every 50 ms to say what happens (the handler only counts and
    /// gives the signals their default action back); cancelled by `end()`.
    private let watcher: any DispatchSourceTimer
    /// Set by `end()`: a check already running says nothing after it.
    private let ended = SleepingLock(false)

    /// Starts catching SIGINT, SIGTERM and SIGHUP. `timeout` is the probes' (said in the message);
    /// `clearLine` when a progress line is drawn on stderr.
    init(timeout: Double, clearLine: Bool) {
        ServiceSignals.catchTermination()
        let watcher = DispatchSource.makeTimerSource(queue: .global())
        self.watcher = watcher
        let ended = self.ended
        watcher.schedule(deadline: .now() + .milliseconds(50), repeating: .milliseconds(50))
        watcher.setEventHandler {
            guard ServiceSignals.terminationRequested else { return }
            watcher.cancel()
            ended.withLock { ended in
                guard !ended else { return }
                StandardStream.error.write((clearLine ? "\r\u{1B}[K" : "") + "tlsaudit: interrupted: no further address is begun; "
                    + "the probes in flight finish (each connection within \(Self.seconds(timeout))) and every target done is stored. "
                    + "Interrupt again to quit at once.\n")
            }
        }
        watcher.resume()
    }

    /// Whether the scan was interrupted (asked before each address).
    var requested: Bool { ServiceSignals.terminationRequested }

    /// Stops watching; the three signals end the process again, as they did before.
    func end() {
        ended.withLock { $0 = true }
        watcher.cancel()
        ServiceSignals.restoreTerminationDefaults()
    }

    /// Ends the process by the signal that interrupted it, as its default action would have (a
    /// shell running the command in a loop then stops too; the status is 128 + the signal).
    func endBySignal() -> Never {
        end()
        // Its default action is back already (`end()` restored SIGHUP's, which stayed ignored while
        // the scan finished).
        let signal = ServiceSignals.firstTermination ?? SIGINT
        // Commands run on a dispatch thread, which blocks asynchronous signals: unblocked here, the
        // signal raised is delivered before raise returns.
        var only = sigset_t()
        sigemptyset(&only)
        sigaddset(&only, signal)
        pthread_sigmask(SIG_UNBLOCK, &only, nil)
        raise(signal)
        exit(128 + signal)
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
