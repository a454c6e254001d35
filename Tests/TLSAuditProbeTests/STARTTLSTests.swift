import Foundation
import Synchronization
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditServiceLab
#if canImport(Glibc)
import Glibc
#endif

/// STARTTLS against real servers from Debian's packages (Exim, Dovecot, slapd, PostgreSQL), each
/// checked against `openssl s_client -starttls`, and against scripted dialogues from the RFCs for
/// the protocols without one (FTP, XMPP, MySQL, NNTP) and for every failure category.
@Suite("STARTTLS: real mail, directory and database servers, scripted dialogues, every failure", .serialized)
struct STARTTLSTests {
    let lab = ServiceLab.shared
    static let mailName = "mail.lab.tlsaudit.test"

    /// A leaf for `mailName` under the lab's intermediate, and its chain and key in PEM.
    static let mailLeaf: LabCertificate = try! ServiceLab.shared.intermediate.issue(.server([mailName]))
    static var chainPEM: String { mailLeaf.pem + ServiceLab.shared.intermediate.pem }
    static var keyPEM: String { mailLeaf.key.pem }

    /// `tlsaudit scan --format json` of one target; returns the exit status and the first address.
    func scan(_ target: String, _ arguments: [String] = [], timeout: String = "3") throws -> (status: Int32, target: [String: Any], address: [String: Any]) {
        let output = try Binary.run(["scan", "--format", "json", "--ca-file", lab.rootFile, "--timeout", timeout, "--sni", Self.mailName,
                                     target] + arguments)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        let targetDocument = try #require((document["targets"] as? [[String: Any]])?.first)
        let address = (targetDocument["addresses"] as? [[String: Any]])?.first ?? [:]
        return (output.status, targetDocument, address)
    }

    static func leafFingerprint(_ address: [String: Any]) -> String? {
        ((address["chain"] as? [String: Any])?["presented"] as? [[String: Any]])?.first?["sha256_fingerprint"] as? String
    }

    static func findingIDs(_ address: [String: Any]) -> [String] {
        ((address["findings"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }.sorted()
    }

    static func failure(_ address: [String: Any]) -> (category: String, message: String)? {
        guard let error = address["error"] as? [String: Any] else { return nil }
        return (error["category"] as? String ?? "", error["message"] as? String ?? "")
    }

    /// The leaf `openssl s_client -starttls PROTOCOL` sees, as a SHA-256 fingerprint (lowercase hex).
    static func opensslLeaf(_ proto: String, port: Int) throws -> String {
        let openssl = try LabPrerequisite.program(["/usr/bin/openssl"], package: "openssl")
        let shown = try Binary.run(["-c", "echo | \(openssl) s_client -starttls \(proto) -connect 127.0.0.1:\(port) -servername \(mailName) 2>/dev/null"
                                    + " | \(openssl) x509 -noout -fingerprint -sha256"], program: "/bin/sh")
        let hex = shown.stdout.split(separator: "=").last.map { $0.replacingOccurrences(of: ":", with: "").trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        return hex.lowercased()
    }

    @Test("real servers: Exim (smtp), Dovecot (imap, pop3, sieve), slapd (ldap) and PostgreSQL (postgres): tlsaudit sees the certificate openssl s_client -starttls sees, and judges it as it judges the same certificate over plain TLS")
    func realServers() throws {
        let exim = try LabEximServer(chainPEM: Self.chainPEM, keyPEM: Self.keyPEM)
        defer { exim.stop() }
        let dovecot = try LabDovecotServer(chainPEM: Self.chainPEM, keyPEM: Self.keyPEM)
        defer { dovecot.stop() }
        let slapd = try LabSlapdServer(chainPEM: Self.chainPEM, keyPEM: Self.keyPEM)
        defer { slapd.stop() }
        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        try postgres.enableTLS(certificatePEM: Self.chainPEM, keyPEM: Self.keyPEM)
        let plain = try LabTLSServer(LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate]))
        defer { plain.stop() }

        let reference = try scan("127.0.0.1:\(plain.port)", ["--policy", "apple-trust"])
        #expect(reference.status == 0)
        let expectedLeaf = try #require(Self.leafFingerprint(reference.address))
        for (proto, port) in [("smtp", exim.port), ("imap", dovecot.imapPort), ("pop3", dovecot.pop3Port), ("sieve", dovecot.sievePort),
                              ("ldap", slapd.port), ("postgres", postgres.port)] {
            let result = try scan("127.0.0.1:\(port)", ["--starttls", proto])
            #expect(result.status == 0, "\(proto): \(Self.failure(result.address).map { "\($0.category): \($0.message)" } ?? "")")
            #expect((result.target["starttls"] as? [String: Any])?["protocol"] as? String == proto)
            #expect((result.target["starttls"] as? [String: Any])?["inferred"] as? Bool == false)
            #expect(Self.leafFingerprint(result.address) == expectedLeaf, "\(proto): the leaf sent")
            #expect(try Self.opensslLeaf(proto, port: port) == expectedLeaf, "\(proto): openssl s_client -starttls sees the same leaf")
            #expect((result.address["ats"] as? [String: Any])?["policy"] as? String == "apple-trust", "\(proto): STARTTLS targets default to apple-trust")
            #expect(Self.findingIDs(result.address) == Self.findingIDs(reference.address), "\(proto): the same findings as over plain TLS")
        }
    }

    @Test("protocols without a real server here: scripted FTP, XMPP (client and server, the 'to' domain), MySQL, NNTP and POP3 dialogues from their RFCs reach the handshake")
    func scriptedUpgrades() throws {
        let plain = try LabTLSServer(LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate]))
        defer { plain.stop() }
        let expectedLeaf = try #require(Self.leafFingerprint(try scan("127.0.0.1:\(plain.port)").address))
        for proto in [STARTTLSProtocol.ftp, .xmpp, .xmppServer, .mysql, .nntp, .pop3, .smtp] {
            var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
            configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(proto, .upgrade, domain: Self.mailName)
            let server = try LabTLSServer(configuration)
            defer { server.stop() }
            let result = try scan("127.0.0.1:\(server.port)", ["--starttls", proto.rawValue])
            #expect(result.status == 0, "\(proto): \(Self.failure(result.address).map { "\($0.category): \($0.message)" } ?? "")")
            #expect(Self.leafFingerprint(result.address) == expectedLeaf, "\(proto)")
        }
        // The XMPP server refuses a stream to another domain: the 'to' sent is the SNI (or host).
        var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
        configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(.xmpp, .upgrade, domain: "other.example")
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let refused = try scan("127.0.0.1:\(server.port)", ["--starttls", "xmpp"])
        #expect(Self.failure(refused.address)?.category == "starttls-refused")
        #expect(Self.failure(refused.address)?.message.contains("host-unknown") == true, "\(String(describing: Self.failure(refused.address)))")
    }

    @Test("not offered: Exim without TLS, slapd without a certificate, PostgreSQL with ssl off, and scripted servers that list no STARTTLS: starttls-not-offered, quoting what they offer")
    func notOffered() throws {
        let exim = try LabEximServer(chainPEM: Self.chainPEM, keyPEM: Self.keyPEM, offerTLS: false)
        defer { exim.stop() }
        let smtp = try scan("127.0.0.1:\(exim.port)", ["--starttls", "smtp"])
        #expect(smtp.status == 2)
        #expect(Self.failure(smtp.address)?.category == "starttls-not-offered")
        #expect(Self.failure(smtp.address)?.message.contains("lists no STARTTLS") == true, "\(String(describing: Self.failure(smtp.address)))")
        #expect(Self.failure(smtp.address)?.message.contains("PIPELINING") == true, "what it offers is quoted")

        let slapd = try LabSlapdServer(chainPEM: nil, keyPEM: nil)
        defer { slapd.stop() }
        let ldap = try scan("127.0.0.1:\(slapd.port)", ["--starttls", "ldap"])
        #expect(Self.failure(ldap.address)?.category == "starttls-not-offered")
        #expect(Self.failure(ldap.address)?.message.contains("protocolError") == true, "\(String(describing: Self.failure(ldap.address)))")

        let postgres = try LabPostgresServer()
        defer { postgres.stop() }
        let pg = try scan("127.0.0.1:\(postgres.port)", ["--starttls", "postgres"])
        #expect(Self.failure(pg.address)?.category == "starttls-not-offered")
        #expect(Self.failure(pg.address)?.message.contains("'N'") == true)

        for proto in [STARTTLSProtocol.ftp, .xmpp, .mysql, .nntp, .pop3] {
            var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
            configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(proto, .notOffered, domain: Self.mailName)
            let server = try LabTLSServer(configuration)
            defer { server.stop() }
            let result = try scan("127.0.0.1:\(server.port)", ["--starttls", proto.rawValue])
            #expect(Self.failure(result.address)?.category == "starttls-not-offered", "\(proto): \(String(describing: Self.failure(result.address)))")
        }
    }

    @Test("refused: the server's reply and its code are quoted (SMTP 454, FTP 534, NNTP 580, POP3 -ERR, XMPP <failure/>, MySQL error 1130)")
    func refused() throws {
        let expected: [(STARTTLSProtocol, String)] = [(.smtp, "454 4.7.0"), (.ftp, "534 Request denied"), (.nntp, "580"), (.pop3, "-ERR TLS"),
                                                      (.xmpp, "<failure"), (.mysql, "error 1130")]
        for (proto, quoted) in expected {
            var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
            configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(proto, .refused, domain: Self.mailName)
            let server = try LabTLSServer(configuration)
            defer { server.stop() }
            let result = try scan("127.0.0.1:\(server.port)", ["--starttls", proto.rawValue])
            #expect(result.status == 2)
            #expect(Self.failure(result.address)?.category == "starttls-refused", "\(proto): \(String(describing: Self.failure(result.address)))")
            #expect(Self.failure(result.address)?.message.contains(quoted) == true, "\(proto): \(String(describing: Self.failure(result.address)))")
        }
    }

    @Test("something else on the port: a TLS server (implicit TLS), an HTTP server, an IMAP server asked for SMTP, a megabyte banner and a line without end: starttls-unexpected-reply, quoting what came, within the limits")
    func unexpectedReplies() throws {
        let tlsServer = try lab.goodServer()
        defer { tlsServer.stop() }
        let implicit = try scan("127.0.0.1:\(tlsServer.port)", ["--starttls", "postgres"])
        #expect(Self.failure(implicit.address)?.category == "starttls-unexpected-reply")
        #expect(Self.failure(implicit.address)?.message.contains("implicit TLS") == true, "\(String(describing: Self.failure(implicit.address)))")

        let http = try LabHostileServer(.plainHTTP)
        defer { http.stop() }
        let xmpp = try scan("127.0.0.1:\(http.port)", ["--starttls", "xmpp"])
        #expect(Self.failure(xmpp.address)?.category == "starttls-unexpected-reply")
        #expect(Self.failure(xmpp.address)?.message.contains("HTTP/1.1 400 Bad Request") == true, "\(String(describing: Self.failure(xmpp.address)))")

        let dovecot = try LabDovecotServer(chainPEM: Self.chainPEM, keyPEM: Self.keyPEM)
        defer { dovecot.stop() }
        let wrong = try scan("127.0.0.1:\(dovecot.imapPort)", ["--starttls", "smtp"])
        #expect(Self.failure(wrong.address)?.category == "starttls-unexpected-reply")
        #expect(Self.failure(wrong.address)?.message.contains("* OK") == true, "the IMAP greeting is quoted")

        for (behavior, words) in [(LabSTARTTLSScript.Behavior.hugeBanner, "over 64 KiB"), (.endlessLine, "line of over 8 KiB")] {
            var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
            configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(.smtp, behavior)
            let server = try LabTLSServer(configuration)
            defer { server.stop() }
            let started = Date()
            let result = try scan("127.0.0.1:\(server.port)", ["--starttls", "smtp"])
            #expect(Self.failure(result.address)?.category == "starttls-unexpected-reply", "\(behavior)")
            #expect(Self.failure(result.address)?.message.contains(words) == true, "\(behavior): \(String(describing: Self.failure(result.address)))")
            #expect((Self.failure(result.address)?.message.count ?? 0) < 1_000, "the quote is bounded")
            #expect(Date().timeIntervalSince(started) < 3, "read up to the limit, not to the end")
        }
    }

    @Test("a server too busy for now (421 on the first two connections) is asked again and scanned; one that stays busy is reported refused with its 421")
    func busyServer() throws {
        let connections = Atomic<Int>(0)
        let upgrade = LabSTARTTLSScript.dialogue(.smtp, .upgrade)
        var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
        configuration.plaintextDialogue = { connection in
            guard connections.add(1, ordering: .relaxed).newValue > 2 else {
                connection.send("421 4.7.0 mx.lab.tlsaudit.test Too many concurrent SMTP connections; please try again later\r\n")
                return false
            }
            return upgrade(connection)
        }
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let result = try scan("127.0.0.1:\(server.port)", ["--starttls", "smtp"])
        #expect(result.status == 0, "\(String(describing: Self.failure(result.address)))")
        #expect(connections.load(ordering: .relaxed) >= 3)

        var busy = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
        busy.plaintextDialogue = { connection in
            connection.send("421 4.7.0 Too many concurrent SMTP connections\r\n")
            return false
        }
        let busyServer = try LabTLSServer(busy)
        defer { busyServer.stop() }
        let refused = try scan("127.0.0.1:\(busyServer.port)", ["--starttls", "smtp"])
        #expect(Self.failure(refused.address)?.category == "starttls-refused")
        #expect(Self.failure(refused.address)?.message.contains("421 4.7.0") == true)
    }

    @Test("a tarpit before the handshake (silent, or stalling after the capabilities) ends within the timeout: starttls-timeout")
    func stalls() throws {
        let tarpit = try LabHostileServer(.tarpit)
        defer { tarpit.stop() }
        let started = Date()
        let silent = try scan("127.0.0.1:\(tarpit.port)", ["--starttls", "smtp"], timeout: "1")
        #expect(Self.failure(silent.address)?.category == "starttls-timeout")
        #expect(Self.failure(silent.address)?.message.contains("sent nothing") == true, "\(String(describing: Self.failure(silent.address)))")
        #expect(Date().timeIntervalSince(started) < 3.5)

        var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
        configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(.nntp, .stallBeforeUpgrade)
        let stalling = try LabTLSServer(configuration)
        defer { stalling.stop() }
        let again = Date()
        let stalled = try scan("127.0.0.1:\(stalling.port)", ["--starttls", "nntp"], timeout: "1")
        #expect(Self.failure(stalled.address)?.category == "starttls-timeout")
        #expect(Self.failure(stalled.address)?.message.contains("answer to STARTTLS") == true, "\(String(describing: Self.failure(stalled.address)))")
        #expect(Date().timeIntervalSince(again) < 3.5)
    }

    @Test("--enumerate over STARTTLS redoes the dialogue for every probe, at most the per-host limit at once; Exim's TLS 1.2 and 1.3 suites are found")
    func enumeration() throws {
        let counter = LabSTARTTLSScript.Counter()
        var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
        configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(.smtp, .upgrade, counter: counter)
        let server = try LabTLSServer(configuration)
        defer { server.stop() }
        let result = try scan("127.0.0.1:\(server.port)", ["--starttls", "smtp", "--enumerate"])
        let enumeration = try #require(result.address["enumeration"] as? [String: Any])
        let probes = try #require(enumeration["probes"] as? Int)
        let protocols = (enumeration["protocols"] as? [[String: Any]]) ?? []
        let accepted = protocols.filter { $0["status"] as? String == "accepted" }.compactMap { $0["version"] as? String }
        #expect(accepted.contains("TLS 1.2") || accepted.contains("TLSv1.2") || accepted.contains(where: { $0.contains("1.2") }), "\(protocols)")
        #expect(accepted.contains(where: { $0.contains("1.3") }), "\(protocols)")
        // Every probe but the hand-built SSLv2/SSLv3 hellos and the scan's own handshake went through the dialogue.
        #expect(counter.total >= probes, "\(counter.total) dialogues for \(probes) probes")
        #expect(counter.peak <= 5, "at most the per-host limit (5) at once: \(counter.peak)")

        let exim = try LabEximServer(chainPEM: Self.chainPEM, keyPEM: Self.keyPEM)
        defer { exim.stop() }
        let real = try scan("127.0.0.1:\(exim.port)", ["--starttls", "smtp", "--enumerate"])
        let realProtocols = ((real.address["enumeration"] as? [String: Any])?["protocols"] as? [[String: Any]]) ?? []
        let realSuites = realProtocols.flatMap { ($0["suites"] as? [[String: Any]]) ?? [] }
        #expect(realSuites.count >= 3, "\(realProtocols) \(String(describing: Self.failure(real.address))) \(real.address.keys.sorted())")
    }

    @Test("a target on a well-known port: STARTTLS inferred and said (587: smtp); an implicit-TLS port says so (993: imaps); --starttls none turns inference off")
    func inference() throws {
        try LabPrerequisite.root(for: "binds the well-known ports 587 and 993 on 127.0.0.2")
        var configuration = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate], bindAddress: "127.0.0.2", port: 587)
        configuration.plaintextDialogue = LabSTARTTLSScript.dialogue(.smtp, .upgrade)
        let submission = try LabTLSServer(configuration)
        defer { submission.stop() }
        let inferred = try scan("127.0.0.2:587")
        #expect(inferred.status == 0, "\(String(describing: Self.failure(inferred.address)))")
        #expect((inferred.target["starttls"] as? [String: Any])?["inferred"] as? Bool == true)
        let text = try Binary.run(["scan", "--ca-file", lab.rootFile, "--sni", Self.mailName, "127.0.0.2:587"])
        #expect(text.stdout.contains("STARTTLS smtp (inferred from port 587)"), "\(text.stdout)")
        let off = try scan("127.0.0.2:587", ["--starttls", "none"])
        #expect(Self.failure(off.address)?.category == "not-tls", "a plaintext greeting is not TLS: \(String(describing: Self.failure(off.address)))")

        let imaps = try LabTLSServer(LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate], bindAddress: "127.0.0.2", port: 993))
        defer { imaps.stop() }
        let implicitText = try Binary.run(["scan", "--ca-file", lab.rootFile, "--sni", Self.mailName, "127.0.0.2:993"])
        #expect(implicitText.status == 0 && implicitText.stdout.contains("implicit TLS (imaps)"), "\(implicitText.stdout)")
        // Not guessed on other ports: a plaintext SMTP greeting on 2525 without --starttls is not TLS.
        var other = LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate])
        other.plaintextDialogue = LabSTARTTLSScript.dialogue(.smtp, .upgrade)
        let unknownPort = try LabTLSServer(other)
        defer { unknownPort.stop() }
        let unguessed = try scan("127.0.0.1:\(unknownPort.port)")
        #expect(unguessed.target["starttls"] == nil)
        #expect(Self.failure(unguessed.address)?.category == "not-tls")
    }

    @Test("serve: an Exim target (starttls: smtp) gives the findings a plain-TLS server with the same certificate gives, and the findings scan --starttls gives")
    func service() throws {
        let exim = try LabEximServer(chainPEM: Self.chainPEM, keyPEM: Self.keyPEM)
        defer { exim.stop() }
        let plain = try LabTLSServer(LabServerConfiguration(chain: [Self.mailLeaf, lab.intermediate]))
        defer { plain.stop() }
        let (service, database) = try lab.service("starttls-serve", sni: Self.mailName, targets: [
            "{host: \(Self.mailName), port: \(exim.port), name: mail, starttls: smtp}",
            "{host: \(Self.mailName), port: \(plain.port), name: plain, policy: apple-trust}",
        ])
        defer { service.signal(SIGTERM); _ = service.waitForExit(timeout: 15) }
        service.wait("both targets scanned") { Set(service.storedScans.map(\.target)) == ["mail", "plain"] }
        func stored(_ name: String) throws -> [String: Any] { try ServiceLab.latestHistory(name, database: database) }
        let mail = try stored("mail"), reference = try stored("plain")
        func findings(_ entry: [String: Any]) -> [String] {
            let list = (entry["findings"] as? [[String: Any]]) ?? ((entry["result"] as? [String: Any])?["findings"] as? [[String: Any]]) ?? []
            return list.compactMap { $0["id"] as? String }.sorted()
        }
        #expect(findings(mail) == findings(reference), "\(mail)")
        #expect(mail["status"] as? String == reference["status"] as? String)
        let scanned = try scan("127.0.0.1:\(exim.port)", ["--starttls", "smtp"])
        #expect(Self.findingIDs(scanned.address) == findings(mail))

        // pin and ats reach it too.
        let named = "\(Self.mailName):\(exim.port)"
        let pin = try Binary.run(["pin", "--starttls", "smtp", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", named])
        #expect(pin.status == 0 && pin.stdout.contains("leaf: CN=\(Self.mailName)"), "\(pin.stdout)\(pin.stderr)")
        let ats = try Binary.run(["ats", "--starttls", "smtp", "--ca-file", lab.rootFile, "--connect-to", "127.0.0.1", named])
        #expect(ats.status == 0, "Exim's defaults pass a current Apple client's default ATS: \(ats.stdout)")
    }
}
