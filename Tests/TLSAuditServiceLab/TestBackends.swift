// Test support: compiled only where swift-testing is (`swift test`); a release build of the package
// (`swift build -c release`) builds this target empty.
#if canImport(Testing)
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditSQLite
import TLSAuditStore

/// The store backends `tlsaudit` registers before any command runs (`StoreBackends.registerShipped`),
/// for the suites that read configurations and open stores in this process.
public enum TestBackends {
    private static let registered: Void = {
        StoreBackends.register(PostgresBackend(sha256: Digest.sha256Hex))
        StoreBackends.register(SQLiteBackend(sha256: Digest.sha256Hex))
    }()

    /// Registers them, once.
    public static func register() { registered }
}
#endif
