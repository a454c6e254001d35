public import Foundation
public import TLSAuditModel

/// Where a trust input (the CT log list, the distrust table) comes from: a file, or an http(s) URL
/// fetched within bounds (`maximumBytes`, `timeout`). What is fetched is verified before use and
/// may be kept as the last known good copy, replaced atomically, so that a restart without network
/// keeps the last good input.
public enum TrustInputSource {
    /// The most a trust input may weigh (today's log lists are some 100 KB).
    public static let maximumBytes = 8 << 20
    /// Seconds for the whole fetch.
    public static let timeout: Double = 30

    public static func isURL(_ source: String) -> Bool { HTTPClient.fetches(source) }

    /// The bytes of `source`: the file, or the body of a 200 answer to a GET of the URL.
    public static func read(_ source: String) throws -> [UInt8] {
        guard isURL(source) else { return try InputLimits.read(source, limit: maximumBytes, what: "trust input") }
        guard let url = URL(string: source) else { throw InputError("\(source) is not a URL") }
        let answer: (response: HTTPClient.Response, body: [UInt8])
        do { answer = try HTTPClient.fetch("GET", url, timeout: timeout, maximumBody: maximumBytes) } catch {
            throw InputError("\(source): \(error.description)")
        }
        guard answer.response.status == 200 else {
            throw InputError("\(source) answered HTTP \(answer.response.status) \(answer.response.reason)")
        }
        return answer.body
    }

    /// Writes `bytes` to `path` atomically (a temporary file beside it, flushed, then renamed).
    public static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(bytes)) else {
            throw InputError("cannot write \(temporary)")
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
        try handle.synchronize()
        try handle.close()
        if rename(temporary, path) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw InputError("cannot replace \(path): \(reason)")
        }
    }
}

/// The CT log list as a verified trust input.
public enum CTLogListInput {
    /// Parses `bytes` and verifies them: the v3 schema, and every log's id is the SHA-256 of its key
    /// (a list whose keys do not match their ids is refused whole).
    public static func verified(_ bytes: [UInt8], source: String) throws -> CTLogList {
        let list = try CTLogList.parse(Data(bytes), source: source)
        for log in list.logs where Data(Digest.sha256(log.key)).base64EncodedString() != log.id {
            throw InputError("\(source): log \(log.description) has log_id \(log.id), which is not the SHA-256 of its key: the list is refused")
        }
        return list
    }

    /// The list from `source` (file or URL), verified. With `lastKnownGood`, a good list newer than
    /// the one kept there (or the first) replaces it atomically, and when `source` cannot be had or
    /// fails verification the kept one is used, with the reason in `note`; a list older than the
    /// kept one is refused and the kept one used.
    public static func load(_ source: String, lastKnownGood: String?) throws -> (list: CTLogList, note: String?) {
        let kept = lastKnownGood.flatMap { path in
            (try? InputLimits.read(path, limit: TrustInputSource.maximumBytes, what: "last known good CT log list"))
                .flatMap { try? verified($0, source: path) }
        }
        do {
            let bytes = try TrustInputSource.read(source)
            let list = try verified(bytes, source: source)
            if let kept, let old = kept.publishedAt, let new = list.publishedAt, new < old {
                throw InputError("\(source) was published \(Timestamp.format(new)), before the list in force (\(Timestamp.format(old))): refused")
            }
            if let lastKnownGood { try TrustInputSource.writeAtomically(bytes, to: lastKnownGood) }
            return (list, nil)
        } catch {
            guard let kept else { throw error }
            return (kept, "\(error); using the last known good list \(kept.source)")
        }
    }
}

/// The date-bounded distrust table as a trust input: a file or an http(s) URL, parsed before use.
public enum DistrustTableInput {
    public static func load(_ source: String) throws -> DistrustTable {
        try DistrustTable.parse(Data(try TrustInputSource.read(source)), source: source)
    }
}
