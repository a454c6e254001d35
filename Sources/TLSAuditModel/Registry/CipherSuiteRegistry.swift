import Foundation
import TLSAuditSupport

/// One IANA cipher suite as the registry describes it (`CipherSuiteRegistry`): its code point,
/// names, the protocol that introduced it and its parts, so suites this libssl cannot offer
/// (RC4, 3DES, export, NULL, anonymous, IDEA, SEED, ARIA, Camellia, GOST, PSK) can be offered on
/// the wire and judged.
public struct CipherSuiteInfo: Sendable, Hashable {
    public let code: UInt16
    /// IANA / RFC name (`TLS_RSA_WITH_RC4_128_SHA`); nil for the few suites only OpenSSL named.
    public let iana: String?
    /// OpenSSL's name (`RC4-SHA`); nil where OpenSSL never named it.
    public let openssl: String?
    /// The first protocol that defines it: `SSLv3`, `TLSv1`, `TLSv1.2`, `TLSv1.3`.
    public let introducedIn: String
    /// Key exchange as testssl.sh's mapping writes it: `ECDH` (ephemeral), `DH` (ephemeral, or
    /// anonymous with no authentication), `DH/RSA` (static), `RSA`, `RSA(512)` (export), `PSK`, ...
    public let keyExchangeField: String
    /// Authentication: `RSA`, `ECDSA`, `DSS`, `PSK`, `None` (anonymous), `any` (TLS 1.3), ...
    public let authentication: String
    /// Bulk cipher: `AESGCM`, `AES`, `3DES`, `RC4`, `DES`, `ChaCha20`, `None`, ...
    public let encryption: String
    public let encryptionBits: Int
    /// `AEAD`, `SHA1`, `SHA256`, `SHA384`, `MD5`, ...
    public let mac: String
    public let isExport: Bool

    init(_ code: UInt16, _ iana: String?, _ openssl: String?, _ introducedIn: String, _ keyExchange: String,
         _ authentication: String, _ encryption: String, _ bits: Int, _ mac: String, export: Bool) {
        self.code = code
        self.iana = iana
        self.openssl = openssl
        self.introducedIn = introducedIn
        self.keyExchangeField = keyExchange
        self.authentication = authentication
        self.encryption = encryption
        self.encryptionBits = bits
        self.mac = mac
        self.isExport = export
    }

    /// `0xC02F`.
    public var codeText: String { "0x" + String(code, radix: 16, uppercase: true).leftPadded(to: 4) }
    /// The IANA name, else OpenSSL's, else the code.
    public var name: String { iana ?? openssl ?? codeText }

    public var isTLS13: Bool { introducedIn == "TLSv1.3" }
    /// Suites that exist before TLS 1.2 (SSLv3, TLS 1.0, 1.1); TLS 1.2 adds the GCM/SHA-256 ones.
    public var existsBeforeTLS12: Bool { introducedIn == "SSLv3" || introducedIn == "TLSv1" }
    public var isAEAD: Bool { mac == "AEAD" }
    /// A block cipher in CBC mode (every non-AEAD, non-stream, non-NULL cipher of the registry).
    public var isCBC: Bool { !isAEAD && !["RC4", "None", "GOST"].contains(encryption) }
    /// 64-bit blocks: 3DES, DES, IDEA, RC2 (SWEET32).
    public var has64BitBlocks: Bool { ["3DES", "DES", "IDEA", "RC2"].contains(encryption) }
    public var isRC4: Bool { encryption == "RC4" }
    public var isNullEncryption: Bool { encryption == "None" }
    /// No server authentication (anonymous DH or ECDH).
    public var isAnonymous: Bool { authentication == "None" }
    /// Ephemeral (EC)DH: the key exchange is signed and the session keys die with the connection.
    public var hasForwardSecrecy: Bool {
        isTLS13 || ["DH", "ECDH", "DHEPSK", "ECDHEPSK", "CECPQ1"].contains(keyExchangeField) && !isAnonymous
    }
    /// The server signs its key exchange (DHE and ECDHE with a certificate): the suites a
    /// signature-algorithm probe must use.
    public var serverSignsKeyExchange: Bool { (keyExchangeField == "DH" || keyExchangeField == "ECDH") && !isAnonymous }
    /// Export RSA: the server may send a 512-bit RSA key to encrypt with (FREAK).
    public var isExportRSA: Bool { isExport && keyExchangeField.hasPrefix("RSA") }
    /// Export DH: 512-bit (or 1024-bit) ephemeral DH (LOGJAM).
    public var isExportDH: Bool { isExport && keyExchangeField.hasPrefix("DH") }
    /// Finite-field ephemeral DH (DHE, anonymous DH included), whose prime LOGJAM's checks read.
    public var isFiniteFieldDH: Bool { keyExchangeField.hasPrefix("DH") && !keyExchangeField.contains("/" as Character) && keyExchangeField != "DHEPSK" }
    /// Ephemeral elliptic-curve DH (ECDHE, anonymous included).
    public var isEllipticCurveDH: Bool { keyExchangeField == "ECDH" }
    /// Needs a pre-shared key, SRP password or Kerberos: never negotiated with an unauthenticated scanner.
    public var needsCredentials: Bool { ["PSK", "DHEPSK", "RSAPSK", "ECDHEPSK", "SRP", "KRB5"].contains(keyExchangeField) || authentication == "PSK" }

    /// The description the handshake records and reports carry.
    public var description: CipherSuiteDescription {
        let exchange: String = switch keyExchangeField {
        case "ECDH": isAnonymous ? "AECDH" : "ECDHE"
        case "DH": isAnonymous ? "ADH" : "DHE"
        case "any": "any"
        default: keyExchangeField.replacingOccurrences(of: "(512)", with: "-EXPORT").replacingOccurrences(of: "(1024)", with: "-EXPORT1024")
        }
        return CipherSuiteDescription(iana: iana ?? openssl ?? codeText, openssl: openssl ?? iana ?? codeText, code: codeText,
                                      keyExchange: exchange, authentication: authentication, isAEAD: isAEAD, strengthBits: encryptionBits)
    }
}

/// Every cipher suite of the IANA registry tlsaudit knows (357, from testssl.sh's mapping, see
/// `scripts/generate-tls-registry`), and the signalling values.
public enum CipherSuiteRegistry {
    /// Every suite, by code point.
    public static var all: [CipherSuiteInfo] { table }

    private static let byCode: [UInt16: CipherSuiteInfo] = Dictionary(table.map { ($0.code, $0) }) { first, _ in first }

    public static func suite(_ code: UInt16) -> CipherSuiteInfo? { byCode[code] }

    /// The suite's name (`CipherSuiteInfo.name`), or its code (`0x1234`) when the registry lacks it.
    public static func name(_ code: UInt16) -> String { suite(code)?.name ?? "0x" + code.hex(width: 4, uppercase: true) }

    /// TLS_EMPTY_RENEGOTIATION_INFO_SCSV (RFC 5746).
    public static let renegotiationSCSV: UInt16 = 0x00FF
    /// TLS_FALLBACK_SCSV (RFC 7507).
    public static let fallbackSCSV: UInt16 = 0x5600

    /// The suites a server may pick at `version` (wire value, 0x0300 to 0x0303): TLS 1.3's never;
    /// TLS 1.2's only at TLS 1.2; none that needs a pre-shared key, password or Kerberos.
    public static func offerable(at version: UInt16) -> [CipherSuiteInfo] {
        table.filter { suite in
            !suite.isTLS13 && !suite.needsCredentials && suite.code != 0x0000 && (version >= 0x0303 || suite.existsBeforeTLS12)
        }
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

extension CipherSuiteDescription {
    /// The registry's entry for this suite, by its code point.
    public var registryEntry: CipherSuiteInfo? {
        UInt16(code.dropFirst(2), radix: 16).flatMap(CipherSuiteRegistry.suite)
    }

    /// How the suite encrypts, for people: `AEAD`, `CBC`, `CBC, 64-bit blocks`, `RC4 stream`, `no encryption`.
    public var encryptionMode: String {
        guard let suite = registryEntry else { return isAEAD ? "AEAD" : "CBC" }
        if suite.isAEAD { return "AEAD" }
        if suite.isRC4 { return "RC4 stream" }
        if suite.isNullEncryption { return "no encryption" }
        if suite.has64BitBlocks { return "CBC, 64-bit blocks" }
        if suite.encryption == "GOST" { return "GOST" }
        return "CBC"
    }
}
