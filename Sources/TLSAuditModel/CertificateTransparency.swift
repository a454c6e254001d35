public import Foundation

// MARK: - What a handshake or a certificate file showed

/// Where a signed certificate timestamp came from.
public enum SCTOrigin: String, Codable, Sendable, CaseIterable {
    /// In the leaf's SCT list extension (1.3.6.1.4.1.11129.2.4.2), signed over the precertificate.
    case embedded
    /// In the TLS signed_certificate_timestamp extension, signed over the certificate.
    case tlsExtension = "tls-extension"
    /// In the stapled OCSP response's SCT extension (1.3.6.1.4.1.11129.2.4.5), signed over the certificate.
    case ocsp
}

/// What checking an SCT's signature against the log list's key for its log id found.
public enum SCTSignatureCheck: String, Codable, Sendable {
    /// The log's key verifies the signature over the certificate (or precertificate) and the SCT's fields.
    case valid
    /// The log is known and its key does not verify the signature.
    case invalid
    /// No log of the list has this id: nothing to verify against.
    case unknownLog = "unknown-log"
    /// An embedded SCT whose issuer is not in the chain (the precertificate's signed data names the issuer's key).
    case issuerUnknown = "issuer-unknown"
}

/// One SCT as observed, with its signature checked at observation time (the log list's keys then).
public struct SignedCertificateTimestamp: Hashable, Codable, Sendable {
    /// SHA-256 of the log's public key, base64 (as log lists write it).
    public var logID: String
    public var origin: SCTOrigin
    /// When the log promised to include the certificate, in milliseconds since 1970 (the SCT's own unit).
    public var timestampMs: Int64
    public var signature: SCTSignatureCheck

    enum CodingKeys: String, CodingKey { case logID = "logId", origin, timestampMs, signature }

    public init(logID: String, origin: SCTOrigin, timestampMs: Int64, signature: SCTSignatureCheck) {
        self.logID = logID
        self.origin = origin
        self.timestampMs = timestampMs
        self.signature = signature
    }

    public var timestamp: Date { Date(timeIntervalSince1970: Double(timestampMs) / 1000) }
}

// MARK: - The log list

/// A Certificate Transparency log list in the v3 JSON schema that Apple's `current_log_list.json`
/// and Google's `log_list.json` share: operators, each with logs (RFC 6962) and tiled logs
/// (static-ct-api), each with an id, a key, a state and its start.
public struct CTLogList: Sendable {
    /// A log's state in the list, and since when.
    public enum State: String, Sendable {
        case pending, qualified, usable, readonly, retired, rejected
    }

    public struct Log: Sendable {
        public var id: String
        /// DER SubjectPublicKeyInfo of the log's key.
        public var key: [UInt8]
        public var description: String
        public var operatorName: String
        public var state: State?
        public var stateSince: Date?
        /// A static-ct-api (tiled) log rather than an RFC 6962 one.
        public var tiled: Bool
        /// Where the log is read: an RFC 6962 log's `url`, a tiled log's `monitoring_url` (nil when the list gives none).
        public var url: String?

        public init(id: String, key: [UInt8], description: String, operatorName: String, state: State?, stateSince: Date?,
                    tiled: Bool = false, url: String? = nil) {
            self.id = id
            self.key = key
            self.description = description
            self.operatorName = operatorName
            self.state = state
            self.stateSince = stateSince
            self.tiled = tiled
            self.url = url
        }

        /// Apple's "currently approved" at `time`: qualified or usable since before `time`, read-only
        /// (it was usable before), or retired after `time`.
        public func currentlyApproved(at time: Date) -> Bool {
            switch state {
            case .qualified?, .usable?: return (stateSince ?? .distantPast) <= time
            case .readonly?: return true
            case .retired?: return (stateSince ?? .distantPast) > time
            case .pending?, .rejected?, nil: return false
            }
        }

        /// Apple's "once approved" for an SCT made at `sctTime`: a retired log counts for SCTs made before it retired.
        public func onceApproved(forSCTAt sctTime: Date) -> Bool {
            state == .retired && sctTime < (stateSince ?? .distantPast)
        }
    }

    /// What a list holds, with its index.
    private final class Contents: Sendable {
        let source: String
        let logs: [Log]
        let publishedAt: Date?
        let listVersion: String?
        let byID: [String: Int]
        let keysIdentity: Int

        init(source: String, logs: [Log], publishedAt: Date?, listVersion: String?) {
            self.source = source
            self.logs = logs
            self.publishedAt = publishedAt
            self.listVersion = listVersion
            var index: [String: Int] = [:]
            var hasher = Hasher()
            for (position, log) in logs.enumerated() {
                if index[log.id] == nil { index[log.id] = position }
                hasher.combine(log.id)
                hasher.combine(log.key)
            }
            byID = index
            keysIdentity = hasher.finalize()
        }
    }

    /// The contents, made on first use: the shipped snapshot is parsed only by a run that meets an
    /// SCT or asks about the list (start-up), then shared by every copy of the list.
    private final class LazyContents: @unchecked Sendable {
        // @unchecked: `made` is read and written under `lock` only.
        private let lock = NSLock()
        private var made: Contents?
        private let make: @Sendable () -> Contents

        init(_ make: @escaping @Sendable () -> Contents) { self.make = make }
        init(ready contents: Contents) {
            made = contents
            make = { contents }
        }

        var value: Contents {
            lock.lock()
            defer { lock.unlock() }
            if let made { return made }
            let contents = make()
            made = contents
            return contents
        }
    }

    private let contents: LazyContents
    /// The source when it is known before the contents are made (the shipped snapshot's).
    private let knownSource: String?

    /// Where the list came from: `snapshot <version> (<timestamp>)` or the operator's file.
    public var source: String { knownSource ?? contents.value.source }
    public var logs: [Log] { contents.value.logs }
    /// When the list was published (`log_list_timestamp`), when it says: an SCT from a log the list
    /// does not know, made after this, is from a log newer than the list, not an unknown one.
    public var publishedAt: Date? { contents.value.publishedAt }
    /// The list's `version` (`53.34`), when it says.
    public var listVersion: String? { contents.value.listVersion }
    /// Tells lists with different logs or keys apart within this process (for caches of verifications).
    public var keysIdentity: Int { contents.value.keysIdentity }

    public init(source: String, logs: [Log], publishedAt: Date? = nil, listVersion: String? = nil) {
        contents = LazyContents(ready: Contents(source: source, logs: logs, publishedAt: publishedAt, listVersion: listVersion))
        knownSource = nil
    }

    /// A list made by `make` when first used, named `source` meanwhile.
    private init(source: String, lazily make: @escaping @Sendable () -> CTLogList) {
        contents = LazyContents { make().contents.value }
        knownSource = source
    }

    /// How `parse` names a list from `source` with `version` and `timestamp`.
    static func name(_ source: String, version: String?, timestamp: String?) -> String {
        let detail = [version.map { "version \($0)" }, timestamp].compactMap { $0 }.joined(separator: ", ")
        return detail.isEmpty ? source : "\(source) (\(detail))"
    }

    public func log(id: String) -> Log? {
        let value = contents.value
        return value.byID[id].map { value.logs[$0] }
    }

    /// Reads a v3 log list. `source` names it in output; a version and timestamp found in the file are added.
    public static func parse(_ data: Data, source: String) throws -> CTLogList {
        let file: ListFile
        do { file = try JSONDecoder().decode(ListFile.self, from: data) } catch {
            throw CTLogListError("\(source) is not a CT log list in the v3 JSON schema (\(Self.describe(error)))")
        }
        var logs: [Log] = []
        for entry in file.operators {
            for (tiled, list) in [(false, entry.logs ?? []), (true, entry.tiledLogs ?? [])] {
                for log in list {
                    guard let key = Data(base64Encoded: log.key), !key.isEmpty else {
                        throw CTLogListError("\(source): log \(log.description ?? log.logID) has a key that is not base64")
                    }
                    let (state, since) = log.state?.current ?? (nil, nil)
                    logs.append(Log(id: log.logID, key: Array(key), description: log.description ?? log.logID,
                                    operatorName: entry.name, state: state, stateSince: since.flatMap(Self.date),
                                    tiled: tiled, url: tiled ? log.monitoringURL : log.url))
                }
            }
        }
        guard !logs.isEmpty else { throw CTLogListError("\(source) lists no log") }
        return CTLogList(source: name(source, version: file.version, timestamp: file.logListTimestamp), logs: logs,
                         publishedAt: file.logListTimestamp.flatMap(Self.date), listVersion: file.version)
    }

    /// Reads a log list file (lists are some 100 KB; at most 8 MiB is read).
    public static func load(path: String) throws -> CTLogList {
        let bytes: [UInt8]
        do { bytes = try InputLimits.read(path, limit: 8 << 20, what: "CT log list") } catch {
            throw CTLogListError(error.description)
        }
        return try parse(Data(bytes), source: path)
    }

    /// `2025-05-05T12:54:12Z`, with or without fractional seconds.
    private static func date(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }

    private static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "no \(key.stringValue) at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context), DecodingError.dataCorrupted(let context):
            return "\(context.debugDescription) at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        default: return "\(error)"
        }
    }

    private struct ListFile: Decodable {
        var version: String?
        var logListTimestamp: String?
        var operators: [Operator]
        enum CodingKeys: String, CodingKey { case version, logListTimestamp = "log_list_timestamp", operators }
    }

    private struct Operator: Decodable {
        var name: String
        var logs: [LogEntry]?
        var tiledLogs: [LogEntry]?
        enum CodingKeys: String, CodingKey { case name, logs, tiledLogs = "tiled_logs" }
    }

    private struct LogEntry: Decodable {
        var description: String?
        var logID: String
        var key: String
        var state: StateEntry?
        /// Decoded so that a list with a malformed interval is refused; which certificates a temporal
        /// shard accepts is not checked.
        var temporalInterval: Interval?
        var url: String?
        var monitoringURL: String?
        enum CodingKeys: String, CodingKey {
            case description, logID = "log_id", key, state, temporalInterval = "temporal_interval", url, monitoringURL = "monitoring_url"
        }
    }

    private struct Interval: Decodable {
        var startInclusive: String
        var endExclusive: String
        enum CodingKeys: String, CodingKey { case startInclusive = "start_inclusive", endExclusive = "end_exclusive" }
    }

    /// `{"usable": {"timestamp": "..."}}`: one key, the current state.
    private struct StateEntry: Decodable {
        var current: (State, String?)?

        struct Since: Decodable { var timestamp: String? }
        struct AnyKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init?(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            for key in container.allKeys {
                guard let state = State(rawValue: key.stringValue) else { continue }
                current = (state, try container.decodeIfPresent(Since.self, forKey: key)?.timestamp)
            }
        }
    }
}

/// A log list that cannot be used, with the reason.
public struct CTLogListError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

// MARK: - The judgement

/// What Certificate Transparency showed at one address or for one chain: each SCT with its log and
/// status, and Apple's CT policy's answer. Given whether or not the policy applies.
public struct CertificateTransparencyReport: Hashable, Codable, Sendable {
    /// One SCT as judged at the evaluation time against the log list.
    public struct Entry: Hashable, Codable, Sendable {
        public enum Status: String, Codable, Sendable {
            case valid
            case invalidSignature = "invalid-signature"
            case unknownLog = "unknown-log"
            /// The log was neither currently approved at the time of check nor retired after the SCT was made.
            case logNotApprovedAtTime = "log-not-approved-at-time"
            /// The SCT is dated after the time of check.
            case futureTimestamp = "future-timestamp"
            /// An embedded SCT whose issuer was not in the chain: its signature cannot be checked.
            case issuerUnknown = "issuer-unknown"
            /// From a log the list does not know, made after the list was published: most likely a log
            /// added since. Not counted against the certificate; the list needs updating.
            case logNewerThanList = "log-newer-than-list"
        }

        public var logID: String
        /// The log's description in the list (nil for an unknown log).
        public var log: String?
        public var `operator`: String?
        public var origin: SCTOrigin
        public var timestamp: Date
        public var status: Status
        /// The signature check as observed (kept so the SCT can be judged again at another time).
        public var signature: SCTSignatureCheck
        /// Exact SCT time, in milliseconds since 1970.
        public var timestampMs: Int64

        enum CodingKeys: String, CodingKey { case logID = "logId", log, `operator`, origin, timestamp, status, signature, timestampMs }

        public init(logID: String, log: String?, operator: String?, origin: SCTOrigin, timestamp: Date, status: Status,
                    signature: SCTSignatureCheck, timestampMs: Int64) {
            self.logID = logID
            self.log = log
            self.operator = `operator`
            self.origin = origin
            self.timestamp = timestamp
            self.status = status
            self.signature = signature
            self.timestampMs = timestampMs
        }
    }

    /// Apple's CT policy for this chain.
    public struct Policy: Hashable, Codable, Sendable {
        /// The chain anchors in a public root store and the certificate is one Apple's policy covers.
        public var required: Bool
        /// The SCTs meet the policy (also answered when not required, for information).
        public var satisfied: Bool
        /// Why: which requirement was met or failed, or why the policy does not apply.
        public var reason: String
        /// Met only by counting SCTs from logs newer than the log list: the verdict holds if those
        /// logs are approved, and the list must be updated (a warning about the trust input).
        public var listOutdated: Bool?

        public init(required: Bool, satisfied: Bool, reason: String, listOutdated: Bool? = nil) {
            self.required = required
            self.satisfied = satisfied
            self.reason = reason
            self.listOutdated = listOutdated
        }
    }

    public var scts: [Entry]
    public var policy: Policy
    /// The log list the SCTs were judged against.
    public var logList: String

    public init(scts: [Entry], policy: Policy, logList: String) {
        self.scts = scts
        self.policy = policy
        self.logList = logList
    }
}

extension CTLogList {
    /// The list shipped with tlsaudit (`scripts/update-ct-log-list`), read once.
    public static let shipped = CTLogList(source: name("tlsaudit's snapshot", version: CTLogListSnapshot.version,
                                                       timestamp: CTLogListSnapshot.timestamp), lazily: {
        do { return try parse(Data(CTLogListSnapshot.json.utf8), source: "tlsaudit's snapshot") } catch {
            fatalError("the shipped CT log list does not parse: \(error)") // A test parses it: a build cannot ship a broken one.
        }
    })
}
