public import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
public import TLSAuditModel
public import TLSAuditStore
import TLSAuditSupport

/// The documents of `/api/v1`, read from the store on threads of their own (the store blocks;
/// the event loop must not): the summary on one, every other document on another, each one
/// request at a time, so the overview's two reads run side by side.
public final class APIRoutes: Sendable {
    /// The most a `limit` may ask for.
    static let maximumLimit = 10_000
    /// The summary lists the certificates expiring within this many days (the overview's expiry timeline).
    public static let summaryExpiringWithinDays = 90

    private let documents: StoreReader
    private let summaries: StoreReader
    private let configuredTargets: @Sendable () -> ConfiguredTargets?
    private let summarize: (@Sendable (any ScanStore, SummaryQuery) throws -> Data)?
    private let trustInputs: (@Sendable () -> [TrustInputStatus])?
    /// The last summary asked for without `at` (of now), by its `since` and tags, and when it was
    /// made; touched only on `summaries`' queue.
    private nonisolated(unsafe) var recentSummary: (key: String, madeAt: Date, data: Data)?
    /// How long a summary of now is answered again: the overview open in many browsers costs one
    /// report each half-minute, not one per browser and minute.
    static let summaryReuseSeconds = 30.0
    /// `openStore` opens a store for reading; `configuredTargets` are the targets `status` shows, with their groups (nil: every stored target).
    /// `summarize` writes `/api/v1/summary`'s document from the store (nil: no such path).
    /// `trustInputs` are the service's trust inputs (`/api/v1/trust-inputs`; nil: no such path).
    public init(openStore: @escaping @Sendable () throws -> any ScanStore, configuredTargets: @escaping @Sendable () -> ConfiguredTargets?,
                summarize: (@Sendable (any ScanStore, SummaryQuery) throws -> Data)? = nil,
                trustInputs: (@Sendable () -> [TrustInputStatus])? = nil) {
        self.trustInputs = trustInputs
        documents = StoreReader(label: "tlsaudit.http.api", openStore: openStore)
        summaries = StoreReader(label: "tlsaudit.http.api.summary", openStore: openStore)
        self.configuredTargets = configuredTargets
        self.summarize = summarize
    }

    /// What `/api/v1/summary` is asked for: the period (`since`, ending `at`), the tags and the targets.
    public struct SummaryQuery: Sendable {
        public var since: Double
        public var at: Date
        public var tags: [String]
        /// The configured targets (nil: every stored one).
        public var targets: Set<String>?
    }

    func add(to router: Router<ListenerContext>) {
        router.get("api/v1/openapi.json") { _, _ in Self.json(APIDocument.json()) }
        if let trustInputs {
            router.get("api/v1/trust-inputs") { _, _ in
                let now = Date()
                let inputs = trustInputs().map { TrustInputDocument(status: $0, now: now) }
                return (try? JSONDocumentEncoder.tlsaudit.encode(["inputs": inputs])).map { Self.json($0) }
                    ?? Self.error(.internalServerError, "cannot encode the trust inputs")
            }
        }
        router.get("api/v1/status") { [self] request, _ in
            // `?tag=A&tag=B`: the targets carrying every tag given (as `status --tag`).
            let tags = request.uri.queryParameters.getAll("tag")
            return await read { store in
                var rows = try store.status().filter { TargetTags.carries($0.tags, every: tags) }
                if let configured = self.configuredTargets() { rows = configured.shown(rows) }
                return try .ok(JSONDocumentEncoder.tlsaudit.encode(StatusDocument(targets: rows)))
            }
        }
        router.get("api/v1/targets/:name") { [self] _, context in
            guard let name = context.parameters.get("name")?.removingPercentEncoding else {
                return Self.error(.badRequest, "the target name is not percent-encoded UTF-8")
            }
            return await read { store in
                guard let document = try TargetDocument.read(name, from: store, configured: self.configuredTargets()) else { return .notFound("no scans of \(name)") }
                return try .ok(JSONDocumentEncoder.tlsaudit.encode(document))
            }
        }
        router.get("api/v1/targets/:name/history") { [self] request, context in
            // The router matches the path as sent: a name is percent-decoded here ("my%20target").
            guard let name = context.parameters.get("name")?.removingPercentEncoding else {
                return Self.error(.badRequest, "the target name is not percent-encoded UTF-8")
            }
            guard let limit = Self.limit(request, default: 20) else { return Self.error(.badRequest, "limit must be 1 to \(Self.maximumLimit)") }
            return await read { store in
                let entries = try store.history(target: name, limit: limit)
                guard !entries.isEmpty else { return .notFound("no scans of \(name)") }
                return try .ok(JSONDocumentEncoder.tlsaudit.encode(entries))
            }
        }
        router.get("api/v1/summary") { [self] request, _ in
            // `?since=30d` (default), `&at=ISO 8601` (default now), `&tag=` as for status: `report --format json`'s sections.
            guard let summarize else { return Self.error(.notFound, "no summary in this build") }
            let sinceText = request.uri.queryParameters.get("since") ?? "30d"
            guard let since = DurationText.seconds(String(sinceText)), SettingBounds.reportPeriod.problem(since, name: "since") == nil else {
                return Self.error(.badRequest, "since must be \(SettingBounds.reportPeriod.described)")
            }
            var at = Date()
            if let text = request.uri.queryParameters.get("at") {
                guard let parsed = Timestamp.parse(String(text)) else { return Self.error(.badRequest, "at must be an ISO 8601 time like 2026-11-22T00:00:00Z") }
                at = parsed
            }
            let query = SummaryQuery(since: since, at: at, tags: request.uri.queryParameters.getAll("tag").map { String($0) },
                                     targets: configuredTargets()?.keys)
            let ofNow = request.uri.queryParameters.get("at") == nil
            let key = ([String(since)] + query.tags).joined(separator: "\u{1F}")
            return await read(on: summaries) { store in
                if ofNow, let recent = self.recentSummary, recent.key == key, Date().timeIntervalSince(recent.madeAt) < Self.summaryReuseSeconds {
                    return .ok(recent.data)
                }
                let data = try summarize(store, query)
                if ofNow { self.recentSummary = (key, Date(), data) }
                return .ok(data)
            }
        }
        router.get("api/v1/ct/sightings") { [self] request, _ in
            // `?days=30`: certificates valid from that many days ago on, newest first (as `tlsaudit ct status --format json`'s sightings).
            guard let limit = Self.limit(request, default: 100) else { return Self.error(.badRequest, "limit must be 1 to \(Self.maximumLimit)") }
            let daysText = request.uri.queryParameters.get("days") ?? "30"
            guard let days = Int(daysText), (0...3_650).contains(days) else { return Self.error(.badRequest, "days must be 0 to 3650") }
            let since = Date().addingTimeInterval(-Double(days) * 86_400)
            return await read { store in
                try .ok(JSONDocumentEncoder.tlsaudit.encode(["sightings": store.ctSightings(validFrom: since, limit: limit)]))
            }
        }
        router.get("api/v1/alerts") { [self] request, _ in
            guard let limit = Self.limit(request, default: 50) else { return Self.error(.badRequest, "limit must be 1 to \(Self.maximumLimit)") }
            return await read { store in try .ok(JSONDocumentEncoder.tlsaudit.encode(store.alerts(limit: limit))) }
        }
    }

    private enum Answer: Sendable {
        case ok(Data)
        case notFound(String)
    }

    /// Runs `body` against the store on `reader`'s queue (the documents' by default) and turns its answer into a response.
    private func read(on reader: StoreReader? = nil, _ body: @escaping @Sendable (any ScanStore) throws -> Answer) async -> Response {
        let answer = await (reader ?? documents).run(body)
        switch answer {
        case .success(.ok(let data)): return Self.json(data + Data("\n".utf8))
        case .success(.notFound(let message)): return Self.error(.notFound, message)
        case .failure(let error): return Self.error(.serviceUnavailable, "cannot read the store: \(error)")
        }
    }

    private static func limit(_ request: Request, default defaultValue: Int) -> Int? {
        guard let text = request.uri.queryParameters.get("limit") else { return defaultValue }
        guard let value = Int(text), (1...maximumLimit).contains(value) else { return nil }
        return value
    }

    static func json(_ data: Data, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: ["error": message], options: [.sortedKeys])) ?? Data()
        return json(data + Data("\n".utf8), status: status)
    }
}

/// A store connection for reading (apart from the writer's) and the queue that uses it, one read
/// at a time; reopened after a failure.
private final class StoreReader: Sendable {
    private let queue: DispatchQueue
    private let openStore: @Sendable () throws -> any ScanStore
    /// Touched only on `queue`.
    private nonisolated(unsafe) var store: (any ScanStore)?

    init(label: String, openStore: @escaping @Sendable () throws -> any ScanStore) {
        queue = DispatchQueue(label: label)
        self.openStore = openStore
    }

    func run<T: Sendable>(_ body: @escaping @Sendable (any ScanStore) throws -> T) async -> Result<T, any Error> {
        await withCheckedContinuation { continuation in
            queue.async { [self] in
                do {
                    if store == nil { store = try openStore() }
                    continuation.resume(returning: .success(try body(store!)))
                } catch {
                    store = nil
                    continuation.resume(returning: .failure(error))
                }
            }
        }
    }
}
