import CProcess

/// SIGHUP, SIGTERM and SIGINT for `serve`, caught from the first instant of the process (an ELF
/// constructor in CProcess installs the handler before the Swift runtime starts): the
/// default action of each would kill it, and systemd does not restart a process that died of
/// SIGHUP. The handler only counts; the service acts once it is ready (a reload asked for during
/// start-up is applied once; a stop request ends the service as soon as it runs).
public enum ServiceSignals {
    /// Installs the counting handler (already done at load time for `tlsaudit serve`).
    public static func install() { tlsaudit_signals_install() }

    /// True once, for any number of SIGHUPs received since the last call.
    static func takeHangup() -> Bool { tlsaudit_signals_take_hangups() > 0 }

    /// A termination signal was received by this handler (ServiceLifecycle may receive them too).
    public static var terminationRequested: Bool { tlsaudit_signals_terminations() > 0 }

    /// Catches SIGTERM, SIGINT and SIGHUP (a closed terminal), counting them as terminations, for a
    /// command that stops gracefully (`scan --database`); `terminationRequested` tells when one
    /// came. The first one gives SIGTERM and SIGINT their default action back at once (in the
    /// handler), so a second one ends the process; further SIGHUPs are ignored (a closing ssh
    /// session sends more than one). A signal the process was started ignoring (SIGINT under
    /// `tlsaudit scan ... &` in a script, SIGHUP under `nohup`) stays ignored.
    public static func catchTermination() { tlsaudit_signals_install_termination() }

    /// SIGTERM, SIGINT and SIGHUP end the process again, as before `catchTermination`.
    public static func restoreTerminationDefaults() { tlsaudit_signals_default_termination() }

    /// The first termination signal received, or nil.
    public static var firstTermination: Int32? {
        let signal = tlsaudit_signals_first_termination()
        return signal == 0 ? nil : signal
    }
}
