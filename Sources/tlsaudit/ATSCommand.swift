import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe
import TLSAuditSupport

/// `tlsaudit ats`: nscurl --ats-diagnostics for Linux, with the exception an app would need.
struct ATSCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ats",
        abstract: "One probe per ATS configuration, each offering what a current Apple client offers under it (default, minimum TLS versions, no forward secrecy, arbitrary loads, insecure HTTP loads and arbitrary loads with the app's own trust evaluation); then what to fix on the server and the smallest Info.plist exception, if any works.",
        discussion: "TARGET may be an http:// URL: it is judged as a plain HTTP load (blocked by default ATS, NSURLErrorDomain -1022). A failing server names the error an app logs (NSURLErrorDomain code and, where Apple's logs show one, the kCFStreamErrorDomainSSL code). Exit status: 0 a current Apple client with default ATS connects, 1 it does not (an exception or a server change is needed, or none helps), 2 no TLS server was reached: the name does not resolve, nothing answers, or what answers is not TLS (a plain HTTP server is named, with the http:// exception that would reach it), 64 usage error. With --baseline FILE (an earlier --format sarif or json output): 0 nothing new, 1 a finding not in the baseline, 2 no server was reached or the baseline could not be read; the known findings are listed as such. --format junit and sarif: docs/ci.md."
    ).parsedDirectly(under: "tlsaudit")

    @Argument(help: "The server, HOST[:PORT], or http://HOST[:PORT] for a plain HTTP load.")
    var target: String

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var deviceChain: DeviceChainOptions

    @OptionGroup var identity: ClientIdentityOptions

    @Option(help: ArgumentHelp(GateOptions.formatHelp))
    var format: GateOutputFormat = .text

    @OptionGroup var jsonStyle: JSONStyleOptions

    @OptionGroup var gate: GateOptions

    func run() throws {
        if let plain = try parsePlainHTTPTarget(target, connectTo: connection.connectTo) { return try plainHTTP(plain) }
        let parsed = try parseSingleTarget(target, connectTo: connection.connectTo, starttls: connection.starttls)
        let store = try connection.trust.store(caFile: connection.caFile, policy: .atsRuntime)
        var options = ScanOptions(timeout: connection.timeout, trustStore: store)
        try connection.trust.apply(to: &options)
        options.clientCredentials = try identity.credentials()
        options.aiaFetch = !deviceChain.noAIAFetch
        let scanner = try makeScanner(options)
        let enumerator = Enumerator(scanner: scanner)
        guard case .success(let addresses) = scanner.addresses(for: parsed), let address = addresses.first else {
            var reason = "\(parsed.displayName) has no address"
            if case .failure(let failure) = scanner.addresses(for: parsed) {
                StandardStream.error.write("tlsaudit: \(failure.description)\n")
                reason = failure.description
            }
            try notReached(reason)
        }
        let probes = enumerator.atsProbes(address, target: parsed, trustStore: store)
        if let failure = probes.noTLSServer {
            StandardStream.error.write(Self.noTLSServer(failure, target: parsed, address: address.host,
                                                        plainHTTPStatus: failure.category == .notTLS || failure.category == .closedDuringHandshake
                                                            ? enumerator.plainHTTPStatus(address, target: parsed) : nil))
            try notReached("no TLS server at \(address.host): \(failure.description)")
        }
        let diagnostics = ATSDiagnostics.judge(probes)
        let version = TLSAuditCommand.version
        try gate.finish(GateReports.ats(diagnostics, toolVersion: version), commandExit: diagnostics.exitCode, format: format,
                        json: { try jsonStyle.encoder.encodeLineSegments(diagnostics) }, text: { Self.text(diagnostics) },
                        fromJSON: { data in
                            try GateOptions.decode(ATSDiagnostics.self, data, schema: ATSDiagnostics.schemaVersion)
                                .map { GateReports.ats($0, toolVersion: version) }
                        })
    }

    /// `ats http://HOST[:PORT]`: a plain HTTP load, which default ATS blocks (NSURLErrorDomain -1022);
    /// what answers `GET /` there, and the keys that would let an app load it. Exit 1 when a server
    /// answers (an exception is needed), 2 when none does.
    func plainHTTP(_ parsed: ScanTarget) throws {
        let scanner = try TLSScanner(options: ScanOptions(timeout: connection.timeout, trustStore: try connection.trust.store(caFile: connection.caFile, policy: .atsRuntime)),
                                     judge: AddressAssessment.judge)
        let name = parsed.sni ?? parsed.host
        let status: Int?
        switch scanner.addresses(for: parsed) {
        case .success(let addresses):
            status = addresses.first.flatMap { Enumerator(scanner: scanner).plainHTTPStatus($0, target: parsed) }
        case .failure(let failure):
            StandardStream.error.write("tlsaudit: \(failure.description)\n")
            try notReached(failure.description)
        }
        let blocked = AppleLoadErrors.insecureHTTP
        let exception = ["NSExceptionAllowsInsecureHTTPLoads": "YES"]
        let answer = status.map { "GET / answered \($0)" } ?? "no HTTP server answered"
        let diagnostics = PlainHTTPDiagnostics(
            target: target, httpStatus: status, currentClients: "default ATS blocks plain http:// loads", error: blocked,
            exception: exception, infoPlist: ATSDiagnostics.plistForInsecureLoads(domain: name), exitCode: status == nil ? 2 : 1)
        let version = TLSAuditCommand.version
        try gate.finish(GateReports.atsPlainHTTP(target: target, status: status, error: blocked, toolVersion: version),
                        commandExit: diagnostics.exitCode, format: format,
                        json: { try jsonStyle.encoder.encodeLineSegments(diagnostics) },
                        text: {
                            """
                            ATS diagnostics for \(target): plain HTTP (\(answer))
                            conclusion: default ATS blocks plain http:// loads: the app logs \(blocked)
                            in the app: NSExceptionAllowsInsecureHTTPLoads = YES for \(name) (or NSAllowsArbitraryLoads) lets it load without TLS, and then anyone on the network path can read and change the traffic; serving it over HTTPS needs no exception

                            \(ATSDiagnostics.plistForInsecureLoads(domain: name))
                            """
                        },
                        fromJSON: { data in
                            try GateOptions.decode(PlainHTTPDiagnostics.self, data, schema: PlainHTTPDiagnostics.schemaVersion).map {
                                GateReports.atsPlainHTTP(target: $0.target, status: $0.httpStatus, error: $0.error, toolVersion: version)
                            }
                        })
    }

    /// `ats http://...`'s JSON document.
    struct PlainHTTPDiagnostics: Codable {
        static let schemaVersion = "tlsaudit.ats-http/1"
        var schema = Self.schemaVersion
        var target: String
        var scheme = "http"
        var httpStatus: Int?
        var currentClients: String
        var error: AppleLoadError
        var exception: [String: String]
        var infoPlist: String
        var exitCode: Int32
    }

    /// No server reached: exit 2, the reason on standard error; under `--format junit` or `sarif`
    /// (and with `--write-baseline`) the run's document still says so, as a case not reached.
    func notReached(_ reason: String) throws -> Never {
        if format == .junit || format == .sarif || gate.writeBaseline != nil {
            try gate.finish(GateReports.atsNotReached(target: target, reason: reason, toolVersion: TLSAuditCommand.version), commandExit: 2,
                            format: format, json: { [] }, text: { "" }, fromJSON: { _ in nil })
        }
        throw ExitCode(2)
    }

    /// Exit 2's message: no TLS server was reached, so no ATS setting is the question; a plain HTTP
    /// server is reached over `http://` with NSExceptionAllowsInsecureHTTPLoads.
    static func noTLSServer(_ failure: ProbeFailure, target: ScanTarget, address: String, plainHTTPStatus: Int?) -> String {
        let name = target.sni ?? target.host
        var out = "tlsaudit: no TLS server at \(target.displayName) (\(address)): \(failure.description); no ATS setting helps with that\n"
        if let plainHTTPStatus {
            let host = HostText.bracketed(name)
            out += "tlsaudit: the server speaks plain HTTP (GET / answered \(plainHTTPStatus)): an app would connect to "
                + "http://\(host):\(target.port)/ with NSExceptionAllowsInsecureHTTPLoads = YES for \(name), without TLS: "
                + "anyone on the network path can read and change the traffic\n"
        }
        return out
    }

    /// The matrix (what a current Apple client does under each configuration), then the
    /// conclusion: the server-side fix first, then the smallest app-side change.
    static func text(_ diagnostics: ATSDiagnostics) -> String {
        var out = "ATS diagnostics for \(diagnostics.target) (\(diagnostics.address)), as a current iPhone or Mac would connect"
        if let store = diagnostics.trustStore { out += " (chains judged against \(store))" }
        out += "\n"
        for result in diagnostics.configurations {
            var name = result.name
            if result.name == ATSConfigurationName.defaultATS { name += " (current Apple clients)" }
            if result.name == ATSConfigurationName.documentedList { name += " (Apple's documented suites)" }
            let mark = result.diagnostic && result.name != ATSConfigurationName.defaultATS ? "  (diagnostic)" : ""
            out += "  \(name.padding(toLength: 48, withPad: " ", startingAt: 0)) \(result.pass ? "PASS" : "FAIL")  \(result.detail)\(mark)\n"
        }
        out += "\nconclusion: \(diagnostics.currentClients)\n"
        if let error = diagnostics.error { out += "an app with default ATS logs: \(error)\n" }
        if let anchors = diagnostics.anchors { out += "anchors: \(anchors)\n" }
        let noneReason = diagnostics.clientCertificateRequired ? "the server demands a client certificate the client simulation cannot present"
            : diagnostics.oldestIosNote
        if let line = ATSDiagnostics.oldestIOSLine(diagnostics.iosClients, oldest: diagnostics.oldestConnectingIos, reason: noneReason,
                                                   newestStop: diagnostics.newestIosStop) {
            out += line + "\n"
        }
        if !diagnostics.serverFixes.isEmpty {
            out += "fix on the server:\n"
            for fix in diagnostics.serverFixes { out += "  - \(fix)\n" }
        }
        if diagnostics.exitCode != 0 { out += "in the app: \(diagnostics.appSide)\n" }
        if let evaluation = diagnostics.appTrustEvaluation {
            out += "with the app's trust evaluation: \(evaluation)\(diagnostics.appPin.map { ", pinning \($0)" } ?? "")\n"
        }
        if let plist = diagnostics.infoPlist { out += "\n" + plist }
        return out
    }
}
