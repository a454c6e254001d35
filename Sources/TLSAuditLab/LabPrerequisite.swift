import Foundation
import TLSAuditProbe
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// Outside programs the tests and the lab rely on, each with the Debian package that has it: a
/// missing one fails with one line that says what to install (`.ci/run` installs them all).
public enum LabPrerequisite {
    public struct Missing: Error, CustomStringConvertible {
        public var description: String
    }

    /// The first of `candidates` that is an executable file (a bare name is looked up on PATH),
    /// or `Missing` naming `package`.
    public static func program(_ candidates: [String], package: String) throws(Missing) -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        let expanded = candidates.flatMap { candidate in
            candidate.contains("/") ? [candidate] : path.split(separator: ":").map { "\($0)/\(candidate)" }
        }
        if let found = expanded.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
        let name = URL(fileURLWithPath: candidates.first ?? package).lastPathComponent
        throw Missing(description: "\(name) is not installed: apt-get install -y \(package) (.ci/run installs it)")
    }

    /// Nothing when python3 imports `module`; else `Missing` saying how to install it (`install`).
    public static func pythonModule(_ module: String, install: String) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try program(["python3"], package: "python3"))
        process.arguments = ["-c", "import \(module)"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Missing(description: "python3 has no module \(module): \(install) (.ci/run installs it)")
        }
    }

    /// Nothing, as root; else `Missing` saying why root is needed (CI runs as root).
    public static func root(for purpose: String) throws(Missing) {
        guard geteuid() != 0 else { return }
        throw Missing(description: "this test \(purpose) and must run as root (.ci/run runs as root in CI)")
    }
}
