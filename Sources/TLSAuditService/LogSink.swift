import Foundation

/// `type: log`: a log line through swift-log, at the alert's severity.
struct LogSink: AlertSink {
    static let type = "log"
    static let keys: [String] = []

    static func configured(_ entry: SinkEntry, parser: inout ConfigurationParser) -> LogSink? { LogSink() }

    var timeout: Double { 0 }

    func send(_ body: Data, headers: [String: String], log: () -> Void) -> Result<Void, SinkDeliveryError> {
        log()
        return .success(())
    }
}
