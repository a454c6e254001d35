import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// `tlsaudit-bench ct-follow`: how fast a log is followed. A lab RFC 6962 log of `--entries`
/// entries (real certificates and precertificates, one in `--watched-every` for a watched name)
/// is read: decoded, hashed into the tree and matched in memory on one core (what following costs
/// per entry); by `CTLogFollower` through the log's HTTP API (the lab log answers in the same
/// process) and, the peer in the same run, by certspotter (SSLMate's monitor) through the same
/// API; by the follower through the same log served the static-ct-api way by nginx (tiles, gzip).
/// The watched entries are then judged against a pin. Peak memory is printed at the end.
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

    @Flag(help: "Skip the peer (certspotter) and the static-ct-api (nginx) runs.")
    var apiOnly = false

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
        // The last entry names a certificate of its own: a monitor that reports it has read the whole log.
        server.add(try pki.intermediate.issue(.server([Self.lastName])), chain: [pki.intermediate, pki.root],
                   at: start.addingTimeInterval(Double(entries) / 1000))
        let entries = entries + 1
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
        if !apiOnly {
            try peer(server: server, ctLog: ctLog, entries: entries, ourWall: followWall)
            try tiled(server: server, entries: entries, needles: needles, head: head)
        }

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
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        print("peak resident memory of the bench process (the lab log's \(entries) entries in it too): \(usage.ru_maxrss / 1024) MiB")
    }

    static let lastName = "last.watched.bench.test"

    /// certspotter through the same API, from the first entry, until it reports the last entry's certificate.
    func peer(server: LabCTLogServer, ctLog: LabCTLog, entries: Int, ourWall: Double) throws {
        let certspotter = try LabPrerequisite.program(["/usr/bin/certspotter"], package: "certspotter")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-certspotter-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let list: [String: Any] = ["version": "1.0", "log_list_timestamp": "2026-11-01T00:00:00Z",
                                   "operators": [["name": "bench", "email": ["ct@bench.test"], "logs": [ctLog.listEntry(url: server.url)]]]]
        try JSONSerialization.data(withJSONObject: list).write(to: directory.appendingPathComponent("logs.json"))
        try "\(Self.lastName)\n".write(to: directory.appendingPathComponent("watchlist"), atomically: true, encoding: .utf8)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: certspotter)
        process.arguments = ["-logs", directory.appendingPathComponent("logs.json").path, "-watchlist", directory.appendingPathComponent("watchlist").path,
                             "-state_dir", directory.appendingPathComponent("state").path, "-stdout", "-no_save", "-batch_size", "\(page)"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let began = ContinuousClock.now
        try process.run()
        var seen = ""
        let deadline = Date().addingTimeInterval(600)
        while !seen.contains(Self.lastName), Date() < deadline, process.isRunning {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        let wall = Self.seconds(ContinuousClock.now - began)
        process.terminate()
        process.waitUntilExit()
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        guard seen.contains(Self.lastName) else { throw ValidationError("certspotter did not report the last entry within 600 s") }
        print(String(format: "certspotter (the peer, same API, batches of %d): %.3f s wall to report the last entry, %.3f s CPU of its own: %.0f entries/s; tlsaudit's follower took %.2fx its wall time",
                     page, wall, cpu, Double(entries) / wall, ourWall / wall))
    }

    /// The same log served the static-ct-api way by nginx (checkpoint, tiles, issuers; gzip), followed from the first entry.
    func tiled(server: LabCTLogServer, entries: Int, needles: [[UInt8]], head: SignedTreeHead) throws {
        let tiledLog = try LabStaticCTLog(server)
        defer { tiledLog.stop() }
        let client = try CTTileClient(url: tiledLog.url, key: server.log.publicKey, timeout: 30).unwrap("the static log's URL")
        let follower = CTLogFollower(client: client, chunk: 10_000, needles: needles)
        let cpu0 = Self.processCPU(), wall0 = ContinuousClock.now
        var position = try follower.start(fromBeginning: true)
        var matched = 0
        while position.backlog > 0 {
            let step = try follower.step(position)
            if let problem = step.problem { throw ValidationError("the follower met a problem in the static log: \(problem)") }
            matched += step.matches.count
            position = step.position
        }
        let wall = Self.seconds(ContinuousClock.now - wall0), cpu = Self.processCPU() - cpu0
        guard position.head?.rootHash == head.rootHash else { throw ValidationError("the static log's checkpoint is not the lab log's head") }
        print(String(format: "through the static-ct-api (nginx, data tiles of 256, gzip): %.3f s wall, %.3f s CPU of the follower: %.0f entries/s per core of the follower (%.0f entries/s wall); %d matched; %d tile and %d issuer requests",
                     wall, cpu, Double(entries) / cpu, Double(entries) / wall, matched, tiledLog.requests(to: "tile/"), tiledLog.requests(to: "issuer/")))
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
