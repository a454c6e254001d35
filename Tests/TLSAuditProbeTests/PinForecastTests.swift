import Foundation
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditProbe

/// The pin forecast on certificates read back from a real lab log: which pinned names a logged
/// certificate reaches, and whether those names' pins accept it, by the scan's own pin check.
@Suite("Pin forecast")
struct PinForecastTests {
    let pki = TestPKI.shared

    /// `certificate` (or its precertificate) logged with the intermediate and the root, read back through the log's API.
    func logged(_ certificate: LabCertificate, precertificate: Bool = false) throws -> LoggedChain {
        let ctLog = try LabCTLog("Lab Log forecast", operator: "lab")
        let server = try LabCTLogServer(ctLog)
        defer { server.stop() }
        if precertificate {
            try server.addPrecertificate(certificate, issuer: pki.intermediate, chain: [pki.intermediate, pki.root])
        } else {
            server.add(certificate, chain: [pki.intermediate, pki.root])
        }
        server.publish()
        let client = try #require(CTLogClient(url: server.url, key: ctLog.publicKey, timeout: 5))
        let entry = try ParsedLogEntry.parse(try #require(try client.entries(from: 0, to: 0).first))
        return try LoggedChain(entry, store: try TrustStore(caFile: pki.rootFile), at: Date())
    }

    func spki(_ certificate: LabCertificate) -> String {
        Data(Digest.sha256(certificate.spkiDER)).base64EncodedString()
    }

    @Test("names: an exact pin reaches its host and a wildcard over it; NSIncludesSubdomains reaches the names and wildcards one label below (Apple's reach), a watch entry every depth; other names are ignored")
    func reach() {
        let pins = PinPolicy(leafIdentities: [String(repeating: "A", count: 43) + "="])
        let exact = PinForecast.PinnedName(domain: "api.shop.test", pins: pins, pinnedBy: "target api")
        #expect(exact.reaches(["api.shop.test"]) == "api.shop.test")
        #expect(exact.reaches(["*.shop.test"]) == "api.shop.test", "met as the pinned host")
        #expect(exact.reaches(["API.Shop.Test"]) != nil)
        #expect(exact.reaches(["shop.test", "www.shop.test", "api.other.test"]) == nil)
        #expect(exact.reaches(["*.api.shop.test"]) == nil, "a wildcard does not cover its own base name")
        let domain = PinForecast.PinnedName(domain: "shop.test", includeSubdomains: true, pins: pins, pinnedBy: "app")
        #expect(domain.reaches(["shop.test"]) == "shop.test" && domain.reaches(["api.shop.test"]) == "api.shop.test")
        #expect(domain.reaches(["deep.api.shop.test"]) == nil && domain.reaches(["*.api.shop.test"]) == nil, "two labels below: out of Apple's reach")
        #expect(domain.reaches(["*.shop.test"]) == "*.shop.test", "the names one label below, as the wildcard")
        #expect(domain.reaches(["bad..name.shop.test"]) == nil, "not a DNS name")
        #expect(domain.reaches(["notshop.test", "shop.test.evil"]) == nil)
        let noSubdomains = PinForecast.PinnedName(domain: "shop.test", pins: pins, pinnedBy: "app")
        #expect(noSubdomains.reaches(["api.shop.test"]) == nil)
        let watched = WatchedDomain(domain: "Shop.Test", watchedBy: "ct: watch")
        #expect(watched.reaches(["deep.api.shop.test"]) == "deep.api.shop.test" && watched.reaches(["*.api.shop.test"]) == "*.api.shop.test")
        #expect(watched.reaches(["shop.test.evil"]) == nil)
        #expect(WatchedDomain(domain: "shop.test", includeSubdomains: false, watchedBy: "target").reaches(["api.shop.test"]) == nil)
    }

    @Test("allowed issuers: a CA by organization or common name without case, or by its key (sha256/), matching any CA of the chain; no rule allows any CA; a malformed key rule is refused")
    func allowedIssuers() throws {
        let chain = [try X509Certificate(der: pki.intermediate.der).summary(), try X509Certificate(der: pki.root.der).summary()]
        let commonName = try #require(DistinguishedName.attribute("CN", of: chain[0].subject))
        #expect(WatchedDomain(domain: "a.test", issuers: [try #require(AllowedIssuer(commonName.uppercased()))], watchedBy: "w").allows(chain))
        let rootKey = try #require(AllowedIssuer("sha256/" + spki(pki.root)))
        #expect(WatchedDomain(domain: "a.test", issuers: [rootKey], watchedBy: "w").allows(chain), "a root's key covers its intermediates")
        #expect(!WatchedDomain(domain: "a.test", issuers: [rootKey], watchedBy: "w").allows(Array(chain.prefix(1))) , "not in the chain")
        #expect(!WatchedDomain(domain: "a.test", issuers: [try #require(AllowedIssuer("Let's Encrypt"))], watchedBy: "w").allows(chain))
        #expect(WatchedDomain(domain: "a.test", watchedBy: "w").allows(chain))
        #expect(AllowedIssuer("sha256/not-a-key") == nil && AllowedIssuer("  ") == nil)
        #expect(AllowedIssuer("sha256/" + spki(pki.root)) == .key(spki(pki.root)))
    }

    @Test("a renewal with a new key breaks leaf pins (NSPinnedLeafIdentities, AFNetworking public-key and certificate modes) and is covered by CA pins; the same key renewed is covered")
    func renewals() throws {
        let host = "api.forecast.test"
        let current = try pki.intermediate.issue(.server([host]))
        let renewedNewKey = try logged(try pki.intermediate.issue(.server([host])))
        let now = Date()
        func judge(_ pins: PinPolicy, _ chain: LoggedChain) -> PinEvaluation.State {
            PinForecast.judge(PinForecast.PinnedName(domain: host, pins: pins, pinnedBy: "test"), host: host, presented: chain.presented,
                              building: chain.building, now: now, buildWithPinnedAnchors: chain.buildWithPinnedAnchors).state
        }
        // Pinned on the current leaf's key: the new key breaks every leaf-pinning form.
        #expect(judge(PinPolicy(leafIdentities: [spki(current)]), renewedNewKey) == .mismatch)
        #expect(judge(PinPolicy(mode: .publicKey, pins: [.spki(spki(current))]), renewedNewKey) == .mismatch)
        var certificateMode = PinPolicy(mode: .certificate, pins: [.certificate(Digest.sha256(current.der).map { String(format: "%02x", $0) }.joined())])
        certificateMode.pinnedCertificates = [Data(current.der)]
        #expect(judge(certificateMode, renewedNewKey) == .mismatch)
        // Pinned on the intermediate: covered.
        #expect(judge(PinPolicy(caIdentities: [spki(pki.intermediate)]), renewedNewKey) == .match)
        #expect(judge(PinPolicy(mode: .publicKey, pins: [.spki(spki(pki.intermediate))]), renewedNewKey) == .match)
        var intermediateMode = PinPolicy(mode: .certificate, pins: [.certificate(Digest.sha256(pki.intermediate.der).map { String(format: "%02x", $0) }.joined())])
        intermediateMode.pinnedCertificates = [Data(pki.intermediate.der)]
        #expect(judge(intermediateMode, renewedNewKey) == .match)
        // Another CA's intermediate pinned: a certificate from this one breaks it.
        #expect(judge(PinPolicy(caIdentities: [spki(pki.otherIntermediate)]), renewedNewKey) == .mismatch)
        // Renewed with the same key (the operator kept it): the leaf pin still holds.
        var sameKeyRequest = LabCertificateRequest.server([host])
        sameKeyRequest.existingKey = current.key
        let sameKey = try logged(try pki.intermediate.issue(sameKeyRequest))
        #expect(judge(PinPolicy(leafIdentities: [spki(current)]), sameKey) == .match)
        #expect(renewedNewKey.names == [host])
        // Logged first as a precertificate (how most certificates reach a log): judged the same,
        // its poison extension not held against it in certificate mode.
        let precertificate = try logged(try pki.intermediate.issue(.server([host])), precertificate: true)
        #expect(judge(intermediateMode, precertificate) == .match)
        #expect(judge(PinPolicy(caIdentities: [spki(pki.intermediate)]), precertificate) == .match)
        #expect(judge(certificateMode, precertificate) == .mismatch)
        #expect(judge(PinPolicy(leafIdentities: [spki(current)]), precertificate) == .mismatch)
    }

    @Test("the pinned names come from targets' pins and their apps' AFSecurityPolicy, once each; the needles catch the wildcards over a pinned host and IDNs as A-labels")
    func pinnedNamesAndNeedles() {
        let leafPin = PinPolicy(leafIdentities: [String(repeating: "B", count: 43) + "="])
        var pinned = ScanTarget(original: "api", host: "api.shop.test", port: 443, sni: nil)
        pinned.pins = leafPin
        var again = pinned
        again.original = "api-again"
        let unpinned = ScanTarget(original: "www", host: "www.shop.test", port: 443, sni: nil)
        var app = ScanTarget(original: "bücher", host: "Bücher.Example.TEST", port: 443, sni: nil)
        app.app = AppHostRules(bundle: "com.example.books", entry: nil, reliesOn: [], minimumTLSVersion: .tls1_2, requiresForwardSecrecy: true,
                               allowsInsecureHTTPLoads: false, arbitraryLoads: false, requiresCertificateTransparency: false,
                               configuration: "default", minimumNegotiatedVersion: nil,
                               afnetworking: PinPolicy(mode: .publicKey, pins: [.spki(String(repeating: "C", count: 43) + "=")]))
        let names = PinForecast.pinnedNames([pinned, again, unpinned, app])
        #expect(names.map(\.domain) == ["api.shop.test", "api.shop.test", "xn--bcher-kva.example.test"])
        #expect(names.map(\.pinnedBy) == ["target api", "target api-again", "app com.example.books (AFSecurityPolicy)"])
        let needles = PinForecast.needles(names).map { String(decoding: $0, as: UTF8.self) }
        #expect(needles == ["shop.test", "example.test"], "the parent domains: a *.shop.test certificate serves api.shop.test")
        #expect(PinForecast.needles([PinForecast.PinnedName(domain: "shop.test", includeSubdomains: true, pins: leafPin, pinnedBy: "app")])
            .map { String(decoding: $0, as: UTF8.self) } == ["shop.test"])
        #expect(names[2].reaches(["xn--bcher-kva.example.test"]) == "xn--bcher-kva.example.test")
        // With subdomains too, a name of three labels is looked for by its parent: the wildcard over the name names only that.
        let parentNeedles = PinForecast.needles([PinForecast.PinnedName(domain: "api.shop.test", includeSubdomains: true, pins: leafPin, pinnedBy: "app")],
                                         watched: [WatchedDomain(domain: "a.b.example.test", watchedBy: "w")])
        #expect(parentNeedles.map { String(decoding: $0, as: UTF8.self) } == ["shop.test", "b.example.test"])

        // Pins from an NSPinnedDomains entry with NSIncludesSubdomains (as pins import writes them): one pinned name for
        // the entry, whichever of its targets carries them; an entry that does not cover the host pins the host.
        var entryPins = leafPin
        entryPins.pinnedDomain = PinnedDomainScope(domain: "Shop.Test", includesSubdomains: true)
        var first = ScanTarget(original: "shop-api", host: "api.shop.test", port: 443, sni: nil)
        first.pins = entryPins
        var second = ScanTarget(original: "shop-www", host: "www.shop.test", port: 443, sni: nil)
        second.pins = entryPins
        var elsewhere = ScanTarget(original: "other", host: "api.other.test", port: 443, sni: nil)
        elsewhere.pins = entryPins
        let scoped = PinForecast.pinnedNames([first, second, elsewhere])
        #expect(scoped.map(\.domain) == ["shop.test", "api.other.test"] && scoped.first?.includeSubdomains == true)
        #expect(scoped.first?.reaches(["cdn.shop.test"]) == "cdn.shop.test", "a name no target names, in the app's reach")
    }
}
