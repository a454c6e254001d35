public import Foundation
public import TLSAuditModel

/// A signed tree head (RFC 6962 §4.3), its signature checked with the log's key.
public struct SignedTreeHead: Hashable, Codable, Sendable {
    public var treeSize: UInt64
    public var timestampMs: UInt64
    /// MTH of the tree's `treeSize` leaves (32 bytes).
    public var rootHash: [UInt8]
    /// The log's DigitallySigned TreeHeadSignature, as sent.
    public var signature: [UInt8]

    public init(treeSize: UInt64, timestampMs: UInt64, rootHash: [UInt8], signature: [UInt8]) {
        self.treeSize = treeSize
        self.timestampMs = timestampMs
        self.rootHash = rootHash
        self.signature = signature
    }

    public var timestamp: Date { Date(timeIntervalSince1970: Double(timestampMs) / 1000) }

    /// What the log signs (RFC 6962 §3.5): version v1, tree_hash, the timestamp, the size, the root.
    public static func signedData(treeSize: UInt64, timestampMs: UInt64, rootHash: [UInt8]) -> [UInt8] {
        [0, 1] + SCTVerifier.bigEndian(timestampMs) + SCTVerifier.bigEndian(treeSize) + rootHash
    }
}

/// Why a log could not be read, in words, and what kind of failure it is (what the follower's
/// back-off and counters go by).
public struct CTLogFailure: Error, CustomStringConvertible, Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        /// No answer: refused, reset, timed out.
        case unreachable
        /// 429: the log asks for less.
        case rateLimited = "rate-limited"
        /// Another status than 200.
        case refused
        /// An answer that is not what the API defines, or larger than allowed.
        case malformed
        /// A tree head whose signature does not verify with the log's key.
        case badSignature = "bad-signature"
        /// The follower was told to stop (`CTLogFollower.keepGoing`): no fault of the log's.
        case abandoned
    }

    public var kind: Kind
    public var description: String
    /// Seconds the log asked to wait (Retry-After), when it said.
    public var retryAfter: Double?

    public init(_ kind: Kind, _ description: String, retryAfter: Double? = nil) {
        self.kind = kind
        self.description = description
        self.retryAfter = retryAfter
    }
}

/// One entry of a log as served by get-entries: the MerkleTreeLeaf and the chain that came with it.
public struct RawLogEntry: Sendable {
    public var leafInput: [UInt8]
    public var extraData: [UInt8]
    /// A tiled log's entry names its chain by fingerprints: `CTLogSource.resolveChain` fetches it
    /// (only for an entry that names a watched name) into `extraData`.
    public var pendingChain: PendingChain?
    /// Why the chain could not be had (an issuer the log does not serve, or serves wrong).
    public var chainProblem: String?

    /// The submitted chain of a tiled log's entry, not fetched yet.
    public struct PendingChain: Sendable {
        /// A precertificate entry's precertificate as submitted.
        public var precertificate: [UInt8]?
        /// SHA-256 of each issuer, the issuer first.
        public var fingerprints: [[UInt8]]
    }

    public init(leafInput: [UInt8], extraData: [UInt8]) {
        self.leafInput = leafInput
        self.extraData = extraData
    }

    /// The leaf's hash in the log's tree.
    public var leafHash: [UInt8] { MerkleTree.leafHash(leafInput) }
}

/// Where a follower reads a log: its newest signed tree head, consistency proofs between two of
/// its heads, and its entries. `CTLogClient` reads an RFC 6962 log's API, `CTTileClient` a
/// static-ct-api log's tiles; the follower's checks are the same for both.
public protocol CTLogSource: Sendable {
    /// The log's address, in messages.
    var display: String { get }
    /// The newest tree head, its signature checked with the log's key.
    func treeHead() throws(CTLogFailure) -> SignedTreeHead
    /// PROOF(first, D[second]) (RFC 6962 §2.1.2), `first` < `second` <= a size the log signed.
    func consistency(first: UInt64, second: UInt64) throws(CTLogFailure) -> [[UInt8]]
    /// Entries from `start` to `end` inclusive of the tree of `treeSize` entries the log signed: at
    /// least one, never more than asked, in order.
    func entries(from start: UInt64, to end: UInt64, treeSize: UInt64) throws(CTLogFailure) -> [RawLogEntry]
    /// `entry` with its chain in `extraData` when it came without (`pendingChain`); a chain the log
    /// does not serve as it should is noted (`chainProblem`), a log that does not answer is thrown.
    func resolveChain(_ entry: RawLogEntry) throws(CTLogFailure) -> RawLogEntry
}

extension CTLogSource {
    public func resolveChain(_ entry: RawLogEntry) throws(CTLogFailure) -> RawLogEntry { entry }
}

/// GETs of a log's resources, bounded in size and time, their failures sorted for the back-off.
enum CTLogFetch {
    static func get(_ base: URL, _ path: String, timeout: Double, maximumBody: Int,
                    headers: [(name: String, value: String)] = []) throws(CTLogFailure) -> [UInt8] {
        guard let url = URL(string: base.absoluteString + path) else { throw CTLogFailure(.malformed, "\(base)\(path) is not a URL") }
        let fetched: (response: HTTPClient.Response, body: [UInt8])
        do {
            fetched = try HTTPClient.fetch("GET", url, headers: headers, timeout: timeout, maximumBody: maximumBody)
        } catch {
            throw CTLogFailure(error.tooLarge || error.malformed ? .malformed : .unreachable, error.description)
        }
        let response = fetched.response
        switch response.status {
        case 200: return fetched.body
        case 429: throw CTLogFailure(.rateLimited, "\(url.absoluteString): 429 \(response.reason)", retryAfter: response.retryAfter)
        default: throw CTLogFailure(.refused, "\(url.absoluteString): \(response.status) \(response.reason)", retryAfter: response.retryAfter)
        }
    }
}

/// A reader of one RFC 6962 log over HTTP(S): its tree head (signature checked), consistency
/// proofs and entries. Every answer is bounded in size and time.
public struct CTLogClient: CTLogSource {
    /// The log's base URL, ending in `/` (`https://ct.example/2026h1/`).
    public let base: URL
    /// DER SubjectPublicKeyInfo of the log's key.
    public let key: [UInt8]
    /// Each request's bound, in seconds.
    public let timeout: Double
    /// The largest answer read (get-entries of a few hundred entries is some 1-2 MiB).
    public let maximumBody: Int

    public init?(url: String, key: [UInt8], timeout: Double = 10, maximumBody: Int = 16 << 20) {
        guard let base = URL(string: url.hasSuffix("/") ? url : url + "/"), HTTPClient.fetches(url) else { return nil }
        self.base = base
        self.key = key
        self.timeout = timeout
        self.maximumBody = maximumBody
    }

    /// get-sth: the newest tree head, its signature checked.
    public func treeHead() throws(CTLogFailure) -> SignedTreeHead {
        struct Answer: Decodable {
            var treeSize: UInt64
            var timestamp: UInt64
            var sha256RootHash: String
            var treeHeadSignature: String
            enum CodingKeys: String, CodingKey {
                case treeSize = "tree_size", timestamp, sha256RootHash = "sha256_root_hash", treeHeadSignature = "tree_head_signature"
            }
        }
        let answer: Answer = try get("ct/v1/get-sth")
        guard let root = Data(base64Encoded: answer.sha256RootHash), root.count == 32,
              let signed = Data(base64Encoded: answer.treeHeadSignature) else {
            throw CTLogFailure(.malformed, "\(base)ct/v1/get-sth: the root hash or the signature is not base64 of the right size")
        }
        let head = SignedTreeHead(treeSize: answer.treeSize, timestampMs: answer.timestamp, rootHash: Array(root), signature: Array(signed))
        guard Self.verify(head, key: key) else {
            throw CTLogFailure(.badSignature, "\(base)ct/v1/get-sth: the tree head of size \(head.treeSize) is not signed by the log's key")
        }
        return head
    }

    /// Whether `head`'s signature (a DigitallySigned with SHA-256) verifies with `key`.
    public static func verify(_ head: SignedTreeHead, key: [UInt8]) -> Bool {
        let signature = head.signature
        // hash algorithm sha256 (4), any signature algorithm, a two-byte length, the signature.
        guard signature.count > 4, signature[0] == 4,
              Int(signature[2]) << 8 | Int(signature[3]) == signature.count - 4 else { return false }
        let data = SignedTreeHead.signedData(treeSize: head.treeSize, timestampMs: head.timestampMs, rootHash: head.rootHash)
        return DetachedSignature.verifySHA256(Array(signature[4...]), over: data, keyDER: key)
    }

    /// get-sth-consistency between two tree sizes (`first` < `second`).
    public func consistency(first: UInt64, second: UInt64) throws(CTLogFailure) -> [[UInt8]] {
        struct Answer: Decodable { var consistency: [String] }
        let answer: Answer = try get("ct/v1/get-sth-consistency?first=\(first)&second=\(second)")
        var proof: [[UInt8]] = []
        for node in answer.consistency {
            guard let bytes = Data(base64Encoded: node), bytes.count == 32 else {
                throw CTLogFailure(.malformed, "\(base)ct/v1/get-sth-consistency: a proof node is not 32 bytes of base64")
            }
            proof.append(Array(bytes))
        }
        return proof
    }

    /// get-entries from `start` to `end` inclusive: the log may answer fewer (never none, never
    /// more, never other indexes than asked).
    public func entries(from start: UInt64, to end: UInt64) throws(CTLogFailure) -> [RawLogEntry] {
        struct Answer: Decodable {
            struct Entry: Decodable {
                var leafInput: String
                var extraData: String
                enum CodingKeys: String, CodingKey { case leafInput = "leaf_input", extraData = "extra_data" }
            }
            var entries: [Entry]
        }
        guard start <= end else { throw CTLogFailure(.malformed, "get-entries from \(start) to \(end): an empty range") }
        let path = "ct/v1/get-entries?start=\(start)&end=\(end)"
        let answer: Answer = try get(path)
        let asked = end - start == UInt64.max ? UInt64.max : end - start + 1
        guard !answer.entries.isEmpty, UInt64(answer.entries.count) <= asked else {
            throw CTLogFailure(.malformed, "\(base)\(path): \(answer.entries.count) entries for \(asked) asked")
        }
        var entries: [RawLogEntry] = []
        entries.reserveCapacity(answer.entries.count)
        for (offset, entry) in answer.entries.enumerated() {
            guard let leaf = Data(base64Encoded: entry.leafInput), let extra = Data(base64Encoded: entry.extraData) else {
                throw CTLogFailure(.malformed, "\(base)\(path): entry \(start + UInt64(offset)) is not base64")
            }
            entries.append(RawLogEntry(leafInput: Array(leaf), extraData: Array(extra)))
        }
        return entries
    }

    private func get<Answer: Decodable>(_ path: String) throws(CTLogFailure) -> Answer {
        let body = try CTLogFetch.get(base, path, timeout: timeout, maximumBody: maximumBody)
        do {
            return try JSONDecoder().decode(Answer.self, from: Data(body))
        } catch {
            throw CTLogFailure(.malformed, "\(base)\(path): not the JSON RFC 6962 defines (\(body.count) bytes)")
        }
    }

    public func entries(from start: UInt64, to end: UInt64, treeSize: UInt64) throws(CTLogFailure) -> [RawLogEntry] {
        try entries(from: start, to: end)
    }

    public var display: String { base.absoluteString }
}
