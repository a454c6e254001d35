import Foundation
import Testing
import TLSAuditCore
import TLSAuditSupport

@Suite("alert documents")
struct AlertDocumentTests {
    @Test("counts are JSON numbers and flags booleans in an alert's changes; stored string values still decode")
    func typedChanges() throws {
        let alert = Alert(id: "a", kind: .certificateExpiring, severity: .warning, target: "t", host: "h", port: 443, address: "127.0.0.1",
                          createdAt: Date(timeIntervalSince1970: 1_800_000_000), summary: "s",
                          changes: ["days_left": "12", "depth": "0", "failures": "3", "same_key": "true", "old_leaf_sha256": "ab"])
        let json = String(decoding: try JSONDocumentEncoder.tlsaudit.encode(alert), as: UTF8.self)
            .replacingOccurrences(of: " ", with: "").replacingOccurrences(of: "\n", with: "")
        // Before: "days_left":"12".
        #expect(json.contains(#""days_left":12"#) && json.contains(#""depth":0"#) && json.contains(#""failures":3"#), "\(json)")
        #expect(json.contains(#""same_key":true"#) && json.contains(#""old_leaf_sha256":"ab""#), "\(json)")
        let decoded = try JSONDecoder.tlsaudit.decode(Alert.self, from: Data(json.utf8))
        #expect(decoded.changes == alert.changes)
        let stored = json.replacingOccurrences(of: #""days_left":12"#, with: #""days_left":"12""#)
        #expect(try JSONDecoder.tlsaudit.decode(Alert.self, from: Data(stored.utf8)).changes["days_left"] == "12")
    }
}
