/// What the opt-in checks of one scan say is wrong, one short phrase each, for reports.
public enum ServerHygiene {
    /// The checks that ran (`inventory`, `headers`, `vulnerabilities`, `clients`), and the problems they found.
    public static func problems(inventory: ServerInventory?, headers: HTTPHeadersReport?, vulnerabilities: VulnerabilityReport?,
                                clients: ClientSimulationReport? = nil,
                                checkReports: [String: CheckReport]? = nil) -> (checks: [OptionalCheck], problems: [String]) {
        var checks: [OptionalCheck] = []
        var problems: [String] = []
        if let vulnerabilities {
            checks.append(.vulnerabilities)
            // LUCKY13 is informational (every CBC server has it): a finding, not a hygiene problem.
            for (vulnerability, answer) in vulnerabilities.answers where answer.status == .vulnerable && vulnerability.severity > .info {
                problems.append("\(vulnerability.title)\(answer.oracle.map { " (\($0) oracle)" } ?? "") (\(vulnerability.cve))")
            }
        }
        if let inventory {
            checks.append(.inventory)
            // A TLS 1.3-only server has no renegotiation to secure.
            if inventory.secureRenegotiation.status == .no, !inventory.secureRenegotiation.isTLS13Only {
                problems.append("insecure renegotiation (no RFC 5746)")
            }
            // Said once: the vulnerability check's verdict is the same answer when it ran.
            if inventory.clientRenegotiation.status == .yes, vulnerabilities?.clientRenegotiation == nil {
                problems.append("client-initiated renegotiation accepted")
            }
            if inventory.compression.status == .yes { problems.append("TLS compression (CRIME)") }
            if inventory.extendedMasterSecret?.status == .no { problems.append("no extended master secret in TLS 1.2") }
            if inventory.fallbackSCSV.status == .no { problems.append("TLS_FALLBACK_SCSV not honoured") }
            if inventory.earlyData.status == .yes { problems.append("0-RTT early data accepted (replayable)") }
        }
        if let headers {
            checks.append(.headers)
            if headers.status != nil, headers.hsts == nil { problems.append("no HSTS") }
            if headers.plainHTTP.status == .no { problems.append("port 80 does not redirect to HTTPS") }
        }
        if let clients {
            checks.append(.clients)
            // Only the clients still in use that speak TLS 1.2 count (testssl.sh's current list keeps
            // IE 6 and 8 as reference points: that they fail is the point of a modern configuration).
            let failing = clients.clients.filter { result in
                guard !result.connects, let client = SimulatedClientRegistry.client(short: result.short) else { return false }
                return client.current && client.versions.upperBound >= 0x0303
            }
            if !failing.isEmpty {
                problems.append("\(failing.count) current client(s) cannot connect: \(RecordBudget.list(failing.map(\.client)))")
            }
        }
        // The other checks, by name: what they found at warning or worse.
        for (name, report) in (checkReports ?? [:]).sorted(by: { $0.key < $1.key }) {
            checks.append(OptionalCheck(rawValue: name))
            problems += report.findings.filter { $0.severity >= .warning }.map(\.message)
        }
        return (checks, problems)
    }
}
