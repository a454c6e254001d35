import Foundation

/// Domain names in the form clients compare them: each label in its ASCII form (IDNA A-label,
/// Punycode of RFC 3492 behind `xn--`), lower case, without a trailing dot. A certificate may
/// carry a name as Unicode in its CN and as an A-label in its SANs: the same name to a client.
public enum DomainNameForm {
    /// `Bücher.Example.` -> `xn--bcher-kva.example`; ASCII names are only lower-cased.
    public static func ascii(_ name: String) -> String {
        var trimmed = name
        if trimmed.hasSuffix(".") { trimmed.removeLast() }
        guard !trimmed.unicodeScalars.allSatisfy(\.isASCII) else { return trimmed.lowercased() }
        return trimmed.precomposedStringWithCanonicalMapping.lowercased()
            .split(separator: ".", omittingEmptySubsequences: false)
            .map { label in
                label.unicodeScalars.allSatisfy(\.isASCII) ? String(label) : "xn--" + (punycode(String(label)) ?? String(label))
            }
            .joined(separator: ".")
    }

    /// A host name as a client sends and compares it: a Unicode (U-label) name in its A-label form,
    /// as Foundation's URL loading converts it before it resolves, connects and evaluates trust
    /// (`bücher.example` -> `xn--bcher-kva.example`, a trailing dot kept); an ASCII name unchanged.
    public static func host(_ name: String) -> String {
        guard !name.utf8.allSatisfy({ $0 < 0x80 }) else { return name }
        // UTS 46 maps the ideographic and fullwidth full stops to "." before anything else.
        let dotted = String(name.map { "\u{3002}\u{FF0E}\u{FF61}".contains($0) ? "." : $0 })
        return ascii(dotted) + (dotted.hasSuffix(".") ? "." : "")
    }

    /// RFC 3492 encoding of one label's code points; nil on overflow.
    static func punycode(_ label: String) -> String? {
        let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700
        let input = label.unicodeScalars.map { Int($0.value) }
        var output = input.filter { $0 < 0x80 }.map { Character(UnicodeScalar(UInt8($0))) }
        let basicCount = output.count
        if basicCount > 0 { output.append("-") }
        func digit(_ value: Int) -> Character {
            Character(UnicodeScalar(UInt8(value < 26 ? value + 97 : value - 26 + 48)))
        }
        func adapt(_ delta: Int, _ points: Int, _ first: Bool) -> Int {
            var delta = first ? delta / damp : delta / 2
            delta += delta / points
            var k = 0
            while delta > ((base - tMin) * tMax) / 2 {
                delta /= base - tMin
                k += base
            }
            return k + (base - tMin + 1) * delta / (delta + skew)
        }
        var n = 0x80, delta = 0, bias = 72, handled = basicCount
        while handled < input.count {
            guard let next = input.filter({ $0 >= n }).min() else { break }
            let (product, overflow) = (next - n).multipliedReportingOverflow(by: handled + 1)
            guard !overflow else { return nil }
            delta += product
            n = next
            for code in input {
                if code < n { delta += 1 }
                if code == n {
                    var q = delta, k = base
                    while true {
                        let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                        if q < t { break }
                        output.append(digit(t + (q - t) % (base - t)))
                        q = (q - t) / (base - t)
                        k += base
                    }
                    output.append(digit(q))
                    bias = adapt(delta, handled + 1, handled == basicCount)
                    delta = 0
                    handled += 1
                }
            }
            delta += 1
            n += 1
        }
        return String(output)
    }
}
