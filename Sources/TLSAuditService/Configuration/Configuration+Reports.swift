import Foundation
import TLSAuditCore
import TLSAuditReport
import Yams

/// `reports:`, scheduled reports.
extension ConfigurationParser {
    static let reportKeys = ["name", "schedule", "at", "day", "timezone", "since", "formats", "directory", "policy",
                             "expiring_within", "keep", "sinks"]

    /// `reports:`: a list of scheduled reports.
    /// `sinks`: those of `alerts.sinks`, that reports may name.
    mutating func reports(_ node: Node, sinks configured: [SinkConfiguration], database: String) -> [ReportSchedule] {
        let sinks = configured.map(\.name)
        guard case .sequence(let sequence) = node else {
            report(node, "reports must be a list of scheduled reports, each with a 'schedule' (daily or weekly)")
            return []
        }
        var schedules: [ReportSchedule] = []
        for entry in sequence {
            guard case .mapping(let mapping) = entry else {
                report(entry, "a report must be a mapping with a 'schedule' (daily or weekly)")
                continue
            }
            checkKeys(mapping, allowed: Self.reportKeys, in: "a report")
            guard let scheduleNode = mapping["schedule"], let text = string(scheduleNode, "daily or weekly") else {
                report(entry, "a report needs a 'schedule': daily or weekly")
                continue
            }
            guard let frequency = ReportSchedule.Frequency(rawValue: text) else {
                report(scheduleNode, "schedule '\(text)' is not one of daily, weekly")
                continue
            }
            let name = mapping["name"].flatMap { string($0, "a report name") } ?? frequency.rawValue
            if name.contains("/" as Character) || name.hasPrefix(".") {
                report(mapping["name"] ?? entry, "a report name names files: no '/' and no leading '.'")
                continue
            }
            let directory = mapping["directory"].flatMap { string($0, "a directory") } ?? "reports"
            var schedule = ReportSchedule(
                name: name, frequency: frequency,
                directory: directory.hasPrefix("/") ? directory
                    : URL(fileURLWithPath: database).deletingLastPathComponent().appendingPathComponent(directory).path)
            if let atNode = mapping["at"], let text = string(atNode, "a time of day") {
                if let seconds = Self.timeOfDay(text) { schedule.timeOfDay = seconds } else {
                    report(atNode, "at must be a time of day, HH:MM or HH:MM:SS (24-hour), not '\(text)'")
                }
            }
            if let dayNode = mapping["day"], let text = string(dayNode, "a day of the week") {
                let days = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
                if let index = days.firstIndex(of: text.lowercased()) { schedule.weekday = index + 1 } else {
                    report(dayNode, "day must be one of \(days.joined(separator: ", "))")
                }
                if frequency == .daily { report(dayNode, "'day' applies to weekly reports only") }
            }
            if let zoneNode = mapping["timezone"], let text = string(zoneNode, "a time zone") {
                if let zone = TimeZone(identifier: text) { schedule.timeZone = zone } else {
                    report(zoneNode, "'\(text)' is not a time zone (an IANA name like UTC or Europe/Paris)")
                }
            }
            if let sinceNode = mapping["since"], let value = duration(sinceNode, SettingBounds.reportPeriod) { schedule.since = value }
            if let value = mapping["expiring_within"], let seconds = duration(value, SettingBounds.expiringWithin) {
                schedule.expiringWithinDays = Int(seconds / 86_400)
            }
            if let keepNode = mapping["keep"], let value = integer(keepNode, in: 0...100_000) { schedule.keep = value }
            if let policyNode = mapping["policy"], let policy: CompliancePolicy = choice(policyNode, "policy", expected: "a policy") {
                schedule.policy = policy
            }
            if let formatsNode = mapping["formats"] {
                let texts: [String]
                if case .sequence(let list) = formatsNode {
                    texts = list.compactMap { string($0, "a format") }
                } else {
                    texts = string(formatsNode, "a format or a list of formats").map { [$0] } ?? []
                }
                let formats = texts.compactMap(ReportFormat.init(rawValue:))
                if formats.count != texts.count || formats.isEmpty {
                    report(formatsNode, "formats must be a non-empty list of \(ReportFormat.allCases.map(\.rawValue).joined(separator: ", "))")
                } else {
                    schedule.formats = formats.enumerated().filter { !formats[..<$0.offset].contains($0.element) }.map(\.element)
                }
            }
            if let sinksNode = mapping["sinks"] {
                if case .sequence(let list) = sinksNode {
                    for item in list {
                        guard let text = string(item, "a sink name") else { continue }
                        if let alertsOnly = configured.first(where: { $0.name == text })?.kind.alertsOnly {
                            report(item, "sink '\(text)' is \(alertsOnly): it takes alerts, not reports")
                        } else if sinks.contains(text) { schedule.sinks.append(text) } else {
                            report(item, "no sink named '\(text)' in alerts.sinks (\(sinks.isEmpty ? "none defined" : sinks.joined(separator: ", ")))")
                        }
                    }
                } else {
                    report(sinksNode, "sinks must be a list of sink names from alerts.sinks")
                }
            }
            if schedules.contains(where: { $0.name == schedule.name }) {
                report(entry, "two reports are named '\(schedule.name)'; give one a distinct 'name'")
            } else {
                schedules.append(schedule)
            }
        }
        return schedules
    }

    /// `06:00` or `06:00:30`: seconds after midnight.
    static func timeOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
        guard (2...3).contains(parts.count), parts.allSatisfy({ $0 != nil }) else { return nil }
        let hour = parts[0]!, minute = parts[1]!, second = parts.count == 3 ? parts[2]! : 0
        guard (0..<24).contains(hour), (0..<60).contains(minute), (0..<60).contains(second) else { return nil }
        return hour * 3600 + minute * 60 + second
    }
}
