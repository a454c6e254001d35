public import Foundation
import TLSAuditModel
import TLSAuditSupport

/// Revocation evidence given on the command line (`verify --crl`, `--ocsp-response`): with any
/// of it, nothing is fetched.
public struct OfflineRevocationEvidence: Sendable {
    let crls: [RevocationList]
    /// DER OCSP responses with the file each came from.
    let ocspResponses: [(origin: String, der: [UInt8])]

    /// No evidence: with it, a check reads only what the handshake stapled and fetches nothing.
    static let none = OfflineRevocationEvidence(crls: [], ocspResponses: [])

    private init(crls: [RevocationList], ocspResponses: [(origin: String, der: [UInt8])]) {
        self.crls = crls
        self.ocspResponses = ocspResponses
    }

    /// Reads CRL files (DER or PEM) and OCSP response files (DER), within the input limits.
    public init(crlFiles: [String], ocspResponseFiles: [String]) throws {
        func read(_ path: String, limit: Int, what: String) throws -> [UInt8] {
            do { return try InputLimits.read(path, limit: limit, what: what) } catch { throw OpenSSLFailure(error.description) }
        }
        var crls: [RevocationList] = []
        for path in crlFiles {
            crls.append(try RevocationList(try read(path, limit: RevocationChecker.Limits.crlBytes, what: "CRL file"), origin: path))
        }
        var responses: [(origin: String, der: [UInt8])] = []
        for path in ocspResponseFiles {
            responses.append((path, try read(path, limit: RevocationChecker.Limits.ocspResponseBytes, what: "OCSP response file")))
        }
        self.crls = crls
        ocspResponses = responses
    }

    public var isEmpty: Bool { crls.isEmpty && ocspResponses.isEmpty }
}

/// Where revocation answers outlive the process (the service's database): bytes as fetched, by
/// the cache's key, until they expire. Failures to read or write are the store's to report.
public protocol RevocationAnswerStore: Sendable {
    func revocationAnswer(for key: String, at time: Date) -> (body: [UInt8], expires: Date)?
    func saveRevocationAnswer(_ body: [UInt8], for key: String, expires: Date)
}

/// Checks the revocation status of every certificate of a built path but the anchor, the way
/// clients do: for each, the stapled OCSP response (leaf), else the OCSP responders its AIA
/// names, else the CRLs its distribution points name; every answer verified before it counts.
/// Fetches share `RevocationCache.shared`, so a fleet whose endpoints share a CA asks once.
struct RevocationChecker {
    enum Limits {
        static let ocspResponseBytes = 65_536
        static let crlBytes = 16 << 20
        /// URLs tried per certificate and kind: a certificate naming dozens is not asked dozens of times.
        static let urlsPerCertificate = 3
    }

    var mode: RevocationMode
    /// Evidence given offline; when present nothing is fetched.
    var offline: OfflineRevocationEvidence?
    var cache: RevocationCache = .shared
    /// Answers kept across restarts (the service's database), consulted before fetching.
    var answers: (any RevocationAnswerStore)?

    /// The report for `path` (leaf first, as built; `presented` are the certificates as sent,
    /// reused for the path's presented members), judged at `time`, every fetch done by `deadline`.
    /// `stapled` is the stapled OCSP response; `nil` with `handshake` false means there was no handshake.
    func check(path elements: [PathElement], presented: [X509Certificate], stapled: [UInt8]?, handshake: Bool,
               time: Date, deadline: Deadline) -> RevocationReport? {
        guard mode != .off else { return nil }
        func parsed(_ element: PathElement) -> X509Certificate? {
            if let index = element.presentedIndex, presented.indices.contains(index) { return presented[index] }
            return try? X509Certificate(der: Array(element.certificate.der))
        }
        // The anchor's own sources are never asked (it is not checked): not parsed for them.
        let sources = elements.prefix(max(1, elements.count - 1)).map { element in RevocationSources.of(element.certificate) { parsed(element) } }
        let mustStaple = sources.first?.mustStaple ?? presented.first?.requiresStapling ?? false
        var report = RevocationReport(mode: mode, checks: [], mustStaple: mustStaple, stapled: handshake ? stapled != nil : nil)
        guard elements.count > 1 else { return report }
        // Most private chains name no source at all: said without touching OpenSSL.
        let checked = 0..<(elements.count - 1)
        if stapled == nil, offline == nil, checked.allSatisfy({ sources[$0].ocsp.isEmpty && sources[$0].crl.isEmpty }) {
            report.checks = checked.map { RevocationCheck(depth: $0, status: .unknown, source: .none, detail: RevocationReport.noSource) }
            return report
        }
        let path = elements.compactMap(parsed)
        guard path.count == elements.count else { return report }
        let anchor = path[path.count - 1]
        var checks: [RevocationCheck?] = Array(repeating: nil, count: path.count - 1)
        var problems: [[String]] = Array(repeating: [], count: path.count - 1)
        var crlURLs: [[String]] = Array(repeating: [], count: path.count - 1)

        // OCSP first: stapled, given, then fetched.
        for depth in checks.indices {
            let certificate = path[depth], issuer = path[depth + 1]
            func evaluate(_ der: [UInt8]) -> OCSPAnswer {
                verifiedAnswer(der, certificate: certificate, issuer: issuer, path: path, anchor: anchor,
                               identities: [depth, depth + 1, path.count - 1].map { elements[$0].certificate.sha256Fingerprint })
                    .judged(at: time)
            }
            if depth == 0, let stapled {
                let answer = evaluate(stapled)
                if answer.isDefinitive {
                    checks[depth] = Self.check(depth, answer, source: .stapledOCSP, url: nil)
                    continue
                }
                problems[depth].append("the stapled OCSP response: \(answer.detail ?? "no answer")")
            }
            if let offline {
                for response in offline.ocspResponses {
                    let answer = evaluate(response.der)
                    if answer.isDefinitive {
                        checks[depth] = Self.check(depth, answer, source: .ocsp, url: response.origin)
                        break
                    }
                    if answer.detail != "the response does not cover the certificate" {
                        problems[depth].append("\(response.origin): \(answer.detail ?? "no answer")")
                    }
                }
                continue
            }
            for url in sources[depth].ocsp where checks[depth] == nil {
                guard let request = OCSPExchange.request(for: certificate, issuer: issuer) else { continue }
                switch fetchOCSP(url, request: request, deadline: deadline) {
                case .success(let der):
                    let answer = evaluate(der)
                    if answer.isDefinitive {
                        checks[depth] = Self.check(depth, answer, source: .ocsp, url: url)
                    } else {
                        problems[depth].append("the OCSP responder \(url): \(answer.detail ?? "no answer")")
                    }
                case .failure(let failure):
                    problems[depth].append("the OCSP responder \(url): \(failure.description)")
                }
            }
            if checks[depth] == nil { crlURLs[depth] = sources[depth].crl }
        }

        // CRLs for what OCSP did not settle, all judged in one pass of RFC 5280 processing.
        var crls = offline?.crls ?? []
        var fetched = Set<String>()
        for depth in checks.indices where checks[depth] == nil {
            for url in crlURLs[depth] where fetched.insert(url).inserted {
                switch fetchCRL(url, deadline: deadline) {
                case .success(let list): crls.append(list)
                case .failure(let failure): problems[depth].append("the CRL \(url): \(failure.description)")
                }
            }
        }
        let needCRL = checks.indices.filter { checks[$0] == nil && (offline != nil || !crlURLs[$0].isEmpty) }
        // A CRL RFC 5280 forbids relying on answers nothing; said for the certificates it would cover.
        for list in crls {
            guard let problem = list.profileProblem else { continue }
            for depth in needCRL where crlURLs[depth].contains(list.origin) || elements[depth + 1].certificate.subject == list.issuerName {
                problems[depth].append("the CRL \(list.origin): \(problem)")
            }
        }
        crls.removeAll { $0.profileProblem != nil }
        if !needCRL.isEmpty, !crls.isEmpty {
            let outcomes = CRLValidation.check(path: path, others: presented, crls: crls, time: time)
            for depth in needCRL {
                let issuerName = elements[depth + 1].certificate.subject
                let list = crls.first { $0.issuerName == issuerName } ?? crls[0]
                switch outcomes[depth] {
                case .good?:
                    checks[depth] = RevocationCheck(depth: depth, status: .good, source: .crl, url: list.origin,
                                                    thisUpdate: list.thisUpdate, nextUpdate: list.nextUpdate)
                case .revoked(let reason, let date)?:
                    checks[depth] = RevocationCheck(depth: depth, status: .revoked, source: .crl, url: list.origin, reason: reason,
                                                    revokedAt: date, thisUpdate: list.thisUpdate, nextUpdate: list.nextUpdate)
                case .unavailable(let reason)?:
                    problems[depth].append("no valid CRL covers it (\(reason))")
                case nil:
                    break
                }
            }
        } else if offline != nil {
            for depth in needCRL where problems[depth].isEmpty { problems[depth].append("no CRL or OCSP response given covers it") }
        }
        report.checks = checks.indices.map { depth in
            checks[depth] ?? RevocationCheck(depth: depth, status: .unknown, source: .none,
                                             detail: problems[depth].isEmpty ? RevocationReport.noSource
                                                 : RecordBudget.list(problems[depth]))
        }
        return report
    }

    /// `OCSPExchange.verify`, once per response, certificate, issuer and anchor: a fleet sharing
    /// a certificate (or a stapled response) verifies its signature once, not once per endpoint.
    /// `identities`: the certificate's, the issuer's and the anchor's fingerprints.
    private func verifiedAnswer(_ der: [UInt8], certificate: X509Certificate, issuer: X509Certificate, path: [X509Certificate],
                                anchor: X509Certificate, identities: [String]) -> OCSPAnswer {
        let key = "verified \(Digest.sha256(der).hex) \(identities.joined(separator: " "))"
        let answer = cache.value(key, deadline: Deadline(after: 1)) { () -> (Result<OCSPAnswer, Never>, Date?) in
            let answer = OCSPExchange.verify(der, certificate: certificate, issuer: issuer, path: path, anchor: anchor)
            return (.success(answer), RevocationCache.expiry(nextUpdate: answer.nextUpdate))
        }
        if case .success(let verified)? = answer { return verified }
        return OCSPExchange.verify(der, certificate: certificate, issuer: issuer, path: path, anchor: anchor)
    }

    private static func check(_ depth: Int, _ answer: OCSPAnswer, source: RevocationCheck.Source, url: String?) -> RevocationCheck {
        RevocationCheck(depth: depth, status: answer.status, source: source, url: url, reason: answer.reason,
                        revokedAt: answer.revokedAt, thisUpdate: answer.thisUpdate, nextUpdate: answer.nextUpdate)
    }

    /// A DER OCSP response from `url` for `request` (POST, RFC 6960 appendix A), through the cache.
    private func fetchOCSP(_ url: String, request: [UInt8], deadline: Deadline) -> Result<[UInt8], HTTPRequestFailure> {
        cache.fetch("ocsp \(url) \(Digest.sha256(request).hex)", url: url, deadline: deadline, answers: answers,
              request: ("POST", request, [("Content-Type", "application/ocsp-request"), ("Accept", "application/ocsp-response")]),
              maximumBody: Limits.ocspResponseBytes) { body in (body, OCSPExchange.summary(of: body).nextUpdate) }
    }

    /// The CRL at `url` (http or https; LDAP is not fetched), parsed, through the cache.
    private func fetchCRL(_ url: String, deadline: Deadline) -> Result<RevocationList, HTTPRequestFailure> {
        guard HTTPClient.fetches(url) else {
            return .failure(HTTPRequestFailure("only http and https distribution points are fetched"))
        }
        return cache.fetch("crl \(url)", url: url, deadline: deadline, answers: answers, request: ("GET", [], []),
                           maximumBody: Limits.crlBytes) { body in
            let list = try RevocationList(body, origin: url)
            // RFC 5280 5.2.3: CRL numbers only grow. A lower one than seen before is an old CRL replayed.
            if let number = list.number, let higher = cache.higherCRLNumber(than: number, from: url) {
                throw OpenSSLFailure("its CRL number \(number) is lower than \(higher), seen before from the same URL: an old CRL replayed")
            }
            return (list, list.nextUpdate)
        }
    }
}

/// Where a certificate says its revocation status can be had, read once per distinct certificate
/// (by fingerprint; at most 4,096 kept): a fleet's scans do not parse the same extensions again.
struct RevocationSources: Sendable {
    var ocsp: [String]
    var crl: [String]
    var mustStaple: Bool

    private static let known = SleepingLock<[String: RevocationSources]>([:])

    static func of(_ summary: CertificateSummary, certificate: () -> X509Certificate?) -> RevocationSources {
        if let cached = known.withLock({ $0[summary.sha256Fingerprint] }) { return cached }
        guard let certificate = certificate() else { return RevocationSources(ocsp: [], crl: [], mustStaple: false) }
        let sources = RevocationSources(ocsp: Array(certificate.ocspURLs.prefix(RevocationChecker.Limits.urlsPerCertificate)),
                                        crl: Array(certificate.crlURLs.prefix(RevocationChecker.Limits.urlsPerCertificate)),
                                        mustStaple: certificate.requiresStapling)
        known.withLock { known in
            if known.count >= 4_096 { known.removeAll(keepingCapacity: true) }
            known[summary.sha256Fingerprint] = sources
        }
        return sources
    }
}

/// Revocation answers by what was asked (OCSP: responder and CertID; CRL: URL; a response's
/// verification: the response, certificate, issuer and anchor), kept until their
/// nextUpdate (at most a day; an hour without one; failures five minutes, so that a dead or
/// tarpit responder costs a fleet one timeout, not one per endpoint). One fetch per key at a time:
/// concurrent scans asking the same wait for it. At most 512 entries and 64 MiB.
final class RevocationCache: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`.
    static let shared = RevocationCache()

    private struct Entry {
        var value: any Sendable
        var expires: Date
        var bytes: Int
    }

    private let condition = NSCondition()
    private var entries: [String: Entry] = [:]
    private var inFlight: Set<String> = []
    private var totalBytes = 0

    /// The cached value for `key`, else the one `produce` makes (its result and the answer's
    /// nextUpdate), or nil when another caller's fetch of the same key outlasts `deadline`.
    func value<Value: Sendable, Failure: Error>(_ key: String, deadline: Deadline,
                                                produce: () -> (Result<Value, Failure>, Date?)) -> Result<Value, Failure>? {
        condition.lock()
        while true {
            if let entry = entries[key], entry.expires > Date(), let value = entry.value as? Result<Value, Failure> {
                condition.unlock()
                return value
            }
            if !inFlight.contains(key) { break }
            guard condition.wait(until: Date().addingTimeInterval(deadline.remainingSeconds)), !deadline.hasPassed else {
                condition.unlock()
                return nil
            }
        }
        inFlight.insert(key)
        condition.unlock()

        let (result, nextUpdate) = produce()
        let now = Date()
        let expires: Date
        var bytes = 64
        switch result {
        case .success(let value):
            expires = nextUpdate ?? Self.expiry(nextUpdate: nil)
            if let list = value as? RevocationList { bytes = list.byteCount }
            if let der = value as? [UInt8] { bytes = der.count }
        case .failure:
            expires = now.addingTimeInterval(300)
        }
        condition.lock()
        inFlight.remove(key)
        if let old = entries.removeValue(forKey: key) { totalBytes -= old.bytes }
        if expires > now {
            while entries.count >= 512 || totalBytes + bytes > 64 << 20, let oldest = entries.min(by: { $0.value.expires < $1.value.expires }) {
                totalBytes -= oldest.value.bytes
                entries.removeValue(forKey: oldest.key)
            }
            entries[key] = Entry(value: result, expires: expires, bytes: bytes)
            totalBytes += bytes
        }
        condition.broadcast()
        condition.unlock()
        return result
    }

    /// The highest CRL number seen from each URL (hex), at most 4,096 URLs.
    private var crlNumbers: [String: String] = [:]

    /// Records `number` for `url` and returns the higher one seen before from it, if any.
    func higherCRLNumber(than number: String, from url: String) -> String? {
        func value(_ hex: String) -> (Int, String) {
            let digits = String(hex.drop { $0 == "0" })
            return (digits.count, digits)
        }
        condition.lock()
        defer { condition.unlock() }
        if let seen = crlNumbers[url], value(seen) > value(number) { return seen }
        if crlNumbers.count >= 4_096 { crlNumbers.removeAll() }
        crlNumbers[url] = number
        return nil
    }

    /// How long an answer is kept: until its nextUpdate, at most a day, an hour without one.
    static func expiry(nextUpdate: Date?) -> Date {
        let now = Date()
        return min(nextUpdate ?? now.addingTimeInterval(3_600), now.addingTimeInterval(86_400))
    }
}

extension RevocationCache {
    /// An answer by `key`: from the cache, else from `answers` (the database), else fetched over
    /// HTTP (and kept in both); `parse` turns the bytes into the value and its nextUpdate.
    func fetch<Value: Sendable>(_ key: String, url: String, deadline: Deadline, answers: (any RevocationAnswerStore)?,
                                        request: (method: String, body: [UInt8], headers: [(name: String, value: String)]),
                                        maximumBody: Int,
                                        parse: @escaping ([UInt8]) throws -> (Value, Date?)) -> Result<Value, HTTPRequestFailure> {
        value(key, deadline: deadline) { () -> (Result<Value, HTTPRequestFailure>, Date?) in
            if let stored = answers?.revocationAnswer(for: key, at: Date()), let (value, _) = try? parse(stored.body) {
                return (.success(value), stored.expires)
            }
            guard let target = URL(string: url) else { return (.failure(HTTPRequestFailure("not a URL")), nil) }
            do {
                let (response, body) = try HTTPClient.fetch(request.method, target, body: request.body, headers: request.headers,
                                                            timeout: deadline.remainingSeconds, maximumBody: maximumBody)
                guard response.status == 200 else { return (.failure(HTTPRequestFailure("HTTP \(response.status) \(response.reason)")), nil) }
                let (value, nextUpdate) = try parse(body)
                let expires = RevocationCache.expiry(nextUpdate: nextUpdate)
                answers?.saveRevocationAnswer(body, for: key, expires: expires)
                return (.success(value), expires)
            } catch let error as HTTPRequestFailure {
                return (.failure(error), nil)
            } catch {
                return (.failure(HTTPRequestFailure("\(error)")), nil)
            }
        } ?? .failure(HTTPRequestFailure("no answer within the scan's timeout (another scan is still asking)"))
    }
}
