import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditStore
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// What the operator reads answers "what is wrong": the specific trust reason, and which target
/// a row belongs to when one host name has several.
@Suite("operator output", .serialized)
struct OperatorOutputTests {
    let lab = ServiceLab.shared

    @Test("status and history name the trust.* reason; history tells targets on one host apart and takes HOST:PORT")
    func specificCauses() throws {
        let expired = try lab.expiredServer()
        let good = try lab.goodServer()
        defer {
            expired.stop()
            good.stop()
        }
        let workspace = try lab.workspace("operator")
        let database = workspace.appendingPathComponent("db.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        // Two unnamed targets on one host: their keys are HOST:PORT.
        var yaml = lab.configuration(database: database, targets: [], interval: "200ms")
        for port in [expired.port, good.port] { yaml += "  - \(ServiceLab.hostname):\(port)\n" }
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans of both") { Set(service.storedScans.map(\.target)).count == 2 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)

        // Before: NOT COMPLIANT (ats.trust), with nothing on what to renew.
        let status = try Binary.run(["status", "--database", database])
        #expect(status.stdout.contains("NOT COMPLIANT (trust.expired)"), "\(status.stdout)")
        let json = try Binary.run(["status", "--database", database, "--format", "json"])
        #expect(json.stdout.contains("\"trust_errors\""), "\(json.stdout.prefix(600))")

        let both = try Binary.run(["history", "--database", database, ServiceLab.hostname])
        #expect(both.stdout.hasPrefix("TARGET"), "\(both.stdout)")
        #expect(both.stdout.contains("\(ServiceLab.hostname):\(expired.port)") && both.stdout.contains("\(ServiceLab.hostname):\(good.port)"))
        #expect(both.stdout.contains("NOT COMPLIANT (trust.expired)"))
        let one = try Binary.run(["history", "--database", database, "\(ServiceLab.hostname):\(good.port)"])
        #expect(!one.stdout.hasPrefix("TARGET") && !one.stdout.contains("NOT COMPLIANT"), "\(one.stdout)")
        #expect(one.stdout.contains("COMPLIANT"))
    }
}
