public import Foundation
import Logging
import Synchronization
public import TLSAuditCore
import TLSAuditProbe
public import TLSAuditReport
import TLSAuditStore
import TLSAuditSupport

/// A report the service writes on a schedule (`reports:` in the configuration).
public struct ReportSchedule: Sendable, Hashable {
    public enum Frequency: String, Sendable, CaseIterable { case daily, weekly }

    /// Unique; names the files and the run records.
    public var name: String
    public var frequency: Frequency
    /// Time of day, seconds after midnight in `timeZone`.
    public var timeOfDay: Int
    /// Weekly reports: 1 = Sunday ... 7 = Saturday (Calendar's numbering).
    public var weekday: Int
    public var timeZone: TimeZone
    /// The period each report covers, seconds (default: 1 day daily, 7 days weekly).
    public var since: TimeInterval
    public var formats: [ReportFormat]
    public var directory: String
    public var policy: CompliancePolicy?
    public var expiringWithinDays: Int
    /// Files to keep per format, oldest deleted first; 0 keeps all.
    public var keep: Int
    /// Sinks (from `alerts.sinks`) the JSON report is sent to.
    public var sinks: [String]

    public init(name: String, frequency: Frequency, timeOfDay: Int = 6 * 3600, weekday: Int = 2,
                timeZone: TimeZone = TimeZone(identifier: "UTC")!, since: TimeInterval? = nil, formats: [ReportFormat] = [.html],
                directory: String, policy: CompliancePolicy? = nil, expiringWithinDays: Int = SettingBounds.expiringWithinDays, keep: Int = 0,
                sinks: [String] = []) {
        self.name = name
        self.frequency = frequency
        self.timeOfDay = timeOfDay
        self.weekday = weekday
        self.timeZone = timeZone
        self.since = since ?? (frequency == .daily ? 86_400 : 7 * 86_400)
        self.formats = formats
        self.directory = directory
        self.policy = policy
        self.expiringWithinDays = expiringWithinDays
        self.keep = keep
        self.sinks = sinks
    }

    /// The latest scheduled instant at or before `date`.
    public func latestDue(atOrBefore date: Date) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var day = calendar.startOfDay(for: date)
        for _ in 0..<16 {
            // The wall-clock time on that day: a 06:00 report stays at 06:00 local across DST changes.
            if let candidate = calendar.date(bySettingHour: timeOfDay / 3600, minute: timeOfDay % 3600 / 60,
                                             second: timeOfDay % 60, of: day), candidate <= date,
               frequency == .daily || calendar.component(.weekday, from: candidate) == weekday {
                return candidate
            }
            day = calendar.date(byAdding: .day, value: -1, to: day) ?? day.addingTimeInterval(-86_400)
        }
        return date
    }

    /// The next scheduled instant after `date`.
    public func nextDue(after date: Date) -> Date {
        var probe = date.addingTimeInterval(frequency == .daily ? 86_400 : 7 * 86_400)
        // The latest instant at or before a point one period ahead is the next one (DST aside: retry closer).
        while latestDue(atOrBefore: probe) <= date { probe = probe.addingTimeInterval(3600) }
        return latestDue(atOrBefore: probe)
    }

    /// True for exactly `NAME-YYYY-MM-DD.EXT` (another report whose name starts with this one's,
    /// `weekly-eu` next to `weekly`, is not ours to prune).
    public func owns(fileName: String, format: ReportFormat) -> Bool {
        guard fileName.hasPrefix("\(name)-"), fileName.hasSuffix(".\(format.fileExtension)") else { return false }
        let day = fileName.dropFirst(name.count + 1).dropLast(format.fileExtension.count + 1)
        return day.count == 10 && day.enumerated().allSatisfy { index, character in
            [4, 7].contains(index) ? character == "-" : character.isASCII && character.isNumber
        }
    }

    /// `daily-2026-11-22`: the file name (without extension) for the report ending at `end`.
    public func fileStem(for end: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: end)
        let day = String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
        return "\(name)-\(day)"
    }
}

/// Writes the scheduled reports: checks every second whether one is due, renders it off the scan
/// path (its own read connection), writes each format atomically, sends the JSON to the
/// configured sinks, and records the run so that a restart neither repeats nor skips one
/// (a report missed while the service was down is written at start; only the latest one).
final class ReportScheduler: @unchecked Sendable {
    // @unchecked: `timer`, `schedules`, `sinks`, `targets` and `due` are only touched on `queue`.
    private let queue = DispatchQueue(label: "tlsaudit.reports")
    private var timer: DispatchSourceTimer?
    private var schedules: [ReportSchedule]
    private var sinks: [String: SinkConfiguration]
    private var targets: Set<String>
    private let database: String
    /// Who claims report runs in a fleet (the node's name).
    private let node: String
    /// Seconds a claim on a report run lasts: a node that dies writing one hands it over after this.
    static let claimLease = 300.0
    private let writer: ResultWriter
    private let logger: Logger
    /// When each report is next written (by name): the end of its period, and when to try
    /// (later than the end after a failed attempt).
    private var due: [String: (periodEnd: Date, attemptAt: Date)] = [:]

    init(configuration: ServiceConfiguration, writer: ResultWriter, logger: Logger) {
        schedules = configuration.reports
        sinks = Dictionary(configuration.alerts.sinks.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        targets = Set(configuration.targets.map(\.key))
        database = configuration.database
        node = configuration.node.name
        self.writer = writer
        self.logger = logger
    }

    func start() {
        queue.async {
            self.plan(Date())
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            timer.schedule(deadline: .now() + 1, repeating: .seconds(1), leeway: .milliseconds(200))
            timer.setEventHandler { [weak self] in self?.tick() }
            timer.resume()
            self.timer = timer
        }
    }

    /// Stops scheduling. A report being written is not waited for (shutdown must not hang on a
    /// slow sink); its files are written atomically, so at worst it is missing and written at the next start.
    func stop() {
        queue.async {
            self.timer?.cancel()
            self.timer = nil
        }
    }

    func apply(_ configuration: ServiceConfiguration) {
        queue.async {
            // A report whose schedule changed (or that is gone) is planned afresh.
            let unchanged = Set(configuration.reports.filter { self.schedules.contains($0) }.map(\.name))
            self.schedules = configuration.reports
            self.sinks = Dictionary(configuration.alerts.sinks.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            self.targets = Set(configuration.targets.map(\.key))
            self.due = self.due.filter { unchanged.contains($0.key) }
            self.plan(Date())
        }
    }

    /// Works out when each report is next due: now, for one missed since its last run (the latest
    /// missed only); else its next scheduled instant. A report never run before starts at its next instant.
    private func plan(_ now: Date) {
        for schedule in schedules where due[schedule.name] == nil {
            let latest = schedule.latestDue(atOrBefore: now)
            let last = try? writer.perform { try $0.lastReportRun(name: schedule.name) }
            if let last = last ?? nil, last < latest {
                due[schedule.name] = (latest, now)
                logger.notice("scheduled report missed while stopped (or moved by a reload): writing it now", metadata: [
                    "report": "\(schedule.name)", "period_end": "\(Timestamp.format(latest))"])
            } else {
                let next = schedule.nextDue(after: max(now, last ?? now))
                due[schedule.name] = (next, next)
            }
        }
    }

    private func tick() {
        guard timer != nil else { return }
        let now = Date()
        for schedule in schedules {
            guard let (end, attemptAt) = due[schedule.name], attemptAt <= now else { continue }
            var claimEpoch: Int64 = 0
            // In a fleet, one node writes each run; the others ask again after a while (the
            // writer may die) and move on once the run is recorded.
            switch (try? writer.perform { try $0.claimReportRun(name: schedule.name, periodEnd: end, owner: node, lease: Self.claimLease) }) {
            case .written?:
                let next = schedule.nextDue(after: max(end, now))
                due[schedule.name] = (next, next)
                continue
            case .heldByAnother(let owner)?:
                logger.debug("scheduled report is being written by another node", metadata: ["report": "\(schedule.name)", "node": "\(owner)"])
                due[schedule.name] = (end, now.addingTimeInterval(Self.claimLease / 4))
                continue
            case nil:
                due[schedule.name] = (end, now.addingTimeInterval(60))
                continue
            case .claimed(let epoch)?:
                claimEpoch = epoch
            }
            if write(schedule, end: end, epoch: claimEpoch) {
                let next = schedule.nextDue(after: max(end, now))
                due[schedule.name] = (next, next)
            } else {
                // The database or the directory failed: try the same period again in a minute.
                due[schedule.name] = (end, now.addingTimeInterval(60))
            }
        }
    }

    /// Renders and writes one report in every format, then delivers it and records the run.
    /// False when it could not be read or written (it is tried again). The claim of `epoch` is
    /// checked before the files are written and before they are sent (a node paused past its
    /// claim's lease writes and sends nothing), and the run is recorded only under it.
    private func write(_ schedule: ReportSchedule, end: Date, epoch: Int64) -> Bool {
        func stillClaimed(_ step: String) -> Bool {
            let held = (try? writer.perform { try $0.holdsReportRun(name: schedule.name, periodEnd: end, owner: node, epoch: epoch) }) ?? false
            if !held {
                logger.warning("scheduled report: this node's claim on the run ended (another node took it over); not \(step)",
                               metadata: ["report": "\(schedule.name)", "period_end": "\(Timestamp.format(end))"])
            }
            return held
        }
        let started = Date()
        let report: ComplianceReport
        do {
            let store = try StoreBackends.location(database).open(create: false)
            report = try ReportGenerator.report(from: store, ReportRequest(
                since: schedule.since, end: end, policy: schedule.policy, targets: targets,
                expiringWithinDays: schedule.expiringWithinDays))
        } catch {
            logger.error("scheduled report failed: cannot read the database", metadata: [
                "report": "\(schedule.name)", "error": "\(error)"])
            return false
        }
        guard stillClaimed("writing its files") else { return false }
        var files: [String] = []
        let stem = schedule.fileStem(for: end)
        for format in schedule.formats {
            let path = URL(fileURLWithPath: schedule.directory).appendingPathComponent("\(stem).\(format.fileExtension)").path
            do {
                try OutputFile.write(try ReportRenderer.render(report, as: format), to: path)
                files.append(path)
            } catch {
                logger.error("scheduled report: cannot write a file", metadata: [
                    "report": "\(schedule.name)", "file": "\(path)", "error": "\(error.localizedDescription)"])
            }
        }
        guard files.count == schedule.formats.count else { return false }
        prune(schedule)
        guard schedule.sinks.isEmpty || stillClaimed("sending it") else { return false }
        var delivery: [String: ReportDelivery] = [:]
        for name in schedule.sinks {
            guard let sink = sinks[name] else { continue }
            delivery[name] = send(report, of: schedule, end: end, to: sink)
        }
        do {
            let recorded = try writer.perform {
                try $0.recordReportRun(name: schedule.name, periodEnd: end, files: files, delivery: delivery, claim: (node, epoch))
            }
            if !recorded { logger.warning("scheduled report: another node took the run over while this one wrote it; the run's record is that node's") }
        } catch {
            logger.error("scheduled report written but not recorded: \(error)")
        }
        logger.notice("scheduled report written", metadata: [
            "report": "\(schedule.name)", "period_end": "\(Timestamp.format(end))", "files": "\(files.joined(separator: ","))",
            "compliance": "\(report.summary.compliance.map { "\($0)%" } ?? "n/a")",
            "duration_ms": "\(Int(Date().timeIntervalSince(started) * 1000))"])
        return true
    }

    /// Sends the JSON report to one sink, three attempts; delivered, or failed with the last error.
    private func send(_ report: ComplianceReport, of schedule: ReportSchedule, end: Date, to sink: SinkConfiguration) -> ReportDelivery {
        let body: Data
        do {
            body = try JSONDocumentEncoder.tlsauditCompact.encode(ReportNotice(report: report, name: schedule.name)) + Data("\n".utf8)
        } catch {
            return .failed("cannot encode the report: \(error)")
        }
        let id = "\(schedule.name)@\(Timestamp.format(end))"
        var outcome = "not sent"
        for attempt in 0..<3 {
            if attempt > 0 { Thread.sleep(forTimeInterval: Double(attempt)) }
            let result = sink.kind.send(body, headers: ["X-Tlsaudit-Report-Id": id]) {
                logger.notice("REPORT \(ReportNotice.text(report, name: schedule.name))", metadata: ["report": "\(schedule.name)"])
            }
            switch result {
            case .success:
                return .delivered
            case .failure(let error):
                outcome = error.description
                logger.warning("scheduled report delivery failed", metadata: [
                    "report": "\(schedule.name)", "sink": "\(sink.name)", "attempt": "\(attempt + 1)", "error": "\(error.description)"])
            }
        }
        return .failed(outcome)
    }

    /// Deletes the oldest files of this report beyond `keep` per format.
    private func prune(_ schedule: ReportSchedule) {
        guard schedule.keep > 0,
              let names = try? FileManager.default.contentsOfDirectory(atPath: schedule.directory) else { return }
        for format in schedule.formats {
            let mine = names.filter { schedule.owns(fileName: $0, format: format) }.sorted()
            for old in mine.dropLast(schedule.keep) {
                try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: schedule.directory).appendingPathComponent(old).path)
            }
        }
    }
}

/// What a scheduled report sends to a sink: the whole report, its name, and a one-line `text`
/// (so a Slack-compatible webhook shows something readable).
struct ReportNotice: Encodable {
    var report: ComplianceReport
    var name: String

    enum CodingKeys: String, CodingKey { case schema, name, text, report }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode("tlsaudit.report-notice/1", forKey: .schema)
        try container.encode(name, forKey: .name)
        try container.encode(Self.text(report, name: name), forKey: .text)
        try container.encode(report, forKey: .report)
    }

    static func text(_ report: ComplianceReport, name: String) -> String {
        let summary = report.summary
        return "tlsaudit report \(name) to \(Timestamp.format(report.period.end)): "
            + "\(summary.compliance.map { "\($0)%" } ?? "n/a") compliant (\(summary.trend)); "
            + "\(summary.compliant) compliant, \(summary.notCompliant) not compliant, \(summary.unreachable) unreachable; "
            + "\(report.changes.newFailures.count) new failure(s), \(report.changes.fixes.count) fix(es), "
            + "\(report.changes.pinEvents.count) pin event(s), \(report.expiring.count) certificate(s) expiring within \(report.expiringWithinDays) days"
    }
}
