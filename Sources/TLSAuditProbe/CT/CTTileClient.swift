public import Foundation
import Synchronization
public import TLSAuditModel

/// A reader of one static-ct-api log (c2sp.org/static-ct-api) over HTTP(S): its checkpoint (the
/// log's RFC 6962 tree head signature, as a note signature), the hashes of its tree as tiles, from
/// which the consistency proofs a follower checks are computed, and its entries as data tiles,
/// their chains from the issuer bundle. Every answer is bounded in size and time; gzip answers are
/// inflated within the same bound.
public struct CTTileClient: CTLogSource {
    /// The monitoring prefix, ending in `/` (a log list's `monitoring_url`).
    public let base: URL
    /// DER SubjectPublicKeyInfo of the log's key.
    public let key: [UInt8]
    public let timeout: Double
    private let cache = Cache()

    /// A data tile of 256 entries, each some 2-5 KiB, is well under this; a hash tile is 8 KiB.
    static let maximumTile = 8 << 20
    /// A checkpoint is a few lines, whatever witnesses cosign it.
    static let maximumCheckpoint = 64 << 10
    /// An issuer's certificate, DER.
    static let maximumIssuer = 64 << 10
    /// Fingerprints of a submitted chain a data tile entry may name.
    static let maximumChain = 16

    public init?(url: String, key: [UInt8], timeout: Double = 10) {
        guard let base = URL(string: url.hasSuffix("/") ? url : url + "/"), HTTPClient.fetches(url) else { return nil }
        self.base = base
        self.key = key
        self.timeout = timeout
    }

    public var display: String { base.absoluteString }

    /// Tiles and issuers fetched, kept while a follower reads nearby (both are immutable); bounded.
    private final class Cache: Sendable {
        let tiles = Mutex([String: [UInt8]]())
        let issuers = Mutex([[UInt8]: [UInt8]]())
    }

    // MARK: - The checkpoint

    /// The checkpoint as a signed tree head: its note signature by the log's key (key name the
    /// origin line, key ID from the log id, type 0x05) checked as RFC 6962 checks a tree head.
    public func treeHead() throws(CTLogFailure) -> SignedTreeHead {
        let body = try CTLogFetch.get(base, "checkpoint", timeout: timeout, maximumBody: Self.maximumCheckpoint, headers: Self.accept)
        return try Self.parseCheckpoint(body, key: key, from: display + "checkpoint")
    }

    /// Parses and checks a checkpoint (c2sp.org/tlog-checkpoint, c2sp.org/signed-note).
    public static func parseCheckpoint(_ body: [UInt8], key: [UInt8], from source: String) throws(CTLogFailure) -> SignedTreeHead {
        func malformed(_ why: String) -> CTLogFailure { CTLogFailure(.malformed, "\(source): \(why)") }
        guard let text = String(validating: body, as: UTF8.self), let split = text.range(of: "\n\n") else {
            throw malformed("not a signed note (UTF-8 text, a blank line before the signatures)")
        }
        let lines = text[..<split.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
        // RFC 6962 note signatures allow no extension lines: origin, size, root.
        guard lines.count == 3, !lines[0].isEmpty, let size = UInt64(lines[1]), lines[1] == String(size),
              let root = Data(base64Encoded: String(lines[2])), root.count == 32 else {
            throw malformed("the checkpoint body is not an origin, a decimal tree size and a base64 root hash")
        }
        let origin = String(lines[0])
        let logID = Digest.sha256(key)
        let keyID = Array(Digest.sha256(Array(origin.utf8) + [0x0A, 0x05] + logID).prefix(4))
        // A signed note ends with a newline, and every line after the blank one is a signature line.
        let signatureLines = text[split.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
        guard text.hasSuffix("\n"), signatureLines.dropLast().allSatisfy({ $0.hasPrefix("\u{2014} ") && $0.split(separator: " ").count == 3 }),
              signatureLines.count > 1 else {
            throw malformed("the lines after the checkpoint are not all signature lines (\u{2014} name base64)")
        }
        for line in signatureLines.dropLast() {
            // "— <key name> <base64(key ID || signature)>"
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count == 3, fields[0] == "\u{2014}", fields[1] == origin,
                  let signed = Data(base64Encoded: String(fields[2])).map(Array.init), signed.count > 12,
                  Array(signed.prefix(4)) == keyID else { continue }
            let timestamp = signed[4..<12].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let head = SignedTreeHead(treeSize: size, timestampMs: timestamp, rootHash: Array(root), signature: Array(signed[12...]))
            guard CTLogClient.verify(head, key: key) else {
                throw CTLogFailure(.badSignature, "\(source): the checkpoint of size \(size) is not signed by the log's key")
            }
            return head
        }
        throw CTLogFailure(.badSignature, "\(source): the checkpoint carries no signature by the log's key (key name \(origin))")
    }

    // MARK: - Proofs from tiles

    public func consistency(first: UInt64, second: UInt64) throws(CTLogFailure) -> [[UInt8]] {
        try MerkleTree.consistencyProof(from: first, size: second) { (start, end) throws(CTLogFailure) -> [UInt8] in
            try rangeRoot(start, end, treeSize: second)
        }
    }

    /// MTH(D[start:end]) of the tree of `treeSize` entries, from its tiles.
    func rangeRoot(_ start: UInt64, _ end: UInt64, treeSize: UInt64) throws(CTLogFailure) -> [UInt8] {
        let count = end - start
        if count & (count - 1) == 0, start % count == 0 {
            return try subtreeRoot(height: count.trailingZeroBitCount, index: start / count, treeSize: treeSize)
        }
        let k = UInt64(MerkleTree.split(Int(count)))
        return MerkleTree.nodeHash(try rangeRoot(start, start + k, treeSize: treeSize), try rangeRoot(start + k, end, treeSize: treeSize))
    }

    /// The root of the perfect subtree of 2^height entries whose first is `index` << height: from
    /// the tile of level height / 8 that holds its hashes, hashed up the remaining levels.
    private func subtreeRoot(height: Int, index: UInt64, treeSize: UInt64) throws(CTLogFailure) -> [UInt8] {
        let level = height / 8, rest = height % 8
        guard level <= 5 else { throw CTLogFailure(.malformed, "\(display): a tree too large for tiles") }
        let first = index << UInt64(rest), count = 1 << rest
        let tile = first / 256, offset = Int(first % 256)
        let width = Int(min(256, (treeSize >> UInt64(8 * level)) - tile * 256))
        let bytes = try hashTile(level: level, index: tile, width: width)
        let hashes = (0..<count).map { Array(bytes[(offset + $0) * 32..<(offset + $0 + 1) * 32]) }
        return MerkleTree.root(hashes[...])
    }

    /// A hash tile of `width` hashes: the partial tile, or else the full one's first `width`.
    private func hashTile(level: Int, index: UInt64, width: Int) throws(CTLogFailure) -> [UInt8] {
        let key = "\(level)/\(index)/\(width)"
        if let cached = cache.tiles.withLock({ $0[key] }) { return cached }
        let bytes = try tile("tile/\(level)/" + Self.tilePath(index), width: width, entrySize: 32)
        cache.tiles.withLock { tiles in
            if tiles.count >= 64 { tiles.removeAll() }
            tiles[key] = bytes
        }
        return bytes
    }

    /// A tile of `width` entries: the partial tile first when `width` < 256 and, should the log
    /// serve it no longer, the full tile (`entrySize` 32 for hash tiles: exactly `width` hashes).
    private func tile(_ path: String, width: Int, entrySize: Int?) throws(CTLogFailure) -> [UInt8] {
        var bytes: [UInt8]
        if width < 256 {
            do {
                bytes = try CTLogFetch.get(base, path + ".p/\(width)", timeout: timeout, maximumBody: Self.maximumTile, headers: Self.accept)
            } catch where error.kind == .refused {
                bytes = try CTLogFetch.get(base, path, timeout: timeout, maximumBody: Self.maximumTile, headers: Self.accept)
            }
        } else {
            bytes = try CTLogFetch.get(base, path, timeout: timeout, maximumBody: Self.maximumTile, headers: Self.accept)
        }
        if let entrySize {
            guard bytes.count == width * entrySize || bytes.count == 256 * entrySize else {
                throw CTLogFailure(.malformed, "\(display)\(path): \(bytes.count) bytes, not \(width) hashes")
            }
            bytes = Array(bytes.prefix(width * entrySize))
        }
        return bytes
    }

    /// What the spec asks clients to accept (data tiles may come gzip unasked; the rest may too, behind a CDN).
    static let accept = [(name: "Accept-Encoding", value: "gzip, identity")]

    /// A tile index as path elements of three digits, all but the last prefixed `x` (1234067: `x001/x234/067`).
    public static func tilePath(_ index: UInt64) -> String {
        var groups: [String] = []
        var rest = index
        repeat {
            groups.insert(String(format: "%03d", Int(rest % 1000)), at: 0)
            rest /= 1000
        } while rest > 0
        return groups.enumerated().map { $0.offset < groups.count - 1 ? "x" + $0.element : $0.element }.joined(separator: "/")
    }

    // MARK: - Entries

    /// The entries of the data tile that holds `start`, from `start` to at most `end`: their leaves
    /// as RFC 6962's get-entries would serve them, their chains by fingerprint (`resolveChain`
    /// fetches one when the entry matters).
    public func entries(from start: UInt64, to end: UInt64, treeSize: UInt64) throws(CTLogFailure) -> [RawLogEntry] {
        guard start <= end, start < treeSize else { throw CTLogFailure(.malformed, "entries \(start) to \(end) of a tree of \(treeSize)") }
        let tile = start / 256
        let width = Int(min(256, treeSize - tile * 256))
        let path = "tile/data/" + Self.tilePath(tile)
        let bytes = try self.tile(path, width: width, entrySize: nil)
        var reader = TLSReader(bytes)
        var entries: [RawLogEntry] = []
        let last = min(end, tile * 256 + UInt64(width) - 1)
        for position in 0..<UInt64(width) {
            let index = tile * 256 + position
            guard let leaf = Self.tileLeaf(&reader) else {
                throw CTLogFailure(.malformed, "\(display)\(path): entry \(index) does not decode")
            }
            // A full tile read for a partial width: the entries past the tree are not this tree's.
            guard index >= start else { continue }
            guard index <= last else { break }
            var entry = RawLogEntry(leafInput: [0, 0] + leaf.timestampedEntry, extraData: [])
            entry.pendingChain = RawLogEntry.PendingChain(precertificate: leaf.precertificate, fingerprints: leaf.chain)
            entries.append(entry)
        }
        return entries
    }

    /// One TileLeaf: the TimestampedEntry as the tree hashes it, the precertificate as submitted,
    /// the fingerprints of the submitted chain.
    static func tileLeaf(_ reader: inout TLSReader) -> (timestampedEntry: [UInt8], precertificate: [UInt8]?, chain: [[UInt8]])? {
        let start = reader.offset
        guard reader.bytes(8) != nil, let type = reader.integer(2) else { return nil }
        switch type {
        case 0:
            guard let certificate = reader.vector(3), !certificate.isEmpty else { return nil }
        case 1:
            guard reader.bytes(32) != nil, let tbs = reader.vector(3), !tbs.isEmpty else { return nil }
        default:
            return nil
        }
        guard reader.vector(2) != nil else { return nil }
        // The TimestampedEntry as the tile holds it, which is as the tree hashes it.
        let entry = reader.bytes(since: start)
        var precertificate: [UInt8]?
        if type == 1 {
            guard let submitted = reader.vector(3), !submitted.isEmpty else { return nil }
            precertificate = submitted
        }
        guard let fingerprints = reader.vector(2), fingerprints.count % 32 == 0, fingerprints.count / 32 <= maximumChain else { return nil }
        let chain = stride(from: 0, to: fingerprints.count, by: 32).map { Array(fingerprints[$0..<$0 + 32]) }
        return (entry, precertificate, chain)
    }

    /// The entry's chain from the issuers (each fetched once, checked against its fingerprint), as
    /// RFC 6962's extra_data holds it. An issuer the log refuses or serves wrong is noted on the
    /// entry (judged without its chain); one it does not answer for is thrown (read again later).
    public func resolveChain(_ entry: RawLogEntry) throws(CTLogFailure) -> RawLogEntry {
        guard let pending = entry.pendingChain else { return entry }
        var resolved = entry
        resolved.pendingChain = nil
        var chain: [[UInt8]] = []
        do {
            for fingerprint in pending.fingerprints { chain.append(try issuer(fingerprint)) }
        } catch where error.kind == .refused || error.kind == .malformed {
            resolved.chainProblem = "the log's issuer bundle: \(error.description)"
            return resolved
        }
        let chainList = SCTVerifier.lengthPrefixed(chain.flatMap { SCTVerifier.lengthPrefixed($0, bytes: 3) }, bytes: 3)
        resolved.extraData = pending.precertificate.map { SCTVerifier.lengthPrefixed($0, bytes: 3) + chainList } ?? chainList
        return resolved
    }

    /// An issuer by its fingerprint, checked to hash to it.
    private func issuer(_ fingerprint: [UInt8]) throws(CTLogFailure) -> [UInt8] {
        if let cached = cache.issuers.withLock({ $0[fingerprint] }) { return cached }
        let path = "issuer/" + fingerprint.hex
        let der = try CTLogFetch.get(base, path, timeout: timeout, maximumBody: Self.maximumIssuer, headers: Self.accept)
        guard Digest.sha256(der) == fingerprint else {
            throw CTLogFailure(.malformed, "\(display)\(path): the certificate served does not hash to its fingerprint")
        }
        cache.issuers.withLock { issuers in
            if issuers.count >= 1_024 { issuers.removeAll() }
            issuers[fingerprint] = der
        }
        return der
    }
}
