import Foundation
import Testing
import TLSAuditLab
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// `scripts/package` and the Debian package it makes, installed for real (as root, with dpkg, as
/// CI runs): the unit verified where it is installed, the installed configuration checked, the
/// demo run, every man page rendered, the bash completion loaded; then purged, leaving nothing
/// behind but the state directory. The test packages the suite's own debug binary (`--binary`):
/// a release build would double CI's time; the script builds one without it.
@Suite("Debian package: install, use, purge", .serialized)
struct PackageTests {
    static let root = ServiceLab.packageRoot.path

    /// `program ARGS`, its status and output (stdout and stderr together).
    @discardableResult
    static func run(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let result = try Binary.run(arguments, program: program, environment: environment)
        return (result.status, result.stdout + result.stderr)
    }

    @Test("scripts/package makes a .deb and a tarball; dpkg -i installs it; the unit verifies, check-config passes, demo prints its table, every man page renders, the completion loads; dpkg --purge leaves no file behind")
    func installUsePurge() throws {
        #expect(geteuid() == 0, "the package test installs with dpkg: run it as root (CI does)")
        guard geteuid() == 0 else { return }
        let dpkg = try LabPrerequisite.program(["/usr/bin/dpkg"], package: "dpkg")
        let man = try LabPrerequisite.program(["/usr/bin/man"], package: "man-db")
        #expect(!FileManager.default.fileExists(atPath: "/usr/bin/tlsaudit"), "a tlsaudit is already installed: the test would replace it")
        guard !FileManager.default.fileExists(atPath: "/usr/bin/tlsaudit") else { return }

        let out = try ServiceLab.shared.workspace("package").path
        let built = try Self.run("\(Self.root)/scripts/package", ["--binary", Binary.path, "--out", out, "--fast"])
        #expect(built.status == 0, "\(built.output.suffix(3000))")
        let files = built.output.split(separator: "\n").map(String.init)
        let deb = try #require(files.first { $0.hasSuffix(".deb") && $0.hasPrefix("/") }, "\(built.output)")
        #expect(files.contains { $0.hasSuffix(".tar.gz") && FileManager.default.fileExists(atPath: $0) })

        let info = try Self.run("/usr/bin/dpkg-deb", ["--field", deb, "Depends", "Recommends"]).output
        #expect(info.contains("libssl3") && info.contains("libsqlite3-0") && info.contains("Recommends: libpq5"), "\(info)")
        #expect(!info.contains("libpq5 ("), "libpq5 is loaded only for PostgreSQL: a Recommends, not a Depends: \(info)")
        let contents = try Self.run("/usr/bin/dpkg-deb", ["--contents", deb]).output
        let installedFiles = contents.split(separator: "\n").compactMap { line -> String? in
            guard let path = line.split(separator: " ").last.map(String.init), !path.hasSuffix("/") else { return nil }
            return String(path.dropFirst())  // "./usr/bin/tlsaudit" -> "/usr/bin/tlsaudit"
        }
        #expect(installedFiles.contains("/usr/bin/tlsaudit") && installedFiles.contains("/etc/tlsaudit/tlsaudit.yaml"))

        let install = try Self.run(dpkg, ["-i", deb])
        defer { _ = try? Self.run(dpkg, ["--purge", "tlsaudit"]) }
        #expect(install.status == 0, "\(install.output)")

        let verify = try Self.run(try LabPrerequisite.program(["/usr/bin/systemd-analyze"], package: "systemd"),
                                  ["verify", "/lib/systemd/system/tlsaudit.service"])
        #expect(verify.status == 0 && !verify.output.contains("tlsaudit.service:"), "\(verify.output)")
        let check = try Self.run("/usr/bin/tlsaudit", ["check-config", "/etc/tlsaudit/tlsaudit.yaml"])
        #expect(check.status == 0, "\(check.output)")
        let demo = try Self.run("/usr/bin/tlsaudit", ["demo", "--cycles", "1"])
        #expect(demo.status == 0 && demo.output.contains("expired"), "\(demo.output.suffix(2000))")

        let pages = installedFiles.filter { $0.hasPrefix("/usr/share/man/man1/") }
        #expect(pages.count >= 20 && pages.contains("/usr/share/man/man1/tlsaudit-scan.1.gz"), "\(pages)")
        for page in pages {
            let rendered = try Self.run(man, ["-l", page], environment: ["MANPAGER": "cat", "MANWIDTH": "300"])
            let text = rendered.output.replacingOccurrences(of: "\u{2010}", with: "-")  // groff's hyphen
            #expect(rendered.status == 0 && text.count > 200, "\(page): \(String(text.prefix(500)))")
            if page.hasSuffix("tlsaudit-scan.1.gz") {
                #expect(text.contains("--enumerate") && text.contains("mozilla-intermediate"), "\(String(text.prefix(1500)))")
            }
        }
        let completion = try Self.run("/bin/bash", ["-c", "source /usr/share/bash-completion/completions/tlsaudit && complete -p tlsaudit"])
        #expect(completion.status == 0 && completion.output.contains("tlsaudit"), "\(completion.output)")

        let purge = try Self.run(dpkg, ["--purge", "tlsaudit"])
        #expect(purge.status == 0, "\(purge.output)")
        let left = installedFiles.filter { FileManager.default.fileExists(atPath: $0) }
        #expect(left.isEmpty, "left behind: \(left)")
        #expect(!FileManager.default.fileExists(atPath: "/etc/tlsaudit"), "the conffile's directory goes with purge")
    }
}
