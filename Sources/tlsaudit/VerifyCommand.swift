import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditOutput
import TLSAuditProbe
import TLSAuditSupport

/// `tlsaudit verify`: offline chain audit.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Judge a certificate chain from files, offline: the same path building and findings as scan.",
        discussion: """
            Input: PEM (several certificates per file) or DER, in any order, extras allowed; the \
            leaf is the certificate that issued none of the others (preferring one matching --host). \
            Verdict: the chain is trusted and meets Apple's certificate rules (SHA-2 signatures, \
            RSA >= 2048 / ECC >= 256 below the root). Revocation is checked from the CRLs and OCSP \
            responses given (--crl, --ocsp-response), offline; with --revocation soft or hard, what \
            they do not cover is fetched as a scan does. Exit status: 0 valid, 1 not valid, 2 input \
            unreadable, 64 usage error. \
            With --baseline FILE (an earlier --format sarif or json output): 0 nothing new, 1 a finding not in the baseline, 2 an input or the baseline could not be read; the known findings are listed as such. --format junit and sarif: docs/ci.md.
            """
    ).parsedDirectly(under: "tlsaudit")

    @Option(name: .customLong("chain"), help: "Certificate file(s): PEM or DER; repeatable.")
    var chainFiles: [String]

    @Option(help: "Your own trust anchors (PEM) instead of a root store: any certificate in it is an anchor, a root, an intermediate or a leaf (the path ends at the first one it holds).")
    var roots: String?

    @OptionGroup var trust: TrustInputOptions

    @Option(help: "Check this DNS name or IP address against the leaf's subjectAltNames.")
    var host: String?

    @Option(help: "Judge at this ISO 8601 time instead of now (e.g. 2027-01-01T00:00:00Z).")
    var at: String?

    @Option(name: .customLong("crl"), help: "CRL file (DER or PEM) to check revocation against, offline; repeatable.")
    var crlFiles: [String] = []

    @Option(name: .customLong("ocsp-response"), help: "DER OCSP response file to check revocation against, offline; repeatable.")
    var ocspResponseFiles: [String] = []

    @Option(help: "Revocation checking: off, soft or hard. Default: soft from the files given (--crl, --ocsp-response), else off; given without files, OCSP and CRLs are fetched as a scan does.")
    var revocation: RevocationMode?

    @Flag(name: .customLong("aia-fetch"), help: "Fetch a missing intermediate from the caIssuers URL in the AIA, as Apple's clients do.")
    var aiaFetch = false

    @Option(help: "Seconds allowed for fetching (missing intermediates with --aia-fetch; revocation answers with --revocation and no files).")
    var timeout: Double = SettingBounds.timeout.defaultValue

    @Option(help: ArgumentHelp(GateOptions.formatHelp))
    var format: GateOutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    @OptionGroup var gate: GateOptions

    func validate() throws {
        guard !chainFiles.isEmpty else { throw ValidationError("Give --chain FILE.") }
        if let at, Timestamp.parse(at) == nil {
            throw ValidationError("--at: '\(at)' is not an ISO 8601 time like 2027-01-01T00:00:00Z.")
        }
        if let problem = SettingBounds.timeout.problem(timeout, name: "--timeout") { throw ValidationError(problem + ".") }
    }

    func run() throws {
        let store = try trust.store(caFile: roots, caFileFlag: "--roots", policy: .appleTrust)
        let logs = try trust.logs()
        let distrust = try trust.distrust()
        let report: VerifyReport
        do {
            let evidence = try OfflineRevocationEvidence(crlFiles: crlFiles, ocspResponseFiles: ocspResponseFiles)
            var probed = try ChainVerifier.probe(files: chainFiles, roots: store, host: host,
                                                 at: at.flatMap(Timestamp.parse) ?? Date(),
                                                 namesHost: { names in host.map { HostnameMatcher.matches(host: $0, names: names) } ?? false },
                                                 revocation: revocation ?? (evidence.isEmpty ? .off : .soft), evidence: evidence,
                                                 timeout: timeout, aiaFetch: aiaFetch, ctLogs: logs)
            probed.distrust = distrust
            report = AddressAssessment.judge(probed, toolVersion: TLSAuditCommand.version)
        } catch {
            StandardStream.error.write("tlsaudit: cannot read the input: \(error)\n")
            throw ExitCode(2)
        }
        let colour = ProcessInfo.processInfo.environment["NO_COLOR"] == nil && Terminal.isTTY(STDOUT_FILENO)
        try gate.finish(GateReports.verify(report), commandExit: report.exitCode, format: format,
                        json: { try jsonStyle.encoder.encodeLineSegments(report) }, text: { VerifyTextRenderer.render(report, colour: colour) },
                        fromJSON: { data in
                            try GateOptions.decode(VerifyReport.self, data, schema: VerifyReport.schemaVersion).map(GateReports.verify)
                        })
    }
}

enum VerifyTextRenderer {
    static func render(_ report: VerifyReport, colour: Bool) -> String {
        func paint(_ text: String, _ code: String) -> String { colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
        var out = report.valid ? paint("VALID", "32") : paint("NOT VALID", "31") + " (" + report.verdict.failedRules.joined(separator: ", ") + ")"
        out += "  \(report.inputs.joined(separator: ", "))"
        if let host = report.host { out += "  host \(host)" }
        out += "  at \(Timestamp.format(report.evaluatedAt))\n"
        out += "as presented (\(report.chain.presented.count)):\n"
        for (index, certificate) in report.chain.presented.enumerated() {
            let mark = index == report.leafIndex ? " (leaf)" : ""
            out += "  #\(index)\(mark) \(certificate.subject)  \(certificate.publicKey.summary), \(certificate.signatureAlgorithm), to \(Timestamp.formatDay(certificate.notAfter))\n"
        }
        out += "path as built (\(report.chain.path.count), \(CertificateTransparencyText.anchor(report.chain))):\n"
        for (depth, element) in report.chain.path.enumerated() {
            let origin = element.presentedIndex.map { "#\($0)" } ?? "trust store"
            out += "  [\(depth)] \(element.certificate.subject)  (\(origin))\n"
        }
        if let revocation = report.chain.revocation { out += "\(RevocationText.line(revocation))\n" }
        if let transparency = report.certificateTransparency, !transparency.scts.isEmpty || transparency.policy.required {
            out += CertificateTransparencyText.lines(transparency).map { "\($0)\n" }.joined()
        }
        for finding in report.findings {
            let depth = finding.depth.map { " [depth \($0)]" } ?? ""
            out += "  \(finding.severity.rawValue.uppercased()) \(finding.id)\(depth): \(finding.message)\n"
        }
        return out
    }
}
