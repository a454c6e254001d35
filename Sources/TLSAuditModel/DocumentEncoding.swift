public import Foundation
public import TLSAuditSupport

extension JSONDocumentEncoder {
    /// Every JSON document tlsaudit prints or writes: snake_case keys, ISO 8601 dates, sorted keys,
    /// two-space indentation, `/` unescaped.
    public static let tlsaudit = domain(keys: .snakeCase, dates: .iso8601, prettyPrinted: true, escapesSlashes: false)

    /// Like `tlsaudit`, on one line (alert and report notices: one document per line for command sinks).
    public static let tlsauditCompact = domain(keys: .snakeCase, dates: .iso8601, prettyPrinted: false, escapesSlashes: false)

    /// An encoder for the domain's values with these options, the domain's large-document types
    /// declared first (each declares its conformance beside itself: `TargetScanResult` is
    /// encoded on all cores, a `CertificateSummary` met again is written from its first node).
    public static func domain(keys: KeyStyle, dates: DateStyle, prettyPrinted: Bool, escapesSlashes: Bool) -> JSONDocumentEncoder {
        _ = declaredDomainTypes
        return JSONDocumentEncoder(keys: keys, dates: dates, prettyPrinted: prettyPrinted, escapesSlashes: escapesSlashes)
    }

    private static let declaredDomainTypes: Void = {
        register(concurrent: TargetScanResult.self)
        register(repeated: CertificateSummary.self)
    }()
}

extension JSONDecoder {
    /// Reads what `JSONDocumentEncoder.tlsaudit` writes.
    public static var tlsaudit: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
