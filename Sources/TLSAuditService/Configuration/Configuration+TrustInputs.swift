import Foundation
public import TLSAuditCore
public import TLSAuditProbe
import TLSAuditStore
import Yams

/// Where a trust input comes from and how `serve` keeps it current (`ct:`, `distrust:`, `apple_roots:`).
public struct TrustInputSetting: Sendable, Hashable {
    public let kind: TrustInputKind
    /// A file (absolute path) or an http(s) URL; nil: the snapshot shipped with tlsaudit.
    public var source: String?
    /// Where the last good input from a URL is kept (`last_known_good:`; default beside the SQLite
    /// database, `ct-log-list.json`, `distrust.json`, `apple-roots.pem`).
    public var lastKnownGood: String?
    /// Seconds between refreshes of a configured source (`refresh:`, default 24 hours).
    public var refresh: Double = 86_400
    /// Older than this many seconds, the input is stale: an alert, once (`max_age:`).
    public var maxAge: Double
    /// The detached signature the input must carry (`ct: {signature:, public_key:}`; Google's lists by default).
    public var signature: TrustInputSignature?

    public init(kind: TrustInputKind) {
        self.kind = kind
        maxAge = Self.defaultMaxAge(kind)
    }

    /// 90 days for the CT log list (Google publishes daily, Apple when a log changes), 365 for the
    /// distrust table and Apple's roots (they change a few times a year).
    public static func defaultMaxAge(_ kind: TrustInputKind) -> Double { (kind == .ctLogList ? 90 : 365) * 86_400 }

    public var isURL: Bool { source.map(TrustInputSource.isURL) ?? false }

    /// Where the kept copy of `kind` goes by default: beside the SQLite `database` (the working
    /// directory for a database named by a URL: PostgreSQL).
    public static func keptPath(_ kind: TrustInputKind, database: String) -> String {
        let directory = StoreBackends.urlScheme(of: database) != nil ? "." : (database as NSString).deletingLastPathComponent
        return (directory.isEmpty ? "." : directory) + "/" + TrustInputSetting(kind: kind).keptName
    }

    /// The file name of the kept copy beside the database.
    var keptName: String {
        switch kind {
        case .ctLogList: "ct-log-list.json"
        case .distrust: "distrust.json"
        case .appleRoots: "apple-roots.pem"
        }
    }
}

/// The three trust inputs' settings.
public struct TrustInputSettings: Sendable, Hashable {
    public var ctLogList = TrustInputSetting(kind: .ctLogList)
    public var distrust = TrustInputSetting(kind: .distrust)
    public var appleRoots = TrustInputSetting(kind: .appleRoots)

    public init() {}

    public var all: [TrustInputSetting] { [ctLogList, distrust, appleRoots] }

    public subscript(kind: TrustInputKind) -> TrustInputSetting {
        switch kind {
        case .ctLogList: ctLogList
        case .distrust: distrust
        case .appleRoots: appleRoots
        }
    }
}

/// How `serve` follows CT logs for the pin forecast (`ct: {follow: true}`).
public struct CTFollowSettings: Sendable, Hashable {
    /// Read every entry of every log (`start: beginning`), or only what is logged from the first start on (`end`, the default).
    public var fromBeginning = false
    /// Seconds between rounds over the logs.
    public var poll: Double = 60
    /// `watch:`: domains whose issuance is recorded, each with the CAs allowed to issue for it.
    public var watch: [WatchedDomain] = []

    public init() {}
}

/// `ct:`, `distrust:` and `apple_roots:`.
extension ConfigurationParser {
    static let ctKeys = ["log_list", "last_known_good", "refresh", "max_age", "signature", "public_key", "follow", "start", "poll",
                         "watch"]
    static let distrustKeys = ["list", "vendor", "last_known_good", "refresh", "max_age"]
    static let appleRootsKeys = ["source", "last_known_good", "refresh", "max_age"]

    /// `ct: {log_list: FILE|URL, last_known_good:, refresh:, max_age:, signature: FILE|URL, public_key: PEM}`.
    /// A file source is read now, so a bad one is reported here; a URL is fetched by `serve`.
    mutating func certificateTransparency(_ node: Node, database: String) -> TrustInputSetting {
        var setting = TrustInputSetting(kind: .ctLogList)
        guard let mapping = section(node, "'ct' must be a mapping with 'log_list' (a CT log list file or URL in the v3 JSON schema)",
                                    allowed: Self.ctKeys, in: "ct") else { return setting }
        trustInput(&setting, mapping, sourceKey: "log_list", database: database) { path in _ = try CTLogList.load(path: path) }
        let signature = mapping["signature"].flatMap { string($0, "a file path or an http(s) URL") }
        let keyPath = mapping["public_key"].flatMap { string($0, "a PEM public key file") }.map(absolutePath)
        switch (signature, keyPath) {
        case (nil, nil):
            setting.signature = setting.source.flatMap(TrustInputSignature.google(for:))
        case (let signature?, let keyPath?):
            do {
                let pem = String(decoding: try InputLimits.read(keyPath, limit: 64 << 10, what: "public key"), as: UTF8.self)
                guard pem.contains("-----BEGIN PUBLIC KEY-----") else { throw InputError("\(keyPath) is not a PEM public key") }
                let source = TrustInputSource.isURL(signature) ? signature : absolutePath(signature)
                setting.signature = TrustInputSignature(source: source, publicKeyPEM: pem, keyName: "the key in \(keyPath)")
            } catch {
                report(mapping["public_key"]!, "\(error)")
            }
        default:
            report(node, "ct: 'signature' and 'public_key' go together: the list's detached signature and the key it must verify with")
        }
        return setting
    }

    /// `ct: {follow: true, start: end|beginning, poll: 60s}`: follow the logs of the list in force
    /// for the pin forecast; nil when `follow` is not true.
    mutating func certificateTransparencyFollowing(_ node: Node) -> CTFollowSettings? {
        guard case .mapping(let mapping) = node, let follow = mapping["follow"], boolean(follow) == true else {
            if case .mapping(let mapping) = node, mapping["follow"] == nil, let key = mapping["start"] ?? mapping["poll"] ?? mapping["watch"] {
                report(key, "ct: 'start', 'poll' and 'watch' are settings of 'follow: true'")
            }
            return nil
        }
        var settings = CTFollowSettings()
        if let node = mapping["start"], let start = string(node, "end or beginning") {
            switch start {
            case "end": settings.fromBeginning = false
            case "beginning": settings.fromBeginning = true
            default: report(node, "ct: start must be end (what is logged from now on, the default) or beginning (every entry of every log)")
            }
        }
        if let node = mapping["poll"], let seconds = duration(node, minimum: 1) { settings.poll = seconds }
        if let node = mapping["watch"] { settings.watch = watchedDomains(node) }
        return settings
    }

    /// `watch: [example.com, {domain: shop.example, include_subdomains: false, issuers: ["Let's Encrypt", sha256/...]}]`.
    mutating func watchedDomains(_ node: Node) -> [WatchedDomain] {
        guard case .sequence(let sequence) = node else {
            report(node, "ct: watch must be a list of domains, or of {domain:, include_subdomains:, issuers: [CA names or sha256/ key pins]}")
            return []
        }
        var watched: [WatchedDomain] = []
        for entry in sequence {
            var domainNode = entry
            var rule = WatchedDomain(domain: "", watchedBy: "ct: watch")
            if case .mapping(let mapping) = entry {
                checkKeys(mapping, allowed: ["domain", "include_subdomains", "issuers"], in: "a ct: watch entry")
                guard let node = mapping["domain"] else {
                    report(entry, "a ct: watch entry needs 'domain'")
                    continue
                }
                domainNode = node
                if let value = mapping["include_subdomains"], let include = boolean(value) { rule.includeSubdomains = include }
                if let list = mapping["issuers"] {
                    guard case .sequence(let issuers) = list, !issuers.isEmpty else {
                        report(list, "ct: watch issuers must be a non-empty list of CA names (organization or common name) or sha256/ key pins")
                        continue
                    }
                    for issuer in issuers {
                        guard let text = string(issuer, "a CA name or a sha256/ key pin"), let allowed = AllowedIssuer(text) else {
                            report(issuer, "ct: watch issuers: a CA's organization or common name, or 'sha256/' and 44 characters of base64")
                            continue
                        }
                        rule.issuers.append(allowed)
                    }
                }
            }
            guard let text = string(domainNode, "a domain") else { continue }
            // As clients compare it: A-labels, lower case (`WatchedDomain.init`).
            rule = WatchedDomain(domain: text.hasPrefix("*.") ? String(text.dropFirst(2)) : text, includeSubdomains: rule.includeSubdomains,
                                 issuers: rule.issuers, watchedBy: rule.watchedBy)
            guard HostnameMatcher.isValidDNSName(rule.domain), rule.domain.contains("." as Character) else {
                report(domainNode, "ct: watch: '\(text)' is not a domain name with at least two labels")
                continue
            }
            watched.append(rule)
        }
        return watched
    }

    /// `distrust: {list: FILE|URL, vendor: apple|mozilla|chrome, last_known_good:, refresh:, max_age:}`:
    /// the table of roots distrusted for certificates issued after a date (the shipped one without
    /// `list`), and whose rows apply (without `vendor`: Apple's under the Apple policies, Mozilla's
    /// under the Mozilla ones).
    mutating func distrust(_ node: Node, database: String) -> (DistrustSetting?, TrustInputSetting) {
        var input = TrustInputSetting(kind: .distrust)
        guard let mapping = section(node, "'distrust' must be a mapping with 'list' (a distrust table file or URL) and/or 'vendor' (apple, mozilla or chrome)",
                                    allowed: Self.distrustKeys, in: "distrust") else { return (nil, input) }
        var setting = DistrustSetting()
        if let value = mapping["vendor"] { setting.vendor = choice(value, "distrust vendor", expected: "apple, mozilla or chrome") }
        var failed = false
        trustInput(&input, mapping, sourceKey: "list", database: database) { path in
            do { setting.table = try DistrustTable.load(path: path) } catch { failed = true; throw error }
        }
        return (failed ? nil : setting, input)
    }

    /// `apple_roots: {source: FILE|URL, last_known_good:, refresh:, max_age:}`: Apple's root store
    /// snapshot (PEM) `trust: apple` and the Apple policies judge against.
    mutating func appleRoots(_ node: Node, database: String) -> TrustInputSetting {
        var setting = TrustInputSetting(kind: .appleRoots)
        guard let mapping = section(node, "'apple_roots' must be a mapping with 'source' (a PEM file or URL of Apple's roots)",
                                    allowed: Self.appleRootsKeys, in: "apple_roots") else { return setting }
        trustInput(&setting, mapping, sourceKey: "source", database: database) { path in
            _ = try AppleRootStore.verified(try InputLimits.read(path, limit: TrustInputSource.maximumBytes, what: "Apple root store"), source: path)
        }
        return setting
    }

    /// The keys every trust input shares: its source (`sourceKey`; a file is checked with `check`
    /// now), `last_known_good`, `refresh` and `max_age`.
    private mutating func trustInput(_ setting: inout TrustInputSetting, _ mapping: Node.Mapping, sourceKey: String, database: String,
                                     check: (String) throws -> Void) {
        if let node = mapping[sourceKey], let text = string(node, "a file path or an http(s) URL") {
            if TrustInputSource.isURL(text) {
                if URL(string: text)?.host == nil { report(node, "\(sourceKey) '\(text)' is not a URL") }
                setting.source = text
            } else {
                let path = absolutePath(text)
                do {
                    try check(path)
                    setting.source = path
                } catch {
                    report(node, "\(error)")
                }
            }
        }
        if let node = mapping["refresh"], let seconds = duration(node, minimum: 1) { setting.refresh = seconds }
        if let node = mapping["max_age"], let seconds = duration(node, minimum: 1) { setting.maxAge = seconds }
        if let node = mapping["last_known_good"], let path = string(node, "a file path") {
            setting.lastKnownGood = absolutePath(path)
        } else if setting.isURL {
            setting.lastKnownGood = absolutePath(TrustInputSetting.keptPath(setting.kind, database: database))
        }
    }
}
