public import Foundation
import TLSAuditSupport

/// A trust input: data a verdict depends on besides the server's handshake, kept current by `serve`.
public enum TrustInputKind: String, Codable, Sendable, CaseIterable {
    /// The Certificate Transparency log list SCTs are verified against.
    case ctLogList = "ct-log-list"
    /// The table of roots distrusted for certificates issued after a date.
    case distrust
    /// The snapshot of Apple's root store (`trust: apple`, the Apple policies).
    case appleRoots = "apple-roots"

    /// Its name in sentences (`CT log list`).
    public var title: String {
        switch self {
        case .ctLogList: "CT log list"
        case .distrust: "distrust table"
        case .appleRoots: "Apple root store"
        }
    }

    /// What its entries are (`logs`).
    public var entryName: String {
        switch self {
        case .ctLogList: "logs"
        case .distrust: "rows"
        case .appleRoots: "roots"
        }
    }
}

/// A trust input in force: where it came from, which version, when it was published, how big.
public struct TrustInputVersion: Codable, Sendable, Hashable {
    public var input: TrustInputKind
    public var source: String
    /// The input's own version (`53.34`, `2026-11-28`); nil when it names none.
    public var version: String?
    /// When it was published (a log list's timestamp), or fetched when it says no date (Apple's roots).
    public var publishedAt: Date?
    public var entries: Int

    public init(input: TrustInputKind, source: String, version: String?, publishedAt: Date?, entries: Int) {
        self.input = input
        self.source = source
        self.version = version
        self.publishedAt = publishedAt
        self.entries = entries
    }

    /// `log list 54.1`, `distrust table 2026-11-28`, `Apple root store of 2025-12-28`: how history names it.
    public var label: String {
        let name = input == .ctLogList ? "log list" : input.title
        if let version { return "\(name) \(version)" }
        if let publishedAt { return "\(name) of \(Timestamp.format(publishedAt))" }
        return "\(name) \(source)"
    }

    /// Whole days since publication at `now`.
    public func ageDays(at now: Date) -> Int? { publishedAt.map { max(0, Int(now.timeIntervalSince($0) / 86_400)) } }
}

/// The trust inputs a scan was judged with (set by `serve`), and the one a refresh put in force
/// last: a verdict that changes on the first scan after `changedAt` with the same certificate
/// changed because of that input ("judged again with log list 54.1").
public struct JudgedWith: Codable, Sendable, Hashable {
    /// Each input's label (`log list 54.1`, `distrust table 2026-11-28`, `Apple root store of ...`).
    public var inputs: [String]
    /// The input a refresh put in force last, and when (nil: none since the service started).
    public var changed: String?
    public var changedAt: Date?

    public init(inputs: [String], changed: String? = nil, changedAt: Date? = nil) {
        self.inputs = inputs
        self.changed = changed
        self.changedAt = changedAt
    }

    /// The input that changed between a scan at `previous` and this one; nil when none did.
    public func changedSince(_ previous: Date?) -> String? {
        guard let changed, let changedAt, let previous, previous < changedAt else { return nil }
        return changed
    }
}

/// How a trust input fares in the service: in force, refreshed, current or not.
public struct TrustInputStatus: Codable, Sendable, Hashable {
    public var inForce: TrustInputVersion
    /// The configured source (file or URL); nil: the shipped snapshot.
    public var configuredSource: String?
    /// Older than this many seconds is stale (`max_age:`).
    public var maxAge: Double
    public var lastRefreshAt: Date?
    /// The last refresh's error; nil when it succeeded or none was tried.
    public var lastError: String?
    /// Refreshes that failed in a row.
    public var consecutiveFailures: Int
    /// Failed refreshes in a row that make it `failing` (`trust_inputs: {failures_before_alert:}`).
    public var failuresBeforeAlert: Int

    public init(inForce: TrustInputVersion, configuredSource: String?, maxAge: Double, lastRefreshAt: Date?, lastError: String?,
                consecutiveFailures: Int, failuresBeforeAlert: Int) {
        self.inForce = inForce
        self.configuredSource = configuredSource
        self.maxAge = maxAge
        self.lastRefreshAt = lastRefreshAt
        self.lastError = lastError
        self.consecutiveFailures = consecutiveFailures
        self.failuresBeforeAlert = failuresBeforeAlert
    }

    public func isStale(at now: Date) -> Bool { inForce.publishedAt.map { now.timeIntervalSince($0) > maxAge } ?? false }
    public var isFailing: Bool { consecutiveFailures >= failuresBeforeAlert }

    /// `current`, `stale` or `refresh-failing` (stale first).
    public func condition(at now: Date) -> String { isStale(at: now) ? "stale" : isFailing ? "refresh-failing" : "current" }
}

/// One trust input as `/api/v1/trust-inputs` and `trust status --format json` give it: what is in
/// force, its age and condition, the last refresh.
public struct TrustInputDocument: Encodable, Sendable {
    public var input: TrustInputKind
    public var source: String
    public var configuredSource: String?
    public var version: String?
    public var publishedAt: Date?
    public var ageDays: Int?
    public var maxAgeDays: Int
    public var entries: Int
    /// `current`, `stale` or `refresh-failing`.
    public var condition: String
    public var lastRefreshAt: Date?
    public var lastError: String?
    public var consecutiveFailures: Int
    /// Where the input in force comes from, in words (`trust status`).
    public var note: String?

    public init(status: TrustInputStatus, now: Date, note: String? = nil) {
        self.note = note
        input = status.inForce.input
        source = status.inForce.source
        configuredSource = status.configuredSource
        version = status.inForce.version
        publishedAt = status.inForce.publishedAt
        ageDays = status.inForce.ageDays(at: now)
        maxAgeDays = Int(status.maxAge / 86_400)
        entries = status.inForce.entries
        condition = status.condition(at: now)
        lastRefreshAt = status.lastRefreshAt
        lastError = status.lastError
        consecutiveFailures = status.consecutiveFailures
    }
}
