import Foundation
import Synchronization
import TLSAuditModel
import TLSAuditStore

/// The series of each address's latest scan, kept as a few values per address and written out at
/// each scrape. (As one swift-prometheus gauge per series, 10,000 addresses took 140 MiB more:
/// an object per series; here an address costs a few hundred bytes, and a certificate's labels are
/// kept once however many addresses send it.)
final class AddressSeriesTable: Sendable {
    /// One address's latest scan, its label values already escaped for the exposition.
    struct Entry {
        /// `target="...",address="..."`.
        var key: String
        var target: String
        var reached: Bool
        var lastScan: Double
        var policy: String
        var compliant: Bool
        var failedRules: [String]
        var pinState: String
        var version: String?
        var stapled: Bool?
        var ocsp: OCSP?
        var presented: [CertificateLabels]
        var verified: [CertificateLabels]
        var chainExpiry: Double?
    }

    struct OCSP {
        var status: Double
        var thisUpdate: Double?
        var nextUpdate: Double?
        var revokedAt: Double?
    }

    /// A certificate's ssl_exporter labels (rendered once) and dates, shared by every address that sends it.
    final class CertificateLabels: Sendable {
        let labels: String
        /// `chain_no="0",` and the labels, for the verified-chain families.
        let verifiedLabels: String
        let notAfter: Double
        let notBefore: Double

        init(labels: String, notAfter: Double, notBefore: Double) {
            self.labels = labels
            verifiedLabels = "chain_no=\"0\"," + labels
            self.notAfter = notAfter
            self.notBefore = notBefore
        }
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Certificates by fingerprint, weakly: one no address sends any more goes at the next sweep.
        var certificates: [String: WeakCertificate] = [:]
        var recordsSinceSweep = 0
    }

    private struct WeakCertificate {
        weak var value: CertificateLabels?
    }

    private let state = Mutex(State())

    /// Replaces the entry of the scan's address.
    func record(_ scan: StoredScan) {
        let result = scan.result
        state.withLock { state in
            func labels(_ certificate: CertificateSummary) -> CertificateLabels {
                if let known = state.certificates[certificate.sha256Fingerprint]?.value { return known }
                let made = CertificateLabels(
                    labels: ScanMetrics.certificateLabels(certificate).map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ","),
                    notAfter: certificate.notAfter.timeIntervalSince1970, notBefore: certificate.notBefore.timeIntervalSince1970)
                state.certificates[certificate.sha256Fingerprint] = WeakCertificate(value: made)
                return made
            }
            let chain = result.chain
            let leafOCSP = chain?.revocation?.checks.first { $0.depth == 0 && [.stapledOCSP, .ocsp].contains($0.source) }
            var ocsp = leafOCSP.map {
                OCSP(status: ScanMetrics.ocspStatus($0.status.rawValue) ?? 2, thisUpdate: $0.thisUpdate?.timeIntervalSince1970,
                     nextUpdate: $0.nextUpdate?.timeIntervalSince1970, revokedAt: $0.revokedAt?.timeIntervalSince1970)
            }
            if ocsp == nil, let status = result.handshake?.stapledOCSP?.certificateStatus.flatMap(ScanMetrics.ocspStatus) {
                ocsp = OCSP(status: status)
            }
            let entry = Entry(
                key: "target=\"\(Self.escape(scan.target))\",address=\"\(Self.escape(result.address))\"", target: scan.target,
                reached: result.status == .completed, lastScan: result.startedAt.timeIntervalSince1970,
                policy: result.ats.policy.rawValue, compliant: result.ats.compliant, failedRules: result.ats.failedRules.map(\.rawValue),
                pinState: (result.pin?.state ?? .none).rawValue, version: result.handshake?.protocolVersion.displayName,
                stapled: result.handshake.map { $0.stapledOCSP != nil }, ocsp: ocsp,
                presented: chain?.presented.map(labels) ?? [],
                verified: chain.map { $0.anchored ? $0.path.map { labels($0.certificate) } : [] } ?? [],
                chainExpiry: chain?.certificates.map(\.notAfter).min()?.timeIntervalSince1970)
            state.entries["\(scan.target)\u{0}\(result.address)"] = entry
            state.recordsSinceSweep += 1
            if state.recordsSinceSweep >= 10_000 {
                state.certificates = state.certificates.filter { $0.value.value != nil }
                state.recordsSinceSweep = 0
            }
        }
    }

    /// Drops the entries of targets not in `targets` (the configured keys; a vantage's `KEY@VANTAGE` stays with its key).
    func keepOnly(targets: Set<String>) {
        state.withLock { state in state.entries = state.entries.filter { VantageTarget.isStored($0.value.target, of: targets) } }
    }

    var count: Int { state.withLock { $0.entries.count } }

    /// The entries, ordered by target and address, as a scrape writes them.
    func snapshot() -> [Entry] {
        state.withLock { Array($0.entries.values) }.sorted { $0.key < $1.key }
    }

    /// Every family's HELP, TYPE and samples (the same in the text format and OpenMetrics: all are
    /// gauges), handed to `emit` in chunks of about `chunkBytes`: a scrape of 10,000 addresses
    /// (about 30 MB) never sits whole in memory.
    static func write(_ entries: [Entry], chunkBytes: Int = 256 * 1024, _ emit: ([UInt8]) async throws -> Void) async throws {
        guard !entries.isEmpty else { return }
        var out: [UInt8] = []
        out.reserveCapacity(chunkBytes + 4_096)
        func family(_ name: String, _ help: String, _ samples: (Entry, (String, Double) -> Void) -> Void) async throws {
            out.append(contentsOf: "# HELP \(name) \(help)\n# TYPE \(name) gauge\n".utf8)
            for entry in entries {
                samples(entry) { labels, value in
                    out.append(contentsOf: name.utf8)
                    out.append(UInt8(ascii: "{"))
                    out.append(contentsOf: entry.key.utf8)
                    if !labels.isEmpty {
                        out.append(UInt8(ascii: ","))
                        out.append(contentsOf: labels.utf8)
                    }
                    out.append(contentsOf: "} ".utf8)
                    out.append(contentsOf: Self.number(value).utf8)
                    out.append(UInt8(ascii: "\n"))
                }
                if out.count >= chunkBytes {
                    try await emit(out)
                    out.removeAll(keepingCapacity: true)
                }
            }
        }
        try await family("ssl_probe_success", "The probe connected and completed the handshake (0/1).") { entry, sample in
            sample("", entry.reached ? 1 : 0)
        }
        try await family("tlsaudit_last_scan_timestamp_seconds", "When the latest scan started.") { entry, sample in sample("", entry.lastScan) }
        try await family("tlsaudit_compliant", "The latest scan complies with the target's policy (0/1).") { entry, sample in
            sample("policy=\"\(entry.policy)\"", entry.compliant ? 1 : 0)
        }
        try await family("tlsaudit_rule_failed", "A rule of the target's policy the latest scan fails (always 1).") { entry, sample in
            for rule in entry.failedRules { sample("rule=\"\(Self.escape(rule))\"", 1) }
        }
        try await family("tlsaudit_pin_state", "The latest scan's pin state: match, mismatch or none (always 1).") { entry, sample in
            sample("state=\"\(entry.pinState)\"", 1)
        }
        try await family("ssl_tls_version_info", "The TLS version negotiated (always 1).") { entry, sample in
            if let version = entry.version { sample("version=\"\(version)\"", 1) }
        }
        try await family("ssl_ocsp_response_stapled", "A stapled OCSP response was present (0/1).") { entry, sample in
            if let stapled = entry.stapled { sample("", stapled ? 1 : 0) }
        }
        try await family("ssl_ocsp_response_status", "The leaf's OCSP status, stapled or fetched: 0 good, 1 revoked, 2 unknown.") { entry, sample in
            if let ocsp = entry.ocsp { sample("", ocsp.status) }
        }
        for (name, help, value) in [
            ("ssl_ocsp_response_this_update", "thisUpdate of the leaf's OCSP response, in seconds since the epoch.", \OCSP.thisUpdate),
            ("ssl_ocsp_response_next_update", "nextUpdate of the leaf's OCSP response, in seconds since the epoch.", \OCSP.nextUpdate),
            ("ssl_ocsp_response_revoked_at", "When the leaf's OCSP response says it was revoked, in seconds since the epoch.", \OCSP.revokedAt),
        ] where entries.contains(where: { $0.ocsp?[keyPath: value] != nil }) {
            try await family(name, help) { entry, sample in
                if let time = entry.ocsp?[keyPath: value] { sample("", time) }
            }
        }
        try await family("ssl_cert_not_after", "NotAfter of each certificate the server sent, in seconds since the epoch.") { entry, sample in
            for certificate in entry.presented { sample(certificate.labels, certificate.notAfter) }
        }
        try await family("ssl_cert_not_before", "NotBefore of each certificate the server sent, in seconds since the epoch.") { entry, sample in
            for certificate in entry.presented { sample(certificate.labels, certificate.notBefore) }
        }
        try await family("ssl_verified_cert_not_after", "NotAfter of each certificate of the verified chain, in seconds since the epoch.") { entry, sample in
            for certificate in entry.verified { sample(certificate.verifiedLabels, certificate.notAfter) }
        }
        try await family("ssl_verified_cert_not_before", "NotBefore of each certificate of the verified chain, in seconds since the epoch.") { entry, sample in
            for certificate in entry.verified { sample(certificate.verifiedLabels, certificate.notBefore) }
        }
        try await family("tlsaudit_chain_expiry_timestamp_seconds",
                         "The earliest notAfter of the chain the latest scan saw, in seconds since the epoch.") { entry, sample in
            if let expiry = entry.chainExpiry { sample("", expiry) }
        }
        if !out.isEmpty { try await emit(out) }
    }

    /// A label value as the text format writes it: backslash, double quote and line feed escaped.
    static func escape(_ value: String) -> String {
        guard value.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return value }
        return value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// A value as swift-prometheus writes it (Swift's shortest round-trip form).
    static func number(_ value: Double) -> String { "\(value)" }
}
