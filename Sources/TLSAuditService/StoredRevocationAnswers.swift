import Foundation
import Logging
import Synchronization
import TLSAuditProbe
import TLSAuditStore

/// Revocation answers kept in the service's database, so that a restart does not ask every
/// responder again. Its own handle on the database, opened on first use; a store that fails is
/// logged and skipped (the answer is fetched instead), never fatal.
final class StoredRevocationAnswers: RevocationAnswerStore {
    private let open: @Sendable () throws -> any ScanStore
    private let store = Mutex<(any ScanStore)?>(nil)
    private let logger: Logger

    init(logger: Logger, open: @escaping @Sendable () throws -> any ScanStore) {
        self.open = open
        self.logger = logger
    }

    private func withStore<T>(_ what: String, _ body: (any ScanStore) throws -> T?) -> T? {
        store.withLock { store in
            do {
                if store == nil { store = try open() }
                return try body(store!)
            } catch {
                store = nil
                logger.warning("revocation answers: cannot use the database", metadata: ["doing": "\(what)", "error": "\(error)"])
                return nil
            }
        }
    }

    func revocationAnswer(for key: String, at time: Date) -> (body: [UInt8], expires: Date)? {
        withStore("reading") { try $0.revocationAnswer(for: key, at: time) }
    }

    func saveRevocationAnswer(_ body: [UInt8], for key: String, expires: Date) {
        _ = withStore("storing") { try $0.saveRevocationAnswer(body, for: key, expires: expires) }
    }
}
