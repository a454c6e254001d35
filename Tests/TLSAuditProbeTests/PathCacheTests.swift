import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab

/// A trust store remembers the paths built against it, and the probe the summaries of the
/// certificates it met: a scan's results must be what a fresh process would find.
@Suite("built paths and summaries reused within a process")
struct PathCacheTests {
    func scan(_ server: LabTLSServer, scanner: TLSScanner, at time: Date = Date()) -> AddressScanResult {
        let target = ScanTarget(original: "t", host: TestPKI.hostname, port: server.port, sni: TestPKI.hostname,
                                connectTo: [ConnectAddress(host: "127.0.0.1")])
        return scanner.scan(target).addresses[0]
    }

    @Test("the same leaf with and without its intermediate, in turns, against one store: each chain judged on its own")
    func chainsApart() throws {
        let leaf = try TestPKI.shared.leaf()
        let complete = try LabTLSServer(LabServerConfiguration(chain: [leaf, TestPKI.shared.intermediate]))
        let bare = try LabTLSServer(LabServerConfiguration(chain: [leaf]))
        defer { complete.stop(); bare.stop() }
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: TestPKI.shared.rootFile)), judge: AddressAssessment.judge)
        for _ in 0..<2 {
            let good = scan(complete, scanner: scanner)
            #expect(good.chain?.anchored == true)
            #expect(good.chain?.path.count == 3)
            #expect(good.ats.compliant)
            let missing = scan(bare, scanner: scanner)
            #expect(missing.chain?.anchored == false)
            #expect(missing.chain?.issues.contains { $0.kind == .missingIssuer } == true)
            #expect(!missing.ats.compliant)
        }
    }

    @Test("days left are those of each scan's own time, also for a path built before")
    func daysLeftPerScan() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try TestPKI.shared.leaf(), TestPKI.shared.intermediate]))
        defer { server.stop() }
        let store = try TrustStore(caFile: TestPKI.shared.rootFile)
        let now = Date()
        for offset in [0.0, 10.0] {
            let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: store, evaluationTime: now.addingTimeInterval(offset * 86_400)), judge: AddressAssessment.judge)
            let result = scan(server, scanner: scanner)
            let chain = try #require(result.chain)
            for element in chain.path {
                #expect(element.certificate.daysLeft == element.certificate.daysLeft(at: now.addingTimeInterval(offset * 86_400)))
            }
            #expect(chain.presented[0].daysLeft == chain.path[0].certificate.daysLeft)
        }
    }
}
