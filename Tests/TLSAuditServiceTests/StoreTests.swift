import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditStore
import TLSAuditSQLite
import TLSAuditService
import GRDB
import TLSAuditServiceLab

/// The SQLite store on real scan results (from real loopback handshakes).
@Suite("SQLite store")
struct StoreTests {
    let lab = ServiceLab.shared

    /// A real scan of a loopback server, with `startedAt` moved to `date`.
    func scan(_ server: LabTLSServer, at date: Date, policy: CompliancePolicy = .ats) throws -> AddressScanResult {
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: lab.rootFile)), judge: AddressAssessment.judge)
        var target = ScanTarget(original: "t", host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname,
                                connectTo: [ConnectAddress(host: "127.0.0.1")])
        target.policy = policy
        var result = scanner.scan(target).addresses[0]
        result.startedAt = date
        return result
    }

    func newStore() throws -> SQLiteScanStore {
        try SQLiteScanStore(path: try lab.workspace("store").appendingPathComponent("db.sqlite").path, sha256: Digest.sha256Hex)
    }

    @Test("a stored result comes back whole, and can be judged again under another policy without rescanning")
    func roundTripAndRejudge() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try lab.intermediate.issue(.server([ServiceLab.hostname], key: .rsa(bits: 2048))), lab.intermediate],
                                                             maxVersion: .tls1_0, cipherList: "AES128-SHA"))
        defer { server.stop() }
        let store = try newStore()
        let original = try scan(server, at: Date())
        #expect(original.ats.failedRules.contains("ats.tls-version"))
        _ = try store.record([StoredScan(target: "weak", host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname,
                                     result: original)], decide: AlertSettings.decision(nil))
        let id = try #require(try store.status().first?.lastObservationID)
        let loaded = try #require(try store.result(observationID: id))
        #expect(loaded.handshake == original.handshake)
        #expect(loaded.chain?.presented.map(\.der) == original.chain?.presented.map(\.der))
        #expect(loaded.chain?.path.map(\.certificate.sha256Fingerprint) == original.chain?.path.map(\.certificate.sha256Fingerprint))
        #expect(loaded.chain?.issues == original.chain?.issues)
        #expect(loaded.findings == original.findings)
        #expect(loaded.ats == original.ats)

        // Same verdict when judged again under the same policy at the same time...
        let again = AddressAssessment.rejudge(loaded, hostname: ServiceLab.hostname, policy: .ats, at: original.startedAt)
        #expect(again.verdict == original.ats)
        // ...and apple-trust ignores the protocol rules.
        let appleTrust = AddressAssessment.rejudge(loaded, hostname: ServiceLab.hostname, policy: .appleTrust, at: original.startedAt)
        #expect(appleTrust.verdict.compliant)
        // Judged two years later, the leaf has expired.
        let later = AddressAssessment.rejudge(loaded, hostname: ServiceLab.hostname, policy: .appleTrust,
                                              at: original.startedAt.addingTimeInterval(730 * 86_400))
        #expect(later.verdict.failedRules == ["ats.trust"])
        #expect(later.findings.contains { $0.id == .trustExpired })
    }

    @Test("revocation facts are stored with the scan and judged again from the store; answers are kept until they expire")
    func revocation() throws {
        let crlServer = try LabHTTPServer()
        defer { crlServer.stop() }
        var request = LabCertificateRequest.server([ServiceLab.hostname])
        request.extraExtensions = [.init(name: "crlDistributionPoints", value: "URI:\(crlServer.url("/ca.crl"))")]
        let leaf = try lab.intermediate.issue(request)
        crlServer.serve(try lab.intermediate.crl(revoking: [LabRevocation(leaf, reason: 1)]), at: "/ca.crl")
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, lab.intermediate]))
        defer { server.stop() }
        let store = try newStore()
        let original = try scan(server, at: Date())
        #expect(original.chain?.revocation?.checks.first?.status == .revoked)
        _ = try store.record([StoredScan(target: "revoked", host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname,
                                         result: original)], decide: AlertSettings.decision(nil))
        let id = try #require(try store.status().first?.lastObservationID)
        let loaded = try #require(try store.result(observationID: id))
        #expect(loaded.chain?.revocation == original.chain?.revocation)
        // Judged again, the stored facts give each policy's answer: a browser profile fails the chain;
        // Apple's trust, whose clients fetch no CRL, reports the revocation as a warning.
        let again = AddressAssessment.rejudge(loaded, hostname: ServiceLab.hostname, policy: .mozillaIntermediate, at: original.startedAt)
        #expect(again.findings.contains { $0.id == .trustRevoked && $0.severity == .error })
        #expect(again.verdict.failedRules.contains("mozilla.trust"), "\(again.verdict.failedRules)")
        let apple = AddressAssessment.rejudge(loaded, hostname: ServiceLab.hostname, policy: .appleTrust, at: original.startedAt)
        #expect(apple.findings.contains { $0.id == .trustRevoked && $0.severity == .warning })
        #expect(apple.verdict.failedRules.isEmpty, "\(apple.verdict.failedRules)")

        let now = Date()
        try store.saveRevocationAnswer([1, 2, 3], for: "crl http://example.test/a.crl", expires: now.addingTimeInterval(60))
        try store.saveRevocationAnswer([4], for: "crl http://example.test/old.crl", expires: now.addingTimeInterval(-1))
        #expect(try store.revocationAnswer(for: "crl http://example.test/a.crl", at: now)?.body == [1, 2, 3])
        #expect(try store.revocationAnswer(for: "crl http://example.test/a.crl", at: now.addingTimeInterval(120)) == nil)
        #expect(try store.revocationAnswer(for: "crl http://example.test/old.crl", at: now) == nil)
    }

    @Test("a stored value this version does not know is an error that names the row, never a silent default")
    func unknownStoredValues() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [try lab.intermediate.issue(.server([ServiceLab.hostname])), lab.intermediate]))
        defer { server.stop() }
        let path = try lab.workspace("store").appendingPathComponent("db.sqlite").path
        let store = try SQLiteScanStore(path: path, sha256: Digest.sha256Hex)
        _ = try store.record([StoredScan(target: "t", host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname,
                                         result: try scan(server, at: Date()))], decide: AlertSettings.decision(nil))
        let id = try #require(try store.status().first?.lastObservationID)
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "UPDATE verdict SET policy = 'future-policy'")
            try db.execute(sql: "UPDATE observation SET policy = 'future-policy'")
            try db.execute(sql: "UPDATE target_state SET policy = 'future-policy', pin_state = 'half-pinned'")
        }
        for read in [{ _ = try store.status() }, { _ = try store.history(target: "t", limit: 5) }, { _ = try store.result(observationID: id) }] {
            do {
                try read()
                Issue.record("an unknown policy was read without an error")
            } catch let error as StoreError {
                #expect(error.kind == .unreadable)
                #expect(error.description.contains("is not one this tlsaudit knows"), "\(error)")
                #expect(error.description.contains("observation \(id)") || error.description.contains("current state of t"), "\(error)")
            }
        }

        // With the policies readable again: an unknown pin state is an error for the alert memory
        // (the next scan), an unknown failure category for the status, and a damaged path document
        // for the stored result (none of them read as nil or empty).
        try queue.write { db in
            try db.execute(sql: "UPDATE verdict SET policy = 'ats-runtime'")
            try db.execute(sql: "UPDATE observation SET policy = 'ats-runtime', path_issues = '{damaged'")
            try db.execute(sql: "UPDATE target_state SET policy = 'ats-runtime', pin_state = 'none', failure_category = 'future-category'")
        }
        let damaged: [(String, () throws -> Void)] = [
            ("failure category", { _ = try store.status() }),
            ("path issues cannot be read", { _ = try store.result(observationID: id) }),
            ("pin state", {
                try queue.write { try $0.execute(sql: "UPDATE target_state SET pin_state = 'half-pinned', failure_category = NULL") }
                _ = try store.record([StoredScan(target: "t", host: ServiceLab.hostname, port: server.port, sni: ServiceLab.hostname,
                                                 result: try self.scan(server, at: Date()))], decide: AlertSettings.decision(nil))
            }),
        ]
        for (what, read) in damaged {
            do {
                try read()
                Issue.record("a damaged \(what) was read without an error")
            } catch let error as StoreError {
                #expect(error.kind == .unreadable)
                #expect(error.description.contains(what), "\(error)")
                #expect(error.description.contains("observation \(id)") || error.description.contains("current state of t"), "\(error)")
            }
        }
    }

    @Test("each stored scan keeps its own handshake, with several servers' scans interleaved")
    func handshakesStoredApart() throws {
        let weak = try LabTLSServer(LabServerConfiguration(chain: [lab.good, lab.intermediate], maxVersion: .tls1_2,
                                                           cipherList: "ECDHE-ECDSA-AES128-SHA"))
        let strong = try lab.goodServer()
        defer { weak.stop(); strong.stop() }
        let store = try newStore()
        let scans = try [weak, strong, weak, strong].map { try scan($0, at: Date()) }
        #expect(scans[0].handshake != scans[1].handshake)
        for (index, result) in scans.enumerated() {
            _ = try store.record([StoredScan(target: "t\(index)", host: ServiceLab.hostname, port: 443, sni: ServiceLab.hostname,
                                             result: result)], decide: AlertSettings.decision(nil))
        }
        let stored = try store.status().sorted { $0.target < $1.target }
        #expect(stored.count == 4)
        for (index, row) in stored.enumerated() {
            let loaded = try #require(try store.result(observationID: row.lastObservationID))
            #expect(loaded.handshake == scans[index].handshake)
        }
    }

    @Test("the current state keeps only the addresses the latest scan saw")
    func currentAddresses() throws {
        let server = try LabTLSServer(LabServerConfiguration(chain: [lab.good, lab.intermediate]))
        defer { server.stop() }
        let store = try newStore()
        var first = try scan(server, at: Date().addingTimeInterval(-60))
        var second = first
        second.address = "::1"
        _ = try store.record([StoredScan(target: "t", host: ServiceLab.hostname, port: server.port, sni: nil, result: first),
                              StoredScan(target: "t", host: ServiceLab.hostname, port: server.port, sni: nil, result: second)],
                             decide: AlertSettings.decision(nil))
        #expect(try store.status().map(\.address).sorted() == ["127.0.0.1", "::1"])
        first.startedAt = Date()
        _ = try store.record([StoredScan(target: "t", host: ServiceLab.hostname, port: server.port, sni: nil, result: first)],
                             decide: AlertSettings.decision(nil))
        #expect(try store.status().map(\.address) == ["127.0.0.1"], "::1 no longer resolves")
    }

    @Test("certificates are stored once; retention keeps each address's latest scan and drops orphaned certificates")
    func retention() throws {
        let first = try LabTLSServer(LabServerConfiguration(chain: [lab.good, lab.intermediate]))
        let second = try LabTLSServer(LabServerConfiguration(chain: [lab.expired, lab.intermediate]))
        let rotated = try LabTLSServer(LabServerConfiguration(chain: [try lab.intermediate.issue(.server([ServiceLab.hostname])),
                                                                      lab.intermediate]))
        defer { first.stop(); second.stop(); rotated.stop() }
        let store = try newStore()
        let old = Date().addingTimeInterval(-200 * 86_400)
        // Ten old scans of "a" with its first leaf; "b" scanned once, long ago; then "a" with a renewed leaf.
        for day in 0..<10 {
            _ = try store.record([StoredScan(target: "a", host: ServiceLab.hostname, port: first.port, sni: nil,
                                         result: try scan(first, at: old.addingTimeInterval(Double(day) * 86_400)))], decide: AlertSettings.decision(nil))
        }
        _ = try store.record([StoredScan(target: "b", host: ServiceLab.hostname, port: second.port, sni: nil,
                                     result: try scan(second, at: old))], decide: AlertSettings.decision(nil))
        _ = try store.record([StoredScan(target: "a", host: ServiceLab.hostname, port: rotated.port, sni: nil,
                                     result: try scan(rotated, at: Date()))], decide: AlertSettings.decision(nil))
        // The ten unchanged scans are one run: its first scan, and nine repeats.
        #expect(try store.history(target: "a", limit: 100).map { $0.run?.scans ?? 1 } == [1, 10])
        #expect(Set(try store.history(target: "a", limit: 100).compactMap(\.leafFingerprint)).count == 2,
                "ten scans share one stored leaf")

        let pruned = try store.prune(olderThan: Date().addingTimeInterval(-90 * 86_400))
        #expect(pruned.observations == 1, "a's old run goes; b's only scan is its latest and stays")
        #expect(pruned.certificates == 1, "a's first leaf is no longer referenced")
        #expect(try store.history(target: "a", limit: 100).count == 1)
        #expect(try store.history(target: "b", limit: 100).count == 1)
        #expect(try store.integrityCheck() == "ok")
    }
}
