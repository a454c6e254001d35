public import Foundation
public import TLSAuditModel

/// Where a follower stands in one log: the newest tree head it verified, and the tree of the
/// entries it has read (its size is the next index to read). Kept in the store between steps
/// and across restarts.
public struct CTLogPosition: Codable, Hashable, Sendable {
    /// The newest head verified: its signature, and its consistency with the head before it.
    public var head: SignedTreeHead?
    /// The tree of the entries read so far; nil for a follower that started at the log's end and
    /// has not yet seen the log grow (the frontier of its start comes with the next consistency proof).
    public var read: MerkleFrontier?
    /// Where a follower that started at the end started (entries before it are not read).
    public var startedAt: UInt64

    public init(head: SignedTreeHead? = nil, read: MerkleFrontier? = nil, startedAt: UInt64 = 0) {
        self.head = head
        self.read = read
        self.startedAt = startedAt
    }

    /// The next index to read.
    public var nextIndex: UInt64 { read?.size ?? startedAt }

    /// Entries the verified head holds that are not read yet.
    public var backlog: UInt64 { (head?.treeSize ?? 0) - min(head?.treeSize ?? 0, nextIndex) }
}

/// What a log did that a monitor must not take as data: each is an alert, and nothing the log
/// served with it is acted on.
public enum CTLogProblem: Hashable, Sendable, CustomStringConvertible {
    /// A signed head smaller than one the log signed before.
    case rewound(from: UInt64, to: UInt64)
    /// A signed head that no consistency proof joins to the one before: the log forked.
    case inconsistent(from: UInt64, to: UInt64)
    /// Entries whose leaves do not make the signed tree: the log served other entries than it logged.
    case entriesDoNotMatch(from: UInt64, to: UInt64, head: UInt64)

    public var description: String {
        switch self {
        case .rewound(let from, let to): "the log signed a tree head of \(to) entries after one of \(from): it rewound"
        case .inconsistent(let from, let to): "no consistency proof joins the log's head of \(to) entries to its head of \(from): the log forked"
        case .entriesDoNotMatch(let from, let to, let head):
            "entries \(from) to \(to - 1) as served do not make the log's signed tree of \(head) entries"
        }
    }
}

/// One step of a follower: the position to keep, the entries read and verified that mention a
/// watched name, and what went wrong.
public struct CTLogStep: Sendable {
    public var position: CTLogPosition
    /// Verified entries whose certificate mentions a watched name, with their index.
    public var matches: [(index: UInt64, entry: ParsedLogEntry)] = []
    /// Entries read and verified in this step.
    public var read = 0
    /// Verified entries that could not be decoded (counted, skipped).
    public var malformed = 0
    public var problem: CTLogProblem?
}

/// Follows one log (RFC 6962 or static-ct-api, through its `CTLogSource`): verifies each new head
/// against the last (consistency proof), reads the entries in bounded chunks and acts on none until
/// their leaves are shown to be the signed tree's (each chunk's tree against the head by a
/// consistency proof, the last by the root).
public struct CTLogFollower: Sendable {
    public let client: any CTLogSource
    /// Entries read in one step at most (what is held in memory is this chunk's matches).
    public let chunk: UInt64
    /// Lowercase ASCII names a certificate must mention to be decoded (`ParsedLogEntry.mentions`).
    public let needles: [[UInt8]]

    /// Bytes of matching entries one step holds at most: a chunk ends early when they pass it
    /// (the entries up to there are verified and kept, the rest read in the next step).
    public let matchBytes: Int
    /// Asked before each page read: false stops the step (`CTLogFailure.Kind.abandoned`). A fleet
    /// node renews its claim on the log here, so that a long step does not outlive it.
    public var keepGoing: (@Sendable () -> Bool)?

    public init(client: any CTLogSource, chunk: UInt64 = 1_000, needles: [[UInt8]], matchBytes: Int = 32 << 20) {
        self.client = client
        self.chunk = max(1, chunk)
        self.needles = needles.map { $0.map(ParsedLogEntry.lower) }
        self.matchBytes = matchBytes
    }

    /// Where a follower starts: at the log's current head (`fromBeginning == false`: what is
    /// logged from now on), or before its first entry.
    public func start(fromBeginning: Bool) throws(CTLogFailure) -> CTLogPosition {
        Self.position(at: try client.treeHead(), fromBeginning: fromBeginning)
    }

    /// Before `head`'s first entry, or at its end (the frontier of what is before comes with the next consistency proof).
    private static func position(at head: SignedTreeHead, fromBeginning: Bool) -> CTLogPosition {
        fromBeginning ? CTLogPosition(head: head, read: MerkleFrontier(), startedAt: 0)
            : CTLogPosition(head: head, read: head.treeSize == 0 ? MerkleFrontier() : nil, startedAt: head.treeSize)
    }

    /// Where a follower that reads from entry `index` on starts (a backfill): the frontier of the
    /// entries before it comes from a consistency proof to the log's head, and the first chunk
    /// read checks it. An index that is a power of two starts one entry earlier (the frontier of a
    /// perfect tree is not in a proof); past the head, at the head.
    public func start(at index: UInt64) throws(CTLogFailure) -> CTLogPosition {
        let head = try client.treeHead()
        var first = min(index, head.treeSize)
        if first > 0, first & (first - 1) == 0 { first -= 1 }
        if first == 1 { first = 0 }
        guard first > 0, first < head.treeSize else { return Self.position(at: head, fromBeginning: first == 0) }
        let proof = try client.consistency(first: first, second: head.treeSize)
        guard let frontier = MerkleTree.frontier(carriedBy: proof, first: first, second: head.treeSize) else {
            throw CTLogFailure(.malformed, "\(client.display): the consistency proof from \(first) to \(head.treeSize) is malformed")
        }
        return CTLogPosition(head: head, read: frontier, startedAt: first)
    }

    /// The first index whose entry the log took at `date` or later, by bisection over the tree of
    /// `treeSize` entries (a log's timestamps rise with its indexes, give or take its merge delay):
    /// some 40 single-entry reads for a log of billions. `treeSize` when none is.
    public func firstIndex(loggedAtOrAfter date: Date, treeSize: UInt64) throws(CTLogFailure) -> UInt64 {
        let wanted = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        var low: UInt64 = 0, high = treeSize
        while low < high {
            let middle = low + (high - low) / 2
            guard let entry = try client.entries(from: middle, to: middle, treeSize: treeSize).first else {
                throw CTLogFailure(.malformed, "\(client.display): no entry \(middle) in a tree of \(treeSize)")
            }
            let timestamp = try ParsedLogEntry.parse(entry).timestampMs
            if timestamp < wanted { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Reads the newest head and then at most `chunk` entries; the position advances only over
    /// what was verified.
    public func step(_ position: CTLogPosition) throws(CTLogFailure) -> CTLogStep {
        var step = CTLogStep(position: position)
        let newest = try client.treeHead()
        guard let known = position.head else {
            step.position.head = newest
            return step
        }
        if newest.treeSize < known.treeSize {
            // An older head (a cache or a replica behind) is no fault when the known one extends
            // it; the reading goes on toward the known head.
            // A log that cannot answer for the proof now fails this step; it does not count as a rewind.
            var consistent = newest.treeSize == 0
            if !consistent {
                let proof = try client.consistency(first: newest.treeSize, second: known.treeSize)
                consistent = MerkleTree.verifyConsistency(first: newest.treeSize, second: known.treeSize, firstRoot: newest.rootHash,
                                                          secondRoot: known.rootHash, proof: proof) != nil
            }
            guard consistent else {
                step.problem = .rewound(from: known.treeSize, to: newest.treeSize)
                return step
            }
        } else if newest.treeSize == known.treeSize {
            guard newest.rootHash == known.rootHash else {
                step.problem = .inconsistent(from: known.treeSize, to: newest.treeSize)
                return step
            }
            // The same tree signed again: the newer time says the log is alive.
            if newest.timestampMs > known.timestampMs { step.position.head = newest }
        } else if known.treeSize == 0 {
            step.position.head = newest
        } else {
            let proof = try client.consistency(first: known.treeSize, second: newest.treeSize)
            guard let frontier = MerkleTree.verifyConsistency(first: known.treeSize, second: newest.treeSize, firstRoot: known.rootHash,
                                                             secondRoot: newest.rootHash, proof: proof) else {
                step.problem = .inconsistent(from: known.treeSize, to: newest.treeSize)
                return step
            }
            if step.position.read == nil, position.startedAt == known.treeSize { step.position.read = frontier }
            step.position.head = newest
        }
        if step.position.read == nil, position.startedAt == 0 { step.position.read = MerkleFrontier() }
        try read(&step)
        return step
    }

    /// Reads entries from the position's frontier toward its head, one chunk, and keeps them
    /// only when their tree is the head's.
    private func read(_ step: inout CTLogStep) throws(CTLogFailure) {
        guard let head = step.position.head, var frontier = step.position.read, frontier.size < head.treeSize else { return }
        let first = frontier.size
        var end = head.treeSize - first > chunk ? first + chunk : head.treeSize
        var matches: [(index: UInt64, entry: ParsedLogEntry)] = []
        var matched = 0, malformed = 0
        var index = first
        pages: while index < end {
            if let keepGoing, !keepGoing() { throw CTLogFailure(.abandoned, "\(client.display): the follower was told to stop (its claim on the log lapsed)") }
            let page = try client.entries(from: index, to: end - 1, treeSize: head.treeSize)
            for raw in page {
                frontier.append(leafHash: raw.leafHash)
                if let entry = try? ParsedLogEntry.parse(raw) {
                    if entry.mentions(any: needles) {
                        // A tiled log's chain is fetched for the entries that matter only.
                        let full = raw.pendingChain == nil ? raw : try client.resolveChain(raw)
                        matches.append((index, (try? ParsedLogEntry.parse(full)) ?? entry))
                        matched += full.leafInput.count + full.extraData.count
                    }
                } else {
                    malformed += 1
                }
                index += 1
                // Enough held: the chunk ends here, verified like any other.
                if matched > matchBytes, index < end {
                    end = index
                    break pages
                }
            }
        }
        let verified: Bool
        if end == head.treeSize {
            verified = frontier.root == head.rootHash
        } else {
            let proof = try client.consistency(first: end, second: head.treeSize)
            verified = MerkleTree.verifyConsistency(first: end, second: head.treeSize, firstRoot: frontier.root,
                                                    secondRoot: head.rootHash, proof: proof) != nil
        }
        guard verified else {
            step.problem = .entriesDoNotMatch(from: first, to: end, head: head.treeSize)
            return
        }
        step.position.read = frontier
        step.matches = matches
        step.read = Int(end - first)
        step.malformed = malformed
    }
}
