import Foundation
import Testing
import TLSAuditLab
#if canImport(Glibc)
import Glibc
#endif

/// `serve` with its HTTP listener: health, readiness and Prometheus metrics, read with curl and
/// checked with promtool, as Prometheus and operators read them.
@Suite("monitoring: the HTTP listener", .serialized)
struct MonitoringTests {
    let lab = ServiceLab.shared

    /// What curl got: the status code and the body.
    struct Fetched {
        var status: Int
        var body: String
    }

    static func fetch(_ url: String, token: String? = nil) throws -> Fetched {
        var arguments = ["-sS", "-g", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", url]
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        let output = try Binary.run(arguments, program: "/usr/bin/curl")
        let lines = output.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return Fetched(status: Int(lines.last ?? "") ?? 0, body: lines.dropLast().joined(separator: "\n"))
    }

    /// The addresses the service's listeners said they bound (`http listener started listen=...`).
    static func listening(_ service: ServiceProcess) -> [String] {
        service.lines(containing: "http listener started").compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("listen=") }.map { String($0.dropFirst("listen=".count)) }
        }
    }

    /// Starts `serve` on `targets` with `http` as the listener's settings; waits for `listeners` of them.
    func service(_ name: String, targets: [(String, Int)], http: String, listeners: Int = 1) throws -> (ServiceProcess, URL) {
        let workspace = try lab.workspace(name)
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try lab.configuration(database: workspace.appendingPathComponent("tlsaudit.sqlite").path, targets: targets,
                              extra: "http:\n" + http.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
            .write(toFile: config, atomically: true, encoding: .utf8)
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("the http listeners", timeout: 20) { Self.listening(service).count >= listeners }
        return (service, workspace)
    }

    @Test("health, readiness and /metrics on IPv4 and IPv6: ssl_exporter's names and labels, tlsaudit's own series; the bearer token asked for except on the health checks; promtool check metrics passes")
    func metricsAndHealth() throws {
        let good = try lab.goodServer()
        let expired = try lab.expiredServer()
        defer { good.stop(); expired.stop() }
        let token = "s3cret-\(UUID().uuidString.prefix(8))"
        let tokenFile = try lab.workspace("monitoring-token").appendingPathComponent("token").path
        try (token + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let (service, _) = try service("monitoring-metrics", targets: [("good", good.port), ("expired", expired.port)], http: """
            listen: ["127.0.0.1:0", "[::1]:0"]
            bearer_token_file: \(tokenFile)
            """, listeners: 2)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let addresses = Self.listening(service)
        #expect(addresses.contains { $0.hasPrefix("127.0.0.1:") } && addresses.contains { $0.hasPrefix("[::1]:") }, "\(addresses)")
        service.wait("both targets scanned") { Set(service.storedScans.map(\.target)) == ["good", "expired"] }

        for address in addresses {
            let health = try Self.fetch("http://\(address)/healthz")
            #expect(health.status == 200 && health.body.hasPrefix("ok"), "\(address): \(health)")
            let ready = try Self.fetch("http://\(address)/readyz")
            #expect(ready.status == 200 && ready.body.hasPrefix("ready") && ready.body.contains("store: writable"), "\(address): \(ready)")
            #expect(try Self.fetch("http://\(address)/metrics").status == 401, "no token, no metrics")
            #expect(try Self.fetch("http://\(address)/metrics", token: "wrong").status == 401)
        }
        let metrics = try Self.fetch("http://\(addresses[0])/metrics", token: token)
        #expect(metrics.status == 200)
        let lines = metrics.body.split(separator: "\n").map(String.init)
        func value(_ prefix: String) -> Double? {
            lines.first { $0.hasPrefix(prefix) }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(value(#"ssl_probe_success{target="good",address="127.0.0.1"}"#) == 1, "\(metrics.body.prefix(3000))")
        #expect(value(#"ssl_tls_version_info{target="good",address="127.0.0.1",version="TLS 1.3"}"#) == 1)
        #expect(value(#"tlsaudit_compliant{target="good",address="127.0.0.1""#) == 1)
        #expect(value(#"tlsaudit_compliant{target="expired",address="127.0.0.1""#) == 0)
        #expect(lines.contains { $0.hasPrefix(#"tlsaudit_rule_failed{target="expired",address="127.0.0.1",rule=""#) })
        #expect(value(#"tlsaudit_pin_state{target="good",address="127.0.0.1",state="none"}"#) == 1)
        // The leaf's notAfter, labelled as ssl_exporter labels it (serial in decimal, names framed by commas).
        let serial = try Self.decimalSerial(of: lab.good.pem)
        let leaf = #"ssl_cert_not_after{target="good",address="127.0.0.1",serial_no="\#(serial)",issuer_cn=""#
        #expect(value(leaf) == lab.good.summary.notAfter.timeIntervalSince1970, "\(lines.filter { $0.hasPrefix("ssl_cert_not_after") })")
        #expect(lines.contains { $0.hasPrefix(leaf) && $0.contains(#"cn="\#(ServiceLab.hostname)",dnsnames=",\#(ServiceLab.hostname),""#) })
        #expect(lines.contains { $0.hasPrefix(#"ssl_verified_cert_not_after{target="good",address="127.0.0.1",chain_no="0""#) })
        let expiry = value(#"tlsaudit_chain_expiry_timestamp_seconds{target="expired",address="127.0.0.1"}"#) ?? .infinity
        #expect(expiry == lab.expired.summary.notAfter.timeIntervalSince1970, "the expired chain's earliest expiry: \(expiry)")
        #expect((value(#"tlsaudit_chain_expiry_timestamp_seconds{target="good",address="127.0.0.1"}"#) ?? 0) > Date().timeIntervalSince1970)
        #expect(value(#"tlsaudit_scans_total{status="completed",category="none"}"#) ?? 0 >= 2)
        #expect(lines.contains { $0.hasPrefix("tlsaudit_scan_duration_seconds_bucket{le=") })
        #expect(lines.contains { $0.hasPrefix("tlsaudit_store_write_seconds_count") })
        #expect(value(#"tlsaudit_alerts_raised_total{kind="certificate.expired""#) ?? 0 >= 1, "\(lines.filter { $0.contains("alerts") })")
        #expect((value("process_resident_memory_bytes") ?? 0) > 1_000_000)
        #expect((value("process_open_fds") ?? 0) > 3)

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).txt")
        try metrics.body.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let check = try Binary.run(["-c", "promtool check metrics < \(file.path)"], program: "/bin/sh")
        #expect(check.status == 0, "promtool check metrics: \(check.stdout)\(check.stderr)")
    }

    @Test("hostile clients: 400 stalled connections (slowloris) and a 200 KB header do not stop scanning; stalled connections are closed after the idle timeout; descriptors stay bounded")
    func hostileClients() throws {
        let good = try lab.goodServer()
        defer { good.stop() }
        let (service, _) = try service("monitoring-hostile", targets: [("good", good.port)], http: """
            listen: "127.0.0.1:0"
            max_connections: 50
            idle_timeout: 2s
            """)
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        let address = Self.listening(service)[0]
        let port = UInt16(address.split(separator: ":").last ?? "") ?? 0
        service.wait("a first scan") { !service.storedScans.isEmpty }
        let descriptorsBefore = Self.descriptors(of: service)

        // 400 connections, each sending the start of a request and nothing more.
        var stalled: [Int32] = []
        defer { for socket in stalled { close(socket) } }
        for _ in 0..<400 {
            let socket = Self.connect(port: port)
            guard socket >= 0 else { break }
            _ = "GET /metrics HTTP/1.1\r\nHost: x\r\n".withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            stalled.append(socket)
        }
        #expect(stalled.count == 400)
        let held = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 4)
        let scansMeanwhile = service.storedScans.filter { $0.startedAt > held }.count
        #expect(scansMeanwhile >= 2, "scanning went on (interval 1 s): \(scansMeanwhile) scans in 4 s")
        let descriptors = Self.descriptors(of: service)
        #expect(descriptors - descriptorsBefore <= 60, "descriptors: \(descriptorsBefore) before, \(descriptors) with 400 clients (max 50 connections)")
        // The accepted ones were closed at the idle timeout: reading gives end of file (or a reset).
        let closed = stalled.prefix(20).filter { socket in
            var pollDescriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&pollDescriptor, 1, 100) == 1 else { return false }
            var byte: UInt8 = 0
            return recv(socket, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
        }
        #expect(closed.count >= 10, "stalled connections closed after the 2 s idle timeout: \(closed.count) of 20")
        for socket in stalled { close(socket) }
        stalled.removeAll()

        // A request with a 200 KB header is refused, and the listener still answers afterwards.
        let header = FileManager.default.temporaryDirectory.appendingPathComponent("header-\(UUID().uuidString)")
        try ("X-Big: " + String(repeating: "a", count: 200_000) + "\n").write(to: header, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: header) }
        let huge = try Binary.run(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                                   "-H", "@\(header.path)", "http://\(address)/healthz"], program: "/usr/bin/curl")
        #expect(huge.stdout != "200", "a 200 KB header is not served: \(huge.stdout) \(huge.stderr)")
        service.wait("the listener answering again") { (try? Self.fetch("http://\(address)/healthz"))?.status == 200 }
        #expect(service.waitForExit(timeout: 0) == nil, "the service still runs")
    }

    static func connect(port: UInt16) -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return -1 }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(socket); return -1 }
        return socket
    }

    static func descriptors(of service: ServiceProcess) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(service.pid)/fd"))?.count ?? 0
    }

    /// The certificate's serial number in decimal, as openssl prints it in hex.
    static func decimalSerial(of pem: String) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("serial-\(UUID().uuidString).pem")
        try pem.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try Binary.run(["x509", "-in", file.path, "-noout", "-serial"], program: "/usr/bin/openssl")
        let hex = output.stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "serial=", with: "")
        let script = "print(int('\(hex)', 16))"
        return try Binary.run(["-c", script], program: "/usr/bin/python3").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
