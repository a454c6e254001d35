import ArgumentParser
import TLSAuditStore
import TLSAuditSQLite

/// `tlsaudit-bench schema-snapshot`: Sources/TLSAuditSQLite/SQLiteSchemaSnapshot.swift, from the migrations.
struct SchemaSnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema-snapshot",
        abstract: "Print SQLiteSchemaSnapshot.swift: the schema SQLite's migrations make, for new databases (run after adding a migration).")

    func run() throws {
        print(try SQLiteSchemaSnapshot.source(), terminator: "")
    }
}
