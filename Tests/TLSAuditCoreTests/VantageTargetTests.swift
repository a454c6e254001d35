import Testing
import TLSAuditCore

/// How targets scanned from several vantage points are stored and matched back to the configuration.
@Suite("vantage targets")
struct VantageTargetTests {
    @Test("a stored KEY@VANTAGE belongs to its configured KEY; a plain key to itself; another key to neither")
    func stored() {
        #expect(VantageTarget.key("api", vantage: "eu") == "api@eu" && VantageTarget.key("api", vantage: nil) == "api")
        #expect(VantageTarget.split("api@eu") == ("api", "eu") && VantageTarget.split("api") == ("api", nil))
        let configured: Set = ["api", "shop.example:8443"]
        #expect(VantageTarget.isStored("api@eu", of: configured))
        #expect(VantageTarget.isStored("api", of: configured) && VantageTarget.isStored("shop.example:8443", of: configured))
        #expect(!VantageTarget.isStored("web@eu", of: configured) && !VantageTarget.isStored("apis", of: configured))
    }
}
