/// The schema's one history, for every backend: each step's name is stored in every database's
/// migration table, so a step is never renamed, reordered or removed, only appended. Each backend
/// spells every step for its database, or says it has nothing to do there (nil: a table it does
/// not have), in the list's order (`SQLiteMigrations`, `PostgresMigrations`: checked by
/// `StoreMigration.spelled(_:)` when their list is first read).
package enum StoreMigration: String, CaseIterable, Sendable {
    case initial = "v1-initial"
    case pinState = "v2-pin-state"
    case alerts = "v3-alerts"
    case reports = "v4-reports"
    case pinCounts = "v5-pin-counts"
    case revocation = "v6-revocation"
    case fleet = "v7-fleet"
    case inventory = "v8-inventory"
    case vulnerabilities = "v9-vulnerabilities"
    case fencing = "v10-fencing"
    case anchorIn = "v11-anchor-in"
    case tagsApp = "v12-tags-app"
    case reportClaim = "v13-report-claim"
    case runs = "v14-runs"
    case clients = "v15-clients"
    case alertTarget = "v16-alert-target"
    case judgedWith = "v17-judged-with"
    case nodeServer = "v18-node-server"
    case observationOrder = "v19-observation-order"
    case checkReports = "v20-check-reports"
    case ctLogs = "v21-ct-logs"
    case ctSightings = "v22-ct-sightings"
    case ctLogLease = "v23-ct-log-lease"
    case lostLeases = "v24-lost-leases"

    /// A backend's steps in the history's order, checked: every step spelled once, in order.
    package static func spelled<Step>(_ steps: [(StoreMigration, Step)]) -> [(migration: StoreMigration, step: Step)] {
        precondition(steps.map(\.0) == allCases,
                     "a backend's migrations must spell every StoreMigration once, in order: \(steps.map(\.0.rawValue))")
        return steps.map { (migration: $0.0, step: $0.1) }
    }
}
