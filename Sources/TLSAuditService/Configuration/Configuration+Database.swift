import Foundation
import TLSAuditCore
import TLSAuditStore
import Yams
import TLSAuditSupport

/// `database: {postgres: ...}`.
extension ConfigurationParser {
    static let postgresKeys = ["host", "port", "database", "user", "password_file", "sslmode", "ca_file", "pool_size",
                               "statement_timeout"]

    /// `database: {postgres: {host, port, database, user, password_file, sslmode, ca_file, pool_size,
    /// statement_timeout}}` as the `postgres://` URL it stands for (validated the same way).
    mutating func postgresBlock(_ node: Node, _ block: Node.Mapping) -> String? {
        checkKeys(block, allowed: ["postgres"], in: "database")
        guard let inner = block["postgres"], case .mapping(let mapping) = inner else {
            report(node, "database: give a file path, a postgres:// URL, or a 'postgres:' block with host, port, database, user, password_file, sslmode, ca_file, pool_size")
            return nil
        }
        checkKeys(mapping, allowed: Self.postgresKeys, in: "database.postgres")
        guard let hostNode = mapping["host"], let host = string(hostNode, "a host name or address") else {
            report(inner, "database.postgres needs a 'host'")
            return nil
        }
        guard let databaseNode = mapping["database"], let database = string(databaseNode, "a database name") else {
            report(inner, "database.postgres needs a 'database'")
            return nil
        }
        var components = URLComponents()
        components.scheme = "postgres"
        components.host = HostText.bracketed(host)
        if let value = mapping["port"], let port = integer(value, in: SettingBounds.port.range) { components.port = port }
        if let value = mapping["user"], let user = string(value, "a user name") { components.user = user }
        components.path = "/" + database
        var query: [URLQueryItem] = []
        if let value = mapping["password_file"], let path = string(value, "a file path") {
            query.append(URLQueryItem(name: "password_file", value: absolutePath(path)))
        }
        if let value = mapping["sslmode"], let mode = string(value, "an sslmode") { query.append(URLQueryItem(name: "sslmode", value: mode)) }
        if let value = mapping["ca_file"], let path = certificateFile(value) { query.append(URLQueryItem(name: "sslrootcert", value: path)) }
        if let value = mapping["pool_size"], let size = integer(value, in: 1...64) { query.append(URLQueryItem(name: "pool_size", value: String(size))) }
        if let value = mapping["statement_timeout"], let seconds = duration(value, minimum: 0.1) {
            query.append(URLQueryItem(name: "statement_timeout", value: String(seconds)))
        }
        components.queryItems = query.isEmpty ? nil : query
        guard let url = components.string else {
            report(inner, "database.postgres: these values do not make a postgres:// URL")
            return nil
        }
        do {
            _ = try StoreBackends.location(url)
        } catch {
            report(inner, error.description)
            return nil
        }
        return url
    }
}
