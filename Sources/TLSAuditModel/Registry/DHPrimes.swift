/// Finite-field DH primes with names: RFC 7919's groups (so a TLS 1.2 DHE key exchange can be
/// matched to `ffdhe2048` ... `ffdhe8192`) and primes shared by many servers (LOGJAM: one
/// precomputation breaks them all). See `scripts/generate-tls-registry`.
public enum DHPrimes {
    /// The RFC 7919 group whose prime is `prime` (big-endian bytes), if any.
    public static func rfc7919Group(_ prime: [UInt8]) -> String? {
        let hex = hexText(prime)
        return rfc7919.first { $0.prime == hex }?.name
    }

    /// The source of `prime` when it is one of the widely shared primes (RFC 7919's are not
    /// listed: they are large enough that sharing them is the design).
    public static func commonPrimeLabel(_ prime: [UInt8]) -> String? {
        let hex = hexText(prime)
        return common.first { $0.prime == hex }?.label
    }

    private static func hexText(_ bytes: [UInt8]) -> String {
        let digits = bytes.drop { $0 == 0 }.map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined()
        return String(digits.drop { $0 == "0" })
    }
}
