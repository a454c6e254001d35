import Foundation
public import TLSAuditStore

extension PostgresScanStore {
    /// The columns of `table` here, in schema order.
    public func columns(of table: String) throws -> [String] {
        try pool.withConnection { connection in
            let rows = try connection.execute("""
                SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1
                ORDER BY ordinal_position
                """, [.text(table)])
            return (0..<rows.count).compactMap { rows.text($0, "column_name") }
        }
    }

    /// Rows in `table`.
    public func count(of table: String) throws -> Int {
        try pool.withConnection { Int(try $0.execute("SELECT count(*) AS n FROM \(table)").int(0, "n") ?? 0) }
    }

    /// Inserts copied rows in one transaction (rows already here are skipped: a resumed copy
    /// overlaps the last batch it wrote).
    public func insertCopied(_ rows: [[CopiedValue]], into table: String, columns: [String]) throws {
        guard !rows.isEmpty else { return }
        let width = columns.count
        let values = rows.indices.map { row in
            "(" + (0..<width).map { "$\(row * width + $0 + 1)" }.joined(separator: ", ") + ")"
        }.joined(separator: ", ")
        let parameters = rows.flatMap { row in row.map(PostgresExecutor.parameter) }
        _ = try pool.withConnection { connection in
            try connection.transaction {
                try connection.execute("INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES \(values) ON CONFLICT DO NOTHING",
                                       parameters)
            }
        }
    }

    /// After copying rows with their ids: the id sequences continue after the largest, and the
    /// planner's statistics describe what was loaded (ANALYZE).
    public func finishCopy() throws {
        try pool.withConnection { connection in
            for table in ["observation", "address_change"] {
                try connection.execute("""
                    SELECT setval(pg_get_serial_sequence('\(table)', 'id'), coalesce((SELECT max(id) FROM \(table)), 0) + 1, false)
                    """)
            }
            try connection.execute("ANALYZE")
        }
    }

    /// Where a copy from `source` stands: nil before one began, else whether it finished.
    public func copyState(from source: String) throws -> Bool? {
        try pool.withConnection { connection in
            let rows = try connection.execute("SELECT finished_at FROM store_copy WHERE source = $1", [.text(source)])
            return rows.count == 0 ? nil : rows.double(0, "finished_at") != nil
        }
    }

    /// Records that a copy from `source` began (`finished` false) or ended.
    public func markCopy(from source: String, finished: Bool) throws {
        _ = try pool.withConnection { connection in
            try connection.execute("""
                INSERT INTO store_copy (source, started_at, finished_at)
                VALUES ($1, extract(epoch FROM now()), CASE WHEN $2 THEN extract(epoch FROM now()) END)
                ON CONFLICT (source) DO UPDATE SET finished_at = EXCLUDED.finished_at
                """, [.text(source), .bool(finished)])
        }
    }
}
