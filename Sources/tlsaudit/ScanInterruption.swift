import Dispatch
import TLSAuditService
import TLSAuditSupport

/// Ctrl-C (SIGINT) and SIGTERM during `scan --database`: the first stops the scan from beginning
/// another address, lets the probes in flight finish (each connection within the timeout) and has every target
/// done stored; the second ends the process at once, as the default action would. Without it, an
/// interrupted scan lost the results finished since the last commit and those of the probes in flight.
final class ScanInterruption: @unchecked Sendable {
    /// Checks for the first signal every 50 ms, to say what happens and give the next one its
    /// default action; cancelled by `end()`. (The signal handler itself only counts.)
    private let watcher = DispatchSource.makeTimerSource(queue: .global())

    /// Starts catching SIGINT and SIGTERM. `timeout` is the probes' (said in the message);
    /// `clearLine` when a progress line is drawn on stderr.
    init(timeout: Double, clearLine: Bool) {
        ServiceSignals.catchTermination()
        let watcher = self.watcher
        watcher.schedule(deadline: .now() + .milliseconds(50), repeating: .milliseconds(50))
        watcher.setEventHandler {
            guard ServiceSignals.terminationRequested else { return }
            ServiceSignals.restoreTerminationDefaults()
            StandardStream.error.write((clearLine ? "\r\u{1B}[K" : "") + "tlsaudit: interrupted: no further address is begun; "
                + "the probes in flight finish (each connection within \(Self.seconds(timeout))) and every target done is stored. "
                + "Interrupt again to quit at once.\n")
            watcher.cancel()
        }
        watcher.resume()
    }

    /// Whether the scan was interrupted (asked before each address).
    var requested: Bool { ServiceSignals.terminationRequested }

    /// Stops watching; SIGINT and SIGTERM end the process again, as they did before.
    func end() {
        watcher.cancel()
        ServiceSignals.restoreTerminationDefaults()
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
