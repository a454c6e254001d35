import Foundation
import Testing
import TLSAuditCore
import TLSAuditProbe
import TLSAuditLab

/// The HTTP client behind webhook deliveries, against real loopback servers: plain HTTP, TLS with
/// a verified chain and name, HTTP proxies (absolute form and CONNECT), and the failures a
/// delivery must report plainly and within its timeout.
@Suite("HTTP client for webhook deliveries")
struct HTTPClientTests {
    static let direct = HTTPProxySettings()
    let body = Array(#"{"alert":"pin.mismatch"}"#.utf8)

    func post(_ url: String, timeout: Double = 3, caFile: String? = nil,
              proxies: HTTPProxySettings = direct) throws -> HTTPClient.Response {
        try HTTPClient.post(URL(string: url)!, body: body, headers: [("X-Test", "1")], timeout: timeout, caFile: caFile,
                            proxies: proxies)
    }

    func failure(_ url: String, timeout: Double = 3, caFile: String? = nil, proxies: HTTPProxySettings = direct) -> String {
        do {
            let response = try post(url, timeout: timeout, caFile: caFile, proxies: proxies)
            return "unexpected answer \(response.status)"
        } catch {
            return "\(error)"
        }
    }

    /// A TLS server answering HTTP as `names`, its chain from the test PKI.
    func tlsServer(_ names: [String]) throws -> LabTLSServer {
        let leaf = try TestPKI.shared.intermediate.issue(.server(names))
        return try LabTLSServer(LabServerConfiguration(chain: [leaf, TestPKI.shared.intermediate]))
    }

    @Test("plain HTTP: the body, the headers and the status arrive")
    func plainHTTP() throws {
        let receiver = try LabWebhookReceiver()
        let response = try post("http://127.0.0.1:\(receiver.port)/hooks/a?b=c")
        #expect(response.status == 200)
        let request = try #require(receiver.received.first)
        #expect(request.path == "/hooks/a?b=c")
        #expect(Array(request.body) == body)
        #expect(request.headers["x-test"] == "1")
        #expect(request.headers["host"] == "127.0.0.1:\(receiver.port)")
        #expect(request.headers["content-length"] == String(body.count))
        receiver.respond(with: 503)
        #expect(try post("http://127.0.0.1:\(receiver.port)/").status == 503)
    }

    @Test("HTTPS: a chain to the given CA for the URL's IP address is accepted")
    func https() throws {
        let server = try tlsServer(["127.0.0.1"])
        #expect(try post("https://127.0.0.1:\(server.port)/hook", caFile: TestPKI.shared.rootFile).status == 200)
    }

    @Test("HTTPS by name: the certificate must name the host in its subjectAltName")
    func httpsByName() throws {
        let named = try tlsServer(["localhost"])
        #expect(try post("https://localhost:\(named.port)/hook", caFile: TestPKI.shared.rootFile).status == 200)
        let other = try tlsServer(["other.tlsaudit.test"])
        let refused = failure("https://localhost:\(other.port)/", caFile: TestPKI.shared.rootFile)
        #expect(refused.contains("did not verify") && refused.contains("hostname mismatch"), "\(refused)")
    }

    @Test("HTTPS: an untrusted chain or a certificate for another name is refused, with the reason")
    func httpsRefusals() throws {
        let server = try tlsServer(["127.0.0.1"])
        // The system store does not know the test root.
        let untrusted = failure("https://127.0.0.1:\(server.port)/")
        #expect(untrusted.contains("did not verify") && untrusted.contains("local issuer"), "\(untrusted)")
        let other = try tlsServer(["other.tlsaudit.test"])
        let wrongName = failure("https://127.0.0.1:\(other.port)/", caFile: TestPKI.shared.rootFile)
        #expect(wrongName.contains("did not verify") && wrongName.contains("IP address mismatch"), "\(wrongName)")
    }

    @Test("through an HTTP proxy: absolute-form requests for http, CONNECT tunnels for https, no_proxy bypasses")
    func proxies() throws {
        // Any HTTP server shows what a proxy receives: the receiver records the absolute-form target.
        let proxy = try LabWebhookReceiver()
        let settings = HTTPProxySettings(httpProxy: "http://user:secret@127.0.0.1:\(proxy.port)",
                                         httpsProxy: nil, noProxy: [])
        #expect(try post("http://hooks.tlsaudit.test:8080/x", proxies: settings).status == 200)
        let request = try #require(proxy.received.first)
        #expect(request.path == "http://hooks.tlsaudit.test:8080/x")
        #expect(request.headers["proxy-authorization"] == "Basic " + Data("user:secret".utf8).base64EncodedString())
        #expect(request.headers["host"] == "hooks.tlsaudit.test:8080")

        let tunnel = try LabConnectProxy()
        let server = try tlsServer(["127.0.0.1"])
        let viaTunnel = HTTPProxySettings(httpsProxy: "127.0.0.1:\(tunnel.port)")
        #expect(try post("https://127.0.0.1:\(server.port)/", caFile: TestPKI.shared.rootFile, proxies: viaTunnel).status == 200)
        #expect(tunnel.requests.first?.hasPrefix("CONNECT 127.0.0.1:\(server.port) HTTP/1.1\r\n") == true)
        // A proxy whose answer ends its lines with a bare LF: the tunnel starts after its blank line.
        let bareLF = try LabConnectProxy(lineEnd: "\n")
        #expect(try post("https://127.0.0.1:\(server.port)/", caFile: TestPKI.shared.rootFile,
                         proxies: HTTPProxySettings(httpsProxy: "127.0.0.1:\(bareLF.port)")).status == 200)

        // A proxy that is not there, bypassed by no_proxy.
        let dead = try LabPorts.unusedPort()
        let bypassed = HTTPProxySettings(httpsProxy: "127.0.0.1:\(dead)", noProxy: ["example.com", "127.0.0.1"])
        #expect(try post("https://127.0.0.1:\(server.port)/", caFile: TestPKI.shared.rootFile, proxies: bypassed).status == 200)
        let byRange = HTTPProxySettings(httpsProxy: "127.0.0.1:\(dead)", noProxy: ["10.0.0.0/8", "127.0.0.0/8"])
        #expect(try post("https://127.0.0.1:\(server.port)/", caFile: TestPKI.shared.rootFile, proxies: byRange).status == 200)
        // Names match by suffix; IP addresses only as the same address or within a range.
        for entries in [["example.com"], [".0.0.1"], ["127.0.0.10", "10.0.0.0/8", "::/0"], ["127.0.0.0/-1"]] {
            let unbypassed = HTTPProxySettings(httpsProxy: "127.0.0.1:\(dead)", noProxy: entries)
            let refused = failure("https://127.0.0.1:\(server.port)/", caFile: TestPKI.shared.rootFile, proxies: unbypassed)
            #expect(refused.contains("the proxy http://127.0.0.1:\(dead)") && refused.contains("refused"), "\(entries): \(refused)")
        }
    }

    @Test("interim answers (100 Continue, 102 Processing, 103 Early Hints) are skipped for the final status")
    func interimAnswers() throws {
        let receiver = try LabWebhookReceiver()
        receiver.respond(with: 204, after: [100, 103])
        #expect(try post("http://127.0.0.1:\(receiver.port)/").status == 204)
        #expect(receiver.received.count == 1)
        // 102 comes with bare LF line ends, the final answer with CRLF: each header block ends at its own blank line.
        receiver.respond(with: 503, after: [102])
        #expect(try post("http://127.0.0.1:\(receiver.port)/").status == 503)
        receiver.respond(with: 202, after: [102, 100, 102])
        #expect(try post("http://127.0.0.1:\(receiver.port)/").status == 202)
        // 101 Switching Protocols is never asked for (no Upgrade header): it is taken as the final answer.
        receiver.respond(with: 101)
        #expect(try post("http://127.0.0.1:\(receiver.port)/").status == 101)
    }

    @Test("a server that answers and closes before reading the body: its answer is the result, not the failed write")
    func earlyAnswer() throws {
        let receiver = try LabWebhookReceiver()
        receiver.respondEarly(with: 413)
        // Far more than the socket buffers hold, so that the write fails once the server closes.
        let large = [UInt8](repeating: 0x61, count: 32 << 20)
        let response = try HTTPClient.post(URL(string: "http://127.0.0.1:\(receiver.port)/")!, body: large, headers: [],
                                           timeout: 10, proxies: Self.direct)
        #expect(response.status == 413)
        #expect(receiver.received.isEmpty)
        // An early success is not one: the receiver did not read the whole body it accepted.
        receiver.respondEarly(with: 200)
        do {
            let answer = try HTTPClient.post(URL(string: "http://127.0.0.1:\(receiver.port)/")!, body: large, headers: [],
                                             timeout: 10, proxies: Self.direct)
            Issue.record("an early 200 was taken as a delivery: \(answer.status)")
        } catch {
            #expect("\(error)" == "http://127.0.0.1:\(receiver.port) answered HTTP 200 before the whole request was sent")
        }
    }

    @Test("proxy settings come from the environment as curl reads them")
    func environment() {
        let settings = HTTPProxySettings.fromEnvironment([
            "HTTP_PROXY": "http://ignored:1", "https_proxy": "http://p:3128", "no_proxy": " Example.COM, .internal ,",
        ])
        #expect(settings.httpProxy == nil) // upper-case HTTP_PROXY is not read (CGI sets it from a request header)
        #expect(settings.httpsProxy == "http://p:3128")
        #expect(settings.noProxy == ["example.com", ".internal"])
        #expect(HTTPProxySettings.fromEnvironment(["ALL_PROXY": "q:1"]).httpProxy == "q:1")
    }

    @Test("failures name their cause and never outlast the timeout")
    func failures() throws {
        let closed = try LabPorts.unusedPort()
        let refused = failure("http://127.0.0.1:\(closed)/")
        #expect(refused.contains("cannot connect to http://127.0.0.1:\(closed)") && refused.contains("refused"), "\(refused)")

        let tarpit = try LabHostileServer(.tarpit)
        let started = Date()
        let silent = failure("http://127.0.0.1:\(tarpit.port)/", timeout: 1)
        #expect(Date().timeIntervalSince(started) < 2.5)
        #expect(silent.contains("no answer from http://127.0.0.1:\(tarpit.port) within 1 s"), "\(silent)")
        let silentTLS = failure("https://127.0.0.1:\(tarpit.port)/", timeout: 1)
        #expect(silentTLS.contains("no TLS handshake with 127.0.0.1 within 1 s"), "\(silentTLS)")

        let garbage = try LabHostileServer(.garbage)
        let notHTTP = failure("http://127.0.0.1:\(garbage.port)/")
        #expect(notHTTP.contains("did not answer with HTTP") || notHTTP.contains("closed the connection"), "\(notHTTP)")

        #expect(failure("ftp://127.0.0.1/").contains("is not an http:// or https:// URL"))
        // A host that would put a line break into the request is refused, not decoded.
        let injected = failure("http://a%0d%0aX-Evil%3a%20b/hook", proxies: HTTPProxySettings(httpProxy: "127.0.0.1:\(closed)"))
        #expect(injected.contains("has a host tlsaudit cannot use"), "\(injected)")
        #expect(failure("http://127.0.0.1/", proxies: HTTPProxySettings(httpProxy: "socks5://127.0.0.1:1080"))
            .contains("only http:// proxies are supported"))
    }
}
