import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditOutput

/// `--format` of the commands a CI pipeline gates on (`app audit`, `scan`, `ats`, `verify`): their
/// text and JSON, JUnit XML for test views, SARIF 2.1.0 for code-scanning views.
enum GateOutputFormat: String, NamedArgumentValue {
    case text
    case json
    case junit
    case sarif
}

/// `--baseline` and `--write-baseline`: only what is new fails the run.
struct GateOptions: ParsableArguments {
    @Option(help: ArgumentHelp("An earlier SARIF or JSON output of the same command: its findings are known, listed as such, and fail nothing; the exit status is 1 only for a finding not in it (2 still when a host was not reached).",
                               valueName: "file"))
    var baseline: String?

    @Option(name: .customLong("write-baseline"), help: ArgumentHelp("Also write this run's findings to FILE as SARIF, to give as --baseline later.",
                                                                     valueName: "file"))
    var writeBaseline: String?

    /// The usual `--format` help, with the CI formats.
    static let formatHelp = "Output format: \(HelpLists.values(of: GateOutputFormat.self)) (junit and sarif: one test case or result per host, address, configuration or chain; docs/ci.md)."

    /// Prints the run in `format`, applies the baseline, writes the new baseline, and exits with
    /// the command's status (`commandExit`), or under a baseline with 0, 1 for a new finding, 2 for
    /// a host not reached.
    /// - `makeGate`: the run's findings as a gate report, made only when a baseline, `--write-baseline`
    ///   or a CI format asks for it (the plain JSON or text output of a scan does not pay for it).
    /// - `json`, `text`: the command's own outputs (the JSON document in pieces, written one after the other).
    /// - `fromJSON`: the gate of an earlier JSON output of the same command (for `--baseline`), or nil when it is not one.
    func finish(_ makeGate: @autoclosure () -> GateReport, commandExit: Int32, format: GateOutputFormat, json: () throws -> [Data],
                text: () -> String, fromJSON: (Data) throws -> GateReport?) throws {
        var exitCode = commandExit
        var gate: GateReport?
        func madeGate() -> GateReport {
            if let gate { return gate }
            let made = makeGate()
            gate = made
            return made
        }
        if let baseline {
            var applied = madeGate()
            applied.apply(try Self.read(baseline: baseline, command: applied.command, fromJSON: fromJSON))
            exitCode = applied.exitCodeAgainstBaseline
            gate = applied
        }
        switch format {
        case .json: StandardStream.output.write(try json())
        case .text: StandardStream.output.write(text() + (baseline == nil ? "" : Self.baselineText(madeGate())))
        case .junit: StandardStream.output.write(JUnitXML.document(madeGate()))
        case .sarif: StandardStream.output.write(try SARIFLog.document(madeGate(), exitCode: exitCode, withBaseline: baseline != nil))
        }
        if let writeBaseline {
            do {
                try SARIFLog.document(madeGate(), exitCode: exitCode, withBaseline: false).write(to: URL(fileURLWithPath: writeBaseline), options: .atomic)
            } catch {
                StandardStream.error.write("tlsaudit: cannot write the baseline \(writeBaseline): \(error.localizedDescription)\n")
                throw ExitCode(2)
            }
        }
        if exitCode != 0 { throw ExitCode(exitCode) }
    }

    /// The fingerprints of a SARIF log, or of the command's own JSON output. Unreadable: exit 2.
    static func read(baseline path: String, command: String, fromJSON: (Data) throws -> GateReport?) throws -> GateBaseline {
        func unreadable(_ why: String) -> ExitCode {
            StandardStream.error.write("tlsaudit: --baseline \(path): \(why)\n")
            return ExitCode(2)
        }
        let bytes: [UInt8]
        do { bytes = try InputLimits.read(path, limit: InputLimits.configurationBytes * 16, what: "--baseline") } catch {
            throw unreadable(error.description)
        }
        let data = Data(bytes)
        guard let document = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw unreadable("not a JSON document (give an earlier --format sarif or --format json output)")
        }
        do {
            if let sarif = try GateBaseline.fromSARIF(document, command: command) { return sarif }
        } catch {
            throw unreadable("\(error)")
        }
        let gate: GateReport?
        do { gate = try fromJSON(data) } catch {
            throw unreadable("not an output of this command (\(document["schema"] as? String ?? "no schema"): \(error))")
        }
        guard let gate else {
            throw unreadable("not an output of this command (schema \(document["schema"] as? String ?? "none"))")
        }
        return GateBaseline(fingerprints: Set(gate.findings.map { $0.finding.fingerprint(in: $0.case.name) }))
    }

    /// The text output's last lines under a baseline: what is new, what is known.
    static func baselineText(_ gate: GateReport) -> String {
        let known = gate.findings.filter(\.finding.known)
        let new = gate.cases.flatMap { gateCase in gateCase.newFailures.map { (gateCase.name, $0.id) } }
            // A failed case with no finding to name fails under any baseline.
            + gate.cases.filter { $0.failsAgainstBaseline && $0.newFailures.isEmpty }.map { ($0.name, "failed") }
        var out = "baseline: \(new.count) new finding(s) failing, \(known.count) known\n"
        for (name, id) in new { out += "  NEW \(name): \(id)\n" }
        for (gateCase, finding) in known { out += "  known \(gateCase.name): \(finding.id)\n" }
        return out
    }

    /// A JSON output of tlsaudit with this `schema`, decoded as the commands write it; nil for another document.
    static func decode<Report: Decodable>(_ type: Report.Type, _ data: Data, schema: String) throws -> Report? {
        guard let document = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              document["schema"] as? String == schema else { return nil }
        return try JSONDecoder.tlsaudit.decode(type, from: data)
    }
}
