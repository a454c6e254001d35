import Testing
import TLSAuditPostgres
import TLSAuditStore

/// `postgres://` URLs as the configuration, `check-config` and every command read them: one server,
/// or a primary and its standbys as libpq takes them, with `target_session_attrs`.
@Suite("PostgreSQL URLs")
struct PostgresSettingsTests {
    @Test("several servers, as libpq takes them: each with its port (5432 when none), IPv6 in brackets, target_session_attrs kept")
    func severalServers() throws {
        let settings = try PostgresSettings.parse(url: "postgres://fleet@db1:6432,db2,[fd00::7]:5433/tlsaudit?target_session_attrs=read-write&sslmode=require")
        #expect(settings.servers == [.init(host: "db1", port: 6432), .init(host: "db2", port: 5432), .init(host: "fd00::7", port: 5433)])
        #expect(settings.host == "db1" && settings.port == 6432 && settings.database == "tlsaudit" && settings.user == "fleet")
        #expect(settings.targetSessionAttrs == "read-write" && settings.sslMode == "require")
        #expect(settings.display == "postgres://fleet@db1:6432,db2:5432,[fd00::7]:5433/tlsaudit")
        // Loopback servers only: sslmode prefer by default, as for one.
        let local = try PostgresSettings.parse(url: "postgres://fleet@127.0.0.1:5432,127.0.0.1:5433/tlsaudit?target_session_attrs=prefer-standby")
        #expect(local.sslMode == "prefer" && local.targetSessionAttrs == "prefer-standby")
        let single = try PostgresSettings.parse(url: "postgres://fleet@db1/tlsaudit")
        #expect(single.servers == [.init(host: "db1", port: 5432)] && single.targetSessionAttrs == nil && single.sslMode == "verify-full")
    }

    @Test("refused with the reason: a bad port in the list, an empty host, an unknown target_session_attrs, a password", arguments: [
        ("postgres://u@db1:99999,db2/tlsaudit", "no port from 1 to 65535"),
        ("postgres://u@db1,,db2/tlsaudit", "an empty host"),
        ("postgres://u@db1,db2/tlsaudit?target_session_attrs=writable", "target_session_attrs 'writable'"),
        ("postgres://u:secret@db1,db2/tlsaudit", "holds a password"),
    ])
    func refused(url: String, reason: String) {
        #expect {
            _ = try PostgresSettings.parse(url: url)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }
}
