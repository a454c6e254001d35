import Foundation
import HummingbirdBcrypt
import Synchronization
import TLSAuditModel
import TLSAuditSupport

/// Who may read the listener's documents: a bearer token, users with bcrypt password hashes (an
/// htpasswd file, as `htpasswd -B` writes it), either, or anyone when neither is configured.
public struct AccessCredentials: Sendable {
    public var token: String?
    /// User name to bcrypt hash (`$2y$`, `$2b$` or `$2a$`).
    public var users: [String: String]

    public init(token: String? = nil, users: [String: String] = [:]) {
        self.token = token
        self.users = users
    }

    public var required: Bool { token != nil || !users.isEmpty }

    /// The users of an htpasswd file: `user:hash` lines, `#` comments and blank lines skipped. Throws
    /// with the line number for a line without a colon or a hash that is not bcrypt (MD5 `$apr1$`,
    /// SHA-1 and crypt hashes are refused: they are fast to guess).
    public static func users(htpasswd text: String, file: String) throws -> [String: String] {
        var users: [String: String] = [:]
        for (offset, raw) in text.fileLines().enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw AccessFileError(description: "\(file) line \(offset + 1): not USER:HASH")
            }
            let user = String(line[..<colon]), hash = String(line[line.index(after: colon)...])
            guard ["$2y$", "$2b$", "$2a$"].contains(where: hash.hasPrefix), hash.count == 60 else {
                throw AccessFileError(description: "\(file) line \(offset + 1): user \(user) has no bcrypt hash (make one with: htpasswd -nB \(user))")
            }
            guard users[user] == nil else { throw AccessFileError(description: "\(file) line \(offset + 1): user \(user) is listed twice") }
            users[user] = hash
        }
        guard !users.isEmpty else { throw AccessFileError(description: "\(file) names no user") }
        return users
    }
}

public struct AccessFileError: Error, CustomStringConvertible {
    public var description: String
}

/// Checks `Authorization` headers against the credentials (scheme names in any case, RFC 7235). A
/// bcrypt check costs tens of milliseconds of CPU by design, so checks run one at a time on their
/// own queue, and each client address (an IPv6 client: its /64) may cause at most `checksPerClient`
/// of them a second for each known user name (beyond: "busy", answered 429), so a flood of guesses
/// cannot lock out another client, nor another user behind the same address (a reverse proxy, a
/// NAT). User names that are not in the file have their own bucket per client,
/// `unknownChecksPerClient` a second, that never spends a known user's, and share
/// `unknownUserChecks` a second over all clients; beyond that, they are refused after as long as a
/// check takes, without one. A pair that passed is remembered (as Prometheus' exporters do) and
/// never waits: a scraper asking every second costs one check, not one a second.
final class AccessChecker: Sendable {
    enum Outcome: Equatable {
        case allowed
        case refused
        /// Too many password checks from this client this second.
        case busy
    }

    /// bcrypt reads at most 72 bytes of a password, and stops at a NUL: a longer password, or one
    /// with a NUL, would pass on its prefix alone.
    static let longestPassword = 72

    private let credentials: AccessCredentials
    private let checksPerClient: Int
    private let unknownChecksPerClient: Int
    private let unknownUserChecks: Int
    private let queue = DispatchQueue(label: "tlsaudit.http.bcrypt")
    private struct State {
        /// `user:password` pairs that passed.
        var accepted: Set<String> = []
        var second = 0
        /// Checks each (client, user name) caused this second (a passed one is given back); unknown
        /// user names count under one key per client.
        var checksByClient: [String: Int] = [:]
        var unknownUserChecks = 0
        /// How long the last check took: what an unknown user beyond the budget waits.
        var checkDuration = Duration.zero
    }

    private let state = Mutex(State())

    init(_ credentials: AccessCredentials, checksPerClient: Int = 5, unknownChecksPerClient: Int = 2, unknownUserChecks: Int = 5) {
        self.credentials = credentials
        self.checksPerClient = checksPerClient
        self.unknownChecksPerClient = unknownChecksPerClient
        self.unknownUserChecks = unknownUserChecks
    }

    /// `client`: the budget's key for the connection's remote address (`clientKey`).
    func check(authorization: String?, client: String) async -> Outcome {
        guard credentials.required else { return .allowed }
        guard let authorization, let space = authorization.firstIndex(of: " ") else { return .refused }
        let scheme = authorization[..<space].lowercased()
        let value = authorization[space...].trimmingCharacters(in: .whitespaces)
        if scheme == "bearer", let token = credentials.token { return Self.equal(value, token) ? .allowed : .refused }
        guard scheme == "basic", !credentials.users.isEmpty, let decoded = Data(base64Encoded: value),
              let pair = String(data: decoded, encoding: .utf8), let colon = pair.firstIndex(of: ":") else { return .refused }
        if state.withLock({ $0.accepted.contains(pair) }) { return .allowed }
        let user = String(pair[..<colon]), password = String(pair[pair.index(after: colon)...])
        guard password.utf8.count <= Self.longestPassword, !password.utf8.contains(0) else { return .refused }
        let known = credentials.users[user]
        let bucket = known == nil ? client + "\n(unknown user)" : client + "\n" + user
        let allowance = known == nil ? unknownChecksPerClient : checksPerClient
        let now = Int(Date().timeIntervalSince1970)
        enum Admission { case check, busy, imitate(Duration) }
        let admission = state.withLock { state -> Admission in
            if state.second != now { state.second = now; state.checksByClient = [:]; state.unknownUserChecks = 0 }
            guard state.checksByClient[bucket, default: 0] < allowance else { return .busy }
            state.checksByClient[bucket, default: 0] += 1
            if known == nil {
                guard state.unknownUserChecks < unknownUserChecks else { return .imitate(state.checkDuration) }
                state.unknownUserChecks += 1
            }
            return .check
        }
        switch admission {
        case .busy: return .busy
        case .imitate(let duration):
            try? await Task.sleep(for: duration)
            return .refused
        case .check: break
        }
        // An unknown user is checked against a known user's hash (and fails): the answer takes as long.
        let hash = known ?? credentials.users.values.min()!
        let (matches, duration) = await withCheckedContinuation { continuation in
            queue.async {
                let clock = ContinuousClock(), start = clock.now
                let matches = Bcrypt.verify(password, hash: Self.openBSDForm(hash))
                continuation.resume(returning: (matches, clock.now - start))
            }
        }
        return state.withLock { state in
            state.checkDuration = duration
            guard matches, known != nil else { return .refused }
            if state.second == now { state.checksByClient[bucket, default: 1] -= 1 }
            if state.accepted.count >= 64 { state.accepted.removeAll() }
            state.accepted.insert(pair)
            return .allowed
        }
    }

    /// The budget's key for a client address: an IPv4 address whole, an IPv6 address by its /64 (one
    /// host usually holds a whole /64), an IPv4-mapped one by its IPv4 part.
    static func clientKey(_ ipAddress: String?) -> String {
        guard let ipAddress, let bytes = IPAddress.bytes(ipAddress), bytes.count == 16 else { return ipAddress ?? "" }
        if bytes.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) { return bytes.suffix(4).map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// The client a request comes from: the connection's `remote` address, or, when that address is
    /// one of `trustedProxies` (`ADDRESS/PREFIX`), the address the proxies forwarded: the chain of
    /// `Forwarded` (RFC 7239) `for=` values, else `X-Forwarded-For`, read from the right, skipping
    /// trusted proxies; the first other entry is the client (an address, or a proxy's obfuscated
    /// identifier as written). What a client writes itself lies to the left of what its proxy adds
    /// and is never reached unless every proxy on the way is trusted.
    static func clientAddress(remote: String?, forwarded: [String], xForwardedFor: [String], trustedProxies: [String]) -> String? {
        func trusted(_ address: String) -> Bool { trustedProxies.contains { IPAddress.ip(address, within: $0) } }
        guard let remote, !trustedProxies.isEmpty, trusted(remote) else { return remote }
        let chain = forwarded.isEmpty ? xForwardedFor.flatMap { $0.split(separator: ",") }.map { forwardedNode(String($0)) }
            : forwarded.flatMap { forwardedFor($0) }
        for node in chain.reversed() {
            guard let node else { return remote } // A malformed entry: the proxy's own address stands.
            let address = IPAddress.canonical(node)
            if let address, trusted(address) { continue }
            return address ?? String(node.prefix(100))
        }
        return chain.first.flatMap { $0 }.flatMap(IPAddress.canonical) ?? remote
    }

    /// The `for=` value of each element of a `Forwarded` header (nil for an element without one).
    static func forwardedFor(_ header: String) -> [String?] {
        header.split(separator: ",").map { element in
            for pair in element.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if parts.count == 2, parts[0].lowercased() == "for" { return forwardedNode(parts[1]) }
            }
            return nil
        }
    }

    /// A node (RFC 7239 section 6): quotes removed, an IPv6 address's brackets and any port dropped.
    static func forwardedNode(_ raw: String) -> String? {
        var node = raw.trimmingCharacters(in: .whitespaces)
        if node.hasPrefix("\""), node.hasSuffix("\""), node.count >= 2 { node = String(node.dropFirst().dropLast()) }
        if node.hasPrefix("["), let close = node.firstIndex(of: "]") { return String(node[node.index(after: node.startIndex)..<close]) }
        if node.filter({ $0 == ":" }).count == 1, let colon = node.firstIndex(of: ":") { node = String(node[..<colon]) }
        return node.isEmpty ? nil : node
    }

    /// `$2y$` (Apache's htpasswd) is the same algorithm as OpenBSD's `$2b$`, the form the checker reads.
    static func openBSDForm(_ hash: String) -> String {
        hash.hasPrefix("$2y$") ? "$2b$" + hash.dropFirst(4) : hash
    }

    /// Compares in time that depends on the lengths only.
    static func equal(_ left: String, _ right: String) -> Bool {
        let a = Array(left.utf8), b = Array(right.utf8)
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
