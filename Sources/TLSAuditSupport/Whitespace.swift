extension String {
    /// The text without leading and trailing spaces and tabs: the characters of Foundation's
    /// `CharacterSet.whitespaces` (tab, Unicode's space separators and, as Foundation has it, the
    /// zero width space U+200B), trimmed in Swift. `trimmingCharacters(in: .whitespaces)` goes
    /// through `NSString`, whose first use costs a command's start-up the runtime's look-ups of
    /// four protocol conformances.
    public func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !Self.isWhitespace($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !Self.isWhitespace($0) })!
        return String(scalars[first...last])
    }

    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\t" || scalar == "\u{200B}" || scalar.properties.generalCategory == .spaceSeparator
    }
}

extension Substring {
    /// `String.trimmingWhitespace()` of this text.
    public func trimmingWhitespace() -> String { String(self).trimmingWhitespace() }
}

extension String {
    /// The lines of a text file an operator wrote: split at each line feed, with a carriage return
    /// ending a line dropped (a file saved with Windows line ends; a lone one at the very end too).
    /// Splitting the `Character`s at "\n" never splits CR LF, which is one grapheme: such a file was
    /// one long line. Blank lines stay, so that line numbers in messages match the file's.
    public func fileLines() -> [Substring] {
        unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { scalars in
            Substring(scalars.last == "\r" ? scalars.dropLast() : scalars)
        }
    }
}
