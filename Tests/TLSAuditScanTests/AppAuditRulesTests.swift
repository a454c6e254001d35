import Foundation
import Synchronization
import Testing
import TLSAuditCore
import TLSAuditLab
import TLSAuditModel
import TLSAuditProbe

/// `app audit`'s rules beyond the exception entries: AFNetworking's AFSecurityPolicy with the
/// bundle's certificates, the global keys, Certificate Transparency, the TLS version a selection
/// still requires; each against real lab servers.
extension AppAuditTests {
    /// A lab server for `names` with the lab chain (leaf issued by the intermediate, RSA 2048).
    func server(_ names: [String] = Self.names, maxVersion: TLSVersion? = nil, leaf: LabCertificate? = nil) throws -> (LabTLSServer, LabCertificate) {
        let leaf = try leaf ?? pki.intermediate.issue(.server(names, key: .rsa(bits: 2048)))
        var configuration = LabServerConfiguration(chain: [leaf, pki.intermediate])
        if let maxVersion { configuration.maxVersion = maxVersion }
        return (try LabTLSServer(configuration), leaf)
    }

    @Test("--afnetworking certificate: the bundled intermediate pins every host (match); an unrelated bundled certificate fails it with pin.mismatch")
    func afnetworkingCertificateMode() throws {
        let (modern, _) = try server()
        defer { modern.stop() }
        let pinned = try app("", certificates: [("ca.cer", pki.intermediate)])
        let match = try audit(pinned, hosts: ["modern.app.test:\(modern.port)"], extra: ["--afnetworking", "certificate"])
        #expect(match.status == 0, "\(match.text)")
        let host = try #require(match.report.hosts.first)
        #expect(host.connects && host.afnetworking?.state == .match, "\(host)")
        #expect(host.afnetworking?.matched == pki.intermediate.summary.sha256Fingerprint)
        #expect(match.report.afnetworking?.mode == .certificate && match.report.afnetworking?.certificates == ["ca.cer"])
        #expect(match.text.contains("afnetworking: match"), "\(match.text)")

        let unrelated = try app("", certificates: [("other.cer", pki.otherIntermediate)])
        let mismatch = try audit(unrelated, hosts: ["modern.app.test:\(modern.port)"], extra: ["--afnetworking", "certificate"])
        #expect(mismatch.status == 1)
        let refused = try #require(mismatch.report.hosts.first)
        #expect(!refused.connects && refused.reasons == ["pin.mismatch"] && refused.afnetworking?.state == .mismatch, "\(refused)")
        #expect(mismatch.text.contains("FAILS (pin.mismatch)"), "\(mismatch.text)")
    }

    @Test("--afnetworking certificate,allow-invalid-certificates pinning a root of Apple's store: trustd judges the leaf by that store's rules (398 days), a private pinned root by an app's own (825)")
    func afnetworkingPinnedPublicRoot() throws {
        var request = LabCertificateRequest.server(["modern.app.test"], key: .rsa(bits: 2048))
        request.notAfter = Date().addingTimeInterval(500 * 86_400)
        let leaf = try pki.intermediate.issue(request)
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate]))
        defer { server.stop() }
        let pinned = try app("""
            <key>NSExceptionDomains</key><dict><key>modern.app.test</key><dict>
              <key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict></dict>
            """, certificates: [("root.cer", pki.root)])
        let flags = ["--afnetworking", "certificate,allow-invalid-certificates"]
        let privateRoot = try audit(pinned, hosts: ["modern.app.test:\(server.port)"], extra: flags)
        #expect(privateRoot.report.hosts.first?.connects == true, "500 days is within an app's own anchors' 825: \(privateRoot.text)")
        let bundle = pki.directory.appendingPathComponent("apple-roots-\(UUID().uuidString.prefix(6)).pem").path
        try (pki.root.pem + TrustStore.appleSnapshotPEM).write(toFile: bundle, atomically: true, encoding: .utf8)
        let publicRoot = try audit(pinned, hosts: ["modern.app.test:\(server.port)"], extra: flags + ["--apple-roots", bundle])
        let host = try #require(publicRoot.report.hosts.first)
        #expect(!host.connects, "a root of Apple's store brings its 398-day limit: \(publicRoot.text)")
        #expect(publicRoot.text.contains("trust.lifetime"), "\(publicRoot.text)")
    }

    @Test("--afnetworking public-key: the leaf's key bundled matches; another key does not")
    func afnetworkingPublicKeyMode() throws {
        let (modern, leaf) = try server()
        defer { modern.stop() }
        let match = try audit(try app("", certificates: [("leaf.cer", leaf)]), hosts: ["modern.app.test:\(modern.port)"],
                              extra: ["--afnetworking", "public-key"])
        let host = try #require(match.report.hosts.first)
        #expect(match.status == 0 && host.connects && host.afnetworking?.state == .match, "\(host)")
        #expect(host.afnetworking?.matched == "sha256/\(leaf.summary.spkiSHA256)")
        let other = try pki.intermediate.issue(.server(["other.app.test"], key: .rsa(bits: 2048)))
        let mismatch = try audit(try app("", certificates: [("other.cer", other)]), hosts: ["modern.app.test:\(modern.port)"],
                                 extra: ["--afnetworking", "public-key"])
        #expect(mismatch.report.hosts.first?.reasons == ["pin.mismatch"], "\(mismatch.report.hosts)")
    }

    @Test("--afnetworking certificate,allow-invalid-certificates: a self-signed server pinned by certificate connects where ATS leaves trust to the app; without the flag it does not")
    func afnetworkingSelfSigned() throws {
        let selfSigned = try LabCertificateAuthority.selfSigned(.server(["self.app.test"]))
        let server = try LabTLSServer(LabServerConfiguration(chain: [selfSigned]))
        defer { server.stop() }
        let target = ["self.app.test:\(server.port)"]
        let insecure = try app("""
            <key>NSExceptionDomains</key><dict><key>self.app.test</key><dict>
              <key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict></dict>
            """, certificates: [("server.cer", selfSigned)])
        let allowed = try audit(insecure, hosts: target, extra: ["--afnetworking", "certificate,allow-invalid-certificates"])
        let host = try #require(allowed.report.hosts.first)
        #expect(host.connects && host.afnetworking?.state == .match && host.probe == "insecure-http-loads", "\(host)")
        #expect(allowed.report.afnetworking?.allowInvalidCertificates == true)

        let strict = try audit(insecure, hosts: target, extra: ["--afnetworking", "certificate"])
        let refused = try #require(strict.report.hosts.first)
        #expect(!refused.connects && refused.reasons == ["pin.mismatch"], "\(refused)")
        #expect(refused.afnetworking?.message.contains("allow_invalid_certificates is off") == true, "\(refused)")

        // ATS off for the whole app: the app's own evaluation is the one that counts.
        let arbitrary = try app("<key>NSAllowsArbitraryLoads</key><true/>", certificates: [("server.cer", selfSigned)])
        let off = try audit(arbitrary, hosts: target, extra: ["--afnetworking", "certificate,allow-invalid-certificates"])
        let offHost = try #require(off.report.hosts.first)
        #expect(offHost.connects && offHost.probe == "arbitrary-loads+own-trust-evaluation", "\(offHost)")
        #expect(off.report.global.first?.status == .needed, "without it default ATS judges the self-signed chain: \(off.report.global)")

        // Default ATS evaluates trust before the app does: no AFNetworking flag makes a self-signed chain pass.
        let plain = try audit(try app("", certificates: [("server.cer", selfSigned)]), hosts: target,
                              extra: ["--afnetworking", "certificate,allow-invalid-certificates"])
        #expect(plain.report.hosts.first?.connects == false, "\(plain.report.hosts)")
    }

    @Test("--afnetworking usage errors exit 64: an unknown mode or flag; --trust-evaluation contradicting it")
    func afnetworkingUsage() throws {
        let bare = try plist("")
        for (value, message) in [("pinned", "not an AFSSLPinningMode"), ("certificate,loose", "unknown flag 'loose'")] {
            let run = try CLI.run(["app", "audit", bare, "--host", "a.app.test", "--afnetworking", value])
            #expect(run.status == 64, "\(value): \(run.stderr)")
            #expect(run.stderr.contains(message), "\(value): \(run.stderr)")
        }
        let contradiction = try CLI.run(["app", "audit", bare, "--host", "a.app.test", "--afnetworking", "none", "--trust-evaluation", "system"])
        #expect(contradiction.status == 64 && contradiction.stderr.contains("--trust-evaluation system"), "\(contradiction.stderr)")
        let missing = try CLI.run(["app", "audit", bare, "--host", "a.app.test", "--trust-evaluation", "afnetworking"])
        #expect(missing.status == 64 && missing.stderr.contains("needs --afnetworking"), "\(missing.stderr)")
    }

    @Test("global NSAllowsArbitraryLoads: unneeded for an ATS-compliant server (exit 1, dropped from the dictionary), needed for a TLS 1.0-only one (replaced by a per-domain entry in the dictionary); the media key is not judged")
    func globalKeys() throws {
        let (modern, leaf) = try server()
        let legacy = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "ECDHE-RSA-AES128-SHA"))
        defer { modern.stop(); legacy.stop() }
        let arbitrary = try plist("<key>NSAllowsArbitraryLoads</key><true/>")
        let unneeded = try audit(arbitrary, hosts: ["modern.app.test:\(modern.port)"])
        #expect(unneeded.status == 1, "an unneeded global key exits 1")
        let key = try #require(unneeded.report.global.first)
        #expect(key.key == "NSAllowsArbitraryLoads" && key.value == "YES" && key.status == .unneeded && key.hosts.isEmpty, "\(key)")
        #expect(key.note.contains("http://"), "it also permits plain HTTP: \(key.note)")
        #expect(!unneeded.report.correctedDictionary.contains("NSAllowsArbitraryLoads"), "\(unneeded.report.correctedDictionary)")
        #expect(unneeded.text.contains("NSAllowsArbitraryLoads = YES: UNNEEDED"), "\(unneeded.text)")

        let needed = try audit(arbitrary, hosts: ["legacy.app.test:\(legacy.port)"])
        #expect(needed.status == 0, "\(needed.text)")
        #expect(needed.report.hosts.first?.connects == true && needed.report.hosts.first?.probe == "arbitrary-loads")
        #expect(needed.report.global.first?.status == .needed && needed.report.global.first?.hosts == ["legacy.app.test"],
                "\(needed.report.global)")
        // Needed for one host only: per-domain entries instead of ATS off for the whole app, and they work.
        #expect(needed.report.global.first?.replacement == ["legacy.app.test": ["NSExceptionMinimumTLSVersion": "TLSv1.0"]],
                "\(needed.report.global)")
        #expect(!needed.report.correctedDictionary.contains("<key>NSAllowsArbitraryLoads</key>"), "\(needed.report.correctedDictionary)")
        #expect(needed.report.correctedDictionary.contains("<key>legacy.app.test</key>"), "\(needed.report.correctedDictionary)")
        let narrowed = try audit(try plist("""
            <key>NSExceptionDomains</key><dict><key>legacy.app.test</key><dict>
              <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string></dict></dict>
            """), hosts: ["legacy.app.test:\(legacy.port)"])
        #expect(narrowed.status == 0 && narrowed.report.hosts.first?.connects == true, "\(narrowed.text)")

        let media = try audit(try plist("<key>NSAllowsArbitraryLoadsForMedia</key><true/>"), hosts: ["modern.app.test:\(modern.port)"])
        let mediaKey = try #require(media.report.global.first)
        #expect(mediaKey.status == .notJudged && mediaKey.note.contains("AV Foundation"), "\(mediaKey)")
        #expect(media.status == 0, "a key that is not judged is not unneeded")
    }

    @Test("NSRequiresCertificateTransparency: a host whose chain carries SCTs from the lab logs connects, one without fails with trust.certificate-transparency")
    func certificateTransparencyRequired() throws {
        let logs = try [("lab log A", "Lab One"), ("lab log B", "Lab Two"), ("lab log C", "Lab Three")].map { try LabCTLog($0.0, operator: $0.1) }
        let withSCTs = try pki.intermediate.issue(.server(["ct.app.test"], key: .rsa(bits: 2048)),
                                                  embedding: logs.map { log in { log.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-600)) } })
        let (transparent, _) = try server(leaf: withSCTs)
        let (opaque, _) = try server(["opaque.app.test"])
        defer { transparent.stop(); opaque.stop() }
        let list = pki.directory.appendingPathComponent("app-ct-\(UUID().uuidString.prefix(8)).json")
        try LabCTLog.listFile(logs.map { ($0, "usable", Date(timeIntervalSince1970: 1_600_000_000)) }).write(to: list)
        let file = try plist("""
            <key>NSExceptionDomains</key><dict>
              <key>ct.app.test</key><dict><key>NSRequiresCertificateTransparency</key><true/></dict>
              <key>opaque.app.test</key><dict><key>NSRequiresCertificateTransparency</key><true/></dict>
            </dict>
            """)
        let (status, report, text) = try audit(file, hosts: ["ct.app.test:\(transparent.port)", "opaque.app.test:\(opaque.port)"],
                                               extra: ["--ct-log-list", list.path])
        #expect(status == 1)
        let hosts = Dictionary(uniqueKeysWithValues: report.hosts.map { ($0.host, $0) })
        #expect(hosts["ct.app.test"]?.connects == true, "\(String(describing: hosts["ct.app.test"]))")
        let failing = try #require(hosts["opaque.app.test"])
        #expect(!failing.connects && failing.reasons == ["trust.certificate-transparency"], "\(failing)")
        let entries = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.domain, $0) })
        #expect(entries["ct.app.test"]?.unneeded == ["NSRequiresCertificateTransparency"],
                "the chain meets the policy either way: the key changes nothing")
        #expect(entries["opaque.app.test"]?.unneeded == [] && entries["opaque.app.test"]?.note.contains("makes opaque.app.test fail") == true,
                "\(String(describing: entries["opaque.app.test"]))")
        #expect(text.contains("FAILS (trust.certificate-transparency)"), "\(text)")
        // Without the key the lab chain (private anchor) needs no CT: both connect.
        let none = try audit(try plist(""), hosts: ["opaque.app.test:\(opaque.port)"], extra: ["--ct-log-list", list.path])
        #expect(none.status == 0 && none.report.hosts.first?.connects == true, "\(none.text)")
    }

    @Test("a server that sends only its leaf (SCTs embedded): the intermediate fetched from the AIA verifies the SCTs, so CT is met; AFNetworking's root pin reaches it too")
    func fetchedIntermediateVerifiesSCTs() throws {
        let http = try LabHTTPServer()
        defer { http.stop() }
        http.serve(pki.intermediate.der, at: "/int.cer")
        let logs = try [("lab log A", "Lab One"), ("lab log B", "Lab Two"), ("lab log C", "Lab Three")].map { try LabCTLog($0.0, operator: $0.1) }
        var request = LabCertificateRequest.server(["ct.app.test"], key: .rsa(bits: 2048))
        request.extraExtensions = [.init(name: "authorityInfoAccess", value: "caIssuers;URI:\(http.url("/int.cer"))")]
        let leaf = try pki.intermediate.issue(request, embedding: logs.map { log in { log.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-600)) } })
        let server = try LabTLSServer(LabServerConfiguration(chain: [leaf]))
        defer { server.stop() }
        let list = pki.directory.appendingPathComponent("app-ct-aia-\(UUID().uuidString.prefix(8)).json")
        try LabCTLog.listFile(logs.map { ($0, "usable", Date(timeIntervalSince1970: 1_600_000_000)) }).write(to: list)
        let file = try plist("<key>NSExceptionDomains</key><dict><key>ct.app.test</key><dict><key>NSRequiresCertificateTransparency</key><true/></dict></dict>")
        let fetched = try audit(file, hosts: ["ct.app.test:\(server.port)"], extra: ["--ct-log-list", list.path])
        #expect(fetched.report.hosts.first?.connects == true, "the fetched intermediate is the SCTs' issuer: \(fetched.text)")
        // AFNetworking's certificate mode with the root bundled: its own build reaches the root through the fetched intermediate.
        let bundle = try app("", certificates: [("root.cer", pki.root)])
        let pinned = try audit(bundle, hosts: ["ct.app.test:\(server.port)"], extra: ["--afnetworking", "certificate"])
        let host = try #require(pinned.report.hosts.first)
        #expect(host.connects && host.afnetworking?.state == .match, "\(host)")
        #expect(host.afnetworking?.matched == pki.root.summary.sha256Fingerprint)
    }

    @Test("an SCT from a log the list does not know, made after the list was published, is log-newer-than-list and not counted against the chain; made before, it is unknown-log and the chain fails")
    func logNewerThanList() throws {
        let logs = try [("lab log A", "Lab One"), ("lab log B", "Lab Two"), ("lab log C", "Lab Three")].map { try LabCTLog($0.0, operator: $0.1) }
        let made = Date().addingTimeInterval(-600)
        let leaf = try pki.intermediate.issue(.server(["ct.app.test"], key: .rsa(bits: 2048)),
                                              embedding: logs.map { log in { log.sct(precertificateEntry: $0, at: made) } })
        let (server, _) = try server(leaf: leaf)
        defer { server.stop() }
        // The list knows A and B; C is newer than a list published an hour ago, and older than one published now.
        let listed = logs.prefix(2).map { ($0, "usable", Date(timeIntervalSince1970: 1_600_000_000)) }
        let older = pki.directory.appendingPathComponent("ct-older-\(UUID().uuidString.prefix(8)).json")
        try LabCTLog.listFile(listed, published: made.addingTimeInterval(-3_000)).write(to: older)
        let newer = pki.directory.appendingPathComponent("ct-newer-\(UUID().uuidString.prefix(8)).json")
        try LabCTLog.listFile(listed, published: Date()).write(to: newer)
        let file = try plist("<key>NSExceptionDomains</key><dict><key>ct.app.test</key><dict><key>NSRequiresCertificateTransparency</key><true/></dict></dict>")
        let stale = try audit(file, hosts: ["ct.app.test:\(server.port)"], extra: ["--ct-log-list", older.path])
        #expect(stale.report.hosts.first?.connects == true, "the SCT from a log newer than the list is not held against the chain: \(stale.text)")
        let scan = try CLI.run(["scan", "ct.app.test:\(server.port)", "--connect-to", "127.0.0.1", "--ca-file", pki.rootFile, "--timeout", "3",
                                "--ct-log-list", older.path, "--format", "json"])
        #expect(scan.stdout.contains("\"log-newer-than-list\"") && scan.stdout.contains("update it"), "\(scan.stdout.prefix(4000))")
        let current = try audit(file, hosts: ["ct.app.test:\(server.port)"], extra: ["--ct-log-list", newer.path])
        #expect(current.report.hosts.first?.reasons == ["trust.certificate-transparency"], "a log the newer list does not know: \(current.text)")
    }

    @Test("a TLS 1.3 minimum with insecure HTTP loads: a server that negotiates TLS 1.2 on the wider probe fails with ats.tls-version")
    func minimumNegotiatedVersion() throws {
        let (tls12, _) = try server(["tls12.app.test"], maxVersion: .tls1_2)
        let (tls13, _) = try server(["tls13.app.test"])
        defer { tls12.stop(); tls13.stop() }
        let file = try plist("""
            <key>NSExceptionDomains</key><dict>
              <key>tls12.app.test</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/>
                <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.3</string></dict>
              <key>tls13.app.test</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/>
                <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.3</string></dict>
            </dict>
            """)
        let (status, report, _) = try audit(file, hosts: ["tls12.app.test:\(tls12.port)", "tls13.app.test:\(tls13.port)"])
        #expect(status == 1)
        let hosts = Dictionary(uniqueKeysWithValues: report.hosts.map { ($0.host, $0) })
        let failing = try #require(hosts["tls12.app.test"])
        #expect(!failing.connects && failing.reasons == ["ats.tls-version"] && failing.probe == "insecure-http-loads", "\(failing)")
        #expect(failing.detail.contains("TLS 1.2"), "\(failing.detail)")
        #expect(hosts["tls13.app.test"]?.connects == true, "\(String(describing: hosts["tls13.app.test"]))")
    }

    @Test("the per-host judgement on the app's configuration alone (what the service probes, `atsProbes(only:)`) equals the one on the whole matrix, CT included")
    func singleConfiguration() throws {
        let (modern, leaf) = try server()
        let legacy = try LabTLSServer(LabServerConfiguration(chain: [leaf, pki.intermediate], minVersion: .tls1_0, maxVersion: .tls1_0,
                                                             cipherList: "ECDHE-RSA-AES128-SHA"))
        let (tls12, _) = try server(["tls12.app.test"], maxVersion: .tls1_2)
        let logs = try [("lab log A", "Lab One"), ("lab log B", "Lab Two"), ("lab log C", "Lab Three")].map { try LabCTLog($0.0, operator: $0.1) }
        let withSCTs = try pki.intermediate.issue(.server(["ct.app.test"], key: .rsa(bits: 2048)),
                                                  embedding: logs.map { log in { log.sct(precertificateEntry: $0, at: Date().addingTimeInterval(-600)) } })
        let (transparent, _) = try server(leaf: withSCTs)
        defer { modern.stop(); legacy.stop(); tls12.stop(); transparent.stop() }
        var policy = AppTransportSecurityPolicy()
        policy.exceptionDomains = [
            .init(domain: "legacy.app.test", minimumTLSVersion: .tls1_0, declaredKeys: ["NSExceptionMinimumTLSVersion"]),
            .init(domain: "tls12.app.test", allowsInsecureHTTPLoads: true, minimumTLSVersion: .tls1_3,
                  declaredKeys: ["NSExceptionAllowsInsecureHTTPLoads", "NSExceptionMinimumTLSVersion"]),
            .init(domain: "ct.app.test", requiresCertificateTransparency: true, declaredKeys: ["NSRequiresCertificateTransparency"]),
            .init(domain: "modern.app.test", requiresCertificateTransparency: true, declaredKeys: ["NSRequiresCertificateTransparency"]),
        ]
        let store = try TrustStore(caFile: pki.rootFile)
        var options = ScanOptions(timeout: 5, trustStore: store)
        options.ctLogs = try CTLogList.parse(LabCTLog.listFile(logs.map { ($0, "usable", Date(timeIntervalSince1970: 1_600_000_000)) }), source: "lab")
        let scanner = try TLSScanner(options: options, judge: AddressAssessment.judge)
        let enumerator = Enumerator(scanner: scanner)
        for (host, port, reasons) in [("legacy.app.test", legacy.port, []), ("tls12.app.test", tls12.port, ["ats.tls-version"]),
                                      ("ct.app.test", transparent.port, []), ("modern.app.test", modern.port, ["trust.certificate-transparency"])] {
            let target = ScanTarget(original: host, host: host, port: port, sni: host, connectTo: [try ConnectAddress.parse("127.0.0.1")])
            let address = try #require(try scanner.addresses(for: target).get().first)
            let effective = policy.effectivePolicy(for: host)
            let matrix = enumerator.atsProbes(address, target: target, trustStore: store)
            let whole = AppAudit.outcome(effective, probes: matrix, diagnostics: ATSDiagnostics.judge(matrix), host: host)
            let single = enumerator.atsProbes(address, target: target, trustStore: store, only: [effective.atsProbe.configuration])
            #expect(single.configurations.map(\.name) == [effective.atsProbe.configuration])
            let alone = AppAudit.outcome(effective, probes: single, diagnostics: ATSDiagnostics.judge(single), host: host)
            #expect(alone.connects == whole.connects && alone.reasons == whole.reasons && alone.probe == whole.probe,
                    "\(host): \(alone) vs \(whole)")
            #expect(whole.reasons == reasons && whole.connects == reasons.isEmpty, "\(host): \(whole)")
        }
    }

    @Test("the ATS matrix makes one handshake per distinct ClientHello (16 configurations, 9 hellos) plus one connection per simulated iOS client, and each configuration keeps its own verdict")
    func oneHandshakePerDistinctHello() throws {
        let connections = Synchronization.Mutex(0)
        // A chain the store does not trust: the configurations that share a hello part on trust.
        let leaf = try pki.otherIntermediate.issue(.server(Self.names, key: .rsa(bits: 2048)))
        var configuration = LabServerConfiguration(chain: [leaf, pki.otherIntermediate], maxVersion: .tls1_2)
        configuration.plaintextDialogue = { _ in
            connections.withLock { $0 += 1 }
            return true
        }
        let lab = try LabTLSServer(configuration)
        defer { lab.stop() }
        let store = try TrustStore(caFile: pki.rootFile)
        let scanner = try TLSScanner(options: ScanOptions(timeout: 5, trustStore: store), judge: AddressAssessment.judge)
        let host = Self.names[0]
        let target = ScanTarget(original: host, host: host, port: lab.port, sni: host, connectTo: [try ConnectAddress.parse("127.0.0.1")])
        let address = try #require(try scanner.addresses(for: target).get().first)
        let probes = Enumerator(scanner: scanner).atsProbes(address, target: target, trustStore: store)
        #expect(probes.configurations.count == 16)
        #expect(connections.withLock { $0 } == 9 + SimulatedClientRegistry.iOSClients.count, "\(connections.withLock { $0 }) connections")
        let byName = Dictionary(uniqueKeysWithValues: probes.configurations.map { ($0.name, $0) })
        // The same hello, the same answer: judged apart (the app's own trust evaluation or not).
        let shared = [ATSConfigurationName.defaultATS, ATSConfigurationName.tls12, ATSConfigurationName.insecureHTTPLoads].map { byName[$0] }
        #expect(shared.allSatisfy { $0?.handshake?.protocolVersion == .tls1_2 }, "\(shared.map { $0?.handshake?.protocolVersion })")
        let verdicts = Dictionary(uniqueKeysWithValues: ATSDiagnostics.judge(probes).configurations.map { ($0.name, $0) })
        // `default` and `TLSv1.2` judge the untrusted chain; `insecure-http-loads` leaves trust to the app.
        #expect(verdicts[ATSConfigurationName.defaultATS]?.pass == false && verdicts[ATSConfigurationName.tls12]?.pass == false,
                "\(String(describing: verdicts[ATSConfigurationName.defaultATS]))")
        #expect(verdicts[ATSConfigurationName.insecureHTTPLoads]?.pass == true, "\(String(describing: verdicts[ATSConfigurationName.insecureHTTPLoads]))")
        // A different hello (TLS 1.3 only) against a TLS 1.2 server: its own handshake, refused.
        #expect(byName[ATSConfigurationName.tls13]?.handshake == nil && byName[ATSConfigurationName.tls13]?.failure != nil,
                "\(String(describing: byName[ATSConfigurationName.tls13]))")
    }
}
