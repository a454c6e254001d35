import COpenSSL
public import Foundation
import Synchronization
public import TLSAuditProbe
import TLSAuditSupport
#if canImport(Glibc)
import Glibc
#endif

/// An RFC 6962 log on a loopback port, for tests and the bench: a real Merkle tree over the
/// entries added, tree heads signed with the key of `log`, and the read API (get-sth,
/// get-sth-consistency, get-entries at most `pageSize` at a time, get-roots). A head is
/// published when the test says (`publish`), as a log publishes one per interval. Faults on
/// demand: a forked or rewound history with validly signed heads, 429 and 503 answers, garbage.
public final class LabCTLogServer: Sendable {
    /// How the log misbehaves from now on.
    public enum Fault: Sendable, Equatable {
        case none
        /// Every request answered 429, asking for 7 seconds (Retry-After).
        case rateLimited
        /// Every request answered 503.
        case unavailable
        /// Every request answered 200 with bytes that are not JSON.
        case garbage
        /// Heads published from now on are over a history whose entry `at` is another one: each
        /// head is signed, but none is consistent with a head published before.
        case fork(at: Int)
        /// get-sth answers a signed head of the first `to` entries (smaller than one already shown).
        case rewind(to: Int)
        /// get-entries serves another entry at `at` than the one its tree holds.
        case substitutedEntry(at: Int)
        /// get-entries serves entry `at` with the extra_data of entry `from` (which the tree does not cover).
        case substitutedExtraData(at: Int, from: Int)
    }

    public let log: LabCTLog
    public let port: Int
    /// Entries one get-entries answer holds at most.
    public let pageSize: Int
    private let listener: LabListener
    private let shared: Shared

    /// The log's state, shared with the listener's connection threads.
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    private struct State {
        var entries: [RawLogEntry] = []
        var leafHashes: [[UInt8]] = []
        /// The forked history's replacement, when forked.
        var forkedAt: (index: Int, entry: RawLogEntry)?
        var head: SignedTreeHead?
        var fault: Fault = .none
        var requests: [String: Int] = [:]

        func view() -> (entries: [RawLogEntry], hashes: [[UInt8]]) {
            guard let fork = forkedAt, fork.index < entries.count else { return (entries, leafHashes) }
            var entries = entries, hashes = leafHashes
            entries[fork.index] = fork.entry
            hashes[fork.index] = fork.entry.leafHash
            return (entries, hashes)
        }
    }

    public init(_ log: LabCTLog, pageSize: Int = 64) throws {
        self.log = log
        self.pageSize = pageSize
        let shared = Shared()
        listener = try LabListener(address: "127.0.0.1") { fd in
            LabListener.setTimeouts(fd, seconds: 30)
            defer { close(fd) }
            guard let request = LabWebhookReceiver.read(fd, body: false) else { return }
            let (status, body) = Self.answer(request.path, shared: shared, log: log, pageSize: pageSize)
            let reason = status == 200 ? "OK" : status == 429 ? "Too Many Requests" : status == 400 ? "Bad Request" : "Service Unavailable"
            let retryAfter = status == 429 ? "Retry-After: 7\r\n" : ""
            LabHTTPServer.respond(fd, status: status, reason: reason, headers: "Content-Type: application/json\r\n" + retryAfter, body: body)
        }
        self.shared = shared
        port = listener.port
        publish()
    }

    /// The log's base URL (what a log list's `url` holds).
    public var url: String { "http://127.0.0.1:\(port)/" }

    /// Logs `certificate` (an x509 entry) with `chain` (its issuer first); returns its index.
    @discardableResult
    public func add(_ certificate: LabCertificate, chain: [LabCertificate], at time: Date = Date()) -> Int {
        append(Self.x509Entry(certificate, chain: chain, at: time))
    }

    /// Logs the precertificate of `certificate` (issued by `issuer`, which `chain` starts with):
    /// the leaf holds the certificate's TBSCertificate and the issuer's key hash, extra_data the
    /// precertificate (the same TBSCertificate with the poison extension, signed by the issuer).
    @discardableResult
    public func addPrecertificate(_ certificate: LabCertificate, issuer: LabCertificate, chain: [LabCertificate],
                                  at time: Date = Date()) throws -> Int {
        let leaf: [UInt8] = [0, 0] + SCTVerifier.bigEndian(Self.milliseconds(time)) + [0, 1]
            + Digest.sha256(issuer.spkiDER) + Self.vector(certificate.tbsDER, 3) + [0, 0]
        let precertificate = try issuer.precertificate(of: certificate)
        let extra = Self.vector(precertificate.der, 3) + Self.vector(chain.flatMap { Self.vector($0.der, 3) }, 3)
        return append(RawLogEntry(leafInput: leaf, extraData: extra))
    }

    /// Logs raw bytes as an entry (malformed entries).
    @discardableResult
    public func addRaw(_ entry: RawLogEntry) -> Int { append(entry) }

    private func append(_ entry: RawLogEntry) -> Int {
        shared.state.withLock { state in
            state.entries.append(entry)
            state.leafHashes.append(entry.leafHash)
            return state.entries.count - 1
        }
    }

    /// Publishes a signed head over every entry so far (in the forked history when forked).
    @discardableResult
    public func publish(at time: Date = Date()) -> SignedTreeHead {
        shared.state.withLock { state in
            let hashes = state.view().hashes
            let root = MerkleTree.root(hashes[...])
            let milliseconds = Self.milliseconds(time)
            let head = SignedTreeHead(treeSize: UInt64(hashes.count), timestampMs: milliseconds, rootHash: root,
                                      signature: log.treeHeadSignature(treeSize: UInt64(hashes.count), timestampMs: milliseconds,
                                                                       rootHash: root))
            state.head = head
            return head
        }
    }

    /// Sets how the log misbehaves (`.none` to stop); a fork replaces the entry from now on.
    public func set(_ fault: Fault) {
        shared.state.withLock { state in
            state.fault = fault
            if case .fork(let index) = fault {
                precondition(index < state.entries.count, "a fork replaces an entry the log holds")
                var entry = state.entries[index]
                // The same certificate, logged a millisecond later: another leaf, another tree.
                entry.leafInput[9] &+= 1
                state.forkedAt = (index, entry)
            }
        }
    }

    /// The entries and leaf hashes as served now (the forked history when forked), and the head published.
    func snapshot() -> (entries: [RawLogEntry], hashes: [[UInt8]], head: SignedTreeHead?) {
        shared.state.withLock { state in
            let view = state.view()
            return (view.entries, view.hashes, state.head)
        }
    }

    /// Requests answered so far at `endpoint` (`get-sth`, `get-entries`, ...).
    public func requests(to endpoint: String) -> Int { shared.state.withLock { $0.requests[endpoint] ?? 0 } }

    public func stop() { listener.stop() }

    // MARK: - The API

    private static func answer(_ target: String, shared: Shared, log: LabCTLog, pageSize: Int) -> (Int, [UInt8]) {
        let parts = target.split(separator: "?", maxSplits: 1)
        let endpoint = String(parts.first?.split(separator: "/").last ?? "")
        var query: [String: UInt64] = [:]
        for pair in parts.dropFirst().first?.split(separator: "&") ?? [] {
            let field = pair.split(separator: "=", maxSplits: 1)
            if field.count == 2, let value = UInt64(field[1]) { query[String(field[0])] = value }
        }
        return shared.state.withLock { state -> (Int, [UInt8]) in
            state.requests[endpoint, default: 0] += 1
            switch state.fault {
            case .rateLimited: return (429, Array("{\"error\":\"slow down\"}".utf8))
            case .unavailable: return (503, Array("unavailable".utf8))
            case .garbage: return (200, Array("<html>\u{0}\u{1}not json".utf8))
            default: break
            }
            let (entries, hashes) = state.view()
            switch endpoint {
            case "get-sth":
                var head = state.head ?? SignedTreeHead(treeSize: 0, timestampMs: 0, rootHash: MerkleTree.emptyRoot, signature: [])
                if case .rewind(let size) = state.fault, size < Int(head.treeSize) {
                    let root = MerkleTree.root(hashes[..<size])
                    let milliseconds = head.timestampMs + 1
                    head = SignedTreeHead(treeSize: UInt64(size), timestampMs: milliseconds, rootHash: root,
                                          signature: log.treeHeadSignature(treeSize: UInt64(size), timestampMs: milliseconds, rootHash: root))
                }
                return (200, json([
                    "tree_size": head.treeSize, "timestamp": head.timestampMs,
                    "sha256_root_hash": Data(head.rootHash).base64EncodedString(),
                    "tree_head_signature": Data(head.signature).base64EncodedString(),
                ]))
            case "get-sth-consistency":
                guard let first = query["first"], let second = query["second"], first <= second, second <= UInt64(hashes.count) else {
                    return (400, Array("bad range".utf8))
                }
                let proof = MerkleTree.consistencyProof(from: Int(first), leaves: hashes[..<Int(second)])
                return (200, json(["consistency": proof.map { Data($0).base64EncodedString() }]))
            case "get-entries":
                guard let start = query["start"], let end = query["end"], start <= end, start < UInt64(entries.count) else {
                    return (400, Array("bad range".utf8))
                }
                let last = Int(min(end, UInt64(entries.count - 1), start + UInt64(pageSize) - 1))
                var served = Array(entries[Int(start)...last])
                if case .substitutedEntry(let index) = state.fault, (Int(start)...last).contains(index) {
                    served[index - Int(start)].leafInput[9] &+= 1
                }
                if case .substitutedExtraData(let index, let source) = state.fault, (Int(start)...last).contains(index),
                   entries.indices.contains(source) {
                    served[index - Int(start)].extraData = entries[source].extraData
                }
                return (200, json(["entries": served.map {
                    ["leaf_input": Data($0.leafInput).base64EncodedString(), "extra_data": Data($0.extraData).base64EncodedString()]
                }]))
            case "get-roots":
                return (200, json(["certificates": [String]()]))
            default:
                return (404, Array("not found".utf8))
            }
        }
    }

    private static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    static func x509Entry(_ certificate: LabCertificate, chain: [LabCertificate], at time: Date) -> RawLogEntry {
        let leaf: [UInt8] = [0, 0] + SCTVerifier.bigEndian(milliseconds(time)) + [0, 0] + vector(certificate.der, 3) + [0, 0]
        return RawLogEntry(leafInput: leaf, extraData: vector(chain.flatMap { vector($0.der, 3) }, 3))
    }

    private static func vector(_ bytes: [UInt8], _ width: Int) -> [UInt8] { SCTVerifier.lengthPrefixed(bytes, bytes: width) }

    private static func milliseconds(_ time: Date) -> UInt64 { UInt64(max(0, time.timeIntervalSince1970 * 1000)) }
}

extension LabCertificate {
    /// The precertificate of `certificate` (issued by this one): its TBSCertificate with the CT
    /// poison extension (critical, RFC 6962 §3.1), signed by this issuer.
    public func precertificate(of certificate: LabCertificate) throws -> LabCertificate {
        guard let copy = X509_dup(certificate.certificate.pointer) else { throw OpenSSLFailure("cannot copy the certificate") }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, self.certificate.pointer, copy, nil, nil, 0)
        guard let poison = X509V3_EXT_nconf(nil, &context, "1.3.6.1.4.1.11129.2.4.3", "critical,DER:05:00") else {
            X509_free(copy)
            throw OpenSSLFailure("cannot build the poison extension")
        }
        X509_add_ext(copy, poison, -1)
        X509_EXTENSION_free(poison)
        guard X509_sign(copy, key.pointer, EVP_sha256()) > 0 else {
            X509_free(copy)
            throw OpenSSLFailure("cannot sign the precertificate")
        }
        return LabCertificate(certificate: X509Certificate(takingOwnershipOf: copy), key: certificate.key)
    }

    /// The TBSCertificate, DER, as signed.
    public var tbsDER: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_re_X509_tbs(certificate.pointer, &out)
        guard length > 0, let out else { return [] }
        defer { tlsaudit_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// The certificate's SubjectPublicKeyInfo, DER.
    public var spkiDER: [UInt8] { certificate.spkiDER() }
}
