import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditService
import TLSAuditSupport

/// `tlsaudit-bench report-fixture`: the fixed database of the report golden-file tests.
///
/// Nine targets scanned twice a day from 2026-10-31T12:00Z to 2026-11-07T12:00Z, each scan a
/// real handshake with a loopback server, judged at its timeline instant and stored with that
/// time. The week holds one of everything a report shows: a regression, a fix, a renewal with
/// the same key, a pin mismatch and its restoration, a target going down, a wrong name all
/// along, a certificate whose subject is `<script>alert(1)</script>` and one made to look like
/// a spreadsheet formula and Markdown.
struct ReportFixtureCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report-fixture",
        abstract: "Write the report tests' fixed database (Tests/TLSAuditReportTests/Fixtures/report/fixture.sqlite)."
    )

    @Option(help: "The database to create (must not exist).")
    var database: String

    static let firstScan = Date(timeIntervalSince1970: 1_793_448_000) // 2026-10-31T12:00:00Z
    static let scans = 15
    static let step: TimeInterval = 12 * 3600

    func run() throws {
        guard !FileManager.default.fileExists(atPath: database) else {
            throw ValidationError("\(database) exists; remove it first")
        }
        let lab = try FixtureLab()
        defer { lab.stop() }
        let store = try SQLiteScanStore(path: database, sha256: Digest.sha256Hex)
        for index in 0..<Self.scans {
            let time = Self.firstScan.addingTimeInterval(Double(index) * Self.step)
            let scanner = try TLSScanner(options: ScanOptions(timeout: 3, trustStore: lab.trustStore, evaluationTime: time), judge: AddressAssessment.judge)
            var batch: [StoredScan] = []
            for target in lab.targets {
                let port = target.port(index)
                let host = "\(target.name).fixture.tlsaudit.test"
                var scanTarget = ScanTarget(original: target.name, host: host, port: port, sni: host,
                                            connectTo: [ConnectAddress(host: "127.0.0.1")])
                scanTarget.pins = target.pins
                scanTarget.timeout = 3
                let result = scanner.scan(scanTarget)
                guard var address = result.addresses.first else { throw ValidationError("no result for \(target.name)") }
                address.startedAt = time
                address.durationMs = 12
                // The service stores every address under the target's configured port.
                batch.append(StoredScan(target: target.name, host: host, port: lab.configuredPort(target), sni: host, result: address))
            }
            _ = try store.record(batch, decide: AlertSettings.decision(nil))
        }
        try store.compact()
        print("\(database): \(lab.targets.count) targets x \(Self.scans) scans")
    }
}

/// The fixture's servers. Every certificate's dates are fixed on the fixture's timeline.
struct FixtureLab {
    struct Target {
        var name: String
        var pins: PinPolicy?
        /// The server's port at scan `index` (the target switches servers mid-week).
        var port: (Int) -> Int
    }

    var targets: [Target] = []
    let trustStore: TrustStore
    private var servers: [LabTLSServer] = []
    private let directory: URL
    private let closedPort: Int

    static func day(_ text: String) -> Date { Timestamp.parse(text + "T00:00:00Z")! }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-fixture-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var rootRequest = LabCertificateRequest.authority("tlsaudit fixture root")
        rootRequest.notBefore = Self.day("2026-01-01")
        rootRequest.notAfter = Self.day("2036-01-01")
        let root = try LabCertificateAuthority.selfSigned(rootRequest)
        var intermediateRequest = LabCertificateRequest.authority("tlsaudit fixture intermediate", pathLength: 0)
        intermediateRequest.notBefore = Self.day("2026-01-01")
        intermediateRequest.notAfter = Self.day("2031-01-01")
        let intermediate = try root.issue(intermediateRequest)
        let caFile = directory.appendingPathComponent("root.pem").path
        try root.pem.write(toFile: caFile, atomically: true, encoding: .utf8)
        trustStore = try TrustStore(caFile: caFile)
        closedPort = try LabPorts.unusedPort()

        func leaf(_ name: String, commonName: String? = nil, from: String, to: String, key: LabKeyType = .ec(curve: "P-256"),
                  digest: LabDigest = .sha256, reusing existing: LabPrivateKey? = nil) throws -> LabCertificate {
            var request = LabCertificateRequest.server(["\(name).fixture.tlsaudit.test"], key: key, digest: digest)
            if let commonName { request.commonName = commonName }
            request.notBefore = Self.day(from)
            request.notAfter = Self.day(to)
            request.existingKey = existing
            return try intermediate.issue(request)
        }
        var servers: [LabTLSServer] = []
        func serve(_ chain: [LabCertificate], weak: Bool = false) throws -> Int {
            let configuration = weak ? LabServerConfiguration(chain: chain, maxVersion: .tls1_0, cipherList: "AES128-SHA")
                : LabServerConfiguration(chain: chain)
            let server = try LabTLSServer(configuration)
            servers.append(server)
            return server.port
        }

        let good = try serve([try leaf("good", from: "2026-10-01", to: "2027-10-01"), intermediate])
        targets.append(Target(name: "good", port: { _ in good }))

        let hostile = try serve([try leaf("hostile", commonName: "<script>alert(1)</script>", from: "2026-09-01", to: "2026-11-25"),
                                 intermediate])
        targets.append(Target(name: "hostile", port: { _ in hostile }))

        let tricky = try serve([try leaf("tricky", commonName: "=HYPERLINK(\"x\") | *bold* [a](b) & co", from: "2026-10-15",
                                         to: "2026-12-01"), intermediate])
        targets.append(Target(name: "tricky", port: { _ in tricky }))

        let beforeRegression = try serve([try leaf("regressed", from: "2026-06-01", to: "2027-06-01"), intermediate])
        let afterRegression = try serve([try leaf("regressed", from: "2026-11-04", to: "2027-11-04", key: .rsa(bits: 1024),
                                                  digest: .sha1), intermediate], weak: true)
        targets.append(Target(name: "regressed", port: { $0 < 8 ? beforeRegression : afterRegression }))

        let expired = try serve([try leaf("fixed", from: "2025-10-01", to: "2026-10-30"), intermediate])
        let repaired = try serve([try leaf("fixed", from: "2026-11-03", to: "2027-11-03"), intermediate])
        targets.append(Target(name: "fixed", port: { $0 < 5 ? expired : repaired }))

        let pinnedLeaf = try leaf("pinned", from: "2026-08-01", to: "2027-08-01")
        let genuine = try serve([pinnedLeaf, intermediate])
        let intercepted = try serve([try leaf("pinned", from: "2026-11-05", to: "2027-11-05"), intermediate])
        let pins = PinPolicy(mode: .publicKey, pins: [.spki(pinnedLeaf.summary.spkiSHA256)])
        targets.append(Target(name: "pinned", pins: pins, port: { (9...10).contains($0) ? intercepted : genuine }))

        let oldLeaf = try leaf("renewed", from: "2025-11-10", to: "2026-11-10")
        let renewedLeaf = try leaf("renewed", from: "2026-11-02", to: "2027-11-02", reusing: oldLeaf.key)
        let beforeRenewal = try serve([oldLeaf, intermediate])
        let afterRenewal = try serve([renewedLeaf, intermediate])
        targets.append(Target(name: "renewed", port: { $0 < 4 ? beforeRenewal : afterRenewal }))

        let down = try serve([try leaf("down", from: "2026-10-01", to: "2027-10-01"), intermediate])
        let closed = closedPort
        targets.append(Target(name: "down", port: { $0 < 10 ? down : closed }))

        let wrongName = try serve([try leaf("elsewhere", from: "2026-10-01", to: "2027-10-01"), intermediate])
        targets.append(Target(name: "wrong-name", port: { _ in wrongName }))
        self.servers = servers
    }

    /// The port a target is configured with (its first server's).
    func configuredPort(_ target: Target) -> Int { target.port(0) }

    func stop() {
        servers.forEach { $0.stop() }
        try? FileManager.default.removeItem(at: directory)
    }
}
