/// Mozilla's server-side TLS configurations (guidelines 5.7, the data sslyze's `--mozilla_config`
/// checks against): the whole configuration judged, so a scan under them also enumerates and
/// runs the inventory and vulnerability checks (docs/findings.md, `mozilla.*`). Judged by
/// TLSAuditCore's `MozillaProfile`s; the clients they describe trust the system's roots.
extension CompliancePolicy {
    public static let mozillaModern = mozilla("modern", "TLS 1.3 only")
    public static let mozillaIntermediate = mozilla("intermediate", "TLS 1.2 and 1.3, for general-purpose servers")
    public static let mozillaOld = mozilla("old", "down to TLS 1.0, for very old clients")

    private static func mozilla(_ profile: String, _ summary: String) -> CompliancePolicy {
        CompliancePolicy(name: "mozilla-\(profile)", summary: "Mozilla's \(profile) configuration: \(summary); the whole configuration judged",
                         rules: FindingID.mozillaRules, judgesWholeConfiguration: true, trustsAppleRoots: false)
    }
}
