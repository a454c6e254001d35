import Foundation
#if canImport(Glibc)
package import Glibc
#endif
public import TLSAuditModel
import TLSAuditSupport

/// A point in time on the monotonic clock, by which an operation must be done.
struct Deadline: Sendable {
    let instant: ContinuousClock.Instant

    init(after seconds: Double) {
        instant = ContinuousClock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
    }

    /// Milliseconds left, rounded up (a poll(2) that times out is then past the deadline), never
    /// negative, capped for poll(2).
    var remainingMilliseconds: Int32 {
        let left = ContinuousClock.now.duration(to: instant)
        let attosecondsPerMillisecond: Int64 = 1_000_000_000_000_000
        let millis = left.components.seconds * 1000
            + (left.components.attoseconds + attosecondsPerMillisecond - 1) / attosecondsPerMillisecond
        return Int32(max(0, min(millis, Int64(Int32.max))))
    }

    var hasPassed: Bool { ContinuousClock.now >= instant }

    /// Seconds left, never negative.
    var remainingSeconds: Double { Double(remainingMilliseconds) / 1000 }
}

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    public enum Family: String, Sendable, Codable {
        case ipv4
        case ipv6
    }

    /// The raw sockaddr bytes (sockaddr_in or sockaddr_in6).
    let storage: [UInt8]
    public let family: Family
    public let host: String
    public let port: Int

    package init?(_ address: UnsafePointer<sockaddr>, length: socklen_t) {
        storage = Array(UnsafeRawBufferPointer(start: address, count: Int(length)))
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            var v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
            inet_ntop(AF_INET, &v4.sin_addr, &buffer, socklen_t(buffer.count))
            family = .ipv4
            port = Int(UInt16(bigEndian: v4.sin_port))
        case AF_INET6:
            var v6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
            inet_ntop(AF_INET6, &v6.sin6_addr, &buffer, socklen_t(buffer.count))
            family = .ipv6
            port = Int(UInt16(bigEndian: v6.sin6_port))
        default:
            return nil
        }
        host = buffer.nulTerminatedString
    }

    /// The same address with another port (sin_port and sin6_port are both at byte 2).
    package func withPort(_ newPort: Int) -> SocketAddress {
        guard newPort != port else { return self }
        var bytes = storage
        bytes[2] = UInt8(truncatingIfNeeded: newPort >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: newPort)
        return bytes.withUnsafeBytes { raw in
            SocketAddress(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length: socklen_t(bytes.count))!
        }
    }

    /// `127.0.0.1:443` or `[::1]:443`.
    public var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    package var socketFamily: Int32 { family == .ipv6 ? AF_INET6 : AF_INET }

    package func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        storage.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(storage.count))
        }
    }
}

/// Name resolution with a deadline (getaddrinfo itself has none).
public enum Resolver {
    /// Every distinct IPv4 and IPv6 address of `host`, in resolver order. A name resolved in the
    /// last `answerLifetime` is answered from memory (`RecentAnswers`): a scan of many ports of one
    /// host, or of many targets behind one name, asks the system once, not once per target.
    public static func resolve(host: String, port: Int, timeout: Double) throws(ProbeFailure) -> [SocketAddress] {
        // An IPv6 literal (and its zone, an interface name compared as written) is not a name to keep.
        let isName = !host.utf8.contains(UInt8(ascii: ":")) && !host.utf8.contains(UInt8(ascii: "%"))
        if isName, let known = RecentAnswers.shared.addresses(of: host) { return known.map { $0.withPort(port) } }
        let addresses = try lookUp(host: host, port: port, timeout: timeout)
        if isName { RecentAnswers.shared.keep(addresses, for: host) }
        return addresses
    }

    /// How long a name's addresses are reused: short against any DNS TTL, so that a scan sees a
    /// changed answer as soon as the system's resolver does, give or take these seconds; failures
    /// are never kept.
    static let answerLifetime: Duration = .seconds(5)

    /// getaddrinfo(3) on a kept thread, given up at `timeout` (getaddrinfo itself has no deadline).
    private static func lookUp(host: String, port: Int, timeout: Double) throws(ProbeFailure) -> [SocketAddress] {
        let result = ResolutionBox()
        let done = DispatchSemaphore(value: 0)
        LookupThreads.shared.run {
            result.set(lookup(host: host, port: port))
            done.signal()
        }
        guard BlockingWait.around({ done.wait(timeout: .now() + timeout) }) == .success else {
            throw ProbeFailure(.dnsFailure, "resolving \(host) took longer than \(formatSeconds(timeout))")
        }
        return try result.get().get()
    }

    private static func lookup(host: String, port: Int) -> Result<[SocketAddress], ProbeFailure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            let reason = String(cString: gai_strerror(status))
            return .failure(ProbeFailure(.dnsFailure, "cannot resolve \(host): \(reason)"))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var cursor = list
        while let entry = cursor {
            if let raw = entry.pointee.ai_addr, let address = SocketAddress(raw, length: entry.pointee.ai_addrlen),
               !addresses.contains(address) {
                addresses.append(address)
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { return .failure(ProbeFailure(.dnsFailure, "\(host) has no IPv4 or IPv6 address")) }
        return .success(addresses)
    }

    /// Parses an IP literal (no lookup).
    public static func numericAddress(_ text: String, port: Int) -> SocketAddress? {
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        var literal = text
        if literal.hasPrefix("["), literal.hasSuffix("]") { literal = String(literal.dropFirst().dropLast()) }
        guard getaddrinfo(literal, String(port), &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        return first.pointee.ai_addr.flatMap { SocketAddress($0, length: first.pointee.ai_addrlen) }
    }

    /// The addresses of the names resolved in the last `answerLifetime`, at most `kept` names
    /// (forgotten all at once when full).
    package final class RecentAnswers: Sendable {
        package static let shared = RecentAnswers(lifetime: Resolver.answerLifetime)
        private struct Answer {
            var addresses: [SocketAddress]
            var expires: ContinuousClock.Instant
        }
        private let answers = SleepingLock<[String: Answer]>([:])
        private let kept = 4_096
        private let lifetime: Duration

        package init(lifetime: Duration) { self.lifetime = lifetime }

        /// A name as DNS compares names: A-Z folded to a-z, nothing else (no Unicode case folding).
        private static func key(_ host: String) -> String {
            String(decoding: host.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        }

        package func addresses(of host: String) -> [SocketAddress]? {
            let now = ContinuousClock.now
            let key = Self.key(host)
            return answers.withLock { answers in
                guard let answer = answers[key] else { return nil }
                guard answer.expires > now else {
                    answers[key] = nil
                    return nil
                }
                return answer.addresses
            }
        }

        package func keep(_ addresses: [SocketAddress], for host: String) {
            let answer = Answer(addresses: addresses, expires: ContinuousClock.now + lifetime)
            let key = Self.key(host)
            answers.withLock { answers in
                if answers.count >= kept { answers.removeAll(keepingCapacity: true) }
                answers[key] = answer
            }
        }
    }

    /// A lock-protected slot: the lookup thread may outlive a timed-out wait.
    private final class ResolutionBox: @unchecked Sendable {
        // @unchecked: every access goes through `lock`.
        private let lock = NSLock()
        private var value: Result<[SocketAddress], ProbeFailure>?
        func set(_ newValue: Result<[SocketAddress], ProbeFailure>) { lock.withLock { value = newValue } }
        func get() -> Result<[SocketAddress], ProbeFailure> {
            lock.withLock { value ?? .failure(ProbeFailure(.internalError, "no resolution result")) }
        }
    }
}

/// A non-blocking TCP socket, closed on deinit. Every syscall's errno is read right after the call.
final class TCPSocket {
    let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Connects within the deadline.
    static func connect(to address: SocketAddress, deadline: Deadline, timeout: Double) throws(ProbeFailure) -> TCPSocket {
        let fd = socket(address.socketFamily, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ProbeFailure(.internalError, "socket(): \(errnoText(errno))") }
        let connection = TCPSocket(descriptor: fd)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let status = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        if status == 0 { return connection }
        let started = errno
        guard started == EINPROGRESS || started == EINTR else { throw failure(connecting: address, errno: started) }
        switch connection.wait(for: Int16(POLLOUT), until: deadline) {
        case .ready:
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 { throw failure(connecting: address, errno: error) }
            return connection
        case .timedOut:
            throw ProbeFailure(.connectTimeout, "no answer to the TCP connection from \(address) within \(formatSeconds(timeout))")
        case .failed(let code):
            throw failure(connecting: address, errno: code)
        }
    }

    private static func failure(connecting address: SocketAddress, errno code: Int32) -> ProbeFailure {
        switch code {
        case ECONNREFUSED:
            return ProbeFailure(.connectionRefused, "\(address) refused the connection (nothing listens on that port)")
        case ETIMEDOUT:
            return ProbeFailure(.connectTimeout, "the TCP connection to \(address) timed out")
        case ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, EAFNOSUPPORT:
            return ProbeFailure(.networkUnreachable, "\(address) cannot be reached from here: \(errnoText(code))")
        default:
            return ProbeFailure(.connectionRefused, "connecting to \(address) failed: \(errnoText(code))")
        }
    }

    enum WaitOutcome: Equatable {
        case ready
        case timedOut
        case failed(Int32)
    }

    /// Writes all of `bytes` before the deadline; false when the peer closed or time ran out.
    func send(_ bytes: [UInt8], until deadline: Deadline) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 { offset += written; continue }
            if written < 0, errno == EAGAIN || errno == EINTR, wait(for: Int16(POLLOUT), until: deadline) == .ready { continue }
            return false
        }
        return true
    }

    /// Reads until `count` bytes arrived, the peer closed, or the deadline passed; returns what came
    /// (at most `maximum` bytes per read, so no more than `count` when `maximum` is 1).
    func receive(atLeast count: Int, until deadline: Deadline, maximum: Int = 4096) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: max(maximum, 1))
        while received.count < count {
            let got = recv(descriptor, &buffer, buffer.count, 0)
            if got > 0 { received += buffer[..<got]; continue }
            if got == 0 { break }
            if errno == EAGAIN || errno == EINTR, wait(for: Int16(POLLIN), until: deadline) == .ready { continue }
            break
        }
        return received
    }

    enum ReceiveOutcome: Equatable {
        case data([UInt8])
        case closed
        case timedOut
        case failed(Int32)
    }

    /// Reads what has arrived (waiting for something until the deadline), at most `maximum` bytes.
    func receiveSome(until deadline: Deadline, maximum: Int) -> ReceiveOutcome {
        var buffer = [UInt8](repeating: 0, count: max(maximum, 1))
        while true {
            let got = recv(descriptor, &buffer, buffer.count, 0)
            if got > 0 { return .data(Array(buffer[..<got])) }
            if got == 0 { return .closed }
            let code = errno
            guard code == EAGAIN || code == EINTR else { return .failed(code) }
            switch wait(for: Int16(POLLIN), until: deadline) {
            case .ready: continue
            case .timedOut: return .timedOut
            case .failed(let code): return .failed(code)
            }
        }
    }

    /// The local end's address, as `[127.0.0.1]` or `[IPv6:::1]` (an SMTP address literal).
    var localAddressLiteral: String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard status == 0, let address = withUnsafePointer(to: &storage, { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: length) }
        }) else { return "[127.0.0.1]" }
        return address.family == .ipv6 ? "[IPv6:\(address.host)]" : "[\(address.host)]"
    }

    /// Waits for `events` (POLLIN / POLLOUT) until the deadline; retries on EINTR.
    func wait(for events: Int16, until deadline: Deadline) -> WaitOutcome {
        Self.wait(descriptor, for: events, until: deadline)
    }

    /// `wait` on any descriptor (a socket OpenSSL reads and writes): a signal caught meanwhile
    /// (`serve`'s, `scan --database`'s) does not end the wait.
    static func wait(_ descriptor: Int32, for events: Int16, until deadline: Deadline) -> WaitOutcome {
        while true {
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let status = BlockingWait.around { poll(&entry, 1, deadline.remainingMilliseconds) }
            if status > 0 { return .ready } // POLLERR / POLLHUP also wake us: the next read or write tells.
            if status == 0 { return .timedOut }
            if errno != EINTR { return .failed(errno) }
        }
    }
}

package func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }

/// Whole milliseconds from `start` to now on the monotonic clock.
func milliseconds(since start: ContinuousClock.Instant) -> Int {
    let elapsed = ContinuousClock.now - start
    return Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
}

/// `10 s`, `0.5 s`.
func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
}
