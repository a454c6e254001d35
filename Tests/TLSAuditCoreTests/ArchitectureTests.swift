import Foundation
import Testing

/// docs/architecture.md's module table is the map; the sources are the territory. A module that
/// imports another module of the package the table does not allow, a module the table leaves out,
/// or an arrow the table draws that the code no longer has, fails here.
@Suite("architecture: the module table matches the imports")
struct ArchitectureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The table's rows: `| `Module` | what it is | `A`, `B` |` (an em dash for none).
    static func documentedImports() throws -> [String: Set<String>] {
        let document = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        var table: [String: Set<String>] = [:]
        for line in document.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4 else { continue }
            let module = cells[1].trimmingCharacters(in: ["`"])
            let allowed = cells[3].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: ["`"]) }
                .filter { !$0.isEmpty && $0 != "—" }
            table[module] = Set(allowed)
        }
        return table
    }

    /// The package's own modules: every directory under Sources.
    static func modules() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Sources").path).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// The package modules `module`'s Swift files import (any access level, `@_exported` too).
    static func actualImports(_ module: String, among modules: Set<String>) throws -> [String: [String]] {
        let directory = root.appendingPathComponent("Sources/\(module)")
        var found: [String: [String]] = [:]
        let pattern = try NSRegularExpression(pattern: #"^\s*(?:@[A-Za-z_]+\s+)*(?:(?:public|package|internal|private|fileprivate)\s+)?import\s+([A-Za-z_][A-Za-z0-9_]*)"#,
                                              options: [.anchorsMatchLines])
        let files = FileManager.default.enumerator(atPath: directory.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        for file in files {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let range = Range(match.range(at: 1), in: text) else { continue }
                let name = String(text[range])
                if modules.contains(name), name != module { found[name, default: []].append(file) }
            }
        }
        return found
    }

    @Test("every module of Sources has a row in docs/architecture.md, and imports exactly the modules its row allows")
    func importsMatchTheTable() throws {
        let table = try Self.documentedImports()
        let modules = try Self.modules()
        #expect(modules.count >= 17, "\(modules)")
        for module in modules {
            guard let allowed = table[module] else {
                Issue.record("docs/architecture.md has no row for module \(module)")
                continue
            }
            let imports = try Self.actualImports(module, among: Set(modules))
            for (imported, files) in imports.sorted(by: { $0.key < $1.key }) where !allowed.contains(imported) {
                Issue.record("\(module) imports \(imported) (\(files.sorted().joined(separator: ", "))), which docs/architecture.md does not allow")
            }
            for arrow in allowed.subtracting(imports.keys).sorted() {
                Issue.record("docs/architecture.md says \(module) imports \(arrow), and no file of it does: redraw the map")
            }
        }
        for documented in table.keys.sorted() where !modules.contains(documented) {
            Issue.record("docs/architecture.md has a row for \(documented), which is not a module of Sources")
        }
    }

    @Test("the check notices a forbidden import: the probe importing the judge would be reported")
    func checkerCatchesAViolation() throws {
        let table = try Self.documentedImports()
        #expect(table["TLSAuditProbe"]?.contains("TLSAuditCore") == false, "the probe must not know the judge")
        #expect(table["TLSAuditModel"] == ["TLSAuditSupport"], "the model imports no module of the package but the support module")
        #expect(table["TLSAuditSupport"] == [], "the support module imports no module of the package")
        let modules = Set(try Self.modules())
        let probe = try Self.actualImports("TLSAuditProbe", among: modules)
        #expect(probe["TLSAuditModel"] != nil, "the parser sees the probe's import of the model")
    }

    /// docs/architecture.md's "Where a new thing goes": the section a newcomer follows.
    static func whereANewThingGoes() throws -> String {
        let document = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        guard let start = document.range(of: "## Where a new thing goes") else { return "" }
        let rest = document[start.upperBound...]
        return String(rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)])
    }

    @Test("every file and directory docs/architecture.md names is there, and every Type.member its 'where a new thing goes' names as a registration or a model is declared in Sources")
    func whereANewThingGoesIsTrue() throws {
        let document = try String(contentsOf: Self.root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let paths = try NSRegularExpression(pattern: #"`((?:Sources|Tests)/[A-Za-z0-9_+./-]+)`"#)
        var named = 0
        for match in paths.matches(in: document, range: NSRange(document.startIndex..., in: document)) {
            guard let range = Range(match.range(at: 1), in: document) else { continue }
            let path = String(document[range])
            // The placeholders for the new thing itself.
            if path.contains("/New") { continue }
            named += 1
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(path).path), "docs/architecture.md names \(path), which is not there")
        }
        #expect(named >= 20, "the document names the files a change touches (\(named) found)")

        // `Type.member` in the section: a type and a member the package declares (Sources, or the
        // test support the section names), in one file.
        let section = try Self.whereANewThingGoes()
        let members = try NSRegularExpression(pattern: #"`([A-Z][A-Za-z0-9]+)\.([a-z][A-Za-z0-9]+)`"#)
        var sources: [String] = []
        for top in ["Sources", "Tests/TLSAuditStoreConformance"] {
            let directory = Self.root.appendingPathComponent(top)
            for file in FileManager.default.enumerator(atPath: directory.path)?.compactMap({ $0 as? String }).filter({ $0.hasSuffix(".swift") }) ?? [] {
                sources.append(try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8))
            }
        }
        var checked = 0
        for match in members.matches(in: section, range: NSRange(section.startIndex..., in: section)) {
            guard let type = Range(match.range(at: 1), in: section).map({ String(section[$0]) }),
                  let member = Range(match.range(at: 2), in: section).map({ String(section[$0]) }),
                  !["swift", "md", "yaml", "json", "c"].contains(member) else { continue } // a file name
            checked += 1
            let declared = sources.contains { text in
                (text.contains("struct \(type)") || text.contains("enum \(type)") || text.contains("class \(type)")
                    || text.contains("protocol \(type)") || text.contains("extension \(type)"))
                    && ["func \(member)", "var \(member)", "let \(member)", "case \(member)", "\(member)("].contains { text.contains($0) }
            }
            #expect(declared, "docs/architecture.md's 'where a new thing goes' names \(type).\(member), which the package does not declare")
        }
        #expect(checked >= 5, "the section names its registrations (\(checked) found)")
    }
}
