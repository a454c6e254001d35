public import Foundation

/// The output of `tlsaudit verify`: a chain from files judged offline, schema `tlsaudit.verify/1`.
public struct VerifyReport: Codable, Sendable {
    public static let schemaVersion = "tlsaudit.verify/1"

    public var schema: String
    public var toolVersion: String
    /// The moment the chain was judged at (`--at`, else now).
    public var evaluatedAt: Date
    /// The files read, in order.
    public var inputs: [String]
    /// The name checked against the leaf's SANs (`--host`), if any.
    public var host: String?
    /// Which certificate of the input was taken as the leaf (index into `chain.presented`).
    public var leafIndex: Int
    /// `presented`: every certificate in input order; `path`: leaf to anchor as built.
    public var chain: ChainReport
    /// Trust findings and Apple's certificate rules (signature hash, key size), most severe first.
    public var findings: [Finding]
    /// The leaf's embedded SCTs, each with its log and status, and Apple's CT policy's answer.
    public var certificateTransparency: CertificateTransparencyReport?
    /// The verdict under `apple-trust`: the chain is trusted, with SHA-2 signatures and strong keys.
    public var verdict: PolicyVerdict
    /// True when no finding is an error.
    public var valid: Bool
    /// 0 valid, 1 not valid.
    public var exitCode: Int32

    public init(toolVersion: String, evaluatedAt: Date, inputs: [String], host: String?, leafIndex: Int, chain: ChainReport,
                findings: [Finding], verdict: PolicyVerdict) {
        schema = Self.schemaVersion
        self.toolVersion = toolVersion
        self.evaluatedAt = evaluatedAt
        self.inputs = inputs
        self.host = host
        self.leafIndex = leafIndex
        self.chain = chain
        self.findings = findings
        self.verdict = verdict
        valid = !findings.contains { $0.severity == .error }
        exitCode = valid ? 0 : 1
    }
}
