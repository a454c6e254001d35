import ArgumentParser
import Synchronization
import Foundation
import TLSAuditCore
import TLSAuditModel
import TLSAuditProbe
import TLSAuditSupport
import TLSAuditProcess

/// `tlsaudit-bench limbo --suite limbo.json.xz`: judges every x509-limbo testcase a TLS server
/// verifier can be asked (validation kind SERVER, no max_chain_depth) exactly as `tlsaudit verify
/// --chain PEER --chain INTERMEDIATES --roots TRUSTED --host NAME --at TIME [--crl CRL]` does, and
/// reports agreement with limbo's expected result per family. Disagreements listed in the
/// differences file (`id<TAB>reason`: Apple's choices, see docs/apple-rules.md) are counted apart.
struct LimboBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "limbo",
        abstract: "Run the x509-limbo suite through verify's path building and judgement; agreement per family."
    )

    @Option(help: "The suite: limbo's JSON, or the same compressed with xz (.xz).")
    var suite: String

    @Option(help: "Known, deliberate differences: one `id<TAB>reason` per line ('#' comments).")
    var differences: String?

    @Option(help: "Write one `id<TAB>expected<TAB>tlsaudit<TAB>errors<TAB>warnings` line per case here (finding ids, comma-separated).")
    var results: String?

    @Option(help: "Only the cases whose id starts with this.")
    var only: String?

    func run() throws {
        let cases = try LimboSuite.load(path: suite).filter { only.map($0.id.hasPrefix) ?? true }
        let known = try differences.map(LimboSuite.differences(path:)) ?? [:]
        let started = Date()
        let outcomes = LimboSuite.judge(cases)
        let seconds = Date().timeIntervalSince(started)
        if let results {
            let lines = outcomes.map {
                "\($0.id)\t\($0.expected)\t\($0.verdict)\t\($0.errors.joined(separator: ","))\t\($0.warnings.joined(separator: ","))\n"
            }
            try Data(lines.joined().utf8).write(to: URL(fileURLWithPath: results))
        }
        print(LimboSuite.table(outcomes, differences: known))
        print(String(format: "%d cases judged in %.1f s (%.2f ms each)", outcomes.count, seconds, seconds * 1000 / Double(max(1, outcomes.count))))
        let unexpected = outcomes.filter { !$0.agrees && known[$0.id] == nil }
        for outcome in unexpected {
            print("DISAGREES \(outcome.id): limbo \(outcome.expected), tlsaudit \(outcome.verdict) "
                  + "errors: \(outcome.errors.joined(separator: ",")) warnings: \(outcome.warnings.joined(separator: ","))")
        }
        for (id, _) in known.sorted(by: { $0.key < $1.key }) where outcomes.contains(where: { $0.id == id && $0.agrees }) {
            print("NOW AGREES (remove from the differences): \(id)")
        }
    }
}

/// The x509-limbo suite as `verify` sees it.
enum LimboSuite {
    struct Testcase: Decodable {
        struct PeerName: Decodable {
            var kind: String
            var value: String
        }
        var id: String
        var validation_kind: String
        var trusted_certs: [String]
        var untrusted_intermediates: [String]
        var peer_certificate: String
        var validation_time: String?
        var expected_peer_name: PeerName?
        var expected_result: String
        var max_chain_depth: Int?
        var crls: [String]?
    }

    struct Outcome: Sendable {
        var id: String
        var expected: String
        var verdict: String
        /// The error findings' ids (why tlsaudit refused).
        var errors: [String]
        /// The warnings' ids (the `lint.*` that stand for a profile rule Apple does not enforce).
        var warnings: [String] = []
        var agrees: Bool { expected == verdict }
        /// `bettertls::pathbuilding`, `rfc5280`, `webpki`...: limbo's families.
        var family: String {
            let parts = id.components(separatedBy: "::")
            return parts.first == "bettertls" && parts.count > 1 ? parts[0] + "::" + parts[1] : parts[0]
        }
    }

    /// The cases a TLS server verifier can be asked: SERVER validation, no depth limit of limbo's own.
    static func load(path: String) throws -> [Testcase] {
        let data: Data
        if path.hasSuffix(".xz") {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["xz", "-dc", path]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw ValidationError("xz -dc \(path) failed (status \(process.terminationStatus))") }
        } else {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        }
        struct Suite: Decodable { var testcases: [Testcase] }
        return try JSONDecoder().decode(Suite.self, from: data).testcases
            .filter { $0.validation_kind == "SERVER" && $0.max_chain_depth == nil }
    }

    static func differences(path: String) throws -> [String: String] {
        var known: [String: String] = [:]
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: "\t", maxSplits: 1)
            if fields.count == 2 { known[String(fields[0])] = String(fields[1]) }
        }
        return known
    }

    /// Judges every case, on every core, in input order.
    static func judge(_ cases: [Testcase]) -> [Outcome] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("limbo-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outcomes = Mutex([Outcome?](repeating: nil, count: cases.count))
        DispatchQueue.concurrentPerform(iterations: cases.count) { index in
            let outcome = judge(cases[index], in: directory.appendingPathComponent("\(index)").path)
            outcomes.withLock { $0[index] = outcome }
        }
        return outcomes.withLock { $0.compactMap { $0 } }
    }

    /// One case, as `verify --chain peer.pem --chain intermediates.pem --roots trusted.pem --host
    /// --at [--crl]` judges it (the peer given as the leaf).
    static func judge(_ testcase: Testcase, in directory: String) -> Outcome {
        var outcome = Outcome(id: testcase.id, expected: testcase.expected_result, verdict: "FAILURE", errors: [])
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            func write(_ name: String, _ pems: [String]) throws -> String {
                let path = directory + "/" + name
                try Data(pems.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: path))
                return path
            }
            let peer = try write("peer.pem", [testcase.peer_certificate])
            let chain = testcase.untrusted_intermediates.isEmpty ? [peer] : [peer, try write("intermediates.pem", testcase.untrusted_intermediates)]
            let crls = try (testcase.crls ?? []).enumerated().map { try write("crl\($0.offset).pem", [$0.element]) }
            let time = testcase.validation_time.flatMap(Timestamp.parse) ?? Date()
            guard !testcase.trusted_certs.isEmpty else {
                outcome.errors = ["no-trusted-certificate"]
                return outcome
            }
            let store = try TrustStore(caFile: try write("trusted.pem", testcase.trusted_certs), label: "limbo")
            let evidence = try OfflineRevocationEvidence(crlFiles: crls, ocspResponseFiles: [])
            let probed = try ChainVerifier.probe(files: chain, roots: store, host: testcase.expected_peer_name?.value, at: time,
                                                 leafIndex: 0, revocation: evidence.isEmpty ? .off : .soft, evidence: evidence)
            let report = AddressAssessment.judge(probed, toolVersion: "bench")
            outcome.verdict = report.valid ? "SUCCESS" : "FAILURE"
            outcome.errors = report.findings.filter { $0.severity == .error }.map(\.id.rawValue)
            outcome.warnings = report.findings.filter { $0.severity == .warning }.map(\.id.rawValue)
        } catch {
            outcome.errors = ["input: \(error)"]
        }
        return outcome
    }

    /// Agreement per family: cases, agreeing, deliberate differences, other disagreements.
    static func table(_ outcomes: [Outcome], differences: [String: String]) -> String {
        var families: [String: (cases: Int, agree: Int, deliberate: Int)] = [:]
        for outcome in outcomes {
            var row = families[outcome.family] ?? (0, 0, 0)
            row.cases += 1
            if outcome.agrees { row.agree += 1 } else if differences[outcome.id] != nil { row.deliberate += 1 }
            families[outcome.family] = row
        }
        var lines = ["family                      cases   agree  Apple's choice  other  agreement"]
        func line(_ name: String, _ row: (cases: Int, agree: Int, deliberate: Int)) -> String {
            let name = name.padding(toLength: 26, withPad: " ", startingAt: 0)
            return String(format: "%@ %7d %7d %15d %6d  %8.2f%%", name, row.cases, row.agree, row.deliberate,
                          row.cases - row.agree - row.deliberate, 100 * Double(row.agree) / Double(max(1, row.cases)))
        }
        for (name, row) in families.sorted(by: { $0.key < $1.key }) { lines.append(line(name, row)) }
        let total = families.values.reduce((cases: 0, agree: 0, deliberate: 0)) { ($0.cases + $1.cases, $0.agree + $1.agree, $0.deliberate + $1.deliberate) }
        lines.append(line("all", total))
        return lines.joined(separator: "\n")
    }
}
