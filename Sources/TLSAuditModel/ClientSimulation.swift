/// What `--checks clients` found: for each simulated client, whether it connects and with what
/// (`ClientSimulationResult`), as SSL Labs' client simulation shows it.
public struct ClientSimulationReport: Hashable, Codable, Sendable {
    /// In the table's order (`SimulatedClientRegistry`).
    public var clients: [ClientSimulationResult]
    /// Connections made (one ClientHello each).
    public var connections: Int
    public var durationMs: Int

    public init(clients: [ClientSimulationResult], connections: Int, durationMs: Int) {
        self.clients = clients
        self.connections = connections
        self.durationMs = durationMs
    }

    /// The clients that connect.
    public var connecting: [ClientSimulationResult] { clients.filter(\.connects) }

    /// The oldest iOS client of the table that connects (`ats`, `app audit`), if any was simulated and connects.
    public var oldestConnectingIOS: ClientSimulationResult? {
        let order = SimulatedClientRegistry.iOSClients.map(\.short)
        return clients.filter { $0.connects && order.contains($0.short) }
            .min { order.firstIndex(of: $0.short)! < order.firstIndex(of: $1.short)! }
    }
}

/// One simulated client against one address: what it would negotiate, or why it fails.
public struct ClientSimulationResult: Hashable, Codable, Sendable {
    /// The client's name (`SimulatedClient.name`).
    public var client: String
    /// Its stable identifier (`SimulatedClient.short`).
    public var short: String
    /// The client's ClientHello is modelled from documentation, not recorded.
    public var modelled: Bool
    public var connects: Bool
    /// `TLSv1.3`, `TLSv1.2`, ... (`SSLv3`); absent when the server answered no hello.
    public var protocolVersion: String?
    /// The suite the server chose, IANA name, and OpenSSL's.
    public var suite: String?
    public var opensslSuite: String?
    /// The key exchange group: `x25519`, `secp256r1`, `ffdhe2048`, `DH 1024 bits`; `RSA` for RSA key exchange.
    public var group: String?
    /// The leaf's key as the client saw it: `RSA 2048`, `EC 256 (prime256v1)`.
    public var serverKey: String?
    /// Why it fails, in a sentence (absent when it connects).
    public var failure: String?

    public init(client: SimulatedClient, connects: Bool, protocolVersion: String? = nil, suite: CipherSuiteInfo? = nil,
                group: String? = nil, serverKey: String? = nil, failure: String? = nil) {
        self.client = client.name
        self.short = client.short
        self.modelled = client.modelled
        self.connects = connects
        self.protocolVersion = protocolVersion
        self.suite = suite.map { $0.iana ?? $0.name }
        self.opensslSuite = suite.map { $0.openssl ?? $0.name }
        self.group = group
        self.serverKey = serverKey
        self.failure = failure
    }

    /// `TLSv1.3 TLS_AES_128_GCM_SHA256 x25519`, or `fails: ...`.
    public var summary: String {
        guard connects else { return "fails: " + (failure ?? "no reason given") }
        return [protocolVersion, suite, group].compactMap { $0 }.joined(separator: " ")
    }
}
