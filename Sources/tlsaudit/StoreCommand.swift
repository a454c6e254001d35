import ArgumentParser
import Foundation
import TLSAuditPostgres
import TLSAuditProbe
import TLSAuditService
import TLSAuditStore
import TLSAuditSQLite

/// `tlsaudit store`: moving history between stores.
struct StoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Move scan history between stores.",
        subcommands: [Copy.self]
    )

    struct Copy: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "copy",
            abstract: "Copy everything a SQLite store holds into PostgreSQL (certificates, observations, verdicts, alerts, report runs).",
            discussion: """
                The destination must be empty, or hold an earlier, interrupted copy of the same file: run the \
                command again and it goes on after the rows already copied. Stop the service writing the file \
                first, and start the fleet's nodes after the copy. At the end every table's rows are counted on \
                both sides. Exit 0 copied and counts equal, 1 counts differ, 2 a store cannot be read or written \
                (or the destination holds other data).
                """
        ).parsedDirectly(under: "tlsaudit store")

        @Option(help: "The SQLite file to copy from.")
        var from: String

        @Option(help: "The postgres:// URL to copy to.")
        var to: String

        @Option(help: "Rows per INSERT and transaction.")
        var batch: Int = 500

        func run() throws {
            guard (1...2000).contains(batch) else {
                StandardStream.error.write("tlsaudit: --batch must be from 1 to 2000\n")
                throw ExitCode(64)
            }
            let source: SQLiteScanStore
            let destination: PostgresScanStore
            let sourcePath = URL(fileURLWithPath: from).standardizedFileURL.path
            do {
                guard FileManager.default.fileExists(atPath: sourcePath) else {
                    throw StoreError(.unavailable, "\(sourcePath) does not exist")
                }
                source = try SQLiteScanStore(path: sourcePath, create: false, sha256: Digest.sha256Hex)
                guard let settings = (try StoreBackends.location(to) as? PostgresLocation)?.settings else {
                    throw StoreError(.unavailable, "--to must be a postgres:// URL")
                }
                destination = try PostgresScanStore(settings, sha256: Digest.sha256Hex)
            } catch {
                StandardStream.error.write("tlsaudit: \(error)\n")
                throw ExitCode(2)
            }
            do {
                let state = try destination.copyState(from: sourcePath)
                // A resumed copy continues after the rows there: only rows of this copy may be there.
                if state == nil, let occupied = try CopiedTables.all.first(where: { try destination.count(of: $0.name) > 0 }) {
                    StandardStream.error.write("""
                        tlsaudit: \(destination.displayLocation) already holds scans that are not a copy of \(sourcePath) \
                        (table \(occupied.name) has rows); copy into an empty database, before any node uses it

                        """)
                    throw ExitCode(2)
                }
                if state == nil { try destination.markCopy(from: sourcePath, finished: false) }
                let started = Date()
                var mismatched: [String] = []
                for table in CopiedTables.all {
                    let here = Set(try destination.columns(of: table.name))
                    let columns = try source.columns(of: table.name).filter { here.contains($0) }
                    let total = try source.count(of: table.name)
                    let already = try destination.count(of: table.name)
                    var copied = 0
                    if already < total {
                        try source.forEachBatch(of: table.name, columns: columns, order: table.order, skip: already,
                                                batchSize: batch) { rows in
                            try destination.insertCopied(rows, into: table.name, columns: columns)
                            copied += rows.count
                        }
                    }
                    let count = try destination.count(of: table.name)
                    if count != total { mismatched.append("\(table.name): \(total) in the file, \(count) in PostgreSQL") }
                    StandardStream.output.write("\(table.name): \(total) row(s)\(already > 0 ? ", \(already) there already" : ""), \(copied) copied\(count == total ? "" : ", COUNT DIFFERS: \(count) in PostgreSQL")\n")
                }
                try destination.finishCopy()
                guard mismatched.isEmpty else {
                    StandardStream.error.write("tlsaudit: the counts differ after the copy:\n" + mismatched.joined(separator: "\n") + "\n")
                    throw ExitCode(1)
                }
                try destination.markCopy(from: sourcePath, finished: true)
                StandardStream.output.write("copied \(sourcePath) to \(destination.displayLocation) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s; every table's count matches\n")
            } catch let exit as ExitCode {
                throw exit
            } catch {
                StandardStream.error.write("tlsaudit: the copy stopped: \(error); run the same command again to go on\n")
                throw ExitCode(2)
            }
        }
    }
}
