import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// sd_notify(3) without libsystemd: datagrams to `$NOTIFY_SOCKET` (a path, or `@name` for the
/// abstract namespace). Does nothing when the variable is unset (not started by systemd).
struct SystemdNotifier: Sendable {
    let socketPath: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        watchdogInterval = environment["WATCHDOG_USEC"].flatMap(Double.init).map { $0 / 1_000_000 }
    }

    /// Seconds between WATCHDOG=1 pings systemd expects (`WatchdogSec=`), when set.
    let watchdogInterval: Double?

    var isActive: Bool { socketPath != nil }

    func ready(status: String) { send("READY=1\nSTATUS=\(status)") }
    func reloading() { send("RELOADING=1\nMONOTONIC_USEC=\(monotonicMicroseconds())") }
    func stopping() { send("STOPPING=1") }
    func watchdog() { send("WATCHDOG=1") }
    func status(_ text: String) { send("STATUS=\(text)") }

    /// Sends one notification; failures are ignored (systemd may have gone away).
    func send(_ message: String) {
        guard let socketPath else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 } // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count)
        let payload = Array(message.utf8)
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                sendto(fd, payload, payload.count, Int32(MSG_NOSIGNAL), sockaddrPointer, length)
            }
        }
    }

    private func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}
