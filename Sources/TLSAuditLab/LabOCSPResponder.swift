public import Foundation
public import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// A real OCSP responder (`openssl ocsp -index ... -port 0`) for one issuer, started by a test,
/// one-shot responses made by the same tool (for stapling, the cache and offline checks), and
/// `openssl s_server` stapling one of them.
public final class LabOCSPResponder {
    public enum Entry {
        case good
        case revoked(reason: String)
    }

    public let directory: URL
    public let issuer: LabCertificate
    public private(set) var responder: ChildProcess?
    public private(set) var port = 0

    /// `signer`: who signs the answers (default the issuer; another CA makes them wrongly signed);
    /// `directory`: where the index, keys and responses go (created).
    public init(issuer: LabCertificate, entries: [(serial: String, entry: Entry)], signer: LabCertificate? = nil, directory: URL) throws {
        self.issuer = issuer
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try issuer.pem.write(toFile: path("ca.pem"), atomically: true, encoding: .utf8)
        let signing = signer ?? issuer
        try signing.pem.write(toFile: path("signer.pem"), atomically: true, encoding: .utf8)
        try signing.key.pem.write(toFile: path("signer.key"), atomically: true, encoding: .utf8)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyMMddHHmmss'Z'"
        let expiry = formatter.string(from: Date().addingTimeInterval(365 * 86_400))
        let revokedAt = formatter.string(from: Date().addingTimeInterval(-86_400))
        let index = entries.map { serial, entry in
            switch entry {
            case .good: "V\t\(expiry)\t\t\(serial)\tunknown\t/CN=lab\n"
            case .revoked(let reason): "R\t\(expiry)\t\(revokedAt),\(reason)\t\(serial)\tunknown\t/CN=lab\n"
            }
        }.joined()
        try index.write(toFile: path("index.txt"), atomically: true, encoding: .utf8)
    }

    public func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Starts the responder on an ephemeral port (it listens on all interfaces: the tests only
    /// ever connect to 127.0.0.1).
    public func start() throws {
        let process = try labOpenSSLProcess(["ocsp", "-index", path("index.txt"), "-port", "0", "-rsigner", path("signer.pem"),
                                             "-rkey", path("signer.key"), "-CA", path("ca.pem"), "-ndays", "1", "-ignore_err"])
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        responder = process
        var text = ""
        let reader = output.fileHandleForReading
        let deadline = Date().addingTimeInterval(10)
        while !text.contains("\n"), Date() < deadline {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        // "ACCEPT [::]:PORT PID=..."
        guard let range = text.range(of: #":(\d+) "#, options: .regularExpression),
              let number = Int(text[range].dropFirst().dropLast()) else {
            stop()
            throw LabError("openssl ocsp did not say where it listens: \(text.debugDescription)")
        }
        port = number
    }

    public var url: String { "http://127.0.0.1:\(port)/" }

    public func stop() {
        guard let responder, responder.isRunning else { return }
        Self.kill(responder)
    }

    deinit { stop() }

    /// A DER response for `certificate` made by `openssl ocsp` from the index (`days` of validity).
    public func response(for certificate: LabCertificate, days: Int = 1) throws -> [UInt8] {
        try certificate.pem.write(toFile: path("cert.pem"), atomically: true, encoding: .utf8)
        try Self.openssl(["ocsp", "-issuer", path("ca.pem"), "-cert", path("cert.pem"), "-no_nonce", "-reqout", path("req.der")])
        try Self.openssl(["ocsp", "-index", path("index.txt"), "-rsigner", path("signer.pem"), "-rkey", path("signer.key"),
                          "-CA", path("ca.pem"), "-reqin", path("req.der"), "-respout", path("resp.der"), "-ndays", "\(days)"])
        return Array(try Data(contentsOf: URL(fileURLWithPath: path("resp.der"))))
    }

    /// `openssl s_server` on a free loopback port sending `leaf` (and the issuer) with `staple`
    /// stapled, for `connections` connections (nil: until killed); the caller kills it.
    public func stapledServer(leaf: LabCertificate, staple: [UInt8], connections: Int? = nil) throws -> (server: ChildProcess, port: Int) {
        try labOpenSSLServer(chain: [leaf, issuer], staple: staple, connections: connections, directory: directory)
    }

    /// Stops a process the lab started (SIGKILL: started from a test thread, s_server may have
    /// SIGTERM blocked).
    public static func kill(_ server: ChildProcess) {
        server.signal(SIGKILL)
        server.waitUntilExit()
    }

    public static func openssl(_ arguments: [String]) throws {
        let process = try labOpenSSLProcess(arguments)
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw LabError("openssl \(arguments.joined(separator: " ")) failed") }
    }
}

/// `openssl s_server` on a free loopback port sending `chain` (leaf first), with `serverInfo`
/// (`-serverinfo`, e.g. the SCT extension) and `staple` (`-status_file`) when given, for
/// `connections` connections (nil: until killed); its files go in `directory`. The caller kills it.
public func labOpenSSLServer(chain: [LabCertificate], serverInfo: String? = nil, staple: [UInt8]? = nil, connections: Int? = 40,
                             directory: URL) throws -> (server: ChildProcess, port: Int) {
    let base = directory.appendingPathComponent("s_server-\(UUID().uuidString.prefix(8))").path
    try chain[0].pem.write(toFile: base + "-leaf.pem", atomically: true, encoding: .utf8)
    try chain[0].key.pem.write(toFile: base + "-leaf.key", atomically: true, encoding: .utf8)
    try chain.dropFirst().map(\.pem).joined().write(toFile: base + "-chain.pem", atomically: true, encoding: .utf8)
    let port = try LabPorts.unusedPort()
    var arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", base + "-leaf.pem", "-key", base + "-leaf.key", "-quiet"]
        + (connections.map { ["-naccept", "\($0)"] } ?? [])
    if chain.count > 1 { arguments += ["-cert_chain", base + "-chain.pem"] }
    if let serverInfo {
        try serverInfo.write(toFile: base + "-serverinfo.pem", atomically: true, encoding: .utf8)
        arguments += ["-serverinfo", base + "-serverinfo.pem"]
    }
    if let staple {
        try Data(staple).write(to: URL(fileURLWithPath: base + "-staple.der"))
        arguments += ["-status_file", base + "-staple.der"]
    }
    let server = try labOpenSSLProcess(arguments)
    try server.run()
    return (server, port)
}

/// `openssl ARGUMENTS`, ready to run, its output discarded (a caller that reads it sets its own).
func labOpenSSLProcess(_ arguments: [String]) throws -> ChildProcess {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: try LabPrerequisite.program(["/usr/bin/openssl"], package: "openssl"))
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    return process
}
