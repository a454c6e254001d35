import Foundation
import TLSAuditProcess

/// A JSON document checked against a JSON schema (docs/*.schema.json, SARIF's) by Python's
/// jsonschema, in the draft the schema names (2020-12 when it names none): an implementation
/// independent of the code that writes the documents.
public enum LabJSONSchema {
    /// The validator's complaint about `json` (the first errors, with their paths), or nil when it is valid.
    /// Throws `LabPrerequisite.Missing` when python3's jsonschema is not installed.
    public static func complaint(_ json: String, schema schemaPath: String) throws -> String? {
        let (status, output) = try LabValidator.check(json, suffix: "json", program: "/usr/bin/env", arguments: { document in
            ["python3", "-c", """
                import json, sys, jsonschema
                schema = json.load(open(sys.argv[1]))
                validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
                validator.check_schema(schema)
                errors = list(validator(schema).iter_errors(json.load(open(sys.argv[2]))))
                for e in errors[:5]: print(list(e.absolute_path), e.message)
                sys.exit(1 if errors else 0)
                """, schemaPath, document]
        })
        if output.contains("No module named") {
            throw LabPrerequisite.Missing(description: "python3 jsonschema is missing: apt-get install -y python3-jsonschema (.ci/run installs it): \(output)")
        }
        return status == 0 ? nil : output
    }
}

/// An XML document checked against an XML Schema by libxml2's xmllint (JUnit XML against the
/// schema Jenkins reads): an implementation independent of the code that writes the documents.
public enum LabXMLSchema {
    /// xmllint's complaint about `xml`, or nil when it is valid. Throws `LabPrerequisite.Missing`
    /// when xmllint is not installed.
    public static func complaint(_ xml: String, schema schemaPath: String) throws -> String? {
        let xmllint = try LabPrerequisite.program(["xmllint"], package: "libxml2-utils")
        let (status, output) = try LabValidator.check(xml, suffix: "xml", program: xmllint, arguments: { ["--noout", "--schema", schemaPath, $0] })
        return status == 0 ? nil : output
    }
}

/// Runs an outside validator on a document written to a temporary file.
enum LabValidator {
    /// The validator's exit status and what it printed (standard output and error together).
    static func check(_ document: String, suffix: String, program: String, arguments: (String) -> [String]) throws -> (Int32, String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("document-\(UUID().uuidString).\(suffix)")
        try document.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments(file.path)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }
}
