import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditSupport

/// `tlsaudit-bench json FILE`: encodes a `scan --format json` document again and again with
/// tlsaudit's encoder and with Foundation's, and prints the time per document and per target.
struct JSONBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "json",
        abstract: "Time JSONDocumentEncoder against Foundation's JSONEncoder on a scan document."
    )

    @Argument(help: "A file written by `tlsaudit scan --format json`.")
    var file: String

    @Option(help: "Encodings per encoder.")
    var runs: Int = 20

    @Flag(name: .customLong("only-tlsaudit"), help: "Time only tlsaudit's encoder (for `perf stat`: instruction counts hold still where times do not).")
    var onlyTLSAudit = false

    func run() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        let report = try JSONDecoder.tlsaudit.decode(ScanReport.self, from: data)
        let foundation = JSONEncoder()
        foundation.keyEncodingStrategy = .convertToSnakeCase
        foundation.dateEncodingStrategy = .iso8601
        foundation.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let targets = max(1, report.targets.count)
        func time(_ name: String, _ encode: () throws -> Data) rethrows {
            var best = Double.infinity
            var first = 0.0
            var size = 0
            for run in 0..<runs {
                let start = ContinuousClock.now
                size = try encode().count
                let elapsed = ContinuousClock.now - start
                let seconds = elapsed.seconds
                if run == 0 { first = seconds }
                best = min(best, seconds)
            }
            print("\(name): first \(String(format: "%.1f", first * 1000)) ms, best of \(runs) \(String(format: "%.1f", best * 1000)) ms per document, "
                  + "\(String(format: "%.3f", best * 1000 / Double(targets))) ms per target, \(size) bytes")
        }
        let again = try JSONDocumentEncoder.tlsaudit.encode(report) + Data("\n".utf8)
        print("encoded again: \(again == data ? "the same bytes as the file" : "DIFFERENT from the file")")
        try time("JSONDocumentEncoder") { try JSONDocumentEncoder.tlsaudit.encode(report) }
        if !onlyTLSAudit { try time("Foundation JSONEncoder") { try foundation.encode(report) } }
    }
}
