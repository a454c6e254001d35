import Foundation

/// An app's `NSAppTransportSecurity` dictionary as an iPhone running the current iOS reads it, and
/// the rules it gives each host (`effectivePolicy(for:)`). Every rule, with its source, is in
/// docs/apple-rules.md section 6. Reading never fails: what Apple would not read (an unknown key,
/// a value of the wrong type, a TLS version Apple does not know, a malformed pin) is left out of
/// the model and reported in `diagnostics` with its key path.
public struct AppTransportSecurityPolicy: Sendable, Hashable {
    /// One `NSExceptionDomains` entry; nil fields were not given (or not readable).
    public struct ExceptionDomain: Sendable, Hashable {
        /// The key as written: a DNS name, an IPv4 or IPv6 address or a CIDR range.
        public var domain: String
        public var includesSubdomains: Bool
        public var allowsInsecureHTTPLoads: Bool?
        public var minimumTLSVersion: TLSVersion?
        public var requiresForwardSecrecy: Bool?
        public var requiresCertificateTransparency: Bool?
        /// The keys the entry declares, as written (legacy spellings too), sorted.
        public var declaredKeys: [String]

        public init(domain: String, includesSubdomains: Bool = false, allowsInsecureHTTPLoads: Bool? = nil,
                    minimumTLSVersion: TLSVersion? = nil, requiresForwardSecrecy: Bool? = nil,
                    requiresCertificateTransparency: Bool? = nil, declaredKeys: [String] = []) {
            self.domain = domain
            self.includesSubdomains = includesSubdomains
            self.allowsInsecureHTTPLoads = allowsInsecureHTTPLoads
            self.minimumTLSVersion = minimumTLSVersion
            self.requiresForwardSecrecy = requiresForwardSecrecy
            self.requiresCertificateTransparency = requiresCertificateTransparency
            self.declaredKeys = declaredKeys
        }
    }

    /// One `NSPinnedDomains` entry: SPKI-SHA256-BASE64 values.
    public struct PinnedDomain: Sendable, Hashable {
        public var domain: String
        public var includesSubdomains: Bool
        public var leafIdentities: [String]
        public var caIdentities: [String]

        public init(domain: String, includesSubdomains: Bool = false, leafIdentities: [String] = [], caIdentities: [String] = []) {
            self.domain = domain
            self.includesSubdomains = includesSubdomains
            self.leafIdentities = leafIdentities
            self.caIdentities = caIdentities
        }

        /// The pins as tlsaudit's pin policy (the NSPinnedDomains form: no AFNetworking mode).
        public var pinPolicy: PinPolicy { PinPolicy(leafIdentities: leafIdentities, caIdentities: caIdentities) }
    }

    /// What Apple would not read as written (`error`), or reads but probably not as meant (`warning`).
    public struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
        public enum Severity: String, Sendable, Hashable { case error, warning }
        /// Dotted from the top: `NSAppTransportSecurity.NSExceptionDomains.api.example.com.NSIncludesSubdomains`,
        /// array elements as `[0]`.
        public var keyPath: String
        public var severity: Severity
        public var message: String

        public init(_ keyPath: String, _ severity: Severity, _ message: String) {
            self.keyPath = keyPath
            self.severity = severity
            self.message = message
        }

        public var description: String { "\(keyPath): \(message)" }
    }

    /// The global keys as written (nil: absent or not a boolean).
    public var allowsArbitraryLoads: Bool?
    public var allowsArbitraryLoadsForMedia: Bool?
    public var allowsArbitraryLoadsInWebContent: Bool?
    public var allowsLocalNetworking: Bool?
    /// The keys present (with a Boolean or number value) that make iOS 10 and later ignore NSAllowsArbitraryLoads.
    public var arbitraryLoadsOverriddenBy: [String]
    public var exceptionDomains: [ExceptionDomain]
    public var pinnedDomains: [PinnedDomain]
    public var diagnostics: [Diagnostic]

    /// The top-level keys Apple documents for NSAppTransportSecurity.
    public static let globalKeys = ["NSAllowsArbitraryLoads", "NSAllowsArbitraryLoadsForMedia", "NSAllowsArbitraryLoadsInWebContent",
                                    "NSAllowsLocalNetworking", "NSExceptionDomains", "NSPinnedDomains"]
    /// The global keys whose presence, with any Boolean value, makes iOS 10 and later ignore NSAllowsArbitraryLoads.
    public static let arbitraryLoadsOverrides = ["NSAllowsArbitraryLoadsForMedia", "NSAllowsArbitraryLoadsInWebContent",
                                                 "NSAllowsLocalNetworking"]
    /// NSExceptionMinimumTLSVersion's values as Apple spells them.
    public static let tlsVersionValues: [String: TLSVersion] = ["TLSv1.0": .tls1_0, "TLSv1.1": .tls1_1, "TLSv1.2": .tls1_2,
                                                                 "TLSv1.3": .tls1_3]

    /// An app without an NSAppTransportSecurity dictionary: default ATS everywhere.
    public init() {
        allowsArbitraryLoads = nil
        allowsArbitraryLoadsForMedia = nil
        allowsArbitraryLoadsInWebContent = nil
        allowsLocalNetworking = nil
        arbitraryLoadsOverriddenBy = []
        exceptionDomains = []
        pinnedDomains = []
        diagnostics = []
    }

    /// Reads the value of an Info.plist's `NSAppTransportSecurity` key (nil: the key is absent).
    /// - Parameter keyPath: the name diagnostics start with.
    public init(_ value: PlistValue?, keyPath: String = "NSAppTransportSecurity") {
        self.init()
        guard let value else { return }
        guard case .dictionary(let dictionary) = value else {
            diagnostics.append(Diagnostic(keyPath, .error, "expected a dictionary, found \(value.kindDescription); the app gets default ATS"))
            return
        }
        var reader = PlistReader(path: keyPath)
        allowsArbitraryLoads = reader.bool(dictionary, "NSAllowsArbitraryLoads")
        allowsArbitraryLoadsForMedia = reader.bool(dictionary, "NSAllowsArbitraryLoadsForMedia")
        allowsArbitraryLoadsInWebContent = reader.bool(dictionary, "NSAllowsArbitraryLoadsInWebContent")
        allowsLocalNetworking = reader.bool(dictionary, "NSAllowsLocalNetworking")
        // Present means a Boolean or number value: Apple's parser takes a key of another type as
        // absent (kATSGlobalKeyNotPresent), so it does not override NSAllowsArbitraryLoads.
        arbitraryLoadsOverriddenBy = Self.arbitraryLoadsOverrides.filter { key in
            switch dictionary[key] {
            case .bool?, .integer?, .real?: true
            default: false
            }
        }
        if dictionary["NSAllowsArbitraryLoads"] != nil, !arbitraryLoadsOverriddenBy.isEmpty {
            reader.warn("NSAllowsArbitraryLoads", "ignored on iOS 10 and later because "
                        + arbitraryLoadsOverriddenBy.joined(separator: " and ") + " is present (with any Boolean value)")
        }
        reader.unknownKeys(dictionary, known: Self.globalKeys, hint: [
            "NSRequiresCertificateTransparency": "it belongs in an NSExceptionDomains entry",
            "NSIncludesSubdomains": "it belongs in an NSExceptionDomains or NSPinnedDomains entry",
        ])
        if let domains = reader.dictionary(dictionary, "NSExceptionDomains") {
            for key in domains.keys.sorted() {
                guard let entry = reader.nested(reader.child("NSExceptionDomains"), key, domains[key]!) else { continue }
                exceptionDomains.append(Self.exceptionDomain(key, entry, reader: &reader))
            }
        }
        if let domains = reader.dictionary(dictionary, "NSPinnedDomains") {
            for key in domains.keys.sorted() {
                guard let entry = reader.nested(reader.child("NSPinnedDomains"), key, domains[key]!) else { continue }
                pinnedDomains.append(Self.pinnedDomain(key, entry, reader: &reader))
            }
        }
        diagnostics += reader.diagnostics
    }

    /// Reads the `NSAppTransportSecurity` key of a whole Info.plist.
    public init(infoPlist: PlistValue) {
        guard case .dictionary(let root) = infoPlist else {
            self.init()
            diagnostics.append(Diagnostic("Info.plist", .error, "expected a dictionary, found \(infoPlist.kindDescription)"))
            return
        }
        self.init(root["NSAppTransportSecurity"])
    }

    /// Whether NSAllowsArbitraryLoads takes effect: YES, and none of the iOS 10 overriding keys present.
    public var arbitraryLoadsInEffect: Bool { allowsArbitraryLoads == true && arbitraryLoadsOverriddenBy.isEmpty }

    // MARK: - Reading entries

    /// The exception keys with their legacy `NSThirdParty` spelling (read the same; the current spelling wins when both are given).
    static let legacySpellings = ["NSExceptionAllowsInsecureHTTPLoads": "NSThirdPartyExceptionAllowsInsecureHTTPLoads",
                                  "NSExceptionMinimumTLSVersion": "NSThirdPartyExceptionMinimumTLSVersion",
                                  "NSExceptionRequiresForwardSecrecy": "NSThirdPartyExceptionRequiresForwardSecrecy"]
    static let exceptionKeys = ["NSIncludesSubdomains", "NSExceptionAllowsInsecureHTTPLoads", "NSExceptionMinimumTLSVersion",
                                "NSExceptionRequiresForwardSecrecy", "NSRequiresCertificateTransparency"]

    private static func exceptionDomain(_ key: String, _ entry: [String: PlistValue], reader: inout PlistReader) -> ExceptionDomain {
        let path = reader.child("NSExceptionDomains").child(key)
        var read = PlistReader(path: path.path)
        var domain = ExceptionDomain(domain: key, declaredKeys: entry.keys.sorted())
        domain.includesSubdomains = read.bool(entry, "NSIncludesSubdomains") ?? false
        domain.requiresCertificateTransparency = read.bool(entry, "NSRequiresCertificateTransparency")
        /// The current spelling, else the legacy one (a warning either way when the legacy one is used).
        func spelled<T>(_ name: String, _ value: (inout PlistReader, [String: PlistValue], String) -> T?) -> T? {
            let legacy = legacySpellings[name]!
            let current = value(&read, entry, name)
            guard entry[legacy] != nil else { return current }
            let old = value(&read, entry, legacy)
            if entry[name] != nil {
                read.warn(legacy, "legacy spelling of \(name), which is also given: \(name) is read, this key is not")
                return current
            }
            read.warn(legacy, "legacy spelling, read as \(name)")
            return old
        }
        domain.allowsInsecureHTTPLoads = spelled("NSExceptionAllowsInsecureHTTPLoads") { $0.bool($1, $2) }
        domain.requiresForwardSecrecy = spelled("NSExceptionRequiresForwardSecrecy") { $0.bool($1, $2) }
        domain.minimumTLSVersion = spelled("NSExceptionMinimumTLSVersion") { reader, entry, name in
            guard let text = reader.string(entry, name) else { return nil }
            guard let version = tlsVersionValues[text] else {
                reader.error(name, "'\(text)' is not a TLS version Apple reads (TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3); the default TLSv1.2 applies")
                return nil
            }
            return version
        }
        read.unknownKeys(entry, known: exceptionKeys + Array(legacySpellings.values), hint: [
            "NSTemporaryExceptionAllowsInsecureHTTPLoads": "iOS 9 beta spelling; current iOS documents NSExceptionAllowsInsecureHTTPLoads",
            "NSTemporaryExceptionMinimumTLSVersion": "iOS 9 beta spelling; current iOS documents NSExceptionMinimumTLSVersion",
            "NSTemporaryExceptionRequiresForwardSecrecy": "iOS 9 beta spelling; current iOS documents NSExceptionRequiresForwardSecrecy",
            "NSPinnedLeafIdentities": "pins belong in NSPinnedDomains",
            "NSPinnedCAIdentities": "pins belong in NSPinnedDomains",
        ])
        checkDomainKey(key, includesSubdomains: domain.includesSubdomains, path: path.path, reader: &read)
        reader.diagnostics += read.diagnostics
        return domain
    }

    private static func pinnedDomain(_ key: String, _ entry: [String: PlistValue], reader: inout PlistReader) -> PinnedDomain {
        let path = reader.child("NSPinnedDomains").child(key)
        var read = PlistReader(path: path.path)
        var domain = PinnedDomain(domain: key)
        domain.includesSubdomains = read.bool(entry, "NSIncludesSubdomains") ?? false
        domain.leafIdentities = identities(entry, "NSPinnedLeafIdentities", reader: &read) ?? []
        domain.caIdentities = identities(entry, "NSPinnedCAIdentities", reader: &read) ?? []
        if entry["NSPinnedLeafIdentities"] == nil, entry["NSPinnedCAIdentities"] == nil {
            reader.diagnostics.append(Diagnostic(path.path, .error, "has neither NSPinnedLeafIdentities nor NSPinnedCAIdentities (Apple requires one)"))
        } else if domain.leafIdentities.count + domain.caIdentities.count == 1 {
            reader.diagnostics.append(Diagnostic(path.path, .warning, "a single pinned identity and no backup: a new key on the server breaks the app"))
        }
        read.unknownKeys(entry, known: ["NSIncludesSubdomains", "NSPinnedLeafIdentities", "NSPinnedCAIdentities"], hint: [:])
        checkDomainKey(key, includesSubdomains: domain.includesSubdomains, path: path.path, pinned: true, reader: &read)
        reader.diagnostics += read.diagnostics
        return domain
    }

    /// An identity array: dictionaries with SPKI-SHA256-BASE64, a base64 SHA-256 (32 bytes).
    private static func identities(_ entry: [String: PlistValue], _ name: String, reader: inout PlistReader) -> [String]? {
        guard let array = reader.array(entry, name) else { return nil }
        if array.isEmpty { reader.error(name, "empty: Apple treats an empty identity array as a configuration error") }
        var values: [String] = []
        for (index, element) in array.enumerated() {
            let place = "\(name)[\(index)]"
            guard case .dictionary(let identity) = element else {
                reader.error(place, "expected a dictionary with SPKI-SHA256-BASE64, found \(element.kindDescription)")
                continue
            }
            var inner = PlistReader(path: reader.child(place).path)
            inner.unknownKeys(identity, known: ["SPKI-SHA256-BASE64"], hint: [:])
            if let pin = inner.string(identity, "SPKI-SHA256-BASE64") {
                if Data(base64Encoded: pin)?.count == 32 {
                    values.append(pin)
                } else {
                    inner.error("SPKI-SHA256-BASE64", "'\(pin)' is not the base64 of a SHA-256 digest (32 bytes, 44 characters)")
                }
            } else if identity["SPKI-SHA256-BASE64"] == nil {
                inner.error("SPKI-SHA256-BASE64", "missing")
            }
            reader.diagnostics += inner.diagnostics
        }
        return values
    }

    /// Domain keys Apple's rules say never match as meant: upper case (NSExceptionDomains; trustd
    /// compares NSPinnedDomains keys ignoring case), a Unicode name, a port, a wildcard, a malformed
    /// CIDR range; NSIncludesSubdomains on an address.
    private static func checkDomainKey(_ key: String, includesSubdomains: Bool, path: String, pinned: Bool = false, reader: inout PlistReader) {
        switch HostKind(key: key) {
        case .range(false), .address(false):
            reader.diagnostics.append(Diagnostic(path, .error, "not a valid IP address range; it matches no host"))
        case .range, .address:
            if includesSubdomains {
                reader.diagnostics.append(Diagnostic(path, .warning, "NSIncludesSubdomains has no effect on an IP address or range"))
            }
        case .name:
            if key != key.lowercased(), !pinned {
                reader.diagnostics.append(Diagnostic(path, .warning, "not lower case: Apple asks for lower-case keys, and tlsaudit matches the key as written, so no host matches it"))
            }
            if !key.utf8.allSatisfy({ $0 < 0x80 }) {
                reader.diagnostics.append(Diagnostic(path, .warning, "a Unicode name: the app's URL loading asks for the host in its A-label form (\(DomainNameForm.host(key))), and the key is compared as written, so no host matches it; write the key as \(DomainNameForm.host(key))"))
            }
            if key.contains("*" as Character) {
                reader.diagnostics.append(Diagnostic(path, .warning, "wildcards are not read: use the parent name with NSIncludesSubdomains; no host matches this key"))
            }
            if key.contains(":" as Character) {
                reader.diagnostics.append(Diagnostic(path, .warning, "a port is not part of a domain key; no host matches this key"))
            }
        }
    }
}

/// What a host or a domain key names: a DNS name, an IP address, or (keys only) a CIDR range.
enum HostKind: Equatable {
    case name
    /// An IPv4 or IPv6 literal; false when it looked like an address range but is malformed.
    case address(valid: Bool)
    case range(valid: Bool)

    init(key: String) {
        if key.contains("/" as Character) {
            let parts = key.split(separator: "/", maxSplits: 1).map(String.init)
            let bytes = parts.first.flatMap(IPAddress.bytes)
            let prefix = parts.count == 2 ? Int(parts[1]) : nil
            self = .range(valid: bytes != nil && prefix.map { (0...bytes!.count * 8).contains($0) } == true)
        } else if IPAddress.canonical(key) != nil {
            self = .address(valid: true)
        } else {
            self = .name
        }
    }
}

/// Walks a plist dictionary, typing each value and recording what does not fit, by key path.
struct PlistReader {
    var path: String
    var diagnostics: [AppTransportSecurityPolicy.Diagnostic] = []

    init(path: String) { self.path = path }

    func child(_ key: String) -> PlistReader { PlistReader(path: path + "." + key) }

    mutating func error(_ key: String, _ message: String) {
        diagnostics.append(.init(child(key).path, .error, message))
    }

    mutating func warn(_ key: String, _ message: String) {
        diagnostics.append(.init(child(key).path, .warning, message))
    }

    private mutating func mismatch(_ key: String, expected: String, _ value: PlistValue) {
        error(key, "expected \(expected), found \(value.kindDescription)")
    }

    mutating func bool(_ dictionary: [String: PlistValue], _ key: String) -> Bool? {
        guard let value = dictionary[key] else { return nil }
        guard case .bool(let flag) = value else { mismatch(key, expected: "a boolean", value); return nil }
        return flag
    }

    mutating func string(_ dictionary: [String: PlistValue], _ key: String) -> String? {
        guard let value = dictionary[key] else { return nil }
        guard case .string(let text) = value else { mismatch(key, expected: "a string", value); return nil }
        return text
    }

    mutating func array(_ dictionary: [String: PlistValue], _ key: String) -> [PlistValue]? {
        guard let value = dictionary[key] else { return nil }
        guard case .array(let array) = value else { mismatch(key, expected: "an array", value); return nil }
        return array
    }

    mutating func dictionary(_ dictionary: [String: PlistValue], _ key: String) -> [String: PlistValue]? {
        guard let value = dictionary[key] else { return nil }
        guard case .dictionary(let inner) = value else { mismatch(key, expected: "a dictionary", value); return nil }
        return inner
    }

    /// A domain entry of `parent`: a dictionary, else a diagnostic at the entry's path.
    mutating func nested(_ parent: PlistReader, _ key: String, _ value: PlistValue) -> [String: PlistValue]? {
        guard case .dictionary(let inner) = value else {
            diagnostics.append(.init(parent.child(key).path, .error, "expected a dictionary, found \(value.kindDescription)"))
            return nil
        }
        return inner
    }

    mutating func unknownKeys(_ dictionary: [String: PlistValue], known: [String], hint: [String: String]) {
        for key in dictionary.keys.sorted() where !known.contains(key) {
            let expected = known.sorted().joined(separator: ", ")
            error(key, "unknown key" + (hint[key].map { " (\($0))" } ?? "") + "; expected one of \(expected)")
        }
    }
}
