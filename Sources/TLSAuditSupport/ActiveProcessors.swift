import Foundation

/// The processors this process may use, read once: Foundation's `activeProcessorCount` reads the
/// cgroup's CPU quota from /sys on every call (through `URL` and `Data`, and the runtime's first
/// conformance look-ups of those types), and the JSON encoder and the worker pool ask it per run.
/// A running service keeps the count it started with: a CPU quota changed under it (`docker update
/// --cpus`) sizes its worker pools after a restart.
public enum ActiveProcessors {
    public static let count: Int = ProcessInfo.processInfo.activeProcessorCount
}
