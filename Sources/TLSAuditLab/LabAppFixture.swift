import Foundation
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// iOS app fixtures for the tests: Info.plists made by Python's plistlib (XML and binary), .app
/// directories and .ipa archives by Python's zipfile (hostile ones too), with lab certificates;
/// in a directory of their own under the test run's, removed at exit.
public enum AppFixture {
    public static let root: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-app-\(getpid())").path
        atexit { try? FileManager.default.removeItem(atPath: AppFixture.root) }
        return path
    }()

    public static func directory() throws -> String {
        let path = root + "/" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Three lab certificates: a leaf, a second leaf, the root.
    public static func certificates() throws -> [LabCertificate] {
        let root = try LabCertificateAuthority.selfSigned(.authority("app fixture root"))
        return [try root.issue(.server(["api.example.com"])), try root.issue(.server(["backup.example.com"])), root]
    }

    /// Writes `literal` (a Python expression) with plistlib in `format` (`FMT_XML`, `FMT_BINARY`).
    public static func plist(_ literal: String, format: String, at path: String) throws -> String {
        try python("import datetime, plistlib, sys\nopen(sys.argv[1], 'wb').write(plistlib.dumps(\(literal), fmt=plistlib.\(format)))", [path])
        return path
    }

    public struct Entry: Encodable {
        var name: String
        var file: String?
        var text: String?
        /// zipfile's constant: ZIP_DEFLATED, ZIP_STORED, ZIP_BZIP2, ZIP_LZMA.
        var compression: String

        public init(_ name: String, file: String? = nil, text: String? = nil, compression: String = "ZIP_DEFLATED") {
            (self.name, self.file, self.text, self.compression) = (name, file, text, compression)
        }
    }

    /// A zip made by Python's zipfile, entries in this order with the names exactly as given.
    public static func zip(at path: String, entries: [Entry]) throws -> String {
        let spec = String(decoding: try JSONEncoder().encode(entries), as: UTF8.self)
        try python("""
            import json, sys, zipfile
            with zipfile.ZipFile(sys.argv[1], 'w') as archive:
                for entry in json.loads(sys.argv[2]):
                    info = zipfile.ZipInfo(entry['name'])
                    info.compress_type = getattr(zipfile, entry['compression'])
                    data = open(entry['file'], 'rb').read() if entry.get('file') else (entry.get('text') or '').encode()
                    archive.writestr(info, data)
            """, [path, spec])
        return path
    }

    /// A one-entry zip whose entry is `mebibytes` MiB of zeros, deflated. Written by hand rather
    /// than by zipfile (which took 20 s for 1 GiB here): 1 MiB is deflated once with a full flush
    /// and that block repeated, the CRC-32 computed over the zeros. `declared` replaces the
    /// uncompressed size in both headers (a bomb that lies).
    public static func bomb(at path: String, entry: String, mebibytes: Int, declared: Int? = nil) throws {
        try python("""
            import struct, sys, zlib
            path, name, mib = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
            chunk = bytes(1 << 20)
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
            assert block == c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
            data = block * (mib - 1) + c.compress(chunk) + c.flush()
            crc = 0
            for _ in range(mib): crc = zlib.crc32(chunk, crc)
            size = int(sys.argv[4]) if len(sys.argv) > 4 else mib << 20
            local = struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 8, 0, 0, crc, len(data), size, len(name), 0) + name
            central = struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 8, 0, 0, crc, len(data), size, len(name), 0, 0, 0, 0, 0, 0) + name
            end = struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 1, 1, len(central), len(local) + len(data), 0)
            open(path, 'wb').write(local + data + central + end)
            """, [path, entry, String(mebibytes)] + (declared.map { [String($0)] } ?? []))
    }

    public static func python(_ script: String, _ arguments: [String]) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try LabPrerequisite.program(["python3"], package: "python3"))
        process.arguments = ["-c", script] + arguments
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw LabError("python3 failed making a fixture: \(String(decoding: message, as: UTF8.self))")
        }
    }
}
