public import Foundation
import TLSAuditProbe

/// The tests' PKI: one trusted root and intermediate, plus a second, untrusted root, and a
/// client CA. Generated once per test process with the lab CA (real OpenSSL certificates).
public struct TestPKI: Sendable {
    public static let shared: TestPKI = try! TestPKI()

    public let root: LabCertificate
    public let intermediate: LabCertificate
    public let otherRoot: LabCertificate
    public let otherIntermediate: LabCertificate
    /// A directory with root.pem (the trusted anchor) and client credentials.
    public let directory: URL
    public var rootFile: String { directory.appendingPathComponent("root.pem").path }
    public var clientCertificateFile: String { directory.appendingPathComponent("client.pem").path }
    public var clientKeyFile: String { directory.appendingPathComponent("client-key.pem").path }
    public let clientAuthority: LabCertificate

    private init() throws {
        root = try LabCertificateAuthority.selfSigned(.authority("tlsaudit test root", key: .rsa(bits: 2048)))
        intermediate = try root.issue(.authority("tlsaudit test intermediate", key: .rsa(bits: 2048)))
        otherRoot = try LabCertificateAuthority.selfSigned(.authority("untrusted test root"))
        otherIntermediate = try otherRoot.issue(.authority("untrusted test intermediate"))
        clientAuthority = try LabCertificateAuthority.selfSigned(.authority("client test CA"))
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-tests-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Gone when the test process exits (a crashed run leaves it to look at).
        atexit { try? FileManager.default.removeItem(at: TestPKI.shared.directory) }
        try root.pem.write(to: directory.appendingPathComponent("root.pem"), atomically: true, encoding: .utf8)
        var clientRequest = LabCertificateRequest(commonName: "test client")
        clientRequest.extendedKeyUsage = "clientAuth"
        let client = try clientAuthority.issue(clientRequest)
        try client.pem.write(to: directory.appendingPathComponent("client.pem"), atomically: true, encoding: .utf8)
        try client.key.pem.write(to: directory.appendingPathComponent("client-key.pem"), atomically: true, encoding: .utf8)
    }

    /// A leaf for `name` issued by the trusted intermediate.
    public func leaf(_ name: String = TestPKI.hostname, key: LabKeyType = .rsa(bits: 2048), digest: LabDigest = .sha256,
              adjust: (inout LabCertificateRequest) -> Void = { _ in }) throws -> LabCertificate {
        var request = LabCertificateRequest.server([name], key: key, digest: digest)
        adjust(&request)
        return try intermediate.issue(request)
    }

    /// The name every test server answers as.
    public static let hostname = "server.tlsaudit.test"
}
