import COpenSSL
import Foundation
import Testing
import TLSAuditCore
import TLSAuditModel
@testable import TLSAuditProbe
import TLSAuditLab

/// The probe's handshakes run in an OpenSSL library context of their own
/// (`COpenSSLProbeLibrary`): OpenSSL's default provider with only the DER SubjectPublicKeyInfo key
/// decoders, so that OpenSSL 3.0 builds a small decoder chain for each certificate a server
/// presents. What a key reads as, and every handshake and signature over it, must not change; a
/// client identity (a private key, PEM or PKCS#12) is still read. tlsaudit's own certificate
/// parsing (`X509Certificate(der:)`, a trust store's PEM) uses the same context.
@Suite("the probe's OpenSSL library context")
struct ProbeLibraryContextTests {
    /// Every key type the lab makes, as the default context read it before (but secp256k1, for which the
    /// permissive hello offers no group: its server answers with an anonymous suite, no certificate).
    static let keys: [(LabKeyType, PublicKeyDescription)] = [
        (.rsa(bits: 1024), PublicKeyDescription(type: "RSA", bits: 1024)),
        (.rsa(bits: 2048), PublicKeyDescription(type: "RSA", bits: 2048)),
        (.ec(curve: "P-256"), PublicKeyDescription(type: "EC", bits: 256, curve: "prime256v1")),
        (.ec(curve: "P-384"), PublicKeyDescription(type: "EC", bits: 384, curve: "secp384r1")),
        (.ec(curve: "P-521"), PublicKeyDescription(type: "EC", bits: 521, curve: "secp521r1")),
        (.ed25519, PublicKeyDescription(type: "ED25519", bits: 256)),
        (.rsaPSS(bits: 2048), PublicKeyDescription(type: "RSA-PSS", bits: 2048)),
        (.dsa(bits: 2048), PublicKeyDescription(type: "DSA", bits: 2048)),
    ]

    static func target(port: Int) -> ScanTarget {
        ScanTarget(original: "t", host: TestPKI.hostname, port: port, sni: TestPKI.hostname,
                   connectTo: [ConnectAddress(host: "127.0.0.1")])
    }

    /// One handshake through the scanner's own client context for `profile`, with what it presented.
    static func presented(by server: LabTLSServer, scanner: TLSScanner, profile: ClientProfile) throws -> HandshakeAttempt {
        let target = Self.target(port: server.port)
        let address = try #require(Resolver.numericAddress("127.0.0.1", port: server.port))
        let socket = try TCPSocket.open(to: address, target: target, deadline: Deadline(after: 5), timeout: 5)
        return HandshakeProbe.handshake(socket: socket, address: address, sni: target.sni, context: try scanner.context(profile, for: target),
                                        deadline: Deadline(after: 5), timeout: 5)
    }

    @Test("the context offers fewer decoders than the default provider's, one per key type at most")
    func contextIsMade() {
        // OpenSSL 3.0's default provider has 46 decoders, 11 of them DER SubjectPublicKeyInfo ones.
        #expect((1...16).contains(OpenSSLLibrary.probeContextKeyDecoders), "\(OpenSSLLibrary.probeContextKeyDecoders)")
    }

    @Test("every key type a server presents is decoded in the probe's context and reads as the default context read it; the chain verifies against anchors parsed in the same context")
    func keysReadTheSame() throws {
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: TestPKI.shared.rootFile)),
                                     judge: AddressAssessment.judge)
        for (type, expected) in Self.keys {
            let leaf = try TestPKI.shared.leaf(key: type)
            var configuration = LabServerConfiguration(chain: [leaf, TestPKI.shared.intermediate])
            // OpenSSL's server signs with a DSA key only below TLS 1.3.
            if case .dsa = type {
                configuration.maxVersion = .tls1_2
                configuration.cipherList = "DHE-DSS-AES128-GCM-SHA256:@SECLEVEL=0"
                configuration.dhGroup = .automatic
            }
            let server = try LabTLSServer(configuration)
            defer { server.stop() }
            let attempt = try Self.presented(by: server, scanner: scanner, profile: .permissive)
            let context = "\(type): \(attempt.failure.map { "\($0)" } ?? "")"
            #expect(attempt.observation != nil, "\(context)")
            let presentedLeaf = try #require(attempt.presented.first, "\(context)")
            #expect(presentedLeaf.keyProviderName == "tlsaudit-probe", "\(context)")
            #expect(presentedLeaf.summary().publicKey == expected, "\(context)")
            // tlsaudit's own parses (a DER file, a trust store's PEM) are made in the same context.
            let reparsed = try X509Certificate(der: leaf.der)
            #expect(reparsed.keyProviderName == "tlsaudit-probe", "\(context)")
            #expect(reparsed.summary().publicKey == expected, "\(context)")
            // The path is built and its signatures checked, every certificate in the probe's context.
            let result = scanner.scan(Self.target(port: server.port)).addresses[0]
            #expect(result.chain?.anchored == true, "\(context)")
            #expect(result.chain?.presented.first?.publicKey == expected, "\(context)")
        }
    }

    @Test("without a handshake: each key type's certificate, SM2's (an id-ecPublicKey key on the SM2 curve) and secp256k1's included, reads the same in the probe's context as in the default one")
    func keysParseTheSame() throws {
        for type in Self.keys.map(\.0) + [.ec(curve: "SM2"), .ec(curve: "secp256k1"), .ec(curve: "brainpoolP256r1")] {
            let der = try TestPKI.shared.leaf(key: type).der
            let inDefault: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
                var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_X509(nil, &cursor, buffer.count)
            }
            let defaultReading = X509Certificate(takingOwnershipOf: try #require(inDefault, "\(type)"))
            let probeReading = try X509Certificate(der: der)
            #expect(defaultReading.keyProviderName == "default" && probeReading.keyProviderName == "tlsaudit-probe", "\(type)")
            #expect(probeReading.summary().publicKey == defaultReading.summary().publicKey, "\(type)")
            #expect(probeReading.summary().publicKey.bits > 0, "\(type): \(probeReading.summary().publicKey)")
        }
    }

    @Test("a PEM certificate file: every certificate in it, past a private key's block, parsed in the probe's context; a block that does not decode ends the read without losing those before it")
    func pemCertificatesReadInTheContext() throws {
        let pki = TestPKI.shared
        let key = try String(contentsOfFile: pki.clientKeyFile, encoding: .utf8)
        let certificates = try CertificateFile.parse(Array((key + pki.intermediate.pem + pki.root.pem).utf8), name: "bundle.pem")
        #expect(certificates.map(\.der) == [pki.intermediate.der, pki.root.der])
        #expect(certificates.allSatisfy { $0.keyProviderName == "tlsaudit-probe" })
        let broken = "-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----\n"
        let partial = try CertificateFile.parse(Array((pki.root.pem + broken + pki.intermediate.pem).utf8), name: "broken.pem")
        #expect(partial.map(\.der) == [pki.root.der])
    }

    @Test("a context that presents a client identity (a PEM key) is made in the default context, and the server accepts the identity",
          arguments: [TLSVersion.tls1_2, .tls1_3])
    func clientIdentityIsRead(version: TLSVersion) throws {
        let pki = TestPKI.shared
        let configuration = LabServerConfiguration(chain: [try pki.leaf(), pki.intermediate], minVersion: version, maxVersion: version,
                                                   clientCertificates: .required(trusting: pki.clientAuthority))
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let credentials = ClientCredentials(certificatePath: pki.clientCertificateFile, keyPath: pki.clientKeyFile)
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: try TrustStore(caFile: pki.rootFile), clientCredentials: credentials),
                                     judge: AddressAssessment.judge)
        let attempt = try Self.presented(by: server, scanner: scanner, profile: .permissive)
        #expect(attempt.observation?.clientCertificateRequested == true, "\(attempt.failure.map { "\($0)" } ?? "")")
        #expect(attempt.presented.first?.keyProviderName == "default")
        let result = scanner.scan(Self.target(port: server.port)).addresses[0]
        #expect(result.status == .completed && result.chain?.anchored == true, "\(String(describing: result.error))")
    }
}
