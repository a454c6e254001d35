public import Foundation

/// A `GateReport` as JUnit XML, the form Jenkins, GitLab and most CI systems show as test results
/// (valid against the JUnit schema Jenkins reads, `junit-10.xsd`). One test suite per run, one
/// test case per host, address, configuration or chain: failed with its findings' ids, words and
/// fixes; skipped when it was not reached (or is informational only); findings in the baseline are
/// listed in the case's output and do not fail it.
public enum JUnitXML {
    public static func document(_ report: GateReport) -> String {
        let cases = report.cases
        let failures = cases.filter(\.failsAgainstBaseline).count
        let skipped = cases.filter { if case .notReached = $0.outcome { true } else if case .informational = $0.outcome { true } else { false } }.count
        let time = seconds(cases.compactMap(\.seconds).reduce(0, +))
        let suiteName = "tlsaudit \(report.command)"
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<testsuites name=\(quoted(suiteName)) tests=\"\(cases.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(time)\">\n"
        out += "  <testsuite name=\(quoted("\(suiteName): \(report.subject)")) tests=\"\(cases.count)\" failures=\"\(failures)\" errors=\"0\""
            + " skipped=\"\(skipped)\" time=\"\(time)\">\n"
        out += "    <properties>\n"
        out += "      <property name=\"tool\" value=\(quoted("tlsaudit \(report.toolVersion)"))/>\n"
        out += "      <property name=\"command\" value=\(quoted(report.command))/>\n"
        out += "    </properties>\n"
        for gateCase in cases {
            out += "    <testcase name=\(quoted(gateCase.name)) classname=\(quoted(gateCase.group))"
            out += gateCase.seconds.map { " time=\"\(seconds($0))\"" } ?? ""
            out += ">\n"
            switch gateCase.outcome {
            case .notReached(let reason):
                out += "      <skipped message=\(quoted("not reached: \(reason)"))/>\n"
            case .informational(let reason):
                out += "      <skipped message=\(quoted("informational: \(reason)"))/>\n"
            case .failed where gateCase.failsAgainstBaseline:
                let new = gateCase.newFailures
                let ids = new.map(\.id).uniqued()
                let message = new.first.map { ids.joined(separator: ", ") + ": " + $0.message } ?? gateCase.detail
                out += "      <failure type=\(quoted(ids.isEmpty ? "failed" : ids.joined(separator: ","))) message=\(quoted(message))>"
                out += text(new.isEmpty ? gateCase.detail : new.map(describe).joined(separator: "\n")) + "</failure>\n"
            case .failed, .passed:
                break
            }
            let known = gateCase.findings.filter(\.known)
            let others = gateCase.findings.filter { !$0.known && !($0.fails && gateCase.failsAgainstBaseline) }
            var lines = [gateCase.detail]
            lines += known.map { "known (in the baseline): " + describe($0) }
            lines += others.map(describe)
            out += "      <system-out>" + text(lines.filter { !$0.isEmpty }.joined(separator: "\n")) + "</system-out>\n"
            out += "    </testcase>\n"
        }
        out += "  </testsuite>\n</testsuites>\n"
        return out
    }

    /// `trust.expired (error): the leaf expired on ... Fix: renew the leaf. At Info.plist:12 NSAppTransportSecurity...`
    static func describe(_ finding: GateFinding) -> String {
        var line = "\(finding.id) (\(finding.severity.rawValue)): \(finding.message)"
        if let fix = finding.fix { line += " Fix: \(fix)" + (fix.hasSuffix(".") ? "" : ".") }
        let place = [finding.location.file.map { file in finding.location.line.map { "\(file):\($0)" } ?? file }, finding.location.logical]
            .compactMap { $0 }
        if !place.isEmpty { line += " At \(place.joined(separator: " "))." }
        return line
    }

    /// Seconds as the schema's SUREFIRE_TIME wants them: digits, a point and at most three decimals.
    static func seconds(_ value: Double) -> String { String(format: "%.3f", max(0, value)) }

    /// An attribute value in double quotes.
    static func quoted(_ value: String) -> String {
        "\"" + escaped(value, quotes: true) + "\""
    }

    static func text(_ value: String) -> String { escaped(value, quotes: false) }

    /// XML 1.0 escapes; characters XML 1.0 cannot hold at all (controls other than tab and line
    /// breaks) become U+FFFD.
    static func escaped(_ value: String, quotes: Bool) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"" where quotes: out += "&quot;"
            case "\n" where quotes: out += "&#10;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            case _ where scalar.value < 0x20 || (0xFFFE...0xFFFF).contains(scalar.value): out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

extension Array where Element: Hashable {
    /// The elements in order, each once.
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
