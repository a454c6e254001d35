// Test support: compiled only where swift-testing is (`swift test`); a release build of the package
// (`swift build -c release`) builds this target empty.
#if canImport(Testing)
public import Foundation
import GRDB
public import Testing
import TLSAuditProbe
public import TLSAuditLab
import TLSAuditStore
import TLSAuditSupport
public import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// A PKI and servers for the service tests.
public struct ServiceLab: Sendable {
    public static let shared: ServiceLab = try! ServiceLab()
    public static let hostname = "service.tlsaudit.test"

    public let root: LabCertificate
    public let intermediate: LabCertificate
    public let good: LabCertificate
    public let expired: LabCertificate
    public let directory: URL
    public var rootFile: String { directory.appendingPathComponent("root.pem").path }

    private init() throws {
        root = try LabCertificateAuthority.selfSigned(.authority("service test root"))
        intermediate = try root.issue(.authority("service test intermediate"))
        good = try intermediate.issue(.server([Self.hostname]))
        var request = LabCertificateRequest.server([Self.hostname])
        request.notBefore = Date().addingTimeInterval(-90 * 86_400)
        request.notAfter = Date().addingTimeInterval(-86_400)
        expired = try intermediate.issue(request)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-service-tests-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Gone when the test process exits, with every workspace in it (a crashed run leaves it to look at).
        atexit { try? FileManager.default.removeItem(at: ServiceLab.shared.directory) }
        try root.pem.write(to: directory.appendingPathComponent("root.pem"), atomically: true, encoding: .utf8)
    }

    public func goodServer() throws -> LabTLSServer { try LabTLSServer(LabServerConfiguration(chain: [good, intermediate])) }
    public func expiredServer() throws -> LabTLSServer { try LabTLSServer(LabServerConfiguration(chain: [expired, intermediate])) }

    /// A fresh directory for one test.
    public func workspace(_ name: String) throws -> URL {
        let url = directory.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A `serve` process on a fresh workspace: `targets` (YAML flow mappings, one per line) on
    /// 127.0.0.1 with server name `sni`, scanned every second, trusting the lab root. Returns the
    /// process and its SQLite database's path.
    public func service(_ name: String, sni: String, targets: [String]) throws -> (process: ServiceProcess, database: String) {
        let workspace = try self.workspace(name)
        let database = workspace.appendingPathComponent("tlsaudit.sqlite").path
        let config = workspace.appendingPathComponent("tlsaudit.yaml").path
        try """
            database: \(database)
            defaults:
              interval: 1s
              timeout: 3s
              sni: \(sni)
              addresses: [127.0.0.1]
              trust: {ca_file: \(rootFile)}
            targets:

            """.appending(targets.map { "  - \($0)\n" }.joined()).write(toFile: config, atomically: true, encoding: .utf8)
        return (try ServiceProcess(config: config, workspace: workspace), database)
    }

    /// The newest stored scan of `target`, as `history --format json` prints it.
    public static func latestHistory(_ target: String, database: String) throws -> [String: Any] {
        let output = try Binary.run(["history", target, "--database", database, "--format", "json", "--limit", "1"])
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [[String: Any]], "\(output.stderr)")
        return try #require(entries.first)
    }

    /// YAML for targets `name: port` on 127.0.0.1, trusting the lab root.
    public func configuration(database: String, targets: [(String, Int)], interval: String = "1s", timeout: String = "2s",
                       extra: String = "", tags: [String: [String]] = [:], perHostConcurrency: Int = 8) -> String {
        var yaml = """
            database: \(database)
            concurrency: 16
            per_host_concurrency: \(perHostConcurrency)
            max_backoff: 30s
            log_level: info
            \(extra)
            defaults:
              interval: \(interval)
              timeout: \(timeout)
              sni: \(Self.hostname)
              addresses: [127.0.0.1]
              trust:
                ca_file: \(rootFile)
            targets:

            """
        for (name, port) in targets {
            let tagged = tags[name].map { ", tags: [\($0.joined(separator: ", "))]" } ?? ""
            yaml += "  - {host: \(Self.hostname), port: \(port), name: \(name)\(tagged)}\n"
        }
        return yaml
    }
}

/// The built `tlsaudit`, run to completion (`LabCommand`, the runner every test target shares).
public enum Binary {
    public static var path: String { LabCommand.tlsaudit }

    public typealias Output = LabCommand.Output

    /// Runs `tlsaudit ARGS` (or another `program`: systemd-analyze, chromium) to completion.
    public static func run(_ arguments: [String], program: String = path, directory: String? = nil,
                    environment: [String: String] = [:]) throws -> Output {
        try LabCommand.run(arguments, program: program, limit: 300, directory: directory, environment: environment)
    }
}

/// A `tlsaudit serve` process with its log in a file.
public final class ServiceProcess: @unchecked Sendable {
    public let process = ChildProcess()
    public let logFile: URL

    /// `launcher` runs the binary through another program (e.g. setpriv to drop privileges).
    public init(config: String, workspace: URL, environment: [String: String] = [:], extraArguments: [String] = [],
         launcher: [String] = []) throws {
        logFile = workspace.appendingPathComponent("service-\(UUID().uuidString.prefix(6)).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let command = launcher + [Binary.path, "serve", "--config", config] + extraArguments
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "NOTIFY_SOCKET")
        env.merge(environment) { $1 }
        process.environment = env
        process.standardError = try FileHandle(forWritingTo: logFile)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        process.signal(SIGKILL)
        process.waitUntilExit()
    }

    public var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    /// Log lines containing `text`.
    public func lines(containing text: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { $0.contains(text) }
    }

    /// Waits until `condition` holds (polling), or fails the test after `timeout` seconds.
    @discardableResult
    public func wait(_ what: String, timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation,
              until condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.1)
        }
        Issue.record("timed out waiting for \(what); log:\n\(log.suffix(3000))", sourceLocation: sourceLocation)
        return false
    }

    public func signal(_ number: Int32) { process.signal(number) }

    /// The process id (its /proc entry).
    public var pid: Int32 { process.processIdentifier }

    /// Waits for the process to exit; returns its status, or nil if it outlived `timeout`.
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        guard !process.isRunning else { return nil }
        return process.terminationStatus
    }

    /// (target, address, started_at) of every "stored scan" log line.
    public var storedScans: [(target: String, address: String, startedAt: Double)] { storedScans(after: nil) }

    /// The stored scans logged after the last line containing `marker` (all of them for nil).
    public func storedScans(after marker: String?) -> [(target: String, address: String, startedAt: Double)] {
        var lines = log.split(separator: "\n").map(String.init)
        if let marker {
            guard let last = lines.lastIndex(where: { $0.contains(marker) }) else { return [] }
            lines = Array(lines[(last + 1)...])
        }
        return lines.filter { $0.contains("stored scan") }.compactMap { line in
            func value(_ key: String) -> String? {
                guard let range = line.range(of: "\(key)=") else { return nil }
                return String(line[range.upperBound...].prefix { $0 != " " })
            }
            guard let target = value("target"), let address = value("address"),
                  let started = value("started_at").flatMap(Timestamp.parse)?.timeIntervalSince1970 else { return nil }
            return (target, address, started)
        }
    }
}

/// A unix datagram socket standing in for systemd's NOTIFY_SOCKET.
public final class NotifySocket: @unchecked Sendable {
    public let path: String
    private let fd: Int32

    public init(directory: URL) throws {
        path = directory.appendingPathComponent("notify.sock").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard status == 0 else { throw HarnessError(message: "cannot bind \(path): errno \(errno)") }
    }

    deinit { close(fd) }

    /// Every message received within `seconds`.
    public func messages(for seconds: Double) -> [String] {
        var received: [String] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 { received.append(String(decoding: buffer[..<count], as: UTF8.self)) }
        }
        return received
    }
}

public struct HarnessError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
    public init(message: String) { self.message = message }
}

/// Every scan stored in the SQLite file `database`, by target: first scans of runs and their
/// repeats alike (the `scan` view), start times in order.
public func storedScanTimes(_ database: String) throws -> [String: [Double]] {
    var times: [String: [Double]] = [:]
    try DatabaseQueue(path: database).read { db in
        for row in try Row.fetchAll(db, sql: "SELECT target, started_at FROM scan ORDER BY started_at") {
            times[row[0], default: []].append(row[1])
        }
    }
    return times
}
#endif
