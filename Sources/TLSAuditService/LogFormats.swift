public import Foundation
public import Logging
import TLSAuditCore
import TLSAuditSupport
#if canImport(Glibc)
import Glibc
#endif

/// How the service writes its log lines on stderr (`--log-format`).
public enum LogFormat: String, CaseIterable, Sendable {
    /// `journal` when stderr is the journal's stream (systemd's `JOURNAL_STREAM`), else `text`.
    case auto
    /// Readable lines with their own timestamp (swift-log's stream format), for a terminal.
    case text
    /// One line per event with its syslog priority prefix (`<3>` error, `<4>` warning, `<6>` info)
    /// and no timestamp (journald adds its own), so `journalctl -p err` filters them.
    case journal
    /// One JSON object per line: time, level, logger, message, `target` and `address` where the
    /// event has them, and the rest of its metadata, for log shippers.
    case json

    /// `auto` resolved: journal when `environment`'s `JOURNAL_STREAM` names the device and inode of
    /// this process's stderr (as sd_journal's own check does), text otherwise.
    public func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) -> LogFormat {
        guard self == .auto else { return self }
        return Self.stderrIsJournal(environment["JOURNAL_STREAM"]) ? .journal : .text
    }

    static func stderrIsJournal(_ value: String?) -> Bool {
        guard let parts = value?.split(separator: ":"), parts.count == 2,
              let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(STDERR_FILENO, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }

    /// Bootstraps swift-log with this format (resolved) at `level`.
    public func bootstrap(level: Logger.Level) {
        let format = resolved()
        LoggingSystem.bootstrap { label in
            switch format {
            case .journal, .json:
                var handler = LineLogHandler(label: label, format: format)
                handler.logLevel = level
                return handler
            case .auto, .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}

/// A swift-log handler writing one journal or JSON line per event to stderr, whole lines only
/// (a line is written with one `write`, under a lock, so concurrent events never interleave).
public struct LineLogHandler: LogHandler {
    public let label: String
    public let format: LogFormat
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private static let lock = NSLock()

    public init(label: String, format: LogFormat) {
        self.label = label
        self.format = format
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String,
                    file: String, function: String, line: UInt) {
        let merged = metadata.merging(explicit ?? [:]) { $1 }
        let text = format == .json ? Self.jsonLine(level: level, label: label, message: "\(message)", metadata: merged, time: Date())
                                   : Self.journalLine(level: level, label: label, message: "\(message)", metadata: merged)
        let bytes = Array((text + "\n").utf8)
        Self.lock.lock()
        defer { Self.lock.unlock() }
        // A log line nobody can read must not stop the service: a failure to write it is ignored.
        _ = bytes.withUnsafeBytes { DescriptorWrites.writeAll($0, to: STDERR_FILENO) }
    }

    /// syslog's priority for a swift-log level (RFC 5424: 2 critical, 3 error, 4 warning, 5 notice, 6 info, 7 debug).
    public static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .critical: 2
        case .error: 3
        case .warning: 4
        case .notice: 5
        case .info: 6
        case .debug, .trace: 7
        }
    }

    /// `<4>tlsaudit.scheduler: target unreachable target=a.example address=192.0.2.1`: the priority
    /// prefix, the logger, the message and the metadata as key=value (sorted), on one line (a newline
    /// in the message becomes `\n`), no timestamp.
    public static func journalLine(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) -> String {
        let fields = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let text = ([message] + fields).joined(separator: " ")
        return "<\(syslogPriority(level))>\(label): " + text.replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// One JSON object: `time` (RFC 3339, UTC, milliseconds), `level`, `logger`, `message`, then the
    /// metadata's keys (`target`, `address`, ...) as string fields beside them.
    public static func jsonLine(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata, time: Date) -> String {
        var object: [String: String] = [:]
        for (key, value) in metadata { object[key] = "\(value)" }
        object["time"] = Timestamp.formatMilliseconds(time)
        object["level"] = level.rawValue
        object["logger"] = label
        object["message"] = message
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return #"{"level":"error","message":"a log line could not be encoded"}"#
        }
        return String(decoding: data, as: UTF8.self)
    }
}
