import Foundation
import Synchronization
import Testing
import TLSAuditModel
import TLSAuditMonitoring
import TLSAuditStore

/// The per-address series as a scrape writes them: the table is read a batch at a time (256
/// addresses), so these tests use more addresses than a batch and change the table mid-scrape.
@Suite("monitoring: per-address series")
struct AddressSeriesTests {
    static func scan(_ target: String, address: String = "127.0.0.1", failed: [FindingID] = []) -> StoredScan {
        let result = AddressScanResult(
            address: address, family: "IPv4", port: 443, status: .completed, startedAt: Date(timeIntervalSince1970: 1_700_000_000),
            durationMs: 12, handshake: nil, error: nil, chain: nil, findings: [],
            ats: PolicyVerdict(policy: .atsRuntime, compliant: failed.isEmpty, rules: [:], failedRules: failed))
        return StoredScan(target: target, host: "h", port: 443, sni: nil, result: result)
    }

    /// The exposition's samples of one family, as (labels, value) in the order written.
    static func samples(_ metrics: ScanMetrics, family: String,
                        whileWriting change: (@Sendable (Int) -> Void)? = nil) async throws -> [(String, String)] {
        let written = Mutex<[UInt8]>([])
        let chunks = Mutex(0)
        try await metrics.exposition { chunk in
            written.withLock { $0 += chunk }
            change?(chunks.withLock { $0 += 1; return $0 })
        }
        let text = written.withLock { String(decoding: $0, as: UTF8.self) }
        return text.split(separator: "\n").compactMap { line -> (String, String)? in
            guard line.hasPrefix(family + "{"), let close = line.lastIndex(of: "}") else { return nil }
            return (String(line[line.index(line.startIndex, offsetBy: family.count + 1)..<close]),
                    String(line[line.index(close, offsetBy: 2)...]))
        }
    }

    @Test("every address once, ordered by target and address, across batches; label values escaped; rules listed per address")
    func orderedAcrossBatches() async throws {
        let metrics = ScanMetrics()
        // Recorded in reverse order, two addresses each; one name needs escaping.
        let names = (0..<700).map { String(format: "t%04d.example:443", $0) } + ["quote\"back\\slash"]
        metrics.record(names.reversed().flatMap { [Self.scan($0, address: "::1"), Self.scan($0, failed: ["ats.tls-version"])] })
        let probes = try await Self.samples(metrics, family: "ssl_probe_success")
        #expect(probes.count == 1_402)
        let expected = names.sorted().flatMap { name -> [String] in
            let escaped = name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            return ["target=\"\(escaped)\",address=\"127.0.0.1\"", "target=\"\(escaped)\",address=\"::1\""]
        }
        #expect(probes.map(\.0) == expected)
        let failed = try await Self.samples(metrics, family: "tlsaudit_rule_failed")
        #expect(failed.count == 701 && failed.allSatisfy { $0.0.hasSuffix("address=\"127.0.0.1\",rule=\"ats.tls-version\"") })
        // A new scan of an address replaces its series.
        metrics.record([Self.scan(names[0])])
        #expect(try await Self.samples(metrics, family: "tlsaudit_rule_failed").count == 700)
    }

    @Test("tlsaudit_target_app_info: one series per app of a target (its app: tags, its scan's app outcome), none for other targets; absent without apps")
    func appInfo() async throws {
        let metrics = ScanMetrics()
        metrics.record([Self.scan("plain")])
        #expect(try await Self.samples(metrics, family: "tlsaudit_target_app_info").isEmpty)
        var tagged = Self.scan("shop")
        tagged.tags = ["app:com.example.shop", "prod"]
        var judged = Self.scan("judged")
        judged.result.app = AppHostOutcome(bundle: "com.example.other", entry: nil, reliesOn: [], configuration: "ats-default",
                                           connects: true, reasons: [], detail: "")
        metrics.record([tagged, judged])
        let info = try await Self.samples(metrics, family: "tlsaudit_target_app_info")
        #expect(info.map(\.0) == [#"target="judged",address="127.0.0.1",app="com.example.other""#,
                                   #"target="shop",address="127.0.0.1",app="com.example.shop""#], "\(info)")
        #expect(info.allSatisfy { $0.1 == "1.0" })
        // The other families keep ssl_exporter's label sets: no app label.
        #expect(try await Self.samples(metrics, family: "ssl_probe_success").allSatisfy { !$0.0.contains("app=") })
        // A new scan without the tag drops the series.
        metrics.record([Self.scan("shop")])
        #expect(try await Self.samples(metrics, family: "tlsaudit_target_app_info").map(\.0) == [#"target="judged",address="127.0.0.1",app="com.example.other""#])
    }

    @Test("addresses added and targets dropped during a scrape: no address twice, none of a dropped target after the drop")
    func changedMidScrape() async throws {
        let metrics = ScanMetrics()
        let names = (0..<1_000).map { String(format: "t%04d", $0) }
        metrics.record(names.map { Self.scan($0) })
        let scrape = try await Self.samples(metrics, family: "tlsaudit_last_scan_timestamp_seconds") { chunk in
            // After the first chunk: new addresses (some sorting before the point reached), and half the targets dropped.
            guard chunk == 1 else { return }
            metrics.record((0..<50).map { Self.scan(String(format: "t%04d", $0 * 20), address: "10.0.0.1") })
            metrics.keepOnly(targets: Set(names.filter { Int($0.dropFirst())! % 2 == 0 } + ["t0000"]))
        }
        let labels = scrape.map(\.0)
        #expect(Set(labels).count == labels.count, "an address written twice")
        #expect(labels == labels.sorted(), "out of order")
        let afterDrop = labels.drop { !$0.hasPrefix("target=\"t09") }
        #expect(!afterDrop.isEmpty && afterDrop.allSatisfy { label in
            Int(label.dropFirst("target=\"t".count).prefix(4))! % 2 == 0
        })
        // The next scrape has exactly what is left: the 500 even targets' first address and the new ones of even targets.
        let next = try await Self.samples(metrics, family: "tlsaudit_last_scan_timestamp_seconds")
        #expect(next.count == 500 + 50)
    }
}
