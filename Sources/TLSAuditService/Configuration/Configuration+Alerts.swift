import Foundation
import TLSAuditCore
import Yams

/// `alerts:` and its sinks.
extension ConfigurationParser {
    static let alertKeys = ["unreachable_after", "expiry_thresholds", "first_scan", "sinks"]

    mutating func alerts(_ node: Node) -> AlertConfiguration {
        var configuration = AlertConfiguration()
        guard let mapping = section(node, "alerts must be a mapping: unreachable_after, expiry_thresholds, first_scan, sinks",
                                    allowed: Self.alertKeys, in: "alerts") else { return configuration }
        if let value = mapping["unreachable_after"], let count = integer(value, in: 1...10_000) {
            configuration.rules.unreachableAfter = count
        }
        if let value = mapping["first_scan"], let enabled = boolean(value) {
            configuration.rules.alertOnFirstScan = enabled
        }
        if let value = mapping["expiry_thresholds"] {
            if case .sequence(let sequence) = value, !sequence.isEmpty {
                configuration.rules.expiryThresholds = sequence.compactMap { integer($0, in: 0...3650) }
            } else {
                report(value, "expiry_thresholds must be a list of days, e.g. [30, 14, 7, 1]")
            }
        }
        if let value = mapping["sinks"] {
            guard case .sequence(let sequence) = value else {
                report(value, "sinks must be a list")
                return configuration
            }
            configuration.sinks = []
            for (index, entry) in sequence.enumerated() {
                guard let sink = sink(entry, index: index) else { continue }
                if configuration.sinks.contains(where: { $0.name == sink.name }) {
                    report(entry, "two sinks are named '\(sink.name)'; give one a distinct 'name'")
                } else {
                    configuration.sinks.append(sink)
                }
            }
        }
        return configuration
    }

    /// One entry of `alerts.sinks`: the keys every sink takes here, the rest read by its kind (`AlertSink`).
    mutating func sink(_ node: Node, index: Int) -> SinkConfiguration? {
        let types = AlertSinkKinds.types
        guard let mapping = section(node, "a sink must be a mapping with a 'type' (\(types.joined(separator: ", ")))",
                                    allowed: AlertSinkKinds.keys, in: "a sink") else { return nil }
        guard let typeNode = mapping["type"], let type = string(typeNode, "a sink type") else {
            report(node, "a sink needs a 'type': \(types.dropLast().joined(separator: ", ")) or \(types.last ?? "")")
            return nil
        }
        let timeout = mapping["timeout"].flatMap { duration($0, SettingBounds.sinkTimeout) } ?? SettingBounds.sinkTimeout.defaultValue
        if let timeoutNode = mapping["timeout"], timeout > ServiceConfiguration.defaultShutdownGrace {
            // README, "Stopping": deliveries do not hold up a stop beyond the grace.
            warnings.append(ConfigurationError(file: file, line: timeoutNode.mark?.line, message: """
                sink timeout \(Int(timeout)) s is longer than serve's --shutdown-grace (\(Int(ServiceConfiguration.defaultShutdownGrace)) s by \
                default, within the unit's TimeoutStopSec=30): a delivery still running at a stop is abandoned at the grace \
                and sent again after the restart
                """))
        }
        var minimum = AlertSeverity.info
        if let severityNode = mapping["min_severity"], let text = string(severityNode, "a severity") {
            if let severity = AlertSeverity(rawValue: text) {
                minimum = severity
            } else {
                report(severityNode, "min_severity must be one of \(AlertSeverity.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        guard let kind = AlertSinkKinds.kind(type) else {
            report(typeNode, "sink type '\(type)' is not one of \(types.joined(separator: ", "))")
            return nil
        }
        guard let sink = kind.configured(SinkEntry(node: node, mapping: mapping, timeout: timeout), parser: &self) else { return nil }
        let name = mapping["name"].flatMap { string($0, "a sink name") } ?? (index == 0 ? type : "\(type)-\(index + 1)")
        return SinkConfiguration(name: name, kind: sink, minimumSeverity: minimum)
    }

    /// A sink's `url`: an http:// or https:// URL with a host (nil when absent or not one).
    mutating func httpURL(_ node: Node?) -> URL? {
        guard let node, let text = string(node, "a URL"), let url = URL(string: text),
              ["http", "https"].contains(url.scheme ?? ""), url.host != nil else { return nil }
        return url
    }
}
