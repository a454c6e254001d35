import Foundation
import Testing
@testable import TLSAuditCore

@Suite("host name matching (SAN only, one-label wildcards)")
struct HostnameMatcherTests {
    @Test("exact names match case-insensitively, trailing dot ignored", arguments: [
        ("example.com", "example.com", true), ("EXAMPLE.com", "example.COM", true), ("example.com.", "example.com", true),
        ("www.example.com", "example.com", false),
    ])
    func exact(host: String, san: String, matches: Bool) {
        #expect(HostnameMatcher.matches(host: host, names: SubjectAlternativeNames(dns: [san])) == matches)
    }

    @Test("a SAN written with a trailing dot never matches (trustd strips the host's dot, not the certificate's)", arguments: [
        ("example.com", "example.com.", false), ("example.com.", "example.com.", false), ("a.example.com", "*.example.com.", false),
        ("a.example.com.", "*.example.com", true),
    ])
    func trailingDotInSAN(host: String, san: String, matches: Bool) {
        #expect(HostnameMatcher.matches(host: host, names: SubjectAlternativeNames(dns: [san])) == matches)
    }

    @Test("as trustd reads SANs: a dNSName whose right-most label has no letter is no DNS name; one malformed iPAddress loses every IP entry", arguments: [
        ("test.123", ["test.123"], [String](), false), ("test.a1", ["test.a1"], [], true), ("x.test._9", ["x.test._9"], [], false),
        ("192.0.2.1", [], ["192.0.2.1"], true), ("192.0.2.1", [], ["192.0.2.1", "0102030405"], false),
        ("192.0.2.1", ["192.0.2.1"], [], false),
    ])
    func trustdSANReading(host: String, dns: [String], ip: [String], matches: Bool) {
        #expect(HostnameMatcher.matches(host: host, names: SubjectAlternativeNames(dns: dns, ip: ip)) == matches)
    }

    @Test("as trustd reads SANs: one dNSName that is not UTF-8 loses every DNS name; one in valid UTF-8 that is no DNS name is skipped alone", arguments: [
        // The probe writes an IA5String's bytes outside printable ASCII as \xHH: "\xc3\xa9" is UTF-8's é.
        (["server.example.com", #"a\xff.example.com"#], false), ([#"a\xc3.example.com"#, "server.example.com"], false),
        (["server.example.com", #"\xc3\xa9.example.com"#], true), (["server.example.com", #"caf\xE9.example.com"#], false),
        (["server.example.com", "caf\u{E9}.example.com"], true),
    ])
    func dnsNamesNotUTF8(dns: [String], matches: Bool) {
        #expect(HostnameMatcher.matches(host: "server.example.com", names: SubjectAlternativeNames(dns: dns)) == matches)
        // An address is matched against the iPAddress entries, which a bad dNSName does not touch.
        #expect(HostnameMatcher.matches(host: "192.0.2.1", names: SubjectAlternativeNames(dns: dns, ip: ["192.0.2.1"])))
    }

    @Test("an IP host as trustd reads one (SecFrameworkCopyIPAddressData, not inet_pton): leading zeros and empty IPv4 parts are an address; a dotted IPv4 tail or a zone in IPv6 is none", arguments: [
        ("127.000.000.001", ["127.0.0.1"], true), ("10.1..1", ["10.1.0.1"], true), ("127.0.0.1", ["127.0.0.1"], true),
        ("[::1]", ["::1"], true), ("0:0:0:0:0:0:0:1", ["::1"], true), ("2001:DB8::1", ["2001:db8::1"], true),
        ("::ffff:127.0.0.1", ["::ffff:127.0.0.1"], false), ("fe80::1%eth0", ["fe80::1"], false), ("1.2.3.256", ["1.2.3.0"], false),
    ])
    func appleIPHosts(host: String, ip: [String], matches: Bool) {
        #expect(HostnameMatcher.matches(host: host, names: SubjectAlternativeNames(dns: [host], ip: ip)) == matches)
    }

    @Test("trustd's IP reading, byte for byte")
    func appleAddressBytes() {
        #expect(HostnameMatcher.appleAddressBytes("127.000.000.001") == [127, 0, 0, 1])
        #expect(HostnameMatcher.appleAddressBytes("1.2.3") == nil && HostnameMatcher.appleAddressBytes("1.2.3.4.5") == nil)
        #expect(HostnameMatcher.appleAddressBytes("::") == [UInt8](repeating: 0, count: 16))
        #expect(HostnameMatcher.appleAddressBytes("1::2") == [0, 1] + [UInt8](repeating: 0, count: 12) + [0, 2])
        #expect(HostnameMatcher.appleAddressBytes("12345::1") == nil && HostnameMatcher.appleAddressBytes("example.com") == nil)
    }

    @Test("a Unicode host is matched in its A-label form, as Apple's URL loading sends it", arguments: [
        ("bücher.example.com", "xn--bcher-kva.example.com", true), ("BÜCHER.example.com", "xn--bcher-kva.example.com", true),
        ("www.bücher.example.com", "*.xn--bcher-kva.example.com", true), ("bücher.example.com", "bucher.example.com", false),
    ])
    func unicodeHost(host: String, san: String, matches: Bool) {
        #expect(HostnameMatcher.matches(host: host, names: SubjectAlternativeNames(dns: [san])) == matches)
    }

    @Test("a wildcard covers exactly one whole left-most label", arguments: [
        ("a.example.com", "*.example.com", true),
        ("example.com", "*.example.com", false),
        ("a.b.example.com", "*.example.com", false),
        ("foo.example.com", "f*.example.com", false),
        ("foo.example.com", "*o.example.com", false),
        ("a.example.com", "a.*.com", false),
        ("example.com", "*.com", false),
        ("a.com", "*.com", false),
        (".example.com", "*.example.com", false),
        ("foo.co.uk", "*.co.uk", false),
        ("foo.example.co.uk", "*.example.co.uk", true),
        ("a.anything.ck", "*.anything.ck", false),
        ("a.www.ck", "*.www.ck", true),
    ])
    func wildcard(host: String, san: String, matches: Bool) {
        #expect(HostnameMatcher.matches(host: host, names: SubjectAlternativeNames(dns: [san])) == matches)
    }

    @Test("IP targets match iPAddress SANs only, in canonical form")
    func ipAddresses() {
        let names = SubjectAlternativeNames(dns: ["127.0.0.1"], ip: ["::1", "10.0.0.1"])
        #expect(HostnameMatcher.matches(host: "10.0.0.1", names: names))
        #expect(HostnameMatcher.matches(host: "0:0:0:0:0:0:0:1", names: names))
        #expect(HostnameMatcher.matches(host: "[::1]", names: names))
        #expect(!HostnameMatcher.matches(host: "127.0.0.1", names: names), "an IP in a dNSName does not count")
    }
}

@Suite("public suffixes")
struct PublicSuffixListTests {
    @Test("ICANN suffixes, wildcard rules and exceptions", arguments: [
        ("com", true), ("co.uk", true), ("example.co.uk", false), ("anything.ck", true), ("www.ck", false),
        ("example.com", false), ("localhost", true), ("CO.UK.", true),
        // The first and last lines of the sorted data, and rules on either side of them.
        ("city.kawasaki.jp", false), ("other.kawasaki.jp", true), ("kawasaki.jp", false), ("zuerich", true),
        ("example.zuerich", false), ("广东", true), ("aaa.广东", false),
    ])
    func suffixes(domain: String, isSuffix: Bool) {
        #expect(PublicSuffixList.isPublicSuffix(domain) == isSuffix)
    }

    @Test("the data is sorted by bytes without repeats, and every rule is found where it is", arguments: ["icann", "private"])
    func everyRule(section: String) {
        // (The section by name: a test argument is printed, and the rules are thousands of lines.)
        let (data, rules, atLeast) = section == "icann" ? (PublicSuffixData.icannRules, PublicSuffixList.icann, 7_000)
            : (PublicSuffixData.privateRules, PublicSuffixList.privateDomains, 1_000)
        let lines = data.split(separator: "\n").map(String.init)
        #expect(lines.count > atLeast)
        #expect(zip(lines, lines.dropFirst()).allSatisfy { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        #expect(lines.allSatisfy { $0 == $0.lowercased() && !$0.contains(" ") })
        #expect(lines.allSatisfy(rules.contains), "each line is found by the binary search")
        #expect(!rules.contains("") && !rules.contains("co.uk.") && !rules.contains("zzzz"))
        for rule in lines where !rule.hasPrefix("!") && !rule.hasPrefix("*.") {
            #expect(PublicSuffixList.isPublicSuffix(rule, includingPrivate: true), "\(rule)")
        }
    }

    @Test("the private section counts only where asked (the BR lint), never for name matching", arguments: [
        ("s3.amazonaws.com", false, true), ("github.io", false, true), ("example.github.io", false, false),
        ("co.uk", true, true), ("amazonaws.com", false, false),
    ])
    func privateSection(domain: String, icann: Bool, withPrivate: Bool) {
        #expect(PublicSuffixList.isPublicSuffix(domain) == icann)
        #expect(PublicSuffixList.isPublicSuffix(domain, includingPrivate: true) == withPrivate)
    }
}
