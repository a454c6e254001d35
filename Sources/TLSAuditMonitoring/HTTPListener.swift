import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TLSAuditSupport

/// Whether the service can do its job, as `/readyz` reports it.
public struct Readiness: Sendable {
    public var ready: Bool
    /// One line per check: what was checked and what it found.
    public var checks: [String]

    public init(ready: Bool, checks: [String]) {
        self.ready = ready
        self.checks = checks
    }
}

/// The service's HTTP listeners (Hummingbird on SwiftNIO, beside the Dispatch scheduler: requests
/// never run on the scanning threads). `/healthz` and `/readyz` are open; everything else asks
/// for the bearer token or a basic-auth user when either is configured. Without either (or with
/// `allowed_hosts`), every request must name the listener in its `Host` (`HostRule`).
public struct HTTPListener: Sendable {
    let settings: HTTPSettings
    let metrics: ScanMetrics
    let api: APIRoutes
    let readiness: @Sendable () async -> Readiness
    let logger: Logger
    /// `/probe` (nil, or `probe: off`: 404).
    let probe: ProbeRoute?
    private let stopping = GracefulStop()

    /// `prober` scans the targets `/probe` names (nil: no `/probe`).
    public init(settings: HTTPSettings, metrics: ScanMetrics, api: APIRoutes, prober: (any TargetProber)? = nil, logger: Logger,
                readiness: @escaping @Sendable () async -> Readiness) {
        self.settings = settings
        self.metrics = metrics
        self.api = api
        probe = prober.map { ProbeRoute(prober: $0, concurrency: settings.probe.concurrency) { metrics.recordProbe(outcome: $0.rawValue) } }
        self.readiness = readiness
        self.logger = logger
    }

    /// Serves every configured address until `stop()` (or the task is cancelled); throws when one
    /// cannot listen (the address in use, or not an address of this machine).
    public func run() async throws {
        let credentials = try AccessCredentials(
            token: settings.bearerTokenFile.map { path in
                try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            },
            users: settings.basicAuthFile.map { path in
                try AccessCredentials.users(htpasswd: String(contentsOfFile: path, encoding: .utf8), file: path)
            } ?? [:])
        let checker = AccessChecker(credentials)
        let services = try settings.listen.map { address in
            AddressService(address: address, application: try makeApplication(address, checker: checker, credentials: credentials))
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services.map { .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup) }, logger: Self.quiet(logger)))
        try await stopping.run(group)
    }

    /// Stops serving: no new connection is accepted, requests in progress are answered, idle
    /// connections are closed, then `run()` returns (a cancelled listener would log an error instead).
    public func stop() async {
        await stopping.stop()
    }

    private func makeApplication(_ address: HTTPSettings.Listen, checker: AccessChecker,
                                 credentials: AccessCredentials) throws -> some ApplicationProtocol {
        let router = Router(context: ListenerContext.self)
        let challenges = (credentials.users.isEmpty ? [] : ["Basic realm=\"tlsaudit\", charset=\"UTF-8\""])
            + (credentials.token == nil ? [] : ["Bearer realm=\"tlsaudit\""])
        router.add(middleware: ResponseHeadersMiddleware())
        if !credentials.required || !settings.allowedHosts.isEmpty {
            router.add(middleware: HostMiddleware(rule: HostRule(listenHost: address.host, allowed: settings.allowedHosts)))
        }
        router.add(middleware: AccessMiddleware(checker: checker, challenge: challenges.joined(separator: ", "),
                                                trustedProxies: settings.trustedProxies))
        router.get("healthz") { _, _ in "ok\n" }
        router.get("readyz") { [readiness] _, _ -> Response in
            let state = await readiness()
            let body = (state.ready ? "ready\n" : "not ready\n") + state.checks.map { $0 + "\n" }.joined()
            return Self.plainText(state.ready ? .ok : .serviceUnavailable, body)
        }
        router.get("metrics") { [metrics] request, _ -> Response in
            Self.exposition(request) { openMetrics, emit in
                try await metrics.exposition(openMetrics: openMetrics, emit)
                // A scrape's buffers are freed in the middle of malloc's arenas, where they would stay
                // resident: hand the free pages back (measured: 5 MiB at 10,000 addresses scraped each second).
                ProcessFigures.releaseFreeMemory()
            }
        }
        let http1 = HTTPServerBuilder.http1(configuration: .init(idleTimeout: .milliseconds(Int64(settings.idleTimeout * 1000))))
        api.add(to: router)
        probe?.add(to: router)
        Self.addPages(to: router)
        let logger = logger
        return Application(
            router: router,
            server: try ListenerTLS.server(http1, files: settings.tls),
            configuration: ApplicationConfiguration(
                address: .hostname(address.host, port: address.port), serverName: "tlsaudit",
                availableConnectionsDelegate: MaximumAvailableConnections(settings.maxConnections)),
            onServerRunning: { channel in
                logger.notice("http listener started", metadata: ["listen": "\(channel.localAddress.map(Self.describe) ?? "\(address)")"])
            },
            logger: Self.quiet(logger))
    }

    /// The pages (`/`, `/targets/{name}`) and their assets: fixed text, served with the pages' CSP.
    static func addPages(to router: Router<ListenerContext>) {
        let html = "text/html; charset=utf-8", javascript = "text/javascript; charset=utf-8"
        let files: [(path: String, type: String, body: String)] = [
            ("/", html, StatusPage.html), ("/targets/:name", html, TargetPage.html), ("/ui.css", "text/css; charset=utf-8", PageAssets.stylesheet),
            ("/ui.js", javascript, PageAssets.script), ("/status.js", javascript, StatusPage.script), ("/target.js", javascript, TargetPage.script),
        ]
        for file in files {
            let buffer = ByteBuffer(string: file.body)
            router.get(RouterPath(file.path)) { _, _ in
                Response(status: .ok, headers: [.contentType: file.type, .contentSecurityPolicy: PageAssets.contentSecurityPolicy, .cacheControl: "no-store"],
                         body: .init(byteBuffer: buffer))
            }
        }
    }

    /// A scrape's answer, streamed in the chunks `write` emits: OpenMetrics when the scraper asks
    /// for it (Prometheus does, first), else the text format 0.0.4 (`/metrics` and `/probe`).
    static func exposition(_ request: Request,
                           _ write: @escaping @Sendable (_ openMetrics: Bool, _ emit: ([UInt8]) async throws -> Void) async throws -> Void) -> Response {
        let openMetrics = (request.headers[.accept] ?? "").contains("application/openmetrics-text")
        let type = openMetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8" : "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: [.contentType: type], body: ResponseBody { writer in
            try await write(openMetrics) { chunk in try await writer.write(ByteBuffer(bytes: chunk)) }
            try await writer.finish(nil)
        })
    }

    /// A plain-text answer (`/readyz`, and the refusals that are not JSON).
    static func plainText(_ status: HTTPResponse.Status, _ body: String, headers extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func describe(_ address: SocketAddress) -> String {
        let host = address.ipAddress ?? "?"
        return HostText.withPort(host, address.port ?? 0)
    }

    /// Hummingbird logs every request at info: the service's log keeps warnings and above from it.
    static func quiet(_ logger: Logger) -> Logger {
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        return quiet
    }
}

/// One listen address's application, its failure named by its address.
private struct AddressService<Application: ApplicationProtocol>: Service {
    let address: HTTPSettings.Listen
    let application: Application

    func run() async throws {
        do { try await application.run() } catch { throw HTTPListenerError(address: address, underlying: error) }
    }
}

/// The running listeners' service group, shut down gracefully by `stop()`, even one that comes
/// before the group runs.
private final class GracefulStop: Sendable {
    private let state = Mutex<(group: ServiceGroup?, stopped: Bool)>((nil, false))

    func run(_ group: ServiceGroup) async throws {
        let stopped = state.withLock { state in
            state.group = group
            return state.stopped
        }
        if stopped { return }
        try await group.run()
    }

    func stop() async {
        let group = state.withLock { state in
            state.stopped = true
            return state.group
        }
        await group?.triggerGracefulShutdown()
    }
}

/// A listener that could not serve (its address in use, or not one of this machine's).
public struct HTTPListenerError: Error, CustomStringConvertible {
    public var address: HTTPSettings.Listen
    public var underlying: any Error
    public var description: String { "http listen \(address): \(underlying)" }
}

/// A request's context: Hummingbird's, plus the connection's two ends (the client whose password
/// budget a check spends, and the address the `Host` rule accepts).
struct ListenerContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    let localAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        remoteAddress = source.channel.remoteAddress
        localAddress = source.channel.localAddress
    }
}

/// `X-Content-Type-Options: nosniff` on every answer, and `Cache-Control: no-store` on every answer
/// under `/api/`: errors (401, 404, 421, 429) included.
struct ResponseHeadersMiddleware: RouterMiddleware {
    func handle(_ request: Request, context: ListenerContext,
                next: (Request, ListenerContext) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        if request.uri.path.hasPrefix("/api/") { response.headers[.cacheControl] = "no-store" }
        return response
    }
}

/// Answers 421 Misdirected Request to a request whose `Host` does not name this listener: a page
/// that rebinds its own name to the listener's address (DNS rebinding) gets nothing.
struct HostMiddleware: RouterMiddleware {
    let rule: HostRule

    func handle(_ request: Request, context: ListenerContext,
                next: (Request, ListenerContext) async throws -> Response) async throws -> Response {
        guard rule.accepts(request.head.authority, localAddress: context.localAddress?.ipAddress, localPort: context.localAddress?.port) else {
            let body = "the Host \(request.head.authority ?? "(none)") is not a name of this listener (http: allowed_hosts)\n"
            return HTTPListener.plainText(.misdirectedRequest, body)
        }
        return try await next(request, context)
    }
}

/// Refuses requests without a valid `Authorization` (401; 429 while the client has spent its
/// password checks), except the health checks.
struct AccessMiddleware: RouterMiddleware {
    let checker: AccessChecker
    let challenge: String
    /// `http: trusted_proxies`, whose forwarding headers name the client.
    let trustedProxies: [String]
    static let forwarded = HTTPField.Name("Forwarded")!
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!

    func handle(_ request: Request, context: ListenerContext,
                next: (Request, ListenerContext) async throws -> Response) async throws -> Response {
        guard !["/healthz", "/readyz"].contains(request.uri.path) else { return try await next(request, context) }
        let client = AccessChecker.clientAddress(remote: context.remoteAddress?.ipAddress,
                                                 forwarded: request.headers[values: Self.forwarded],
                                                 xForwardedFor: request.headers[values: Self.xForwardedFor], trustedProxies: trustedProxies)
        switch await checker.check(authorization: request.headers[.authorization], client: AccessChecker.clientKey(client)) {
        case .allowed: return try await next(request, context)
        case .refused: return Response(status: .unauthorized, headers: [.wwwAuthenticate: challenge])
        case .busy: return Response(status: .tooManyRequests, headers: [.retryAfter: "1"])
        }
    }
}
