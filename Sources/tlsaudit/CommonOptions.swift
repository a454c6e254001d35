import ArgumentParser
import TLSAuditCore
import TLSAuditProbe

/// Anchors from a PEM file, or the system store; an unreadable file is a usage error (exit 64).
func loadTrustStore(caFile: String?) throws -> TrustStore {
    do {
        return try caFile.map { try TrustStore(caFile: $0) } ?? TrustStore.system()
    } catch {
        throw ValidationError("\(error)")
    }
}

/// One `HOST[:PORT]` target, connected to through `--connect-to ADDRESS[:PORT]` when given.
func parseSingleTarget(_ text: String, connectTo: String?) throws -> ScanTarget {
    do {
        var target = try ScanTarget.parse(text)
        if let connectTo { target.connectTo = [try ConnectAddress.parse(connectTo)] }
        return target
    } catch {
        throw ValidationError(error.description)
    }
}
