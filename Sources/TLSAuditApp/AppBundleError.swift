/// An app input tlsaudit cannot read: the file, and what is wrong with it, in one sentence.
/// (`tlsaudit app audit` exits 64 with ``description``.)
public struct AppBundleError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem, for callers and tests; the message says it for people.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The path cannot be opened or read, or is neither a plist, an `.app` nor an `.ipa`.
        public static let unreadable = Code("unreadable")
        /// Not an XML or binary property list, or its root is not a dictionary, or a key has a type it must not have.
        public static let invalidPropertyList = Code("invalid-property-list")
        /// An `.app` directory, or the app of an `.ipa`, without `Info.plist`.
        public static let missingInfoPlist = Code("missing-info-plist")
        /// An `.ipa` without a `Payload/*.app` directory.
        public static let noApp = Code("no-app")
        /// An `.ipa` with more than one `Payload/*.app` directory.
        public static let severalApps = Code("several-apps")
        /// A zip that is truncated, damaged, or uses something tlsaudit does not read (encryption, several disks).
        public static let corruptArchive = Code("corrupt-archive")
        /// An archive entry whose name is an absolute path or has a `..` component.
        public static let unsafeEntryName = Code("unsafe-entry-name")
        /// An entry or file over its size limit (``AppBundleLimits``), or the whole read over its budget.
        public static let tooLarge = Code("too-large")
    }

    public var code: Code
    /// The file the problem is in (the path given; for an archive, the archive).
    public var file: String
    /// What is wrong, naming the entry when there is one.
    public var message: String

    public init(_ code: Code, file: String, _ message: String) {
        self.code = code
        self.file = file
        self.message = message
    }

    public var description: String { "\(file): \(message)" }
}
