import Foundation
import TLSAuditCore
import TLSAuditProbe

/// `type: webhook`: HTTP POST of the alert JSON; `secret` adds `X-Tlsaudit-Signature: sha256=HEX`
/// (HMAC-SHA256 of the body). An https URL's certificate must verify against the system trust
/// store, or `caFile` when set.
struct WebhookSink: AlertSink {
    static let type = "webhook"
    static let keys = ["url", "secret", "ca_file"]

    var url: URL
    var secret: String?
    var timeout: Double
    var caFile: String?

    static func configured(_ entry: SinkEntry, parser: inout ConfigurationParser) -> WebhookSink? {
        guard let url = parser.httpURL(entry.mapping["url"]) else {
            parser.report(entry.node, "a webhook sink needs a 'url' (http:// or https://)")
            return nil
        }
        let caFile = entry.mapping["ca_file"].flatMap { parser.certificateFile($0) }
        return WebhookSink(url: url, secret: entry.mapping["secret"].flatMap { parser.string($0, "a secret") }, timeout: entry.timeout, caFile: caFile)
    }

    func send(_ body: Data, headers: [String: String], log: () -> Void) -> Result<Void, SinkDeliveryError> {
        Self.post(url: url, body: body, secret: secret, headers: headers, timeout: timeout, caFile: caFile)
    }

    /// One HTTP POST of a JSON body, signed when there is a secret; success is a 2xx answer within
    /// `timeout` (a redirect is a failure: it is not followed). Proxies come from the environment
    /// (`https_proxy`, `http_proxy`, `no_proxy`: see `HTTPProxySettings`).
    static func post(url: URL, body: Data, secret: String?, headers: [String: String],
                            timeout: Double, caFile: String? = nil) -> Result<Void, SinkDeliveryError> {
        var fields: [(name: String, value: String)] = [("Content-Type", "application/json"), ("User-Agent", "tlsaudit")]
        fields += headers.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        if let secret {
            let signature = MessageAuthentication.hmacSHA256Hex(key: Array(secret.utf8), message: Array(body))
            fields.append((name: "X-Tlsaudit-Signature", value: "sha256=\(signature)"))
        }
        do {
            let response = try HTTPClient.post(url, body: Array(body), headers: fields, timeout: timeout, caFile: caFile)
            guard (200..<300).contains(response.status) else {
                let redirect = (300..<400).contains(response.status) ? " (redirects are not followed)" : ""
                return .failure(SinkDeliveryError(description: "HTTP \(response.status)\(redirect)"))
            }
            return .success(())
        } catch {
            return .failure(SinkDeliveryError(description: error.description))
        }
    }
}
