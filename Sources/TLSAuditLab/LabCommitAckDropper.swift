import Foundation
import Synchronization
import TLSAuditProbe
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on loopback in front of a PostgreSQL server that loses COMMIT acknowledgements: it
/// relays both ways, reading the server's messages (protocol 3), and when the server answers a
/// COMMIT (CommandComplete "COMMIT") it may close both connections instead of passing the answer
/// on. The transaction is committed; the client sees a broken connection and cannot know it was:
/// the fault a write path must survive without recording anything twice. Which answers are lost:
/// the first `dropFirst`, then each with probability `dropRate`.
public final class LabCommitAckDropper: Sendable {
    public let port: Int
    private let listener: LabListener
    private let counts = Counts()

    private final class Counts: Sendable {
        let value = Mutex((commits: 0, dropped: 0, armed: 0))
    }

    public init(upstreamPort: Int, dropFirst: Int = 1, dropRate: Double = 0) throws {
        let counts = self.counts
        listener = try LabListener(address: "127.0.0.1") { client in
            defer { close(client) }
            guard let address = Resolver.numericAddress("127.0.0.1", port: upstreamPort) else { return }
            let upstream = socket(address.socketFamily, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard upstream >= 0 else { return }
            defer { close(upstream) }
            guard address.withSockaddr({ connect(upstream, $0, $1) }) == 0 else { return }
            Self.relay(client: client, server: upstream) {
                counts.value.withLock { counts in
                    counts.commits += 1
                    let drop = counts.commits <= dropFirst || counts.armed > 0 || Double.random(in: 0..<1) < dropRate
                    if drop { counts.dropped += 1 }
                    if counts.armed > 0 { counts.armed -= 1 }
                    return drop
                }
            }
        }
        port = listener.port
    }

    /// COMMIT acknowledgements the server sent, and how many of them were lost on the way.
    public var commits: (answered: Int, dropped: Int) { counts.value.withLock { ($0.commits, $0.dropped) } }

    /// Loses the answers of the next `count` COMMITs, whatever the rate says.
    public func loseNext(_ count: Int) { counts.value.withLock { $0.armed = count } }

    public func stop() { listener.stop() }

    /// Relays until either side closes, or until `dropsCommit` says to lose a COMMIT's answer.
    private static func relay(client: Int32, server: Int32, dropsCommit: () -> Bool) {
        var clientStream = ClientStartup()
        var fromServer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            var entries = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
            guard poll(&entries, 2, 60_000) > 0 else { return }
            if entries[0].revents != 0 {
                let count = recv(client, &buffer, buffer.count, 0)
                guard count > 0 else { return }
                clientStream.read(buffer[0..<count])
                guard send(server, buffer, count, Int32(MSG_NOSIGNAL)) == count else { return }
            }
            if entries[1].revents != 0 {
                let count = recv(server, &buffer, buffer.count, 0)
                guard count > 0 else { return }
                fromServer += buffer[0..<count]
                // Whole messages only; an answer to SSLRequest or GSSENCRequest is one untyped byte.
                var forward: [UInt8] = []
                var offset = 0
                while offset < fromServer.count {
                    if clientStream.singleByteAnswers > 0 {
                        clientStream.singleByteAnswers -= 1
                        forward.append(fromServer[offset])
                        offset += 1
                        continue
                    }
                    guard fromServer.count - offset >= 5 else { break }
                    let length = fromServer[(offset + 1)..<(offset + 5)].reduce(0) { $0 << 8 | Int($1) }
                    guard fromServer.count - offset >= 1 + length else { break }
                    let message = fromServer[offset..<(offset + 1 + length)]
                    if message.first == UInt8(ascii: "C"), Array(message.dropFirst(5)) == Array("COMMIT\0".utf8), dropsCommit() {
                        if !forward.isEmpty { _ = send(client, forward, forward.count, Int32(MSG_NOSIGNAL)) }
                        shutdown(client, Int32(SHUT_RDWR))
                        shutdown(server, Int32(SHUT_RDWR))
                        return
                    }
                    forward += message
                    offset += 1 + length
                }
                fromServer.removeFirst(offset)
                if !forward.isEmpty, send(client, forward, forward.count, Int32(MSG_NOSIGNAL)) != forward.count { return }
            }
        }
    }

    /// The client's side until its StartupMessage: how many SSLRequest / GSSENCRequest it sent,
    /// each answered by the server with a single byte before any message.
    private struct ClientStartup {
        var singleByteAnswers = 0
        private var pending: [UInt8] = []
        private var started = false

        mutating func read(_ bytes: ArraySlice<UInt8>) {
            guard !started else { return }
            pending += bytes
            while pending.count >= 8 {
                let length = pending[0..<4].reduce(0) { $0 << 8 | Int($1) }
                let code = pending[4..<8].reduce(0) { $0 << 8 | Int($1) }
                if length == 8, code == 80_877_103 || code == 80_877_104 {
                    singleByteAnswers += 1
                    pending.removeFirst(8)
                } else {
                    started = true
                    pending = []
                    return
                }
            }
        }
    }
}
