import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab

/// Servers that misbehave: each failure is named plainly, exits 2, and never outlasts the timeout.
@Suite("tlsaudit scan against hostile servers")
struct HostileServerTests {
    static let timeout = 2.0

    /// Scans 127.0.0.1:PORT with a short timeout.
    func scan(port: Int) throws -> (CLI.Output, AddressScanResult) {
        let output = try CLI.run(["scan", "--format", "json", "--timeout", String(Self.timeout), "127.0.0.1:\(port)"])
        return (output, try output.report().single)
    }

    func expectFailure(_ category: ProbeFailureCategory, port: Int, maxSeconds: Double,
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> AddressScanResult {
        let (output, result) = try scan(port: port)
        #expect(output.status == 2, sourceLocation: sourceLocation)
        #expect(result.status == .failed, sourceLocation: sourceLocation)
        #expect(result.error?.category == category, "\(String(describing: result.error))", sourceLocation: sourceLocation)
        #expect(result.ats.compliant == false, sourceLocation: sourceLocation)
        #expect(output.seconds < maxSeconds, "took \(output.seconds) s", sourceLocation: sourceLocation)
        return result
    }

    @Test("nothing listening: connection-refused")
    func refused() throws {
        let port = try LabPorts.unusedPort()
        let result = try expectFailure(.connectionRefused, port: port, maxSeconds: Self.timeout)
        #expect(result.error?.message.contains("refused") == true)
    }

    @Test("a listener that never completes the TCP handshake: connect-timeout within the timeout")
    func connectTimeout() throws {
        let server = try LabHostileServer(.blackhole)
        defer { server.stop() }
        _ = try expectFailure(.connectTimeout, port: server.port, maxSeconds: Self.timeout + 1.5)
    }

    @Test("a tarpit that accepts and never answers: handshake-timeout within the timeout")
    func tarpit() throws {
        let server = try LabHostileServer(.tarpit)
        defer { server.stop() }
        let result = try expectFailure(.handshakeTimeout, port: server.port, maxSeconds: Self.timeout + 1.5)
        #expect(result.error?.message.contains("sent nothing") == true)
    }

    @Test("a plain HTTP server: not-tls, and says it is HTTP")
    func plainHTTP() throws {
        let server = try LabHostileServer(.plainHTTP)
        defer { server.stop() }
        let result = try expectFailure(.notTLS, port: server.port, maxSeconds: Self.timeout)
        #expect(result.error?.message.contains("HTTP") == true, "\(String(describing: result.error))")
    }

    @Test("a server that answers with garbage: not-tls")
    func garbage() throws {
        let server = try LabHostileServer(.garbage)
        defer { server.stop() }
        _ = try expectFailure(.notTLS, port: server.port, maxSeconds: Self.timeout)
    }

    @Test("a server that closes after the ClientHello: closed-during-handshake")
    func closes() throws {
        let server = try LabHostileServer(.closeAfterClientHello)
        defer { server.stop() }
        let result = try expectFailure(.closedDuringHandshake, port: server.port, maxSeconds: Self.timeout)
        #expect(result.error?.message.contains("closed") == true || result.error?.message.contains("reset") == true)
    }

    @Test("a server that sends a fatal alert: tls-alert with the alert's name")
    func alert() throws {
        let server = try LabHostileServer(.alert(80)) // internal_error
        defer { server.stop() }
        let result = try expectFailure(.tlsAlert, port: server.port, maxSeconds: Self.timeout)
        #expect(result.error?.alert == "internal_error", "\(String(describing: result.error))")
    }

    @Test("a name that does not resolve: dns-failure, exit 2")
    func dnsFailure() throws {
        let output = try CLI.run(["scan", "--format", "json", "--timeout", String(Self.timeout), "no-such-host.invalid"])
        #expect(output.status == 2)
        let target = try #require(try output.report().targets.first)
        #expect(target.error?.category == .dnsFailure)
        #expect(target.addresses.isEmpty)
        #expect(output.seconds < Self.timeout + 1.5)
    }

    @Test("text output names the failure category plainly")
    func textOutput() throws {
        let server = try LabHostileServer(.tarpit)
        defer { server.stop() }
        let output = try CLI.run(["scan", "--timeout", "1", "127.0.0.1:\(server.port)"])
        #expect(output.status == 2)
        #expect(output.stdout.contains("COULD NOT SCAN"))
        #expect(output.stdout.contains("handshake timeout [handshake-timeout]"))
    }
}
