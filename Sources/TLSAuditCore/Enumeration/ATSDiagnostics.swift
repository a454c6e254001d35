/// One ATS configuration an app can declare, and whether the server satisfies it.
public struct ATSConfigurationResult: Hashable, Codable, Sendable {
    /// `default`, `TLSv1.3`, `TLSv1.2`, `TLSv1.1`, `TLSv1.0`, `no-forward-secrecy`, ...
    public var name: String
    /// The Info.plist keys of this configuration (empty for the default).
    public var exception: [String: String]
    public var pass: Bool
    /// Why it fails, or what was negotiated.
    public var detail: String

    public init(name: String, exception: [String: String], pass: Bool, detail: String) {
        self.name = name
        self.exception = exception
        self.pass = pass
        self.detail = detail
    }
}

/// `tlsaudit ats`: what `nscurl --ats-diagnostics` tells on macOS, and which exception an app needs.
public struct ATSDiagnostics: Hashable, Codable, Sendable {
    public static let schemaVersion = "tlsaudit.ats/1"

    public var schema: String = schemaVersion
    public var target: String
    public var address: String
    public var configurations: [ATSConfigurationResult]
    /// With the suites current Apple clients actually offer.
    public var runtime: ATSConfigurationResult
    /// The smallest passing exception (nil: none passes, or none is needed).
    public var recommendation: String
    /// The exception keys to declare (empty: none needed).
    public var exception: [String: String]
    /// Ready to paste under NSAppTransportSecurity (nil when none is needed or none helps).
    public var infoPlist: String?
    public var exitCode: Int32

    public init(target: String, address: String, configurations: [ATSConfigurationResult], runtime: ATSConfigurationResult,
                domain: String) {
        self.target = target
        self.address = address
        self.configurations = configurations
        self.runtime = runtime
        // The stricter minimum-version lines are diagnostics, not relaxations.
        let passing = configurations.first { $0.pass && $0.name != "TLSv1.3" && $0.name != "TLSv1.2" }
        if configurations.first?.pass == true {
            recommendation = "no exception needed: the server meets default ATS"
            exception = [:]
            infoPlist = nil
            exitCode = 0
        } else if let passing, passing.name != "arbitrary-loads" {
            recommendation = "the smallest exception that works: " + passing.exception.keys.sorted().map { "\($0) = \(passing.exception[$0]!)" }.joined(separator: ", ")
            exception = passing.exception
            infoPlist = Self.plist(domain: domain, exception: passing.exception)
            exitCode = 1
        } else if let passing {
            recommendation = "only NSAllowsArbitraryLoads works: no per-domain exception makes this server acceptable"
            exception = passing.exception
            infoPlist = Self.plist(domain: domain, exception: [:], arbitraryLoads: true)
            exitCode = 1
        } else {
            recommendation = "no ATS exception helps: " + (configurations.last?.detail ?? "every configuration fails")
            exception = [:]
            infoPlist = nil
            exitCode = 1
        }
    }

    static func plist(domain: String, exception: [String: String], arbitraryLoads: Bool = false) -> String {
        if arbitraryLoads {
            return "<key>NSAppTransportSecurity</key>\n<dict>\n  <key>NSAllowsArbitraryLoads</key>\n  <true/>\n</dict>\n"
        }
        var out = "<key>NSAppTransportSecurity</key>\n<dict>\n  <key>NSExceptionDomains</key>\n  <dict>\n"
        out += "    <key>\(domain)</key>\n    <dict>\n"
        for key in exception.keys.sorted() {
            let value = exception[key]!
            out += "      <key>\(key)</key>\n"
            out += value == "NO" ? "      <false/>\n" : value == "YES" ? "      <true/>\n" : "      <string>\(value)</string>\n"
        }
        out += "    </dict>\n  </dict>\n</dict>\n"
        return out
    }
}
