import COpenSSL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
public import TLSAuditModel

/// The configuration inventory of one address (`checks: [inventory]`): each item from real
/// handshakes (or, where this libssl cannot offer something, hand-built ClientHellos), in a bounded
/// number of them, at most `perHostConcurrency` connections at once.
extension Enumerator {
    /// Signature algorithms offered one at a time: OpenSSL's name and the IANA name reported.
    static let inventorySignatureAlgorithms: [(openssl: String, iana: String)] = [
        ("ECDSA+SHA256", "ecdsa_secp256r1_sha256"), ("ECDSA+SHA384", "ecdsa_secp384r1_sha384"), ("ECDSA+SHA512", "ecdsa_secp521r1_sha512"),
        ("ed25519", "ed25519"), ("ed448", "ed448"),
        ("rsa_pss_rsae_sha256", "rsa_pss_rsae_sha256"), ("rsa_pss_rsae_sha384", "rsa_pss_rsae_sha384"), ("rsa_pss_rsae_sha512", "rsa_pss_rsae_sha512"),
        ("rsa_pss_pss_sha256", "rsa_pss_pss_sha256"), ("rsa_pss_pss_sha384", "rsa_pss_pss_sha384"), ("rsa_pss_pss_sha512", "rsa_pss_pss_sha512"),
        ("RSA+SHA256", "rsa_pkcs1_sha256"), ("RSA+SHA384", "rsa_pkcs1_sha384"), ("RSA+SHA512", "rsa_pkcs1_sha512"),
        ("RSA+SHA1", "rsa_pkcs1_sha1"), ("ECDSA+SHA1", "ecdsa_sha1"),
    ]

    /// The inventory of `address`; `best` is the version the scan's handshake reached, when known.
    public func inventory(_ address: SocketAddress, target: ScanTarget) -> ServerInventory {
        let started = ContinuousClock.now
        let probes = ProbeCounter()
        let timeout = target.timeout ?? scanner.options.timeout
        var stapled = false
        let first = handshake(address, target: target, probes: probes, override: ClientHelloOverride(requestOCSP: true)) { ssl in
            stapled = HandshakeProbe.stapledResponse(ssl) != nil
        }
        // A TLS 1.2 server signs with an ECDSA key only on a curve the client lists: the leaf's curve.
        let leafCurve = first.presented.first?.summary().publicKey.curve.map { $0 == "prime256v1" ? "P-256" : $0 == "secp384r1" ? "P-384" : $0 == "secp521r1" ? "P-521" : $0 }
        guard let base = first.observation else {
            var untested = ServerInventory.untested(.notTested("no handshake with this client"))
            untested.withoutSNIDetail = "no handshake"
            untested.handshakes = probes.value
            untested.durationMs = milliseconds(since: started)
            return untested
        }
        let best = base.protocolVersion
        var extendedMasterSecret = false
        let tls12 = handshake(address, target: target, probes: probes, override: ClientHelloOverride(maxVersion: .tls1_2)) { ssl in
            extendedMasterSecret = tlsaudit_SSL_get_extms_support(ssl) == 1
        }.observation?.protocolVersion
        let speaksTLS12OrLower = tls12 != nil

        enum Job: Sendable { case renegotiation, compression, fallback, sessionID, ticket, earlyData, alpn, groups, signatures, withoutSNI }
        enum Outcome: Sendable {
            case pair(InventoryAnswer, InventoryAnswer)
            case answer(InventoryAnswer)
            case ticket(InventoryAnswer, Int?)
            case alpn([String], String?)
            case groups([String], String?)
            case names([String])
            case certificate(CertificateWithoutSNI?, String?)
        }
        let jobs: [Job] = [.renegotiation, .compression, .fallback, .sessionID, .ticket, .earlyData, .alpn, .groups, .signatures, .withoutSNI]
        let outcomes = WorkerPool.map(jobs, concurrency: perHostConcurrency) { job -> Outcome in
            switch job {
            case .renegotiation:
                return speaksTLS12OrLower ? self.renegotiation(address, target: target, probes: probes, timeout: timeout)
                    .map { .pair($0.0, $0.1) } ?? .pair(.notTested("the TLS 1.2 handshake failed"), .notTested("the TLS 1.2 handshake failed"))
                    : .pair(.tls13Only("renegotiation does not exist in TLS 1.3"), .tls13Only("renegotiation does not exist in TLS 1.3"))
            case .compression:
                return .answer(speaksTLS12OrLower ? self.compression(address, target: target, probes: probes, timeout: timeout)
                               : .tls13Only("TLS 1.3 has no compression"))
            case .fallback:
                return .answer(self.fallback(address, target: target, probes: probes, best: best))
            case .sessionID:
                return .answer(speaksTLS12OrLower ? self.resumption(address, target: target, probes: probes, version: .tls1_2, tickets: false).answer
                               : .notTested("TLS 1.3 only: resumption by session ID is TLS 1.2's"))
            case .ticket:
                let resumed = self.resumption(address, target: target, probes: probes, version: speaksTLS12OrLower ? .tls1_2 : .tls1_3, tickets: true)
                return .ticket(resumed.answer, resumed.lifetime)
            case .earlyData:
                return .answer(best == .tls1_3 ? self.earlyData(address, target: target, probes: probes)
                               : .no("the server does not speak TLS 1.3, where 0-RTT exists"))
            case .alpn:
                return self.alpn(address, target: target, probes: probes).map { .alpn($0.0, $0.1) } ?? .alpn([], nil)
            case .groups:
                var (groups, order) = best == .tls1_3 ? self.groupsByHelloRetry(address, target: target, probes: probes, timeout: timeout)
                    : self.groups(address, target: target, probes: probes, leafCurve: leafCurve)
                if best != .tls1_3, let tls12 {
                    groups += self.wireGroups(address, target: target, probes: probes, version: tls12, leafCurve: leafCurve, known: groups)
                }
                return .groups(groups, order)
            case .signatures:
                return .names(self.signatureAlgorithms(address, target: target, probes: probes))
            case .withoutSNI:
                return self.withoutSNI(address, target: target, probes: probes).map { .certificate($0.0, $0.1) } ?? .certificate(nil, nil)
            }
        }
        // Every item is filled in from its job's outcome below.
        var inventory = ServerInventory.untested(.notTested(""))
        inventory.extendedMasterSecret = switch tls12 {
        case nil: .notTested("no TLS 1.2-or-lower handshake (TLS 1.3 derives its keys from the whole handshake)")
        case .some(let version) where extendedMasterSecret: .yes("extended_master_secret used in a \(version.rawValue) handshake (RFC 7627)")
        case .some(let version): .no("no extended_master_secret in a \(version.rawValue) handshake: its sessions are open to the triple handshake attack")
        }
        inventory.ocspStapling = stapled ? .yes("the server stapled an OCSP response") : .no("no OCSP response stapled when asked for one")
        for (job, outcome) in zip(jobs, outcomes) {
            switch (job, outcome) {
            case (.renegotiation, .pair(let secure, let client)): inventory.secureRenegotiation = secure; inventory.clientRenegotiation = client
            case (.compression, .answer(let answer)): inventory.compression = answer
            case (.fallback, .answer(let answer)): inventory.fallbackSCSV = answer
            case (.sessionID, .answer(let answer)): inventory.resumptionSessionID = answer
            case (.ticket, .ticket(let answer, let lifetime)): inventory.resumptionTicket = answer; inventory.ticketLifetimeSeconds = lifetime
            case (.earlyData, .answer(let answer)): inventory.earlyData = answer
            case (.alpn, .alpn(let accepted, let preferred)): inventory.alpn = accepted; inventory.alpnPreferred = preferred
            case (.groups, .groups(let groups, let order)):
                inventory.groups = groups
                inventory.groupOrder = order
                inventory.postQuantumGroups = groups.filter { name in HandBuiltHello.postQuantumGroups.contains { $0.name == name } }
            case (.signatures, .names(let names)): inventory.signatureAlgorithms = names
            case (.withoutSNI, .certificate(let certificate, let detail)):
                inventory.certificateWithoutSNI = certificate
                inventory.withoutSNIDetail = detail
            default: break
            }
        }
        inventory.handshakes = probes.value
        inventory.durationMs = milliseconds(since: started)
        return inventory
    }

    // MARK: - Items

    /// RFC 5746 support, then a renegotiation started by the client on the same TLS 1.2 connection
    /// (the vulnerability check's client-renegotiation verdict asks it too when no inventory ran).
    func renegotiation(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter,
                               timeout: Double) -> (InventoryAnswer, InventoryAnswer)? {
        var secure = false
        var client = InventoryAnswer.notTested("")
        let attempt = handshake(address, target: target, probes: probes, override: ClientHelloOverride(maxVersion: .tls1_2)) { ssl in
            secure = tlsaudit_SSL_get_secure_renegotiation_support(ssl) == 1
            client = Self.renegotiate(ssl, deadline: Deadline(after: timeout))
        }
        guard let version = attempt.observation?.protocolVersion.rawValue else { return nil }
        return (secure ? .yes("renegotiation_info in the \(version) ServerHello (RFC 5746)")
                       : .no("no renegotiation_info in the \(version) ServerHello: insecure renegotiation (CVE-2009-3555)"),
                client)
    }

    /// Starts a renegotiation and drives it to its end or its refusal.
    private static func renegotiate(_ ssl: OpaquePointer, deadline: Deadline) -> InventoryAnswer {
        OpenSSLErrors.clear()
        guard SSL_renegotiate(ssl) == 1 else {
            OpenSSLErrors.clear()
            return .notTested("this client could not start a renegotiation")
        }
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let status = SSL_do_handshake(ssl)
            if status == 1, SSL_renegotiate_pending(ssl) == 0 {
                return .yes("the server completed a renegotiation the client started (each costs it a full handshake)")
            }
            var error = SSL_get_error(ssl, status)
            if status == 1 {
                // The ClientHello went out; the server's answer is read as application data.
                let read = SSL_read(ssl, &buffer, Int32(buffer.count))
                if read > 0 { continue }
                error = SSL_get_error(ssl, read)
            }
            guard error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE else {
                let errors = OpenSSLErrors.drain()
                let alert = errors.compactMap(\.receivedAlert).last
                return .no(alert.map { "refused with alert \(OpenSSLErrors.alertName($0))" } ?? "the server ended the connection instead of renegotiating")
            }
            guard HandshakeProbe.wait(ssl, for: error, until: deadline) else {
                return .no("the server did not answer the renegotiation (ignored it)")
            }
        }
    }

    /// A hand-built TLS 1.2 ClientHello offering DEFLATE before null compression.
    private func compression(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, timeout: Double) -> InventoryAnswer {
        probes.increment()
        switch HandBuiltHello.exchange(HandBuiltHello.tls12(serverName: target.sni, compression: [1, 0]), address: address, target: target, timeout: timeout) {
        case .serverHello(let hello):
            return hello.compression == 1 ? .yes("the server chose DEFLATE compression (CRIME)") : .no("the server chose no compression when DEFLATE was offered")
        case .alert(let alert):
            return .notTested("the server refused a TLS 1.2 ClientHello offering DEFLATE: alert \(OpenSSLErrors.alertName(Int32(alert)))")
        case .other(let why), .closed(let why):
            return .notTested(why)
        }
    }

    /// TLS_FALLBACK_SCSV with each version below the server's best, from the next one down: a
    /// server that honours it refuses with inappropriate_fallback. One that speaks none of the
    /// lower versions leaves nothing to fall back to: not tested, since there is no downgrade to
    /// refuse (sslyze counts it as support).
    private func fallback(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, best: TLSVersion) -> InventoryAnswer {
        let lower = TLSVersion.allCases.filter { $0.wireValue < best.wireValue && $0.wireValue >= TLSVersion.tls1_0.wireValue }
            .sorted { $0.wireValue > $1.wireValue }
        guard !lower.isEmpty else { return .notTested("no version below \(best.rawValue) to fall back to") }
        var refusals: [String] = []
        for version in lower {
            let attempt = handshake(address, target: target, probes: probes,
                                    override: ClientHelloOverride(minVersion: version, maxVersion: version, fallbackSCSV: true))
            if attempt.observation != nil {
                return .no("the server accepted a fallback to \(version.rawValue) with TLS_FALLBACK_SCSV (its best is \(best.rawValue))")
            }
            if attempt.failure?.alert == "inappropriate_fallback" {
                return .yes("a fallback to \(version.rawValue) with TLS_FALLBACK_SCSV was refused with inappropriate_fallback")
            }
            refusals.append("\(version.rawValue): \(attempt.failure?.alert ?? attempt.failure?.category.rawValue ?? "refused")")
        }
        return .notTested("not applicable: the server speaks no version below \(best.rawValue), so there is no fallback to refuse (\(refusals.joined(separator: ", ")))")
    }

    /// Two connections: the second offers the first's session (by ID, or by ticket).
    private func resumption(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, version: TLSVersion,
                            tickets: Bool) -> (answer: InventoryAnswer, lifetime: Int?) {
        let timeout = target.timeout ?? scanner.options.timeout
        var session: OpaquePointer?
        var lifetime: Int?
        let first = handshake(address, target: target, probes: probes,
                              override: ClientHelloOverride(minVersion: version, maxVersion: version, noTicket: !tickets)) { ssl in
            if version == .tls1_3 { Self.readTickets(ssl, deadline: Deadline(after: min(timeout, 1))) }
            session = SSL_get1_session(ssl)
        }
        defer { if let session { SSL_SESSION_free(session) } }
        guard first.observation != nil, let session else { return (.notTested("the \(version.rawValue) handshake failed"), nil) }
        if tickets {
            guard SSL_SESSION_has_ticket(session) == 1 else { return (.no("the server sent no session ticket (\(version.rawValue))"), nil) }
            lifetime = Int(SSL_SESSION_get_ticket_lifetime_hint(session))
        } else {
            var length: UInt32 = 0
            _ = SSL_SESSION_get_id(session, &length)
            guard length > 0 else { return (.no("the server gave the session no ID (\(version.rawValue))"), nil) }
        }
        var reused = false
        let second = handshake(address, target: target, probes: probes,
                               override: ClientHelloOverride(minVersion: version, maxVersion: version, noTicket: !tickets, session: session)) { ssl in
            reused = SSL_session_reused(ssl) == 1
        }
        guard second.observation != nil else { return (.notTested("the second handshake failed"), lifetime) }
        let how = tickets ? "by session ticket" : "by session ID"
        return (reused ? .yes("a second \(version.rawValue) connection resumed the first's session \(how)")
                : .no("the server made a full handshake when offered the first connection's session \(how)"), lifetime)
    }

    /// Reads what the server sends right after a TLS 1.3 handshake (its NewSessionTickets).
    private static func readTickets(_ ssl: OpaquePointer, deadline: Deadline) {
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            // SSL_read processes the tickets that arrived (and returns WANT_READ: no data follows).
            let read = SSL_read(ssl, &buffer, Int32(buffer.count))
            if let session = SSL_get_session(ssl), SSL_SESSION_has_ticket(session) == 1 { return }
            let error = SSL_get_error(ssl, read)
            guard read <= 0, error == SSL_ERROR_WANT_READ, HandshakeProbe.wait(ssl, for: error, until: deadline) else { return }
        }
    }

    /// Resumes a TLS 1.3 session with early data (a HEAD request for HTTPS, else one byte-free probe is not possible: HTTPS only).
    private func earlyData(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter) -> InventoryAnswer {
        let timeout = target.timeout ?? scanner.options.timeout
        var session: OpaquePointer?
        let first = handshake(address, target: target, probes: probes, override: ClientHelloOverride(minVersion: .tls1_3, maxVersion: .tls1_3)) { ssl in
            Self.readTickets(ssl, deadline: Deadline(after: min(timeout, 1)))
            session = SSL_get1_session(ssl)
        }
        defer { if let session { SSL_SESSION_free(session) } }
        guard first.observation != nil, let session, SSL_SESSION_has_ticket(session) == 1 else {
            return .no("no TLS 1.3 session ticket: nothing to send early data with")
        }
        let allowed = SSL_SESSION_get_max_early_data(session)
        guard allowed > 0 else { return .no("the server's tickets allow no early data (max_early_data 0)") }
        guard target.starttls == nil else {
            return .notTested("tickets allow \(allowed) bytes of early data; none sent to a \(target.starttls!.protocol.displayName) server")
        }
        let request = Array("HEAD / HTTP/1.1\r\nHost: \(target.sni ?? target.host)\r\nConnection: close\r\n\r\n".utf8)
        var status = Int32(SSL_EARLY_DATA_NOT_SENT)
        let second = handshake(address, target: target, probes: probes,
                               override: ClientHelloOverride(minVersion: .tls1_3, maxVersion: .tls1_3, session: session, earlyData: request)) { ssl in
            status = SSL_get_early_data_status(ssl)
        }
        guard second.observation != nil else { return .notTested("the resumed handshake failed") }
        return status == SSL_EARLY_DATA_ACCEPTED ? .yes("the server accepted 0-RTT data on resumption (replayable)")
            : .no("the server advertises \(allowed) bytes of early data but rejected the 0-RTT data sent")
    }

    /// ALPN: h2 and http/1.1 together (the server's pick), then each alone.
    private func alpn(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter) -> ([String], String?)? {
        func selected(_ offered: [String]) -> String? {
            var chosen: String?
            _ = handshake(address, target: target, probes: probes, override: ClientHelloOverride(alpn: offered)) { ssl in
                var data: UnsafePointer<UInt8>?
                var length: UInt32 = 0
                SSL_get0_alpn_selected(ssl, &data, &length)
                if let data, length > 0 { chosen = String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self) }
            }
            return chosen
        }
        let preferred = selected(["h2", "http/1.1"])
        let accepted = ["h2", "http/1.1"].filter { selected([$0]) == $0 }
        return (accepted, preferred)
    }

    /// TLS 1.2 servers: each group this libssl offers alone (accepted when negotiated), then the
    /// order: the remaining accepted groups offered together, the server's pick removed each time.
    /// `leafCurve`: listed after the candidates, for the ECDSA certificate's sake.
    private func groups(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, leafCurve: String?) -> ([String], String?) {
        let offerable = NamedGroupRegistry.all.filter { $0.kind == .ellipticCurve }.compactMap { group in group.openssl.map { (openssl: $0, name: group.name) } }
        func negotiated(_ list: [String]) -> String? {
            var group: String?
            let offered = list + (leafCurve.map { list.contains($0) ? [] : [$0] } ?? [])
            _ = handshake(address, target: target, probes: probes, override: ClientHelloOverride(groups: offered.joined(separator: ":"))) { ssl in
                let id = tlsaudit_SSL_get_negotiated_group(ssl)
                guard id != 0, let name = SSL_group_to_name(ssl, id) else { return }
                let negotiated = String(cString: name).lowercased()
                group = NamedGroupRegistry.all.first { $0.name.lowercased() == negotiated || ($0.name == "secp256r1" && negotiated == "prime256v1") }?.name
            }
            return group
        }
        let accepted = offerable.filter { negotiated([$0.openssl]) == $0.name }
        guard accepted.count >= 2 else { return (accepted.map(\.name), nil) }
        var remaining = accepted
        var order: [String] = []
        while remaining.count > 1, let pick = negotiated(remaining.map(\.openssl)), remaining.contains(where: { $0.name == pick }) {
            order.append(pick)
            remaining.removeAll { $0.name == pick }
        }
        order += remaining.map(\.name)
        // The order found, reversed: a server with an order of its own still takes its first; one
        // that follows the client takes the reversed list's first.
        let reversedPick = negotiated(order.reversed().compactMap { name in accepted.first { $0.name == name }?.openssl })
        return (order, reversedPick == order[0] ? "server" : "client")
    }

    /// TLS 1.2-or-lower servers, on the wire: the curves this libssl cannot offer (ECDHE suites
    /// only, the leaf's curve listed last for an ECDSA certificate's sake, so curves the server
    /// ranks below its certificate's stay unseen), then the RFC 7919 groups (DHE suites only, the
    /// group told by its prime), each walk removing the server's choice until it refuses or picks
    /// something else. Appended to `known`'s order.
    func wireGroups(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter, version: TLSVersion,
                    leafCurve: String?, known: [String]) -> [String] {
        let offerable = CipherSuiteRegistry.offerable(at: version.wireValue).filter { !$0.isAnonymous && !$0.isExport }
        let leaf = leafCurve.flatMap { curve in NamedGroupRegistry.all.first { $0.openssl == curve || $0.name == curve } }
        func walk(suites: [UInt16], groups: [NamedGroupInfo]) -> [String] {
            var remaining = groups.filter { !known.contains($0.name) }
            var found: [String] = []
            while !remaining.isEmpty {
                let offered = remaining.map(\.code) + (leaf.map { leaf in remaining.contains(leaf) ? [] : [leaf.code] } ?? [])
                guard case .chose(_, let exchange) = offer(suites, version: version, address: address, target: target, probes: probes, groups: offered),
                      let name = exchange.group, remaining.contains(where: { $0.name == name }) else { break }
                found.append(name)
                remaining.removeAll { $0.name == name }
            }
            return found
        }
        let exotic = walk(suites: offerable.filter(\.isEllipticCurveDH).map(\.code),
                          groups: NamedGroupRegistry.all.filter { $0.kind == .ellipticCurve && $0.openssl == nil })
        let finiteField = walk(suites: offerable.filter(\.isFiniteFieldDH).map(\.code),
                               groups: NamedGroupRegistry.all.filter { $0.kind == .finiteField })
        return exotic + finiteField
    }

    /// TLS 1.3 servers: hand-built ClientHellos whose supported_groups list every group (the
    /// post-quantum hybrids this libssl cannot offer among them) with no key share, so that the
    /// server names its choice in a HelloRetryRequest; the choice is removed and the rest offered
    /// again until it refuses. The list offered reversed tells the server's order from the client's.
    private func groupsByHelloRetry(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter,
                                    timeout: Double) -> ([String], String?) {
        func pick(_ offered: [(code: UInt16, name: String, openssl: String?)]) -> String? {
            probes.increment()
            guard case .serverHello(let hello) = HandBuiltHello.exchange(HandBuiltHello.tls13(serverName: target.sni, groups: offered.map(\.code)),
                                                                         address: address, target: target, timeout: timeout),
                  let group = hello.selectedGroup else { return nil }
            return offered.first { $0.code == group }?.name
        }
        let candidates = NamedGroupRegistry.all.map { (code: $0.code, name: $0.name, openssl: $0.openssl) }
        var remaining = candidates
        var order: [String] = []
        while !remaining.isEmpty, let chosen = pick(remaining) {
            order.append(chosen)
            remaining.removeAll { $0.name == chosen }
        }
        guard order.count >= 2 else { return (order, nil) }
        // The order found, reversed: a server with an order of its own still takes its first; one
        // that follows the client takes the reversed list's first.
        let reversedPick = pick(order.reversed().compactMap { name in candidates.first { $0.name == name } })
        return (order, reversedPick == order[0] ? "server" : "client")
    }

    /// Each signature algorithm alone, with only suites whose key exchange the server signs
    /// (ECDHE and DHE, and TLS 1.3): accepted when such a TLS 1.2-or-later handshake completes,
    /// since the server then signed with the one algorithm offered. A handshake with static RSA or
    /// an anonymous suite signs nothing and a TLS 1.0/1.1 one signs with MD5-SHA1: neither counts.
    private func signatureAlgorithms(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter) -> [String] {
        Self.inventorySignatureAlgorithms.filter { candidate in
            // PKCS #1 and SHA-1 signatures exist for the handshake only up to TLS 1.2.
            let tls12Only = candidate.iana.hasPrefix("rsa_pkcs1") || candidate.iana == "ecdsa_sha1"
            let override = ClientHelloOverride(maxVersion: tls12Only ? .tls1_2 : nil, cipherList: "kECDHE:kDHE:!aNULL",
                                               signatureAlgorithms: candidate.openssl)
            guard let observation = handshake(address, target: target, probes: probes, override: override).observation else { return false }
            return observation.protocolVersion >= .tls1_2 && observation.keyExchange.forwardSecrecy
        }.map(\.iana)
    }

    /// The leaf sent to a client that names no server.
    private func withoutSNI(_ address: SocketAddress, target: ScanTarget, probes: ProbeCounter) -> (CertificateWithoutSNI?, String?)? {
        var anonymous = target
        anonymous.sni = nil
        let withSNI = handshake(address, target: target, probes: probes, override: ClientHelloOverride()).presented.first?.summary()
        let attempt = handshake(address, target: anonymous, probes: probes, override: ClientHelloOverride())
        guard let leaf = attempt.presented.first?.summary() else {
            return (nil, "without SNI: \(attempt.failure?.description ?? "no certificate")")
        }
        return (CertificateWithoutSNI(sha256Fingerprint: leaf.sha256Fingerprint, subject: leaf.subject,
                                      sameAsWithSNI: leaf.sha256Fingerprint == withSNI?.sha256Fingerprint), nil)
    }
}
