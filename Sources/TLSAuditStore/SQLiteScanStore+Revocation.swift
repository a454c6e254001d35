public import Foundation
import GRDB

extension SQLiteScanStore {
    public func revocationAnswer(for key: String, at time: Date) throws -> (body: [UInt8], expires: Date)? {
        do {
            return try pool.read { db in
                try Row.fetchOne(db.cachedStatement(sql: "SELECT body, expires_at FROM revocation_answer WHERE key = ? AND expires_at > ?"),
                                 arguments: [key, time.timeIntervalSince1970]).map { row in
                    (Array(row["body"] as Data), Date(timeIntervalSince1970: row["expires_at"]))
                }
            }
        } catch {
            throw Self.storeError(error, doing: "reading a revocation answer")
        }
    }

    public func saveRevocationAnswer(_ body: [UInt8], for key: String, expires: Date) throws {
        do {
            try pool.write { db in
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO revocation_answer (key, body, expires_at) VALUES (?, ?, ?)")
                    .execute(arguments: [key, Data(body), expires.timeIntervalSince1970])
                // Expired answers are never read again: drop them as new ones arrive.
                try db.cachedStatement(sql: "DELETE FROM revocation_answer WHERE expires_at <= ?")
                    .execute(arguments: [Date().timeIntervalSince1970])
            }
        } catch {
            throw Self.storeError(error, doing: "storing a revocation answer")
        }
    }
}
