/// What Apple's certificate extension parsers refuse (Security's `SecCertificate.c`, the `SecCEP*`
/// functions `SecCertificateInitializeExtensionParsers` registers), read from their source: a value
/// one of them refuses makes trustd refuse the certificate (when the extension is critical it is
/// never created; otherwise the SSL policy's `UnparseableExtension` check fails it). The parsers are
/// laxer than OpenSSL's decoders in places (a SAN entry is checked by its tag alone, policy
/// qualifiers and an IssuerAltName are never read, a zero-length pathLenConstraint counts as
/// absent) and stricter in others (a keyUsage of three bytes, an empty list, a cA flag other than
/// 0x00 or 0xFF, a pathLenConstraint of 2^32, an authorityKeyIdentifier with an issuer but no
/// serial): this follows them, not OpenSSL.
public enum AppleExtensionParsers {
    /// Why trustd's parser for the extension whose OID content octets are `oid` refuses `value`
    /// (the extnValue OCTET STRING's contents), in a few words; nil when it parses the value or has
    /// no parser that can refuse (IssuerAltName, PrivateKeyUsagePeriod, SubjectInfoAccess,
    /// Netscape's cert type, OCSP noCheck, and extensions it does not know).
    public static func problem(oid: [UInt8], value: [UInt8]) -> String? {
        guard let parser = parsers[oid] else { return nil }
        var reader = DERReader(value[...])
        return parser(&reader)
    }

    /// Whether trustd knows the extension `oid` (content octets), so that marked critical it does
    /// not fail the chain (`kSecPolicyCheckCriticalExtensions`): one it parses, or one it lets pass
    /// unparsed (`isAppleExtensionOID`, `isOtherKnownExtensionOID`). OpenSSL's own list differs both
    /// ways: it lacks the key identifiers, AIA, SIA, IssuerAltName and PrivateKeyUsagePeriod, and
    /// has RFC 3779, the TLS feature and proxy certificates, which trustd refuses when critical.
    public static func recognizes(oid: [UInt8]) -> Bool {
        parsers[oid] != nil || acceptedUnread.contains(oid) || knownUnparsed.contains(oid)
            || knownArcs.contains { oid.count > $0.count && oid.starts(with: $0) }
    }

    /// Extensions trustd has a parser for that never refuses: IssuerAltName, PrivateKeyUsagePeriod,
    /// SubjectInfoAccess, Netscape's cert type, Entrust's version, OCSP noCheck.
    private static let acceptedUnread: Set<[UInt8]> = [
        ce(18), ce(16), pe(11), [0x60, 0x86, 0x48, 0x01, 0x86, 0xF8, 0x42, 0x01, 0x01],
        [0x2A, 0x86, 0x48, 0x86, 0xF6, 0x7D, 0x07, 0x41, 0x00], [0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x05],
    ]
    /// Microsoft's application policies (1.3.6.1.4.1.311.21.10) and two 2.23.148 OIDs.
    private static let knownUnparsed: Set<[UInt8]> = [
        [0x2B, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x15, 0x0A], [0x67, 0x81, 0x14, 0x01, 0x01], [0x67, 0x81, 0x14, 0x01, 0x02],
    ]
    /// Apple's arcs 1.2.840.113635.100.{6,11,12,13,15}, 1.3.6.1.4.1.41577.5 and 2.23.146.2.1.
    private static let knownArcs: [[UInt8]] = [0x06, 0x0B, 0x0C, 0x0D, 0x0F].map { [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x63, 0x64, $0] }
        + [[0x2B, 0x06, 0x01, 0x04, 0x01, 0x82, 0xC4, 0x69, 0x05], [0x67, 0x81, 0x12, 0x02, 0x01]]

    private typealias Parser = @Sendable (inout DERReader) -> String?

    /// id-ce (2.5.29) and id-pe (1.3.6.1.5.5.7.1) arcs, as OID content octets.
    private static func ce(_ number: UInt8) -> [UInt8] { [0x55, 0x1D, number] }
    private static func pe(_ number: UInt8) -> [UInt8] { [0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, number] }
    private static let ocspMethod: [UInt8] = [0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01]
    private static let caIssuersMethod: [UInt8] = [0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x02]

    private static let parsers: [[UInt8]: Parser] = [
        ce(14): { $0.contents(tag: 0x04) == nil ? "is not an OCTET STRING" : nil }, // subjectKeyIdentifier
        ce(15): keyUsage,
        ce(17): { generalNames(&$0) }, // subjectAltName
        ce(19): basicConstraints,
        ce(30): nameConstraints,
        ce(31): distributionPoints,
        ce(32): { nonEmptySequence(&$0, of: 0x30, first: 0x06) }, // certificatePolicies: PolicyInformation, qualifiers unread
        ce(33): { nonEmptySequence(&$0, of: 0x30, first: 0x06) }, // policyMappings
        ce(35): authorityKeyIdentifier,
        ce(36): policyConstraints,
        ce(37): extendedKeyUsage,
        ce(54): { reader in reader.contents(tag: 0x02).flatMap(unsigned32) == nil ? "is not an INTEGER from 0 to 2^32-1" : nil }, // inhibitAnyPolicy
        pe(1): authorityInfoAccess,
        pe(3): { nonEmptySequence(&$0, of: 0x30, first: 0x06) }, // qcStatements
    ]

    /// A DER INTEGER's contents as trustd's `DERParseInteger` reads them: minimal, not negative, under 2^32.
    static func unsigned32(_ contents: ArraySlice<UInt8>) -> UInt32? {
        guard let first = contents.first, first & 0x80 == 0 else { return nil }
        if first == 0, contents.count > 1, contents[contents.startIndex + 1] & 0x80 == 0 { return nil }
        let digits = first == 0 ? contents.dropFirst() : contents
        guard digits.count <= 4 else { return nil }
        return digits.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    private static func keyUsage(_ reader: inout DERReader) -> String? {
        guard let bits = reader.contents(tag: 0x03), reader.isAtEnd, (2...3).contains(bits.count), (bits.first ?? 8) < 8 else {
            return "is not a BIT STRING of one or two bytes"
        }
        return nil
    }

    /// GeneralNames: a non-empty SEQUENCE whose entries trustd tells apart by tag alone.
    private static func generalNames(_ reader: inout DERReader) -> String? {
        guard var names = reader.enter(tag: 0x30), !names.isAtEnd else { return "holds no name" }
        while !names.isAtEnd {
            guard let (tag, contents) = names.next() else { return "does not decode" }
            switch tag {
            case 0xA0, 0x81, 0x82, 0xA3, 0xA4, 0xA5, 0x86, 0x87, 0x88: continue
            case 0xA6: // a constructed URI, as some old certificates have it: one IA5String inside
                var inner = DERReader(contents)
                if inner.contents(tag: 0x16) == nil { return "holds a constructed URI that is no IA5String" }
            default: return "holds a name of tag 0x\(String(tag, radix: 16)), which is no GeneralName"
            }
        }
        return nil
    }

    private static func basicConstraints(_ reader: inout DERReader) -> String? {
        guard var fields = reader.enter(tag: 0x30) else { return "is not a SEQUENCE" }
        if fields.peekTag == 0x01 {
            guard let flag = fields.contents(tag: 0x01), flag.count == 1, flag.first == 0 || flag.first == 0xFF else {
                return "has a cA flag other than 0x00 or 0xFF"
            }
        }
        if fields.peekTag == 0x02, let length = fields.contents(tag: 0x02), !length.isEmpty, unsigned32(length) == nil {
            return "has a pathLenConstraint that is not an INTEGER from 0 to 2^32-1"
        }
        return fields.isAtEnd ? nil : "has fields after pathLenConstraint"
    }

    private static func nameConstraints(_ reader: inout DERReader) -> String? {
        guard var fields = reader.enter(tag: 0x30) else { return "is not a SEQUENCE" }
        for tag: UInt8 in [0xA0, 0xA1] where fields.peekTag == tag {
            guard var subtrees = fields.enter(tag: tag) else { return "does not decode" }
            while !subtrees.isAtEnd {
                guard var subtree = subtrees.enter(tag: 0x30), subtree.element() != nil else {
                    return "has a subtree that does not decode"
                }
                if subtree.peekTag == 0x80, let minimum = subtree.contents(tag: 0x80), unsigned32(minimum) != 0 {
                    return "has a subtree whose minimum is not 0 (RFC 5280 4.2.1.10)"
                }
                if subtree.peekTag == 0x81 { return "has a subtree with a maximum (RFC 5280 4.2.1.10)" }
            }
        }
        return fields.isAtEnd ? nil : "has fields after excludedSubtrees"
    }

    private static func distributionPoints(_ reader: inout DERReader) -> String? {
        guard var points = reader.enter(tag: 0x30), !points.isAtEnd else { return "holds no distribution point" }
        while !points.isAtEnd {
            guard var point = points.enter(tag: 0x30) else { return "does not decode" }
            var named = false
            if point.peekTag == 0xA0 { named = point.skip() }
            if point.peekTag == 0x81 { _ = point.skip() }
            if point.peekTag == 0xA2 { named = point.skip() || named }
            if !named { return "has a distribution point with neither a name nor a cRLIssuer" }
        }
        return nil
    }

    private static func authorityKeyIdentifier(_ reader: inout DERReader) -> String? {
        guard var fields = reader.enter(tag: 0x30) else { return "is not a SEQUENCE" }
        if fields.peekTag == 0x80 { _ = fields.skip() }
        let issuer = fields.peekTag == 0xA1 && fields.skip()
        let serial = fields.peekTag == 0x82 && fields.skip()
        guard fields.isAtEnd else { return "does not decode" }
        return issuer != serial ? "names an authorityCertIssuer or an authorityCertSerialNumber without the other (RFC 5280 4.2.1.1)" : nil
    }

    private static func policyConstraints(_ reader: inout DERReader) -> String? {
        guard var fields = reader.enter(tag: 0x30) else { return "is not a SEQUENCE" }
        for tag: UInt8 in [0x80, 0x81] where fields.peekTag == tag {
            if let value = fields.contents(tag: tag), !value.isEmpty, unsigned32(value) == nil {
                return "has a skip count that is not an INTEGER from 0 to 2^32-1"
            }
        }
        return fields.isAtEnd ? nil : "does not decode"
    }

    private static func extendedKeyUsage(_ reader: inout DERReader) -> String? {
        nonEmptySequence(&reader, of: 0x06, first: nil).map { _ in "holds no purpose, or one that is no OBJECT IDENTIFIER" }
    }

    private static func authorityInfoAccess(_ reader: inout DERReader) -> String? {
        guard var descriptions = reader.enter(tag: 0x30), !descriptions.isAtEnd else { return "holds no access description" }
        while !descriptions.isAtEnd {
            guard var description = descriptions.enter(tag: 0x30), let method = description.contents(tag: 0x06),
                  let (locationTag, _) = description.next() else { return "has an access description that does not decode" }
            let known = method.elementsEqual(ocspMethod) || method.elementsEqual(caIssuersMethod)
            if known, locationTag != 0x86 {
                return "gives an \(method.elementsEqual(ocspMethod) ? "OCSP" : "caIssuers") location that is not a URI"
            }
        }
        return nil
    }

    // MARK: - Values as trustd reads them

    /// Whether `parser` reads `value` without refusing it.
    private static func accepts(_ value: [UInt8], _ parser: Parser) -> Bool {
        var reader = DERReader(value[...])
        return parser(&reader) == nil
    }

    /// The keyUsage bits in OpenSSL's layout (the first content byte, the second shifted left by 8:
    /// `KU_DIGITAL_SIGNATURE` is 0x80), the unused bits of the last byte cleared as trustd's
    /// `SecCEPKeyUsage` reads only `8 * length - unused` bits; nil when its parser refuses the value.
    /// No bit set is 0.
    public static func keyUsageBits(_ value: [UInt8]) -> UInt32? {
        guard accepts(value, keyUsage) else { return nil }
        var reader = DERReader(value[...])
        guard let contents = reader.contents(tag: 0x03), let unused = contents.first else { return nil }
        var bits = Array(contents.dropFirst())
        bits[bits.count - 1] &= UInt8(truncatingIfNeeded: 0xFF << Int(unused))
        return bits.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
    }

    /// The basicConstraints as trustd reads them: the cA flag, and the pathLenConstraint (nil when
    /// absent or zero-length, which trustd takes as absent); nil when its parser refuses the value.
    public static func basicConstraints(_ value: [UInt8]) -> (isCA: Bool, pathLength: Int?)? {
        guard accepts(value, basicConstraints) else { return nil }
        var reader = DERReader(value[...])
        guard var fields = reader.enter(tag: 0x30) else { return nil }
        let isCA = fields.peekTag == 0x01 ? fields.contents(tag: 0x01)?.first == 0xFF : false
        let length = fields.peekTag == 0x02 ? fields.contents(tag: 0x02).flatMap { $0.isEmpty ? nil : unsigned32($0) } : nil
        return (isCA, length.map(Int.init))
    }

    /// The keyIdentifier of an authorityKeyIdentifier value; nil when absent, empty (trustd then
    /// links by name alone) or refused.
    public static func authorityKeyID(_ value: [UInt8]) -> [UInt8]? {
        guard accepts(value, authorityKeyIdentifier) else { return nil }
        var reader = DERReader(value[...])
        guard var fields = reader.enter(tag: 0x30), fields.peekTag == 0x80,
              let identifier = fields.contents(tag: 0x80), !identifier.isEmpty else { return nil }
        return Array(identifier)
    }

    /// The key identifier a subjectKeyIdentifier value holds; nil when it is no OCTET STRING.
    public static func subjectKeyID(_ value: [UInt8]) -> [UInt8]? {
        var reader = DERReader(value[...])
        guard let identifier = reader.contents(tag: 0x04), reader.isAtEnd else { return nil }
        return Array(identifier)
    }

    /// The entries of a GeneralNames value (a subjectAltName's) by their tag, as trustd's
    /// `SecCertificateParseGeneralNames` reads them: a URI written as a constructed [6] holding an
    /// IA5String is given as a primitive [6] (0x86) with the string; nil when trustd refuses the value.
    public static func generalNameEntries(_ value: [UInt8]) -> [(tag: UInt8, contents: [UInt8])]? {
        guard accepts(value, generalNames) else { return nil }
        var reader = DERReader(value[...])
        guard var names = reader.enter(tag: 0x30) else { return nil }
        var entries: [(tag: UInt8, contents: [UInt8])] = []
        while let (tag, contents) = names.next() {
            if tag == 0xA6 {
                var inner = DERReader(contents)
                guard let uri = inner.contents(tag: 0x16) else { return nil }
                entries.append((0x86, Array(uri)))
            } else {
                entries.append((tag, Array(contents)))
            }
        }
        return entries
    }

    /// A SEQUENCE of one or more elements of tag `element`, each (when `first` is given) starting with an element of that tag.
    private static func nonEmptySequence(_ reader: inout DERReader, of element: UInt8, first: UInt8?) -> String? {
        guard var items = reader.enter(tag: 0x30) else { return "is not a SEQUENCE" }
        guard !items.isAtEnd else { return "is an empty list" }
        while !items.isAtEnd {
            guard let (tag, contents) = items.next(), tag == element else { return "holds an element that does not decode" }
            if let first {
                var inner = DERReader(contents)
                guard inner.peekTag == first, inner.skip() else { return "holds an element that does not decode" }
            }
        }
        return nil
    }
}
