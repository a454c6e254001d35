import Foundation
import TLSAuditProbe
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP CONNECT proxy on loopback, for testing deliveries through a proxy: it records each
/// request's head, opens a tunnel to the loopback port it names, and relays bytes both ways until
/// either side closes. It connects only to 127.0.0.1 / ::1, whatever host the request names.
public final class LabConnectProxy: Sendable {
    public let port: Int
    private let listener: LabListener
    private let log = RequestLog()

    private final class RequestLog: Sendable {
        let heads = Mutex<[String]>([])
    }

    /// `lineEnd`: what ends the lines of the proxy's answers ("\n" for a proxy that sends bare LF).
    public init(lineEnd: String = "\r\n") throws {
        let log = self.log
        listener = try LabListener(address: "127.0.0.1") { client in
            defer { close(client) }
            LabListener.setTimeouts(client, seconds: 5)
            guard let head = Self.readHead(client) else { return }
            log.heads.withLock { $0.append(head) }
            let words = head.split(separator: " ")
            guard words.count >= 2, words[0] == "CONNECT", let colon = words[1].lastIndex(of: ":"),
                  let port = Int(words[1][words[1].index(after: colon)...]) else {
                Self.reply(client, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            }
            let host = words[1][..<colon].contains(":") || words[1].hasPrefix("[") ? "::1" : "127.0.0.1"
            guard let address = Resolver.numericAddress(host, port: port) else { return }
            let upstream = socket(address.socketFamily, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard upstream >= 0 else { return }
            defer { close(upstream) }
            guard address.withSockaddr({ connect(upstream, $0, $1) }) == 0 else {
                Self.reply(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            }
            Self.reply(client, "HTTP/1.1 200 Connection established" + lineEnd + lineEnd)
            LabListener.relay(client, upstream)
        }
        port = listener.port
    }

    /// The heads of the requests received (request line and headers), in arrival order.
    public var requests: [String] { log.heads.withLock { $0 } }

    public func stop() { listener.stop() }

    /// Reads byte by byte up to the blank line, so nothing of the tunnelled stream is consumed.
    private static func readHead(_ fd: Int32) -> String? {
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !(head.count >= 4 && Array(head.suffix(4)) == [13, 10, 13, 10]) {
            guard read(fd, &byte, 1) == 1, head.count < 16_384 else { return nil }
            head.append(byte)
        }
        return String(decoding: head, as: UTF8.self)
    }

    private static func reply(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL))
    }
}
