import Foundation
public import TLSAuditModel
import TLSAuditSupport

/// Renders a scan report as readable text: one block per target and address, the chain,
/// then findings, most severe first. ANSI colour only when asked (the CLI asks on a TTY).
public struct ScanTextRenderer: Sendable {
    public var colour: Bool
    /// Print every certificate of the chain, not just the path summary.
    public var showChain: Bool

    public init(colour: Bool, showChain: Bool = true) {
        self.colour = colour
        self.showChain = showChain
    }

    public func render(_ report: ScanReport) -> String {
        var out = ""
        for target in report.targets {
            render(target, at: report.generatedAt, into: &out)
        }
        let summary = report.summary
        out += "\(summary.targets) target(s), \(summary.addresses) address(es): "
        // "ATS compliant" when every verdict is an ATS one; "compliant" under apple-trust or Mozilla's profiles.
        let policies = Set(report.targets.flatMap(\.addresses).map(\.ats.policy))
        let word = policies.allSatisfy(\.isAppTransportSecurity) ? "ATS compliant" : "compliant"
        out += paint("\(summary.compliant) \(word)", .green) + ", "
        out += paint("\(summary.notCompliant) not compliant", summary.notCompliant > 0 ? .red : .plain) + ", "
        out += paint("\(summary.failed) could not be scanned", summary.failed > 0 ? .yellow : .plain) + "\n"
        return out
    }

    /// The configuration inventory: one line per item, yes / no / not tested with the evidence.
    private func render(_ inventory: ServerInventory, into out: inout String) {
        out += "    inventory (\(inventory.handshakes) handshakes, \(inventory.durationMs) ms):\n"
        func line(_ name: String, _ answer: InventoryAnswer, bad: InventoryAnswer.Status? = nil) {
            let word = switch answer.status {
            case .yes: "yes"
            case .no: "no"
            case .notTested: "not tested"
            }
            let shown = answer.status == bad ? paint(word, .red) : answer.status == .notTested ? paint(word, .yellow) : word
            out += "      \(name.padding(toLength: 24, withPad: " ", startingAt: 0)) \(shown)  (\(answer.detail))\n"
        }
        line("secure renegotiation", inventory.secureRenegotiation, bad: .no)
        line("client renegotiation", inventory.clientRenegotiation, bad: .yes)
        line("compression", inventory.compression, bad: .yes)
        if let ems = inventory.extendedMasterSecret { line("extended master secret", ems, bad: .no) }
        line("TLS_FALLBACK_SCSV", inventory.fallbackSCSV, bad: .no)
        line("resumption (session ID)", inventory.resumptionSessionID)
        line("resumption (ticket)", inventory.resumptionTicket)
        if let lifetime = inventory.ticketLifetimeSeconds { out += "      ticket lifetime          \(lifetime) s\n" }
        line("0-RTT early data", inventory.earlyData, bad: .yes)
        line("OCSP stapling", inventory.ocspStapling)
        let alpn = inventory.alpn.isEmpty ? "none" : inventory.alpn.joined(separator: ", ")
        out += "      ALPN                     \(alpn)\(inventory.alpnPreferred.map { " (chosen from both: \($0))" } ?? "")\n"
        let groups = inventory.groups.isEmpty ? "none found" : inventory.groups.joined(separator: ", ")
        out += "      groups                   \(groups)\(inventory.groupOrder.map { " (\($0) order)" } ?? "")\n"
        let hybrids = inventory.postQuantumGroups.isEmpty ? "none" : inventory.postQuantumGroups.joined(separator: ", ")
        out += "      post-quantum hybrids     \(hybrids)\n"
        out += "      signature algorithms     \(inventory.signatureAlgorithms.isEmpty ? "none found" : inventory.signatureAlgorithms.joined(separator: ", "))\n"
        if let certificate = inventory.certificateWithoutSNI {
            out += "      certificate without SNI  \(certificate.sameAsWithSNI ? "the same leaf" : "another leaf: \(certificate.subject)") (sha256 \(certificate.sha256Fingerprint.prefix(16))...)\n"
        } else {
            out += "      certificate without SNI  none (\(inventory.withoutSNIDetail ?? "no handshake"))\n"
        }
    }

    /// Each vulnerability: vulnerable / not vulnerable / not tested, with the evidence and the reference.
    private func render(_ report: VulnerabilityReport, into out: inout String) {
        out += "    vulnerabilities (\(report.handshakes) connections, \(report.durationMs) ms):\n"
        let width = max(38, report.answers.map { "\($0.vulnerability.title) (\($0.vulnerability.cve))".count }.max() ?? 0)
        for (vulnerability, answer) in report.answers {
            let word = switch answer.status {
            case .vulnerable: paint("VULNERABLE" + (answer.oracle.map { " (\($0) oracle)" } ?? ""), .red)
            case .notVulnerable: "not vulnerable"
            case .notTested: paint("not tested", .yellow)
            }
            let name = "\(vulnerability.title) (\(vulnerability.cve))"
            out += "      \(name.padding(toLength: width, withPad: " ", startingAt: 0)) \(word)  (\(answer.detail))\n"
        }
    }

    /// Each simulated client: protocol, suite, group and server key, or why it fails (as SSL Labs shows it).
    private func render(_ report: ClientSimulationReport, into out: inout String) {
        out += "    client simulation (\(report.connecting.count) of \(report.clients.count) connect; \(report.connections) connections, \(report.durationMs) ms):\n"
        for client in report.clients {
            let name = client.client.padding(toLength: max(44, client.client.count), withPad: " ", startingAt: 0)
            if client.connects {
                let parts = [client.protocolVersion, client.suite, client.group, client.serverKey].compactMap { $0 }
                out += "      \(name) \(parts.joined(separator: "  "))\n"
            } else {
                out += "      \(name) \(paint("fails", .yellow)): \(client.failure ?? "no reason given")\n"
            }
        }
    }

    private func render(_ target: TargetScanResult, at time: Date, into out: inout String) {
        var heading = paint(target.target, .bold)
        if let sni = target.sni, sni != target.host { heading += "  SNI \(sni)" }
        if let connectTo = target.connectTo, !connectTo.isEmpty { heading += "  via " + connectTo.joined(separator: ", ") }
        if let starttls = target.starttls { heading += "  " + starttls.phrase(port: target.port) }
        if let service = target.implicitTLS { heading += "  implicit TLS (\(service))" }
        out += heading + "\n"
        if let error = target.error {
            out += "  " + paint("COULD NOT SCAN", .yellow) + "  \(error.category.phrase): \(error.message)\n\n"
            return
        }
        for address in target.addresses {
            render(address, at: time, into: &out)
        }
        out += "\n"
    }

    private func render(_ result: AddressScanResult, at time: Date, into out: inout String) {
        let shownAddress = result.family == "ipv6" ? "[\(result.address)]:\(result.port)" : "\(result.address):\(result.port)"
        let verdict: String
        if result.status == .failed {
            verdict = paint("COULD NOT SCAN", .yellow)
        } else {
            // The default policy is what current Apple clients do: plain "ATS COMPLIANT".
            let name = result.ats.policy == .default ? "ATS COMPLIANT" : "COMPLIANT (\(result.ats.policy.rawValue))"
            verdict = result.countedCompliant ? paint(name, .green)
                : paint("NOT " + name, .red) + " (" + result.countedReasons.joined(separator: ", ") + ")"
        }
        out += "  \(shownAddress)  \(verdict)  [\(result.durationMs) ms]\n"
        if let error = result.error {
            out += "    \(error.category.phrase) [\(error.category.rawValue)]: \(error.message)\n"
        }
        if let handshake = result.handshake {
            let cipher = handshake.cipher
            out += "    \(handshake.protocolVersion.displayName)  \(cipher.iana) (\(cipher.openssl))\n"
            let kx = handshake.keyExchange
            var exchange = "key exchange \(Self.keyExchangeName(cipher, group: kx.group))"
            if let group = kx.group { exchange += ", group \(group)" }
            if let key = kx.ephemeralKey { exchange += ", ephemeral \(key.type) \(key.bits) bits" } else { exchange += ", no ephemeral key" }
            exchange += kx.forwardSecrecy ? ", forward secret" : ", NOT forward secret"
            if handshake.clientProfile == .permissive { exchange += "  (permissive client)" }
            out += "    \(exchange)\n"
        }
        if let chain = result.chain {
            out += "    chain: \(chain.presented.count) sent, path of \(chain.path.count), \(CertificateTransparencyText.anchor(chain))\n"
            if let revocation = chain.revocation { out += "    \(RevocationText.line(revocation))\n" }
            if let transparency = result.handshake?.certificateTransparency, !transparency.scts.isEmpty || transparency.policy.required {
                out += CertificateTransparencyText.lines(transparency).map { "    \($0)\n" }.joined()
            }
            if showChain {
                for (depth, element) in chain.path.enumerated() {
                    render(element.certificate, label: "path \(depth)", source: element.source, at: time, into: &out)
                }
                let pathPrints = Set(chain.path.map(\.certificate.sha256Fingerprint))
                for (index, certificate) in chain.presented.enumerated() where !pathPrints.contains(certificate.sha256Fingerprint) {
                    render(certificate, label: "sent #\(index), not in path", source: .presented, at: time, into: &out)
                }
            }
        }
        if let enumeration = result.enumeration {
            out += "    enumeration (\(enumeration.probes) handshakes, \(enumeration.durationMs) ms):\n"
            for support in enumeration.protocols {
                let status = switch support.status {
                case .accepted: paint("accepted", support.version.hasPrefix("SSL") ? .red : .plain)
                case .rejected: "not accepted"
                case .notTested: paint("not tested", .yellow)
                }
                out += "      \(support.version.padding(toLength: 8, withPad: " ", startingAt: 0)) \(status)"
                if let preference = support.preference { out += ", \(preference) order" }
                out += support.suites.isEmpty ? "  (\(support.detail))\n" : "\n"
                for suite in support.suites {
                    let kx = suite.keyExchange
                    var details = [Self.keyExchangeName(suite.cipher, group: kx.group)]
                    if let group = kx.group { details.append(group) } else if let key = kx.ephemeralKey { details.append("\(key.type) \(key.bits)") }
                    details.append(kx.forwardSecrecy ? "FS" : "no FS")
                    details.append(suite.cipher.encryptionMode)
                    out += "        \(suite.cipher.iana)  (\(details.joined(separator: ", ")))\n"
                }
            }
            for finding in enumeration.findings {
                out += "      \(finding.severity.rawValue.uppercased()) \(finding.id): \(finding.message)\n"
            }
        }
        if let inventory = result.inventory { render(inventory, into: &out) }
        if let headers = result.headers {
            out += "    HTTP headers (GET \(headers.path)\(headers.status.map { ": \($0)" } ?? "")):\n"
            if let hsts = headers.hsts {
                out += "      HSTS                     max-age \(hsts.maxAge) s (\(hsts.maxAge / 86_400) d)\(hsts.includeSubDomains ? ", includeSubDomains" : "")\(hsts.preload ? ", preload" : "")\n"
            } else {
                out += "      HSTS                     \(paint("none", .yellow))  (\(headers.detail))\n"
            }
            let redirect = switch headers.plainHTTP.status {
            case .yes: "yes"
            case .no: paint("no", .yellow)
            case .notTested: "not tested"
            }
            out += "      port 80 -> HTTPS         \(redirect)  (\(headers.plainHTTP.detail))\n"
        }
        if let vulnerabilities = result.vulnerabilities { render(vulnerabilities, into: &out) }
        if let clients = result.clients { render(clients, into: &out) }
        for (name, report) in (result.checkReports ?? [:]).sorted(by: { $0.key < $1.key }) {
            // A check of one's own: its report as compact JSON (its findings are listed below with the rest).
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let json = report.report.flatMap { try? encoder.encode($0) }.map { String(decoding: $0, as: UTF8.self) } ?? "no report"
            out += "    check \(name): \(RecordBudget.clamp(json, to: 300))  (\(report.findings.count) finding(s), \(report.durationMs) ms)\n"
        }
        for finding in result.findings {
            let depth = finding.depth.map { " [depth \($0)]" } ?? ""
            let label: String = switch finding.severity {
            case .error: paint("ERROR", .red)
            case .warning: paint("WARN ", .yellow)
            case .info: paint("INFO ", .plain)
            }
            out += "    \(label) \(finding.id)\(depth): \(finding.message)\n"
        }
    }

    private func render(_ certificate: CertificateSummary, label: String, source: CertificateSource, at time: Date,
                        into out: inout String) {
        let days = certificate.daysLeft(at: time)
        let expiry = days < 0 ? paint("expired \(-days) d ago", .red) : "\(days) d left"
        var flags: [String] = []
        if let constraints = certificate.basicConstraints {
            flags.append(constraints.isCA ? "CA" + (constraints.pathLength.map { " pathlen \($0)" } ?? "") : "CA:FALSE")
        }
        if certificate.isSelfSigned { flags.append("self-signed") }
        if source == .trustStore { flags.append("from trust store") }
        let flagText = flags.isEmpty ? "" : "  [" + flags.joined(separator: ", ") + "]"
        out += "      \(label): \(certificate.subject)\(flagText)\n"
        out += "        issuer \(certificate.issuer)\n"
        out += "        \(certificate.publicKey.summary), \(certificate.signatureAlgorithm), "
            + "\(Timestamp.formatDay(certificate.notBefore)) to \(Timestamp.formatDay(certificate.notAfter)) (\(expiry))\n"
        let names = certificate.subjectAlternativeNames
        if !names.dns.isEmpty || !names.ip.isEmpty {
            let all = names.dns + names.ip
            out += "        SAN " + all.prefix(8).joined(separator: ", ") + (all.count > 8 ? ", ... (\(all.count))" : "") + "\n"
        }
        out += "        sha256 \(certificate.sha256Fingerprint)\n"
        out += "        pin-sha256 \(certificate.spkiSHA256)\n"
    }

    private enum Style: String {
        case plain = ""
        case bold = "1"
        case red = "31"
        case green = "32"
        case yellow = "33"
    }

    private func paint(_ text: String, _ style: Style) -> String {
        guard colour, style != .plain else { return text }
        return "\u{1B}[\(style.rawValue)m\(text)\u{1B}[0m"
    }

    /// The suite's key exchange; TLS 1.3 suites name none (OpenSSL says "any"): it is (EC)DHE over the group.
    static func keyExchangeName(_ cipher: CipherSuiteDescription, group: String?) -> String {
        guard cipher.keyExchange.uppercased() == "ANY" else { return cipher.keyExchange }
        return group.map { $0.hasPrefix("ffdhe") ? "DHE" : "ECDHE" } ?? "(EC)DHE"
    }
}
