/// Certificate Transparency's Merkle tree (RFC 6962 §2.1, RFC 9162 §2.1): leaf and node hashes,
/// the tree head of a list of leaves, consistency proofs made and checked.
public enum MerkleTree {
    /// SHA-256 of the empty string: the root of the empty tree.
    public static let emptyRoot = Digest.sha256([])

    /// The hash of one leaf: SHA-256(0x00 || leaf).
    public static func leafHash(_ leaf: [UInt8]) -> [UInt8] { Digest.sha256([0] + leaf) }

    /// The hash of an interior node: SHA-256(0x01 || left || right).
    public static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] { Digest.sha256([1] + left + right) }

    /// The largest power of two below `n` (n > 1): where RFC 6962 splits a tree of n leaves.
    static func split(_ n: Int) -> Int {
        var k = 1
        while k << 1 < n { k <<= 1 }
        return k
    }

    /// MTH(D[n]) of the given leaf hashes.
    public static func root(_ leaves: ArraySlice<[UInt8]>) -> [UInt8] {
        switch leaves.count {
        case 0: return emptyRoot
        case 1: return leaves[leaves.startIndex]
        default:
            let k = split(leaves.count), start = leaves.startIndex
            return nodeHash(root(leaves[start..<start + k]), root(leaves[(start + k)...]))
        }
    }

    /// PROOF(m, D[n]) of RFC 6962 §2.1.2: what a log answers to get-sth-consistency.
    public static func consistencyProof(from m: Int, leaves: ArraySlice<[UInt8]>) -> [[UInt8]] {
        let start = leaves.startIndex
        return consistencyProof(from: UInt64(m), size: UInt64(leaves.count)) { (first, end) -> [UInt8] in
            root(leaves[(start + Int(first))..<(start + Int(end))])
        }
    }

    /// PROOF(m, D[n]) made from the roots of parts of the tree: `rangeRoot(start, end)` is
    /// MTH(D[start:end]), asked only for ranges that start at a multiple of the largest power of
    /// two not above their length (what a tiled log's hashes give).
    public static func consistencyProof<Failure: Error>(from m: UInt64, size n: UInt64,
                                                        rangeRoot: (UInt64, UInt64) throws(Failure) -> [UInt8]) throws(Failure) -> [[UInt8]] {
        guard m > 0, m < n else { return [] }
        return try subproof(m, start: 0, end: n, complete: true, rangeRoot)
    }

    private static func subproof<Failure: Error>(_ m: UInt64, start: UInt64, end: UInt64, complete: Bool,
                                                 _ rangeRoot: (UInt64, UInt64) throws(Failure) -> [UInt8]) throws(Failure) -> [[UInt8]] {
        let n = end - start
        if m == n { return complete ? [] : [try rangeRoot(start, end)] }
        let k = UInt64(split(Int(n)))
        if m <= k {
            return try subproof(m, start: start, end: start + k, complete: complete, rangeRoot) + [try rangeRoot(start + k, end)]
        }
        return try subproof(m - k, start: start + k, end: end, complete: false, rangeRoot) + [try rangeRoot(start, start + k)]
    }

    /// Checks a consistency proof between the tree heads of sizes `first` < `second` (RFC 9162
    /// §2.1.4.2). Returns the first tree's frontier (the roots of its perfect subtrees, largest
    /// first), which the proof carries; nil when the proof does not show the second tree extends
    /// the first.
    public static func verifyConsistency(first: UInt64, second: UInt64, firstRoot: [UInt8], secondRoot: [UInt8],
                                         proof: [[UInt8]]) -> MerkleFrontier? {
        guard firstRoot.count == 32, secondRoot.count == 32,
              let walked = walk(first: first, second: second, firstRoot: firstRoot, proof: proof),
              walked.firstRoot == firstRoot, walked.secondRoot == secondRoot else { return nil }
        return walked.frontier
    }

    /// The first tree's frontier a consistency proof carries, taken on trust: for a follower that
    /// starts inside a log (`CTLogFollower.start(at:)`), whose first chunk then checks it (the
    /// entries read after it must make a tree the signed head extends). Nil when the first tree is
    /// a perfect tree (its frontier, its own root, is not in the proof) or the proof is malformed.
    public static func frontier(carriedBy proof: [[UInt8]], first: UInt64, second: UInt64) -> MerkleFrontier? {
        guard first > 0, first & (first - 1) != 0 else { return nil }
        return walk(first: first, second: second, firstRoot: nil, proof: proof)?.frontier
    }

    /// RFC 9162 §2.1.4.2's walk over a consistency proof: the two roots it computes and the first tree's frontier.
    private static func walk(first: UInt64, second: UInt64, firstRoot: [UInt8]?,
                             proof: [[UInt8]]) -> (firstRoot: [UInt8], secondRoot: [UInt8], frontier: MerkleFrontier?)? {
        guard first > 0, first < second, !proof.isEmpty, proof.count <= 130, proof.allSatisfy({ $0.count == 32 }) else { return nil }
        var path = proof[...]
        // A first tree that is a perfect tree is its own first node.
        if first & (first - 1) == 0 {
            guard let firstRoot else { return nil }
            path = ([firstRoot] + proof)[...]
        }
        var fn = first - 1, sn = second - 1
        while fn & 1 == 1 { fn >>= 1; sn >>= 1 }
        var fr = path[path.startIndex], sr = fr
        var leftNodes: [[UInt8]] = []
        for node in path.dropFirst() {
            guard sn != 0 else { return nil }
            if fn & 1 == 1 || fn == sn {
                fr = nodeHash(node, fr)
                sr = nodeHash(node, sr)
                leftNodes.append(node)
                while fn & 1 == 0 && fn != 0 { fn >>= 1; sn >>= 1 }
            } else {
                sr = nodeHash(sr, node)
            }
            fn >>= 1
            sn >>= 1
        }
        guard sn == 0 else { return nil }
        return (fr, sr, MerkleFrontier(size: first, hashes: leftNodes.reversed() + [path[path.startIndex]]))
    }
}

/// The right edge of a Merkle tree: the roots of its perfect subtrees, largest first (one per
/// bit set in its size). Appending a leaf costs one hash and one per carry; the root, one per
/// subtree. A follower that holds it checks that the entries it read make the tree head it was
/// given, without keeping the entries.
public struct MerkleFrontier: Hashable, Codable, Sendable {
    public private(set) var size: UInt64
    public private(set) var hashes: [[UInt8]]

    public init() {
        size = 0
        hashes = []
    }

    /// A frontier as stored or as a consistency proof carried it; nil when `hashes` does not hold
    /// one hash of 32 bytes per bit set in `size`.
    public init?(size: UInt64, hashes: [[UInt8]]) {
        guard hashes.count == size.nonzeroBitCount, hashes.allSatisfy({ $0.count == 32 }) else { return nil }
        self.size = size
        self.hashes = hashes
    }

    private enum CodingKeys: String, CodingKey { case size, hashes }

    /// A stored frontier is checked as `init?(size:hashes:)` checks one.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let size = try container.decode(UInt64.self, forKey: .size)
        guard let frontier = MerkleFrontier(size: size, hashes: try container.decode([[UInt8]].self, forKey: .hashes)) else {
            throw DecodingError.dataCorruptedError(forKey: .hashes, in: container,
                                                   debugDescription: "not one 32-byte hash per bit set in the size \(size)")
        }
        self = frontier
    }

    /// Adds the leaf whose hash is `leafHash` at index `size`.
    public mutating func append(leafHash: [UInt8]) {
        var node = leafHash
        var index = size
        // Each trailing one of the old size is a perfect subtree of the same height as `node`.
        while index & 1 == 1 {
            node = MerkleTree.nodeHash(hashes.removeLast(), node)
            index >>= 1
        }
        hashes.append(node)
        size += 1
    }

    /// MTH of the tree so far.
    public var root: [UInt8] {
        guard var node = hashes.last else { return MerkleTree.emptyRoot }
        for left in hashes.dropLast().reversed() { node = MerkleTree.nodeHash(left, node) }
        return node
    }
}
