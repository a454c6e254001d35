public import TLSAuditModel

/// One run of `app audit`, `scan`, `ats` or `verify` as a CI system reads it: a case per host,
/// target address, ATS configuration or chain, each with the findings that decide it. JUnit XML
/// (`JUnitXML`) and SARIF (`SARIFLog`) are written from it, and a baseline (`GateBaseline`) marks
/// the findings a team has accepted.
public struct GateReport: Sendable {
    /// The command, as typed: `app audit`, `scan`, `ats`, `verify`.
    public var command: String
    /// What was audited, in words (the app's path, the targets, the chain's files).
    public var subject: String
    public var toolVersion: String
    public var cases: [GateCase]

    public init(command: String, subject: String, toolVersion: String, cases: [GateCase]) {
        self.command = command
        self.subject = subject
        self.toolVersion = toolVersion
        self.cases = cases
    }

    /// Every finding with the case it belongs to.
    public var findings: [(case: GateCase, finding: GateFinding)] {
        cases.flatMap { gateCase in gateCase.findings.map { (gateCase, $0) } }
    }

    /// Marks each finding the baseline holds as known.
    public mutating func apply(_ baseline: GateBaseline) {
        for index in cases.indices {
            let name = cases[index].name
            for finding in cases[index].findings.indices {
                cases[index].findings[finding].known = baseline.fingerprints.contains(cases[index].findings[finding].fingerprint(in: name))
            }
        }
    }

    /// The exit status under a baseline: 2 when a case was not reached, 1 when a finding that
    /// fails its case is not in the baseline, 0 otherwise.
    public var exitCodeAgainstBaseline: Int32 {
        if cases.contains(where: { if case .notReached = $0.outcome { $0.counts } else { false } }) { return 2 }
        return cases.contains { $0.counts && $0.failsAgainstBaseline } ? 1 : 0
    }
}

/// One host, address, configuration or chain.
public struct GateCase: Sendable {
    public enum Outcome: Sendable, Equatable {
        /// Connects, compliant, valid.
        case passed
        /// Fails: its findings that `fails` say why.
        case failed
        /// Nothing to judge (the name does not resolve, nothing answers): the reason.
        case notReached(String)
        /// Judged but never decisive (an `ats` configuration other than the default that does not
        /// connect, a plist domain probed only to be shown): the reason.
        case informational(String)
    }

    /// `api.example.com:443`, `example.com:443 127.0.0.1`, `default`, the chain's files.
    public var name: String
    /// The JUnit class name: `tlsaudit.app-audit`, `tlsaudit.scan`, ...
    public var group: String
    public var outcome: Outcome
    /// What was seen, in one or a few lines (JUnit's system-out).
    public var detail: String
    public var findings: [GateFinding]
    public var seconds: Double?
    /// Whether the case counts for the exit status (false: a plist domain given with --probe-plist-domains).
    public var counts: Bool

    public init(name: String, group: String, outcome: Outcome, detail: String, findings: [GateFinding], seconds: Double? = nil,
                counts: Bool = true) {
        self.name = name
        self.group = group
        self.outcome = outcome
        self.detail = detail
        self.findings = findings
        self.seconds = seconds
        self.counts = counts
    }

    /// The findings that fail the case and are not in the baseline.
    public var newFailures: [GateFinding] { outcome == .failed ? findings.filter { $0.fails && !$0.known } : [] }

    /// Whether it fails once the baseline's findings are set aside (a failed case with no finding
    /// to name always does: a baseline cannot know it).
    public var failsAgainstBaseline: Bool {
        outcome == .failed && (!newFailures.isEmpty || !findings.contains(where: \.fails))
    }
}

/// One finding of a case: its id, words, fix and where it is.
public struct GateFinding: Sendable {
    public var id: String
    public var severity: Severity
    public var message: String
    /// What to change, when the command knows.
    public var fix: String?
    public var location: GateLocation
    /// What tells it from another finding of the same id, case and place (the certificate's depth
    /// in the chain, the bundle file an app finding is about), for the fingerprint.
    public var qualifier: String?
    /// It is among the reasons its case fails (a warning beside them does not).
    public var fails: Bool
    /// In the baseline: accepted before, listed but not failing.
    public var known = false

    public init(id: String, severity: Severity, message: String, fix: String? = nil, location: GateLocation = GateLocation(),
                qualifier: String? = nil, fails: Bool) {
        self.id = id
        self.severity = severity
        self.message = message
        self.fix = fix
        self.location = location
        self.qualifier = qualifier
        self.fails = fails
    }

    /// What a baseline remembers of it: its case, id, key path or target, and qualifier; not its
    /// words or line (which change with a new certificate or an edited plist without making it
    /// another finding).
    public func fingerprint(in caseName: String) -> String {
        ([caseName, id, location.logical ?? ""] + (qualifier.map { [$0] } ?? [])).joined(separator: "|")
    }
}

/// Where a finding is: a file (and line) in the repository, and a logical place (a key path of the
/// Info.plist, a target).
public struct GateLocation: Sendable, Hashable {
    /// A path as given on the command line (the Info.plist, the targets file, the chain file).
    public var file: String?
    /// 1-based, where the file is text.
    public var line: Int?
    /// `NSAppTransportSecurity.NSExceptionDomains.api.example.com.NSExceptionMinimumTLSVersion`, a target.
    public var logical: String?

    public init(file: String? = nil, line: Int? = nil, logical: String? = nil) {
        self.file = file
        self.line = line
        self.logical = logical
    }
}
