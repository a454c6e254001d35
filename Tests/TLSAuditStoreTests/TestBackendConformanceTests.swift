import Foundation
import Testing
import TLSAuditModel
import TLSAuditProbe
import TLSAuditSQLite
import TLSAuditStore
import TLSAuditStoreConformance

/// A backend defined here, as a new one would be (a `StoreBackend` and its `StoreLocation`), under
/// a URL scheme of its own: SQLite files on tmpfs (`/dev/shm`, in memory), named
/// `test-shm://NAME`. It reaches its stores only through `StoreBackends`, the registry the
/// service and the commands use, and passes the conformance suite: the seam holds for a backend
/// tlsaudit does not ship.
struct TmpfsSQLiteBackend: StoreBackend {
    static let scheme = "test-shm://"
    static let directory: URL = {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
        let directory = base.appendingPathComponent("tlsaudit-test-backend-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: TmpfsSQLiteBackend.directory) }
        return directory
    }()

    var name: String { "test tmpfs SQLite" }

    func claims(_ text: String) -> Bool { text.hasPrefix(Self.scheme) }

    func location(_ text: String) throws(StoreError) -> any StoreLocation {
        let name = String(text.dropFirst(Self.scheme.count))
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
            throw StoreError(.unavailable, "\(text): a name of letters, digits and dashes after \(Self.scheme)")
        }
        return Location(name: name)
    }

    struct Location: StoreLocation {
        var name: String
        var path: String { TmpfsSQLiteBackend.directory.appendingPathComponent("\(name).sqlite").path }
        var display: String { TmpfsSQLiteBackend.scheme + name }
        func open(create: Bool) throws -> any ScanStore { try SQLiteScanStore(path: path, create: create, sha256: Digest.sha256Hex) }
        func testConnection() throws -> String { "\(display): tmpfs" }
        var checkBeforeFirstCommit: (name: String, run: @Sendable () throws -> Void)? { nil }
        var offersFleet: Bool { false }
        func fleet(node: String, vantage: String) -> (any FleetCoordinator)? { nil }
        func watchServers(_ onChange: @escaping @Sendable (DatabaseServer, DatabaseServer?) -> Void) {}
        func spillBase(stateDirectory: String) -> String { path }
    }
}

extension TmpfsSQLiteBackend {
    /// The conformance suite over it, registered first (again: the registry replaces it).
    static var registered: StoreConformance {
        StoreBackends.register(TmpfsSQLiteBackend())
        return StoreConformance(open: { try StoreBackends.location($0).open() }, newLocation: { scheme + UUID().uuidString })
    }
}

@Suite("store backends: the registry")
struct StoreBackendRegistryTests {
    init() { StoreBackends.register(TmpfsSQLiteBackend()) }

    @Test("the registry hands a backend's scheme to it, and refuses a scheme no backend takes and a name its backend refuses")
    func registry() throws {
        let location = try StoreBackends.location(TmpfsSQLiteBackend.scheme + "one")
        #expect(location.display == "test-shm://one")
        #expect(StoreBackends.backend(of: "test-shm://one")?.name == "test tmpfs SQLite")
        #expect(throws: StoreError.self) { try StoreBackends.location("nosuch://x") }
        #expect(throws: StoreError.self) { try StoreBackends.location(TmpfsSQLiteBackend.scheme + "../escape") }
    }
}
