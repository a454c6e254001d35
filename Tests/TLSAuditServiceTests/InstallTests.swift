import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab
import TLSAuditService
import TLSAuditStore
import TLSAuditServiceLab
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// The README's install steps, run as written into a scratch root: the installed sample passes
/// `check-config`, and the unit's ExecStart line runs the service there.
@Suite("install as the README says", .serialized)
struct InstallTests {
    static let packageRoot = ServiceLab.packageRoot

    /// The `sudo install ...` lines of the README's "Installing the systemd unit" block.
    static func installLines() throws -> [String] {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "### Installing the systemd unit").dropFirst().first)
        let block = try #require(section.components(separatedBy: "```sh\n").dropFirst().first?.components(separatedBy: "```").first)
        return block.split(separator: "\n").map(String.init).filter { $0.hasPrefix("sudo install ") }
    }

    /// `line` with its comment dropped, `sudo` removed, every absolute path under `root`, and the
    /// release binary replaced by the one under test.
    static func rooted(_ line: String, root: String) -> [String] {
        let command = line.components(separatedBy: " #").first ?? line
        return command.split(separator: " ").dropFirst().map { word in
            if word == ".build/release/tlsaudit" { return Binary.path }
            return Self.isInstalled(word) ? root + word : String(word)
        }
    }

    /// The unit's `key=` line, its words rooted.
    static func unitLine(_ key: String, root: String) throws -> [String] {
        let unit = try String(contentsOf: packageRoot.appendingPathComponent("systemd/tlsaudit.service"), encoding: .utf8)
        let line = try #require(unit.split(separator: "\n").first { $0.hasPrefix(key + "=") })
        return line.dropFirst(key.count + 1).split(separator: " ").map { Self.isInstalled($0) ? root + $0 : String($0) }
    }

    /// A path the install creates (under /etc, /usr/local, /usr/share/doc, /var), not a system program.
    static func isInstalled(_ word: Substring) -> Bool {
        ["/etc/", "/usr/local/", "/usr/share/doc/", "/var/"].contains { word.hasPrefix($0) }
    }

    @Test("the README's install steps give a configuration that passes check-config and a service that starts")
    func readmeInstall() throws {
        let root = try ServiceLab.shared.workspace("install-root").path
        // What every Debian system has already.
        for directory in ["/usr/local/bin", "/etc/systemd/system", "/usr/share/doc"] {
            try FileManager.default.createDirectory(atPath: root + directory, withIntermediateDirectories: true)
        }
        let lines = try Self.installLines()
        #expect(lines.count >= 4, "\(lines)")
        for line in lines {
            let words = Self.rooted(line, root: root)
            let install = try Binary.run(Array(words.dropFirst()), program: "/usr/bin/install", directory: Self.packageRoot.path)
            #expect(install.status == 0, "\(line): \(install.stderr)")
        }
        // The unit's Documentation= is installed.
        let unit = try String(contentsOf: Self.packageRoot.appendingPathComponent("systemd/tlsaudit.service"), encoding: .utf8)
        for link in unit.split(separator: "\n").filter({ $0.hasPrefix("Documentation=") }).flatMap({ $0.dropFirst(14).split(separator: " ") }) {
            #expect(link.hasPrefix("file:"), "Documentation= points to something the install creates: \(link)")
            #expect(FileManager.default.fileExists(atPath: root + link.dropFirst(5)), "\(link) is installed")
        }

        // ExecStartPre: check-config on the installed sample (before: example-intranet-root.pem could not be read).
        let pre = try Self.unitLine("ExecStartPre", root: root)
        let check = try Binary.run(Array(pre.dropFirst()), program: pre[0])
        #expect(check.status == 0, "\(check.stderr)")

        // ExecStart, as systemd runs it: STATE_DIRECTORY set, no network (a namespace of its own:
        // the sample's example.com targets must not be looked up for real).
        let state = root + "/var/lib/tlsaudit"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let start = try Self.unitLine("ExecStart", root: root)
        let log = URL(fileURLWithPath: root).appendingPathComponent("service.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let service = ChildProcess()
        try LabPrerequisite.root(for: "starts the service in a network namespace of its own (unshare --net)")
        service.executableURL = URL(fileURLWithPath: try LabPrerequisite.program(["/usr/bin/unshare"], package: "util-linux"))
        service.arguments = ["--net", "--", "/usr/bin/env", "STATE_DIRECTORY=\(state)"] + start
        service.standardError = try FileHandle(forWritingTo: log)
        service.standardOutput = FileHandle.nullDevice
        try service.run()
        defer { service.signal(SIGKILL); service.waitUntilExit() }
        let deadline = Date().addingTimeInterval(20)
        var text = ""
        while Date() < deadline {
            text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if text.contains("scheduler started") || !service.isRunning { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(text.contains("scheduler started"), "\(text.suffix(2000))")
        Thread.sleep(forTimeInterval: 1)
        service.signal(SIGTERM)
        service.waitUntilExit()
        #expect(service.terminationStatus == 0, "\(text.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: state + "/tlsaudit.sqlite"), "the database is in the state directory")

        // What the operator does next, as the README says: edit the targets (here a loopback
        // server, so nothing leaves the machine), check, run the service, read status, history,
        // alerts and the report, every command given the installed configuration.
        let server = try ServiceLab.shared.goodServer()
        defer { server.stop() }
        let installed = root + ServiceConfiguration.installedPath
        var sample = try String(contentsOfFile: installed, encoding: .utf8)
        sample = sample.components(separatedBy: "\ngroups:\n").first! + """

            targets:
              - {host: \(ServiceLab.hostname), port: \(server.port), name: api, addresses: [127.0.0.1], trust: {ca_file: \(ServiceLab.shared.rootFile)}}

            """
        try sample.write(toFile: installed, atomically: true, encoding: .utf8)
        let env = ["STATE_DIRECTORY": state]
        #expect(try Binary.run(Array(pre.dropFirst()), program: pre[0]).status == 0)
        let edited = try ServiceProcess(config: installed, workspace: URL(fileURLWithPath: root), environment: env)
        edited.wait("scans of the edited target") { edited.storedScans.count >= 1 }
        edited.signal(SIGTERM)
        #expect(edited.waitForExit(timeout: 15) == 0)
        for command in [["status"], ["history", "api"], ["alerts"], ["report"], ["report", "--format", "html", "--out", root + "/report.html"]] {
            let output = try Binary.run(command + ["--config", installed], directory: root, environment: env)
            #expect(output.status == 0, "\(command): \(output.stderr)\(output.stdout.prefix(500))")
        }
        #expect(FileManager.default.fileExists(atPath: root + "/report.html"))
    }

    @Test("serve and every reading command resolve a relative database the same way, from any working directory")
    func oneDatabase() throws {
        let server = try ServiceLab.shared.goodServer()
        defer { server.stop() }
        let workspace = try ServiceLab.shared.workspace("one-database")
        let configDirectory = workspace.appendingPathComponent("etc")
        try FileManager.default.createDirectory(at: configDirectory, withIntermediateDirectories: true)
        let config = configDirectory.appendingPathComponent("tlsaudit.yaml").path
        try ServiceLab.shared.configuration(database: "history.sqlite", targets: [("one", server.port)], interval: "200ms")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let elsewhere = workspace.appendingPathComponent("cwd").path
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let check = try Binary.run(["check-config", config], directory: elsewhere)
        #expect(check.stdout.contains("database \(configDirectory.path)/history.sqlite"), "\(check.stdout)")
        let service = try ServiceProcess(config: config, workspace: workspace)
        service.wait("scans") { service.storedScans.count >= 2 }
        service.signal(SIGTERM)
        #expect(service.waitForExit(timeout: 15) == 0)
        // Before: `report --config` looked in the working directory and said "no database".
        for command in [["status"], ["history", "one"], ["alerts"], ["report"]] {
            let output = try Binary.run(command + ["--config", config], directory: elsewhere)
            #expect(output.status == 0 || (command == ["status"] && output.status <= 1), "\(command): \(output.stderr)")
            #expect(!output.stderr.contains("no database"), "\(command): \(output.stderr)")
        }
    }
}
