extension EnumerationReport {
    /// The report with its findings: what the server still accepts, judged (the enumerator only
    /// records what each handshake showed).
    public func judged() -> EnumerationReport {
        var judged = self
        judged.findings = Self.findings(for: protocols)
        return judged
    }

    /// Findings about what the server still accepts.
    static func findings(for protocols: [ProtocolSupport]) -> [Finding] {
        var findings: [Finding] = []
        for support in protocols where support.status == .accepted {
            switch support.version {
            case "SSLv2", "SSLv3":
                findings.append(Finding(.tlsLegacyProtocol, .error, "The server accepts \(support.version), broken for decades."))
            case "TLSv1", "TLSv1.1":
                findings.append(Finding(.tlsLegacyProtocol, .warning,
                    "The server accepts \(support.version == "TLSv1" ? "TLS 1.0" : "TLS 1.1"), deprecated by RFC 8996."))
            default:
                break
            }
            for suite in support.suites {
                if let key = suite.keyExchange.ephemeralKey, key.type == "DH", key.bits < 2048 {
                    findings.append(Finding(.tlsWeakDH, .warning,
                        "\(suite.cipher.iana) over \(support.version) uses a \(key.bits)-bit Diffie-Hellman group."))
                }
            }
            if let first = support.suites.first, support.preference == "server", !first.keyExchange.forwardSecrecy,
               support.suites.contains(where: \.keyExchange.forwardSecrecy) {
                findings.append(Finding(.tlsPrefersWeakSuite, .warning,
                    "Over \(support.version) the server prefers \(first.cipher.iana), without forward secrecy, over suites it has that offer it."))
            }
        }
        let anonymous = protocols.flatMap(\.suites).filter { $0.cipher.authentication == "NULL" }
        if !anonymous.isEmpty {
            let names = RecordBudget.listWithinMessage(Set(anonymous.map(\.cipher.iana)).sorted())
            findings.append(Finding(.tlsAnonymousSuites, .error,
                "The server accepts anonymous suites, with no server authentication at all (anyone in the middle can answer): \(names)."))
        }
        let staticRSA = protocols.flatMap(\.suites).filter { !$0.keyExchange.forwardSecrecy }
        if !staticRSA.isEmpty {
            let names = RecordBudget.listWithinMessage(Set(staticRSA.map(\.cipher.iana)).sorted())
            findings.append(Finding(.tlsNonForwardSecretSuites, .info, "The server accepts suites without forward secrecy: \(names)."))
        }
        return findings
    }
}
