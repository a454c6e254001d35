public import Foundation
public import TLSAuditModel
import TLSAuditSupport

/// Where a trust input (the CT log list, the distrust table, Apple's roots) comes from: a file, or
/// an http(s) URL fetched within bounds (`maximumBytes`, `timeout`). What is fetched is verified
/// before use and kept as the last known good copy, replaced atomically, so that a restart without
/// network keeps the last good input.
public enum TrustInputSource {
    /// The most a trust input may weigh (today's log lists are some 100 KB, Apple's roots 300 KB).
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

    /// Loads a trust input from `source` (file or URL), verified: its `signature` when one is
    /// required, then the input's own checks; never one older (or much smaller) than the input
    /// `inForce` or the copy kept at `lastKnownGood`. A good input becomes the kept copy (replaced
    /// atomically). When `source` cannot be had or is refused, the kept copy is used if there is
    /// one, with the reason in `note`; else the error is thrown.
    public static func load<Input: VerifiableTrustInput>(_ type: Input.Type, from source: String, signature: TrustInputSignature? = nil,
                                                         lastKnownGood: String?, inForce: Input? = nil) throws -> (input: Input, note: String?) {
        let kept = lastKnownGood.flatMap(keptCopy(Input.self))
        do {
            let bytes = try read(source)
            if let signature { try signature.verify(bytes, of: source) }
            let input = try Input.verified(bytes, source: source)
            for current in [kept, inForce].compactMap({ $0 }) {
                if let refusal = input.refusal(replacing: current) { throw InputError("\(source): \(refusal): refused") }
            }
            if let lastKnownGood { try writeAtomically(bytes, to: lastKnownGood) }
            return (input, nil)
        } catch {
            guard let kept else { throw error }
            return (kept, "\(error); using the last known good copy \(lastKnownGood ?? "")")
        }
    }

    /// The copy kept at `path`, verified again; nil when there is none or it does not verify.
    public static func keptCopy<Input: VerifiableTrustInput>(_ type: Input.Type) -> (String) -> Input? {
        { path in
            guard let bytes = try? InputLimits.read(path, limit: maximumBytes, what: "last known good \(Input.kind.title)"),
                  let input = try? Input.verified(bytes, source: path) else { return nil }
            let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate]) as? Date
            return input.kept(modifiedAt: modified ?? Date())
        }
    }
}

/// A trust input that can be verified from its bytes.
public protocol VerifiableTrustInput: Sendable {
    static var kind: TrustInputKind { get }
    /// Parses `bytes` and checks them; throws saying why they are refused.
    static func verified(_ bytes: [UInt8], source: String) throws -> Self
    /// Which input this is: source, version, publication, size.
    var version: TrustInputVersion { get }
    /// Why `self` may not replace `current` (older, or far smaller); nil when it may.
    func refusal(replacing current: Self) -> String?
    /// This input as read back from the kept copy last modified at `modified` (Apple's roots date by it).
    func kept(modifiedAt modified: Date) -> Self
}

extension VerifiableTrustInput {
    public func kept(modifiedAt modified: Date) -> Self { self }

    /// Refuses an input published before `current`.
    func olderRefusal(than current: Self) -> String? {
        guard let old = current.version.publishedAt, let new = version.publishedAt, new < old else { return nil }
        return "published \(Timestamp.format(new)), before the \(Self.kind.title) in force or kept (\(Timestamp.format(old)))"
    }
}

/// A detached signature a trust input must carry (Google signs its log lists: `log_list.sig`).
public struct TrustInputSignature: Sendable, Hashable {
    /// The signature's file or URL.
    public var source: String
    /// The key it must verify with, PEM.
    public var publicKeyPEM: String
    /// The key's name in messages.
    public var keyName: String

    public init(source: String, publicKeyPEM: String, keyName: String) {
        self.source = source
        self.publicKeyPEM = publicKeyPEM
        self.keyName = keyName
    }

    /// For Google's published v3 lists (`https://www.gstatic.com/ct/log_list/v3/NAME.json`): the
    /// signature beside the list (`NAME.sig`), by Google's log list key. Nil for other sources.
    public static func google(for listSource: String) -> TrustInputSignature? {
        guard let url = URL(string: listSource), url.scheme == "https", url.host?.lowercased() == "www.gstatic.com",
              url.path.hasPrefix("/ct/log_list/"), url.path.hasSuffix(".json") else { return nil }
        return TrustInputSignature(source: String(listSource.dropLast(5)) + ".sig", publicKeyPEM: googleLogListKeyPEM,
                                   keyName: "Google's log list key")
    }

    /// Google's key for its v3 CT log lists (https://www.gstatic.com/ct/log_list/v3/log_list_pubkey.pem, RSA 4096).
    public static let googleLogListKeyPEM = """
        -----BEGIN PUBLIC KEY-----
        MIICIjANBgkqhkiG9w0BAQEFAAOCAg8AMIICCgKCAgEAsu0BHGnQ++W2CTdyZyxv
        HHRALOZPlnu/VMVgo2m+JZ8MNbAOH2cgXb8mvOj8flsX/qPMuKIaauO+PwROMjiq
        fUpcFm80Kl7i97ZQyBDYKm3MkEYYpGN+skAR2OebX9G2DfDqFY8+jUpOOWtBNr3L
        rmVcwx+FcFdMjGDlrZ5JRmoJ/SeGKiORkbbu9eY1Wd0uVhz/xI5bQb0OgII7hEj+
        i/IPbJqOHgB8xQ5zWAJJ0DmG+FM6o7gk403v6W3S8qRYiR84c50KppGwe4YqSMkF
        bLDleGQWLoaDSpEWtESisb4JiLaY4H+Kk0EyAhPSb+49JfUozYl+lf7iFN3qRq/S
        IXXTh6z0S7Qa8EYDhKGCrpI03/+qprwy+my6fpWHi6aUIk4holUCmWvFxZDfixox
        K0RlqbFDl2JXMBquwlQpm8u5wrsic1ksIv9z8x9zh4PJqNpCah0ciemI3YGRQqSe
        /mRRXBiSn9YQBUPcaeqCYan+snGADFwHuXCd9xIAdFBolw9R9HTedHGUfVXPJDiF
        4VusfX6BRR/qaadB+bqEArF/TzuDUr6FvOR4o8lUUxgLuZ/7HO+bHnaPFKYHHSm+
        +z1lVDhhYuSZ8ax3T0C3FZpb7HMjZtpEorSV5ElKJEJwrhrBCMOD8L01EoSPrGlS
        1w22i9uGHMn/uGQKo28u7AsCAwEAAQ==
        -----END PUBLIC KEY-----
        """

    /// Checks the signature over `bytes` (the input read from `source`); throws saying why not.
    public func verify(_ bytes: [UInt8], of source: String) throws {
        let signature = try TrustInputSource.read(self.source)
        switch DetachedSignature.verifySHA256(signature, over: bytes, keyPEM: publicKeyPEM) {
        case nil: throw InputError("the public key for \(self.source) is not a PEM public key")
        case false?: throw InputError("\(source): its signature \(self.source) does not verify with \(keyName)")
        case true?: break
        }
    }
}

extension CTLogList: VerifiableTrustInput {
    public static var kind: TrustInputKind { .ctLogList }

    /// The v3 schema, and every log's id is the SHA-256 of its key (a list whose keys do not match
    /// their ids is refused whole).
    public static func verified(_ bytes: [UInt8], source: String) throws -> CTLogList {
        let list = try CTLogList.parse(Data(bytes), source: source)
        for log in list.logs where Data(Digest.sha256(log.key)).base64EncodedString() != log.id {
            throw InputError("\(source): log \(log.description) has log_id \(log.id), which is not the SHA-256 of its key: the list is refused")
        }
        return list
    }

    public var version: TrustInputVersion {
        TrustInputVersion(input: .ctLogList, source: source, version: listVersion, publishedAt: publishedAt, entries: logs.count)
    }

    public func refusal(replacing current: CTLogList) -> String? { olderRefusal(than: current) }
}

extension DistrustTable: VerifiableTrustInput {
    public static var kind: TrustInputKind { .distrust }

    public static func verified(_ bytes: [UInt8], source: String) throws -> DistrustTable {
        try DistrustTable.parse(Data(bytes), source: source)
    }

    public var version: TrustInputVersion {
        TrustInputVersion(input: .distrust, source: source, version: tableVersion, publishedAt: publishedAt, entries: entries.count)
    }

    public func refusal(replacing current: DistrustTable) -> String? { olderRefusal(than: current) }
}
