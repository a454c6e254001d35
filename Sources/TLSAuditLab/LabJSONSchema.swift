import Foundation

/// A JSON document checked against one of docs/*.schema.json by Python's jsonschema (Draft 2020-12):
/// an implementation independent of the code that writes the documents.
public enum LabJSONSchema {
    /// The validator's complaint about `json` (the first errors, with their paths), or nil when it is valid.
    /// Throws `LabPrerequisite.Missing` when python3's jsonschema is not installed.
    public static func complaint(_ json: String, schema schemaPath: String) throws -> String? {
        let document = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString).json")
        try json.write(to: document, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: document) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", """
            import json, sys, jsonschema
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            errors = list(jsonschema.Draft202012Validator(schema).iter_errors(json.load(open(sys.argv[2]))))
            for e in errors[:5]: print(list(e.absolute_path), e.message)
            sys.exit(1 if errors else 0)
            """, schemaPath, document.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        if output.contains("No module named") {
            throw LabPrerequisite.Missing(description: "python3 jsonschema is missing: apt-get install -y python3-jsonschema (.ci/run installs it): \(output)")
        }
        return process.terminationStatus == 0 ? nil : output
    }
}
