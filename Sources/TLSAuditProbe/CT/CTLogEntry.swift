/// One log entry, decoded (RFC 6962 §3.4): the certificate it logs and the chain submitted with it.
/// Only the leaf (`leaf_input`) is in the log's tree; the chain and a precertificate as submitted
/// come in `extra_data`, which the tree does not cover: `LoggedChain` checks a precertificate
/// against the TBSCertificate the leaf holds before judging it.
public struct ParsedLogEntry: Sendable {
    /// When the log took it (milliseconds since 1970).
    public var timestampMs: UInt64
    /// A precertificate (the certificate is then the precertificate as submitted, poison included).
    public var precertificate: Bool
    /// The logged certificate, DER: the x509_entry's (in the leaf), or the pre_certificate of a
    /// precert entry's extra_data (empty when that could not be read).
    public var certificate: [UInt8]
    /// For a precertificate: the TBSCertificate and the issuer key hash the leaf holds.
    public var tbsCertificate: [UInt8]?
    public var issuerKeyHash: [UInt8]?
    /// The chain submitted with it, its issuer first, DER.
    public var chain: [[UInt8]]
    /// Why `extra_data` could not be read (the leaf could).
    public var extraDataProblem: String?

    public init(timestampMs: UInt64, precertificate: Bool, certificate: [UInt8], chain: [[UInt8]]) {
        self.timestampMs = timestampMs
        self.precertificate = precertificate
        self.certificate = certificate
        self.chain = chain
    }

    /// The bytes the log's tree vouches for that hold the certificate's names: the certificate of
    /// an x509 entry, the TBSCertificate of a precert entry.
    public var authenticatedBytes: [UInt8] { tbsCertificate ?? certificate }

    /// Decodes a MerkleTreeLeaf and its extra_data; every length is checked against what is
    /// there. A leaf that does not decode is malformed; extra_data that does not is noted
    /// (`extraDataProblem`) and the entry kept.
    public static func parse(_ entry: RawLogEntry) throws(CTLogFailure) -> ParsedLogEntry {
        var leaf = TLSReader(entry.leafInput)
        var extra = TLSReader(entry.extraData)
        guard let version = leaf.byte(), version == 0, let leafType = leaf.byte(), leafType == 0,
              let timestamp = leaf.integer(8), let entryType = leaf.integer(2) else {
            throw CTLogFailure(.malformed, "a leaf that is not a v1 timestamped entry")
        }
        switch entryType {
        case 0:
            guard let certificate = leaf.vector(3), !certificate.isEmpty, leaf.vector(2) != nil, leaf.isAtEnd else {
                throw CTLogFailure(.malformed, "an x509 leaf whose lengths do not add up")
            }
            var parsed = ParsedLogEntry(timestampMs: timestamp, precertificate: false, certificate: certificate, chain: [])
            if let chain = extra.vector(3).flatMap(Self.certificates), extra.isAtEnd {
                parsed.chain = chain
            } else {
                parsed.extraDataProblem = entry.chainProblem ?? "the certificate chain in extra_data does not decode"
            }
            return parsed
        case 1:
            guard let keyHash = leaf.bytes(32), let tbs = leaf.vector(3), !tbs.isEmpty, leaf.vector(2) != nil, leaf.isAtEnd else {
                throw CTLogFailure(.malformed, "a precert leaf whose lengths do not add up")
            }
            var parsed = ParsedLogEntry(timestampMs: timestamp, precertificate: true, certificate: [], chain: [])
            parsed.tbsCertificate = tbs
            parsed.issuerKeyHash = keyHash
            if let precertificate = extra.vector(3), !precertificate.isEmpty,
               let chain = extra.vector(3).flatMap(Self.certificates), extra.isAtEnd {
                parsed.certificate = precertificate
                parsed.chain = chain
            } else {
                parsed.extraDataProblem = entry.chainProblem ?? "the precertificate and its chain in extra_data do not decode"
            }
            return parsed
        default:
            throw CTLogFailure(.malformed, "an entry of unknown type \(entryType)")
        }
    }

    /// A list of ASN.1Cert<1..2^24-1>.
    private static func certificates(_ list: [UInt8]) -> [[UInt8]]? {
        var reader = TLSReader(list)
        var certificates: [[UInt8]] = []
        while !reader.isAtEnd {
            guard let certificate = reader.vector(3), !certificate.isEmpty else { return nil }
            certificates.append(certificate)
        }
        return certificates
    }

    /// Whether the authenticated bytes hold any of `needles` (lowercase ASCII: A-labels, and a
    /// pinned host's parent domain, which its wildcards name), compared without case: a cheap test
    /// before parsing, since a DNS name is in a certificate as its ASCII bytes (an IA5String).
    public func mentions(any needles: [[UInt8]]) -> Bool {
        let bytes = authenticatedBytes
        return needles.contains { Self.contains(bytes, $0) }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= haystack.count else { return needle.isEmpty }
        return haystack.withUnsafeBufferPointer { hay in
            needle.withUnsafeBufferPointer { pattern in
                let last = hay.count - pattern.count
                var index = 0
                while index <= last {
                    if lower(hay[index]) == first {
                        var matched = 1
                        while matched < pattern.count, lower(hay[index + matched]) == pattern[matched] { matched += 1 }
                        if matched == pattern.count { return true }
                    }
                    index += 1
                }
                return false
            }
        }
    }

    /// An ASCII byte in lower case (other bytes as they are).
    @inline(__always) static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
}

/// Reads TLS presentation-language fields (RFC 8446 §3) with bounds checks: nil past the end.
struct TLSReader {
    private let bytes: [UInt8]
    /// Bytes read so far.
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() -> UInt8? { bytes(1)?.first }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, count <= bytes.count - offset else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// The bytes read from `start` (an earlier `offset`) to here.
    func bytes(since start: Int) -> [UInt8] { Array(bytes[start..<offset]) }

    /// A big-endian unsigned integer of `width` bytes.
    mutating func integer(_ width: Int) -> UInt64? {
        bytes(width)?.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// An opaque vector whose length takes `width` bytes.
    mutating func vector(_ width: Int) -> [UInt8]? {
        guard let length = integer(width) else { return nil }
        return bytes(Int(length))
    }
}
