import Testing
import TLSAuditMonitoring

@Suite("htpasswd files")
struct HtpasswdFileTests {
    @Test("a file saved with Windows line ends (CR LF) gives each user, and an error names the file's line")
    func windowsLineEnds() throws {
        let hash = "$2y$05$" + String(repeating: "a", count: 53)
        let users = try AccessCredentials.users(htpasswd: "# operators\r\nalice:\(hash)\r\n\r\nbob:\(hash)\r\n", file: "users")
        #expect(users == ["alice": hash, "bob": hash])
        let error = #expect(throws: AccessFileError.self) {
            try AccessCredentials.users(htpasswd: "alice:\(hash)\r\nbob\r\n", file: "users")
        }
        #expect(error?.description.contains("users line 2") == true, "\(String(describing: error))")
    }
}
