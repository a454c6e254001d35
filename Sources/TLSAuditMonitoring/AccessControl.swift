import Foundation
import HummingbirdBcrypt
import Synchronization

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
        for (offset, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
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

/// Checks `Authorization` headers against the credentials. A bcrypt check costs tens of
/// milliseconds of CPU by design, so checks run one at a time on their own queue, at most
/// `checksPerSecond` of them (beyond: "busy", answered 429), and a header that passed is remembered
/// (as Prometheus' exporters do), so a scraper asking every second costs one check, not one a second.
final class AccessChecker: Sendable {
    enum Outcome: Equatable {
        case allowed
        case refused
        /// Too many password checks this second.
        case busy
    }

    private let credentials: AccessCredentials
    private let checksPerSecond: Int
    private let queue = DispatchQueue(label: "tlsaudit.http.bcrypt")
    private struct State {
        var accepted: Set<String> = []
        var second = 0
        var checksThisSecond = 0
    }

    private let state = Mutex(State())

    init(_ credentials: AccessCredentials, checksPerSecond: Int = 10) {
        self.credentials = credentials
        self.checksPerSecond = checksPerSecond
    }

    func check(authorization: String?) async -> Outcome {
        guard credentials.required else { return .allowed }
        guard let authorization else { return .refused }
        if let token = credentials.token, Self.equal(authorization, "Bearer " + token) { return .allowed }
        guard !credentials.users.isEmpty, authorization.hasPrefix("Basic "),
              let decoded = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
              let pair = String(data: decoded, encoding: .utf8), let colon = pair.firstIndex(of: ":") else { return .refused }
        if state.withLock({ $0.accepted.contains(authorization) }) { return .allowed }
        let now = Int(Date().timeIntervalSince1970)
        let admitted = state.withLock { state in
            if state.second != now { state.second = now; state.checksThisSecond = 0 }
            state.checksThisSecond += 1
            return state.checksThisSecond <= checksPerSecond
        }
        guard admitted else { return .busy }
        let user = String(pair[..<colon]), password = String(pair[pair.index(after: colon)...])
        // An unknown user is checked against a known user's hash (and fails): the answer takes as long.
        let hash = credentials.users[user] ?? credentials.users.values.min()!
        let matches = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: Bcrypt.verify(password, hash: Self.openBSDForm(hash))) }
        }
        guard matches, credentials.users[user] != nil else { return .refused }
        state.withLock { state in
            if state.accepted.count >= 64 { state.accepted.removeAll() }
            state.accepted.insert(authorization)
        }
        return .allowed
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
