import COpenSSL
import Synchronization
import Foundation
#if canImport(Glibc)
import Glibc
#endif
public import TLSAuditModel

/// Protocol and cipher-suite enumeration, and the ATS configuration matrix, for one address.
/// Every answer comes from a real handshake: a version or suite is "rejected" only after it was
/// offered and refused. Probes of one host run concurrently, at most `perHostConcurrency` at a time.
public final class Enumerator: Sendable {
    let scanner: TLSScanner
    public let perHostConcurrency: Int

    public init(scanner: TLSScanner, perHostConcurrency: Int = 5) {
        self.scanner = scanner
        self.perHostConcurrency = perHostConcurrency
    }

    static let tls13Suites = ["TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256",
                              "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"]

    // MARK: - Enumeration

    /// Every version and suite: SSLv2 by a hand-built CLIENT-HELLO, SSLv3 to TLS 1.2 by hand-built
    /// ClientHellos offering the whole IANA registry (`wireSuites`), TLS 1.3 by real handshakes.
    public func enumerate(_ address: SocketAddress, target: ScanTarget) -> EnumerationReport {
        let started = ContinuousClock.now
        let probes = ProbeCounter()
        enum Job: Sendable { case sslv2, version(TLSVersion) }
        let jobs: [Job] = [.sslv2, .version(.ssl3), .version(.tls1_0), .version(.tls1_1), .version(.tls1_2), .version(.tls1_3)]
        let results = WorkerPool.map(jobs, concurrency: perHostConcurrency) { job -> ProtocolSupport in
            switch job {
            case .sslv2: return self.sslv2Probe(address, target: target, probes: probes)
            case .version(.tls1_3): return self.handshakeSuites(tls13: address, target: target, probes: probes)
            case .version(let version): return self.wireSuites(for: version, address: address, target: target, probes: probes)
            }
        }
        return EnumerationReport(address: address.host, protocols: results, findings: [],
                                 probes: probes.value,
                                 durationMs: milliseconds(since: started))
    }

    /// TLS 1.3's five suites by real handshakes (this libssl offers them all): every remaining suite
    /// offered, the server's pick recorded and removed, until it refuses.
    private func handshakeSuites(tls13 address: SocketAddress, target: ScanTarget, probes: ProbeCounter) -> ProtocolSupport {
        var remaining = Self.tls13Suites
        var accepted: [AcceptedSuite] = []
        var lastFailure: ProbeFailure?
        func override(_ suites: [String]) -> ClientHelloOverride {
            ClientHelloOverride(minVersion: .tls1_3, maxVersion: .tls1_3, tls13Suites: suites.joined(separator: ":"))
        }
        while !remaining.isEmpty {
            let attempt = handshake(address, target: target, probes: probes, override: override(remaining))
            guard let observation = attempt.observation, observation.protocolVersion == .tls1_3, remaining.contains(observation.cipher.iana) else {
                lastFailure = attempt.failure
                break
            }
            accepted.append(AcceptedSuite(cipher: observation.cipher, keyExchange: observation.keyExchange))
            remaining.removeAll { $0 == observation.cipher.iana }
        }
        guard !accepted.isEmpty else {
            if let failure = lastFailure, [.tlsAlert, .closedDuringHandshake, .handshakeFailed].contains(failure.category) {
                return ProtocolSupport(version: TLSVersion.tls1_3.rawValue, status: .rejected, detail: "refused: \(failure.description)")
            }
            return ProtocolSupport(version: TLSVersion.tls1_3.rawValue, status: .notTested,
                                   detail: "the probe failed: \(lastFailure?.description ?? "no answer")")
        }
        var preference: String?
        if accepted.count >= 2 {
            // Offer the first two choices reversed: a server that keeps its first choice enforces its order.
            let names = accepted.prefix(2).map(\.cipher.iana)
            if let chosen = handshake(address, target: target, probes: probes, override: override(names.reversed())).observation?.cipher {
                preference = chosen.iana == names[0] ? "server" : "client"
            }
        }
        return ProtocolSupport(version: TLSVersion.tls1_3.rawValue, status: .accepted,
                               detail: "\(accepted.count) suite(s) accepted", suites: accepted, preference: preference)
    }

    /// One handshake with the permissive context and an override, on a fresh connection.
    func handshake(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter,
                           override: ClientHelloOverride, profile: ClientProfile = .permissive,
                           inspect: ((OpaquePointer) -> Void)? = nil) -> HandshakeAttempt {
        probes.increment()
        let timeout = target.timeout ?? scanner.options.timeout
        do {
            let socket = try TCPSocket.open(to: address, target: target, deadline: Deadline(after: timeout), timeout: timeout)
            return HandshakeProbe.handshake(socket: socket, address: address, sni: target.sni, context: try scanner.context(profile, for: target),
                                            deadline: Deadline(after: timeout), timeout: timeout, override: override,
                                            inspect: inspect)
        } catch {
            return .failed(error)
        }
    }

    // MARK: - SSLv2 by hand

    /// SSL 2 is compiled out of this libssl: a minimal hand-built CLIENT-HELLO is sent and the first
    /// bytes of the answer are parsed (SERVER-HELLO, alert, or anything else).
    private func sslv2Probe(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter) -> ProtocolSupport {
        let name = "SSLv2"
        probes.increment()
        do {
            return LegacyHello.interpret(try LegacyHello.exchange(address, target: target, timeout: target.timeout ?? scanner.options.timeout),
                                         version: name)
        } catch {
            return ProtocolSupport(version: name, status: .notTested, detail: "not tested: \(error.description)")
        }
    }

    // MARK: - ATS matrix

    /// The static-RSA suites `NSExceptionRequiresForwardSecrecy = NO` adds (docs/apple-rules.md section 1).
    static let staticRSASuites = "AES256-GCM-SHA384:AES128-GCM-SHA256:AES256-SHA:AES128-SHA"

    /// One probe per ATS configuration, as `nscurl --ats-diagnostics` does (one handshake per distinct
    /// ClientHello, its answer judged under every configuration that sends it), each offering what a
    /// current Apple client offers under that configuration (never a suite it does not send: no
    /// exception unlocks DHE or CBC-SHA256/SHA384), plus the documented list and a permissive
    /// OpenSSL client as diagnostics. What each showed goes to the caller, who draws the conclusion
    /// with `ATSDiagnostics.judge`. `only`, when given, names the configurations to probe
    /// (`ATSConfigurationName`): one app's rules need only the one `EffectiveHostPolicy.atsProbe`
    /// chooses, which `AppAudit.outcome` judges as it judges the whole matrix.
    public func atsProbes(_ address: SocketAddress, target: ScanTarget, trustStore: TrustStore, only: Set<String>? = nil) -> ATSProbes {
        let current = ClientContext.atsRuntimeCipherList
        let currentNonFS = current + ":" + Self.staticRSASuites
        struct Configuration: Sendable {
            var name: String
            var exception: [String: String]
            var override: ClientHelloOverride
            var profile: ClientProfile
            /// Forward secrecy is required, and with it the ATS rule on ECC keys under 256 bits (the
            /// exceptions that lift one lift the other; RSA >= 2048 is a trust rule and stays).
            var forwardSecrecy: Bool
            var judgesTrust: Bool = true
            var diagnostic: Bool = false
            /// What the client sends: configurations that differ only in what the app does with
            /// the answer (its own trust evaluation, an exception that relaxes nothing this
            /// ClientHello carries) send the same hello and get the same answer.
            var hello: Hello { Hello(override: override, profile: profile) }
        }
        struct Hello: Hashable {
            var override: ClientHelloOverride
            var profile: ClientProfile
        }
        let suites13 = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
        func make(_ name: String, _ exception: [String: String], min: TLSVersion, nonFS: Bool = false,
                  ciphers: String? = nil, ownTrust: Bool = false, diagnostic: Bool = false) -> Configuration {
            // Below TLS 1.2 the permissive context sends the hello; it offers more groups and
            // signature algorithms than an Apple client, so Apple's are set on each connection.
            let legacy = min < .tls1_2
            return Configuration(name: name, exception: exception,
                                 override: ClientHelloOverride(minVersion: min, maxVersion: .tls1_3,
                                                               cipherList: ciphers ?? (nonFS ? currentNonFS : current), tls13Suites: suites13,
                                                               groups: legacy ? ClientContext.appleGroups : nil,
                                                               signatureAlgorithms: legacy ? ClientContext.appleSignatureAlgorithms : nil),
                                 profile: legacy ? .permissive : .atsRuntime, forwardSecrecy: !nonFS,
                                 judgesTrust: !ownTrust, diagnostic: diagnostic)
        }
        let noFS = ["NSExceptionRequiresForwardSecrecy": "NO"]
        let insecure = ["NSExceptionAllowsInsecureHTTPLoads": "YES"]
        let tls10 = ["NSExceptionMinimumTLSVersion": "TLSv1.0"]
        let tls11 = ["NSExceptionMinimumTLSVersion": "TLSv1.1"]
        let matrix = [
            make(ATSConfigurationName.defaultATS, [:], min: .tls1_2),
            make(ATSConfigurationName.documentedList, [:], min: .tls1_2, ciphers: ClientContext.atsCipherList, diagnostic: true),
            make(ATSConfigurationName.tls13, ["NSExceptionMinimumTLSVersion": "TLSv1.3"], min: .tls1_3, diagnostic: true),
            make(ATSConfigurationName.tls12, ["NSExceptionMinimumTLSVersion": "TLSv1.2"], min: .tls1_2, diagnostic: true),
            make(ATSConfigurationName.noForwardSecrecy, noFS, min: .tls1_2, nonFS: true),
            make(ATSConfigurationName.tls11, tls11, min: .tls1_1),
            make(ATSConfigurationName.tls11NoForwardSecrecy, noFS.merging(tls11) { $1 }, min: .tls1_1, nonFS: true),
            make(ATSConfigurationName.tls10, tls10, min: .tls1_0),
            make(ATSConfigurationName.tls10NoForwardSecrecy, noFS.merging(tls10) { $1 }, min: .tls1_0, nonFS: true),
            // Arbitrary loads lift the TLS version and forward secrecy minimums, not the client's suite list or trust.
            make(ATSConfigurationName.arbitraryLoads, ["NSAllowsArbitraryLoads": "YES"], min: .tls1_0, nonFS: true),
            // The app evaluates trust itself; the TLS and forward-secrecy minimums still hold unless relaxed too.
            make(ATSConfigurationName.insecureHTTPLoads, insecure, min: .tls1_2, ownTrust: true),
            make(ATSConfigurationName.insecureHTTPLoadsNoForwardSecrecy, insecure.merging(noFS) { $1 }, min: .tls1_2, nonFS: true, ownTrust: true),
            make(ATSConfigurationName.insecureHTTPLoadsTLS10, insecure.merging(tls10) { $1 }, min: .tls1_0, ownTrust: true),
            make(ATSConfigurationName.insecureHTTPLoadsTLS10NoForwardSecrecy, insecure.merging(tls10) { $1 }.merging(noFS) { $1 },
                 min: .tls1_0, nonFS: true, ownTrust: true),
            // ATS off for the whole app, and the app evaluates trust itself (URLSession:didReceiveChallenge:,
            // AFSecurityPolicy with the certificate pinned): the usual recipe for a self-signed server.
            make(ATSConfigurationName.arbitraryLoadsOwnTrustEvaluation, ["NSAllowsArbitraryLoads": "YES"], min: .tls1_0, nonFS: true, ownTrust: true),
            // Not an Apple client: what the server speaks at all, for the server-side advice.
            Configuration(name: ATSConfigurationName.anyOpenSSLClient, exception: [:],
                          override: ClientHelloOverride(minVersion: .tls1_0, maxVersion: .tls1_3), profile: .permissive,
                          forwardSecrecy: false, judgesTrust: false, diagnostic: true),
        ]
        let configurations = matrix.filter { only?.contains($0.name) ?? true }
        let probes = ProbeCounter()
        let time = Date()
        // One handshake per distinct ClientHello (16 configurations send 9), its answer judged
        // under each configuration that sends it.
        var helloSlots: [Hello: Int] = [:]
        var distinctHellos: [Configuration] = []
        for configuration in configurations where helloSlots[configuration.hello] == nil {
            helloSlots[configuration.hello] = distinctHellos.count
            distinctHellos.append(configuration)
        }
        let answers = WorkerPool.map(distinctHellos, concurrency: perHostConcurrency) { configuration in
            self.handshake(address, target: target, probes: probes, override: configuration.override, profile: configuration.profile)
        }
        let attempts = configurations.map { answers[helloSlots[$0.hello]!] }
        // Each distinct chain's path is built once; a missing intermediate is fetched from the
        // caIssuers URL when the target or scan asks (`ats` and `app audit` do by default, as trustd does).
        let fetchMissing = (target.aiaFetch ?? scanner.options.aiaFetch) ? Deadline(after: target.timeout ?? scanner.options.timeout) : nil
        var built: [[UInt8]: ProbedChainPath] = [:]
        func chain(of attempt: HandshakeAttempt) -> ProbedChainPath? {
            guard !attempt.presented.isEmpty else { return nil }
            let key = attempt.presented.flatMap { Digest.sha256($0.der) }
            if let known = built[key] { return known }
            let presented = attempt.presented.map { $0.summary() }
            let building = PathBuilder.build(presented: attempt.presented, store: trustStore, summaries: presented,
                                             fetchMissing: fetchMissing).judged(at: time)
            var chain = ProbedChainPath(presented: presented, building: building)
            if let stapled = attempt.stapledResponse {
                chain.stapledRevocation = RevocationChecker(mode: .soft, offline: .none)
                    .check(path: building.path, presented: attempt.presented, stapled: stapled, handshake: true, time: time, deadline: Deadline(after: 1))
            }
            built[key] = chain
            return chain
        }
        let chains = attempts.map(chain(of:))
        /// The leaf's SCTs as this handshake showed them, checked against the scan's log list (as `scan` does).
        func scts(of attempt: HandshakeAttempt, chain: ProbedChainPath?) -> [SignedCertificateTimestamp] {
            guard attempt.observation != nil, let leaf = attempt.presented.first, let chain else { return [] }
            return SCTVerifier.check(leaf: leaf, issuer: SCTVerifier.issuer(ofLeafOf: chain.building.path, presented: attempt.presented, leaf: leaf, store: trustStore),
                                     delivered: attempt.deliveredSCTs, logs: scanner.ctLogs)
        }
        // The public-trust rules follow the anchor: the first anchored chain's, else the store's kind.
        let anchoredPublicly = chains.lazy.compactMap { $0.flatMap { PublicRoots.anchorIn($0.building) } }.first.map { !$0.isEmpty }
        var judged = ATSProbes(
            target: target.displayName, address: address.host, domain: target.sni ?? target.host, time: time,
            privateAnchors: !(anchoredPublicly ?? trustStore.isPublic),
            configurations: zip(configurations, zip(attempts, chains)).map { configuration, attemptAndChain in
                let (attempt, chain) = attemptAndChain
                var probe = ATSConfigurationProbe(name: configuration.name, exception: configuration.exception,
                                                  forwardSecrecy: configuration.forwardSecrecy, judgesTrust: configuration.judgesTrust,
                                                  diagnostic: configuration.diagnostic, handshake: attempt.observation,
                                                  failure: attempt.failure, chain: chain)
                probe.scts = scts(of: attempt, chain: chain)
                if let chain {
                    probe.buildWithPinnedAnchors = PathBuilder.pinnedAnchorBuilder(
                        presented: attempt.presented + PathBuilder.fetchedIssuers(of: chain.building), at: time)
                }
                return probe
            })
        judged.trustStore = trustStore.label
        judged.ctLogs = scanner.ctLogs
        judged.distrust = scanner.distrust
        if only == nil {
            // The whole matrix (`ats`, `app audit`): which iOS versions of the client table still connect.
            judged.iOSClients = clientSimulation(address, target: target, leaf: chains.lazy.compactMap { $0?.presented.first }.first,
                                                 clients: SimulatedClientRegistry.iOSClients)
        }
        return judged
    }
}

/// Counts handshakes across worker threads.
final class ProbeCounter: Sendable {
    private let count = Synchronization.Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// The hand-built SSL 2.0 CLIENT-HELLO and the reading of its answer (SSL 3.0 is enumerated on the
/// wire like TLS 1.0 to 1.2, `wireSuites`).
enum LegacyHello {
    static let sslv2: [UInt8] = {
        let specs: [UInt8] = [0x01, 0x00, 0x80, 0x02, 0x00, 0x80, 0x03, 0x00, 0x80, 0x04, 0x00, 0x80,
                              0x05, 0x00, 0x80, 0x06, 0x00, 0x40, 0x07, 0x00, 0xc0]
        let challenge = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let body: [UInt8] = [0x01, 0x00, 0x02, 0x00, UInt8(specs.count), 0x00, 0x00, 0x00, 0x10] + specs + challenge
        return [0x80 | UInt8(body.count >> 8), UInt8(body.count & 0xff)] + body
    }()

    /// Sends the SSLv2 CLIENT-HELLO on a new connection (STARTTLS first when the target asks) and
    /// reads the answer: a whole SSLv2 record (the SERVER-HELLO, its certificate included), or the
    /// first bytes of anything else (an alert); empty when the server closed the connection on it.
    static func exchange(_ address: SocketAddress, target: ScanTarget, timeout: Double) throws(ProbeFailure) -> [UInt8] {
        let deadline = Deadline(after: timeout)
        let socket = try TCPSocket.open(to: address, target: target, deadline: deadline, timeout: timeout)
        guard socket.send(sslv2, until: deadline) else { return [] }
        var received = socket.receive(atLeast: 11, until: deadline)
        if received.count >= 2, received[0] & 0x80 != 0 {
            let length = 2 + (Int(received[0] & 0x7F) << 8 | Int(received[1]))
            if received.count < length { received += socket.receive(atLeast: length - received.count, until: deadline) }
        }
        return received
    }

    static func interpret(_ answer: [UInt8], version: String) -> ProtocolSupport {
        guard !answer.isEmpty else {
            return ProtocolSupport(version: version, status: .rejected, detail: "the server closed the connection on a hand-built \(version) ClientHello")
        }
        if answer.count >= 3, answer[0] & 0x80 != 0, answer[2] == 0x04 {
            return ProtocolSupport(version: version, status: .accepted, detail: "the server answered an SSLv2 CLIENT-HELLO with SERVER-HELLO")
        }
        if answer.count >= 7, answer[0] == 0x15 {
            return ProtocolSupport(version: version, status: .rejected,
                                   detail: "the server refused a hand-built \(version) ClientHello with alert \(OpenSSLErrors.alertName(Int32(answer[6])))")
        }
        return ProtocolSupport(version: version, status: .rejected,
                               detail: "the server did not answer a hand-built \(version) ClientHello with a \(version) ServerHello")
    }
}
