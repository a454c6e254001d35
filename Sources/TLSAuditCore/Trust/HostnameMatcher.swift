#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TLSAuditSupport

/// RFC 6125 name matching as Apple applies it: subjectAltName only (the CN is never used),
/// case-insensitive, and a wildcard only as the whole left-most label covering exactly one label,
/// never over a public suffix.
public enum HostnameMatcher {
    /// Whether `host` (a DNS name or an IP literal) is covered by the certificate's SANs, as trustd
    /// reads them (`SecCertificateCopyIPAddresses`, `SecFrameworkIsDNSName`): one iPAddress entry
    /// that is not 4 or 16 bytes loses the whole IP list, one dNSName that is not UTF-8 loses the
    /// whole DNS list, and a dNSName whose right-most label has no letter (`test.123`, an IP literal)
    /// is no DNS name.
    public static func matches(host: String, names: SubjectAlternativeNames) -> Bool {
        if let address = appleAddressBytes(host) {
            guard names.ip.allSatisfy({ IPAddress.canonical($0) != nil }) else { return false }
            return names.ip.contains { IPAddress.bytes($0) == address }
        }
        // trustd reads each dNSName as UTF-8 (CFStringCreateWithBytes): one that is not UTF-8 fails
        // the whole list (SecCertificateCopyDNSNamesFromSAN returns none), so no DNS name matches.
        guard names.dns.allSatisfy(isUTF8) else { return false }
        let hostname = normalize(DomainNameForm.host(host))
        return names.dns.contains { isValidDNSName($0) && rightmostLabelHasLetter($0) && dnsNameMatches(pattern: $0, hostname: hostname) }
    }

    /// The bytes of `host` when trustd reads it as an IP address (`SecFrameworkCopyIPAddressData`),
    /// which is not what inet_pton(3) reads: IPv4 is 7-15 characters of digits and dots in four
    /// parts, each read by atoi (`127.000.000.001` and `10.1..1` are addresses, an empty part is 0);
    /// IPv6 is 2-41 characters of hex digits and colons (brackets allowed), 3-8 fields, no dotted
    /// IPv4 tail (`::ffff:192.0.2.1` is no address to trustd) and no zone. nil for a name.
    public static func appleAddressBytes(_ host: String) -> [UInt8]? {
        appleIPv4Bytes(host) ?? appleIPv6Bytes(host)
    }

    private static func appleIPv4Bytes(_ host: String) -> [UInt8]? {
        let text = Array(host.utf8)
        guard (7...15).contains(text.count), text.allSatisfy({ $0 == UInt8(ascii: ".") || (0x30...0x39).contains($0) }) else { return nil }
        let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            let value = part.reduce(0) { $0 * 10 + Int($1 - 0x30) } // at most 9 digits: no overflow
            guard value <= 255 else { return nil }
            bytes.append(UInt8(value))
        }
        return bytes
    }

    private static func appleIPv6Bytes(_ host: String) -> [UInt8]? {
        var text = Array(host.utf8)
        guard (2...41).contains(text.count) else { return nil }
        if text.first == UInt8(ascii: "["), text.last == UInt8(ascii: "]") { text = Array(text.dropFirst().dropLast()) }
        guard text.allSatisfy({ $0 == UInt8(ascii: ":") || hexValue($0) != nil }) else { return nil }
        let fields = text.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard (3...8).contains(fields.count) else { return nil }
        var bytes: [UInt8] = []
        for (index, field) in fields.enumerated() {
            if field.isEmpty {
                // The leading or trailing part of "::" is one zero field; one inside stands for the missing ones.
                let zeros = index == 0 || index == fields.count - 1 ? 1 : 8 - fields.count + 1
                bytes += [UInt8](repeating: 0, count: 2 * zeros)
            } else if field.count <= 4 {
                let value = field.reduce(0) { $0 << 4 | Int(hexValue($1)!) }
                bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
            } // A longer field adds nothing (trustd skips it), and the length below fails.
        }
        return bytes.count == 16 ? bytes : nil
    }

    /// Whether a dNSName's bytes are UTF-8. The probe writes an IA5String's bytes outside printable
    /// ASCII as `\xHH` (`ASN1Text.latin1`); those are read back as bytes. Text holding other
    /// non-ASCII characters was decoded some other way and counts as UTF-8.
    public static func isUTF8(_ name: String) -> Bool {
        let text = Array(name.utf8)
        guard text.contains(UInt8(ascii: "\\")) else { return true }
        var bytes: [UInt8] = []
        var index = 0
        while index < text.count {
            if text[index] == UInt8(ascii: "\\"), index + 3 < text.count, text[index + 1] == UInt8(ascii: "x"),
               let high = hexValue(text[index + 2]), let low = hexValue(text[index + 3]) {
                bytes.append(high << 4 | low)
                index += 4
            } else {
                bytes.append(text[index])
                index += 1
            }
        }
        return String(validating: bytes, as: UTF8.self) != nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// trustd's last test of a DNS name (`SecFrameworkIsDNSName`): its right-most label holds a
    /// letter (or `*`); an underscore does not count.
    static func rightmostLabelHasLetter(_ name: String) -> Bool {
        let label = name.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).last ?? []
        return label.contains { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A || $0 == UInt8(ascii: "*") }
    }

    /// A leaf without DNS or IP subjectAltNames whose subject CN names `host` (a DNS name): what iOS
    /// 12 and earlier matched, and iOS 13 (Apple support HT210176) and current clients do not.
    public static func namedOnlyByCommonName(host: String, leaf: CertificateSummary) -> Bool {
        guard leaf.subjectAlternativeNames.dns.isEmpty, leaf.subjectAlternativeNames.ip.isEmpty,
              let commonName = leaf.commonName, appleAddressBytes(host) == nil else { return false }
        return dnsNameMatches(pattern: commonName, hostname: normalize(DomainNameForm.host(host)))
    }

    /// Whether one SAN dNSName entry matches a normalized host name. Only the host loses a trailing
    /// dot: a SAN written `www.example.com.` has one label more than any host and never matches, as
    /// in trustd (`SecDNSMatch` strips the reference name's dot, not the certificate's).
    public static func dnsNameMatches(pattern rawPattern: String, hostname: String) -> Bool {
        let pattern = rawPattern.lowercased()
        guard !pattern.isEmpty, !hostname.isEmpty, !pattern.hasSuffix(".") else { return false }
        guard pattern.contains("*" as Character) else { return pattern == hostname }
        let patternLabels = pattern.split(separator: ".", omittingEmptySubsequences: false)
        let hostLabels = hostname.split(separator: ".", omittingEmptySubsequences: false)
        // Only `*` as the entire left-most label, and no other `*` anywhere.
        guard patternLabels.first == "*", !patternLabels.dropFirst().contains(where: { $0.contains("*" as Character) }) else { return false }
        // `*.com` or `*.co.uk` would cover a whole public suffix: never honoured.
        guard patternLabels.count >= 3, hostLabels.count == patternLabels.count else { return false }
        guard !PublicSuffixList.isPublicSuffix(patternLabels.dropFirst().joined(separator: ".")) else { return false }
        guard let first = hostLabels.first, !first.isEmpty else { return false }
        return Array(hostLabels.dropFirst()) == Array(patternLabels.dropFirst())
    }

    /// Whether a SAN dNSName is a syntactically valid DNS name (what clients match and constraints
    /// permit): labels of 1-63 letters, digits, hyphens (not at either end) and underscores (which
    /// clients accept; a lint flags them), at most 253 characters; `*` may stand as the whole
    /// left-most label. Anything else (empty labels, spaces, other punctuation) is
    /// never matched and never permitted.
    public static func isValidDNSName(_ name: String) -> Bool {
        let normalized = normalize(name)
        guard !normalized.isEmpty, normalized.utf8.count <= 253 else { return false }
        let labels = normalized.split(separator: ".", omittingEmptySubsequences: false)
        for (index, label) in labels.enumerated() {
            if label == "*", index == 0, labels.count > 1 { continue }
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-",
                  label.utf8.allSatisfy({ byte in
                      (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
                  }) else { return false }
        }
        return true
    }

    /// Lowercase, without a trailing dot.
    static func normalize(_ name: String) -> String {
        HostText.withoutTrailingDot(name.lowercased())
    }
}
