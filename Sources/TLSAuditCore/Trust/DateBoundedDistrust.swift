public import Foundation
import TLSAuditSupport

/// What a date-bounded distrust check needs besides the path: the table, whose rows apply, and
/// the SCT times of the leaf.
public struct DistrustCheck: Sendable {
    public var table: DistrustTable
    public var vendor: DistrustVendor
    public var sctTimes: [Date]

    public init(table: DistrustTable, vendor: DistrustVendor, sctTimes: [Date]) {
        self.table = table
        self.vendor = vendor
        self.sctTimes = sctTimes
    }

    /// The check for a chain judged under `policy` with `setting` (nil: the shipped table, only for
    /// a publicly anchored path, whose roots are the only ones the shipped rows name).
    public static func make(_ setting: DistrustSetting?, policy: CompliancePolicy, publicTrust: Bool,
                            scts: [SignedCertificateTimestamp]) -> DistrustCheck? {
        guard setting != nil || publicTrust else { return nil }
        let vendor = setting?.vendor ?? (policy.trustsAppleRoots ? .apple : .mozilla)
        return DistrustCheck(table: setting?.table ?? .shipped, vendor: vendor, sctTimes: scts.map(\.timestamp))
    }
}

/// Date-bounded distrust (docs/apple-rules.md section 9): a path that anchors in a root the vendor
/// distrusts for certificates dated after a cut-off is not trusted when the leaf is dated after it.
public enum DateBoundedDistrust {
    /// The `trust.distrusted-after-date` finding for the path, or nil.
    public static func finding(path: [CertificateSummary], check: DistrustCheck) -> Finding? {
        guard let anchor = path.last, let leaf = path.first else { return nil }
        for entry in check.table.entries where entry.vendor == check.vendor {
            guard let root = entry.roots.first(where: { $0.spkiSHA256 == anchor.spkiSHA256 }) else { continue }
            let (date, how): (Date, String) = switch entry.datedBy {
            case .notBefore: (leaf.notBefore, "its notBefore")
            case .earliestSCT:
                if let earliest = check.sctTimes.min() { (earliest, "its earliest SCT") } else { (leaf.notBefore, "its notBefore (it carries no SCT)") }
            }
            guard date > entry.distrustAfter else { continue }
            return Finding(.trustDistrustedAfterDate, .error, depth: path.count - 1,
                "\(vendorName(entry.vendor)) distrusts certificates from \(entry.operator)'s root \(root.subject) dated after \(Timestamp.format(entry.distrustAfter)), and this leaf is dated \(Timestamp.format(date)) by \(how) (announcement: \(entry.source); table: \(check.table.source)).")
        }
        return nil
    }

    static func vendorName(_ vendor: DistrustVendor) -> String {
        switch vendor {
        case .apple: "Apple"
        case .mozilla: "Mozilla"
        case .chrome: "Chrome"
        }
    }
}
