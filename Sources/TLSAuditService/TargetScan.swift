import Foundation
import TLSAuditCore
import TLSAuditProbe
import TLSAuditStore

extension TLSScanner {
    /// Scans a configured target, blocking: resolves its addresses, probes each and packages the
    /// results as stored scans (one failed scan, address `-`, when the name does not resolve). The
    /// scheduler's scans and `/probe`'s are made here. A target scanned from several vantages of
    /// a fleet (`node` set) is keyed `KEY@VANTAGE`.
    func scans(of configured: TargetConfiguration, trustStore: TrustStore, node: NodeIdentity?) -> [StoredScan] {
        let target = configured.scanTarget
        let started = Date()
        let judged = judgedWith(store: trustStore)
        var results: [AddressScanResult] = []
        switch addresses(for: target, selection: configured.addresses.selection) {
        case .success(let addresses):
            results = AddressScanResult.sharingSSLv2Keys(addresses.map { probe($0, target: target, trustStore: trustStore) })
        case .failure(let failure):
            results = [AddressScanResult(address: "-", family: "none", port: configured.port, status: .failed,
                                         startedAt: started, durationMs: Int(Date().timeIntervalSince(started) * 1000),
                                         handshake: nil, error: failure, chain: nil, findings: [],
                                         ats: AddressAssessment.notScanned(configured.policy))]
        }
        let stored = VantageTarget.key(configured.key, vantage: configured.vantages == .any ? nil : node?.vantage)
        return results.map { result in
            var result = result
            result.judgedWith = judged
            var scan = StoredScan(target: stored, host: configured.host, port: configured.port, sni: target.sni, result: result,
                                  node: node?.name, vantage: node?.vantage)
            scan.tags = configured.tags
            return scan
        }
    }
}
