import Foundation
import Testing
import TLSAuditSupport

@Suite("trimming whitespace without NSString")
struct WhitespaceTests {
    @Test("the same as Foundation's trimmingCharacters(in: .whitespaces)", arguments: [
        "", " ", "\t a b \t", "\u{00A0}host\u{3000}", "\nline\n", " \u{2009}x\u{202F} ", "é ", " e\u{0301}", "a\u{200B}", "\u{1680}\u{205F}",
    ])
    func sameAsFoundation(text: String) {
        #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces))
        #expect(text[...].trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces))
    }

    @Test("every scalar of the planes that hold any whitespace (0-2) is whitespace for both or for neither")
    func everyScalar() {
        var differing: [String] = []
        for value in 0...0x2FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let single = String(String.UnicodeScalarView([scalar]))
            if single.trimmingWhitespace().isEmpty != single.trimmingCharacters(in: .whitespaces).isEmpty {
                differing.append(String(value, radix: 16))
            }
        }
        #expect(differing.isEmpty, "\(differing.prefix(20))")
    }

    @Test("a file's lines: split at LF, a CR before it dropped, blank lines kept")
    func fileLines() {
        #expect("a\r\nb\r\n\r\nc".fileLines() == ["a", "b", "", "c"])
        #expect("a\nb\n".fileLines() == ["a", "b", ""])
        #expect("a\rb".fileLines() == ["a\rb"], "a CR alone is not a line end")
        #expect("é\r\ne\u{0301}".fileLines() == ["é", "e\u{0301}"])
        #expect("".fileLines() == [""])
    }
}
