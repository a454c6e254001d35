public import Foundation
public import TLSAuditProbe
import TLSAuditSupport

/// The same lab log served the static-ct-api way (c2sp.org/static-ct-api): its published head as a
/// checkpoint, its tree as hash tiles, its entries as data tiles and its issuers by fingerprint,
/// written as files into a directory that nginx (Debian's package) serves. What a tiled log is:
/// static files, fetched with plain GETs, gzip when the server chooses.
public final class LabStaticCTLog: Sendable {
    public let log: LabCTLogServer
    /// The checkpoint's origin line (the submission prefix without its scheme).
    public let origin: String
    private let nginx: LabNginx

    public init(_ log: LabCTLogServer, origin: String = "ct.lab.test/static") throws {
        self.log = log
        self.origin = origin
        nginx = try LabNginx()
        try write()
    }

    /// The monitoring prefix (what a log list's `monitoring_url` holds).
    public var url: String { "http://127.0.0.1:\(nginx.port)/" }

    /// A v3 log list entry for this log (in `tiled_logs`).
    public func listEntry(state: String = "usable", since: Date = Date(timeIntervalSince1970: 1_500_000_000)) -> [String: Any] {
        var entry = log.log.listEntry(state: state, since: since)
        entry["submission_url"] = "https://\(origin)/"
        entry["monitoring_url"] = url
        entry["mmd"] = 60
        return entry
    }

    /// Publishes the lab log's head and writes its checkpoint, the tiles and issuers it needs (a
    /// fork rewrites the tiles it changes, as a log that forked would); `rewindTo` signs a
    /// checkpoint of only the first entries; `substituting` serves another entry at that index
    /// in its data tile than the tree holds.
    public func publish(rewindTo: Int? = nil, substituting: Int? = nil) throws {
        log.publish()
        try write(rewindTo: rewindTo, substituting: substituting)
    }

    private func write(rewindTo: Int? = nil, substituting: Int? = nil) throws {
        let (entries, hashes, published) = log.snapshot()
        guard var head = published else { return }
        let size = Int(head.treeSize)
        try writeTiles(Array(hashes.prefix(size)))
        // Data tiles and issuers.
        var leaves: [[UInt8]] = []
        for (index, entry) in entries.prefix(size).enumerated() {
            var served = entry
            if index == substituting { served.leafInput[9] &+= 1 }
            let parsed = try ParsedLogEntry.parse(served)
            for issuer in parsed.chain { try put("issuer/" + Digest.sha256(issuer).hex, issuer) }
            leaves.append(Array(served.leafInput.dropFirst(2)) + (parsed.precertificate ? SCTVerifier.lengthPrefixed(parsed.certificate, bytes: 3) : [])
                          + SCTVerifier.lengthPrefixed(parsed.chain.flatMap { Digest.sha256($0) }, bytes: 2))
        }
        for start in stride(from: 0, to: leaves.count, by: 256) {
            let tile = Array(leaves[start..<min(start + 256, leaves.count)])
            try put("tile/data/" + CTTileClient.tilePath(UInt64(start / 256)) + (tile.count < 256 ? ".p/\(tile.count)" : ""), tile.flatMap { $0 })
        }
        if let rewindTo, rewindTo < size {
            let rootHash = MerkleTree.root(hashes[..<rewindTo])
            head = SignedTreeHead(treeSize: UInt64(rewindTo), timestampMs: head.timestampMs + 1, rootHash: rootHash,
                                  signature: log.log.treeHeadSignature(treeSize: UInt64(rewindTo), timestampMs: head.timestampMs + 1, rootHash: rootHash))
        }
        try put("checkpoint", Array(checkpoint(head).utf8))
    }

    /// The checkpoint of `head`: origin, size, root, and the RFC 6962 note signature.
    public func checkpoint(_ head: SignedTreeHead) -> String {
        let keyID = Digest.sha256(Array(origin.utf8) + [0x0A, 0x05] + Digest.sha256(log.log.publicKey)).prefix(4)
        let signature = Array(keyID) + SCTVerifier.bigEndian(head.timestampMs) + head.signature
        return "\(origin)\n\(head.treeSize)\n\(Data(head.rootHash).base64EncodedString())\n\n"
            + "\u{2014} \(origin) \(Data(signature).base64EncodedString())\n"
    }

    /// Writes the hash tiles of a tree of `hashes` leaf hashes (no entries, no checkpoint): what a
    /// test of proofs from tiles reads. Partial tiles of earlier sizes stay, as a log keeps them.
    public func writeHashTiles(_ hashes: [[UInt8]]) throws {
        try writeTiles(hashes)
    }

    private func put(_ path: String, _ bytes: [UInt8]) throws {
        let file = URL(fileURLWithPath: nginx.root).appendingPathComponent(path)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: file)
    }

    /// Hash tiles, level by level: each level's hashes are the roots of the full tiles below.
    private func writeTiles(_ hashes: [[UInt8]]) throws {
        var level = hashes, height = 0
        while !level.isEmpty {
            try Self.tiles(of: level) { index, width, bytes in
                try put("tile/\(height)/" + CTTileClient.tilePath(UInt64(index)) + (width < 256 ? ".p/\(width)" : ""), bytes)
            }
            level = stride(from: 0, to: level.count - level.count % 256, by: 256).map { MerkleTree.root(level[$0..<$0 + 256]) }
            height += 1
        }
    }

    /// Writes `path` under the served directory (a test's garbage checkpoint, a missing tile), or removes it.
    public func replace(_ path: String, with bytes: [UInt8]?) throws {
        let file = URL(fileURLWithPath: nginx.root).appendingPathComponent(path)
        if let bytes { try put(path, bytes) } else { try FileManager.default.removeItem(at: file) }
    }

    /// The bytes served at `path` now.
    public func served(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: nginx.root).appendingPathComponent(path)))
    }

    /// Requests nginx logged for paths starting with `prefix` (`checkpoint`, `tile/data/`, `issuer/`).
    public func requests(to prefix: String) -> Int { nginx.requests(to: prefix) }

    /// Calls `body` for each tile of `hashes` (full ones, then the partial one): its index, width, bytes.
    private static func tiles(of hashes: [[UInt8]], _ body: (Int, Int, [UInt8]) throws -> Void) throws {
        for start in stride(from: 0, to: hashes.count, by: 256) {
            let tile = hashes[start..<min(start + 256, hashes.count)]
            try body(start / 256, tile.count, tile.flatMap { $0 })
        }
    }

    public func stop() { nginx.stop() }
}

/// nginx serving a directory of static files on a free loopback port (gzip for every type, as a
/// CDN in front of a tiled log may; a `NAME.gz` beside a file is sent as it is, gzip_static, which
/// lets a test send a damaged gzip), run by `LabDaemon`; its access log counts the requests.
final class LabNginx: Sendable {
    let port: Int
    private let daemon: LabDaemon
    var root: String { daemon.path("www") }

    init() throws {
        let nginx = try LabPrerequisite.program(["/usr/sbin/nginx"], package: "nginx-light")
        daemon = try LabDaemon(name: "nginx")
        port = try LabPorts.unusedPort()
        try FileManager.default.createDirectory(atPath: daemon.path("www"), withIntermediateDirectories: true)
        try daemon.write("nginx.conf", """
            daemon off;
            master_process on;
            worker_processes 1;
            pid \(daemon.path("nginx.pid"));
            error_log stderr warn;
            events { worker_connections 64; }
            http {
                access_log \(daemon.path("access.log"));
                client_body_temp_path \(daemon.path("body"));
                proxy_temp_path \(daemon.path("proxy"));
                fastcgi_temp_path \(daemon.path("fastcgi"));
                uwsgi_temp_path \(daemon.path("uwsgi"));
                scgi_temp_path \(daemon.path("scgi"));
                default_type application/octet-stream;
                gzip on;
                gzip_static on;
                gzip_types *;
                gzip_min_length 1;
                server {
                    listen 127.0.0.1:\(port);
                    root \(daemon.path("www"));
                    location / { }
                }
            }
            """)
        try daemon.start(nginx, ["-p", daemon.directory, "-c", daemon.path("nginx.conf"), "-e", "stderr"], ports: [port])
    }

    func requests(to prefix: String) -> Int {
        let log = (try? String(contentsOfFile: daemon.path("access.log"), encoding: .utf8)) ?? ""
        return log.split(separator: "\n").filter { $0.contains("\"GET /\(prefix)") }.count
    }

    func stop() { daemon.stop() }
}
