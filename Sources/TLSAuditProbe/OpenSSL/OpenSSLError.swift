import COpenSSL
import COpenSSLProbeLibrary
import Foundation
import TLSAuditSupport

/// One entry of OpenSSL's thread-local error queue, classified by library and reason code.
struct OpenSSLErrorEntry: Sendable, CustomStringConvertible {
    var library: Int32
    var reason: Int32
    var text: String

    var description: String { text }

    /// The TLS alert number when this entry reports an alert received from the peer.
    /// OpenSSL encodes received alerts as reason SSL_AD_REASON_OFFSET (1000) + alert number.
    var receivedAlert: Int32? {
        guard library == ERR_LIB_SSL, reason >= 1000, reason < 1256 else { return nil }
        return reason - 1000
    }
}

package enum OpenSSLErrors {
    /// Empties the calling thread's error queue into values.
    static func drain() -> [OpenSSLErrorEntry] {
        var entries: [OpenSSLErrorEntry] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            // The reason in words ("no protocols available"), not "error:0A0000BF:SSL routines::...".
            let text: String
            if let reason = ERR_reason_error_string(code) {
                text = String(cString: reason)
            } else {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                text = buffer.nulTerminatedString
            }
            entries.append(OpenSSLErrorEntry(library: ERR_GET_LIB(code), reason: ERR_GET_REASON(code), text: text))
        }
        return entries
    }

    /// Clears the queue before an operation whose errors will be read.
    package static func clear() { ERR_clear_error() }

    /// A short description of the last failure, for messages.
    package static func describeAndClear(_ fallback: String) -> String {
        let entries = drain()
        guard let last = entries.last else { return fallback }
        return "\(fallback): \(last.text)"
    }

    /// RFC name of a TLS alert number, e.g. `handshake_failure`.
    static func alertName(_ alert: Int32) -> String {
        if let name = laterAlerts[alert] { return name }
        let long = String(cString: SSL_alert_desc_string_long(alert))
        if long == "unknown" { return "unknown alert \(alert)" }
        // In the standard library: Foundation's `replacingOccurrences` bridges through NSString.
        return String(long.lowercased().map { $0 == " " ? "_" : $0 })
    }

    /// RFC 7507, RFC 8446 and later alerts that OpenSSL 3.0's table does not name.
    static let laterAlerts: [Int32: String] = [
        109: "missing_extension", 110: "unsupported_extension", 112: "unrecognized_name",
        113: "bad_certificate_status_response", 115: "unknown_psk_identity", 116: "certificate_required",
        120: "no_application_protocol", 86: "inappropriate_fallback",
    ]
}

/// An error raised by tlsaudit's own use of OpenSSL (bad input files, failed allocation).
public struct OpenSSLFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    package init(_ what: String) { description = OpenSSLErrors.describeAndClear(what) }
}

/// The OpenSSL library this process runs with.
public enum OpenSSLLibrary {
    /// Its version as OpenSSL says it, e.g. `3.0.19` (`OpenSSL_version(OPENSSL_VERSION_STRING)`).
    public static var version: String { String(cString: OpenSSL_version(OPENSSL_VERSION_STRING)) }

    /// How many key decoders the probe's library context offers (`tlsaudit_probe_library_context`;
    /// 0 when it could not be made and the probe uses the default context).
    package static var probeContextKeyDecoders: Int { Int(tlsaudit_probe_library_decoder_count()) }

    /// Initializes libcrypto without registering `OPENSSL_cleanup` to run at exit: freeing every
    /// table at exit cost each command 1.3M instructions (a one-target scan is about 70M), and it
    /// would free them under a thread still in a handshake when a command exits. Call it before
    /// anything else uses OpenSSL (the first initialization decides).
    public static func initializeWithoutCleanupAtExit() {
        _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil)
    }
}
