import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel

/// Each ATS key of an app against a lab server that needs it and one that does not: `app audit`
/// says the host connects in both, and calls the key unneeded exactly where it changes nothing.
@Suite("app audit: each key, needed and not")
struct AppAuditKeyTests {
    let pki = TestPKI.shared
    static let names = ["shop.test", "api.shop.test", "deep.api.shop.test", "modern.shop.test", "127.0.0.1"]

    /// The lab servers every case shares: a modern one, a TLS 1.0-only one, a static-RSA-only one
    /// and a modern one whose chain no store trusts.
    final class Servers: @unchecked Sendable {
        static let shared = try! Servers()
        let modern, tls10, staticRSA, untrusted: LabTLSServer
        enum Kind: Sendable { case modern, tls10, staticRSA, untrusted }
        func port(_ kind: Kind) -> Int {
            switch kind {
            case .modern: modern.port
            case .tls10: tls10.port
            case .staticRSA: staticRSA.port
            case .untrusted: untrusted.port
            }
        }
        init() throws {
            let pki = TestPKI.shared
            let leaf = try pki.intermediate.issue(.server(AppAuditKeyTests.names, key: .rsa(bits: 2048)))
            let stranger = try pki.otherIntermediate.issue(.server(AppAuditKeyTests.names, key: .rsa(bits: 2048)))
            modern = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
            tls10 = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                            cipherList: "ECDHE-RSA-AES128-SHA"))
            staticRSA = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_2, maxVersion: .tls1_2,
                                                                cipherList: "AES128-GCM-SHA256"))
            untrusted = try LabTLSServer(LabServerConfiguration(chain: [stranger, pki.otherIntermediate]))
        }
    }

    struct Case: Sendable, CustomStringConvertible {
        var key: String
        /// NSAppTransportSecurity's content (plist XML).
        var plist: String
        /// The audited host (name:PORT is appended) and the server behind it, for the server that needs the key and the one that does not.
        var needs: (host: String, server: Servers.Kind)
        var doesNotNeed: (host: String, server: Servers.Kind)
        /// The app's trust evaluation, when the key matters only under the app's own (`--trust-evaluation`).
        var trustEvaluation: String? = nil
        var description: String { key }
    }

    static func entry(_ domain: String, _ keys: String) -> String {
        "<key>NSExceptionDomains</key><dict><key>\(domain)</key><dict>\(keys)</dict></dict>"
    }

    static let cases: [Case] = [
        Case(key: "NSExceptionMinimumTLSVersion",
             plist: entry("shop.test", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>"),
             needs: ("shop.test", .tls10), doesNotNeed: ("shop.test", .modern)),
        Case(key: "NSThirdPartyExceptionMinimumTLSVersion",
             plist: entry("shop.test", "<key>NSThirdPartyExceptionMinimumTLSVersion</key><string>TLSv1.0</string>"),
             needs: ("shop.test", .tls10), doesNotNeed: ("shop.test", .modern)),
        Case(key: "NSExceptionRequiresForwardSecrecy",
             plist: entry("shop.test", "<key>NSExceptionRequiresForwardSecrecy</key><false/>"),
             needs: ("shop.test", .staticRSA), doesNotNeed: ("shop.test", .modern)),
        Case(key: "NSExceptionAllowsInsecureHTTPLoads",
             plist: entry("shop.test", "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/>"),
             needs: ("shop.test", .untrusted), doesNotNeed: ("shop.test", .modern), trustEvaluation: "accept-all"),
        Case(key: "NSIncludesSubdomains",
             plist: entry("shop.test", "<key>NSIncludesSubdomains</key><true/><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>"),
             needs: ("api.shop.test", .tls10), doesNotNeed: ("shop.test", .tls10)),
    ]

    @Test("an exception key: needed by the server that needs it, unneeded for the one that does not", arguments: cases)
    func key(_ row: Case) throws {
        let audit = AppAuditTests()
        let servers = Servers.shared
        let file = try audit.plist(row.plist)
        let evaluation = row.trustEvaluation.map { ["--trust-evaluation", $0] } ?? []
        let needed = try audit.audit(file, hosts: ["\(row.needs.host):\(servers.port(row.needs.server))"], extra: evaluation)
        let neededHost = try #require(needed.report.hosts.first)
        #expect(neededHost.connects && neededHost.entry == "shop.test", "\(row.key): \(neededHost)")
        #expect(!(needed.report.entries.first?.unneeded.contains(row.key) ?? true), "\(row.key) is needed: \(needed.text)")

        let spare = try audit.audit(file, hosts: ["\(row.doesNotNeed.host):\(servers.port(row.doesNotNeed.server))"], extra: evaluation)
        #expect(spare.report.hosts.first?.connects == true, "\(row.key): \(spare.text)")
        #expect(spare.report.entries.first?.unneeded.contains(row.key) == true, "\(row.key) changes nothing here: \(spare.text)")
        #expect(spare.status == 1, "an unneeded key exits 1")
        // The corrected dictionary drops the unneeded key (legacy spellings are written in their NSException form).
        let twin = row.key.replacingOccurrences(of: "NSThirdParty", with: "NS")
        #expect(!spare.report.correctedDictionary.contains("<key>\(twin)</key>"), "\(spare.report.correctedDictionary)")
        #expect(needed.report.correctedDictionary.contains("<key>\(twin)</key>"), "\(needed.report.correctedDictionary)")

        // Without the key at all the server that needs it fails: the key is what makes it connect.
        let without = try audit.audit(try audit.plist("<key>NSAllowsArbitraryLoads</key><false/>"),
                                      hosts: ["\(row.needs.host):\(servers.port(row.needs.server))"], extra: evaluation)
        #expect(without.report.hosts.first?.connects == false, "\(row.key): \(without.text)")
    }

    @Test("an entry key that breaks its host is HARMFUL and leaves the corrected dictionary; a host whose entry lacks the key it needs gets it there")
    func harmfulAndMissingKeys() throws {
        let audit = AppAuditTests()
        let pki = TestPKI.shared
        let leaf = try pki.intermediate.issue(.server(Self.names, key: .rsa(bits: 2048)))
        let tls12 = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_2, maxVersion: .tls1_2,
                                                            cipherList: "ECDHE-RSA-AES128-GCM-SHA256"))
        defer { tls12.stop() }
        // A TLS 1.3 minimum on a forward-secret TLS 1.2 server: the key is the problem, no exception is needed.
        let strict = try audit.audit(try audit.plist(Self.entry("shop.test", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.3</string>")),
                                     hosts: ["shop.test:\(tls12.port)"])
        let host = try #require(strict.report.hosts.first)
        #expect(!host.connects && host.exceptionNeeded.isEmpty, "\(strict.text)")
        let entry = try #require(strict.report.entries.first)
        #expect(entry.harmful == ["NSExceptionMinimumTLSVersion"] && entry.note.contains("makes shop.test fail"), "\(strict.text)")
        #expect(strict.text.contains("HARMFUL: NSExceptionMinimumTLSVersion"), "\(strict.text)")
        #expect(!strict.report.correctedDictionary.contains("TLSv1.3"), "\(strict.report.correctedDictionary)")
        // A static-RSA server under an entry that only allows plain HTTP: the entry gets NSExceptionRequiresForwardSecrecy = NO.
        let lacking = try audit.audit(try audit.plist(Self.entry("shop.test", "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/>")),
                                      hosts: ["shop.test:\(Servers.shared.staticRSA.port)"])
        let needing = try #require(lacking.report.hosts.first)
        #expect(!needing.connects && needing.exceptionNeeded == ["NSExceptionRequiresForwardSecrecy": "NO"], "\(lacking.text)")
        let corrected = lacking.report.correctedDictionary
        #expect(corrected.contains("<key>shop.test</key>") && corrected.contains("NSExceptionRequiresForwardSecrecy"), "\(corrected)")
        #expect(lacking.report.entries.first?.note.contains("shop.test needs NSExceptionRequiresForwardSecrecy = NO") == true, "\(lacking.text)")
    }

    @Test("NSIncludesSubdomains reaches one label down: a host two labels below fails, with the near miss said")
    func subdomainReach() throws {
        let audit = AppAuditTests()
        let file = try audit.plist(Self.entry("shop.test", "<key>NSIncludesSubdomains</key><true/><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>"))
        let result = try audit.audit(file, hosts: ["deep.api.shop.test:\(Servers.shared.tls10.port)"])
        let host = try #require(result.report.hosts.first)
        #expect(!host.connects && host.entry == nil, "\(host)")
        #expect(host.rule.contains("reaches one label below it only"), "\(host.rule)")
    }

    @Test("NSAllowsLocalNetworking lets an IP host speak TLS 1.0; NSAllowsArbitraryLoads is ignored when NSAllowsArbitraryLoadsInWebContent is present")
    func globalKeys() throws {
        let audit = AppAuditTests()
        let tls10 = Servers.shared.tls10.port
        let local = try audit.audit(try audit.plist("<key>NSAllowsLocalNetworking</key><true/>"), hosts: ["127.0.0.1:\(tls10)"])
        let ip = try #require(local.report.hosts.first)
        #expect(ip.connects && ip.probe == "arbitrary-loads", "\(ip)")
        #expect(ip.rule.contains("NSAllowsLocalNetworking"), "\(ip.rule)")
        let notLocal = try audit.audit(try audit.plist("<key>NSAllowsArbitraryLoads</key><false/>"), hosts: ["127.0.0.1:\(tls10)"])
        #expect(notLocal.report.hosts.first?.connects == false, "without it an IP host gets default ATS (iOS 17+)")

        let overridden = try audit.audit(try audit.plist("""
            <key>NSAllowsArbitraryLoads</key><true/><key>NSAllowsArbitraryLoadsInWebContent</key><true/>
            """), hosts: ["shop.test:\(tls10)"])
        let host = try #require(overridden.report.hosts.first)
        #expect(!host.connects, "\(host)")
        #expect(host.rule.contains("NSAllowsArbitraryLoads is ignored on iOS 10 and later"), "\(host.rule)")
        let open = try audit.audit(try audit.plist("<key>NSAllowsArbitraryLoads</key><true/>"), hosts: ["shop.test:\(tls10)"])
        #expect(open.report.hosts.first?.connects == true, "alone, NSAllowsArbitraryLoads turns ATS off")
    }
}
