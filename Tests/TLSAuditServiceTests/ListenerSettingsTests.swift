import Testing
import TLSAuditService

/// The listener's settings as the configuration reads them.
extension ConfigurationTests {
    @Test("allowed_hosts: a name or a list of host names and IP addresses; a port, a scheme, a wildcard or an empty list is refused with its line")
    func allowedHostsSetting() throws {
        let configuration = self
        let good = try configuration.parse("""
            http:
              listen: "127.0.0.1:9219"
              allowed_hosts: [tlsaudit.example.net, status-page, 192.0.2.7, "::1"]
            targets: [a.example]
            """)
        #expect(good.http.allowedHosts == ["tlsaudit.example.net", "status-page", "192.0.2.7", "::1"])
        #expect(try configuration.parse("http: {listen: \":9219\", allowed_hosts: dash.example}\ntargets: [a.example]").http.allowedHosts == ["dash.example"])
        #expect(try configuration.parse("http: {listen: \":9219\"}\ntargets: [a.example]").http.allowedHosts.isEmpty)
        let problems = configuration.errors("""
            http:
              listen: "127.0.0.1:9219"
              allowed_hosts:
                - dash.example:9219
                - https://dash.example
                - "*.example.net"
                - -bad.example
            targets: [a.example]
            """)
        #expect(problems.map(\.line) == [4, 5, 6, 7], "\(problems)")
        #expect(problems.allSatisfy { $0.message.contains("is not a host name or IP address") }, "\(problems)")
        #expect(problems.first?.message.contains("'dash.example:9219'") == true)
        let empty = configuration.errors("http: {listen: \":9219\", allowed_hosts: []}\ntargets: [a.example]")
        #expect(empty.count == 1 && empty[0].message.contains("names no host"), "\(empty)")
    }
}
