/// Which `NSURLErrorDomain` error an app logs for a host outcome (docs/apple-rules.md section 7,
/// where each row's source is quoted). The first failure on the way to a response decides: no
/// connection, then the handshake, the client certificate, the chain's trust, Certificate
/// Transparency, then the pins.
///
/// Under ATS a trust failure is "strict TLS Trust evaluation failed": NSURLErrorDomain -1200 with
/// -9802; where ATS is off for the host (arbitrary loads, local networking) the system's default
/// evaluation reports -1202 with the specific SecureTransport code.
public enum AppleLoadErrors {
    public static let cannotFindHost = AppleLoadError(code: -1003, name: "NSURLErrorCannotFindHost", source: Source.cannotFindHost)
    public static let cannotConnect = AppleLoadError(code: -1004, name: "NSURLErrorCannotConnectToHost", source: Source.cannotConnect)
    public static let timedOut = AppleLoadError(code: -1001, name: "NSURLErrorTimedOut", source: Source.header)
    public static let connectionLost = AppleLoadError(code: -1005, name: "NSURLErrorNetworkConnectionLost", source: Source.connectionLost)
    /// A plain-HTTP load answered with bytes that are not an HTTP response.
    public static let cannotParseResponse = AppleLoadError(code: -1017, name: "NSURLErrorCannotParseResponse", source: Source.header)
    public static let secureConnectionFailed = AppleLoadError(code: -1200, name: "NSURLErrorSecureConnectionFailed", sslCode: -9802,
                                                              sslName: "errSSLFatalAlert", source: Source.ats)
    public static let notTLS = AppleLoadError(code: -1200, name: "NSURLErrorSecureConnectionFailed", source: Source.notConfirmed)
    public static let strictTrust = AppleLoadError(code: -1200, name: "NSURLErrorSecureConnectionFailed", sslCode: -9802,
                                                   sslName: "errSSLFatalAlert", source: Source.strictTrust)
    public static let untrusted = AppleLoadError(code: -1202, name: "NSURLErrorServerCertificateUntrusted", sslCode: -9813,
                                                 sslName: "errSSLNoRootCert", source: Source.untrusted)
    public static let invalidChain = AppleLoadError(code: -1202, name: "NSURLErrorServerCertificateUntrusted", sslCode: -9807,
                                                    sslName: "errSSLXCertChainInvalid", source: Source.untrusted)
    public static let hostNameMismatch = AppleLoadError(code: -1202, name: "NSURLErrorServerCertificateUntrusted", sslCode: -9843,
                                                        sslName: "errSSLHostNameMismatch", source: Source.hostNameMismatch)
    public static let expired = AppleLoadError(code: -1202, name: "NSURLErrorServerCertificateUntrusted", sslCode: -9814,
                                               sslName: "errSSLCertExpired", source: Source.expired)
    public static let notYetValid = AppleLoadError(code: -1202, name: "NSURLErrorServerCertificateUntrusted", sslCode: -9815,
                                                   sslName: "errSSLCertNotYetValid", source: Source.notYetValid)
    public static let transparency = AppleLoadError(code: -1202, name: "NSURLErrorServerCertificateUntrusted", source: Source.transparency)
    public static let clientCertificateRequired = AppleLoadError(code: -1206, name: "NSURLErrorClientCertificateRequired",
                                                                 source: Source.clientCertificateRequired)
    public static let clientCertificateRejected = AppleLoadError(code: -1205, name: "NSURLErrorClientCertificateRejected", sslCode: -9825,
                                                                 sslName: "errSSLPeerBadCert", source: Source.clientCertificateRejected)
    public static let insecureHTTP = AppleLoadError(code: -1022, name: "NSURLErrorAppTransportSecurityRequiresSecureConnection",
                                                    source: Source.insecureHTTP)
    public static let cancelled = AppleLoadError(code: -999, name: "NSURLErrorCancelled", source: Source.afnetworking)
    public static let pinnedDomains = AppleLoadError(code: -1200, name: "NSURLErrorSecureConnectionFailed", sslCode: -9802,
                                                     sslName: "errSSLFatalAlert", source: Source.pinnedDomains)

    /// Where each row comes from, in a line (docs/apple-rules.md section 7 quotes them).
    public enum Source {
        static let header = "Apple's NSURLError.h (the constant); no log quoted"
        static let cannotFindHost = "logs in AFNetworking/AFNetworking#3004, objcio/tiny-networking#21"
        static let cannotConnect = "logs in AFNetworking/AFNetworking#3988, robbiehanson/CocoaHTTPServer#204"
        static let connectionLost = "logs in AFNetworking/AFNetworking#2801, Alamofire/Alamofire#2581"
        static let ats = "'HTTP load failed (kCFStreamErrorDomainSSL, -9802)' with -1200: Apple Developer Forums threads 703283 and 80638, apptentive/apptentive-ios#152"
        static let strictTrust = "'strict TLS Trust evaluation failed(-9802) ... (error code: -1200 [3:-9802])' under ATS: Apple Developer Forums threads 703283 and 760524, mitmproxy/mitmproxy#803"
        static let untrusted = "'(error code: -1202 [3:-9807])' and '-1202 ... _kCFStreamErrorCodeKey=-9813' where ATS does not apply: Apple Developer Forums thread 102253, maitrungduc1410/WebRTC-Demo#47, starsite/SwiftFM#3"
        static let hostNameMismatch = "'default TLS Trust evaluation failed(-9843) ... (error code: -1202 [3:-9843])': Alamofire/AlamofireImage#380"
        static let expired = "partly confirmed: -1202 for every certificate error and -9814 for an expired one, from firefox-ios ErrorPageHelper.swift (codes read off real NSErrors); no raw log; -1201 never seen"
        static let notYetValid = "not confirmed: -1202 by the same firefox-ios comment ('Regardless of cause, NSURLErrorServerCertificateUntrusted'); -9815 from SecureTransport.h"
        static let transparency = "-1202 for a chain failing Apple's CT policy: Apple Developer Forums thread 821806; SSL code not confirmed"
        static let clientCertificateRequired = "'Code=-1206 \"The server ... requires a client certificate.\"': Alamofire/Alamofire#2714"
        static let clientCertificateRejected = "'(kCFStreamErrorDomainSSL, -9825) ... Code=-1205': Alamofire/Alamofire#2512, AFNetworking/AFNetworking#4031"
        static let insecureHTTP = "'Code=-1022 \"... App Transport Security policy requires the use of a secure connection.\"': ml-explore/mlx-swift-examples#10"
        static let afnetworking = "AFNetworking 2.x and 3.1-3.2: a failed evaluateServerTrust: cancels the challenge, -999 (AFNetworking/AFNetworking#4364, #3165); AFNetworking 4 hands the app -1202 instead (CHANGELOG 4.0.0, #3425)"
        static let pinnedDomains = "NSPinnedDomains mismatch: 'Code=-1200 ... _kCFStreamErrorCodeKey=-9802': Apple Developer Forums thread 731368"
        static let notConfirmed = "not confirmed: no public source found for this case"
    }

    /// The error for a connection that failed before or during the handshake (`failure.*`).
    public static func error(for failure: ProbeFailureCategory) -> AppleLoadError {
        switch failure {
        case .dnsFailure: cannotFindHost
        case .connectionRefused, .networkUnreachable: cannotConnect
        case .connectTimeout, .handshakeTimeout, .starttlsTimeout: timedOut
        case .clientCertificateRequired: clientCertificateRequired
        case .clientCertificateRejected: clientCertificateRejected
        case .closedDuringHandshake: connectionLost
        case .notTLS, .starttlsNotOffered, .starttlsRefused, .starttlsUnexpectedReply: notTLS
        case .tlsAlert, .handshakeFailed, .internalError: secureConnectionFailed
        }
    }

    /// The error for a host that does not connect for `reasons` (finding ids); nil when it connects.
    /// - Parameters:
    ///   - atsEnforced: ATS applies to the host (not off by NSAllowsArbitraryLoads or local networking):
    ///     a trust failure is then ATS's strict evaluation (-1200, -9802).
    ///   - pinnedByAFNetworking: a pin failure is AFNetworking's (it cancels the challenge) rather than NSPinnedDomains'.
    public static func error(for reasons: [String], atsEnforced: Bool, pinnedByAFNetworking: Bool) -> AppleLoadError? {
        guard !reasons.isEmpty else { return nil }
        let ids = Set(reasons)
        if let failure = reasons.lazy.compactMap(failureCategory).first { return error(for: failure) }
        // A plain-HTTP load that reached a server without an HTTP answer (`AppAudit.plainHTTPOutcome`).
        if ids.contains(AppAudit.noHTTPAnswer) { return connectionLost }
        if ids.contains(AppAudit.httpTimeout) { return timedOut }
        if ids.contains(AppAudit.notHTTP) { return cannotParseResponse }
        if ids.contains(FindingID.atsInsecureHTTPLoad.rawValue) { return insecureHTTP }
        if ids.contains(FindingID.tlsClientCertificateRequired.rawValue) { return clientCertificateRequired }
        if ids.contains(FindingID.tlsClientCertificateRejected.rawValue) { return clientCertificateRejected }
        if ids.contains(FindingID.pinAFNetworkingRefused.rawValue) || ids.contains(FindingID.pinNoPinnedCertificate.rawValue) { return cancelled }
        let chainRules: Set<String> = [FindingID.atsTrust.rawValue, FindingID.atsSignatureHash.rawValue, FindingID.atsKeySize.rawValue]
        if ids.contains(where: { $0.hasPrefix("ats.") && !chainRules.contains($0) }) { return secureConnectionFailed }
        let trust = ids.filter { $0.hasPrefix("trust.") || chainRules.contains($0) }
        if !trust.isEmpty {
            if trust == [FindingID.trustCertificateTransparency.rawValue] { return transparency }
            if atsEnforced { return strictTrust }
            if trust.contains(FindingID.trustHostnameMismatch.rawValue), trust.count == 1 { return hostNameMismatch }
            if trust == [FindingID.trustExpired.rawValue] { return expired }
            if trust == [FindingID.trustNotYetValid.rawValue] { return notYetValid }
            if trust.contains(FindingID.trustSelfSigned.rawValue) || trust.contains(FindingID.trustUntrustedRoot.rawValue)
                || trust.contains(FindingID.trustIncompleteChain.rawValue) {
                return untrusted
            }
            return invalidChain
        }
        if ids.contains(FindingID.pinMismatch.rawValue) { return pinnedByAFNetworking ? cancelled : pinnedDomains }
        return secureConnectionFailed
    }

    /// `failure.dns-failure` -> `.dnsFailure`.
    static func failureCategory(_ reason: String) -> ProbeFailureCategory? {
        guard reason.hasPrefix("failure.") else { return nil }
        return ProbeFailureCategory(rawValue: String(reason.dropFirst("failure.".count)))
    }
}
