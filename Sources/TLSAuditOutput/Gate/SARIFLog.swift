public import Foundation
public import TLSAuditModel

/// A `GateReport` as SARIF 2.1.0, the form code-scanning views (GitHub, GitLab, Azure DevOps)
/// read: one rule per finding id of the finding catalog (its title, why, fix and the section of
/// docs/findings.md), one result per finding, located in the file it is about (the Info.plist's
/// line where the plist is XML, the targets file's line, the chain file) and by its key path or
/// target. With a baseline, each result says whether it is `new` or `unchanged`; hosts not reached
/// are the run's tool notifications.
public enum SARIFLog {
    public static let schemaURI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    /// The key of `partialFingerprints` a baseline is matched on (`GateFinding.fingerprint`).
    public static let fingerprintKey = "tlsaudit/v1"
    /// Where the installed package keeps docs/findings.md (scripts/package).
    static let installedDocs = "file:///usr/share/doc/tlsaudit/docs/findings.md"

    /// - `exitCode`: the status the command exits with.
    /// - `withBaseline`: a baseline was applied (results carry `baselineState`).
    public static func document(_ report: GateReport, exitCode: Int32, withBaseline: Bool) throws -> Data {
        let rules = FindingCatalog.entries
        var ruleIndex: [String: Int] = [:]
        for (index, rule) in rules.enumerated() { ruleIndex[rule.id.rawValue] = index }
        var results: [[String: Any]] = []
        for (gateCase, finding) in report.findings {
            var result: [String: Any] = [
                "ruleId": finding.id,
                // A case that never counts (a plist domain only shown) raises no error in code scanning.
                "level": gateCase.counts ? level(finding.severity) : "note",
                "message": ["text": message(finding, in: gateCase)],
                "partialFingerprints": [fingerprintKey: finding.fingerprint(in: gateCase.name)],
                "properties": ["case": gateCase.name, "failsCase": finding.fails && gateCase.outcome == .failed],
            ]
            if let index = ruleIndex[finding.id] { result["ruleIndex"] = index }
            if withBaseline { result["baselineState"] = finding.known ? "unchanged" : "new" }
            if let location = location(finding.location) { result["locations"] = [location] }
            results.append(result)
        }
        var notifications: [[String: Any]] = []
        for gateCase in report.cases {
            guard case .notReached(let reason) = gateCase.outcome else { continue }
            notifications.append([
                "level": gateCase.counts ? "error" : "note",
                "message": ["text": "\(gateCase.name) was not reached: \(reason)"],
                "descriptor": ["id": "not-reached"],
            ])
        }
        let run: [String: Any] = [
            "tool": ["driver": [
                "name": "tlsaudit",
                "version": report.toolVersion,
                "informationUri": "file:///usr/share/doc/tlsaudit/README.md",
                "rules": rules.map(rule),
            ] as [String: Any]],
            "automationDetails": ["id": automationID(report.command)],
            "invocations": [[
                "executionSuccessful": !notifications.contains { $0["level"] as? String == "error" },
                "exitCode": Int(exitCode),
                "toolExecutionNotifications": notifications,
            ] as [String: Any]],
            "results": results,
            "properties": ["subject": report.subject],
        ]
        let log: [String: Any] = ["$schema": schemaURI, "version": "2.1.0", "runs": [run]]
        var data = try JSONSerialization.data(withJSONObject: log, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        data.append(UInt8(ascii: "\n"))
        return data
    }

    /// `tlsaudit/app-audit/`: the run's `automationDetails.id`, what a baseline is checked against.
    static func automationID(_ command: String) -> String { "tlsaudit/\(command.replacingOccurrences(of: " ", with: "-"))/" }

    static func level(_ severity: Severity) -> String {
        switch severity {
        case .error: "error"
        case .warning: "warning"
        case .info: "note"
        }
    }

    static func message(_ finding: GateFinding, in gateCase: GateCase) -> String {
        "\(gateCase.name): \(finding.message)" + (finding.fix.map { " Fix: \($0)" + ($0.hasSuffix(".") ? "" : ".") } ?? "")
    }

    static func rule(_ description: FindingDescription) -> [String: Any] {
        var help = description.why.map { $0 + " " } ?? ""
        if let fix = description.fix?.short ?? description.fix?.detailed(certificate: "the certificate", privateAnchors: false) {
            help += "Fix: \(fix). "
        }
        help += "Documented in \(description.docsAnchor)."
        return [
            "id": description.id.rawValue,
            "shortDescription": ["text": description.title],
            "fullDescription": ["text": description.why ?? description.title],
            "help": ["text": help],
            "helpUri": installedDocs + "#" + description.section.rawValue,
            "defaultConfiguration": ["level": level(description.severity)],
            "properties": ["tags": [description.section.rawValue]],
        ]
    }

    /// A SARIF location: physical where a file is known, logical where a key path or target is.
    static func location(_ location: GateLocation) -> [String: Any]? {
        var result: [String: Any] = [:]
        if let file = location.file {
            var physical: [String: Any] = ["artifactLocation": ["uri": file.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? file]]
            if let line = location.line, line >= 1 { physical["region"] = ["startLine": line] }
            result["physicalLocation"] = physical
        }
        if let logical = location.logical { result["logicalLocations"] = [["fullyQualifiedName": logical]] }
        return result.isEmpty ? nil : result
    }
}

/// The findings a team accepted: fingerprints (`GateFinding.fingerprint`) read from an earlier
/// SARIF output, or gathered from an earlier JSON output by the command that wrote it.
public struct GateBaseline: Sendable {
    public var fingerprints: Set<String>

    public init(fingerprints: Set<String>) {
        self.fingerprints = fingerprints
    }

    /// The fingerprints of a SARIF log's results, or nil when the document is not SARIF.
    /// - Throws: `Mismatch` when it is the SARIF of another tool or command than `command`.
    public static func fromSARIF(_ document: [String: Any], command: String) throws -> GateBaseline? {
        guard document["version"] as? String == "2.1.0", let runs = document["runs"] as? [[String: Any]] else { return nil }
        var fingerprints: Set<String> = []
        for run in runs {
            let id = (run["automationDetails"] as? [String: Any])?["id"] as? String
            guard id == SARIFLog.automationID(command) else {
                throw Mismatch(description: "a SARIF log of \(id ?? "another tool"), not of tlsaudit \(command)")
            }
            for result in run["results"] as? [[String: Any]] ?? [] {
                if let fingerprint = (result["partialFingerprints"] as? [String: Any])?[SARIFLog.fingerprintKey] as? String {
                    fingerprints.insert(fingerprint)
                }
            }
        }
        return GateBaseline(fingerprints: fingerprints)
    }

    /// A baseline written by another tool or command.
    public struct Mismatch: Error, CustomStringConvertible {
        public var description: String
    }
}
