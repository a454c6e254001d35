import Foundation
public import TLSAuditModel
#if canImport(Glibc)
import Glibc
#endif

/// Reads what an iOS app ships for ATS from an `Info.plist`, an `.app` directory or an `.ipa`,
/// within ``AppBundleLimits``. Nothing is written: an archive is read in place.
///
/// Certificates are the files AFNetworking's `+[AFSecurityPolicy certificatesInBundle:]` takes
/// (`pathsForResourcesOfType:@"cer" inDirectory:@"."`: extension `cer`, at the top of the
/// bundle, not in subdirectories) plus those with extension `der`, read so that an audit can say
/// AFNetworking ignores them; extensions match as written (lower case).
public enum AppBundleReader {
    /// The extensions of the bundled certificate files that are read.
    public static let certificateExtensions: Set<String> = ["cer", "der"]

    /// Reads the app at `path`: an `.ipa` (or any zip: recognised by its first bytes or its
    /// `.ipa`/`.zip` extension), an `.app` (any directory with an `Info.plist` at its top), or a
    /// lone `Info.plist` (XML or binary).
    /// - Throws: ``AppBundleError`` naming the file (and the archive entry) and what is wrong.
    public static func read(path: String) throws(AppBundleError) -> AppBundle {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw AppBundleError(.unreadable, file: path, "no such file or directory")
        }
        if isDirectory.boolValue { return try readAppDirectory(path) }
        if ["ipa", "zip"].contains((path as NSString).pathExtension.lowercased()) || startsLikeZip(path) {
            return try readArchive(path)
        }
        let bytes = try readPlistFile(path)
        return try bundle(path: path, source: .infoPlist, infoPlist: try parseInfoPlist(bytes, file: path), infoBytes: bytes,
                          plistFile: path, onDisk: true, certificates: [])
    }

    /// A lone property list (XML or binary, an Info.plist or a part of one such as a bare
    /// NSAppTransportSecurity dictionary), within the Info.plist's size limit: its root dictionary.
    public static func readPropertyList(path: String) throws(AppBundleError) -> [String: PlistValue] {
        try parseInfoPlist(try readPlistFile(path), file: path)
    }

    private static func readPlistFile(_ path: String) throws(AppBundleError) -> [UInt8] {
        try readFile(path, limit: AppBundleLimits.infoPlistBytes, what: "an Info.plist")
    }

    // MARK: - The three inputs

    private static func readAppDirectory(_ path: String) throws(AppBundleError) -> AppBundle {
        let infoPath = (path as NSString).appendingPathComponent("Info.plist")
        guard FileManager.default.fileExists(atPath: infoPath) else {
            throw AppBundleError(.missingInfoPlist, file: path, "no Info.plist at the top of this directory (an iOS .app has one there)")
        }
        var budget = Budget(file: path)
        let infoBytes = try readPlistFile(infoPath)
        try budget.spend(infoBytes.count, on: "Info.plist")
        let plist = try parseInfoPlist(infoBytes, file: infoPath)
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw AppBundleError(.unreadable, file: path, "cannot list the directory: \(error.localizedDescription)")
        }
        var certificates: [BundledCertificate] = []
        for name in names.sorted() where isCertificateName(name) {
            let filePath = (path as NSString).appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: filePath, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            let der = try readFile(filePath, limit: AppBundleLimits.certificateBytes, what: "a certificate file")
            try budget.spend(der.count, on: name)
            certificates.append(BundledCertificate(fileName: name, der: der))
        }
        return try bundle(path: path, source: .appDirectory, infoPlist: plist, infoBytes: infoBytes, plistFile: infoPath, onDisk: true,
                          certificates: certificates)
    }

    private static func readArchive(_ path: String) throws(AppBundleError) -> AppBundle {
        let archive = try ZipArchive(path: path)
        // Every directory under Payload/ whose name ends in .app, from every entry's path.
        var apps = Set<String>()
        for entry in archive.entries {
            let components = entry.name.split(separator: "/", omittingEmptySubsequences: true)
            if components.count >= 2, components[0] == "Payload", components[1].hasSuffix(".app") { apps.insert(String(components[1])) }
        }
        guard let app = apps.first else {
            throw AppBundleError(.noApp, file: path, "no Payload/*.app directory in the archive: not an iOS app (.ipa)")
        }
        guard apps.count == 1 else {
            throw AppBundleError(.severalApps, file: path,
                                 "\(apps.count) apps in the archive (\(apps.sorted().map { "Payload/\($0)" }.joined(separator: ", "))); an .ipa holds one")
        }
        let prefix = "Payload/\(app)/"
        guard let infoEntry = archive.entries.first(where: { $0.name == prefix + "Info.plist" }) else {
            throw AppBundleError(.missingInfoPlist, file: path, "no entry \(prefix)Info.plist in the archive")
        }
        let certificateEntries = archive.entries.filter { entry in
            guard entry.name.hasPrefix(prefix), !entry.isDirectory else { return false }
            let name = entry.name.dropFirst(prefix.count)
            return !name.contains("/" as Character) && isCertificateName(String(name))
        }.sorted { $0.name < $1.name }
        // Refused on the declared sizes before anything is inflated: each entry's, then all together.
        try archive.checkDeclaredSize(of: infoEntry, limit: AppBundleLimits.infoPlistBytes, what: "an Info.plist")
        for entry in certificateEntries {
            try archive.checkDeclaredSize(of: entry, limit: AppBundleLimits.certificateBytes, what: "a certificate file")
        }
        var budget = Budget(file: path)
        let declared = certificateEntries.reduce(infoEntry.uncompressedSize) { total, entry in
            let (sum, overflow) = total.addingReportingOverflow(entry.uncompressedSize)
            return overflow ? .max : sum
        }
        if declared > UInt64(AppBundleLimits.totalBytes) {
            throw AppBundleError(.tooLarge, file: path,
                                 "\(prefix)Info.plist and \(certificateEntries.count) certificate file(s) declare \(declared) bytes together, more than the \(InputLimits.describe(bytes: AppBundleLimits.totalBytes)) tlsaudit reads of an app")
        }
        let infoBytes = try archive.contents(of: infoEntry, limit: AppBundleLimits.infoPlistBytes, what: "an Info.plist")
        try budget.spend(infoBytes.count, on: infoEntry.name)
        let plist = try parseInfoPlist(infoBytes, file: "\(path): \(infoEntry.name)")
        var certificates: [BundledCertificate] = []
        for entry in certificateEntries {
            let der = try archive.contents(of: entry, limit: AppBundleLimits.certificateBytes, what: "a certificate file")
            try budget.spend(der.count, on: entry.name)
            certificates.append(BundledCertificate(fileName: String(entry.name.dropFirst(prefix.count)), der: der))
        }
        return try bundle(path: path, source: .archive(app: "Payload/\(app)"), infoPlist: plist, infoBytes: infoBytes,
                          plistFile: "\(path): \(infoEntry.name)", onDisk: false, certificates: certificates)
    }

    // MARK: - Shared steps

    static func isCertificateName(_ name: String) -> Bool {
        let fileExtension = (name as NSString).pathExtension
        return certificateExtensions.contains(fileExtension) && fileExtension.count < name.count - 1
    }

    private static func startsLikeZip(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let magic = (try? handle.read(upToCount: 4)) ?? Data()
        return magic == Data([0x50, 0x4B, 0x03, 0x04]) || magic == Data([0x50, 0x4B, 0x05, 0x06])
    }

    private static func readFile(_ path: String, limit: Int, what: String) throws(AppBundleError) -> [UInt8] {
        var info = stat()
        if stat(path, &info) == 0, info.st_size > limit {
            throw AppBundleError(.tooLarge, file: path, "\(info.st_size) bytes, more than the \(InputLimits.describe(bytes: limit)) \(what) may be; refused")
        }
        do {
            return try InputLimits.read(path, limit: limit, what: what)
        } catch {
            throw AppBundleError(.unreadable, file: path, error.description)
        }
    }

    /// The Info.plist's root dictionary; `file` names it in errors (`App.ipa: Payload/Demo.app/Info.plist`).
    static func parseInfoPlist(_ bytes: [UInt8], file: String) throws(AppBundleError) -> [String: PlistValue] {
        var format = PropertyListSerialization.PropertyListFormat.xml
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: &format)
        } catch {
            throw AppBundleError(.invalidPropertyList, file: file, "not a property list (XML or binary)")
        }
        // Foundation also reads the old text (OpenStep) format, in which any word is a string.
        guard format == .xml || format == .binary else {
            throw AppBundleError(.invalidPropertyList, file: file, "not an XML or binary property list")
        }
        guard let value = PlistValue(propertyList: object) else {
            throw AppBundleError(.invalidPropertyList, file: file, "holds a value or key a property list cannot hold")
        }
        guard case .dictionary(let dictionary) = value else {
            throw AppBundleError(.invalidPropertyList, file: file, "the property list's root is \(article(value.typeName)), not a dictionary")
        }
        return dictionary
    }

    /// `onDisk`: `plistFile` is a file of its own (not an archive's entry).
    private static func bundle(path: String, source: AppBundle.Source, infoPlist: [String: PlistValue], infoBytes: [UInt8],
                               plistFile: String, onDisk: Bool, certificates: [BundledCertificate]) throws(AppBundleError) -> AppBundle {
        let identifier = infoPlist["CFBundleIdentifier"]
        if let identifier, identifier.stringValue == nil {
            throw AppBundleError(.invalidPropertyList, file: plistFile, "CFBundleIdentifier is \(article(identifier.typeName)), not a string")
        }
        var bundle = AppBundle(path: path, source: source, bundleIdentifier: identifier?.stringValue, infoPlist: infoPlist,
                               certificates: certificates)
        bundle.infoPlistFile = onDisk ? plistFile : nil
        bundle.infoPlistXML = infoBytes.starts(with: Array("bplist".utf8)) ? nil : String(validating: infoBytes, as: UTF8.self)
        return bundle
    }

    private static func article(_ typeName: String) -> String {
        ["a", "i"].contains(typeName.first.map(String.init) ?? "") ? "an \(typeName)" : "a \(typeName)"
    }

    /// The running total against ``AppBundleLimits/totalBytes``.
    private struct Budget {
        let file: String
        var spent = 0

        mutating func spend(_ bytes: Int, on name: String) throws(AppBundleError) {
            spent += bytes
            guard spent <= AppBundleLimits.totalBytes else {
                throw AppBundleError(.tooLarge, file: file, "reading \(name) brings the app past \(InputLimits.describe(bytes: AppBundleLimits.totalBytes)), the most tlsaudit reads of an app")
            }
        }
    }
}
