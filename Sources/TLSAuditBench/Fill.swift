import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditService
import TLSAuditSupport

/// `tlsaudit-bench fill`: a synthetic fleet for the report benchmark. A handful of real
/// handshakes with loopback servers (good, weak, expired, wrong name, refused) serve as
/// templates; each target gets its own leaf certificate (issued by the lab CA, its own expiry),
/// a behaviour (mostly steady, some regressing, fixed, renewed or going down mid-period), and
/// its scans are stored through the real store, interleaved in time as the service writes them.
struct FillCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fill",
        abstract: "Fill a database with a synthetic fleet's scans (real template handshakes, stored through the real store)."
    )

    @Option(help: "The database to create (must not exist).")
    var database: String

    @Option(help: "Targets in the fleet.")
    var targets = 10_000

    @Option(help: "Scans in total (spread evenly over the targets and the period).")
    var scans = 1_000_000

    @Option(help: "Days the scans span, ending at --end.")
    var days = 7.0

    @Option(help: "The last scan's time, ISO 8601 (default: now).")
    var end: String?

    @Option(help: "Scans per transaction.")
    var batch = 5_000

    @Option(help: "The targets' names, comma-separated (instead of target-00000.fleet.test ...): a history for targets a service then scans.")
    var names: String?

    func run() throws {
        guard !FileManager.default.fileExists(atPath: database) else { throw ValidationError("\(database) exists; remove it first") }
        let givenNames = names.map { $0.split(separator: ",").map(String.init) }
        let targets = givenNames?.count ?? self.targets
        let endDate = end.flatMap(Timestamp.parse) ?? Date()
        let startDate = endDate.addingTimeInterval(-days * 86_400)
        let perTarget = max(1, scans / targets)
        let interval = days * 86_400 / Double(perTarget)
        let clock = ContinuousClock()
        let began = clock.now

        // Named targets (a few) take every behaviour in turn; a numbered fleet, in proportion.
        let behaviour = { (index: Int) in givenNames == nil ? Behaviour(index: index) : Behaviour.allCases[index % Behaviour.allCases.count] }
        let templates = try Templates()
        print("templates: \(templates.describe)")
        let leaves = try (0..<targets).map { index in
            try templates.leaf(for: index, notAfter: endDate.addingTimeInterval(Double(index % 400 + 1) * 86_400 - 3600))
        }
        // Renewed mid-period: valid from the start of the period, for 398 days.
        let renewals = try Dictionary(uniqueKeysWithValues: (0..<targets).filter { behaviour($0) == .renewed }.map { index in
            (index, try templates.leaf(for: index, notAfter: startDate.addingTimeInterval(398 * 86_400)))
        })
        let weakLeaves = try Dictionary(uniqueKeysWithValues: (0..<targets).filter {
            [.weak, .regresses].contains(behaviour($0))
        }.map { index in
            (index, try templates.leaf(for: index, notAfter: endDate.addingTimeInterval(Double(index % 400 + 1) * 86_400), weak: true))
        })
        print("issued \(leaves.count + renewals.count + weakLeaves.count) leaf certificates in \(clock.now - began)")

        let store = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex)
        var pending: [StoredScan] = []
        var stored = 0
        for slot in 0..<perTarget {
            let fraction = Double(slot) / Double(perTarget)
            for index in 0..<targets {
                let time = startDate.addingTimeInterval(Double(slot) * interval + Double(index) * interval / Double(targets))
                let name = givenNames?[index] ?? Templates.name(index)
                var result = templates.result(for: behaviour(index), at: fraction,
                                              leaf: fraction >= 0.5 ? renewals[index] ?? leaves[index] : leaves[index],
                                              weakLeaf: weakLeaves[index])
                result.startedAt = time
                pending.append(StoredScan(target: name, host: name, port: 443, sni: name, result: result))
                if pending.count >= batch {
                    _ = try store.record(pending, decide: AlertSettings.decision(nil))
                    stored += pending.count
                    pending.removeAll(keepingCapacity: true)
                    if stored % 100_000 == 0 { print("stored \(stored) scans (\(clock.now - began))") }
                }
            }
        }
        _ = try store.record(pending, decide: AlertSettings.decision(nil))
        stored += pending.count
        print("\(database): \(targets) targets, \(stored) scans from \(Timestamp.format(startDate)) to \(Timestamp.format(endDate)) in \(clock.now - began)")
    }
}

/// What a synthetic target does over the period (fixed by its index).
enum Behaviour: CaseIterable {
    case steady, weak, regresses, fixed, goesDown, wrongName, renewed

    init(index: Int) {
        switch index % 100 {
        case 0..<75: self = .steady
        case 75..<83: self = .weak
        case 83..<87: self = .regresses
        case 87..<90: self = .fixed
        case 90..<93: self = .goesDown
        case 93..<95: self = .wrongName
        default: self = .renewed
        }
    }
}

/// Real scans of lab servers, reused as the shape of every synthetic scan.
struct Templates {
    let good: AddressScanResult
    let weak: AddressScanResult
    let expired: AddressScanResult
    let wrongName: AddressScanResult
    let refused: AddressScanResult
    private let intermediate: LabCertificate
    private let sharedKey: LabPrivateKey
    private let sharedWeakKey: LabPrivateKey

    init() throws {
        let root = try LabCertificateAuthority.selfSigned(.authority("tlsaudit fleet root"))
        intermediate = try root.issue(.authority("tlsaudit fleet intermediate", pathLength: 0))
        sharedKey = try LabPrivateKey(.ec(curve: "P-256"))
        sharedWeakKey = try LabPrivateKey(.rsa(bits: 1024))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-fill-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let caFile = directory.appendingPathComponent("root.pem").path
        try root.pem.write(toFile: caFile, atomically: true, encoding: .utf8)
        let scanner = try TLSScanner(options: ScanOptions(timeout: 3, trustStore: try TrustStore(caFile: caFile)), judge: AddressAssessment.judge)
        let name = "template.fleet.test"
        var expiredRequest = LabCertificateRequest.server([name])
        expiredRequest.notBefore = Date().addingTimeInterval(-400 * 86_400)
        expiredRequest.notAfter = Date().addingTimeInterval(-3 * 86_400)
        let chains: [(LabServerConfiguration)] = [
            LabServerConfiguration(chain: [try intermediate.issue(.server([name])), intermediate]),
            LabServerConfiguration(chain: [try intermediate.issue(.server([name], key: .rsa(bits: 1024), digest: .sha1)), intermediate],
                                   maxVersion: .tls1_0, cipherList: "AES128-SHA"),
            LabServerConfiguration(chain: [try intermediate.issue(expiredRequest), intermediate]),
            LabServerConfiguration(chain: [try intermediate.issue(.server(["other.fleet.test"])), intermediate]),
        ]
        var results: [AddressScanResult] = []
        for configuration in chains {
            let server = try LabTLSServer(configuration)
            defer { server.stop() }
            let target = ScanTarget(original: name, host: name, port: server.port, sni: name, connectTo: [ConnectAddress(host: "127.0.0.1")])
            guard let result = scanner.scan(target).addresses.first else { throw ValidationError("template scan failed") }
            results.append(result)
        }
        let closed = ScanTarget(original: name, host: name, port: try LabPorts.unusedPort(), sni: name,
                                connectTo: [ConnectAddress(host: "127.0.0.1")])
        guard let refused = scanner.scan(closed).addresses.first else { throw ValidationError("template scan failed") }
        (good, weak, expired, wrongName, self.refused) = (results[0], results[1], results[2], results[3], refused)
    }

    /// The host name of target `index`: `target-00042.fleet.test`.
    static func name(_ index: Int) -> String { "target-\(String(format: "%05d", index)).fleet.test" }

    var describe: String {
        [("good", good), ("weak", weak), ("expired", expired), ("wrong-name", wrongName), ("refused", refused)].map {
            "\($0.0)=\($0.1.ats.compliant ? "compliant" : $0.1.status == .failed ? "failed" : "not compliant")"
        }.joined(separator: ", ")
    }

    /// A leaf of the target's own (renewed targets get a second one for the second half).
    func leaf(for index: Int, notAfter: Date, weak: Bool = false) throws -> CertificateSummary {
        var request = LabCertificateRequest.server([Self.name(index)], key: weak ? .rsa(bits: 1024) : .ec(curve: "P-256"),
                                                   digest: weak ? .sha1 : .sha256)
        request.notBefore = notAfter.addingTimeInterval(-398 * 86_400)
        request.notAfter = notAfter
        request.existingKey = weak ? sharedWeakKey : sharedKey // key generation would dominate; the fingerprints still differ
        return try intermediate.issue(request).summary
    }

    /// The template for a behaviour at `fraction` of the period, with the target's own leaf (its
    /// RSA-1024/SHA-1 one on the weak server).
    func result(for behaviour: Behaviour, at fraction: Double, leaf: CertificateSummary,
                weakLeaf: CertificateSummary?) -> AddressScanResult {
        var result: AddressScanResult
        switch behaviour {
        case .steady, .renewed: result = good
        case .weak: result = weak
        case .regresses: result = fraction < 0.6 ? good : weak
        case .fixed: result = fraction < 0.4 ? expired : good
        case .goesDown: result = fraction < 0.85 ? good : refused
        case .wrongName: result = wrongName
        }
        let onWeakServer = behaviour == .weak || (behaviour == .regresses && fraction >= 0.6)
        if var chain = result.chain, let own = onWeakServer ? weakLeaf : leaf {
            chain.presented[0] = own
            if !chain.path.isEmpty { chain.path[0].certificate = own }
            result.chain = chain
        }
        return result
    }
}
