import Foundation

extension ATSDiagnostics {
    /// `tlsaudit ats`'s app-side advice, drawn by `app audit`'s judge (`AppAudit.outcome` and
    /// `AppAudit.smallestException`) for an app with no exception for the host: so that every change
    /// `ats` recommends makes `app audit` say CONNECTS for the same server. In order: a per-domain
    /// exception for an app that leaves trust to the system; NSAllowsArbitraryLoads; for a chain no
    /// exception makes the system trust, insecure HTTP loads with AFNetworking's public-key mode
    /// pinning the server's key (certificate mode would still check the dates and the chain).
    mutating func adviseApp(_ probes: ATSProbes) {
        let domain = probes.domain
        let base = AppTransportSecurityPolicy(nil).effectivePolicy(for: domain)
        let current = AppAudit.outcome(base, probes: probes, diagnostics: self, host: domain)
        error = current.error
        if probes.privateAnchors { anchors = AppAudit.privateAnchorsNote }
        let clientCertificate = probes.configurations.first?.failure?.category == .clientCertificateRequired
        if clientCertificate {
            clientCertificateRequired = true
            serverFixes = []
            oldestConnectingIos = nil
            currentClients = "the server demands a client certificate and none was presented: an app without its client identity fails with NSURLErrorDomain -1206 (NSURLErrorClientCertificateRequired)"
            appSide = "no ATS exception helps: the app must answer URLSession's client-certificate challenge (NSURLAuthenticationMethodClientCertificate) with its identity"
            exception = [:]
            infoPlist = nil
            recommendation = "\(currentClients). In the app: \(appSide)"
            return
        }
        let context = probes.trustContext(hostname: domain)
        let firstChain = probes.configurations.lazy.compactMap(\.chain).first
        let chainFailures = firstChain.map { Self.chainFailures($0, context: context).findings } ?? []
        if let clients = iosClients {
            let oldest = IOSVersionRules.oldest(clients, chainFailures: chainFailures, leaf: firstChain?.presented.first, hostname: domain,
                                                minimumTLSVersion: .tls1_2, forwardSecrecy: true)
            oldestConnectingIos = oldest.client
            oldestIosNote = oldest.reason
            newestIosStop = IOSVersionRules.newestStop(clients, chainFailures: chainFailures, leaf: firstChain?.presented.first, hostname: domain,
                                                       minimumTLSVersion: .tls1_2, forwardSecrecy: true)
        }
        guard exitCode != 0 else { return }
        if let keys = AppAudit.smallestException(base, probes: probes, diagnostics: self, host: domain) {
            appSide = "the smallest exception that works: " + Self.keys(keys) + (Self.legacyTLSNote(keys).map { "; " + $0 } ?? "")
            exception = keys
            infoPlist = Self.plist(domain: domain, exception: keys)
        } else if Self.arbitraryLoadsConnect(base, probes: probes, diagnostics: self) {
            appSide = "only NSAllowsArbitraryLoads works (for every domain of the app: no per-domain exception is enough); it turns ATS off"
            exception = ["NSAllowsArbitraryLoads": "YES"]
            infoPlist = Self.plist(domain: domain, exception: [:], arbitraryLoads: true)
        } else if !trustProblems.isEmpty, let leaf = probes.configurations.lazy.compactMap({ $0.chain?.presented.first }).first,
                  case let pinning = PinPolicy(mode: .publicKey, pins: [.spki(leaf.spkiSHA256)], allowInvalidCertificates: true),
                  let keys = AppAudit.smallestException(base, probes: probes, diagnostics: self, host: domain, afnetworking: pinning) {
            appSide = "No Info.plist exception makes the default trust evaluation pass: under the system's evaluation the app fails whatever it declares. "
                + "The only app-side way is \(Self.keys(keys)) for \(domain) with the app evaluating server trust itself: AFNetworking's "
                + "AFSSLPinningModePublicKey with the server's key pinned (sha256/\(leaf.spkiSHA256)) and allowInvalidCertificates = YES "
                + "(app audit --afnetworking public-key,allow-invalid-certificates). The app then accepts that key whatever the certificate says "
                + "(dates, name, issuer): certificate mode would still refuse the chain, and without the pin anyone on the network path can impersonate the server"
            exception = keys
            infoPlist = Self.plist(domain: domain, exception: keys)
            appTrustEvaluation = "afnetworking public-key,allow-invalid-certificates"
            appPin = "sha256/" + leaf.spkiSHA256
        } else {
            appSide = "no exception makes current Apple clients connect: they never offer what this server needs (\(runtime.detail)); only a server change helps"
            exception = [:]
            infoPlist = nil
        }
        recommendation = "\(currentClients). Fix on the server: \(serverFixes.first ?? "see the matrix"). In the app: \(appSide)"
    }

    /// Apple's deprecation of TLS 1.0 and 1.1, for an exception that allows them.
    static func legacyTLSNote(_ keys: [String: String]) -> String? {
        guard let version = keys["NSExceptionMinimumTLSVersion"], version == "TLSv1.0" || version == "TLSv1.1" else { return nil }
        return "\(version) is deprecated since iOS 15, iPadOS 15 and macOS 12 and Apple will remove it (Apple, 2021); fix the server rather than rely on it"
    }

    /// An app with NSAllowsArbitraryLoads (ATS off for the host, the system's trust evaluation) connects.
    static func arbitraryLoadsConnect(_ base: EffectiveHostPolicy, probes: ATSProbes, diagnostics: ATSDiagnostics) -> Bool {
        var off = base
        off.source = .arbitraryLoads
        off.turnOffATS()
        return AppAudit.outcome(off, probes: probes, diagnostics: diagnostics, host: probes.domain).connects
    }
}
