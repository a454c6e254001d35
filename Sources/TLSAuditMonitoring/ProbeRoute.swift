import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
public import TLSAuditStore

/// What `/probe` scans with: the service's scanner and its configuration's modules.
public protocol TargetProber: Sendable {
    /// The scan `target` names under `module` (nil: the defaults), or why it cannot be had.
    func prepare(target: String, module: String?) -> Result<PreparedProbe, ProbeRefusal>
}

/// A probe ready to run: `run` blocks for the scan, each of its steps (resolution, connect,
/// handshake, ...) bounded by the seconds it is given, and returns one scan per address.
public struct PreparedProbe: Sendable {
    /// The target as the series label it (`HOST:PORT`).
    public let target: String
    /// The module's timeout for each step; the request's deadline may shorten it.
    public let stepTimeout: Double
    /// Seconds the whole probe may take at most (`http: probe: timeout:`, as configured now).
    public let timeout: Double
    public let run: @Sendable (_ stepTimeout: Double) -> [StoredScan]

    public init(target: String, stepTimeout: Double, timeout: Double, run: @escaping @Sendable (_ stepTimeout: Double) -> [StoredScan]) {
        self.target = target
        self.stepTimeout = stepTimeout
        self.timeout = timeout
        self.run = run
    }
}

/// Why a probe request is refused: 400 (no target, a malformed one, an unknown module), 403 (a
/// host `allowed_targets` does not name), 404 (`probe: off`).
public struct ProbeRefusal: Error, Sendable {
    public enum Reason: Sendable {
        case badRequest, forbidden, disabled
    }

    public let reason: Reason
    public let message: String

    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }
}

/// `GET /probe?target=HOST:PORT[&module=NAME]`, the multi-target exporter pattern of ssl_exporter
/// and blackbox_exporter: scans the target now and answers its series, named as in `/metrics`,
/// plus blackbox_exporter's `probe_success` and `probe_duration_seconds`. Nothing is stored.
///
/// Bounds: at most `concurrency` probes scan at once; a request waits for a slot until its
/// deadline, which is `timeout`, or Prometheus' scrape timeout (`X-Prometheus-Scrape-Timeout-Seconds`)
/// less half a second when that is shorter. A probe still scanning at its deadline is answered
/// with `probe_success 0`; its scan keeps its slot until it ends (each step is bounded too), so
/// abandoned scans cannot pile up.
struct ProbeRoute: Sendable {
    let prober: any TargetProber
    let slots: ProbeSlots
    let outcomes: @Sendable (ProbeOutcome) -> Void
    private let queue = DispatchQueue(label: "tlsaudit.http.probe", attributes: .concurrent)

    /// How a probe request ended, counted in `tlsaudit_probe_requests_total{outcome}`.
    enum ProbeOutcome: String {
        case scanned, timedOut = "timed-out", busy, refused
    }

    init(prober: any TargetProber, concurrency: Int, outcomes: @escaping @Sendable (ProbeOutcome) -> Void) {
        self.prober = prober
        slots = ProbeSlots(count: concurrency, waiting: concurrency * 4)
        self.outcomes = outcomes
    }

    func add(to router: Router<ListenerContext>) {
        router.get("probe") { request, _ in await answer(request) }
    }

    private func answer(_ request: Request) async -> Response {
        let started = ContinuousClock.now
        guard let target = request.uri.queryParameters.get("target"), !target.isEmpty else {
            outcomes(.refused)
            return HTTPListener.plainText(.badRequest, "the target parameter is required: /probe?target=HOST:PORT[&module=NAME]\n")
        }
        let module = request.uri.queryParameters.get("module").flatMap { $0.isEmpty ? nil : $0 }
        let prepared: PreparedProbe
        switch prober.prepare(target: target, module: module) {
        case .success(let ready): prepared = ready
        case .failure(let refusal):
            outcomes(.refused)
            let status: HTTPResponse.Status = switch refusal.reason {
            case .badRequest: .badRequest
            case .forbidden: .forbidden
            case .disabled: .notFound
            }
            return HTTPListener.plainText(status, refusal.message + "\n")
        }
        var seconds = prepared.timeout
        if let header = request.headers[HTTPField.Name("X-Prometheus-Scrape-Timeout-Seconds")!], let scrape = Double(header), scrape > 0 {
            seconds = min(seconds, max(0.1, scrape - 0.5))
        }
        let deadline = started + .milliseconds(Int64(seconds * 1000))
        guard await slots.acquire(until: deadline) else {
            outcomes(.busy)
            return HTTPListener.plainText(.serviceUnavailable, "every probe slot stayed busy for \(Self.decimal(seconds)) s (http: probe: concurrency)\n",
                                          headers: [.retryAfter: "1"])
        }
        let remaining = (deadline - ContinuousClock.now).seconds
        let scans = await withCheckedContinuation { (continuation: CheckedContinuation<[StoredScan]?, Never>) in
            let once = ResumeOnce(continuation)
            queue.async { [slots] in
                let scans = prepared.run(max(0.1, min(prepared.stepTimeout, remaining)))
                slots.release()
                once.resume(scans)
            }
            queue.asyncAfter(deadline: .now() + max(0, remaining)) { once.resume(nil) }
        }
        outcomes(scans == nil ? .timedOut : .scanned)
        let duration = (ContinuousClock.now - started).seconds
        return HTTPListener.exposition(request) { openMetrics, emit in
            try await Self.exposition(scans: scans, duration: duration, openMetrics: openMetrics, emit)
        }
    }

    /// blackbox_exporter's probe series, ssl_exporter's `ssl_prober`, then the series of each
    /// address scanned (none when the probe ran out of time).
    static func exposition(scans: [StoredScan]?, duration: Double, openMetrics: Bool, _ emit: ([UInt8]) async throws -> Void) async throws {
        let reached = !(scans ?? []).isEmpty && (scans ?? []).allSatisfy { $0.result.status == .completed }
        try await emit(Array("""
            # HELP probe_success Every address of the target completed the handshake (0/1).
            # TYPE probe_success gauge
            probe_success \(reached ? 1 : 0)
            # HELP probe_duration_seconds How long the probe took, in seconds.
            # TYPE probe_duration_seconds gauge
            probe_duration_seconds \(AddressSeriesTable.number(duration))
            # HELP ssl_prober The prober used (always 1).
            # TYPE ssl_prober gauge
            ssl_prober{prober="tcp"} 1

            """.utf8))
        if let scans {
            let table = AddressSeriesTable()
            for scan in scans { table.record(scan) }
            try await table.write(emit)
        }
        if openMetrics { try await emit(Array("# EOF\n".utf8)) }
    }

    static func decimal(_ seconds: Double) -> String { String(format: "%.1f", seconds) }
}

/// A continuation resumed by whichever comes first: the scan or the deadline.
private final class ResumeOnce: Sendable {
    private let continuation: Mutex<CheckedContinuation<[StoredScan]?, Never>?>

    init(_ continuation: CheckedContinuation<[StoredScan]?, Never>) { self.continuation = Mutex(continuation) }

    func resume(_ value: [StoredScan]?) {
        continuation.withLock { held in
            held?.resume(returning: value)
            held = nil
        }
    }
}

/// The probe slots: `count` scans at once, at most `waiting` requests waiting for one, each until its deadline.
final class ProbeSlots: Sendable {
    private struct State {
        var free: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>
    private let waiting: Int

    init(count: Int, waiting: Int) {
        state = Mutex(State(free: count))
        self.waiting = waiting
    }

    /// Takes a slot, waiting for one until `deadline`; false when none came (or too many wait already).
    func acquire(until deadline: ContinuousClock.Instant) async -> Bool {
        await withCheckedContinuation { continuation in
            let id: UInt64? = state.withLock { state in
                if state.free > 0 {
                    state.free -= 1
                    continuation.resume(returning: true)
                    return nil
                }
                guard state.waiters.count < waiting else {
                    continuation.resume(returning: false)
                    return nil
                }
                state.nextID += 1
                state.waiters.append((state.nextID, continuation))
                return state.nextID
            }
            guard let id else { return }
            let wait = max(0, (deadline - ContinuousClock.now).seconds)
            DispatchQueue.global().asyncAfter(deadline: .now() + wait) { [self] in
                let expired = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index).continuation
                }
                expired?.resume(returning: false)
            }
        }
    }

    /// Gives a slot back: to the request waiting longest, else to the pool.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if state.waiters.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }
}
