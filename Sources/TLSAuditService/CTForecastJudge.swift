import Foundation
import Logging
import TLSAuditCore
import TLSAuditProbe
import TLSAuditStore
import TLSAuditSupport

/// What the CT follower (`serve`) and `ct backfill` make of a logged certificate for a pinned or
/// watched name: `pin.forecast-break` when a name's pins refuse it, `ct.unexpected-issuer` when a
/// CA a `ct: watch` entry does not allow issued it, and a sighting for every judgement. Alerts and
/// sightings are keyed by the certificate, so that judging an entry again (a restart, a backfill
/// over what serve read, a precertificate and its certificate) adds nothing.
struct CTForecastJudge: Sendable {
    /// The store the chains are built against (the scans' in force).
    let trustStore: @Sendable () -> TrustStore
    /// Stores an alert; false when it was stored already.
    let raiseAlert: @Sendable (Alert) throws -> Bool
    /// Records a sighting (a repeat of its id is a no-op).
    let recordSighting: @Sendable (CTSighting) throws -> Void
    let logger: Logger

    /// The pin forecast and the issuer check of one logged certificate, for each pinned name and
    /// watched domain it reaches: an alert when one refuses it, and a sighting for each (the status
    /// page's and `ct status`'s list); false when either could not be stored (the entries are then
    /// read again: both are keyed so that a repeat is a no-op).
    func judge(_ entry: ParsedLogEntry, index: UInt64, log: CTLogList.Log, names: [PinForecast.PinnedName],
                       watched: [WatchedDomain]) -> Bool {
        let chain: LoggedChain
        do {
            chain = try LoggedChain(entry, store: trustStore(), at: Date())
        } catch {
            logger.warning("CT follower: entry \(index) of \(log.description) names a watched name but cannot be judged: \(error)")
            return true
        }
        // A certificate already expired is never deployed again.
        guard let leaf = chain.presented.first, leaf.notAfter > Date() else { return true }
        let changes = ["serial": leaf.serial, "issuer": leaf.issuer, "spki": "sha256/\(leaf.spkiSHA256)",
                       "not_before": Timestamp.format(leaf.notBefore), "log": log.description, "index": "\(index)",
                       "precertificate": entry.precertificate ? "true" : "false"]
        // The pin verdict and the issuance verdict of one host are two rows (`role`), never one in place of the other.
        func sighting(host: String, target: String, judgedBy: String, verdict: CTSighting.Verdict) -> CTSighting {
            let role = verdict == .pinBreak || verdict == .covered ? "pins" : "issuance"
            return CTSighting(id: Digest.sha256Hex(Array("\(leaf.serial)|\(leaf.issuer)|\(host)|\(judgedBy)|\(role)".utf8)).prefix(32).description,
                       seenAt: Date(), log: log.description, index: index, precertificate: entry.precertificate, host: host, target: target,
                       judgedBy: judgedBy, verdict: verdict, serial: leaf.serial, issuer: leaf.issuer, spki: leaf.spkiSHA256,
                       notBefore: leaf.notBefore, notAfter: leaf.notAfter)
        }
        var stored = true
        // The CAs of the path whose signatures were checked: the chain a log serves beside an entry is not in its tree.
        let issuers = chain.building.path.dropFirst().map(\.certificate)
        let pinnedHosts = Set(names.compactMap { $0.reaches(chain.names) })
        for watch in watched {
            guard let host = watch.reaches(chain.names) else { continue }
            let allowed = watch.allows(issuers)
            // A pinned host's certificate is listed with its pin verdict; "seen" would say less of it.
            if !(allowed && pinnedHosts.contains(host)) {
                stored = record(sighting(host: host, target: "ct-watch:\(watch.domain)", judgedBy: watch.watchedBy,
                                         verdict: allowed ? .seen : .unexpectedIssuer)) && stored
            }
            guard !allowed else { continue }
            let allowedNames = watch.issuers.map(\.description).joined(separator: ", ")
            let alert = Alert(
                id: "ct.unexpected-issuer-" + Digest.sha256Hex(Array("\(leaf.serial)|\(leaf.issuer)|\(watch.domain)".utf8)).prefix(32),
                kind: .ctUnexpectedIssuer, severity: .error, target: "ct-watch:\(watch.domain)", host: host, port: 443,
                address: "ct:\(log.description)#\(index)", createdAt: Date(),
                summary: "a certificate for \(host) logged in \(log.description) was issued by \(leaf.issuer), which is not among the CAs "
                    + "allowed for \(watch.domain) (\(allowedNames)): revoke it if nobody asked for it, or add its CA to the watch entry "
                    + "(and to the domain's CAA record)",
                changes: changes.merging(["domain": watch.domain, "allowed": allowedNames]) { $1 })
            stored = raise(alert, about: host) && stored
        }
        for name in names {
            guard let host = name.reaches(chain.names) else { continue }
            let evaluation = PinForecast.judge(name, host: host, presented: chain.presented, building: chain.building, now: Date(),
                                               buildWithPinnedAnchors: chain.buildWithPinnedAnchors)
            let refused = evaluation.state == .mismatch
            stored = record(sighting(host: host, target: name.target, judgedBy: name.pinnedBy, verdict: refused ? .pinBreak : .covered)) && stored
            guard refused else {
                logger.info("CT follower: a certificate for \(host) (\(log.description) #\(index)) is covered by the pins of \(name.pinnedBy)")
                continue
            }
            let identity = Digest.sha256Hex(Array("\(leaf.serial)|\(leaf.issuer)|\(leaf.spkiSHA256)|\(name.target)|\(name.pinnedBy)".utf8))
            let alert = Alert(
                id: "pin.forecast-break-" + identity.prefix(32), kind: .pinForecastBreak, severity: .critical, target: name.target,
                host: host, port: name.port, address: "ct:\(log.description)#\(index)", createdAt: Date(),
                summary: "a certificate for \(host) logged in \(log.description) would be refused by the pins of \(name.pinnedBy) "
                    + "(\(evaluation.message)); deployed, pinned clients fail (NSURLErrorCancelled -999 under AFNetworking, "
                    + "NSURLErrorServerCertificateUntrusted -1202 under NSPinnedDomains): add its key as a backup pin before it is deployed, or reissue it with a pinned key",
                changes: changes.merging(["pinned_by": name.pinnedBy, "afnetworking_error": "-999", "ns_pinned_domains_error": "-1202"]) { $1 })
            stored = raise(alert, about: host) && stored
        }
        return stored
    }

    /// Records a sighting (a repeat of its id is a no-op); false when it could not be stored.
    private func record(_ sighting: CTSighting) -> Bool {
        do {
            try recordSighting(sighting)
            return true
        } catch {
            logger.error("CT follower: cannot record the certificate for \(sighting.host) (\(sighting.log) #\(sighting.index)): \(error)")
            return false
        }
    }

    /// Stores `alert` (a repeat of its id is a no-op); false when it could not be stored.
    private func raise(_ alert: Alert, about host: String) -> Bool {
        do {
            if try raiseAlert(alert) { logger.notice("CT follower: \(alert.kind.rawValue) for \(host): \(alert.address)") }
            return true
        } catch {
            logger.error("CT follower: cannot store the \(alert.kind.rawValue) alert for \(host): \(error)")
            return false
        }
    }
}
