import ArgumentParser
import Foundation
import TLSAuditModel
import TLSAuditProbe

/// `tlsaudit-bench sct --chain LEAF --chain ISSUER`: times the verification of a leaf's SCTs (what a
/// scan adds per address since SCTs are verified) beside the leaf's summary, which every scan makes.
struct SCTBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sct",
        abstract: "Time SCT verification (embedded SCTs over the precertificate) against summarising the same leaf."
    )

    @Option(name: .customLong("chain"), help: "The leaf, then its issuer (PEM or DER), e.g. cryptography_vectors' cryptography-scts.pem and letsencryptx3.pem.")
    var files: [String]

    @Option(name: .customLong("ct-log-list"), help: "The log list to verify against (default: the shipped snapshot).")
    var ctLogList: String?

    @Option(help: "Verifications to time.")
    var runs: Int = 2_000

    func run() throws {
        guard files.count == 2 else { throw ValidationError("give --chain LEAF --chain ISSUER") }
        let logs = try ctLogList.map(CTLogList.load(path:)) ?? .shipped
        let (verify, cached, summarise, scts) = try SCTVerifier.benchmark(leaf: files[0], issuer: files[1], logs: logs, runs: runs)
        print("SCTs: \(scts.map { "\($0.origin.rawValue) \($0.signature.rawValue)" }.joined(separator: ", "))")
        print(String(format: "verify all SCTs: %.1f µs per leaf (%.1f µs per SCT); the same leaf again (cached): %.1f µs; summarise the leaf: %.1f µs; ratios %.2fx and %.2fx",
                     verify * 1e6, verify * 1e6 / Double(max(1, scts.count)), cached * 1e6, summarise * 1e6, verify / summarise, cached / summarise))
    }
}
