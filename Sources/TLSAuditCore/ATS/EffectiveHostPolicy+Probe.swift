import Foundation

/// Which of `tlsaudit ats`'s configurations (`ATSConfigurationName`) stands for an app's rules for
/// one host, and what the caller must still check on that probe's handshake.
public struct ATSProbeSelection: Sendable, Hashable {
    /// The configuration's name, as `ATSConfigurationProbe.name` holds it.
    public var configuration: String
    /// When set, the probe offers older versions than the app accepts (no probe offers exactly
    /// TLS 1.1 and up with insecure HTTP loads, or TLS 1.3 only with them): the handshake counts
    /// for the app only when it negotiated this version or newer.
    public var minimumNegotiatedVersion: TLSVersion?
    /// Why this configuration, in a sentence.
    public var note: String
}

extension EffectiveHostPolicy {
    /// The probe that represents this app's rules for this host (docs/apple-rules.md section 6):
    /// ATS off is `arbitrary-loads`; insecure HTTP loads (the app may evaluate trust itself) are
    /// the `insecure-http-loads` family; otherwise the TLS version and forward-secrecy exceptions.
    /// CT and pins are not a question of what the client offers: judge them on the chosen probe's chain.
    public var atsProbe: ATSProbeSelection { atsProbe(appEvaluatesTrust: false) }

    /// The probe that represents this app's rules for this host when the app answers the server-trust
    /// challenge itself (AFNetworking's AFSecurityPolicy, `app audit --afnetworking`): where ATS is off
    /// the system's evaluation no longer stands in the way, so `arbitrary-loads+own-trust-evaluation`;
    /// elsewhere the same as `atsProbe` (insecure HTTP loads already are the own-trust family, and
    /// otherwise ATS's default evaluation must pass before the app's counts).
    public func atsProbe(appEvaluatesTrust: Bool) -> ATSProbeSelection {
        let fs = requiresForwardSecrecy
        if arbitraryLoads, appEvaluatesTrust {
            return ATSProbeSelection(configuration: ATSConfigurationName.arbitraryLoadsOwnTrustEvaluation, minimumNegotiatedVersion: nil,
                                     note: "ATS is off for this host and the app evaluates server trust itself")
        }
        if arbitraryLoads {
            return ATSProbeSelection(configuration: ATSConfigurationName.arbitraryLoads, minimumNegotiatedVersion: nil,
                                     note: "ATS is off for this host: the client offers TLS 1.0 to 1.3 with and without forward secrecy")
        }
        if allowsInsecureHTTPLoads {
            switch minimumTLSVersion {
            case .tls1_2, .tls1_3:
                let name = fs ? ATSConfigurationName.insecureHTTPLoads : ATSConfigurationName.insecureHTTPLoadsNoForwardSecrecy
                return ATSProbeSelection(configuration: name, minimumNegotiatedVersion: minimumTLSVersion == .tls1_3 ? .tls1_3 : nil,
                                         note: minimumTLSVersion == .tls1_3
                                            ? "no insecure-HTTP probe offers TLS 1.3 only: the handshake must have negotiated TLS 1.3"
                                            : "insecure HTTP loads with the TLS 1.2 minimum")
            case .ssl3, .tls1_0, .tls1_1:
                let name = fs ? ATSConfigurationName.insecureHTTPLoadsTLS10 : ATSConfigurationName.insecureHTTPLoadsTLS10NoForwardSecrecy
                return ATSProbeSelection(configuration: name, minimumNegotiatedVersion: minimumTLSVersion == .tls1_1 ? .tls1_1 : nil,
                                         note: minimumTLSVersion == .tls1_1
                                            ? "no insecure-HTTP probe starts at TLS 1.1: the TLS 1.0 one, and the handshake must have negotiated TLS 1.1 or newer"
                                            : "insecure HTTP loads with the TLS 1.0 minimum")
            }
        }
        switch minimumTLSVersion {
        case .tls1_3:
            return ATSProbeSelection(configuration: ATSConfigurationName.tls13, minimumNegotiatedVersion: nil,
                                     note: "TLS 1.3 only (every TLS 1.3 suite is forward secret)")
        case .tls1_2:
            return ATSProbeSelection(configuration: fs ? ATSConfigurationName.defaultATS : ATSConfigurationName.noForwardSecrecy,
                                     minimumNegotiatedVersion: nil,
                                     note: fs ? "default ATS requirements" : "TLS 1.2 minimum without forward secrecy")
        case .tls1_1:
            return ATSProbeSelection(configuration: fs ? ATSConfigurationName.tls11 : ATSConfigurationName.tls11NoForwardSecrecy,
                                     minimumNegotiatedVersion: nil, note: "TLS 1.1 minimum" + (fs ? "" : " without forward secrecy"))
        case .ssl3, .tls1_0:
            return ATSProbeSelection(configuration: fs ? ATSConfigurationName.tls10 : ATSConfigurationName.tls10NoForwardSecrecy,
                                     minimumNegotiatedVersion: nil, note: "TLS 1.0 minimum" + (fs ? "" : " without forward secrecy"))
        }
    }
}
