/// tlsaudit's release: what `--version` prints, reports and JSON documents name, and
/// `tlsaudit_build_info` labels.
public enum TLSAuditVersion {
    public static let current = "0.1.0"
}
