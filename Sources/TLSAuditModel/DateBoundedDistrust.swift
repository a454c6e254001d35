public import Foundation
import TLSAuditSupport

/// Whose distrust decisions apply: Apple's (the Apple policies), Mozilla's (the Mozilla policies)
/// or Chrome's (selected with `--distrust-vendor chrome` / `distrust: {vendor: chrome}`).
public enum DistrustVendor: String, Codable, Sendable, CaseIterable {
    case apple, mozilla, chrome
}

/// Roots distrusted for certificates issued after a date while they stay in the stores (Entrust,
/// Chunghwa Telecom, Netlock...), one row per vendor decision, each with its announcement. The
/// shipped table is `DateBoundedDistrustSnapshot.json`; `--distrust-list FILE` or `distrust: {list:}`
/// gives another (schema: docs/apple-rules.md section 9).
public struct DistrustTable: Sendable, Hashable {
    /// How a vendor dates a certificate against the cut-off.
    public enum DatedBy: String, Codable, Sendable {
        /// The certificate's notBefore.
        case notBefore = "not-before"
        /// The earliest SCT the certificate carries (Chrome's rule); notBefore without one.
        case earliestSCT = "earliest-sct"
    }

    /// One root as the rows name it: its subject (for messages) and its key, which identifies it
    /// whatever the encoding or re-issue of the certificate.
    public struct Root: Codable, Sendable, Hashable {
        public var subject: String
        /// Base64 SHA-256 of the SubjectPublicKeyInfo (as pins and `CertificateSummary.spkiSHA256` write it).
        public var spkiSHA256: String

        enum CodingKeys: String, CodingKey { case subject, spkiSHA256 = "spki_sha256" }

        public init(subject: String, spkiSHA256: String) {
            self.subject = subject
            self.spkiSHA256 = spkiSHA256
        }
    }

    /// One vendor's decision.
    public struct Entry: Codable, Sendable, Hashable {
        public var vendor: DistrustVendor
        /// The CA operator (`Entrust`).
        public var `operator`: String
        public var roots: [Root]
        /// Certificates dated after this moment are not trusted.
        public var distrustAfter: Date
        public var datedBy: DatedBy
        /// The vendor's announcement.
        public var source: String
        /// What the row assumes where the announcement is silent (the time of day, how a certificate is dated).
        public var note: String?

        enum CodingKeys: String, CodingKey { case vendor, `operator`, roots, distrustAfter = "distrust_after", datedBy = "dated_by", source, note }
    }

    /// Where the table came from: `tlsaudit's snapshot (DATE)` or the file.
    public var source: String
    public var entries: [Entry]
    /// The table's `version`, a date (`2026-11-28`) or a date and time: when it was published.
    public var tableVersion: String?
    /// `tableVersion` read as a time, when it is one.
    public var publishedAt: Date? {
        tableVersion.flatMap { Timestamp.parse($0) ?? Timestamp.parse($0 + "T00:00:00Z") }
    }

    public init(source: String, entries: [Entry], version: String? = nil) {
        self.source = source
        self.entries = entries
        self.tableVersion = version
    }

    /// Reads a table (JSON: `{"version": ..., "entries": [...]}`).
    public static func parse(_ data: Data, source: String) throws -> DistrustTable {
        struct File: Decodable {
            var version: String?
            var entries: [Entry]
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            let file = try decoder.decode(File.self, from: data)
            return DistrustTable(source: file.version.map { "\(source) (\($0))" } ?? source, entries: file.entries, version: file.version)
        } catch {
            throw InputError("\(source) is not a distrust table: \(error)")
        }
    }

    /// Reads a table file (at most 1 MiB).
    public static func load(path: String) throws -> DistrustTable {
        let bytes = try InputLimits.read(path, limit: 1 << 20, what: "distrust table")
        return try parse(Data(bytes), source: path)
    }

    /// The table shipped with tlsaudit, read once, on first use.
    public static let shipped: DistrustTable = {
        do { return try parse(Data(DateBoundedDistrustSnapshot.json.utf8), source: "tlsaudit's snapshot") } catch {
            fatalError("the shipped distrust table does not parse: \(error)") // A test parses it.
        }
    }()
}

/// The distrust table in force and whose rows apply (nil: by the policy, Apple's or Mozilla's).
public struct DistrustSetting: Sendable, Hashable {
    public var table: DistrustTable
    public var vendor: DistrustVendor?

    public init(table: DistrustTable = .shipped, vendor: DistrustVendor? = nil) {
        self.table = table
        self.vendor = vendor
    }
}
