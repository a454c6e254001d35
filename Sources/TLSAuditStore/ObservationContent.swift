package import TLSAuditModel

/// What a verdict depends on apart from the time, as stored: two observations with the same
/// content hash get the same verdict under any policy at any instant where the same certificates
/// are within their validity. Reports re-judging history under another policy judge each content
/// once (per validity state) instead of every scan.
package enum ObservationContent {
    /// One certificate reference of an observation, as `observation_certificate` holds it.
    package struct ChainEntry {
        package var role: String
        package var position: Int
        package var fingerprint: String
        package var source: String?

        package init(role: String, position: Int, fingerprint: String, source: String?) {
            self.role = role
            self.position = position
            self.fingerprint = fingerprint
            self.source = source
        }
    }

    /// SHA-256 of the observation's stored columns and certificate references, lowercase hex
    /// (a server chooses much of this content: a non-cryptographic hash could be made to collide).
    package static func hash(status: String, failureCategory: String?, handshake: String?, atsRefusal: String?,
                     trustStore: String?, anchored: Int?, pathIssues: String?, hostname: String, chain: [ChainEntry],
                     revocation: String? = nil, anchorIn: String? = nil, checkFindings: String? = nil, sha256: SHA256Hex) -> String {
        var text = [status, failureCategory ?? "", handshake ?? "", atsRefusal ?? "", trustStore ?? "",
                    anchored.map(String.init) ?? "", pathIssues ?? "", hostname].joined(separator: "\u{1F}")
        // Appended only when present: observations stored before revocation checking keep their hash.
        if let revocation { text += "\u{1D}\(revocation)" }
        if let anchorIn { text += "\u{1C}\(anchorIn)" } // Likewise: observations stored before it keep their hash.
        // The findings of the opt-in checks without a column of their own (judged again with the rest), when any ran.
        if let checkFindings { text += "\u{1B}\(checkFindings)" }
        for entry in chain.sorted(by: { ($0.role, $0.position) < ($1.role, $1.position) }) {
            text += "\u{1E}\(entry.role)\u{1F}\(entry.position)\u{1F}\(entry.fingerprint)\u{1F}\(entry.source ?? "")"
        }
        return sha256(Array(text.utf8))
    }
}
