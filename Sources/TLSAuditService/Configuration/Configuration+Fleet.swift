import Foundation
import TLSAuditCore
import Yams
import TLSAuditSupport

/// A fleet node's name and vantage point (`node:`): the node's own, never taken from `fleet apply`.
public struct NodeIdentity: Sendable, Hashable {
    /// Unique in the fleet (default: the machine's host name).
    public var name: String
    /// Where the node sees the targets from (default: `default`).
    public var vantage: String

    public init(name: String = NodeIdentity.defaultName, vantage: String = "default") {
        self.name = name
        self.vantage = vantage
    }

    public static var defaultName: String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? ""
        return NodeIdentity.isValidName(host) ? host : "tlsaudit"
    }

    /// Letters, digits, `.`, `_` and `-`, up to 64 characters.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
    }
}

/// How fleet nodes coordinate (`fleet:`).
public struct FleetSettings: Sendable, Hashable {
    /// Seconds a claim on a scan lasts unless renewed.
    public var lease = SettingBounds.lease.defaultValue
    /// Seconds between claims, heartbeats and configuration checks.
    public var poll = SettingBounds.fleetPoll.defaultValue

    public init() {}
}

/// `node:`, `fleet:` and a target's `vantage:`.
extension ConfigurationParser {
    static let nodeKeys = ["name", "vantage"]
    static let fleetKeys = ["lease", "poll"]

    /// `vantage: any` (the default), `all`, a vantage name or a list of them.
    mutating func vantages(_ node: Node) -> FleetVantages? {
        if case .sequence(let sequence) = node {
            guard !sequence.isEmpty else {
                report(node, "vantage: an empty list; name at least one vantage point, or say 'any' or 'all'")
                return nil
            }
            let names = sequence.compactMap { fleetName($0, "vantage") }
            return names.count == sequence.count ? .list(Array(Set(names)).sorted()) : nil
        }
        guard let text = string(node, "any, all, a vantage name or a list of them") else { return nil }
        switch text {
        case "any": return .any
        case "all": return .all
        default: return fleetName(node, "vantage").map { .list([$0]) }
        }
    }

    /// A node or vantage name (`NodeIdentity.isValidName`, and not `any` or `all`, which `vantage:`
    /// reserves); reported as `what` otherwise.
    mutating func fleetName(_ node: Node, _ what: String) -> String? {
        guard let name = string(node, "a \(what)") else { return nil }
        guard NodeIdentity.isValidName(name), !["any", "all"].contains(name) else {
            report(node, "\(what) '\(name)': use letters, digits, '.', '_' and '-' (up to 64; 'any' and 'all' are reserved)")
            return nil
        }
        return name
    }

    /// `node:` with `name` and `vantage`.
    mutating func nodeIdentity(_ node: Node) -> NodeIdentity {
        var identity = NodeIdentity()
        guard let mapping = section(node, "'node' must be a mapping with 'name' and 'vantage'",
                                    allowed: Self.nodeKeys, in: "node") else { return identity }
        if let value = mapping["name"], let name = fleetName(value, "node name") { identity.name = name }
        if let value = mapping["vantage"], let vantage = fleetName(value, "node vantage") { identity.vantage = vantage }
        return identity
    }

    /// `fleet:` with `lease` and `poll`.
    mutating func fleetSettings(_ node: Node) -> FleetSettings {
        var settings = FleetSettings()
        guard let mapping = section(node, "'fleet' must be a mapping with 'lease' and 'poll'",
                                    allowed: Self.fleetKeys, in: "fleet") else { return settings }
        if let value = mapping["lease"], let seconds = duration(value, SettingBounds.lease) { settings.lease = seconds }
        if let value = mapping["poll"], let seconds = duration(value, SettingBounds.fleetPoll) { settings.poll = seconds }
        if settings.lease < settings.poll * 3 {
            report(mapping["lease"] ?? node, "fleet lease (\(DurationText.text(settings.lease))) must be at least three polls (\(DurationText.text(settings.poll * 3))): leases are renewed every poll")
        }
        return settings
    }
}
