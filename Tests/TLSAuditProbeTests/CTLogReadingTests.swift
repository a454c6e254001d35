import Foundation
import Testing
import TLSAuditLab
import TLSAuditProbe

/// Reading Certificate Transparency logs: the Merkle tree's proofs, and a real RFC 6962 log on
/// loopback (`LabCTLogServer`: a real tree, signed heads) read by `CTLogClient`.
@Suite("CT log reading")
struct CTLogReadingTests {
    let pki = TestPKI.shared

    static func leaves(_ count: Int) -> [[UInt8]] {
        (0..<count).map { MerkleTree.leafHash(Array("leaf \($0)".utf8)) }
    }

    @Test("the frontier grows to RFC 6962's root; every consistency proof between sizes up to 40 verifies and carries the first tree's frontier; any changed node, root or length fails")
    func consistencyProofs() throws {
        let leaves = Self.leaves(40)
        var frontiers = [MerkleFrontier()]
        for leaf in leaves {
            var next = frontiers.last!
            next.append(leafHash: leaf)
            frontiers.append(next)
        }
        #expect(frontiers[0].root == MerkleTree.emptyRoot)
        for n in 1...leaves.count {
            #expect(frontiers[n].root == MerkleTree.root(leaves[..<n]), "root of \(n)")
        }
        var checked = 0
        for n in 2...leaves.count {
            let second = MerkleTree.root(leaves[..<n])
            for m in 1..<n {
                let first = MerkleTree.root(leaves[..<m])
                let proof = MerkleTree.consistencyProof(from: m, leaves: leaves[..<n])
                let frontier = MerkleTree.verifyConsistency(first: UInt64(m), second: UInt64(n), firstRoot: first, secondRoot: second, proof: proof)
                #expect(frontier == frontiers[m], "\(m) -> \(n)")
                for index in proof.indices {
                    var changed = proof
                    changed[index][0] ^= 1
                    #expect(MerkleTree.verifyConsistency(first: UInt64(m), second: UInt64(n), firstRoot: first, secondRoot: second,
                                                         proof: changed) == nil, "\(m) -> \(n), node \(index) changed")
                }
                #expect(MerkleTree.verifyConsistency(first: UInt64(m), second: UInt64(n), firstRoot: second, secondRoot: second, proof: proof) == nil)
                #expect(MerkleTree.verifyConsistency(first: UInt64(m), second: UInt64(n), firstRoot: first, secondRoot: first, proof: proof) == nil)
                #expect(MerkleTree.verifyConsistency(first: UInt64(m), second: UInt64(n), firstRoot: first, secondRoot: second,
                                                     proof: proof.dropLast()) == nil)
                #expect(MerkleTree.verifyConsistency(first: UInt64(m), second: UInt64(n), firstRoot: first, secondRoot: second,
                                                     proof: proof + [proof[0]]) == nil)
                checked += 1
            }
        }
        #expect(checked == 780)
        // A frontier read back must hold one hash per bit of its size.
        #expect(MerkleFrontier(size: 6, hashes: frontiers[6].hashes) == frontiers[6])
        #expect(MerkleFrontier(size: 7, hashes: frontiers[6].hashes) == nil)
    }

    @Test("a lab log read through the API: the head's signature checks with the log's key and not another's, entries come in pages, x509 and precert entries decode to the certificates logged, and their leaves make the signed root")
    func readsALog() throws {
        let ctLog = try LabCTLog("Lab Log 2026", operator: "lab")
        let server = try LabCTLogServer(ctLog, pageSize: 4)
        defer { server.stop() }
        var logged: [(certificate: LabCertificate, precertificate: Bool)] = []
        for index in 0..<7 {
            let leaf = try pki.intermediate.issue(.server(["host\(index).ct.test"]))
            if index % 3 == 2 {
                try server.addPrecertificate(leaf, issuer: pki.intermediate, chain: [pki.intermediate, pki.root])
            } else {
                server.add(leaf, chain: [pki.intermediate, pki.root])
            }
            logged.append((leaf, index % 3 == 2))
        }
        let published = server.publish()
        let client = try #require(CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 5))
        let head = try client.treeHead()
        #expect(head == published && head.treeSize == 7)

        var entries: [RawLogEntry] = []
        var pages = 0
        while entries.count < 7 {
            entries += try client.entries(from: UInt64(entries.count), to: 6)
            pages += 1
        }
        #expect(pages == 2, "4 then 3")
        var frontier = MerkleFrontier()
        for (index, raw) in entries.enumerated() {
            frontier.append(leafHash: raw.leafHash)
            let entry = try ParsedLogEntry.parse(raw)
            #expect(entry.precertificate == logged[index].precertificate && entry.extraDataProblem == nil, "entry \(index)")
            if entry.precertificate {
                // The leaf holds the certificate's TBSCertificate; extra_data the precertificate, poison and all.
                #expect(entry.tbsCertificate == logged[index].certificate.tbsDER && entry.certificate != logged[index].certificate.der)
            } else {
                #expect(entry.certificate == logged[index].certificate.der && entry.tbsCertificate == nil)
            }
            let chain = try LoggedChain(entry, store: try TrustStore(caFile: pki.rootFile), at: Date())
            #expect(chain.names == ["host\(index).ct.test"], "a precertificate checked against its leaf, then read")
            #expect(chain.presented[0].unhandledCriticalExtensions.isEmpty, "the poison is not held against a precertificate")
            #expect(entry.chain == [pki.intermediate.der, pki.root.der])
            #expect(entry.mentions(any: [Array("host\(index).ct.test".utf8)]))
            #expect(entry.mentions(any: [Array("HOST\(index).CT.TEST".lowercased().utf8)]))
            #expect(!entry.mentions(any: [Array("elsewhere.test".utf8)]))
        }
        #expect(frontier.root == head.rootHash, "the entries read make the signed tree")

        // Another key: the head is refused.
        let other = try #require(CTLogClient(url: server.url, key: try LabCTLog("Other", operator: "lab").publicKey, timeout: 5))
        #expect(throws: CTLogFailure.self) { try other.treeHead() }
        do { _ = try other.treeHead() } catch { #expect(error.kind == .badSignature) }
    }

    @Test("a forked history: its heads are signed, but no consistency proof joins them to the head shown before; a rewound head is smaller than one shown")
    func forkAndRewind() throws {
        let ctLog = try LabCTLog("Lab Log fork", operator: "lab")
        let server = try LabCTLogServer(ctLog)
        defer { server.stop() }
        for index in 0..<6 { server.add(try pki.intermediate.issue(.server(["f\(index).ct.test"])), chain: [pki.intermediate]) }
        server.publish()
        let client = try #require(CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 5))
        let first = try client.treeHead()

        // Honest growth: consistent.
        server.add(try pki.intermediate.issue(.server(["g.ct.test"])), chain: [pki.intermediate])
        server.publish()
        let grown = try client.treeHead()
        let proof = try client.consistency(first: first.treeSize, second: grown.treeSize)
        #expect(MerkleTree.verifyConsistency(first: first.treeSize, second: grown.treeSize, firstRoot: first.rootHash,
                                             secondRoot: grown.rootHash, proof: proof) != nil)

        server.set(.fork(at: 2))
        server.add(try pki.intermediate.issue(.server(["h.ct.test"])), chain: [pki.intermediate])
        server.publish()
        let forked = try client.treeHead()
        #expect(forked.treeSize == 8, "signed, and larger")
        let forkProof = try client.consistency(first: grown.treeSize, second: forked.treeSize)
        #expect(MerkleTree.verifyConsistency(first: grown.treeSize, second: forked.treeSize, firstRoot: grown.rootHash,
                                             secondRoot: forked.rootHash, proof: forkProof) == nil)

        server.set(.rewind(to: 3))
        let rewound = try client.treeHead()
        #expect(rewound.treeSize == 3 && rewound.treeSize < grown.treeSize)
    }

    @Test("429, 503, garbage, an answer over the size bound and a log that never answers are failures of their kind, each within the timeout")
    func badAnswers() throws {
        let ctLog = try LabCTLog("Lab Log faults", operator: "lab")
        let server = try LabCTLogServer(ctLog, pageSize: 1_000)
        defer { server.stop() }
        for index in 0..<50 { server.add(try pki.intermediate.issue(.server(["b\(index).ct.test"])), chain: [pki.intermediate, pki.root]) }
        server.publish()
        let client = try #require(CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 5))
        func kind(_ body: () throws -> Void) -> CTLogFailure.Kind? {
            do { try body(); return nil } catch let error as CTLogFailure { return error.kind } catch { return nil }
        }
        server.set(.rateLimited)
        #expect(kind { _ = try client.treeHead() } == .rateLimited)
        do { _ = try client.treeHead() } catch { #expect(error.retryAfter == 7, "the log's Retry-After") }
        server.set(.unavailable)
        #expect(kind { _ = try client.entries(from: 0, to: 3) } == .refused)
        server.set(.garbage)
        #expect(kind { _ = try client.treeHead() } == .malformed)
        server.set(.none)
        let small = try #require(CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 5, maximumBody: 20_000))
        #expect(kind { _ = try small.entries(from: 0, to: 49) } == .malformed, "50 entries are more than 20,000 bytes")
        #expect(try client.entries(from: 0, to: 49).count == 50)
        // Indexes past the tree: the log says no.
        #expect(kind { _ = try client.entries(from: 60, to: 61) } == .refused)

        // A log that accepts the connection and never answers: unreachable within the request's bound, for both readers.
        let tarpit = try LabHTTPServer(tarpit: true)
        defer { tarpit.stop() }
        let silent = try #require(CTLogClient(url: tarpit.url("/"), key: ctLog.publicKey, timeout: 1))
        let silentTiles = try #require(CTTileClient(url: tarpit.url("/"), key: ctLog.publicKey, timeout: 1))
        let began = Date()
        #expect(kind { _ = try silent.treeHead() } == .unreachable)
        #expect(kind { _ = try silentTiles.treeHead() } == .unreachable)
        #expect(Date().timeIntervalSince(began) < 5, "two requests of a second each, not a hang")
    }

    @Test("malformed entries: every truncation of a leaf fails as malformed, of its extra_data is noted, and a thousand random corruptions decode or fail, never crash")
    func malformedEntries() throws {
        let leaf = try pki.intermediate.issue(.server(["m.ct.test"]))
        let ctLog = try LabCTLog("Lab Log parse", operator: "lab")
        let server = try LabCTLogServer(ctLog)
        defer { server.stop() }
        server.add(leaf, chain: [pki.intermediate])
        try server.addPrecertificate(leaf, issuer: pki.intermediate, chain: [pki.intermediate])
        server.publish()
        let client = try #require(CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 5))
        let entries = try client.entries(from: 0, to: 1)
        var generator = SystemRandomNumberGenerator()
        var failures = 0
        for entry in entries {
            for cut in 0..<entry.leafInput.count {
                #expect(throws: CTLogFailure.self) {
                    try ParsedLogEntry.parse(RawLogEntry(leafInput: Array(entry.leafInput.prefix(cut)), extraData: entry.extraData))
                }
            }
            // extra_data is not in the tree: cut short, the leaf still decodes and the problem is noted.
            for cut in 0..<entry.extraData.count {
                let parsed = try ParsedLogEntry.parse(RawLogEntry(leafInput: entry.leafInput, extraData: Array(entry.extraData.prefix(cut))))
                #expect(parsed.extraDataProblem != nil && parsed.chain.isEmpty, "cut at \(cut)")
            }
            for _ in 0..<500 {
                var corrupted = entry
                for _ in 0..<3 {
                    if Bool.random(using: &generator) {
                        corrupted.leafInput[Int.random(in: 0..<corrupted.leafInput.count, using: &generator)] = .random(in: 0...255, using: &generator)
                    } else {
                        corrupted.extraData[Int.random(in: 0..<corrupted.extraData.count, using: &generator)] = .random(in: 0...255, using: &generator)
                    }
                }
                do { _ = try ParsedLogEntry.parse(corrupted) } catch { failures += 1 }
            }
        }
        #expect(failures > 0, "some corruptions hit a length or a type")
    }

    @Test("certspotter (SSLMate's monitor, Debian's package) follows the lab log from its list: it checks the heads and reports the watched name's certificate, not the others'")
    func certspotterFollowsTheLabLog() throws {
        let certspotter = try LabPrerequisite.program(["certspotter"], package: "certspotter")
        let ctLog = try LabCTLog("Lab Log certspotter", operator: "lab")
        let server = try LabCTLogServer(ctLog, pageSize: 3)
        defer { server.stop() }
        for index in 0..<4 { server.add(try pki.intermediate.issue(.server(["other\(index).ct.test"])), chain: [pki.intermediate, pki.root]) }
        server.add(try pki.intermediate.issue(.server(["spotted.ct.test"])), chain: [pki.intermediate, pki.root])
        server.add(try pki.intermediate.issue(.server(["other4.ct.test"])), chain: [pki.intermediate, pki.root])
        server.publish()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("certspotter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let list: [String: Any] = ["version": "1.0", "log_list_timestamp": "2026-11-01T00:00:00Z",
                                   "operators": [["name": "lab", "email": ["ct@lab.test"], "logs": [ctLog.listEntry(url: server.url)]]]]
        let listFile = directory.appendingPathComponent("logs.json")
        try JSONSerialization.data(withJSONObject: list).write(to: listFile)
        let watchlist = directory.appendingPathComponent("watchlist")
        try "spotted.ct.test\n".write(to: watchlist, atomically: true, encoding: .utf8)
        // certspotter runs until stopped: it is given long enough to read the six entries.
        let output = try LabCommand.run(["-logs", listFile.path, "-watchlist", watchlist.path, "-state_dir", directory.appendingPathComponent("state").path,
                                         "-stdout", "-verbose"], program: certspotter, limit: 8)
        #expect(output.stdout.contains("spotted.ct.test"), "stdout: \(output.stdout.prefix(2_000)) stderr: \(output.stderr.prefix(2_000))")
        #expect(!output.stdout.contains("other"), "\(output.stdout.prefix(2_000))")
        #expect(server.requests(to: "get-sth") >= 1 && server.requests(to: "get-entries") >= 2, "it read the log in pages of 3")
    }

    /// A lab log and a follower watching `watched`.
    func followed(chunk: UInt64 = 1_000, pageSize: Int = 64) throws -> (LabCTLogServer, CTLogFollower) {
        let ctLog = try LabCTLog("Lab Log follower", operator: "lab")
        let server = try LabCTLogServer(ctLog, pageSize: pageSize)
        let client = try #require(CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 5))
        return (server, CTLogFollower(client: client, chunk: chunk, needles: [Array("watched.ct.test".utf8)]))
    }

    func log(_ server: LabCTLogServer, _ names: [String]) throws {
        for name in names { server.add(try pki.intermediate.issue(.server([name])), chain: [pki.intermediate, pki.root]) }
        server.publish()
    }

    @Test("a follower reads every entry once, in chunks each shown to be the signed tree's, acts only on the watched name's, and resumes from its stored position without a repeat or a gap")
    func followsAndResumes() throws {
        let (server, follower) = try followed(chunk: 3, pageSize: 2)
        defer { server.stop() }
        try log(server, ["a.ct.test", "watched.ct.test", "b.ct.test", "c.ct.test", "d.ct.test", "api.watched.ct.test", "e.ct.test"])
        var position = try follower.start(fromBeginning: true)
        var matched: [UInt64] = [], read = 0, steps = 0
        while position.backlog > 0, steps < 10 {
            let step = try follower.step(position)
            #expect(step.problem == nil)
            matched += step.matches.map(\.index)
            read += step.read
            position = step.position
            steps += 1
        }
        #expect(read == 7 && steps == 3, "chunks of 3: 3, 3, 1")
        #expect(matched == [1, 5], "the watched name and a name under it; nothing else")
        #expect(position.read?.root == position.head?.rootHash)

        // Stored and read back (a restart), the log grows: only the new entries are read.
        let stored = try JSONEncoder().encode(position)
        var resumed = try JSONDecoder().decode(CTLogPosition.self, from: stored)
        try log(server, ["f.ct.test", "watched.ct.test"])
        var after: [UInt64] = []
        for _ in 0..<10 {
            let step = try follower.step(resumed)
            #expect(step.problem == nil)
            after += step.matches.map(\.index)
            resumed = step.position
            if resumed.backlog == 0 { break }
        }
        #expect(after == [8] && resumed.nextIndex == 9)
        // Nothing new: a step reads nothing.
        let idle = try follower.step(resumed)
        #expect(idle.read == 0 && idle.matches.isEmpty && idle.problem == nil)
    }

    @Test("started at the log's end, a follower reads only what is logged later: the start's frontier comes from the next consistency proof")
    func startsAtTheEnd() throws {
        let (server, follower) = try followed()
        defer { server.stop() }
        try log(server, ["watched.ct.test", "a.ct.test", "b.ct.test"])
        var position = try follower.start(fromBeginning: false)
        #expect(position.nextIndex == 3 && position.read == nil)
        #expect(try follower.step(position).matches.isEmpty, "the log has not grown")
        try log(server, ["c.ct.test", "watched.ct.test"])
        let step = try follower.step(position)
        #expect(step.problem == nil && step.read == 2 && step.matches.map(\.index) == [4])
        position = step.position
        #expect(position.read?.root == position.head?.rootHash)
    }

    @Test("a fork, a rewind, and entries that are not the tree's: each is a problem, nothing from it is acted on, and the position stays")
    func refusesWhatTheLogCannotProve() throws {
        let (server, follower) = try followed()
        defer { server.stop() }
        try log(server, ["a.ct.test", "b.ct.test", "c.ct.test"])
        let position = try follower.step(try follower.start(fromBeginning: true)).position
        #expect(position.nextIndex == 3)

        server.set(.substitutedEntry(at: 4))
        try log(server, ["watched.ct.test", "watched.ct.test"])
        let substituted = try follower.step(position)
        #expect(substituted.problem == .entriesDoNotMatch(from: 3, to: 5, head: 5))
        #expect(substituted.matches.isEmpty && substituted.position.read == position.read)

        server.set(.fork(at: 1))
        server.publish()
        let forked = try follower.step(substituted.position)
        #expect(forked.problem == .inconsistent(from: 5, to: 5), "the same size, another root")
        try log(server, ["watched.ct.test"])
        let forkedLarger = try follower.step(substituted.position)
        #expect(forkedLarger.problem == .inconsistent(from: 5, to: 6))
        #expect(forkedLarger.matches.isEmpty && forkedLarger.position == substituted.position)

        server.set(.rewind(to: 2))
        let rewound = try follower.step(substituted.position)
        #expect(rewound.problem == .rewound(from: 5, to: 2) && rewound.matches.isEmpty)
    }

    @Test("an older head the known one extends (a cache behind) is no fault; a watched precertificate whose extra_data was swapped is still found by its leaf and refused as unproven; a certificate's garbage chain is noted")
    func staleHeadsAndUnprovenExtraData() throws {
        let (server, follower) = try followed()
        defer { server.stop() }
        try log(server, ["a.ct.test", "b.ct.test", "c.ct.test", "d.ct.test"])
        var position = try follower.step(try follower.start(fromBeginning: true)).position
        #expect(position.nextIndex == 4)
        server.set(.rewind(to: 2))
        let stale = try follower.step(position)
        #expect(stale.problem == nil && stale.position == position, "consistent with the known head: nothing to do, nothing wrong")
        server.set(.none)

        let watched = try pki.intermediate.issue(.server(["watched.ct.test"]))
        try server.addPrecertificate(watched, issuer: pki.intermediate, chain: [pki.intermediate, pki.root])
        try server.addPrecertificate(try pki.intermediate.issue(.server(["e.ct.test"])), issuer: pki.intermediate, chain: [pki.intermediate, pki.root])
        server.publish()
        server.set(.substitutedExtraData(at: 4, from: 5))
        let step = try follower.step(position)
        #expect(step.problem == nil && step.matches.map(\.index) == [4], "matched by the TBSCertificate its leaf holds")
        let entry = try #require(step.matches.first?.entry)
        #expect(throws: CTLogFailure.self) { try LoggedChain(entry, store: try TrustStore(caFile: pki.rootFile), at: Date()) }
        position = step.position

        server.set(.none)
        server.addRaw(RawLogEntry(leafInput: [0, 0] + [UInt8](repeating: 0, count: 8) + [0, 0] + SCTVerifier.lengthPrefixed(watched.der, bytes: 3) + [0, 0],
                                  extraData: [1, 2, 3]))
        server.publish()
        let garbage = try follower.step(position)
        #expect(garbage.problem == nil && garbage.matches.count == 1)
        #expect(garbage.matches.first?.entry.extraDataProblem != nil && garbage.matches.first?.entry.chain == [])
        let chain = try LoggedChain(try #require(garbage.matches.first?.entry), store: try TrustStore(caFile: pki.rootFile), at: Date())
        #expect(chain.names == ["watched.ct.test"], "the certificate itself is in the leaf: judged without its chain")
    }
}
