import Foundation
import Testing
import TLSAuditApp
import TLSAuditModel
import TLSAuditLab

/// Reading an iOS app's ATS inputs from real fixtures made here: plists by
/// Python's plistlib (XML and binary), an .app directory and .ipa archives by Python's zipfile
/// with certificates from the lab CA, and hostile archives (paths out of the archive, deflate
/// bombs, a truncated zip, two apps).
@Suite("AppBundleReader")
struct AppBundleReaderTests {
    /// The Info.plist every fixture carries, as a Python literal: every plist type, an integer
    /// where ATS wants a boolean, a domain key with dots.
    static let infoPlist = """
        {"CFBundleIdentifier": "com.example.demo", "CFBundleVersion": "7",
         "NSAppTransportSecurity": {
           "NSAllowsArbitraryLoads": True,
           "NSAllowsLocalNetworking": 1,
           "NSExceptionDomains": {"api.example.com": {"NSIncludesSubdomains": True,
                                                      "NSExceptionMinimumTLSVersion": "TLSv1.2"}},
           "NSPinnedDomains": {"pinned.example.com": {"NSPinnedLeafIdentities": [{"SPKI-SHA256-BASE64": "AAAA"}]}},
           "Weight": 1.5, "Since": datetime.datetime(2024, 5, 6, 7, 8, 9), "Blob": b"\\x00\\x01"}}
        """

    /// What `infoPlist` reads as, with every type kept.
    static let expectedATS: PlistValue = .dictionary([
        "NSAllowsArbitraryLoads": .bool(true),
        "NSAllowsLocalNetworking": .integer(1),
        "NSExceptionDomains": .dictionary(["api.example.com": .dictionary([
            "NSIncludesSubdomains": .bool(true), "NSExceptionMinimumTLSVersion": .string("TLSv1.2")])]),
        "NSPinnedDomains": .dictionary(["pinned.example.com": .dictionary([
            "NSPinnedLeafIdentities": .array([.dictionary(["SPKI-SHA256-BASE64": .string("AAAA")])])])]),
        "Weight": .real(1.5),
        "Since": .date(Date(timeIntervalSince1970: 1_714_979_289)),
        "Blob": .data(Data([0, 1])),
    ])

    // MARK: - Info.plist alone

    @Test("an XML Info.plist: identifier, NSAppTransportSecurity with its types, no certificates")
    func xmlPlist() throws {
        let directory = try AppFixture.directory()
        let path = try AppFixture.plist(Self.infoPlist, format: "FMT_XML", at: directory + "/Info.plist")
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("<?xml"))
        let app = try AppBundleReader.read(path: path)
        #expect(app.source == .infoPlist)
        #expect(app.bundleIdentifier == "com.example.demo")
        #expect(app.appTransportSecurity == Self.expectedATS)
        #expect(app.infoPlist["CFBundleVersion"] == .string("7"))
        #expect(app.certificates.isEmpty)
    }

    @Test("a binary Info.plist reads exactly as its XML twin")
    func binaryPlist() throws {
        let directory = try AppFixture.directory()
        let binary = try AppFixture.plist(Self.infoPlist, format: "FMT_BINARY", at: directory + "/binary.plist")
        let xml = try AppFixture.plist(Self.infoPlist, format: "FMT_XML", at: directory + "/xml.plist")
        #expect(try Data(contentsOf: URL(fileURLWithPath: binary)).prefix(8) == Data("bplist00".utf8))
        let app = try AppBundleReader.read(path: binary)
        #expect(app.appTransportSecurity == Self.expectedATS)
        #expect(try AppBundleReader.read(path: xml).infoPlist == app.infoPlist)
    }

    @Test("key paths name every ATS value, domain keys quoted; types named as plist elements")
    func keyPaths() throws {
        let found = Dictionary(uniqueKeysWithValues: Self.expectedATS.descendants(at: PlistKeyPath(keys: AppBundle.appTransportSecurityKey))
            .map { ($0.path.description, $0.value.typeName) })
        #expect(found["NSAppTransportSecurity"] == "dictionary")
        #expect(found["NSAppTransportSecurity.NSExceptionDomains[\"api.example.com\"].NSIncludesSubdomains"] == "boolean")
        #expect(found["NSAppTransportSecurity.NSAllowsLocalNetworking"] == "integer")
        #expect(found["NSAppTransportSecurity.NSPinnedDomains[\"pinned.example.com\"].NSPinnedLeafIdentities[0][\"SPKI-SHA256-BASE64\"]"] == "string")
        #expect(found.count == 15)
    }

    @Test("a plist whose root is not a dictionary, text that is not a plist: each a clear error naming the file")
    func notADictionary() throws {
        let directory = try AppFixture.directory()
        let array = try AppFixture.plist("[\"a\", 1]", format: "FMT_XML", at: directory + "/Info.plist")
        let error = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: array) }
        #expect(error.code == .invalidPropertyList)
        #expect(error.description == "\(array): the property list's root is an array, not a dictionary")
        let text = directory + "/notes.plist"
        try "hello".write(toFile: text, atomically: true, encoding: .utf8)
        let textError = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: text) }
        #expect(textError.description == "\(text): not an XML or binary property list")
        let missing = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: directory + "/absent.plist") }
        #expect(missing.code == .unreadable)
    }

    // MARK: - .app directory

    @Test(".app: the top-level .cer and .der files, as AFNetworking's certificatesInBundle takes them")
    func appDirectory() throws {
        let certificates = try AppFixture.certificates()
        let app = try AppFixture.directory() + "/Demo.app"
        try FileManager.default.createDirectory(atPath: app + "/Frameworks/Pins.framework", withIntermediateDirectories: true)
        _ = try AppFixture.plist(Self.infoPlist, format: "FMT_BINARY", at: app + "/Info.plist")
        try Data(certificates[0].der).write(to: URL(fileURLWithPath: app + "/api.cer"))
        try Data(certificates[1].der).write(to: URL(fileURLWithPath: app + "/backup.cer"))
        try Data(certificates[2].der).write(to: URL(fileURLWithPath: app + "/root.der"))
        // Not taken: another extension, a subdirectory (a framework's own bundle), an upper-case extension.
        try certificates[0].pem.write(toFile: app + "/api.pem", atomically: true, encoding: .utf8)
        try Data(certificates[0].der).write(to: URL(fileURLWithPath: app + "/Frameworks/Pins.framework/inner.cer"))
        try Data(certificates[0].der).write(to: URL(fileURLWithPath: app + "/UPPER.CER"))
        let read = try AppBundleReader.read(path: app)
        #expect(read.source == .appDirectory)
        #expect(read.bundleIdentifier == "com.example.demo")
        #expect(read.certificates.map(\.fileName) == ["api.cer", "backup.cer", "root.der"])
        #expect(read.certificates.map(\.der) == certificates.map(\.der))
    }

    @Test(".app without Info.plist, and a certificate over its limit: clear errors")
    func appDirectoryErrors() throws {
        let app = try AppFixture.directory() + "/Empty.app"
        try FileManager.default.createDirectory(atPath: app, withIntermediateDirectories: true)
        let missing = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: app) }
        #expect(missing.code == .missingInfoPlist)
        #expect(missing.description.hasPrefix("\(app): no Info.plist"))
        _ = try AppFixture.plist(Self.infoPlist, format: "FMT_XML", at: app + "/Info.plist")
        try Data(count: AppBundleLimits.certificateBytes + 1).write(to: URL(fileURLWithPath: app + "/huge.cer"))
        let huge = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: app) }
        #expect(huge.code == .tooLarge)
        #expect(huge.description == "\(app)/huge.cer: 65537 bytes, more than the 64 KiB a certificate file may be; refused")
    }

    // MARK: - .ipa

    @Test(".ipa: Info.plist and the app's top-level certificates (stored and deflated); no other entry is read")
    func ipa() throws {
        let directory = try AppFixture.directory()
        let certificates = try AppFixture.certificates()
        let plist = try AppFixture.plist(Self.infoPlist, format: "FMT_BINARY", at: directory + "/Info.plist")
        for (index, certificate) in certificates.enumerated() {
            try Data(certificate.der).write(to: URL(fileURLWithPath: directory + "/\(index).der"))
        }
        // Entries compressed with bzip2 and LZMA, which the reader refuses: reading any of them would fail.
        let ipa = try AppFixture.zip(at: directory + "/Demo.ipa", entries: [
            .init("Payload/"), .init("Payload/Demo.app/"),
            .init("Payload/Demo.app/Info.plist", file: plist),
            .init("Payload/Demo.app/api.cer", file: directory + "/0.der"),
            .init("Payload/Demo.app/backup.cer", file: directory + "/1.der", compression: "ZIP_STORED"),
            .init("Payload/Demo.app/root.der", file: directory + "/2.der"),
            .init("Payload/Demo.app/Frameworks/Pins.framework/inner.cer", file: directory + "/0.der", compression: "ZIP_BZIP2"),
            .init("Payload/Demo.app/Demo", text: "an executable", compression: "ZIP_BZIP2"),
            .init("Payload/Demo.app/api.pem", text: "not a .cer", compression: "ZIP_LZMA"),
            .init("iTunesMetadata.plist", text: "not read", compression: "ZIP_LZMA"),
        ])
        let app = try AppBundleReader.read(path: ipa)
        #expect(app.source == .archive(app: "Payload/Demo.app"))
        #expect(app.bundleIdentifier == "com.example.demo")
        #expect(app.appTransportSecurity == Self.expectedATS)
        #expect(app.certificates.map(\.fileName) == ["api.cer", "backup.cer", "root.der"])
        #expect(app.certificates.map(\.der) == certificates.map(\.der))
    }

    @Test("entries named ../evil, Payload/Demo.app/../../evil or /etc/evil are refused, naming the entry")
    func pathsOutOfTheArchive() throws {
        let directory = try AppFixture.directory()
        let plist = try AppFixture.plist(Self.infoPlist, format: "FMT_XML", at: directory + "/Info.plist")
        let cases = [("../evil", "has a '..' component"), ("Payload/Demo.app/../../evil", "has a '..' component"),
                     ("/etc/evil", "is an absolute path")]
        for (index, (name, why)) in cases.enumerated() {
            let ipa = try AppFixture.zip(at: directory + "/evil\(index).ipa", entries: [
                .init("Payload/Demo.app/Info.plist", file: plist), .init(name, text: "owned"),
            ])
            let error = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: ipa) }
            #expect(error.code == .unsafeEntryName)
            #expect(error.description == "\(ipa): entry \"\(name)\" \(why); refused (an archive that could write outside its directory)")
        }
        #expect(FileManager.default.fileExists(atPath: directory + "/evil") == false)
    }

    @Test("a deflate bomb (1 GiB of zeros as Info.plist) is refused by its declared size, at once, in bounded memory")
    func deflateBomb() throws {
        let ipa = try AppFixture.directory() + "/bomb.ipa"
        try AppFixture.bomb(at: ipa, entry: "Payload/Demo.app/Info.plist", mebibytes: 1024)
        let (error, seconds, growth) = try AppFixture.measure { _ = try AppBundleReader.read(path: ipa) }
        #expect(error?.code == .tooLarge)
        #expect(error?.description == "\(ipa): entry \"Payload/Demo.app/Info.plist\" is 1073741824 bytes uncompressed, more than the 4 MiB an Info.plist may be; refused")
        #expect(seconds < 1)
        #expect(growth < 32 << 20, "peak resident set grew by \(growth >> 20) MiB")
    }

    @Test("a deflate bomb whose header lies (declares 4 KiB) stops inflating at 4 KiB: refused, at once, in bounded memory")
    func lyingDeflateBomb() throws {
        let ipa = try AppFixture.directory() + "/liar.ipa"
        try AppFixture.bomb(at: ipa, entry: "Payload/Demo.app/Info.plist", mebibytes: 1024, declared: 4096)
        let (error, seconds, growth) = try AppFixture.measure { _ = try AppBundleReader.read(path: ipa) }
        #expect(error?.code == .tooLarge)
        #expect(error?.description == "\(ipa): entry \"Payload/Demo.app/Info.plist\" inflates to more than the 4096 bytes its header declares; refused (a deflate bomb or a damaged archive)")
        #expect(seconds < 1)
        #expect(growth < 32 << 20, "peak resident set grew by \(growth >> 20) MiB")
    }

    @Test("a truncated .ipa, a damaged entry, two apps, no app, no Info.plist: each a clear error")
    func brokenArchives() throws {
        let directory = try AppFixture.directory()
        let plist = try AppFixture.plist(Self.infoPlist, format: "FMT_XML", at: directory + "/Info.plist")
        let good = try AppFixture.zip(at: directory + "/good.ipa", entries: [.init("Payload/Demo.app/Info.plist", file: plist, compression: "ZIP_STORED")])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: good))

        let truncated = directory + "/truncated.ipa"
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: truncated))
        let cut = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: truncated) }
        #expect(cut.code == .corruptArchive)
        #expect(cut.description.hasPrefix("\(truncated): not a zip archive, or truncated: no end-of-central-directory record"))

        // One byte of the stored Info.plist changed: its CRC-32 no longer matches.
        var damagedBytes = bytes
        let offset = try #require(damagedBytes.range(of: Data("com.example.demo".utf8))).lowerBound
        damagedBytes[offset] = UInt8(ascii: "C")
        let damaged = directory + "/damaged.ipa"
        try damagedBytes.write(to: URL(fileURLWithPath: damaged))
        let crc = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: damaged) }
        #expect(crc.code == .corruptArchive)
        #expect(crc.description == "\(damaged): entry \"Payload/Demo.app/Info.plist\" fails its CRC-32 check (damaged)")

        let two = try AppFixture.zip(at: directory + "/two.ipa", entries: [
            .init("Payload/B.app/Info.plist", file: plist), .init("Payload/A.app/Info.plist", file: plist),
        ])
        let several = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: two) }
        #expect(several.code == .severalApps)
        #expect(several.description == "\(two): 2 apps in the archive (Payload/A.app, Payload/B.app); an .ipa holds one")

        let none = try AppFixture.zip(at: directory + "/none.ipa", entries: [.init("Demo.app/Info.plist", file: plist)])
        #expect(throws: AppBundleError(.noApp, file: none, "no Payload/*.app directory in the archive: not an iOS app (.ipa)")) {
            try AppBundleReader.read(path: none)
        }

        let noPlist = try AppFixture.zip(at: directory + "/noplist.ipa", entries: [.init("Payload/Demo.app/api.cer", text: "x")])
        #expect(throws: AppBundleError(.missingInfoPlist, file: noPlist, "no entry Payload/Demo.app/Info.plist in the archive")) {
            try AppBundleReader.read(path: noPlist)
        }

        let arrayPlist = try AppFixture.plist("[1]", format: "FMT_BINARY", at: directory + "/array.plist")
        let arrayApp = try AppFixture.zip(at: directory + "/array.ipa", entries: [.init("Payload/Demo.app/Info.plist", file: arrayPlist)])
        let notDictionary = try #require(throws: AppBundleError.self) { try AppBundleReader.read(path: arrayApp) }
        #expect(notDictionary.description == "\(arrayApp): Payload/Demo.app/Info.plist: the property list's root is an array, not a dictionary")
    }
}

extension AppFixture {
    /// Runs `body`, returning the error it threw, its wall time, and how far the process's peak
    /// resident set (VmHWM, reset first through /proc/self/clear_refs) rose above the resident set before.
    static func measure(_ body: () throws -> Void) throws -> (AppBundleError?, Double, Int) {
        let clear = try #require(FileHandle(forWritingAtPath: "/proc/self/clear_refs"))
        try clear.write(contentsOf: Data("5".utf8))
        try clear.close()
        let before = status("VmRSS")
        let start = Date()
        var thrown: AppBundleError?
        do { try body() } catch let error as AppBundleError { thrown = error }
        let seconds = Date().timeIntervalSince(start)
        return (thrown, seconds, status("VmHWM") - before)
    }

    /// A `kB` line of /proc/self/status, in bytes.
    static func status(_ field: String) -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
}
