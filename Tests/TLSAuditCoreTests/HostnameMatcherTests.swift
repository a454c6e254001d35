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

    @Test("the data is sorted by bytes without repeats, and every rule is found where it is")
    func everyRule() {
        let lines = PublicSuffixData.icannRules.split(separator: "\n").map(String.init)
        #expect(lines.count > 7_000)
        #expect(zip(lines, lines.dropFirst()).allSatisfy { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        #expect(lines.allSatisfy { $0 == $0.lowercased() && !$0.contains(" ") })
        #expect(lines.allSatisfy(PublicSuffixList.contains), "each line is found by the binary search")
        #expect(!PublicSuffixList.contains("") && !PublicSuffixList.contains("co.uk.") && !PublicSuffixList.contains("zzzz"))
        for rule in lines where !rule.hasPrefix("!") && !rule.hasPrefix("*.") {
            #expect(PublicSuffixList.isPublicSuffix(rule), "\(rule)")
        }
    }
}

@Suite("target parsing")
struct ScanTargetTests {
    @Test("host, host:port, [v6]:port, bare v6, URL")
    func forms() throws {
        let plain = try ScanTarget.parse("example.com")
        #expect(plain.host == "example.com" && plain.port == 443 && plain.sni == "example.com")
        let withPort = try ScanTarget.parse("example.com:8443")
        #expect(withPort.port == 8443)
        let v6 = try ScanTarget.parse("[2001:db8::1]:444")
        #expect(v6.host == "2001:db8::1" && v6.port == 444 && v6.sni == nil)
        let bare = try ScanTarget.parse("2001:db8::1")
        #expect(bare.host == "2001:db8::1" && bare.port == 443)
        let url = try ScanTarget.parse("https://example.com:9443/path?q")
        #expect(url.host == "example.com" && url.port == 9443)
        #expect(try ScanTarget.parse("10.0.0.1:443").sni == nil, "no SNI for IP literals")
    }

    @Test("bad targets are refused with the reason", arguments: ["", "host:0", "host:70000", "host:abc", "[::1", "a b"])
    func bad(text: String) {
        #expect(throws: ScanTarget.ParseError.self) { try ScanTarget.parse(text) }
    }

    @Test("targets files: comments, blank lines, line numbers in errors")
    func list() throws {
        let targets = try ScanTarget.parseList("# fleet\na.example:1\n\n  b.example   # trailing\n")
        #expect(targets.map(\.host) == ["a.example", "b.example"])
        #expect(targets.map(\.port) == [1, 443])
        do {
            _ = try ScanTarget.parseList("ok.example\nbad:port\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.description.hasPrefix("line 2:"))
        }
    }

    @Test("CIDR ranges: IPv4 and IPv6, prefix bounds, the other family never matches")
    func cidr() {
        #expect(IPAddress.ip("10.1.2.3", within: "10.0.0.0/8"))
        #expect(!IPAddress.ip("11.0.0.1", within: "10.0.0.0/8"))
        #expect(IPAddress.ip("192.168.1.77", within: "192.168.1.64/26"))
        #expect(!IPAddress.ip("192.168.1.128", within: "192.168.1.64/26"))
        #expect(IPAddress.ip("203.0.113.9", within: "0.0.0.0/0"))
        #expect(IPAddress.ip("fd00::1", within: "fd00::/8"))
        #expect(!IPAddress.ip("fe80::1", within: "fd00::/8"))
        #expect(IPAddress.ip("::1", within: "0:0::1/128"))
        #expect(!IPAddress.ip("10.0.0.1", within: "::/0"), "an IPv4 address is outside every IPv6 range")
        for malformed in ["10.0.0.0/-1", "10.0.0.0/33", "::/129", "10.0.0.0", "10.0.0.0/x", "example.com/8"] {
            #expect(!IPAddress.ip("10.0.0.1", within: malformed), "\(malformed)")
        }
    }
}

/// Validity times as X.680 defines them, and names in their ASCII form.
@Suite("certificate times and IDN forms")
struct CertificateTimeTests {
    func read(_ text: String, generalized: Bool = false) -> CertificateTime {
        CertificateTime.read(Array(text.utf8), generalized: generalized)
    }

    @Test("DER UTCTime and GeneralizedTime, with the 1950-2049 window")
    func der() {
        #expect(read("491231235959Z").date == Date(timeIntervalSince1970: 2_524_607_999))
        #expect(read("500101000000Z").date == Date(timeIntervalSince1970: -631_152_000))
        #expect(read("491231235959Z").problem == nil)
        #expect(read("20500101000000Z", generalized: true).date == Date(timeIntervalSince1970: 2_524_608_000))
        #expect(read("20500101000000Z", generalized: true).problem == nil)
        #expect(read("20240229120000Z", generalized: true).problem?.contains("before 2050") == true)
    }

    @Test("forms X.680 allows and DER does not: read, and said")
    func berForms() {
        let noSeconds = read("2601021504Z")
        #expect(noSeconds.date == Date(timeIntervalSince1970: 1_767_366_240))
        #expect(noSeconds.problem?.contains("no seconds") == true)
        let offset = read("260102150405-0130")
        #expect(offset.date == Date(timeIntervalSince1970: 1_767_366_245 + 5_400))
        #expect(offset.problem?.contains("offset") == true)
        let trailingZero = read("20510101000000.50Z", generalized: true)
        #expect(trailingZero.date == Date(timeIntervalSince1970: 2_556_144_000.5))
        #expect(trailingZero.problem?.contains("ends in zero") == true)
    }

    @Test("what is no time at all", arguments: ["", "2601021504", "26010215Z", "261301000000Z", "260230000000Z", "260101246000Z",
                                                 "2601010000000Z", "26010100000aZ", "260101000000+25"])
    func unreadable(_ text: String) {
        #expect(read(text).date == nil, "\(text)")
    }

    @Test("local GeneralizedTime has no instant")
    func localTime() {
        #expect(read("20510101000000", generalized: true).date == nil)
    }

    @Test("Punycode (RFC 3492) and the ASCII form of names")
    func punycode() {
        #expect(DomainNameForm.punycode("bücher") == "bcher-kva")
        #expect(DomainNameForm.punycode("münchen") == "mnchen-3ya")
        #expect(DomainNameForm.punycode("例え") == "r8jz45g")
        #expect(DomainNameForm.ascii("Bücher.Example.") == "xn--bcher-kva.example")
        #expect(DomainNameForm.ascii("WWW.Example.COM") == "www.example.com")
    }
}
