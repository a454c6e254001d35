/// The bounds every scan record keeps, whatever a server sends: a hostile chain (thousands of
/// names, name constraints, certificates) costs at most this much output, memory and storage per
/// scan. `verify`, `scan`, the service, the store, `history` and reports all apply the same
/// budget (README, "How it behaves").
public enum RecordBudget {
    /// UTF-8 bytes of one finding message, path-building detail or failure message.
    public static let messageBytes = 1_000
    /// Names (SANs, constraints, certificates) quoted in one message; the rest are counted.
    public static let namesQuoted = 5
    /// Findings kept per address; beyond it the least severe are dropped and counted.
    public static let findings = 40
    /// Path-building issues kept per address (OpenSSL reports one per error and depth).
    public static let pathIssues = 40
    /// Certificates of the presented chain kept per scan; the built path is kept whole.
    public static let presentedCertificates = 16
    /// Bytes of one stored scan (observation, verdict and certificate references; certificates
    /// themselves are stored once by fingerprint, outside the budget).
    public static let recordBytes = 64 * 1024
    /// Pairs of (name, IP constraint) compared for one certificate: beyond it the chain is not
    /// trusted (OpenSSL refuses such a chain as well). DNS subtrees are indexed, not compared pairwise.
    public static let nameConstraintComparisons = 1 << 20

    /// `items` joined for a message: the first `namesQuoted`, then how many more.
    /// `["a", "b", ..., 1,500 names]` gives `a, b, c, d, e and 1,495 more`.
    public static func list(_ items: [String], limit: Int = namesQuoted, separator: String = ", ") -> String {
        let quoted = items.prefix(limit).map { clamp($0, to: 200) }.joined(separator: separator)
        let rest = items.count - min(items.count, limit)
        return rest > 0 ? "\(quoted) and \(rest.grouped) more" : quoted
    }

    /// Every one of `items` that fits in one message (its UTF-8 bytes, leaving room for the
    /// sentence around it), then how many more: `a, b, c and 12 more`; all of them when they fit.
    public static func listWithinMessage(_ items: [String], budget: Int = messageBytes - 250) -> String {
        var quoted: [String] = []
        var bytes = 0
        for item in items {
            let name = clamp(item, to: 200)
            let cost = name.utf8.count + (quoted.isEmpty ? 0 : 2)
            guard bytes + cost <= budget else { break }
            quoted.append(name)
            bytes += cost
        }
        let rest = items.count - quoted.count
        return rest > 0 ? "\(quoted.joined(separator: ", ")) and \(rest.grouped) more" : quoted.joined(separator: ", ")
    }

    /// `text` cut to at most `limit` UTF-8 bytes, at a Unicode scalar boundary, saying how much
    /// was cut. Bytes, not characters: a server chooses these strings, and one "character" can
    /// carry thousands of combining marks.
    public static func clamp(_ text: String, to limit: Int = messageBytes) -> String {
        guard text.utf8.count > limit else { return text }
        let marker = " [... \((text.utf8.count - limit).grouped) more bytes]"
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            let size = String(scalar).utf8.count
            guard bytes + size <= max(0, limit - marker.utf8.count) else { break }
            kept.append(scalar)
            bytes += size
        }
        return String(kept) + marker
    }

    /// The bytes `text` takes as a JSON string (quotes and escapes included).
    static func jsonBytes(_ text: String) -> Int {
        // By UTF-8 byte: a scalar's bytes beyond ASCII are all >= 0x80, each written as itself.
        text.utf8.reduce(2) { total, byte in
            switch byte {
            case 0..<0x20: total + 6
            case 0x22, 0x5C: total + 2
            default: total + 1
            }
        }
    }
}

extension Int {
    /// Thousands separated by commas (1,500), independent of the locale.
    package var grouped: String {
        let digits = String(magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return self < 0 ? "-" + grouped : grouped
    }
}

extension Finding {
    /// A finding noting what the budget left out of this record.
    static func overBudget(_ message: String) -> Finding {
        Finding(.chainOversized, .warning, message)
    }
}

extension AddressScanResult {
    /// This result within `RecordBudget`: long messages clamped, the presented chain, path issues
    /// and findings capped, with a `chain.oversized` finding saying what was left out. Idempotent:
    /// applied when a result is made, again before it is stored, and when a stored one is read.
    public func withinBudget() -> AddressScanResult {
        var result = self
        RecordBudget.bound(chain: &result.chain, findings: &result.findings)
        if var error = result.error {
            error.message = RecordBudget.clamp(error.message)
            result.error = error
        }
        if var pin = result.pin {
            pin.message = RecordBudget.clamp(pin.message)
            result.pin = pin
        }
        result.atsClientRefusal = result.atsClientRefusal.map { RecordBudget.clamp($0) }
        result.checkReports = result.checkReports?.mapValues { report in
            var report = report
            report.findings = RecordBudget.capFindings(report.findings, notes: [])
            return report
        }
        if RecordBudget.estimatedBytes(result) > RecordBudget.recordBytes {
            let short = RecordBudget.shortMessageBytes
            result.findings = RecordBudget.capFindings(result.findings, notes: [
                "messages were cut to \(short) bytes to keep the record within \(RecordBudget.recordBytes / 1024) KiB",
            ], messageLimit: short)
        }
        return result
    }
}

extension RecordBudget {
    /// Caps a chain and its findings: the presented certificates, the path-building issues, the
    /// findings and their messages, noting what was left out in a `chain.oversized` finding.
    public static func bound(chain: inout ChainReport?, findings: inout [Finding]) {
        var notes: [String] = []
        if var report = chain {
            if report.presented.count > presentedCertificates {
                let bytes = report.presented.reduce(0) { $0 + $1.der.count }
                notes.append("the chain has \(report.presented.count.grouped) certificates (\(bytes.grouped) bytes); the first \(presentedCertificates) and the path are kept")
                report.presented = Array(report.presented.prefix(presentedCertificates))
                // Path elements keep their certificate; an index into the dropped part is cleared.
                for index in report.path.indices where (report.path[index].presentedIndex ?? 0) >= presentedCertificates {
                    report.path[index].presentedIndex = nil
                }
            }
            report.issues = capIssues(report.issues, notes: &notes)
            chain = report
        }
        findings = capFindings(findings, notes: notes)
    }

    /// At most `pathIssues` issues, each detail clamped.
    static func capIssues(_ issues: [PathBuildingIssue], notes: inout [String]) -> [PathBuildingIssue] {
        var kept = Array(issues.prefix(pathIssues))
        for index in kept.indices { kept[index].detail = clamp(kept[index].detail, to: 200) }
        if issues.count > pathIssues {
            notes.append("\(issues.count.grouped) path-building errors were reported; the first \(pathIssues) are kept")
        }
        return kept
    }

    /// At most `findings` findings, the most severe kept (input order otherwise), messages clamped;
    /// `notes` and the count of dropped findings go into one `chain.oversized` finding.
    static func capFindings(_ findings: [Finding], notes: [String], messageLimit: Int = messageBytes) -> [Finding] {
        var kept = findings.map { finding -> Finding in
            var finding = finding
            finding.message = clamp(finding.message, to: messageLimit)
            return finding
        }
        // A note from an earlier pass is extended, not repeated.
        let earlier = kept.firstIndex { $0.id == .chainOversized }.map { kept.remove(at: $0).message }
        var notes = notes
        let cap = RecordBudget.findings
        let room = earlier != nil || !notes.isEmpty || kept.count > cap ? cap - 1 : cap
        if kept.count > room {
            let order = kept.indices.sorted {
                kept[$0].severity != kept[$1].severity ? kept[$0].severity > kept[$1].severity : $0 < $1
            }
            let keep = Set(order.prefix(room))
            notes.append("\((kept.count - room).grouped) further finding(s) were left out")
            kept = kept.indices.filter(keep.contains).map { kept[$0] }
        }
        guard earlier != nil || !notes.isEmpty else { return kept }
        let limit = max(messageLimit, shortMessageBytes)
        let text: String
        if let earlier, notes.isEmpty {
            text = clamp(earlier, to: limit) // As it was: applying the budget again changes nothing.
        } else {
            var message = earlier.map { $0.hasSuffix(".") ? String($0.dropLast()) : $0 } ?? "Over tlsaudit's record budget"
            message += (earlier == nil ? ": " : "; ") + notes.joined(separator: "; ")
            text = clamp(message + ".", to: limit)
        }
        // After the errors and warnings, before the information.
        let position = kept.firstIndex { $0.severity < .warning } ?? kept.endIndex
        kept.insert(.overBudget(text), at: position)
        return kept
    }

    /// Message length when a record would exceed `recordBytes` with full-length messages.
    static let shortMessageBytes = 200

    /// A generous estimate of the bytes `result` takes in the store (its JSON columns and its
    /// certificate references), certificates themselves excluded.
    public static func estimatedBytes(_ result: AddressScanResult) -> Int {
        let findings = (result.findings + CheckReport.findings(of: result.checkReports)).reduce(0) { $0 + jsonBytes($1.message) + 96 }
        // A check's report is at most 16 KiB (ReportingCheck.reportBytes); most are far smaller.
        let checkReports = (result.checkReports?.count ?? 0) * 1_024
        let issues = result.chain?.issues.reduce(0) { $0 + jsonBytes($1.detail) + 96 } ?? 0
        let references = ((result.chain?.presented.count ?? 0) + (result.chain?.path.count ?? 0)) * 128
        let messages = jsonBytes(result.error?.message ?? "") + jsonBytes(result.pin?.message ?? "")
            + jsonBytes(result.atsClientRefusal ?? "")
        // The handshake, the verdict's rules and the row's own columns.
        return findings + checkReports + issues + references + messages + 4_096
    }
}
