import TLSAuditCore
import TLSAuditProbe

/// The values options accept, as their help lists them: read from the model's own lists, so that a
/// policy, root store, format or check added there is in every command's `--help`, man page and
/// completion without editing a help string.
enum HelpLists {
    /// "a, b or c".
    static func alternatives(_ names: [String]) -> String {
        guard let last = names.last else { return "" }
        // An Array, not the ArraySlice `dropLast()` gives: `joined` is not specialized here, and its
        // first use on a type makes the runtime look up that type's conformances.
        return names.count == 1 ? last : Array(names.dropLast()).joined(separator: ", ") + " or " + last
    }

    /// Every value of a `CaseIterable` option, "a, b or c".
    static func values<Value: CaseIterable & RawRepresentable>(of _: Value.Type) -> String where Value.RawValue == String {
        alternatives(Value.allCases.map { $0.rawValue })
    }

    /// `--format`'s help for the commands that print text or JSON.
    static let outputFormat = "Output format: \(values(of: OutputFormat.self))."

    /// `--policy`'s list: every registered policy with its summary.
    static let policies = CompliancePolicy.registered.map { "\($0.rawValue) (\($0.summary))" }.joined(separator: ", ")

    /// `--trust-store`'s values: the public root stores by name, or a PEM file.
    static let trustStores = "\(ChainReport.publicStoreNames.joined(separator: ", ")) or a PEM FILE"

    /// Which policies default to which public store (`--trust-store`'s discussion).
    static let trustStoreDefaults: String = {
        let apple = CompliancePolicy.registered.filter { $0.trustsAppleRoots }.map { $0.rawValue }
        let system = CompliancePolicy.registered.filter { !$0.trustsAppleRoots }.map { $0.rawValue }
        return "apple: the snapshot of Apple's root store shipped with tlsaudit (the default of the \(alternatives(apple)) policies); "
            + "system: Debian's /etc/ssl/certs, which is Mozilla's (the default of the \(alternatives(system)) policies); FILE: a PEM bundle."
    }()

    /// The ports `--starttls auto` infers a protocol from, in ascending order (`STARTTLSProtocol.wellKnown(port:)`).
    static let starttlsPorts = STARTTLSProtocol.wellKnownPorts.map { String($0) }.joined(separator: ", ")

    /// `--checks`' list: each opt-in check with what it does and costs.
    static let checks = AddressChecks.shipped.map { "\($0.name.rawValue) (\($0.summary))" }.joined(separator: ", ")
}
