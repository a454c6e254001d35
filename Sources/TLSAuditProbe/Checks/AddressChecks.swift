public import TLSAuditModel

/// The opt-in checks tlsaudit ships, in the order they run (a later one may read an earlier one's
/// report): the configuration, the command line's help and the scanner read this list. A new
/// check is one line here.
public enum AddressChecks {
    public static let shipped: [any AddressCheck] = [
        InventoryCheck(),
        HeadersCheck(),
        VulnerabilitiesCheck(),
        ClientsCheck(),
    ]

    /// The shipped check named `name`, nil when there is none.
    public static func named(_ name: String) -> (any AddressCheck)? {
        shipped.first { $0.name.rawValue == name }
    }

    /// The shipped checks' names, in order, for messages ("inventory, headers, ...").
    public static var names: String { shipped.map(\.name.rawValue).joined(separator: ", ") }
}

/// A check that a policy judging the whole configuration (the Mozilla profiles) takes whether or
/// not the target asks for it.
protocol WholeConfigurationCheck: AddressCheck {}

extension WholeConfigurationCheck {
    func isWanted(by target: ScanTarget) -> Bool { target.checks.contains(name) || target.policy.judgesWholeConfiguration }
}

/// The configuration inventory (`ServerInventory`).
struct InventoryCheck: WholeConfigurationCheck {
    var name: OptionalCheck { .inventory }
    var summary: String {
        "renegotiation, compression, TLS_FALLBACK_SCSV, resumption, 0-RTT, stapling, ALPN, groups with post-quantum hybrids, signature algorithms, the certificate without SNI; about 40 handshakes an address"
    }
    func run(_ context: AddressCheckContext, into probed: inout ProbedAddress) {
        probed.inventory = context.enumerator.inventory(context.address, target: context.target)
    }
}

/// HTTP security headers over HTTPS and the redirect from plain HTTP (`HTTPHeadersReport`); not
/// over STARTTLS.
struct HeadersCheck: AddressCheck {
    var name: OptionalCheck { .headers }
    var summary: String { "HSTS on one GET over HTTPS, and the redirect on port 80; 1 handshake and 1 plain connection" }
    func isWanted(by target: ScanTarget) -> Bool { target.checks.contains(name) && target.starttls == nil }
    func run(_ context: AddressCheckContext, into probed: inout ProbedAddress) {
        probed.headers = context.enumerator.headers(context.address, target: context.target)
    }
}

/// Heartbleed, CCS injection, ROBOT and the named verdicts (`VulnerabilityReport`), reading the
/// inventory when it ran.
struct VulnerabilitiesCheck: WholeConfigurationCheck {
    var name: OptionalCheck { .vulnerabilities }
    var summary: String {
        "Heartbleed, CCS injection, ROBOT, and the named verdicts DROWN, POODLE, SWEET32, FREAK, LOGJAM, RC4, BEAST, LUCKY13, BREACH, Ticketbleed, client-initiated renegotiation, ClientHello tolerance; 22 connections, 27 when ROBOT finds an oracle"
    }
    func run(_ context: AddressCheckContext, into probed: inout ProbedAddress) {
        probed.vulnerabilities = context.enumerator.vulnerabilities(context.address, target: context.target, inventory: probed.inventory,
                                                                    leafSPKI: probed.presented.first?.spkiSHA256)
    }
}

/// Client simulation (`ClientSimulationReport`): real clients' recorded ClientHellos replayed.
struct ClientsCheck: AddressCheck {
    var name: OptionalCheck { .clients }
    var summary: String {
        "client simulation: \(SimulatedClientRegistry.all.count) real clients' recorded ClientHellos replayed, whether each connects and with what protocol, suite and group; \(SimulatedClientRegistry.all.count) connections, no handshake completed"
    }
    func run(_ context: AddressCheckContext, into probed: inout ProbedAddress) {
        probed.clients = context.enumerator.clientSimulation(context.address, target: context.target, leaf: probed.presented.first)
    }
}
