/// The most ``AppBundleReader`` reads, so that a hostile or mistaken input (a deflate bomb, a
/// huge central directory, a directory of junk) is refused in bounded memory and time. Sizes are
/// uncompressed bytes; an archive entry is refused on the size its header declares before any of
/// it is inflated, and inflating stops at that declared size.
public enum AppBundleLimits {
    /// An `Info.plist` (real ones are a few KiB; Xcode's largest stay well under 1 MiB).
    public static let infoPlistBytes = 4 << 20
    /// One bundled certificate file (a DER certificate is 1-2 KiB).
    public static let certificateBytes = 64 << 10
    /// Everything read from one app together: the Info.plist and every certificate.
    public static let totalBytes = 8 << 20
    /// An `.ipa`'s central directory (the list of entries; about 100 bytes an entry).
    public static let centralDirectoryBytes = 32 << 20
}
