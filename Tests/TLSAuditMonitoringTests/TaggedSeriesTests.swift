import Foundation
import Testing
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// Tags through the listener: the status API filtered by tag, the app's info series.
extension MonitoringTests {
    @Test("the service stores the configured tags; /api/v1/status?tag= filters by every tag given; /metrics has tlsaudit_target_app_info for the app's target only, and promtool accepts it")
    func serviceAPIAndMetrics() throws {
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let (service, workspace) = try service(
            "tags-api", targets: [("good", good.port), ("expired", expired.port)], http: "listen: \"127.0.0.1:0\"",
            tags: ["good": ["app:com.example.shop", "prod"], "expired": ["prod"]])
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("the listener and both scans") { ServiceHTTP.listening(service).count == 1 && service.storedScans.count >= 2 }
        let base = "http://\(ServiceHTTP.listening(service)[0])"

        func targets(_ query: String) throws -> [String] {
            let fetched = try ServiceHTTP.fetch("\(base)/api/v1/status\(query)")
            #expect(fetched.status == 200, "\(query): \(fetched)")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(fetched.body.utf8)) as? [String: Any])
            return (document["targets"] as? [[String: Any]] ?? []).compactMap { $0["target"] as? String }
        }
        #expect(try targets("") == ["expired", "good"])
        #expect(try targets("?tag=prod") == ["expired", "good"])
        #expect(try targets("?tag=app:com.example.shop") == ["good"])
        #expect(try targets("?tag=prod&tag=app%3Acom.example.shop") == ["good"], "every tag given, percent-encoded or not")
        #expect(try targets("?tag=staging") == [])
        let row = try ServiceHTTP.fetch("\(base)/api/v1/status?tag=app:com.example.shop").body
        let document = try #require(try JSONSerialization.jsonObject(with: Data(row.utf8)) as? [String: Any])
        let stored = (document["targets"] as? [[String: Any]])?.first?["tags"] as? [String]
        #expect(stored == ["app:com.example.shop", "prod"], "the configured tags stored: \(row)")

        let metrics = try ServiceHTTP.fetch("\(base)/metrics")
        let info = metrics.body.split(separator: "\n").filter { $0.hasPrefix("tlsaudit_target_app_info") }
        #expect(info == [#"tlsaudit_target_app_info{target="good",address="127.0.0.1",app="com.example.shop"} 1.0"#], "\(info)")
        let file = workspace.appendingPathComponent("metrics.txt")
        try metrics.body.write(to: file, atomically: true, encoding: .utf8)
        let check = try Binary.run(["-c", "promtool check metrics < \(file.path)"], program: "/bin/sh")
        #expect(check.status == 0, "promtool check metrics: \(check.stdout)\(check.stderr)")
    }
}
