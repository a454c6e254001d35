public import TLSAuditStore
import Foundation
import GRDB

extension SQLiteScanStore {
    /// The columns of `table`, in schema order.
    public func columns(of table: String) throws -> [String] {
        try pool.read { db in try db.columns(in: table).map(\.name) }
    }

    /// Rows in `table`.
    public func count(of table: String) throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0 }
    }

    /// Calls `body` with `table`'s rows in `order`, `batchSize` at a time, skipping the first
    /// `skip`; one read snapshot for the whole walk.
    public func forEachBatch(of table: String, columns: [String], order: String, skip: Int, batchSize: Int,
                             _ body: ([[CopiedValue]]) throws -> Void) throws {
        try pool.read { db in
            let cursor = try Row.fetchCursor(db, sql: """
                SELECT \(columns.joined(separator: ", ")) FROM \(table) ORDER BY \(order) LIMIT -1 OFFSET ?
                """, arguments: [skip])
            var batch: [[CopiedValue]] = []
            batch.reserveCapacity(batchSize)
            while let row = try cursor.next() {
                batch.append(row.databaseValues.map { value -> CopiedValue in
                    switch value.storage {
                    case .null: .null
                    case .int64(let value): .int(value)
                    case .double(let value): .double(value)
                    case .string(let value): .text(value)
                    case .blob(let data): .bytes([UInt8](data))
                    }
                })
                if batch.count == batchSize {
                    try body(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { try body(batch) }
        }
    }
}
