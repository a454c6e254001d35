import Foundation
import Synchronization
import TLSAuditCore
import TLSAuditMonitoring
import TLSAuditProbe
import TLSAuditStore

/// `/probe`'s scans: a requested target under the configuration's modules (its groups; the
/// defaults without a module), scanned by the service's scanner, never stored. Follows reloads:
/// `install` hands it each configuration the service runs.
final class ServiceProber: TargetProber {
    private struct Modules {
        var settings: HTTPSettings.ProbeSettings
        var defaults: ProbeModule
        var named: [String: ProbeModule]
        /// Trust stores loaded so far, by setting (emptied when a configuration is installed: a file may have changed).
        var stores: [TrustSetting: TrustStore]
    }

    private let scanner: TLSScanner
    private let modules: Mutex<Modules>

    init(scanner: TLSScanner, configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore]) {
        self.scanner = scanner
        modules = Mutex(Self.modules(of: configuration, trustStores: trustStores))
    }

    /// Probes from now on use `configuration`'s modules and `http: probe:` settings.
    func install(_ configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore]) {
        let installed = Self.modules(of: configuration, trustStores: trustStores)
        modules.withLock { $0 = installed }
    }

    private static func modules(of configuration: ServiceConfiguration, trustStores: [TrustSetting: TrustStore]) -> Modules {
        Modules(settings: configuration.http.probe, defaults: configuration.probeDefaults,
                named: Dictionary(configuration.probeModules.map { ($0.name ?? "", $0) }, uniquingKeysWith: { first, _ in first }),
                stores: trustStores)
    }

    func prepare(target text: String, module name: String?) -> Result<PreparedProbe, ProbeRefusal> {
        let (settings, module, names) = modules.withLock { modules in
            (modules.settings, name.map { modules.named[$0] } ?? modules.defaults, modules.named.keys.sorted())
        }
        guard settings.enabled else { return .failure(ProbeRefusal(.disabled, "/probe is off (http: probe: off)")) }
        guard let module else {
            let known = names.isEmpty ? "none: every group of the configuration is one" : names.joined(separator: ", ")
            return .failure(ProbeRefusal(.badRequest, "module '\(name ?? "")' is not a group of the configuration (modules: \(known))"))
        }
        let configured: TargetConfiguration
        do {
            configured = try module.target(text)
        } catch {
            return .failure(ProbeRefusal(.badRequest, "target '\(text)': \(error.description)"))
        }
        guard settings.allows(host: configured.host) else {
            return .failure(ProbeRefusal(.forbidden, "target host '\(configured.host)' is not in http: probe: allowed_targets"))
        }
        return .success(PreparedProbe(target: configured.key, stepTimeout: configured.timeout, timeout: settings.timeout) { [self] stepTimeout in
            var bounded = configured
            bounded.timeout = stepTimeout
            do {
                return scanner.scans(of: bounded, trustStore: try trustStore(configured.trust), node: nil)
            } catch {
                let result = AddressScanResult(address: "-", family: "none", port: configured.port, status: .failed, startedAt: Date(),
                                               durationMs: 0, handshake: nil,
                                               error: ProbeFailure(.internalError, "trust store \(configured.trust.label): \(error)"),
                                               chain: nil, findings: [], ats: AddressAssessment.notScanned(configured.policy))
                return [StoredScan(target: configured.key, host: configured.host, port: configured.port, sni: configured.sni, result: result)]
            }
        })
    }

    /// The trust store `setting` names, loaded on first use (a module's own store, or a policy's default no target uses).
    private func trustStore(_ setting: TrustSetting) throws -> TrustStore {
        if let known = modules.withLock({ $0.stores[setting] }) { return known }
        let loaded = try ScanService.trustStores(for: [setting])[setting]!
        modules.withLock { $0.stores[setting] = loaded }
        return loaded
    }
}
