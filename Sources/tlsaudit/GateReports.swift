import Foundation
import TLSAuditApp
import TLSAuditCore
import TLSAuditOutput

/// Each gating command's report as a `GateReport`: the cases and findings JUnit and SARIF show,
/// and a baseline remembers. A case fails exactly where the command's own exit status counts a
/// failure, so without a baseline the gate and the command agree.
enum GateReports {
    /// Where an app's Info.plist is, for locations: the path given, and its lines when it is XML.
    struct PlistSource {
        var file: String
        var lines: PlistKeyLines?

        /// The location of a key path of the Info.plist.
        func location(_ keyPath: String?) -> GateLocation {
            GateLocation(file: file, line: keyPath.flatMap { lines?.line(of: $0) }, logical: keyPath)
        }

        /// The bundle's Info.plist file, with its lines where it is XML; an .ipa's is an entry of the
        /// archive: its findings name the archive and the key path, without a line.
        init(_ bundle: AppBundle) {
            file = bundle.infoPlistFile ?? bundle.path
            lines = bundle.infoPlistFile == nil ? nil : bundle.infoPlistXML.flatMap(PlistKeyLines.init)
        }

        init(file: String) {
            self.file = file
        }
    }

    static let atsKey = "NSAppTransportSecurity"

    // MARK: - app audit

    static func app(_ report: AppAuditReport, plist: PlistSource) -> GateReport {
        var cases: [GateCase] = report.hosts.map { host in
            let name = (host.scheme.map { "\($0)://" } ?? "") + "\(host.host):\(host.port)"
            let rule = host.entry.map { "\(atsKey).NSExceptionDomains.\($0)" } ?? atsKey
            var detail = "rule: \(host.rule); probe \(host.probe): \(host.detail)"
            if let error = host.error { detail += "\nthe app logs: \(error)" }
            if let oldest = host.oldestConnectingIos { detail += "\noldest iOS that connects: \(oldest)" }
            guard host.reachable else {
                let reason = host.detail
                return GateCase(name: name, group: "tlsaudit.app-audit", outcome: host.requested ? .notReached(reason) : .informational(reason),
                                detail: detail, findings: [], counts: host.requested)
            }
            guard !host.connects else {
                return GateCase(name: name, group: "tlsaudit.app-audit", outcome: .passed, detail: detail, findings: [], counts: host.requested)
            }
            let fix = host.serverFixes.first ?? (host.exceptionNeeded.isEmpty ? nil
                : "declare " + host.exceptionNeeded.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: ", "))
            let findings = host.reasons.map { reason in
                let keyPath = reason.hasPrefix("pin.") && host.pin != nil ? "\(atsKey).NSPinnedDomains" : rule
                var message = (FindingCatalog[FindingID(rawValue: reason)].map { "\($0.title): " } ?? "") + host.detail.sentence
                if let error = host.error { message += " The app logs \(error)." }
                return GateFinding(id: reason, severity: .error, message: message, fix: fix, location: plist.location(keyPath), fails: true)
            }
            return GateCase(name: name, group: "tlsaudit.app-audit",
                            outcome: host.requested ? .failed : .informational("a plist domain, not counted: \(host.reasons.joined(separator: ", "))"),
                            detail: detail, findings: findings, counts: host.requested)
        }
        // The app's own dictionary and bundle: unneeded exceptions, AFNetworking's findings, keys iOS ignores.
        var findings: [GateFinding] = []
        for entry in report.entries {
            for key in entry.unneeded {
                findings.append(GateFinding(id: FindingID.appExceptionUnneeded.rawValue, severity: .warning,
                                            message: "\(key) of \(entry.domain) changes no audited host's outcome: \(entry.note)",
                                            fix: "remove it", location: plist.location("\(atsKey).NSExceptionDomains.\(entry.domain).\(key)"),
                                            fails: true))
            }
        }
        for key in report.global where key.status == .unneeded {
            findings.append(GateFinding(id: FindingID.appExceptionUnneeded.rawValue, severity: .warning,
                                        message: "\(key.key) = \(key.value) changes no audited host's outcome: \(key.note)",
                                        fix: "remove it", location: plist.location("\(atsKey).\(key.key)"), fails: true))
        }
        for finding in report.findings {
            // About a bundle file its words name (AFNetworking's .cer files): the words tell one from another.
            findings.append(GateFinding(id: finding.id.rawValue, severity: finding.severity, message: finding.message,
                                        fix: FindingCatalog[finding.id]?.fix?.short, location: GateLocation(file: report.app),
                                        qualifier: finding.message, fails: finding.severity == .error))
        }
        for problem in report.problems {
            // "KEY.PATH: message", as AppTransportSecurityPolicy.Diagnostic writes it.
            let parts = problem.split(separator: ": ", maxSplits: 1)
            let keyPath = parts.count == 2 ? String(parts[0]) : nil
            findings.append(GateFinding(id: FindingID.appPlistProblem.rawValue, severity: .warning,
                                        message: parts.count == 2 ? String(parts[1]) : problem, location: plist.location(keyPath), fails: false))
        }
        let fails = findings.contains(where: \.fails)
        cases.append(GateCase(name: atsKey, group: "tlsaudit.app-audit", outcome: fails ? .failed : .passed,
                              detail: "the app's \(atsKey) dictionary and bundle (\(report.app))", findings: findings))
        return GateReport(command: "app audit", subject: report.app, toolVersion: report.toolVersion, cases: cases)
    }

    // MARK: - scan

    /// - `lines`: each target's line in the targets file, by its name (`host:port`).
    static func scan(_ report: ScanReport, targetsFile: String?, lines: [String: Int]) -> GateReport {
        var cases: [GateCase] = []
        for target in report.targets {
            let location = GateLocation(file: lines[target.target] == nil ? nil : targetsFile, line: lines[target.target], logical: target.target)
            if let error = target.error, target.addresses.isEmpty {
                cases.append(GateCase(name: target.target, group: "tlsaudit.scan", outcome: .notReached(error.description),
                                      detail: error.description, findings: []))
                continue
            }
            for address in target.addresses {
                let name = "\(target.target) \(address.address)"
                let seconds = Double(address.durationMs) / 1000
                if address.status == .failed {
                    let reason = address.error?.description ?? "no handshake"
                    cases.append(GateCase(name: name, group: "tlsaudit.scan", outcome: .notReached(reason), detail: reason, findings: [],
                                          seconds: seconds))
                    continue
                }
                let reasons = Set(address.countedReasons.map(\.rawValue))
                var findings = address.findings.map { finding in
                    GateFinding(id: finding.id.rawValue, severity: finding.severity, message: finding.message,
                                fix: FindingCatalog[finding.id]?.fix?.short, location: location, qualifier: finding.depth.map { "depth \($0)" },
                                fails: finding.severity == .error && reasons.contains(finding.id.rawValue))
                }
                // A reason no finding carries (a pin mismatch: its words are the pin evaluation's).
                for reason in reasons.sorted() where !findings.contains(where: { $0.id == reason }) {
                    let message = reason == FindingID.pinMismatch.rawValue ? address.pin?.message : nil
                    findings.append(GateFinding(id: reason, severity: .error,
                                                message: message ?? FindingCatalog[FindingID(rawValue: reason)]?.title ?? reason,
                                                fix: FindingCatalog[FindingID(rawValue: reason)]?.fix?.short, location: location, fails: true))
                }
                let protocolLine = address.handshake.map { "\($0.protocolVersion.rawValue) \($0.cipher.iana)" } ?? ""
                cases.append(GateCase(name: name, group: "tlsaudit.scan", outcome: address.countedCompliant ? .passed : .failed,
                                      detail: protocolLine, findings: findings, seconds: seconds))
            }
        }
        return GateReport(command: "scan", subject: report.targets.map(\.target).joined(separator: ", "), toolVersion: report.toolVersion,
                          cases: cases)
    }

    // MARK: - ats

    static func ats(_ diagnostics: ATSDiagnostics, toolVersion: String) -> GateReport {
        let cases = diagnostics.configurations.map { configuration -> GateCase in
            let name = "\(diagnostics.target) \(configuration.name)"
            let keys = configuration.exception.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: ", ")
            let detail = (keys.isEmpty ? "" : "\(keys): ") + configuration.detail
            if configuration.pass {
                return GateCase(name: name, group: "tlsaudit.ats", outcome: .passed, detail: detail, findings: [])
            }
            guard configuration.name == ATSConfigurationName.defaultATS else {
                return GateCase(name: name, group: "tlsaudit.ats",
                                outcome: .informational("does not connect under this configuration; the exit status follows the default one"),
                                detail: detail, findings: [])
            }
            let id: FindingID = switch configuration.failure {
            case .forwardSecrecy?: .atsForwardSecrecy
            case .trust?: .atsTrust
            case .handshake?, nil: .atsHandshake
            }
            var message = configuration.detail
            if !diagnostics.trustProblems.isEmpty { message += " (\(diagnostics.trustProblems.joined(separator: "; ")))" }
            if let error = diagnostics.error { message += "; an app with default ATS logs \(error)" }
            let fix = diagnostics.serverFixes.first ?? diagnostics.appSide
            return GateCase(name: name, group: "tlsaudit.ats", outcome: .failed, detail: detail + "\n" + diagnostics.recommendation,
                            findings: [GateFinding(id: id.rawValue, severity: .error, message: message, fix: fix,
                                                   location: GateLocation(logical: diagnostics.target), fails: true)])
        }
        return GateReport(command: "ats", subject: diagnostics.target, toolVersion: toolVersion, cases: cases)
    }

    /// `ats` when no TLS server was reached: the default configuration's case, not reached.
    static func atsNotReached(target: String, reason: String, toolVersion: String) -> GateReport {
        GateReport(command: "ats", subject: target, toolVersion: toolVersion, cases: [
            GateCase(name: "\(target) default", group: "tlsaudit.ats", outcome: .notReached(reason), detail: reason, findings: []),
        ])
    }

    /// `ats http://...`: the plain load, blocked by default ATS (NSURLErrorDomain -1022).
    static func atsPlainHTTP(target: String, status: Int?, error: AppleLoadError, toolVersion: String) -> GateReport {
        let name = "\(target) default"
        guard let status else {
            return GateReport(command: "ats", subject: target, toolVersion: toolVersion, cases: [
                GateCase(name: name, group: "tlsaudit.ats", outcome: .notReached("no HTTP server answered"), detail: "", findings: []),
            ])
        }
        let finding = GateFinding(id: FindingID.atsInsecureHTTPLoad.rawValue, severity: .error,
                                  message: "default ATS blocks plain http:// loads (GET / answered \(status)); the app logs \(error)",
                                  fix: FindingCatalog[.atsInsecureHTTPLoad]?.fix?.short, location: GateLocation(logical: target), fails: true)
        return GateReport(command: "ats", subject: target, toolVersion: toolVersion, cases: [
            GateCase(name: name, group: "tlsaudit.ats", outcome: .failed, detail: "plain HTTP, GET / answered \(status)", findings: [finding]),
        ])
    }

    // MARK: - verify

    static func verify(_ report: VerifyReport) -> GateReport {
        let name = report.inputs.joined(separator: " ") + (report.host.map { " for \($0)" } ?? "")
        let location = GateLocation(file: report.inputs.first, logical: report.host)
        let findings = report.findings.map { finding in
            GateFinding(id: finding.id.rawValue, severity: finding.severity,
                        message: finding.depth.map { "certificate \($0): " + finding.message } ?? finding.message,
                        fix: FindingCatalog[finding.id]?.fix?.short, location: location, qualifier: finding.depth.map { "depth \($0)" },
                        fails: finding.severity == .error)
        }
        let detail = report.chain.certificates.enumerated().map { "#\($0.offset) \($0.element.subject)" }.joined(separator: "\n")
        return GateReport(command: "verify", subject: name, toolVersion: report.toolVersion, cases: [
            GateCase(name: name, group: "tlsaudit.verify", outcome: report.valid ? .passed : .failed, detail: detail, findings: findings),
        ])
    }
}

extension String {
    /// The text as a sentence: ending with one full stop.
    var sentence: String { hasSuffix(".") ? self : self + "." }
}
