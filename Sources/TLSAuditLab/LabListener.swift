import Foundation
import TLSAuditProbe
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP listener on an ephemeral port whose accept loop runs on its own thread and
/// hands each connection to `handler` on a thread of its own. The base of every lab server.
final class LabListener: Sendable {
    let port: Int
    private let descriptor: Int32
    private let wakePipe: (read: Int32, write: Int32)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Binds `address` (`127.0.0.1` or `::1`) on port 0. With `accepting == false` the socket
    /// listens with a backlog of 0 and never accepts (see `LabHostileServer.Behavior.blackhole`).
    init(address: String, port requestedPort: Int = 0, backlog: Int32 = 128, accepting: Bool = true,
         handler: @escaping @Sendable (Int32) -> Void) throws {
        let family = address.contains(":") ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LabError("socket(): \(errnoText(errno))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard let bindAddress = Resolver.numericAddress(address, port: requestedPort) else {
            close(fd)
            throw LabError("not an IP address: \(address)")
        }
        let bound = bindAddress.withSockaddr { bind(fd, $0, $1) }
        guard bound == 0, listen(fd, backlog) == 0 else {
            let reason = errnoText(errno)
            close(fd)
            throw LabError("cannot listen on \(address): \(reason)")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let local = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: length) }
        }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            close(fd)
            throw LabError("pipe(): \(errnoText(errno))")
        }
        descriptor = fd
        port = local?.port ?? 0
        wakePipe = (pipeEnds[0], pipeEnds[1])
        if accepting {
            let thread = Thread { [descriptor, wakePipe, finished] in
                Self.acceptLoop(descriptor: descriptor, wake: wakePipe.read, handler: handler)
                finished.signal()
            }
            thread.start()
        } else {
            finished.signal()
        }
    }

    /// Accepts until the wake pipe becomes readable.
    private static func acceptLoop(descriptor: Int32, wake: Int32, handler: @escaping @Sendable (Int32) -> Void) {
        while true {
            var entries = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            guard poll(&entries, 2, -1) > 0 else { continue }
            if entries[1].revents != 0 { return }
            let client = accept(descriptor, nil, nil)
            guard client >= 0 else { continue }
            let thread = Thread { handler(client) }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Stops accepting and closes the listening socket. Connections in progress finish on their own.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(wakePipe.write, &byte, 1)
        finished.wait()
        close(descriptor)
        close(wakePipe.read)
        close(wakePipe.write)
    }

    deinit { stop() }

    /// Sets receive and send timeouts on a connection so that no lab thread waits forever.
    static func setTimeouts(_ fd: Int32, seconds: Int) {
        var time = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Copies each side's bytes to the other until one closes or nothing moves for 5 s.
    static func relay(_ a: Int32, _ b: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            var entries = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
            guard poll(&entries, 2, 5000) > 0 else { return }
            for (from, to) in [(0, 1), (1, 0)] where entries[from].revents != 0 {
                let count = recv(entries[from].fd, &buffer, buffer.count, 0)
                guard count > 0, send(entries[to].fd, buffer, count, Int32(MSG_NOSIGNAL)) == count else { return }
            }
        }
    }
}

/// An error setting up a lab server.
public struct LabError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Ports for tests that need nothing listening.
public enum LabPorts {
    /// A loopback port that was free a moment ago (bound, read back, closed).
    public static func unusedPort() throws -> Int {
        let listener = try LabListener(address: "127.0.0.1", accepting: false) { _ in }
        let port = listener.port
        listener.stop()
        return port
    }
}
