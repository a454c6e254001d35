import Foundation
import Testing
import TLSAuditLab
import TLSAuditModel
import TLSAuditProbe
import TLSAuditSupport
import TLSAuditProcess

/// Reading static-ct-api logs (c2sp.org/static-ct-api): the lab log's checkpoint, tiles and issuers
/// as files served by nginx (Debian's package, gzip on), read by `CTTileClient` and followed by the
/// same `CTLogFollower` as an RFC 6962 log.
@Suite("Static CT log reading")
struct StaticCTLogTests {
    let pki = TestPKI.shared

    @Test("tile indexes as path elements: three digits each, all but the last prefixed x")
    func tilePaths() {
        #expect(CTTileClient.tilePath(0) == "000")
        #expect(CTTileClient.tilePath(5) == "005")
        #expect(CTTileClient.tilePath(999) == "999")
        #expect(CTTileClient.tilePath(1_000) == "x001/000")
        #expect(CTTileClient.tilePath(1_234_067) == "x001/x234/067")
    }

    @Test("nginx sends the data tiles gzip-compressed: the client asks for gzip and inflates them, a tile at a time")
    func nginxCompresses() throws {
        let curl = try LabPrerequisite.program(["/usr/bin/curl"], package: "curl")
        let (server, tiled) = try Self.staticLog()
        defer { tiled.stop(); server.stop() }
        for index in 0..<300 { server.add(try pki.intermediate.issue(.server(["n\(index % 7).ct.test"])), chain: [pki.intermediate, pki.root]) }
        try tiled.publish()
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: curl)
        process.arguments = ["-s", "-o", "/dev/null", "-D", "-", "-H", "Accept-Encoding: gzip", tiled.url + "tile/data/000"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let headers = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).lowercased()
        process.waitUntilExit()
        #expect(headers.contains("content-encoding: gzip"), "the test serves what a client must inflate")
        let client = try #require(CTTileClient(url: tiled.url, key: server.log.publicKey, timeout: 5))
        let head = try client.treeHead()
        let entries = try client.entries(from: 0, to: 299, treeSize: head.treeSize)
        #expect(entries.count == 256, "one data tile per read")
        #expect(try ParsedLogEntry.parse(entries[3]).certificate.isEmpty == false)
    }

    @Test("consistency proofs computed from hash tiles of three levels are RFC 6962's proofs, for trees whose partial tiles were published")
    func proofsFromTiles() throws {
        let (server, tiled) = try Self.staticLog()
        defer { tiled.stop(); server.stop() }
        let leaves = (0..<70_000).map { MerkleTree.leafHash(Array("leaf \($0)".utf8)) }
        let sizes = [1, 255, 256, 257, 1_000, 65_536, 65_537, 70_000]
        for size in sizes { try tiled.writeHashTiles(Array(leaves.prefix(size))) }
        let client = try #require(CTTileClient(url: tiled.url, key: server.log.publicKey, timeout: 10))
        var checked = 0
        for second in sizes {
            for first in [1, 2, 3, 200, 255, 256, 257, 511, 999, 1_000, 4_097, 65_535, 65_536, 65_537, 69_999] where first < second {
                let proof = try client.consistency(first: UInt64(first), second: UInt64(second))
                #expect(proof == MerkleTree.consistencyProof(from: first, leaves: leaves[..<second]), "PROOF(\(first), D[\(second)])")
                #expect(MerkleTree.verifyConsistency(first: UInt64(first), second: UInt64(second), firstRoot: MerkleTree.root(leaves[..<first]),
                                                     secondRoot: MerkleTree.root(leaves[..<second]), proof: proof) != nil)
                checked += 1
            }
        }
        #expect(checked == 64)
    }

    @Test("a follower reads a static log like an RFC 6962 one: every entry once across data tiles, the watched name's certificate and precertificate, chains rebuilt from issuers fetched once, and it resumes as the log grows")
    func followsAStaticLog() throws {
        let (server, tiled) = try Self.staticLog()
        defer { tiled.stop(); server.stop() }
        let other = try pki.intermediate.issue(.server(["other.ct.test"]))
        let watched = try pki.intermediate.issue(.server(["watched.ct.test"]))
        var expected: [UInt64] = []
        for index in 0..<600 {
            if [7, 300, 555].contains(index) {
                expected.append(UInt64(server.add(watched, chain: [pki.intermediate, pki.root])))
            } else if index == 420 {
                expected.append(UInt64(try server.addPrecertificate(watched, issuer: pki.intermediate, chain: [pki.intermediate, pki.root])))
            } else {
                server.add(other, chain: [pki.intermediate, pki.root], at: Date(timeIntervalSince1970: 1_800_000_000 + Double(index)))
            }
        }
        try tiled.publish()
        let client = try #require(CTTileClient(url: tiled.url, key: server.log.publicKey, timeout: 5))
        let follower = CTLogFollower(client: client, chunk: 100, needles: [Array("watched.ct.test".utf8)])
        var position = try follower.start(fromBeginning: true)
        var matched: [UInt64] = [], read = 0
        for _ in 0..<20 where position.backlog > 0 {
            let step = try follower.step(position)
            #expect(step.problem == nil)
            matched += step.matches.map(\.index)
            read += step.read
            position = step.position
        }
        #expect(read == 600 && matched == expected)
        #expect(position.read?.root == position.head?.rootHash)
        #expect(tiled.requests(to: "issuer/") == 2, "the intermediate and the root, each fetched once")

        // The log grows: the partial data tile of 88 becomes one of 90, only the new entries are read.
        server.add(other, chain: [pki.intermediate, pki.root])
        server.add(watched, chain: [pki.intermediate, pki.root], at: Date().addingTimeInterval(1))
        try tiled.publish()
        let step = try follower.step(position)
        #expect(step.problem == nil && step.read == 2 && step.matches.map(\.index) == [601])
        #expect(step.position.read?.root == step.position.head?.rootHash)
    }

    @Test("a static log that forks, rewinds or serves a data tile its tree does not hold is a problem and nothing from it is acted on; a checkpoint not signed by the log, garbage, a missing tile or an issuer that does not hash to its name fail by kind; other signers' lines are ignored")
    func refusesWhatTheStaticLogCannotProve() throws {
        let (server, tiled) = try Self.staticLog()
        defer { tiled.stop(); server.stop() }
        let other = try pki.intermediate.issue(.server(["other.ct.test"]))
        for index in 0..<10 { server.add(other, chain: [pki.intermediate, pki.root], at: Date(timeIntervalSince1970: 1_800_000_000 + Double(index))) }
        try tiled.publish()
        let client = try #require(CTTileClient(url: tiled.url, key: server.log.publicKey, timeout: 5))
        let follower = CTLogFollower(client: client, needles: [Array("watched.ct.test".utf8)])
        let position = try follower.step(try follower.start(fromBeginning: true)).position
        #expect(position.nextIndex == 10)

        // A witness's cosignature and an unknown signer beside the log's: ignored.
        let head = try #require(position.head)
        let cosigned = tiled.checkpoint(head) + "\u{2014} witness.example AAAAAAAAAAAAAAAA\n\u{2014} \(tiled.origin) AAAAAAAAAAAAAAAAAAAA\n"
        try tiled.replace("checkpoint", with: Array(cosigned.utf8))
        #expect(try client.treeHead() == head)

        // Entries whose data tile is not the tree's.
        let watched = try pki.intermediate.issue(.server(["watched.ct.test"]))
        server.add(watched, chain: [pki.intermediate, pki.root])
        try tiled.publish(substituting: 10)
        let substituted = try follower.step(position)
        #expect(substituted.problem == .entriesDoNotMatch(from: 10, to: 11, head: 11) && substituted.matches.isEmpty)

        try tiled.publish()
        let good = try follower.step(position)
        #expect(good.problem == nil && good.matches.map(\.index) == [10])

        // An older checkpoint the known head extends (a CDN's stale copy): no fault, nothing to do.
        try tiled.publish(rewindTo: 4)
        let stale = try follower.step(good.position)
        #expect(stale.problem == nil && stale.position == good.position)

        server.set(.fork(at: 2))
        server.add(watched, chain: [pki.intermediate, pki.root])
        try tiled.publish()
        let forked = try follower.step(good.position)
        #expect(forked.problem == .inconsistent(from: 11, to: 12) && forked.matches.isEmpty && forked.position == good.position)
        try tiled.publish(rewindTo: 4)
        let rewound = try follower.step(good.position)
        #expect(rewound.problem == .rewound(from: 11, to: 4) && rewound.matches.isEmpty, "an older head of another history")
        server.set(.none)

        func kind(_ body: () throws -> Void) -> CTLogFailure.Kind? {
            do { try body() } catch let failure as CTLogFailure { return failure.kind } catch { return nil }
            return nil
        }
        let stranger = try LabCTLog("Another log", operator: "lab")
        let foreign = try #require(CTTileClient(url: tiled.url, key: stranger.publicKey, timeout: 5))
        #expect(kind { _ = try foreign.treeHead() } == .badSignature, "no signature line by this key")
        try tiled.replace("checkpoint", with: Array("ct.lab.test/static\n12\nnot base64\n\n\u{2014} x AAAA\n".utf8))
        #expect(kind { _ = try client.treeHead() } == .malformed)
        try tiled.replace("checkpoint", with: [0xff, 0xfe, 0, 1])
        #expect(kind { _ = try client.treeHead() } == .malformed)
        try tiled.replace("checkpoint", with: nil)
        #expect(kind { _ = try client.treeHead() } == .refused, "404")
        try tiled.replace("tile/data/000.p/12", with: Array(repeating: 7, count: 40))
        #expect(kind { _ = try client.entries(from: 0, to: 11, treeSize: 12) } == .malformed)
        try tiled.replace("tile/data/000.p/12", with: nil)
        #expect(kind { _ = try client.entries(from: 0, to: 11, treeSize: 12) } == .refused)
        // A fresh client (no cache): chains are fetched only for the entries that matter; an issuer file that is
        // another certificate, or none, is noted on the entry (judged without its chain), not a failure of the page.
        try tiled.publish()
        let fresh = try #require(CTTileClient(url: tiled.url, key: server.log.publicKey, timeout: 5))
        let issuersBefore = tiled.requests(to: "issuer/")
        let page = try fresh.entries(from: 0, to: 3, treeSize: 12)
        #expect(page.count == 4 && page.allSatisfy { $0.pendingChain?.fingerprints.count == 2 } && tiled.requests(to: "issuer/") == issuersBefore)
        try tiled.replace("issuer/" + Digest.sha256(pki.root.der).hex, with: pki.intermediate.der)
        let wrongIssuer = try fresh.resolveChain(page[0])
        #expect(wrongIssuer.chainProblem?.contains("does not hash to its fingerprint") == true && wrongIssuer.extraData.isEmpty)
        #expect(try ParsedLogEntry.parse(wrongIssuer).extraDataProblem == wrongIssuer.chainProblem)
        try tiled.replace("issuer/" + Digest.sha256(pki.root.der).hex, with: pki.root.der)
        let resolved = try fresh.resolveChain(page[1])
        let resolvedChain = try ParsedLogEntry.parse(resolved).chain
        #expect(resolved.chainProblem == nil && resolvedChain.count == 2)
    }

    @Test("gzip answers: a member padded with zeros inflates; a truncated member, bytes that are not gzip, or an empty gzip body are malformed, not unreachable")
    func gzipAnswers() throws {
        let (server, tiled) = try Self.staticLog()
        defer { tiled.stop(); server.stop() }
        server.add(try pki.intermediate.issue(.server(["a.ct.test"])), chain: [pki.intermediate, pki.root])
        try tiled.publish()
        let client = try #require(CTTileClient(url: tiled.url, key: server.log.publicKey, timeout: 5))
        let plain = try client.treeHead()
        let gzip = ChildProcess()
        gzip.executableURL = URL(fileURLWithPath: "/bin/gzip")
        gzip.arguments = ["-c", "-n"]
        let input = Pipe(), output = Pipe()
        gzip.standardInput = input
        gzip.standardOutput = output
        try gzip.run()
        input.fileHandleForWriting.write(Data(try tiled.served("checkpoint")))
        try input.fileHandleForWriting.close()
        let compressed = Array(output.fileHandleForReading.readDataToEndOfFile())
        gzip.waitUntilExit()
        func kind(_ body: () throws -> Void) -> CTLogFailure.Kind? {
            do { try body() } catch let failure as CTLogFailure { return failure.kind } catch { return nil }
            return nil
        }
        // nginx's gzip_static sends checkpoint.gz as it is, Content-Encoding: gzip.
        try tiled.replace("checkpoint.gz", with: compressed + [UInt8](repeating: 0, count: 64))
        #expect(try client.treeHead() == plain, "zero padding after the member is ignored")
        try tiled.replace("checkpoint.gz", with: compressed + compressed)
        #expect(kind { _ = try client.treeHead() } == .malformed, "two members: the checkpoint twice, not a checkpoint")
        try tiled.replace("checkpoint.gz", with: Array(compressed.prefix(compressed.count / 2)))
        #expect(kind { _ = try client.treeHead() } == .malformed)
        try tiled.replace("checkpoint.gz", with: Array("not gzip at all".utf8))
        #expect(kind { _ = try client.treeHead() } == .malformed)
        try tiled.replace("checkpoint.gz", with: [])
        #expect(kind { _ = try client.treeHead() } == .malformed)
    }

    static func staticLog() throws -> (LabCTLogServer, LabStaticCTLog) {
        let server = try LabCTLogServer(try LabCTLog("Lab Log static", operator: "lab"))
        do {
            return (server, try LabStaticCTLog(server))
        } catch {
            server.stop()
            throw error
        }
    }
}
