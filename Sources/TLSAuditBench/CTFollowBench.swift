import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe
#if canImport(Glibc)
import Glibc
#endif

/// `tlsaudit-bench ct-follow`: how fast a log is followed. A lab RFC 6962 log of `--entries`
/// entries (real certificates and precertificates, one in `--watched-every` for a watched name)
/// is read twice: decoded, hashed into the tree and matched in memory on one core (what
/// following costs per entry), then by `CTLogFollower` through the log's HTTP API (the lab log
/// answers in the same process). The watched entries are then judged against a pin.
struct CTFollowBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ct-follow",
        abstract: "Time following a CT log: entries decoded, hashed and matched per second, in memory and through a lab log's API."
    )

    @Option(help: "Entries in the lab log.")
    var entries: Int = 50_000

    @Option(help: "One entry in this many is for the watched name.")
    var watchedEvery: Int = 1_000

    @Option(help: "Entries a get-entries answer holds at most (public logs: 256 to 1,000).")
    var page: Int = 1_000

    @Option(help: "Names watched besides the one logged (the needles the prefilter looks for).")
    var needles: Int = 100

    func run() throws {
        let pki = TestPKI.shared
        let ctLog = try LabCTLog("Bench Log", operator: "bench")
        let server = try LabCTLogServer(ctLog, pageSize: page)
        defer { server.stop() }
        // 200 certificates and their precertificates, logged again and again (each entry its own timestamp).
        var certificates: [LabCertificate] = []
        for index in 0..<200 { certificates.append(try pki.intermediate.issue(.server(["host\(index).bench.test", "www.host\(index).bench.test"]))) }
        let watched = try pki.intermediate.issue(.server(["api.watched.bench.test"]))
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        for index in 0..<entries {
            let time = start.addingTimeInterval(Double(index) / 1000)
            let certificate = index % watchedEvery == watchedEvery - 1 ? watched : certificates[index % certificates.count]
            if index % 2 == 0 {
                try server.addPrecertificate(certificate, issuer: pki.intermediate, chain: [pki.intermediate, pki.root], at: time)
            } else {
                server.add(certificate, chain: [pki.intermediate, pki.root], at: time)
            }
        }
        let head = server.publish()
        let client = try CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 30, maximumBody: 64 << 20)
            .unwrap("the lab log's URL")
        let needles = [Array("watched.bench.test".utf8)] + (0..<needles - 1).map { Array("other\($0).example.test".utf8) }

        // In memory: the entries as served, then decoded, hashed and matched on this thread.
        var raw: [RawLogEntry] = []
        while raw.count < entries { raw += try client.entries(from: UInt64(raw.count), to: UInt64(entries - 1)) }
        let cpu0 = Self.threadCPU(), wall0 = ContinuousClock.now
        var frontier = MerkleFrontier()
        var matched = 0
        for entry in raw {
            frontier.append(leafHash: entry.leafHash)
            if try ParsedLogEntry.parse(entry).mentions(any: needles) { matched += 1 }
        }
        let cpu = Self.threadCPU() - cpu0, wall = Self.seconds(ContinuousClock.now - wall0)
        guard frontier.root == head.rootHash else { throw ValidationError("the entries do not make the signed tree") }
        print(String(format: "in memory, one core: %d entries (half precertificates, %d needles) decoded, hashed and matched in %.3f s CPU (%.3f s wall): %.0f entries/s per core, %.1f µs an entry; %d matched",
                     entries, needles.count, cpu, wall, Double(entries) / cpu, cpu / Double(entries) * 1e6, matched))

        // Through the API: the follower, from the first entry, in chunks of 10,000.
        let follower = CTLogFollower(client: client, chunk: 10_000, needles: needles)
        let processCPU0 = Self.processCPU(), wall1 = ContinuousClock.now
        var position = try follower.start(fromBeginning: true)
        var matches: [(index: UInt64, entry: ParsedLogEntry)] = []
        while position.backlog > 0 {
            let step = try follower.step(position)
            if let problem = step.problem { throw ValidationError("the follower met a problem: \(problem)") }
            matches += step.matches
            position = step.position
        }
        let followWall = Self.seconds(ContinuousClock.now - wall1), followCPU = Self.processCPU() - processCPU0
        print(String(format: "through the lab log's API (pages of %d, the log in this process): %.3f s wall, %.3f s CPU of both sides: %.0f entries/s; %d matched",
                     page, followWall, followCPU, Double(entries) / followWall, matches.count))

        // The matches judged: the chain checked and built, then the pin forecast.
        let store = try TrustStore(caFile: pki.rootFile)
        let pinned = PinForecast.PinnedName(domain: "watched.bench.test", includeSubdomains: true,
                                            pins: PinPolicy(leafIdentities: [String(repeating: "A", count: 43) + "="]), pinnedBy: "bench")
        let judged0 = ContinuousClock.now
        var breaks = 0
        for match in matches {
            let chain = try LoggedChain(match.entry, store: store, at: Date())
            guard let host = pinned.reaches(chain.names) else { continue }
            let evaluation = PinForecast.judge(pinned, host: host, presented: chain.presented, building: chain.building, now: Date(),
                                               buildWithPinnedAnchors: chain.buildWithPinnedAnchors)
            if evaluation.state == .mismatch { breaks += 1 }
        }
        let judged = Self.seconds(ContinuousClock.now - judged0)
        print(String(format: "the %d matches judged (chain built, pins checked): %.1f ms each; %d forecast breaks",
                     matches.count, judged / Double(max(1, matches.count)) * 1000, breaks))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func threadCPU() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func processCPU() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

extension Optional {
    func unwrap(_ what: String) throws -> Wrapped {
        guard let self else { throw ValidationError("no \(what)") }
        return self
    }
}
