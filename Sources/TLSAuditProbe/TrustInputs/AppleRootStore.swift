public import Foundation
public import TLSAuditModel
import TLSAuditSupport

/// A snapshot of Apple's root store (PEM, the roots of support.apple.com/126047): the one shipped,
/// or one fetched from the operator's source. `trust: apple` and the Apple policies judge against
/// the one in force (`TrustStore.apple`).
public struct AppleRootStore: VerifiableTrustInput {
    public static var kind: TrustInputKind { .appleRoots }

    let certificates: [X509Certificate]
    public let source: String
    /// When it was taken: the shipped snapshot's date, a fetch's time, the kept copy's modification.
    public let fetchedAt: Date?
    /// SHA-256 of the PEM bytes, hex.
    public let sha256: String

    public var count: Int { certificates.count }

    /// The snapshot shipped with tlsaudit (`scripts/update-apple-roots`), parsed once, on first use.
    public static let shipped: AppleRootStore = {
        let bytes = Array(AppleRootStoreData.pem.utf8)
        do {
            let certificates = try CertificateFile.parse(bytes, name: "Apple's root store snapshot")
            return AppleRootStore(certificates: certificates, source: AppleRootStoreData.source,
                                  fetchedAt: Timestamp.parse(AppleRootStoreData.fetched + "T00:00:00Z"), sha256: AppleRootStoreData.sha256)
        } catch {
            fatalError("the shipped Apple root store does not parse: \(error)") // A test parses it: no build ships a broken one.
        }
    }()

    /// The shipped snapshot's `source`.
    static var shippedSource: String { AppleRootStoreData.source }

    /// What the shipped snapshot is, without parsing it (start-up).
    public static var shippedVersion: TrustInputVersion {
        TrustInputVersion(input: .appleRoots, source: AppleRootStoreData.source, version: nil,
                          publishedAt: Timestamp.parse(AppleRootStoreData.fetched + "T00:00:00Z"), entries: AppleRootStoreData.count)
    }

    /// A PEM bundle of anchors: every block parses and every certificate is a CA certificate (Apple's
    /// list is roots and one intermediate, Developer ID's); a bundle with a block that does not
    /// parse (truncated) is refused whole.
    public static func verified(_ bytes: [UInt8], source: String) throws -> AppleRootStore {
        let blocks = String(decoding: bytes, as: UTF8.self).components(separatedBy: "-----BEGIN CERTIFICATE-----").count - 1
        guard blocks > 0 else { throw InputError("\(source) is not a PEM bundle of root certificates") }
        let certificates: [X509Certificate]
        do { certificates = try CertificateFile.parse(bytes, name: source) } catch { throw InputError("\(error)") }
        guard certificates.count == blocks else {
            throw InputError("\(source): \(blocks - certificates.count) of its \(blocks) certificates do not parse (certificate \(certificates.count + 1) is the first): the bundle is refused")
        }
        for certificate in certificates {
            let summary = certificate.summary()
            guard summary.basicConstraints?.isCA == true else {
                throw InputError("\(source): \(summary.subject) is not a CA certificate: the bundle is refused")
            }
        }
        return AppleRootStore(certificates: certificates, source: source, fetchedAt: Date(), sha256: Digest.sha256Hex(bytes))
    }

    public var version: TrustInputVersion {
        TrustInputVersion(input: .appleRoots, source: source, version: nil, publishedAt: fetchedAt, entries: count)
    }

    /// A store with fewer than half the roots of the one in force is refused (a wrong or cut file).
    public func refusal(replacing current: AppleRootStore) -> String? {
        count * 2 < current.count ? "it holds \(count) roots, fewer than half of the \(current.count) in force" : nil
    }

    public func kept(modifiedAt modified: Date) -> AppleRootStore {
        AppleRootStore(certificates: certificates, source: source, fetchedAt: modified, sha256: sha256)
    }
}
