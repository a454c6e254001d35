// Test support: compiled only where swift-testing is (`swift test`); a release build of the package
// (`swift build -c release`) builds this target empty.
#if canImport(Testing)
public import Foundation
import TLSAuditLab

/// The service's HTTP listener as a client sees it: curl's answers and the addresses the
/// listeners bound (shared by the monitoring tests and the service tests that scrape it).
public enum ServiceHTTP {
    /// What curl got: the status code and the body.
    public struct Fetched: Sendable {
        public var status: Int
        public var body: String
    }

    /// `options`: more of curl's arguments (`-H "Host: NAME"`, `--interface 127.0.0.2`).
    public static func fetch(_ url: String, token: String? = nil, user: String? = nil, headers: Bool = false, options: [String] = []) throws -> Fetched {
        var arguments = ["-sS", "-g", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", url] + options
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        if let user { arguments += ["-u", user] }
        if headers { arguments += ["-i"] }
        let output = try Binary.run(arguments, program: "/usr/bin/curl")
        let lines = output.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return Fetched(status: Int(lines.last ?? "") ?? 0, body: lines.dropLast().joined(separator: "\n"))
    }

    /// The addresses the service's listeners said they bound (`http listener started listen=...`).
    public static func listening(_ service: ServiceProcess) -> [String] {
        service.lines(containing: "http listener started").compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("listen=") }.map { String($0.dropFirst("listen=".count)) }
        }
    }
}

/// Headless Chromium, for the pages the listener serves.
public struct HeadlessBrowser {
    public let program: String
    public let workspace: URL
    public var profiles = 0

    /// `program`: Chromium's binary; its profiles go under `workspace`.
    public init(program: String, workspace: URL) {
        self.program = program
        self.workspace = workspace
    }

    /// The DOM of `url` after `budget` ms of the page's (virtual) time: its scripts have fetched and drawn.
    public mutating func dom(_ url: String, width: Int = 1280, budget: Int = 4000, options: [String] = []) throws -> String {
        try run(width: width, height: 900, budget: budget, options + ["--dump-dom", url]).stdout
    }

    /// A screenshot of the page's first `height` pixels.
    public mutating func screenshot(_ url: String, width: Int, height: Int, to file: URL) throws -> Data {
        _ = try run(width: width, height: height, budget: 4000, ["--screenshot=\(file.path)", url])
        return try Data(contentsOf: file)
    }

    /// Headless Chromium in a fresh profile, `width` by `height` pixels.
    private mutating func run(width: Int, height: Int, budget: Int, _ arguments: [String]) throws -> Binary.Output {
        profiles += 1
        return try Binary.run(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--user-data-dir=\(workspace.path)/chromium-\(profiles)", "--window-size=\(width),\(height)",
                               "--virtual-time-budget=\(budget)"] + arguments, program: program)
    }
}

extension ServiceLab {
    /// The package's root directory (README, docs, scripts).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The report tests' fixed database and golden outputs.
    public static let reportFixtures = packageRoot.appendingPathComponent("Tests/TLSAuditReportTests/Fixtures/report")

    /// The end of the fixed database's report period.
    public static let reportFixtureEnd = "2026-11-08T00:00:00Z"

    /// `HH:MM:SS` in UTC, `offset` seconds from now (a scheduled report's time of day).
    public static func timeOfDay(_ offset: Double) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.hour, .minute, .second], from: Date().addingTimeInterval(offset))
        return String(format: "%02d:%02d:%02d", parts.hour!, parts.minute!, parts.second!)
    }
}
#endif
