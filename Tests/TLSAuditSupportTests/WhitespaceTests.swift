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
}
