import Foundation
import TLSAuditCore
import TLSAuditMonitoring
import TLSAuditProbe
import Yams

/// `http:`, the listener for metrics, health and the API.
extension ConfigurationParser {
    static let httpKeys = ["listen", "bearer_token_file", "basic_auth_file", "max_connections", "idle_timeout", "tls", "allowed_hosts", "trusted_proxies", "probe"]
    static let probeKeys = ["allowed_targets", "timeout", "concurrency"]

    /// `http:` with `listen` (an address or a list), `bearer_token_file`, `basic_auth_file`, `tls`,
    /// `max_connections`, `idle_timeout`, `allowed_hosts` (a name or a list), `trusted_proxies` (an
    /// address or CIDR range, or a list), `probe`.
    mutating func httpSettings(_ node: Node) -> HTTPSettings {
        var settings = HTTPSettings()
        guard let mapping = section(node, "'http' must be a mapping with 'listen' (like \"127.0.0.1:9219\" or a list)",
                                    allowed: Self.httpKeys, in: "http") else { return settings }
        if let value = mapping["tls"], !listenerTLS {
            report(value, "http tls: " + ListenerTLS.howToBuild)
        } else if let value = mapping["tls"] {
            if case .mapping(let tls) = value, let certificateNode = tls["certificate"], let keyNode = tls["key"] {
                checkKeys(tls, allowed: ["certificate", "key"], in: "http tls")
                let certificate = string(certificateNode, "a PEM certificate chain file").map(absolutePath)
                let key = string(keyNode, "a PEM private key file").map(absolutePath)
                if let certificate, (try? CertificateFile.summaries(path: certificate))?.isEmpty ?? true {
                    report(certificateNode, "http tls certificate \(certificate) cannot be read or holds no certificate")
                }
                if let key, !((try? String(contentsOfFile: key, encoding: .utf8))?.contains("PRIVATE KEY-----") ?? false) {
                    report(keyNode, "http tls key \(key) cannot be read or holds no PEM private key")
                }
                if let certificate, let key { settings.tls = HTTPSettings.TLSFiles(certificate: certificate, key: key) }
            } else {
                report(value, "http tls needs 'certificate' and 'key' (PEM files)")
            }
        }
        let addresses: [Node] = switch mapping["listen"] {
        case .sequence(let sequence)?: Array(sequence)
        case let value?: [value]
        case nil: []
        }
        if mapping["listen"] == nil { report(node, "http: 'listen' is required (like \"127.0.0.1:9219\")") }
        for value in addresses {
            guard let text = string(value, "an address like 127.0.0.1:9219 or [::1]:9219") else { continue }
            guard let listen = HTTPSettings.Listen.parse(text) else {
                report(value, "http listen '\(text)' is not HOST:PORT, [IPV6]:PORT or :PORT (a port from 0 to 65535)")
                continue
            }
            if settings.listen.contains(listen) { report(value, "http listen \(text) is given twice") }
            settings.listen.append(listen)
        }
        if let value = mapping["bearer_token_file"], let path = string(value, "a file path").map(absolutePath) {
            let token = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            if token == nil {
                report(value, "bearer_token_file \(path) cannot be read")
            } else if token!.isEmpty || token!.contains(where: \.isWhitespace) {
                report(value, "bearer_token_file \(path) must hold one token (no spaces)")
            }
            settings.bearerTokenFile = path
        }
        if let value = mapping["basic_auth_file"], let path = string(value, "an htpasswd file path").map(absolutePath) {
            do {
                _ = try AccessCredentials.users(htpasswd: String(contentsOfFile: path, encoding: .utf8), file: path)
            } catch let error as AccessFileError {
                report(value, "basic_auth_file \(error)")
            } catch {
                report(value, "basic_auth_file \(path) cannot be read")
            }
            settings.basicAuthFile = path
        }
        if let value = mapping["max_connections"],
           let count = integer(value, in: Int(SettingBounds.httpConnections.range.lowerBound)...Int(SettingBounds.httpConnections.range.upperBound)) {
            settings.maxConnections = count
        }
        if let value = mapping["idle_timeout"], let seconds = duration(value, SettingBounds.httpIdleTimeout) { settings.idleTimeout = seconds }
        if let value = mapping["allowed_hosts"] {
            let names: [Node] = if case .sequence(let sequence) = value { Array(sequence) } else { [value] }
            if names.isEmpty { report(value, "http allowed_hosts names no host (leave it out, or list names like dashboard.example.net)") }
            for node in names {
                guard let name = string(node, "a host name like dashboard.example.net") else { continue }
                guard HTTPSettings.isAllowedHost(name) else {
                    report(node, "http allowed_hosts '\(name)' is not a host name or IP address (no port, scheme, path or '*')")
                    continue
                }
                settings.allowedHosts.append(name)
            }
        }
        if let value = mapping["trusted_proxies"] {
            let ranges: [Node] = if case .sequence(let sequence) = value { Array(sequence) } else { [value] }
            if ranges.isEmpty { report(value, "http trusted_proxies names no proxy (leave it out, or list addresses like 127.0.0.1 or 10.0.0.0/8)") }
            for node in ranges {
                guard let text = string(node, "an IP address or CIDR range like 10.0.0.0/8") else { continue }
                guard let range = HTTPSettings.proxyRange(text) else {
                    report(node, "http trusted_proxies '\(text)' is not an IP address or CIDR range (like 127.0.0.1, 10.0.0.0/8 or fd00::/8)")
                    continue
                }
                settings.trustedProxies.append(range)
            }
        }
        if let value = mapping["probe"] { settings.probe = probeSettings(value) }
        return settings
    }

    /// `probe: off`, or `probe:` with `allowed_targets` (a pattern or a list), `timeout`, `concurrency`.
    mutating func probeSettings(_ node: Node) -> HTTPSettings.ProbeSettings {
        var settings = HTTPSettings.ProbeSettings()
        if case .scalar(let scalar) = node, ["off", "false"].contains(scalar.string) {
            settings.enabled = false
            return settings
        }
        guard let mapping = section(node, "http probe must be 'off' or a mapping with 'allowed_targets', 'timeout', 'concurrency'",
                                    allowed: Self.probeKeys, in: "http probe") else { return settings }
        if let value = mapping["allowed_targets"] {
            let patterns: [Node] = if case .sequence(let sequence) = value { Array(sequence) } else { [value] }
            if patterns.isEmpty { report(value, "http probe allowed_targets names no host (use probe: off to turn /probe off)") }
            settings.allowedTargets = []
            for node in patterns {
                guard let pattern = string(node, "a host pattern like *.example.com") else { continue }
                guard HTTPSettings.ProbeSettings.isPattern(pattern) else {
                    report(node, "http probe allowed_targets '\(pattern)' is not a host name, '*.DOMAIN', an IP address or '*' (no port or scheme)")
                    continue
                }
                settings.allowedTargets.append(pattern)
            }
        }
        if let value = mapping["timeout"], let seconds = duration(value, SettingBounds.probeTimeout) { settings.timeout = seconds }
        if let value = mapping["concurrency"], let count = integer(value, in: SettingBounds.probeConcurrency.range) {
            settings.concurrency = count
        }
        return settings
    }
}
