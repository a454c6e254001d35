import Testing
import TLSAuditStoreConformance

/// The backends the suite runs on: SQLite, PostgreSQL (a real server), and a backend this test
/// target defines and reaches only through the registry (`TmpfsSQLiteBackend`).
enum ConformanceBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite = "SQLite"
    case postgres = "PostgreSQL"
    case testBackend = "test-shm://, a test backend through the registry"

    var testDescription: String { rawValue }

    var suite: StoreConformance {
        switch self {
        case .sqlite: StoreConformance.sqlite
        case .postgres: StoreConformance.postgres
        case .testBackend:
            TmpfsSQLiteBackend.registered
        }
    }
}

/// Every backend, the same cases, one at a time (PostgreSQL's cases share one server with `PostgresBackendTests`).
@Suite("store conformance: every backend", .serialized)
struct StoreConformanceTests {
    @Test("durability: what record returned is there after the store is closed and opened again, whole", arguments: ConformanceBackend.allCases)
    func durability(_ backend: ConformanceBackend) throws { try backend.suite.durability() }

    @Test("transactions: a reader beside the writer never sees part of a batch", arguments: ConformanceBackend.allCases)
    func transactions(_ backend: ConformanceBackend) throws { try backend.suite.atomicBatchesBesideAReader() }

    @Test("retention: old scans go, each address's latest stays", arguments: ConformanceBackend.allCases)
    func retention(_ backend: ConformanceBackend) throws { try backend.suite.retention() }

    @Test("alert outbox: stored once, claimed under a lease with an epoch, a stale claim records nothing, retried, delivered", arguments: ConformanceBackend.allCases)
    func alertOutbox(_ backend: ConformanceBackend) throws { try backend.suite.alertOutbox() }

    @Test("report runs: one claim per run, its owner may claim again, a stale claim's record is refused, a run lease expires", arguments: ConformanceBackend.allCases)
    func reportRuns(_ backend: ConformanceBackend) throws { try backend.suite.reportRuns() }

    @Test("revocation answers: kept until they expire, replaced by a newer one", arguments: ConformanceBackend.allCases)
    func revocationAnswers(_ backend: ConformanceBackend) throws { try backend.suite.revocationAnswers() }

    @Test("CT logs' positions: kept per log, replaced, read back after the store is opened again", arguments: ConformanceBackend.allCases)
    func ctLogStates(_ backend: ConformanceBackend) throws { try backend.suite.ctLogStates() }

    @Test("tags and app: a target's tags and its scan's app outcome are read back by status, results and reports", arguments: ConformanceBackend.allCases)
    func tagsAndApp(_ backend: ConformanceBackend) throws { try backend.suite.tagsAndApp() }

    @Test("runs: a late scan with another verdict inside a run turns the timeline there and back at the next repeat", arguments: ConformanceBackend.allCases)
    func lateScanInsideARun(_ backend: ConformanceBackend) throws { try backend.suite.lateScanInsideARun() }

    @Test("clock steps: scans taken while the wall clock stood behind follow the newest in history, runs and the timeline", arguments: ConformanceBackend.allCases)
    func clockStepBackHistory(_ backend: ConformanceBackend) throws { try backend.suite.clockStepBackHistory() }
}
