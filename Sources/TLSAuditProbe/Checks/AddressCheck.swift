public import Foundation
public import TLSAuditModel
public import TLSAuditSupport

/// An opt-in check (`checks:`, `scan --checks`): more connections to an address once its
/// handshake completed, before the address is judged. The scanner runs the checks of
/// `ScanOptions.checks` in their order, so a later check may read an earlier one's report from
/// `ProbedAddress`. A new check conforms to `ReportingCheck` in a file of its own and is added to
/// `AddressChecks.shipped`: its report is stored and shown as `AddressScanResult.checkReports`,
/// its findings are judged with the scan's.
public protocol AddressCheck: Sendable {
    /// Its name in `checks:` and `--checks`.
    var name: OptionalCheck { get }
    /// What it does and what it costs in connections, for `--help` (one line, no final period).
    var summary: String { get }
    /// Whether it runs at an address of `target` (by default: when the target asks for it).
    func isWanted(by target: ScanTarget) -> Bool
    /// Runs at one address and keeps its report in `probed`.
    func run(_ context: AddressCheckContext, into probed: inout ProbedAddress)
}

extension AddressCheck {
    public func isWanted(by target: ScanTarget) -> Bool { target.checks.contains(name) }
}

/// A check whose report has no field of its own: it returns its report and findings, which the
/// scanner keeps as the `CheckReport` under its name.
public protocol ReportingCheck: AddressCheck {
    associatedtype Report: Encodable
    /// The report and the findings of one address; nil when the check has nothing to say there.
    func check(_ context: AddressCheckContext, probed: ProbedAddress) -> (report: Report?, findings: [Finding])?
}

extension ReportingCheck {
    /// The most a check's report may take, as JSON; a larger one is kept as a note saying so.
    public static var reportBytes: Int { 16 * 1024 }

    public func run(_ context: AddressCheckContext, into probed: inout ProbedAddress) {
        let started = ContinuousClock.now
        guard let outcome = check(context, probed: probed) else { return }
        var stored = CheckReport(findings: outcome.findings, durationMs: milliseconds(since: started))
        do {
            // A report that encodes to null is no report.
            stored.report = try outcome.report.map { try JSONValue(encoding: $0) }.flatMap { $0 == .null ? nil : $0 }
            if let report = stored.report, let size = try? JSONEncoder().encode(report).count, size > Self.reportBytes {
                stored.report = .object(["omitted": .string("the report took \(size) bytes, more than the \(Self.reportBytes) a check's report may")])
            }
        } catch {
            // A report JSON cannot hold (a NaN, say): kept as why, with the findings.
            stored.report = .object(["unencodable": .string("\(error)")])
        }
        probed.checkReports[name.rawValue] = stored
    }
}

/// What a check may use at one address: the address, the target's settings, and handshakes made
/// as the scanner makes them (the target's SNI, STARTTLS, client certificate and timeout).
public struct AddressCheckContext: Sendable {
    public let address: SocketAddress
    public let target: ScanTarget
    /// The probes the shipped checks are written with (connections at once: `ScanOptions.checkConnections`).
    public let enumerator: Enumerator

    /// One more handshake with the address, offering `minVersion` to `maxVersion` (nil: what the
    /// profile offers) with the ClientHello of `profile`: what it showed, or why it failed.
    public func handshake(profile: ClientProfile = .permissive, minVersion: TLSVersion? = nil,
                          maxVersion: TLSVersion? = nil) -> Result<HandshakeObservation, ProbeFailure> {
        let attempt = enumerator.handshake(address, target: target, probes: ProbeCounter(),
                                           override: ClientHelloOverride(minVersion: minVersion, maxVersion: maxVersion),
                                           profile: profile)
        if let observation = attempt.observation { return .success(observation) }
        return .failure(attempt.failure ?? ProbeFailure(.handshakeFailed, "no handshake"))
    }
}
