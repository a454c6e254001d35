import Foundation
package import TLSAuditModel
import TLSAuditSupport

/// What storing one scan writes, whatever the backend: the certificates, the observation's
/// columns, its certificate references and content hash, its verdict, and its place in the
/// address's timeline, computed once from the scan; `StoreEngine` writes them on every backend.
package struct ScanRows {
    package struct CertificateRow {
        package var fingerprint: String
        package var der: [UInt8]
        package var subject: String
        package var issuer: String
        package var notBefore: Double
        package var notAfter: Double
        package var spki: String
        /// The summary's JSON (without the DER, kept apart, and without evaluation-time data).
        package var summary: () throws -> String
    }

    /// The result as stored: within the per-scan budget (README, "How it behaves").
    package var result: AddressScanResult
    /// Each distinct certificate of the chain as sent and the path as built.
    package var certificates: [CertificateRow]
    package var handshake: String?
    package var pathIssues: String?
    package var revocation: String?
    /// The configuration inventory (`checks: [inventory]`), JSON.
    package var inventory: String?
    /// The HTTP headers report (`checks: [headers]`), JSON.
    package var headers: String?
    /// The vulnerability report (`checks: [vulnerabilities]`), JSON.
    package var vulnerabilities: String?
    /// Every version and suite accepted (what a Mozilla policy judges), JSON.
    package var enumeration: String?
    /// The client simulation (`checks: [clients]`), JSON.
    package var clients: String?
    /// The reports of the opt-in checks without a column of their own (`AddressScanResult.checkReports`), JSON.
    package var checkReports: String?
    /// The trust inputs the scan was judged with (JudgedWith), JSON; not part of the content (a new list does not end a run).
    package var judgedWith: String?
    package var anchored: Int?
    /// `ChainReport.anchorIn`, comma-separated ('' for an operator's own anchor).
    package var anchorIn: String?
    package var references: [ObservationContent.ChainEntry]
    package var contentHash: String
    /// What makes a later scan of the address the same run (`StoreSchema.runTables`): SHA-256 of
    /// every stored column but the time, the duration and the node, and of the verdict but its
    /// time; the opt-in reports count without their own durations.
    package var runKey: String
    package var failedRules: String
    package var findings: String
    package var pin: String?
    /// The scan's counted verdict on the address's timeline: condition, policy, failed rules (JSON).
    package var timeline: [String]
    /// The earliest notAfter of the chain (path as built, else as presented).
    package var earliestExpiry: Double?
    /// The target's configured tags, JSON.
    package var tags: String
    /// The app outcome (`AddressScanResult.app`), JSON.
    package var app: String?

    package init(_ scan: StoredScan, handshakeJSON: (HandshakeObservation) throws -> String, sha256: SHA256Hex) throws {
        result = scan.result.withinBudget()
        let chain = result.chain
        var seen = Set<String>()
        certificates = ((chain?.presented ?? []) + (chain?.path.map(\.certificate) ?? []))
            .filter { seen.insert($0.sha256Fingerprint).inserted }
            .map { certificate in
                CertificateRow(fingerprint: certificate.sha256Fingerprint, der: Array(certificate.der), subject: certificate.subject,
                               issuer: certificate.issuer, notBefore: certificate.notBefore.timeIntervalSince1970,
                               notAfter: certificate.notAfter.timeIntervalSince1970, spki: certificate.spkiSHA256,
                               summary: { try StoredValues.json(StoredValues.stripped(certificate)) })
            }
        handshake = try result.handshake.map(handshakeJSON)
        pathIssues = try chain.map { try StoredValues.json($0.issues) }
        revocation = try chain?.revocation.map { try StoredValues.json($0) }
        inventory = try result.inventory.map { try StoredValues.json($0) }
        headers = try result.headers.map { try StoredValues.json($0) }
        vulnerabilities = try result.vulnerabilities.map { try StoredValues.json($0) }
        enumeration = try result.enumeration.map { try StoredValues.json($0) }
        clients = try result.clients.map { try StoredValues.json($0) }
        checkReports = try result.checkReports.map { try StoredValues.json($0) }
        judgedWith = try result.judgedWith.map { try StoredValues.json($0) }
        anchored = chain.map { $0.anchored ? 1 : 0 }
        anchorIn = chain?.anchorIn.map { $0.joined(separator: ",") }
        references = (chain?.presented ?? []).enumerated().map {
            ObservationContent.ChainEntry(role: "presented", position: $0.offset, fingerprint: $0.element.sha256Fingerprint, source: nil)
        } + (chain?.path ?? []).enumerated().map {
            ObservationContent.ChainEntry(role: "path", position: $0.offset, fingerprint: $0.element.certificate.sha256Fingerprint,
                                          source: $0.element.source.rawValue)
        }
        contentHash = ObservationContent.hash(
            status: result.status.rawValue, failureCategory: result.error?.category.rawValue, handshake: handshake,
            atsRefusal: result.atsClientRefusal, trustStore: chain?.trustStore, anchored: anchored, pathIssues: pathIssues,
            hostname: scan.sni ?? scan.host, chain: references, revocation: revocation, anchorIn: anchorIn,
            checkFindings: try result.checkReports.map { try StoredValues.json(CheckReport.findings(of: $0)) }, sha256: sha256)
        failedRules = try StoredValues.json(result.ats.failedRules)
        findings = try StoredValues.json(result.findings)
        pin = try result.pin.map { try StoredValues.json($0) }
        let condition = AddressCondition(status: result.status, hasChain: chain != nil, compliant: result.countedCompliant)
        timeline = [condition.rawValue, result.ats.policy.rawValue, try StoredValues.json(result.countedReasons)]
        earliestExpiry = chain?.certificates.map(\.notAfter).min()?.timeIntervalSince1970
        tags = try StoredValues.json(scan.tags)
        app = try result.app.map { try StoredValues.json($0) }
        runKey = ""
        runKey = try Self.runKey(scan, rows: self, sha256: sha256)
    }

    private static func runKey(_ scan: StoredScan, rows: ScanRows, sha256: SHA256Hex) throws -> String {
        let result = rows.result
        // The opt-in reports time themselves: their durations are not content.
        func untimed<Report: Encodable>(_ report: Report?, _ clear: (inout Report) -> Void) throws -> String {
            guard var report else { return "" }
            clear(&report)
            return try StoredValues.json(report)
        }
        let values: [String?] = [
            rows.contentHash, scan.host, String(scan.port), scan.sni, result.family, result.status.rawValue,
            result.error?.category.rawValue, result.error?.message, result.error?.alert, result.ats.policy.rawValue,
            scan.vantage, rows.headers, rows.app, rows.anchorIn,
            try untimed(result.inventory) { $0.durationMs = 0 },
            try untimed(result.vulnerabilities) { $0.durationMs = 0 },
            try untimed(result.enumeration) { $0.durationMs = 0 },
            result.ats.compliant ? "1" : "0", rows.failedRules, rows.findings, rows.pin,
        ] + (result.clients == nil ? [] : [try untimed(result.clients) { $0.durationMs = 0 }])  // runs stored before v15 keep their key
            + (result.checkReports == nil ? [] : [try untimed(result.checkReports) { reports in
                for name in reports.keys { reports[name]?.durationMs = 0 }
            }])
        // Each value with its length: no two different lists join to the same text.
        let text = values.map { value in value.map { "\($0.utf8.count):\($0)" } ?? "-" }.joined(separator: "\u{1F}")
        return sha256(Array(text.utf8))
    }

    /// The timeline state of a stored scan read back (for a scan stored before a later one).
    package static func timeline(status: AddressScanResult.Status, hasChain: Bool, compliant: Bool, policy: String,
                                 failedRules: [FindingID], pinState: PinEvaluation.State?) throws -> [String] {
        let condition = AddressCondition(status: status, hasChain: hasChain,
                                         compliant: CountedVerdict.compliant(compliant, pinState: pinState))
        return [condition.rawValue, policy, try StoredValues.json(CountedVerdict.reasons(failedRules, pinState: pinState))]
    }

    /// SQL (both backends): the observation `alias` reached the server (the handshake completed,
    /// or at least a chain arrived).
    package static func reached(_ alias: String) -> String {
        "(\(alias).status = 'completed' OR \(alias).trust_store IS NOT NULL)"
    }

    /// Whether a scan that started at `startedAt` is older than the state it would replace (a late
    /// one: kept in the history only; `current` is the address's own state's time: the addresses
    /// of one target are probed side by side, so another address's newer time says nothing). A fenced scan (a fleet claim that still stands) is never
    /// late: its claim orders it after every other, whatever the nodes' clocks say.
    package static func isLate(startedAt: Double, current: Double?, fenced: Bool) -> Bool {
        guard !fenced, let current else { return false }
        return current > startedAt
    }
}

/// The JSON of the handshakes stored lately, each encoded once while it is among the last 64
/// distinct ones: across a fleet most servers show one of a few (an encoding is some 90,000
/// instructions, most of a stored scan's JSON). Shared by the backends.
package final class HandshakeJSONCache: Sendable {
    private let cache = SleepingLock<[HandshakeObservation: String]>([:])

    package init() {}

    package func json(_ handshake: HandshakeObservation) throws -> String {
        if let cached = cache.withLock({ $0[handshake] }) { return cached }
        let text = try StoredValues.json(handshake)
        cache.withLock { cache in
            if cache.count >= 64 { cache.removeAll(keepingCapacity: true) }
            cache[handshake] = text
        }
        return text
    }
}
