/// The fields that name a DER certificate (its subject Name and its SubjectPublicKeyInfo, each as
/// encoded, tag and length included), found by walking the DER without parsing the certificate:
/// OpenSSL 3's parse decodes the public key through its provider decoders, a tenth of a
/// millisecond a certificate, which a question about names and keys need not pay.
public struct CertificateFields: Sendable {
    /// The subject Name's encoding.
    public let subject: ArraySlice<UInt8>
    /// The SubjectPublicKeyInfo's encoding.
    public let subjectPublicKeyInfo: ArraySlice<UInt8>

    /// The fields of `der`, or nil when it is not a certificate's DER (as far as the walk sees:
    /// Certificate and TBSCertificate SEQUENCEs, then the optional [0] version, serial, signature
    /// algorithm, issuer, validity, subject and key).
    public init?(der: [UInt8]) {
        var reader = DERReader(der[...])
        guard var certificate = reader.enter(tag: 0x30), var tbs = certificate.enter(tag: 0x30) else { return nil }
        if tbs.peekTag == 0xA0 { guard tbs.skip() else { return nil } } // [0] EXPLICIT version
        guard tbs.skip(tag: 0x02), tbs.skip(tag: 0x30), tbs.skip(tag: 0x30), tbs.skip(tag: 0x30), // serial, signature, issuer, validity
              let subject = tbs.element(tag: 0x30), let key = tbs.element(tag: 0x30) else { return nil }
        self.subject = subject
        subjectPublicKeyInfo = key
    }
}

extension CertificateFields {
    /// What in `der`'s encoding Security's `SecCertificateParse` refuses (the certificate is then
    /// never created: Apple's clients refuse it) where OpenSSL reads it: an explicit version other
    /// than v2 or v3 (DER leaves v1 out), a serial number of more than 37 octets, an extensions
    /// field with no extension, and a criticality flag other than 0x00 or 0xFF. Validity forms and
    /// undecodable extensions are found from the parsed certificate.
    public static func appleParseProblems(der: [UInt8]) -> [String] {
        var problems: [String] = []
        var reader = DERReader(der[...])
        guard var certificate = reader.enter(tag: 0x30), var tbs = certificate.enter(tag: 0x30) else { return [] }
        if tbs.peekTag == 0xA0 {
            guard var explicit = tbs.enter(tag: 0xA0), let version = explicit.contents(tag: 0x02) else { return [] }
            if version.count != 1 || !(1...2).contains(version.first ?? 0) {
                let value = version.count == 1 ? "v\(Int(version.first ?? 0) + 1)" : "an INTEGER of \(version.count) octets"
                problems.append("its version is encoded as \(value) (trustd reads an explicit v2 or v3 only; DER leaves v1 out)")
            }
        }
        guard let serial = tbs.contents(tag: 0x02) else { return problems }
        if serial.count > 37 {
            problems.append("its serial number takes \(serial.count) octets (trustd reads at most 37)")
        }
        // signature, issuer, validity, subject, subjectPublicKeyInfo, then the optional unique IDs.
        guard tbs.skip(tag: 0x30), tbs.skip(tag: 0x30), tbs.skip(tag: 0x30), tbs.skip(tag: 0x30), tbs.skip(tag: 0x30) else { return problems }
        while let tag = tbs.peekTag, tag == 0x81 || tag == 0x82 || tag == 0xA1 || tag == 0xA2 { _ = tbs.skip() }
        guard tbs.peekTag == 0xA3, var explicit = tbs.enter(tag: 0xA3), var extensions = explicit.enter(tag: 0x30) else { return problems }
        if extensions.peekTag == nil {
            problems.append("its extensions field holds no extension (RFC 5280 4.1: one or more)")
        }
        while var ext = extensions.enter(tag: 0x30) {
            guard ext.skip(tag: 0x06) else { break }
            if ext.peekTag == 0x01, let critical = ext.contents(tag: 0x01), critical.count != 1 || (critical.first != 0 && critical.first != 0xFF) {
                problems.append("an extension's critical flag is encoded as \(critical.map { String($0, radix: 16) }.joined(separator: " ")) (DER and trustd: FF for TRUE)")
            }
        }
        return problems
    }
}

/// A forward reader of DER elements with one-byte tags and definite lengths (up to four length octets).
struct DERReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var peekTag: UInt8? { bytes.first }

    /// No element left.
    var isAtEnd: Bool { bytes.isEmpty }

    /// The next element's tag and contents, whatever its tag, and moves past it.
    mutating func next() -> (tag: UInt8, contents: ArraySlice<UInt8>)? {
        guard let tag = bytes.first, let (_, contents) = next(tag: nil) else { return nil }
        return (tag, contents)
    }

    /// The next element whole (tag, length and contents) when its tag is `tag`, and moves past it.
    mutating func element(tag: UInt8? = nil) -> ArraySlice<UInt8>? {
        guard let (whole, _) = next(tag: tag) else { return nil }
        return whole
    }

    /// The next element's contents when its tag is `tag`, and moves past it.
    mutating func contents(tag: UInt8) -> ArraySlice<UInt8>? { next(tag: tag)?.contents }

    /// A reader of the next element's contents when its tag is `tag`, and moves past it.
    mutating func enter(tag: UInt8) -> DERReader? {
        guard let (_, contents) = next(tag: tag) else { return nil }
        return DERReader(contents)
    }

    /// Moves past the next element (of tag `tag` when given); false when there is none.
    mutating func skip(tag: UInt8? = nil) -> Bool { next(tag: tag) != nil }

    private mutating func next(tag: UInt8?) -> (whole: ArraySlice<UInt8>, contents: ArraySlice<UInt8>)? {
        let start = bytes.startIndex
        guard bytes.count >= 2, tag == nil || bytes[start] == tag, bytes[start] & 0x1F != 0x1F else { return nil }
        let first = bytes[start + 1]
        var length = 0
        var header = 2
        if first < 0x80 {
            length = Int(first)
        } else {
            let octets = Int(first & 0x7F)
            guard (1...4).contains(octets), bytes.count >= 2 + octets else { return nil }
            for index in 0..<octets { length = length << 8 | Int(bytes[start + 2 + index]) }
            header += octets
        }
        // Four length octets cannot overflow a 64-bit Int; on a 32-bit one they may turn negative.
        guard length >= 0, length <= bytes.count - header else { return nil }
        let end = start + header + length
        defer { bytes = bytes[end...] }
        return (bytes[start..<end], bytes[(start + header)..<end])
    }
}
