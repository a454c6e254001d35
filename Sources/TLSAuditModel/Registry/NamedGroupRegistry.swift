/// One named group of the IANA TLS Supported Groups registry.
public struct NamedGroupInfo: Sendable, Hashable {
    public let code: UInt16
    /// IANA's name (`x25519`, `secp256r1`, `ffdhe2048`, `X25519MLKEM768`).
    public let name: String
    /// OpenSSL's name in a groups list when this libssl (OpenSSL 3.0) can offer it.
    public let openssl: String?
    public let kind: Kind

    public enum Kind: String, Sendable {
        /// An elliptic curve (or x25519 / x448).
        case ellipticCurve
        /// An RFC 7919 finite-field group.
        case finiteField
        /// A post-quantum hybrid (ML-KEM / Kyber with a classical curve).
        case postQuantumHybrid
        /// A GOST curve (RFC 9189).
        case gost
    }
}

/// Every named group tlsaudit offers on the wire (IANA TLS Supported Groups), in code order.
public enum NamedGroupRegistry {
    public static let all: [NamedGroupInfo] = {
        let sect: [(UInt16, String)] = [(1, "sect163k1"), (2, "sect163r1"), (3, "sect163r2"), (4, "sect193r1"), (5, "sect193r2"),
                                        (6, "sect233k1"), (7, "sect233r1"), (8, "sect239k1"), (9, "sect283k1"), (10, "sect283r1"),
                                        (11, "sect409k1"), (12, "sect409r1"), (13, "sect571k1"), (14, "sect571r1"),
                                        (15, "secp160k1"), (16, "secp160r1"), (17, "secp160r2"), (18, "secp192k1"), (19, "secp192r1"),
                                        (20, "secp224k1"), (21, "secp224r1"), (22, "secp256k1")]
        var groups = sect.map { NamedGroupInfo(code: $0.0, name: $0.1, openssl: nil, kind: .ellipticCurve) }
        groups += [
            NamedGroupInfo(code: 0x0017, name: "secp256r1", openssl: "P-256", kind: .ellipticCurve),
            NamedGroupInfo(code: 0x0018, name: "secp384r1", openssl: "P-384", kind: .ellipticCurve),
            NamedGroupInfo(code: 0x0019, name: "secp521r1", openssl: "P-521", kind: .ellipticCurve),
            NamedGroupInfo(code: 0x001A, name: "brainpoolP256r1", openssl: nil, kind: .ellipticCurve),
            NamedGroupInfo(code: 0x001B, name: "brainpoolP384r1", openssl: nil, kind: .ellipticCurve),
            NamedGroupInfo(code: 0x001C, name: "brainpoolP512r1", openssl: nil, kind: .ellipticCurve),
            NamedGroupInfo(code: 0x001D, name: "x25519", openssl: "X25519", kind: .ellipticCurve),
            NamedGroupInfo(code: 0x001E, name: "x448", openssl: "X448", kind: .ellipticCurve),
            NamedGroupInfo(code: 0x001F, name: "brainpoolP256r1tls13", openssl: nil, kind: .ellipticCurve),
            NamedGroupInfo(code: 0x0020, name: "brainpoolP384r1tls13", openssl: nil, kind: .ellipticCurve),
            NamedGroupInfo(code: 0x0021, name: "brainpoolP512r1tls13", openssl: nil, kind: .ellipticCurve),
        ]
        groups += [(0x22, "GC256A"), (0x23, "GC256B"), (0x24, "GC256C"), (0x25, "GC256D"),
                   (0x26, "GC512A"), (0x27, "GC512B"), (0x28, "GC512C")].map { NamedGroupInfo(code: $0.0, name: $0.1, openssl: nil, kind: .gost) }
        groups += ["ffdhe2048", "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192"].enumerated().map {
            NamedGroupInfo(code: 0x0100 + UInt16($0.offset), name: $0.element, openssl: $0.element, kind: .finiteField)
        }
        groups += [(0x11EB, "SecP256r1MLKEM768"), (0x11EC, "X25519MLKEM768"), (0x11ED, "SecP384r1MLKEM1024"),
                   (0x6399, "X25519Kyber768Draft00")].map { NamedGroupInfo(code: $0.0, name: $0.1, openssl: nil, kind: .postQuantumHybrid) }
        return groups
    }()

    public static func group(_ code: UInt16) -> NamedGroupInfo? { all.first { $0.code == code } }

    /// The group's IANA name, or `group 0x1234` when the registry lacks it.
    public static func name(_ code: UInt16) -> String { group(code)?.name ?? "group 0x" + String(code, radix: 16, uppercase: true).leftPadded(to: 4) }
    public static func group(named name: String) -> NamedGroupInfo? { all.first { $0.name == name } }
}
