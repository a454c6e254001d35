import Foundation
import Testing
import TLSAuditCore

/// NSAppTransportSecurity read as the current iOS reads it (docs/apple-rules.md section 6), on
/// hand-made plist values.
@Suite("App Transport Security policy")
struct AppTransportSecurityPolicyTests {
    static let pinA = Data(repeating: 1, count: 32).base64EncodedString()
    static let pinB = Data(repeating: 2, count: 32).base64EncodedString()

    func ats(_ dictionary: [String: PlistValue]) -> AppTransportSecurityPolicy {
        AppTransportSecurityPolicy(.dictionary(dictionary))
    }

    func domains(_ entries: [String: [String: PlistValue]]) -> PlistValue {
        .dictionary(entries.mapValues { .dictionary($0) })
    }

    func messages(_ policy: AppTransportSecurityPolicy) -> [String] { policy.diagnostics.map(\.description) }

    // MARK: - Plist values

    @Test("PlistValue from PropertyListSerialization: booleans, integers and reals stay apart, in XML and binary")
    func plistValueFromFoundation() throws {
        let xml = """
        <?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict>
        <key>b</key><true/><key>i</key><integer>1</integer><key>r</key><real>1.5</real><key>s</key><string>YES</string>
        <key>d</key><date>2020-01-01T00:00:00Z</date><key>x</key><data>AAE=</data><key>a</key><array><false/></array>
        </dict></plist>
        """
        let root = try PropertyListSerialization.propertyList(from: Data(xml.utf8), options: [], format: nil)
        let binary = try PropertyListSerialization.data(fromPropertyList: root, format: .binary, options: 0)
        let expected = PlistValue.dictionary([
            "b": .bool(true), "i": .integer(1), "r": .real(1.5), "s": .string("YES"),
            "d": .date(Date(timeIntervalSince1970: 1_577_836_800)), "x": .data(Data([0, 1])), "a": .array([.bool(false)]),
        ])
        #expect(PlistValue(propertyList: root) == expected)
        let fromBinary = try PropertyListSerialization.propertyList(from: binary, options: [], format: nil)
        #expect(PlistValue(propertyList: fromBinary) == expected)
        #expect(PlistValue(propertyList: NSNull()) == nil)
        #expect(PlistValue(propertyList: ["k": NSNull()]) == nil)
    }

    // MARK: - Global keys

    @Test("No dictionary: default ATS, TLS 1.2 with forward secrecy, no entry")
    func defaultATS() {
        let policy = AppTransportSecurityPolicy(nil).effectivePolicy(for: "api.example.com")
        #expect(policy.source == .defaultATS)
        #expect(policy.minimumTLSVersion == .tls1_2)
        #expect(policy.requiresForwardSecrecy)
        #expect(!policy.allowsInsecureHTTPLoads && !policy.arbitraryLoads && !policy.requiresCertificateTransparency)
        #expect(policy.entry == nil && policy.pins == nil)
        #expect(policy.atsProbe.configuration == ATSConfigurationName.defaultATS)
    }

    @Test("NSAllowsArbitraryLoads turns ATS off for hosts no exception entry covers")
    func arbitraryLoads() {
        let app = ats(["NSAllowsArbitraryLoads": .bool(true),
                       "NSExceptionDomains": domains(["strict.example.com": [:]])])
        let open = app.effectivePolicy(for: "cdn.example.net")
        #expect(open.arbitraryLoads && open.allowsInsecureHTTPLoads && !open.requiresForwardSecrecy)
        #expect(open.minimumTLSVersion == .tls1_0)
        #expect(open.source == .arbitraryLoads)
        #expect(open.atsProbe.configuration == ATSConfigurationName.arbitraryLoads)
        // An exception entry is not affected by NSAllowsArbitraryLoads: an empty one is default ATS.
        let strict = app.effectivePolicy(for: "strict.example.com")
        #expect(!strict.arbitraryLoads && strict.minimumTLSVersion == .tls1_2 && strict.requiresForwardSecrecy)
        #expect(strict.entry == "strict.example.com")
        #expect(app.diagnostics.isEmpty)
        #expect(!ats(["NSAllowsArbitraryLoads": .bool(false)]).effectivePolicy(for: "a.example.net").arbitraryLoads)
    }

    @Test("iOS 10+: NSAllowsArbitraryLoadsForMedia, InWebContent or LocalNetworking present, with any Boolean value, makes NSAllowsArbitraryLoads ignored; a value of another type is no key (Security's ATS_VALUE_FOR_KEY)",
          arguments: ["NSAllowsArbitraryLoadsForMedia", "NSAllowsArbitraryLoadsInWebContent", "NSAllowsLocalNetworking"])
    func arbitraryLoadsOverridden(key: String) {
        for value in [PlistValue.bool(true), .bool(false)] {
            let app = ats(["NSAllowsArbitraryLoads": .bool(true), key: value])
            #expect(!app.arbitraryLoadsInEffect)
            #expect(app.arbitraryLoadsOverriddenBy == [key])
            let policy = app.effectivePolicy(for: "api.example.com")
            #expect(policy.source == .defaultATS && !policy.arbitraryLoads)
            #expect(policy.reason.contains("NSAllowsArbitraryLoads is ignored on iOS 10 and later because \(key) is present"))
            #expect(messages(app) == ["NSAppTransportSecurity.NSAllowsArbitraryLoads: ignored on iOS 10 and later because \(key) is present (with any Boolean value)"])
        }
        // A value that is no Boolean or number is taken as absent: NSAllowsArbitraryLoads stays in effect.
        let wrongType = ats(["NSAllowsArbitraryLoads": .bool(true), key: .string("YES")])
        #expect(wrongType.arbitraryLoadsInEffect && wrongType.arbitraryLoadsOverriddenBy.isEmpty)
    }

    @Test("The media and web-content keys are read but do not change URLSession hosts")
    func mediaAndWebContent() {
        let app = ats(["NSAllowsArbitraryLoadsForMedia": .bool(true), "NSAllowsArbitraryLoadsInWebContent": .bool(true)])
        #expect(app.allowsArbitraryLoadsForMedia == true && app.allowsArbitraryLoadsInWebContent == true)
        #expect(app.effectivePolicy(for: "video.example.com").source == .defaultATS)
        #expect(app.diagnostics.isEmpty)
    }

    @Test("NSAllowsLocalNetworking turns ATS off for IP addresses, unqualified names and .local names only")
    func localNetworking() {
        let app = ats(["NSAllowsLocalNetworking": .bool(true)])
        for (host, kind) in [("192.168.1.10", "an IP address"), ("[fd00::1]", "an IP address"), ("printer", "an unqualified name"),
                             ("localhost", "an unqualified name"), ("nas.local", "a .local name"), ("NAS.LOCAL.", "a .local name")] {
            let policy = app.effectivePolicy(for: host)
            #expect(policy.source == .localNetworking, "\(host)")
            #expect(policy.arbitraryLoads, "\(host)")
            #expect(policy.reason.contains(kind), "\(host)")
        }
        #expect(app.effectivePolicy(for: "api.example.com").source == .defaultATS)
        #expect(app.effectivePolicy(for: "local.example.com").source == .defaultATS)
        // Without the key, local hosts get default ATS (current iOS; see apple-rules.md section 6).
        #expect(ats([:]).effectivePolicy(for: "192.168.1.10").source == .defaultATS)
        #expect(ats(["NSAllowsLocalNetworking": .bool(false)]).effectivePolicy(for: "printer").source == .defaultATS)
    }

    // MARK: - Exception keys

    @Test("Each exception key changes the host's policy, and the probe that stands for it")
    func exceptionKeys() {
        let app = ats(["NSExceptionDomains": domains([
            "insecure.example.com": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true)],
            "nofs.example.com": ["NSExceptionRequiresForwardSecrecy": .bool(false)],
            "ct.example.com": ["NSRequiresCertificateTransparency": .bool(true)],
            "v10.example.com": ["NSExceptionMinimumTLSVersion": .string("TLSv1.0")],
            "v11.example.com": ["NSExceptionMinimumTLSVersion": .string("TLSv1.1"), "NSExceptionRequiresForwardSecrecy": .bool(false)],
            "v12.example.com": ["NSExceptionMinimumTLSVersion": .string("TLSv1.2")],
            "v13.example.com": ["NSExceptionMinimumTLSVersion": .string("TLSv1.3")],
        ])])
        #expect(app.diagnostics.isEmpty)
        let insecure = app.effectivePolicy(for: "insecure.example.com")
        #expect(insecure.allowsInsecureHTTPLoads && !insecure.arbitraryLoads && insecure.minimumTLSVersion == .tls1_2 && insecure.requiresForwardSecrecy)
        #expect(insecure.atsProbe.configuration == ATSConfigurationName.insecureHTTPLoads)
        let nofs = app.effectivePolicy(for: "nofs.example.com")
        #expect(!nofs.requiresForwardSecrecy && nofs.minimumTLSVersion == .tls1_2)
        #expect(nofs.atsProbe.configuration == ATSConfigurationName.noForwardSecrecy)
        let ct = app.effectivePolicy(for: "ct.example.com")
        #expect(ct.requiresCertificateTransparency && ct.atsProbe.configuration == ATSConfigurationName.defaultATS)
        #expect(app.effectivePolicy(for: "v10.example.com").minimumTLSVersion == .tls1_0)
        #expect(app.effectivePolicy(for: "v10.example.com").atsProbe.configuration == ATSConfigurationName.tls10)
        #expect(app.effectivePolicy(for: "v11.example.com").atsProbe.configuration == ATSConfigurationName.tls11NoForwardSecrecy)
        #expect(app.effectivePolicy(for: "v12.example.com").atsProbe.configuration == ATSConfigurationName.defaultATS)
        #expect(app.effectivePolicy(for: "v13.example.com").minimumTLSVersion == .tls1_3)
        #expect(app.effectivePolicy(for: "v13.example.com").atsProbe.configuration == ATSConfigurationName.tls13)
        #expect(app.exceptionDomains.first { $0.domain == "v11.example.com" }?.declaredKeys
                == ["NSExceptionMinimumTLSVersion", "NSExceptionRequiresForwardSecrecy"])
    }

    @Test("The probe mapping covers every combination, with the version still to check where no probe matches exactly")
    func probeMapping() {
        func probe(_ keys: [String: PlistValue]) -> ATSProbeSelection {
            ats(["NSExceptionDomains": domains(["h.example.com": keys])]).effectivePolicy(for: "h.example.com").atsProbe
        }
        let insecure = PlistValue.bool(true)
        #expect(probe(["NSExceptionMinimumTLSVersion": .string("TLSv1.1")]).configuration == ATSConfigurationName.tls11)
        #expect(probe(["NSExceptionMinimumTLSVersion": .string("TLSv1.0"), "NSExceptionRequiresForwardSecrecy": .bool(false)]).configuration
                == ATSConfigurationName.tls10NoForwardSecrecy)
        #expect(probe(["NSExceptionAllowsInsecureHTTPLoads": insecure, "NSExceptionRequiresForwardSecrecy": .bool(false)]).configuration
                == ATSConfigurationName.insecureHTTPLoadsNoForwardSecrecy)
        let insecure10 = probe(["NSExceptionAllowsInsecureHTTPLoads": insecure, "NSExceptionMinimumTLSVersion": .string("TLSv1.0")])
        #expect(insecure10.configuration == ATSConfigurationName.insecureHTTPLoadsTLS10 && insecure10.minimumNegotiatedVersion == nil)
        #expect(probe(["NSExceptionAllowsInsecureHTTPLoads": insecure, "NSExceptionMinimumTLSVersion": .string("TLSv1.0"),
                       "NSExceptionRequiresForwardSecrecy": .bool(false)]).configuration
                == ATSConfigurationName.insecureHTTPLoadsTLS10NoForwardSecrecy)
        let insecure11 = probe(["NSExceptionAllowsInsecureHTTPLoads": insecure, "NSExceptionMinimumTLSVersion": .string("TLSv1.1")])
        #expect(insecure11.configuration == ATSConfigurationName.insecureHTTPLoadsTLS10 && insecure11.minimumNegotiatedVersion == .tls1_1)
        let insecure13 = probe(["NSExceptionAllowsInsecureHTTPLoads": insecure, "NSExceptionMinimumTLSVersion": .string("TLSv1.3")])
        #expect(insecure13.configuration == ATSConfigurationName.insecureHTTPLoads && insecure13.minimumNegotiatedVersion == .tls1_3)
        #expect(probe(["NSExceptionMinimumTLSVersion": .string("TLSv1.3"), "NSExceptionRequiresForwardSecrecy": .bool(false)]).configuration
                == ATSConfigurationName.tls13)
    }

    @Test("Legacy NSThirdPartyException spellings are read, with a warning; the current spelling wins when both are given")
    func legacySpellings() {
        let app = ats(["NSExceptionDomains": domains([
            "old.example.com": ["NSThirdPartyExceptionAllowsInsecureHTTPLoads": .bool(true),
                                "NSThirdPartyExceptionMinimumTLSVersion": .string("TLSv1.1"),
                                "NSThirdPartyExceptionRequiresForwardSecrecy": .bool(false)],
            "both.example.com": ["NSExceptionMinimumTLSVersion": .string("TLSv1.2"),
                                 "NSThirdPartyExceptionMinimumTLSVersion": .string("TLSv1.0")],
        ])])
        let old = app.effectivePolicy(for: "old.example.com")
        #expect(old.allowsInsecureHTTPLoads && old.minimumTLSVersion == .tls1_1 && !old.requiresForwardSecrecy)
        #expect(app.effectivePolicy(for: "both.example.com").minimumTLSVersion == .tls1_2)
        let prefix = "NSAppTransportSecurity.NSExceptionDomains."
        #expect(Set(messages(app)) == [
            prefix + "old.example.com.NSThirdPartyExceptionAllowsInsecureHTTPLoads: legacy spelling, read as NSExceptionAllowsInsecureHTTPLoads",
            prefix + "old.example.com.NSThirdPartyExceptionMinimumTLSVersion: legacy spelling, read as NSExceptionMinimumTLSVersion",
            prefix + "old.example.com.NSThirdPartyExceptionRequiresForwardSecrecy: legacy spelling, read as NSExceptionRequiresForwardSecrecy",
            prefix + "both.example.com.NSThirdPartyExceptionMinimumTLSVersion: legacy spelling of NSExceptionMinimumTLSVersion, which is also given: NSExceptionMinimumTLSVersion is read, this key is not",
        ])
        #expect(app.diagnostics.allSatisfy { $0.severity == .warning })
    }

    // MARK: - Which entry applies

    @Test("An exact entry comes before its parent's NSIncludesSubdomains; the parent covers other children")
    func mostSpecificEntry() {
        let app = ats(["NSExceptionDomains": domains([
            "example.com": ["NSIncludesSubdomains": .bool(true), "NSExceptionAllowsInsecureHTTPLoads": .bool(true)],
            "api.example.com": ["NSExceptionMinimumTLSVersion": .string("TLSv1.1")],
        ])])
        let api = app.effectivePolicy(for: "api.example.com")
        #expect(api.entry == "api.example.com")
        #expect(!api.allowsInsecureHTTPLoads && api.minimumTLSVersion == .tls1_1)
        #expect(api.reason.contains("names this host exactly") && api.reason.contains("'example.com'"))
        let www = app.effectivePolicy(for: "www.example.com")
        #expect(www.entry == "example.com" && www.allowsInsecureHTTPLoads)
        #expect(www.reason.contains("through NSIncludesSubdomains"))
        #expect(app.effectivePolicy(for: "example.com").entry == "example.com")
        #expect(app.effectivePolicy(for: "notexample.com").entry == nil)
    }

    @Test("NSIncludesSubdomains reaches one label below the key (Apple's documented reach); without it only the key itself")
    func includesSubdomainsReach() {
        let app = ats(["NSExceptionDomains": domains([
            "example.com": ["NSIncludesSubdomains": .bool(true)],
            "example.org": ["NSIncludesSubdomains": .bool(false)],
        ])])
        #expect(app.effectivePolicy(for: "math.example.com").entry == "example.com")
        let deep = app.effectivePolicy(for: "advanced.math.example.com")
        #expect(deep.entry == nil)
        #expect(deep.reason.contains("'example.com' reaches one label below it only"))
        let child = app.effectivePolicy(for: "www.example.org")
        #expect(child.entry == nil && child.reason.contains("'example.org' does not include subdomains"))
        #expect(app.effectivePolicy(for: "example.org").entry == "example.org")
    }

    @Test("Host case does not matter; domain keys match as written: upper case and trailing dots")
    func caseAndTrailingDots() {
        let app = ats(["NSExceptionDomains": domains([
            "api.example.com": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true)],
            "dot.example.com.": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true)],
            "Upper.Example.com": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true)],
        ])])
        #expect(app.effectivePolicy(for: "API.Example.COM").entry == "api.example.com")
        #expect(app.effectivePolicy(for: "api.example.com.").entry == nil)
        #expect(app.effectivePolicy(for: "dot.example.com.").entry == "dot.example.com.")
        let undotted = app.effectivePolicy(for: "dot.example.com")
        #expect(undotted.entry == nil && undotted.reason.contains("trailing dot"))
        #expect(app.effectivePolicy(for: "upper.example.com").entry == nil)
        #expect(messages(app) == ["NSAppTransportSecurity.NSExceptionDomains.Upper.Example.com: not lower case: Apple asks for lower-case keys, and tlsaudit matches the key as written, so no host matches it"])
    }

    @Test("IP literals: an address entry, the narrowest CIDR range; names never match addresses; NSIncludesSubdomains has no effect")
    func ipAddresses() {
        let app = ats(["NSExceptionDomains": domains([
            "192.168.0.0/16": ["NSExceptionMinimumTLSVersion": .string("TLSv1.1")],
            "192.168.42.0/24": ["NSExceptionMinimumTLSVersion": .string("TLSv1.0")],
            "192.168.42.63": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true), "NSIncludesSubdomains": .bool(true)],
            "2001:db8:12::/48": ["NSExceptionRequiresForwardSecrecy": .bool(false)],
            "api.example.com": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true)],
        ])])
        #expect(app.effectivePolicy(for: "192.168.42.63").entry == "192.168.42.63")
        let narrow = app.effectivePolicy(for: "192.168.42.7")
        #expect(narrow.entry == "192.168.42.0/24" && narrow.minimumTLSVersion == .tls1_0)
        #expect(narrow.reason.contains("the narrowest of the 2 ranges"))
        #expect(app.effectivePolicy(for: "192.168.7.1").entry == "192.168.0.0/16")
        #expect(app.effectivePolicy(for: "[2001:DB8:12::34]").entry == "2001:db8:12::/48")
        #expect(app.effectivePolicy(for: "2001:db8:13::1").entry == nil)
        #expect(app.effectivePolicy(for: "10.0.0.1").entry == nil)
        #expect(messages(app) == ["NSAppTransportSecurity.NSExceptionDomains.192.168.42.63: NSIncludesSubdomains has no effect on an IP address or range"])
        let bad = ats(["NSExceptionDomains": domains(["10.0.0.0/40": [:]])])
        #expect(messages(bad) == ["NSAppTransportSecurity.NSExceptionDomains.10.0.0.0/40: not a valid IP address range; it matches no host"])
        #expect(bad.effectivePolicy(for: "10.0.0.1").entry == nil)
    }

    @Test("An exception entry comes before NSAllowsLocalNetworking for a local host")
    func entryBeforeLocalNetworking() {
        let app = ats(["NSAllowsLocalNetworking": .bool(true),
                       "NSExceptionDomains": domains(["printer.local": ["NSExceptionMinimumTLSVersion": .string("TLSv1.0")]])])
        let printer = app.effectivePolicy(for: "printer.local")
        #expect(printer.entry == "printer.local" && !printer.arbitraryLoads && printer.minimumTLSVersion == .tls1_0)
        #expect(app.effectivePolicy(for: "scanner.local").source == .localNetworking)
    }

    // MARK: - Pins

    @Test("NSPinnedDomains: leaf and CA identities, the most specific entry, independent of the exception entry")
    func pinnedDomains() {
        let app = ats([
            "NSPinnedDomains": domains([
                "example.com": ["NSIncludesSubdomains": .bool(true),
                                "NSPinnedCAIdentities": .array([.dictionary(["SPKI-SHA256-BASE64": .string(Self.pinA)]),
                                                                .dictionary(["SPKI-SHA256-BASE64": .string(Self.pinB)])])],
                "api.example.com": ["NSPinnedLeafIdentities": .array([.dictionary(["SPKI-SHA256-BASE64": .string(Self.pinA)]),
                                                                      .dictionary(["SPKI-SHA256-BASE64": .string(Self.pinB)])])],
            ]),
            "NSExceptionDomains": domains(["www.example.com": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true)]]),
        ])
        #expect(app.diagnostics.isEmpty)
        let api = app.effectivePolicy(for: "api.example.com")
        #expect(api.pins?.domain == "api.example.com" && api.pins?.leafIdentities == [Self.pinA, Self.pinB] && api.pins?.caIdentities == [])
        #expect(api.entry == nil)
        let www = app.effectivePolicy(for: "www.example.com")
        #expect(www.pins?.caIdentities == [Self.pinA, Self.pinB] && www.entry == "www.example.com")
        #expect(www.pinReason.contains("through NSIncludesSubdomains"))
        #expect(www.pins?.pinPolicy.caIdentities == [Self.pinA, Self.pinB])
        #expect(app.effectivePolicy(for: "example.net").pins == nil)
        #expect(app.effectivePolicy(for: "example.net").pinReason == "no NSPinnedDomains entry covers this host")
        #expect(ats([:]).effectivePolicy(for: "example.net").pinReason == "the app pins nothing")
        // trustd's parseNSPinnedDomains: the host's trailing dot removed, the key compared ignoring case.
        #expect(app.effectivePolicy(for: "api.example.com.").pins?.domain == "api.example.com")
        let upper = ats(["NSPinnedDomains": domains(["Pinned.Example.com": ["NSPinnedLeafIdentities": .array([
            .dictionary(["SPKI-SHA256-BASE64": .string(Self.pinA)]), .dictionary(["SPKI-SHA256-BASE64": .string(Self.pinB)])])]])])
        #expect(upper.effectivePolicy(for: "pinned.example.com").pins != nil, "a pinned key matches whatever its case")
        #expect(!upper.diagnostics.contains { $0.message.hasPrefix("not lower case") }, "\(upper.diagnostics)")
        let unicode = ats(["NSExceptionDomains": domains(["bücher.example": ["NSExceptionAllowsInsecureHTTPLoads": .bool(true)]])])
        #expect(unicode.diagnostics.contains { $0.message.contains("write the key as xn--bcher-kva.example") }, "\(unicode.diagnostics)")
        #expect(unicode.effectivePolicy(for: "bücher.example").entry == nil, "the host is looked up as its A-label")
    }

    @Test("NSPinnedDomains refusals: no identities, an empty array, a malformed pin, a missing SPKI key; a single pin is a warning")
    func pinnedDomainProblems() {
        let app = ats(["NSPinnedDomains": domains([
            "none.example.com": ["NSIncludesSubdomains": .bool(true)],
            "empty.example.com": ["NSPinnedLeafIdentities": .array([])],
            "bad.example.com": ["NSPinnedCAIdentities": .array([.dictionary(["SPKI-SHA256-BASE64": .string("abc")]),
                                                                .dictionary(["sha256": .string(Self.pinA)]),
                                                                .string(Self.pinA)])],
            "single.example.com": ["NSPinnedLeafIdentities": .array([.dictionary(["SPKI-SHA256-BASE64": .string(Self.pinA)])])],
        ])])
        let prefix = "NSAppTransportSecurity.NSPinnedDomains."
        #expect(Set(messages(app)) == [
            prefix + "none.example.com: has neither NSPinnedLeafIdentities nor NSPinnedCAIdentities (Apple requires one)",
            prefix + "empty.example.com.NSPinnedLeafIdentities: empty: Apple treats an empty identity array as a configuration error",
            prefix + "bad.example.com.NSPinnedCAIdentities[0].SPKI-SHA256-BASE64: 'abc' is not the base64 of a SHA-256 digest (32 bytes, 44 characters)",
            prefix + "bad.example.com.NSPinnedCAIdentities[1].sha256: unknown key; expected one of SPKI-SHA256-BASE64",
            prefix + "bad.example.com.NSPinnedCAIdentities[1].SPKI-SHA256-BASE64: missing",
            prefix + "bad.example.com.NSPinnedCAIdentities[2]: expected a dictionary with SPKI-SHA256-BASE64, found a string",
            prefix + "single.example.com: a single pinned identity and no backup: a new key on the server breaks the app",
        ])
        #expect(app.pinnedDomains.first { $0.domain == "bad.example.com" }?.caIdentities == [])
    }

    // MARK: - Unknown keys and wrong types

    @Test("Every wrong type is reported with its key path, and the value is not read", arguments: [
        (["NSAllowsArbitraryLoads": PlistValue.string("YES")], "NSAppTransportSecurity.NSAllowsArbitraryLoads: expected a boolean, found a string"),
        (["NSAllowsArbitraryLoadsForMedia": .integer(1)], "NSAppTransportSecurity.NSAllowsArbitraryLoadsForMedia: expected a boolean, found an integer"),
        (["NSAllowsArbitraryLoadsInWebContent": .real(1)], "NSAppTransportSecurity.NSAllowsArbitraryLoadsInWebContent: expected a boolean, found a real number"),
        (["NSAllowsLocalNetworking": .date(Date(timeIntervalSince1970: 0))], "NSAppTransportSecurity.NSAllowsLocalNetworking: expected a boolean, found a date"),
        (["NSExceptionDomains": .array([])], "NSAppTransportSecurity.NSExceptionDomains: expected a dictionary, found an array"),
        (["NSPinnedDomains": .data(Data())], "NSAppTransportSecurity.NSPinnedDomains: expected a dictionary, found data"),
        (["NSExceptionDomains": .dictionary(["api.example.com": .bool(true)])],
         "NSAppTransportSecurity.NSExceptionDomains.api.example.com: expected a dictionary, found a boolean"),
        (["NSPinnedDomains": .dictionary(["api.example.com": .string("pin")])],
         "NSAppTransportSecurity.NSPinnedDomains.api.example.com: expected a dictionary, found a string"),
    ])
    func wrongGlobalTypes(dictionary: [String: PlistValue], message: String) {
        let app = ats(dictionary)
        #expect(messages(app) == [message])
        #expect(app.diagnostics.first?.severity == .error)
        #expect(app.effectivePolicy(for: "api.example.com").source == .defaultATS)
    }

    @Test("Every wrong type inside an entry is reported with its key path, and the default stays", arguments: [
        ("NSIncludesSubdomains", PlistValue.string("YES"), "expected a boolean, found a string"),
        ("NSExceptionAllowsInsecureHTTPLoads", .integer(1), "expected a boolean, found an integer"),
        ("NSExceptionMinimumTLSVersion", .bool(true), "expected a string, found a boolean"),
        ("NSExceptionMinimumTLSVersion", .string("TLSv1"), "'TLSv1' is not a TLS version Apple reads (TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3); the default TLSv1.2 applies"),
        ("NSExceptionRequiresForwardSecrecy", .string("NO"), "expected a boolean, found a string"),
        ("NSRequiresCertificateTransparency", .array([]), "expected a boolean, found an array"),
        ("NSThirdPartyExceptionAllowsInsecureHTTPLoads", .dictionary([:]), "expected a boolean, found a dictionary"),
        ("NSThirdPartyExceptionMinimumTLSVersion", .integer(12), "expected a string, found an integer"),
        ("NSThirdPartyExceptionRequiresForwardSecrecy", .data(Data([0])), "expected a boolean, found data"),
    ])
    func wrongEntryTypes(key: String, value: PlistValue, message: String) {
        let app = ats(["NSExceptionDomains": domains(["api.example.com": [key: value]])])
        let path = "NSAppTransportSecurity.NSExceptionDomains.api.example.com.\(key)"
        #expect(app.diagnostics.contains { $0.keyPath == path && $0.severity == .error && $0.message == message })
        let policy = app.effectivePolicy(for: "api.example.com")
        #expect(policy.entry == "api.example.com")
        #expect(policy.minimumTLSVersion == .tls1_2 && policy.requiresForwardSecrecy && !policy.allowsInsecureHTTPLoads
                && !policy.requiresCertificateTransparency)
        #expect(app.effectivePolicy(for: "www.api.example.com").entry == nil)
    }

    @Test("Wrong types in NSPinnedDomains entries are reported with their key paths")
    func wrongPinnedTypes() {
        let app = ats(["NSPinnedDomains": domains(["api.example.com": [
            "NSIncludesSubdomains": .integer(1),
            "NSPinnedLeafIdentities": .string(Self.pinA),
            "NSPinnedCAIdentities": .array([.dictionary(["SPKI-SHA256-BASE64": .data(Data(repeating: 1, count: 32))])]),
        ]])])
        let prefix = "NSAppTransportSecurity.NSPinnedDomains.api.example.com."
        #expect(Set(messages(app)) == [
            prefix + "NSIncludesSubdomains: expected a boolean, found an integer",
            prefix + "NSPinnedLeafIdentities: expected an array, found a string",
            prefix + "NSPinnedCAIdentities[0].SPKI-SHA256-BASE64: expected a string, found data",
        ])
    }

    @Test("Unknown keys are reported with their key paths, at every level")
    func unknownKeys() {
        let app = ats([
            "NSAllowsArbitraryLoad": .bool(true),
            "NSRequiresCertificateTransparency": .bool(true),
            "NSExceptionDomains": domains(["api.example.com": [
                "NSTemporaryExceptionAllowsInsecureHTTPLoads": .bool(true),
                "NSExceptionAllowsLocalNetworking": .bool(true),
            ]]),
            "NSPinnedDomains": domains(["api.example.com": [
                "NSPinnedCAIdentities": .array([.dictionary(["SPKI-SHA256-BASE64": .string(Self.pinA)]),
                                                .dictionary(["SPKI-SHA256-BASE64": .string(Self.pinB)])]),
                "NSPinnedIntermediateIdentities": .array([]),
            ]]),
        ])
        let global = "expected one of NSAllowsArbitraryLoads, NSAllowsArbitraryLoadsForMedia, NSAllowsArbitraryLoadsInWebContent, NSAllowsLocalNetworking, NSExceptionDomains, NSPinnedDomains"
        let entry = "expected one of NSExceptionAllowsInsecureHTTPLoads, NSExceptionMinimumTLSVersion, NSExceptionRequiresForwardSecrecy, NSIncludesSubdomains, NSRequiresCertificateTransparency, NSThirdPartyExceptionAllowsInsecureHTTPLoads, NSThirdPartyExceptionMinimumTLSVersion, NSThirdPartyExceptionRequiresForwardSecrecy"
        #expect(Set(messages(app)) == [
            "NSAppTransportSecurity.NSAllowsArbitraryLoad: unknown key; " + global,
            "NSAppTransportSecurity.NSRequiresCertificateTransparency: unknown key (it belongs in an NSExceptionDomains entry); " + global,
            "NSAppTransportSecurity.NSExceptionDomains.api.example.com.NSTemporaryExceptionAllowsInsecureHTTPLoads: unknown key (iOS 9 beta spelling; current iOS documents NSExceptionAllowsInsecureHTTPLoads); " + entry,
            "NSAppTransportSecurity.NSExceptionDomains.api.example.com.NSExceptionAllowsLocalNetworking: unknown key; " + entry,
            "NSAppTransportSecurity.NSPinnedDomains.api.example.com.NSPinnedIntermediateIdentities: unknown key; expected one of NSIncludesSubdomains, NSPinnedCAIdentities, NSPinnedLeafIdentities",
        ])
        // The unknown spelling is not read: the host gets no insecure HTTP loads.
        #expect(!app.effectivePolicy(for: "api.example.com").allowsInsecureHTTPLoads)
        #expect(!app.arbitraryLoadsInEffect)
    }

    @Test("A whole Info.plist: NSAppTransportSecurity is read from it; a non-dictionary is reported")
    func infoPlist() {
        let plist = PlistValue.dictionary(["CFBundleIdentifier": .string("com.example.app"),
                                           "NSAppTransportSecurity": .dictionary(["NSAllowsArbitraryLoads": .bool(true)])])
        #expect(AppTransportSecurityPolicy(infoPlist: plist).arbitraryLoadsInEffect)
        #expect(AppTransportSecurityPolicy(infoPlist: .dictionary([:])).effectivePolicy(for: "a.example.com").source == .defaultATS)
        let wrong = AppTransportSecurityPolicy(infoPlist: .dictionary(["NSAppTransportSecurity": .bool(true)]))
        #expect(messages(wrong) == ["NSAppTransportSecurity: expected a dictionary, found a boolean; the app gets default ATS"])
        #expect(messages(AppTransportSecurityPolicy(infoPlist: .array([]))) == ["Info.plist: expected a dictionary, found an array"])
    }

    @Test("Domain keys that never match: a wildcard, a port")
    func keysThatNeverMatch() {
        let app = ats(["NSExceptionDomains": domains(["*.example.com": [:], "example.com:443": [:]])])
        #expect(Set(messages(app)) == [
            "NSAppTransportSecurity.NSExceptionDomains.*.example.com: wildcards are not read: use the parent name with NSIncludesSubdomains; no host matches this key",
            "NSAppTransportSecurity.NSExceptionDomains.example.com:443: a port is not part of a domain key; no host matches this key",
        ])
        #expect(app.effectivePolicy(for: "www.example.com").entry == nil)
        #expect(app.effectivePolicy(for: "example.com").entry == nil)
    }
}
