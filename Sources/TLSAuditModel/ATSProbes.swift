public import Foundation

/// What the probe saw under one ATS configuration (`nscurl --ats-diagnostics` style): the handshake
/// or its failure, and the chain with its path built. `ATSDiagnostics.judge` draws the conclusion.
public struct ATSConfigurationProbe: Sendable {
    public var name: String
    public var exception: [String: String]
    /// Forward secrecy is required, and with it the ATS rule on ECC keys under 256 bits (the
    /// exceptions that lift one lift the other; RSA >= 2048 is a trust rule and stays).
    public var forwardSecrecy: Bool
    /// The configuration relies on the system's trust evaluation (not the app's own).
    public var judgesTrust: Bool
    /// Shown for diagnosis only (not an Apple client's configuration).
    public var diagnostic: Bool
    public var handshake: HandshakeObservation?
    public var failure: ProbeFailure?
    /// The chain received and its path (built against the target's anchors); nil when none came.
    public var chain: ProbedChainPath?
    /// Every SCT for the leaf this handshake showed (embedded, TLS extension, stapled OCSP), its
    /// signature checked against `ATSProbes.ctLogs`: what Apple's CT policy is judged on.
    public var scts: [SignedCertificateTimestamp] = []
    /// Builds this chain's path again with the given certificates as its only anchors (partial
    /// chains allowed), for AFNetworking's certificate mode (`ProbedAddress.buildWithPinnedAnchors`);
    /// nil when no chain came or nothing can build one.
    public var buildWithPinnedAnchors: (@Sendable ([Data]) -> PathBuildingResult?)?

    public init(name: String, exception: [String: String], forwardSecrecy: Bool, judgesTrust: Bool, diagnostic: Bool,
                handshake: HandshakeObservation?, failure: ProbeFailure?, chain: ProbedChainPath?) {
        self.name = name
        self.exception = exception
        self.forwardSecrecy = forwardSecrecy
        self.judgesTrust = judgesTrust
        self.diagnostic = diagnostic
        self.handshake = handshake
        self.failure = failure
        self.chain = chain
    }
}
/// A chain as received and the path built from it.
public struct ProbedChainPath: Sendable, Hashable {
    public var presented: [CertificateSummary]
    public var building: PathBuildingResult
    /// What the stapled OCSP response says of the leaf, nothing fetched (trustd reads a staple
    /// always, and fetches nothing for an ordinary certificate); nil when none was stapled.
    public var stapledRevocation: RevocationReport?

    public init(presented: [CertificateSummary], building: PathBuildingResult) {
        self.presented = presented
        self.building = building
    }
}
/// Everything `tlsaudit ats` probed at one address.
public struct ATSProbes: Sendable {
    public var target: String
    public var address: String
    public var domain: String
    public var time: Date
    public var privateAnchors: Bool
    /// The store chains were judged against (`apple`, `system`, `ca-file:PATH`...).
    public var trustStore = ""
    /// In the order probed; the first is the default configuration, the last any OpenSSL client.
    /// A caller that judges one app's rules may hold only the configuration that stands for them.
    public var configurations: [ATSConfigurationProbe]
    /// The log list the SCTs were checked against (`--ct-log-list`, else tlsaudit's snapshot).
    public var ctLogs: CTLogList = .shipped
    /// The date-bounded distrust in force (nil: the shipped table, Apple's rows).
    public var distrust: DistrustSetting?
    /// The iOS clients of the client table, simulated from their ClientHellos (`SimulatedClientRegistry.iOSClients`);
    /// nil when the caller probed only some configurations.
    public var iOSClients: ClientSimulationReport?

    public init(target: String, address: String, domain: String, time: Date, privateAnchors: Bool,
                configurations: [ATSConfigurationProbe]) {
        self.target = target
        self.address = address
        self.domain = domain
        self.time = time
        self.privateAnchors = privateAnchors
        self.configurations = configurations
    }
}

extension ATSProbes {
    /// Why no configuration reached a TLS server, when none did: nothing listens or answers in time,
    /// or what answers is not TLS (`tlsaudit ats` exits 2 then). Nil when some probe completed a
    /// handshake or the server answered in TLS (an alert: it speaks TLS, only not what was offered).
    /// The failure given is the last probe's, the one that offers the most (any OpenSSL client).
    public var noTLSServer: ProbeFailure? {
        guard configurations.allSatisfy({ $0.handshake == nil && $0.failure?.category.meansNoTLSServer == true }) else { return nil }
        return configurations.last?.failure
    }
}

extension ProbeFailureCategory {
    /// The failure says that no TLS server was reached at all (no connection, no answer, an answer
    /// that is not TLS, a STARTTLS dialogue that did not lead to TLS), not that a TLS server refused.
    public var meansNoTLSServer: Bool {
        switch self {
        case .dnsFailure, .connectionRefused, .connectTimeout, .networkUnreachable, .handshakeTimeout, .notTLS,
             .closedDuringHandshake, .starttlsNotOffered, .starttlsRefused, .starttlsUnexpectedReply, .starttlsTimeout:
            true
        case .tlsAlert, .clientCertificateRequired, .clientCertificateRejected, .handshakeFailed, .internalError:
            false
        }
    }
}

/// The names of the configurations `tlsaudit ats` probes (`Enumerator.atsProbes`), one handshake each:
/// what `ATSConfigurationProbe.name` holds, and what `EffectiveHostPolicy.atsProbe` chooses from.
public enum ATSConfigurationName {
    public static let defaultATS = "default"
    public static let documentedList = "documented-list"
    public static let tls13 = "TLSv1.3"
    public static let tls12 = "TLSv1.2"
    public static let noForwardSecrecy = "no-forward-secrecy"
    public static let tls11 = "TLSv1.1"
    public static let tls11NoForwardSecrecy = "TLSv1.1+no-forward-secrecy"
    public static let tls10 = "TLSv1.0"
    public static let tls10NoForwardSecrecy = "TLSv1.0+no-forward-secrecy"
    public static let arbitraryLoads = "arbitrary-loads"
    public static let insecureHTTPLoads = "insecure-http-loads"
    public static let insecureHTTPLoadsNoForwardSecrecy = "insecure-http-loads+no-forward-secrecy"
    public static let insecureHTTPLoadsTLS10 = "insecure-http-loads+TLSv1.0"
    public static let insecureHTTPLoadsTLS10NoForwardSecrecy = "insecure-http-loads+TLSv1.0+no-forward-secrecy"
    public static let arbitraryLoadsOwnTrustEvaluation = "arbitrary-loads+own-trust-evaluation"
    public static let anyOpenSSLClient = "any-openssl-client"
}
