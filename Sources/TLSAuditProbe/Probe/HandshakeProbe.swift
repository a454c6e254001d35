import COpenSSL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TLSAuditModel
import TLSAuditSupport

/// What the server sent during one handshake, as seen by OpenSSL's message callback.
/// Passed to the C callback through `SSL_set_msg_callback_arg`; lives as long as the `SSL`.
final class HandshakeTrace {
    /// The first record header the server sent (5 bytes), to tell TLS from anything else.
    var firstRecordHeader: [UInt8]?
    var sawServerHello = false
    var certificateRequested = false
    /// A fatal alert the server sent, by number.
    var receivedAlert: Int32?
}

/// The raw result of one handshake attempt: the observation when it completed, the failure
/// when it did not (both when a TLS 1.3 server rejects the missing client certificate after the
/// handshake), and the certificates presented either way, still as OpenSSL objects for path building.
struct HandshakeAttempt {
    var observation: HandshakeObservation?
    var failure: ProbeFailure?
    var presented: [X509Certificate]
    /// The stapled OCSP response as received (DER), for revocation checking.
    var stapledResponse: [UInt8]? = nil
    /// The SCTs the TLS extension and the stapled OCSP response delivered, verified once the path is built.
    var deliveredSCTs: [ReceivedSCT] = []

    static func failed(_ failure: ProbeFailure, presented: [X509Certificate] = []) -> HandshakeAttempt {
        HandshakeAttempt(observation: nil, failure: failure, presented: presented)
    }
}

/// Changes to a context's ClientHello for one connection (enumeration, the ATS matrix, the inventory).
/// `@unchecked Sendable`: `session` is only read while its owner waits for the handshake.
struct ClientHelloOverride: Hashable, @unchecked Sendable {
    var minVersion: TLSVersion?
    var maxVersion: TLSVersion?
    /// TLS 1.2-and-below suites, OpenSSL syntax.
    var cipherList: String?
    /// TLS 1.3 suites, OpenSSL syntax.
    var tls13Suites: String?
    /// Ask for a stapled OCSP response.
    var requestOCSP = false
    /// Key-exchange groups, OpenSSL syntax (`X25519:P-256`).
    var groups: String?
    /// Signature algorithms, OpenSSL syntax (`ECDSA+SHA256`, `rsa_pss_rsae_sha256`).
    var signatureAlgorithms: String?
    /// ALPN protocols offered, in order.
    var alpn: [String] = []
    /// Refuse session tickets (resumption by session ID only).
    var noTicket = false
    /// Send TLS_FALLBACK_SCSV (RFC 7507), as a client retrying with a lower version does.
    var fallbackSCSV = false
    /// A session (`SSL_SESSION *`) to resume; the caller owns it.
    var session: OpaquePointer?
    /// Sent as TLS 1.3 early data (0-RTT) with the resumed `session`.
    var earlyData: [UInt8]?

    /// Applies to a fresh `SSL`; false when OpenSSL refuses a value.
    func apply(to ssl: OpaquePointer) -> Bool {
        var ok = true
        if let groups { ok = ok && tlsaudit_SSL_set1_groups_list(ssl, groups) == 1 }
        if let signatureAlgorithms { ok = ok && tlsaudit_SSL_set1_sigalgs_list(ssl, signatureAlgorithms) == 1 }
        if !alpn.isEmpty {
            let wire = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
            ok = ok && SSL_set_alpn_protos(ssl, wire, UInt32(wire.count)) == 0
        }
        if noTicket { SSL_set_options(ssl, tlsaudit_SSL_OP_NO_TICKET) }
        if fallbackSCSV { _ = tlsaudit_SSL_set_mode(ssl, Int(SSL_MODE_SEND_FALLBACK_SCSV)) }
        if let session { ok = ok && SSL_set_session(ssl, session) == 1 }
        if let minVersion { ok = ok && tlsaudit_SSL_set_min_proto_version(ssl, Int32(minVersion.wireValue)) == 1 }
        if let maxVersion { ok = ok && tlsaudit_SSL_set_max_proto_version(ssl, Int32(maxVersion.wireValue)) == 1 }
        if let cipherList { ok = ok && SSL_set_cipher_list(ssl, cipherList + ":@SECLEVEL=0") == 1 }
        if let tls13Suites { ok = ok && SSL_set_ciphersuites(ssl, tls13Suites) == 1 }
        if requestOCSP { _ = tlsaudit_SSL_set_tlsext_status_type(ssl, TLSEXT_STATUSTYPE_ocsp) }
        return ok
    }
}

/// One TLS handshake over a non-blocking socket, bounded by a deadline.
enum HandshakeProbe {
    /// Performs a handshake with `context` on a connected socket. The chain is never verified
    /// here: the handshake completes whatever the server presents, so a bad chain is recorded.
    static func handshake(socket: TCPSocket, address: SocketAddress, sni: String?, context: ClientContext,
                          deadline: Deadline, timeout: Double, override: ClientHelloOverride? = nil,
                          inspect: ((OpaquePointer) -> Void)? = nil) -> HandshakeAttempt {
        OpenSSLErrors.clear()
        guard let ssl = SSL_new(context.pointer) else {
            return .failed(ProbeFailure(.internalError, OpenSSLErrors.describeAndClear("SSL_new failed")))
        }
        defer { SSL_free(ssl) }
        if let override, !override.apply(to: ssl) {
            OpenSSLErrors.clear()
            return .failed(ProbeFailure(.internalError, "this libssl cannot offer the requested versions or suites"))
        }
        let trace = HandshakeTrace()
        let began = ContinuousClock.now
        let traceReference = Unmanaged.passRetained(trace)
        defer { traceReference.release() }
        SSL_set_msg_callback(ssl, recordMessage)
        tlsaudit_SSL_set_msg_callback_arg(ssl, traceReference.toOpaque())
        _ = SSL_set_fd(ssl, socket.descriptor)
        if let sni, IPAddress.canonical(sni) == nil {
            // RFC 6066: SNI carries DNS names only, never IP literals, and without a trailing dot.
            _ = tlsaudit_SSL_set_tlsext_host_name(ssl, HostText.withoutTrailingDot(sni))
        }
        SSL_set_connect_state(ssl)

        if let earlyData = override?.earlyData, override?.session != nil {
            // 0-RTT: the data goes with the ClientHello; the handshake then finishes below.
            var written = 0
            while SSL_write_early_data(ssl, earlyData, earlyData.count, &written) != 1,
                  wait(ssl, for: SSL_get_error(ssl, 0), until: deadline) {}
            OpenSSLErrors.clear()
        }

        while true {
            OpenSSLErrors.clear()
            let status = SSL_do_handshake(ssl)
            if status == 1 { break }
            let error = SSL_get_error(ssl, status)
            let savedErrno = errno
            switch error {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                let events = Int16(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)
                switch socket.wait(for: events, until: deadline) {
                case .ready: continue
                case .timedOut:
                    let what = trace.firstRecordHeader == nil
                        ? "the server accepted the connection but sent nothing"
                        : "the server stopped answering mid-handshake"
                    return .failed(ProbeFailure(.handshakeTimeout, "\(what) within \(formatSeconds(timeout))"),
                                   presented: presentedChain(ssl))
                case .failed(let code):
                    return .failed(ProbeFailure(.internalError, "poll(): \(errnoText(code))"))
                }
            default:
                let failure = classifyFailure(error: error, errno: savedErrno, errors: OpenSSLErrors.drain(),
                                              trace: trace, context: context)
                return .failed(failure, presented: presentedChain(ssl))
            }
        }

        let presented = presentedChain(ssl)
        inspect?(ssl)
        var observation = HandshakeObservation(
            clientProfile: context.profile,
            protocolVersion: TLSVersion(wireValue: Int(SSL_version(ssl))) ?? .tls1_0,
            cipher: cipherDescription(ssl),
            keyExchange: keyExchange(ssl),
            serverSignatureHash: serverSignatureHash(ssl),
            clientCertificateRequested: trace.certificateRequested)
        let stapled = stapledResponse(ssl)
        observation.stapledOCSP = stapled.map(OCSPExchange.summary(of:))
        let delivered = ReceivedSCT.delivered(ssl)
        observation.signedCertificateTimestamps = SCTCounts(
            embedded: presented.first.map { ReceivedSCT.embedded(in: $0).count } ?? 0,
            tlsExtension: delivered.count { $0.origin == .tlsExtension }, ocsp: delivered.count { $0.origin == .ocsp })

        if trace.certificateRequested,
           let refusal = clientCertificateRefusal(ssl: ssl, socket: socket, trace: trace, deadline: deadline,
                                                  handshakeTime: ContinuousClock.now - began,
                                                  presented: context.presentsClientCertificate) {
            return HandshakeAttempt(observation: observation, failure: refusal, presented: presented,
                                    stapledResponse: stapled, deliveredSCTs: delivered)
        }
        _ = SSL_shutdown(ssl) // Best effort close_notify; the socket is non-blocking.
        OpenSSLErrors.clear()
        return HandshakeAttempt(observation: observation, failure: nil, presented: presented, stapledResponse: stapled,
                                deliveredSCTs: delivered)
    }

    /// Waits until the socket under `ssl` is ready for what `error` (SSL_ERROR_WANT_READ or
    /// _WRITE) asks; false for any other error or when the deadline passes (`TCPSocket.wait`).
    static func wait(_ ssl: OpaquePointer, for error: Int32, until deadline: Deadline) -> Bool {
        guard error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE else { return false }
        let events = Int16(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)
        return TCPSocket.wait(SSL_get_fd(ssl), for: events, until: deadline) == .ready
    }

    // MARK: - Reading the handshake

    /// The certificates as the server sent them (the client-side stack includes the leaf).
    static func presentedChain(_ ssl: OpaquePointer) -> [X509Certificate] {
        guard let stack = SSL_get_peer_cert_chain(ssl) else { return [] }
        return (0..<tlsaudit_sk_X509_num(stack)).compactMap { index in
            tlsaudit_sk_X509_value(stack, index).map(X509Certificate.init(borrowing:))
        }
    }

    static func cipherDescription(_ ssl: OpaquePointer) -> CipherSuiteDescription {
        guard let cipher = SSL_get_current_cipher(ssl) else {
            return CipherSuiteDescription(iana: "unknown", openssl: "unknown", code: "0x0000", keyExchange: "unknown",
                                          authentication: "unknown", isAEAD: false, strengthBits: 0)
        }
        return cipherDescription(of: cipher)
    }

    /// A suite as this libssl names and describes it.
    static func cipherDescription(of cipher: OpaquePointer) -> CipherSuiteDescription {
        let code = SSL_CIPHER_get_protocol_id(cipher)
        return CipherSuiteDescription(
            iana: SSL_CIPHER_standard_name(cipher).map { String(cString: $0) } ?? "unknown",
            openssl: String(cString: SSL_CIPHER_get_name(cipher)),
            code: "0x" + code.hex(width: 4, uppercase: true),
            keyExchange: nidName(SSL_CIPHER_get_kx_nid(cipher), droppingPrefix: "Kx"),
            authentication: nidName(SSL_CIPHER_get_auth_nid(cipher), droppingPrefix: "Auth"),
            isAEAD: SSL_CIPHER_is_aead(cipher) == 1,
            strengthBits: Int(SSL_CIPHER_get_bits(cipher, nil)))
    }

    private static func nidName(_ nid: Int32, droppingPrefix prefix: String) -> String {
        guard nid != NID_undef, let short = OBJ_nid2sn(nid) else { return "unknown" }
        let name = String(cString: short)
        return name.hasPrefix(prefix) ? String(name.dropFirst(prefix.count)) : name
    }

    /// Forward secrecy is read from the handshake: an ephemeral key must exist and the
    /// key exchange must not be plain RSA or PSK.
    static func keyExchange(_ ssl: OpaquePointer) -> KeyExchangeDescription {
        var key: OpaquePointer?
        var ephemeral: PublicKeyDescription?
        if tlsaudit_SSL_get_peer_tmp_key(ssl, &key) == 1, let key {
            ephemeral = PublicKeyInfo.describe(key)
            EVP_PKEY_free(key)
        }
        var group: String?
        let groupID = tlsaudit_SSL_get_negotiated_group(ssl)
        if groupID != 0, let name = SSL_group_to_name(ssl, groupID) {
            group = String(cString: name)
        } else if let curve = ephemeral?.curve {
            group = curve
        }
        let kx = SSL_get_current_cipher(ssl).map { nidName(SSL_CIPHER_get_kx_nid($0), droppingPrefix: "Kx") } ?? "unknown"
        let staticExchange = kx == "RSA" || kx.hasPrefix("PSK") || kx == "RSAPSK"
        return KeyExchangeDescription(group: group, ephemeralKey: ephemeral, forwardSecrecy: ephemeral != nil && !staticExchange)
    }

    static func serverSignatureHash(_ ssl: OpaquePointer) -> String? {
        var nid: Int32 = NID_undef
        guard tlsaudit_SSL_get_peer_signature_nid(ssl, &nid) == 1, nid != NID_undef else { return nil }
        return X509Certificate.hashName(nid: nid)
    }

    /// The stapled OCSP response's bytes.
    static func stapledResponse(_ ssl: OpaquePointer) -> [UInt8]? {
        var bytes: UnsafePointer<UInt8>?
        let length = tlsaudit_SSL_get_tlsext_status_ocsp_resp(ssl, &bytes)
        guard length > 0, let start = bytes else { return nil }
        return Array(UnsafeBufferPointer(start: start, count: length))
    }

    // MARK: - Failures

    /// TLS 1.3 servers that require a client certificate refuse the client's empty one only after
    /// its Finished, one round trip later (a TLS 1.2 server refuses before its own Finished, so a
    /// completed TLS 1.2 handshake already says "optional"). The answer is awaited for twice the
    /// handshake's own time (at least 50 ms, at most a second): the refusal comes within it, and a
    /// server that sends its tickets says at once that it went on.
    /// With `presented`, the client sent its own certificate, and a refusal is a rejection of it.
    static func clientCertificateRefusal(ssl: OpaquePointer, socket: TCPSocket, trace: HandshakeTrace,
                                         deadline: Deadline, handshakeTime: Duration, presented: Bool = false) -> ProbeFailure? {
        guard SSL_version(ssl) == TLS1_3_VERSION else { return nil }
        let handshakeSeconds = handshakeTime.seconds
        let shortWait = Deadline(after: min(1.0, max(0.05, 2 * handshakeSeconds), Double(deadline.remainingMilliseconds) / 1000))
        var byte: UInt8 = 0
        while true {
            OpenSSLErrors.clear()
            let status = SSL_read(ssl, &byte, 1)
            if status > 0 { return nil } // The server talks: the certificate was optional.
            let error = SSL_get_error(ssl, status)
            if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE {
                // A ticket was read (or nothing yet): the server went on without a certificate.
                if SSL_get_session(ssl).map({ SSL_SESSION_is_resumable($0) == 1 }) == true { return nil }
                let events = Int16(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)
                if socket.wait(for: events, until: shortWait) == .ready { continue }
                return nil
            }
            let errors = OpenSSLErrors.drain()
            let alert = trace.receivedAlert ?? errors.compactMap(\.receivedAlert).last
            if error == SSL_ERROR_ZERO_RETURN, alert == nil { return nil }
            let name = alert.map(OpenSSLErrors.alertName)
            if presented {
                return ProbeFailure(.clientCertificateRejected,
                                    "the server asked for a client certificate and refused the one presented"
                                        + (name.map { " with alert \($0)" } ?? ""),
                                    alert: name)
            }
            return ProbeFailure(.clientCertificateRequired,
                                "the server asked for a client certificate and, given none, ended the connection"
                                    + (name.map { " with alert \($0)" } ?? ""),
                                alert: name)
        }
    }

    /// The alerts a server sends about the client's certificate: bad_certificate, unsupported_certificate,
    /// certificate_revoked, certificate_expired, certificate_unknown, unknown_ca, access_denied,
    /// decrypt_error (a signature that does not verify), certificate_required.
    static let certificateRefusalAlerts: Set<Int32> = [42, 43, 44, 45, 46, 48, 49, 51, 116]

    static func classifyFailure(error: Int32, errno code: Int32, errors: [OpenSSLErrorEntry], trace: HandshakeTrace,
                                context: ClientContext) -> ProbeFailure {
        let alert = trace.receivedAlert ?? errors.compactMap(\.receivedAlert).last
        let detail = errors.last?.text
        if let alert {
            let name = OpenSSLErrors.alertName(alert)
            // 116 = certificate_required (TLS 1.3); TLS 1.2 servers send handshake_failure or bad_certificate.
            if trace.certificateRequested, context.presentsClientCertificate, Self.certificateRefusalAlerts.contains(alert) {
                return ProbeFailure(.clientCertificateRejected,
                                    "the server refused the client certificate presented (it sent alert \(name))", alert: name)
            }
            if alert == 116 || (trace.certificateRequested && !context.presentsClientCertificate) {
                return ProbeFailure(.clientCertificateRequired,
                                    "the server requires a client certificate (it sent alert \(name))", alert: name)
            }
            return ProbeFailure(.tlsAlert, "the server sent alert \(name)", alert: name)
        }
        if !trace.sawServerHello, let header = trace.firstRecordHeader, !(20...24).contains(header[0]) || header[1] != 3 {
            return ProbeFailure(.notTLS, "the server answered with data that is not TLS: \(printable(header))")
        }
        let endOfStream = error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && code == 0)
            || errors.contains { $0.library == ERR_LIB_SSL && $0.reason == SSL_R_UNEXPECTED_EOF_WHILE_READING }
        if endOfStream || (error == SSL_ERROR_SYSCALL && (code == ECONNRESET || code == EPIPE)) {
            if trace.certificateRequested && !context.presentsClientCertificate {
                return ProbeFailure(.clientCertificateRequired,
                                    "the server asked for a client certificate and closed the connection without one")
            }
            let how = code == ECONNRESET ? "reset" : "closed"
            let when = trace.firstRecordHeader == nil ? "before answering the ClientHello" : "during the handshake"
            return ProbeFailure(.closedDuringHandshake, "the server \(how) the connection \(when)")
        }
        if !trace.sawServerHello, trace.firstRecordHeader != nil,
           errors.contains(where: { $0.library == ERR_LIB_SSL && recordLayerReasons.contains($0.reason) }) {
            return ProbeFailure(.notTLS, "the server's answer is not a TLS record: \(detail ?? "malformed record")")
        }
        if error == SSL_ERROR_SYSCALL {
            return ProbeFailure(.closedDuringHandshake, "the connection failed during the handshake: \(errnoText(code))")
        }
        return ProbeFailure(.handshakeFailed, detail.map { "OpenSSL: \($0)" } ?? "the handshake failed (OpenSSL error \(error))")
    }

    /// Reasons OpenSSL gives when bytes do not parse as TLS records.
    static let recordLayerReasons: Set<Int32> = [
        SSL_R_WRONG_VERSION_NUMBER, SSL_R_PACKET_LENGTH_TOO_LONG, SSL_R_RECORD_LENGTH_MISMATCH,
        SSL_R_UNKNOWN_PROTOCOL, SSL_R_BAD_RECORD_TYPE, SSL_R_UNEXPECTED_RECORD, SSL_R_ENCRYPTED_LENGTH_TOO_LONG,
        SSL_R_LENGTH_MISMATCH, SSL_R_BAD_PACKET_LENGTH, SSL_R_UNEXPECTED_MESSAGE,
        SSL_R_LENGTH_TOO_SHORT, SSL_R_BAD_LENGTH,
    ]

    /// `"HTTP/"` for text, hex otherwise.
    static func printable(_ bytes: [UInt8]) -> String {
        if bytes.allSatisfy({ (0x20..<0x7f).contains($0) }) {
            let text = String(decoding: bytes, as: UTF8.self)
            return text.hasPrefix("HTTP") ? "\"\(text)...\" (an HTTP server)" : "\"\(text)...\""
        }
        return bytes.map { String(format: "%02x", $0) }.joined(separator: " ")
    }
}

/// OpenSSL's message callback: notes record headers, handshake message types and alerts from the server.
private let recordMessage: @convention(c) (Int32, Int32, Int32, UnsafeRawPointer?, Int, OpaquePointer?, UnsafeMutableRawPointer?) -> Void = {
    writing, _, contentType, buffer, length, _, argument in
    guard writing == 0, let buffer, let argument, length > 0 else { return }
    let trace = Unmanaged<HandshakeTrace>.fromOpaque(argument).takeUnretainedValue()
    let bytes = buffer.assumingMemoryBound(to: UInt8.self)
    switch contentType {
    case SSL3_RT_HEADER:
        if trace.firstRecordHeader == nil { trace.firstRecordHeader = Array(UnsafeBufferPointer(start: bytes, count: length)) }
    case SSL3_RT_HANDSHAKE:
        switch Int32(bytes[0]) {
        case SSL3_MT_SERVER_HELLO: trace.sawServerHello = true
        case SSL3_MT_CERTIFICATE_REQUEST: trace.certificateRequested = true
        default: break
        }
    case SSL3_RT_ALERT where length >= 2:
        if bytes[0] == 2 { trace.receivedAlert = Int32(bytes[1]) } // level 2 = fatal
    default:
        break
    }
}
