import ArgumentParser
import Foundation
import TLSAuditCore
import TLSAuditProbe
import TLSAuditReport
import TLSAuditService
import TLSAuditStore
import TLSAuditSupport

/// `tlsaudit pin`: both pin forms for every certificate of a chain, and ready-to-paste configuration.
struct PinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the SPKI pin and certificate fingerprint of each certificate of a server's chain (or of certificate files), what each pin protects against, and a config entry and an NSPinnedDomains snippet pinning the leaf key with a backup slot."
    ).parsedDirectly(under: "tlsaudit")

    @Argument(help: "The server, HOST[:PORT] (omit with --cert).")
    var target: String?

    @Option(name: .customLong("cert"), help: "Certificate files (PEM, several per file, or DER .cer/.crt) instead of a server.")
    var certificateFiles: [String] = []

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard (target == nil) != certificateFiles.isEmpty else {
            throw ValidationError("Give a target or --cert FILE (not both).")
        }
    }

    func run() throws {
        var certificates: [(CertificateSummary, String)] = []
        var domain = "example.com"
        var leafIndex: Int? = 0
        if let target {
            let parsed = try parseSingleTarget(target, connectTo: connection.connectTo, starttls: connection.starttls)
            domain = parsed.sni ?? parsed.host
            let store = try connection.trust.store(caFile: connection.caFile, policy: .atsRuntime)
            var options = ScanOptions(timeout: connection.timeout, trustStore: store)
            options.ctLogs = try connection.trust.logs()
            let scanner = try TLSScanner(options: options, judge: AddressAssessment.judge)
            let result = scanner.scan(parsed)
            guard let address = result.addresses.first(where: { $0.chain != nil }) else {
                let reason = result.error?.description ?? result.addresses.first?.error?.description ?? "no certificate"
                StandardStream.error.write("tlsaudit: cannot read the chain of \(target): \(reason)\n")
                throw ExitCode(2)
            }
            let chain = address.chain!
            certificates = chain.presented.enumerated().map { ($0.element, $0.offset == 0 ? "leaf" : "sent #\($0.offset)") }
            for element in chain.path where element.source == .trustStore {
                certificates.append((element.certificate, "anchor (trust store \(chain.trustStore))"))
            }
        } else {
            for file in certificateFiles {
                do {
                    certificates += try CertificateFile.summaries(path: file).enumerated().map { ($0.element, "\(file) #\($0.offset)") }
                } catch {
                    throw ValidationError("\(error)")
                }
            }
            leafIndex = PinReport.leafIndex(certificates.map(\.0))
            if let leafIndex {
                certificates[leafIndex].1 += " (leaf)"
                domain = certificates[leafIndex].0.subjectAlternativeNames.dns.first ?? domain
            }
        }
        StandardStream.output.write(PinReport.render(certificates, leafIndex: leafIndex, domain: domain))
    }
}

/// The text of `tlsaudit pin`: every certificate's pins, what each choice protects against, and
/// snippets that pin the leaf key with a slot for a backup key (the pins that alert on a new key).
enum PinReport {
    /// The leaf among certificate files, in whatever order they list them: a CA:FALSE certificate
    /// that issued none of the others; else a lone certificate that names a server (a self-signed
    /// server certificate is CA:TRUE when `openssl req -x509` made it; on a device its chain is that
    /// one certificate, which only a leaf pin can match). Nil when every certificate is a CA.
    static func leafIndex(_ certificates: [CertificateSummary]) -> Int? {
        let issuers = Set(certificates.filter { !$0.isSelfSigned }.map(\.issuer))
        if let leaf = certificates.indices.first(where: { !certificates[$0].isCA && !issuers.contains(certificates[$0].subject) })
            ?? certificates.indices.first(where: { !certificates[$0].isCA }) {
            return leaf
        }
        guard certificates.count == 1, let only = certificates.first else { return nil }
        let names = only.subjectAlternativeNames
        return names.dns.isEmpty && names.ip.isEmpty ? nil : 0
    }

    /// `leafIndex` is nil when no certificate given is a leaf (every one is a CA): then only CA
    /// pins are offered, never a CA key as an NSPinnedLeafIdentities entry.
    static func render(_ certificates: [(CertificateSummary, String)], leafIndex: Int?, domain: String) -> String {
        var out = ""
        for (certificate, role) in certificates {
            out += "\(role): \(certificate.subject)\n"
            out += "  issuer       \(certificate.issuer)\n"
            out += "  key          \(certificate.publicKey.summary), valid to \(Timestamp.format(certificate.notAfter))\n"
            out += "  SPKI pin     sha256/\(certificate.spkiSHA256)\n"
            out += "  certificate  \(certificate.colonFingerprint)  (\(certificate.sha256Fingerprint))\n\n"
        }
        guard !certificates.isEmpty else { return out }
        guard let leafIndex, certificates.indices.contains(leafIndex) else {
            return out + caOnly(certificates.map(\.0).filter(\.isCA), domain: domain)
        }
        let leaf = certificates[leafIndex].0
        let cas = certificates.indices.filter { $0 != leafIndex }.map { certificates[$0].0 }
        out += """
            # What each pin protects against:
            #   the leaf's key (recommended, below): any certificate with another key fails the pin, so a
            #     certificate mis-issued for the name, or a man in the middle, raises pin.mismatch at once.
            #     Pin a backup key too (the SPKI of the key you will move to), or a key rotation breaks
            #     every pinned client: tlsaudit warns about a single pin.
            #   an intermediate or root key: accepts every certificate that CA issues for the name, so a
            #     same-name certificate with another key from the same CA is a match; only
            #     certificate.changed (a warning, "NEW key") tells it. It survives renewals, and catches
            #     only certificates from other CAs.

            # tlsaudit configuration (AFNetworking public-key pinning of the leaf key):
                pins:
                  mode: public-key
                  pins:
                    - "sha256/\(leaf.spkiSHA256)"   # \(leaf.displayName)
                    # - "sha256/BACKUP="   # the SPKI of your next key: openssl pkey -in next.key -pubout -outform der | openssl dgst -sha256 -binary | base64

            """
        if !cas.isEmpty {
            out += "# To pin a CA instead (weaker: see above), list its key instead of the leaf's:\n"
            for ca in cas { out += "#   - \"sha256/\(ca.spkiSHA256)\"   # \(ca.displayName)\n" }
            out += "\n"
        }
        out += "<!-- Info.plist, NSAppTransportSecurity: pin the leaf key and a backup key -->\n"
        out += "<key>NSPinnedDomains</key>\n<dict>\n  <key>\(domain)</key>\n  <dict>\n"
        out += "    <key>NSIncludesSubdomains</key>\n    <false/>\n"
        out += "    <key>NSPinnedLeafIdentities</key>\n    <array>\n"
        out += "      <dict><key>SPKI-SHA256-BASE64</key><string>\(leaf.spkiSHA256)</string></dict>\n"
        out += "      <!-- a backup: <dict><key>SPKI-SHA256-BASE64</key><string>BACKUP=</string></dict> -->\n    </array>\n"
        out += "  </dict>\n</dict>\n"
        if !cas.isEmpty {
            out += "<!-- NSPinnedCAIdentities instead accepts every certificate these CAs issue for the name:\n"
            for ca in cas { out += "     \(ca.spkiSHA256)  \(ca.displayName)\n" }
            out += "-->\n"
        }
        return out
    }

    /// The snippets when every certificate given is a CA: its keys as CA pins.
    static func caOnly(_ cas: [CertificateSummary], domain: String) -> String {
        var out = """
            # No leaf among these certificates (each is a CA): only a CA pin can be written. A CA pin
            # accepts every certificate that CA issues for the name; to pin the server's own key, give
            # its leaf certificate (or the server: tlsaudit pin HOST:PORT).

            # tlsaudit configuration (AFNetworking public-key pinning of a CA key):
                pins:
                  mode: public-key
                  pins:

            """
        for ca in cas { out += "        - \"sha256/\(ca.spkiSHA256)\"   # \(ca.displayName)\n" }
        out += "\n<!-- Info.plist, NSAppTransportSecurity: pin these CA keys -->\n"
        out += "<key>NSPinnedDomains</key>\n<dict>\n  <key>\(domain)</key>\n  <dict>\n"
        out += "    <key>NSIncludesSubdomains</key>\n    <false/>\n"
        out += "    <key>NSPinnedCAIdentities</key>\n    <array>\n"
        for ca in cas { out += "      <dict><key>SPKI-SHA256-BASE64</key><string>\(ca.spkiSHA256)</string></dict>  <!-- \(ca.displayName) -->\n" }
        out += "    </array>\n  </dict>\n</dict>\n"
        return out
    }
}
