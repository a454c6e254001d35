import Foundation
import Testing
@testable import TLSAuditCore

/// The finding catalog against what the product declares (Sources/) and what docs/findings.md documents.
@Suite("finding catalog")
struct FindingCatalogTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// One id row of a table of docs/findings.md: the section it is under, and its severity cell when the table has one.
    struct DocumentedID {
        var id: String
        var anchor: String
        var severityCell: String?
    }

    /// The anchor GitHub gives a heading: lower case, punctuation other than `-` and `_` dropped, spaces as `-`.
    static func anchor(_ heading: String) -> String {
        String(heading.lowercased().compactMap { character -> Character? in
            if character == " " { return "-" }
            return character.isLetter || character.isNumber || character == "-" || character == "_" ? character : nil
        })
    }

    static func cells(_ row: String) -> [String] {
        row.trimmingCharacters(in: .whitespaces).dropFirst().dropLast().components(separatedBy: " | ")
            .map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// The headings' anchors and the id rows of every table whose first column is `id`.
    static func documented() throws -> (anchors: [String], ids: [DocumentedID]) {
        let text = try String(contentsOf: repository.appendingPathComponent("docs/findings.md"), encoding: .utf8)
        var anchors: [String] = [], ids: [DocumentedID] = []
        var header: [String]? = nil
        for line in text.components(separatedBy: "\n") {
            if line.hasPrefix("## ") {
                anchors.append(anchor(String(line.dropFirst(3))))
                header = nil
            } else if !line.hasPrefix("|") {
                header = nil
            } else if header == nil {
                header = cells(line)
            } else if let columns = header, columns.first == "id", line.hasPrefix("| `") {
                let row = cells(line)
                let severity = columns.firstIndex(of: "severity").map { row[$0] }
                ids.append(DocumentedID(id: row[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")),
                                        anchor: anchors.last ?? "", severityCell: severity))
            }
        }
        return (anchors, ids)
    }

    /// The severities a cell names, in the order it names them (`warning (soft), error (hard)`).
    static func severities(in cell: String) -> [Severity] {
        var found: [Severity] = []
        for word in cell.components(separatedBy: CharacterSet.letters.inverted) {
            if let severity = Severity(rawValue: word), !found.contains(severity) { found.append(severity) }
        }
        return found
    }

    /// Every `FindingID` constant declared under Sources/ (`static let x: FindingID = "id"`).
    static func declaredIDs() throws -> Set<String> {
        let sources = repository.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        let pattern = try NSRegularExpression(pattern: #"static let \w+: FindingID = "([^"]+)""#)
        var ids = Set<String>()
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                if let range = Range(match.range(at: 1), in: text) { ids.insert(String(text[range])) }
            }
        }
        return ids
    }

    @Test("one entry per id, each with a title; the catalog holds exactly the FindingID constants the sources declare")
    func catalogMatchesSources() throws {
        let ids = FindingCatalog.entries.map(\.id.rawValue)
        #expect(Set(ids).count == ids.count, "duplicates: \(Dictionary(grouping: ids, by: { $0 }).filter { $1.count > 1 }.keys.sorted())")
        for entry in FindingCatalog.entries {
            #expect(!entry.title.isEmpty && entry.title.count <= 60, "\(entry.id): \(entry.title)")
            #expect(FindingCatalog[entry.id] == entry)
            #expect(!entry.otherSeverities.contains(entry.severity), "\(entry.id)")
            #expect(!entry.id.isLint || entry.severities == [.warning], "\(entry.id): every lint is a warning")
        }
        let declared = try Self.declaredIDs()
        #expect(declared.count > 80, "the scan of Sources/ found the constants: \(declared.count)")
        #expect(declared.subtracting(ids).sorted() == [], "declared but not in FindingCatalog")
        #expect(Set(ids).subtracting(declared).sorted() == [], "in FindingCatalog but not declared as a FindingID constant")
    }

    @Test("docs/findings.md documents every catalog id once, under the catalog's section, with the catalog's severities; it documents no other id")
    func docsMatchCatalog() throws {
        let (anchors, documented) = try Self.documented()
        #expect(documented.count > 80, "the parser found the tables: \(documented.count) rows")
        for section in FindingSection.allCases {
            #expect(anchors.contains(section.rawValue), "docs/findings.md has a heading for #\(section.rawValue): \(anchors)")
        }
        let byID = Dictionary(grouping: documented, by: \.id)
        for entry in FindingCatalog.entries {
            let rows = byID[entry.id.rawValue] ?? []
            #expect(rows.count == 1, "\(entry.id) is documented \(rows.count) times")
            guard let row = rows.first else { continue }
            #expect(row.anchor == entry.section.rawValue, "\(entry.id) is under #\(row.anchor), the catalog says \(entry.docsAnchor)")
            let cell = try #require(row.severityCell, "\(entry.id): its table states a severity")
            let stated = Self.severities(in: cell)
            #expect(stated.first == entry.severity && Set(stated) == Set(entry.severities),
                    "\(entry.id): docs say \(cell), the catalog \(entry.severities.map(\.rawValue))")
        }
        let unknown = Set(documented.map(\.id)).subtracting(FindingCatalog.entries.map(\.id.rawValue))
        #expect(unknown.sorted() == [], "documented in docs/findings.md but not in FindingCatalog")
    }

    @Test("ats's server fixes read the catalog: the certificate concerned is named, the private-anchor form used with --ca-file")
    func atsFixesFromCatalog() {
        let keySize = Finding(.atsKeySize, .error, depth: 1, "RSA-1024")
        #expect(ATSDiagnostics.certificateFix(keySize, privateAnchors: false)
                == "reissue the CA certificate at depth 1 with an RSA key of 2048 bits or more, or an ECDSA P-256 key: RSA-1024")
        let untrusted = Finding(.trustUntrustedRoot, .error, depth: 2, "unknown root")
        #expect(ATSDiagnostics.certificateFix(untrusted, privateAnchors: true) == "use a certificate the devices trust: unknown root")
        #expect(ATSDiagnostics.certificateFix(untrusted, privateAnchors: false)?.hasPrefix("use a certificate from a publicly trusted CA") == true)
        #expect(ATSDiagnostics.certificateFix(Finding(.trustExpired, .error, "gone"), privateAnchors: false) == "renew the chain: gone")
        #expect(ATSDiagnostics.certificateFix(Finding(.atsTrust, .error, "untrusted"), privateAnchors: false) == nil)
        #expect(ATSDiagnostics.certificateFix(Finding(.trustKeyUsage, .error, depth: 1, "no keyCertSign"), privateAnchors: false)
                == "fix the certificate: no keyCertSign")
        for entry in FindingCatalog.entries {
            guard let detailed = entry.fix?.detailed(certificate: "X", privateAnchors: false) else { continue }
            #expect(!detailed.contains("{") && !detailed.hasSuffix("."), "\(entry.id): \(detailed)")
        }
    }
}
