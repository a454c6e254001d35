import Foundation

/// Where the CT follower stands in each log (`ct_log`), one row a log.
extension StoreEngine {
    func ctLogStates() throws -> [CTLogState] {
        try database.read(doing: "reading the CT logs' positions", snapshot: false) { sql in
            try sql.rows("SELECT log_id, position, problem, updated_at FROM ct_log ORDER BY log_id", []) { row in
                CTLogState(logID: row.text(0) ?? "", position: row.text(1) ?? "", problem: row.text(2),
                           updatedAt: Date(timeIntervalSince1970: row.double(3) ?? 0))
            }
        }
    }

    func saveCTLogState(_ state: CTLogState) throws {
        try database.write(doing: "storing a CT log's position") { sql in
            try sql.execute("""
                INSERT INTO ct_log (log_id, position, problem, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (log_id) DO UPDATE SET position = excluded.position, problem = excluded.problem, updated_at = excluded.updated_at
                """, [.text(state.logID), .text(state.position), .of(state.problem), .time(state.updatedAt)])
        }
    }
}
