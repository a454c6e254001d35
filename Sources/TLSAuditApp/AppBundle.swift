public import TLSAuditModel

/// What an iOS app ships that decides how it connects: its identifier, its
/// `NSAppTransportSecurity` dictionary as written, and the certificates in its bundle.
public struct AppBundle: Sendable, Hashable {
    /// Where the app was read from.
    public enum Source: Sendable, Hashable {
        /// A lone `Info.plist` (no bundle, so no certificates).
        case infoPlist
        /// An `.app` directory.
        case appDirectory
        /// An `.ipa` archive; `app` is the bundle's directory inside it (`Payload/Demo.app`).
        case archive(app: String)
    }

    /// The path that was given to ``AppBundleReader/read(path:)``.
    public var path: String
    public var source: Source
    /// `CFBundleIdentifier`, or nil when the Info.plist has none.
    public var bundleIdentifier: String?
    /// The whole Info.plist, every key with its plist type.
    public var infoPlist: [String: PlistValue]
    /// Certificate files at the top of the bundle (`.cer`, AFNetworking's `certificatesInBundle`
    /// set, and `.der`, which it ignores), sorted by file name.
    public var certificates: [BundledCertificate]
    /// The Info.plist as a file of its own (a lone plist, an `.app`'s), for locating its keys; nil
    /// for an `.ipa`'s, an entry of the archive.
    public var infoPlistFile: String?
    /// The Info.plist's text where it is XML (nil for a binary one), for the lines of its keys.
    public var infoPlistXML: String?

    /// The key path of the ATS dictionary in the Info.plist: the root of every key path a
    /// finding about ATS names.
    public static let appTransportSecurityKey = "NSAppTransportSecurity"

    /// `NSAppTransportSecurity` as written (any plist type: a wrong type is for the caller to
    /// report), or nil when the app declares none (default ATS).
    public var appTransportSecurity: PlistValue? { infoPlist[Self.appTransportSecurityKey] }

    public init(path: String, source: Source, bundleIdentifier: String?, infoPlist: [String: PlistValue],
                certificates: [BundledCertificate]) {
        self.path = path
        self.source = source
        self.bundleIdentifier = bundleIdentifier
        self.infoPlist = infoPlist
        self.certificates = certificates
    }
}

/// A certificate file found in an app bundle, as the app reads it.
public struct BundledCertificate: Sendable, Hashable {
    /// The file's name at the top of the bundle (`api.cer`).
    public var fileName: String
    /// The file's bytes: DER when the file is what its extension says (not checked here).
    public var der: [UInt8]

    public init(fileName: String, der: [UInt8]) {
        self.fileName = fileName
        self.der = der
    }

    /// AFNetworking's `certificatesInBundle` reads it (`pathsForResourcesOfType:@"cer"`).
    public var isReadByAFNetworking: Bool { fileName.hasSuffix(".cer") }

    /// The file holds PEM text rather than DER (a `-----BEGIN` line first).
    public var isPEM: Bool {
        let text = der.prefix(64).drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 || $0 == 0xef || $0 == 0xbb || $0 == 0xbf }
        return text.starts(with: Array("-----BEGIN".utf8))
    }
}
