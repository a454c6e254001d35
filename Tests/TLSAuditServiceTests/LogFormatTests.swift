import Foundation
import Testing
import TLSAuditCore
import TLSAuditSupport
import TLSAuditProcess
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// The service's log lines as operators filter them: the journal's priority prefixes (what
/// `journalctl -p err` keeps), JSON lines for log shippers, and `auto` choosing the journal format
/// only when stderr really is systemd's journal stream. The real service (`tlsaudit demo`: the
/// service against its own lab, alerts included) writes them.
@Suite("log formats: journal priorities, JSON lines, JOURNAL_STREAM")
struct LogFormatTests {
    /// `tlsaudit demo --verbose --cycles 1 ARGS` with stderr in a file, and that file's lines.
    /// `journalStream`: JOURNAL_STREAM's value, given the file's "device:inode".
    func demoLog(_ arguments: [String], journalStream: ((String) -> String)? = nil) throws -> [String] {
        let workspace = try ServiceLab.shared.workspace("logs")
        let log = workspace.appendingPathComponent("stderr-\(UUID().uuidString.prefix(6)).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        var status = stat()
        #expect(stat(log.path, &status) == 0)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: Binary.path)
        process.arguments = ["demo", "--verbose", "--cycles", "1", "--database", workspace.appendingPathComponent("\(UUID().uuidString).sqlite").path]
            + arguments
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "JOURNAL_STREAM")
        if let journalStream { environment["JOURNAL_STREAM"] = journalStream("\(status.st_dev):\(status.st_ino)") }
        process.environment = environment
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// The syslog priority of a journal line, nil when it has no `<N>` prefix.
    static func priority(_ line: String) -> Int? {
        guard line.count > 3, line.hasPrefix("<"), let close = line.firstIndex(of: ">") else { return nil }
        return Int(line[line.index(after: line.startIndex)..<close])
    }

    /// A line that starts with its own timestamp, as the text format's do.
    static func startsWithTimestamp(_ line: String) -> Bool { line.range(of: #"^\d{4}-\d{2}-\d{2}T"#, options: .regularExpression) != nil }

    @Test("--log-format journal: every line has its priority prefix and no timestamp; '-p err' keeps exactly the error and critical events (the alerts), info keeps the stored scans")
    func journal() throws {
        let lines = try demoLog(["--log-format", "journal"])
        #expect(lines.count >= 10, "\(lines)")
        #expect(lines.allSatisfy { Self.priority($0) != nil }, "\(lines.filter { Self.priority($0) == nil })")
        #expect(!lines.contains { Self.startsWithTimestamp(String($0.drop { $0 != ">" }.dropFirst())) }, "journald adds the time")
        let errors = lines.filter { (Self.priority($0) ?? 7) <= 3 }
        #expect(!errors.isEmpty && errors.allSatisfy { $0.contains("ALERT [ERROR]") || $0.contains("ALERT [CRITICAL]") }, "\(errors)")
        #expect(lines.contains { $0.hasPrefix("<2>") && $0.contains("certificate.expired") }, "the expired leaf's alert is critical")
        #expect(lines.contains { $0.hasPrefix("<6>") && $0.contains("stored scan") && $0.contains("target=") && $0.contains("address=") })
        #expect(!lines.contains { (Self.priority($0) ?? 0) <= 3 && $0.contains("stored scan") })
    }

    @Test("--log-format json: one object per line with time, level, logger and message; target and address as fields; levels as swift-log names them")
    func json() throws {
        let lines = try demoLog(["--log-format", "json"])
        #expect(lines.count >= 10)
        var levels: Set<String> = []
        var stored = 0
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], "not a JSON object: \(line)")
            #expect(object["time"].flatMap(Timestamp.parse) != nil && object["message"] != nil && object["logger"] != nil, "\(object)")
            levels.insert(object["level"] ?? "")
            if object["message"] == "stored scan" {
                stored += 1
                #expect(object["target"] != nil && object["address"] == "127.0.0.1", "\(object)")
            }
        }
        #expect(stored >= 5, "every demo target's scan is logged")
        #expect(levels.isSuperset(of: ["info", "error", "critical"]), "\(levels)")
    }

    @Test("auto (the default): the journal format when JOURNAL_STREAM names stderr's device and inode (as systemd sets it), text when it names something else or is absent")
    func auto() throws {
        let underSystemd = try demoLog([], journalStream: { $0 })
        #expect(!underSystemd.isEmpty && underSystemd.allSatisfy { Self.priority($0) != nil }, "\(underSystemd.prefix(3))")
        let elsewhere = try demoLog([], journalStream: { _ in "1:1" })
        #expect(!elsewhere.isEmpty && elsewhere.allSatisfy { Self.priority($0) == nil }, "\(elsewhere.prefix(3))")
        #expect(elsewhere.contains(where: Self.startsWithTimestamp), "readable text with its own time: \(elsewhere.prefix(3))")
        let terminal = try demoLog([])
        #expect(terminal.allSatisfy { Self.priority($0) == nil })
    }
}
