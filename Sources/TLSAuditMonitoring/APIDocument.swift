public import Foundation
import TLSAuditModel
import TLSAuditStore

/// The OpenAPI 3.1 document of the HTTP API (`/api/v1/openapi.json`). Its schemas describe the
/// documents `status`, `history` and `alerts --format json` print, which the API returns unchanged;
/// enumerations come from the model's own types, so they cannot drift from what is written.
public enum APIDocument {
    public static let version = "1"

    public static func json() -> Data {
        // Serialized once: the document is fixed for the life of the process.
        cached
    }

    private static let cached: Data = {
        (try? JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data()
    }()

    static var document: [String: Any] {
        [
            "openapi": "3.1.0",
            "info": [
                "title": "tlsaudit",
                "version": version,
                "description": "The state tlsaudit keeps: the same documents as `tlsaudit status`, `history` and `alerts` with `--format json`, and the summary sections of `tlsaudit report --format json`.",
            ],
            "paths": [
                "/api/v1/status": get("status", "Every target address: last scan, verdict, earliest expiry, pin state (as `tlsaudit status --format json`).",
                                      parameters: [tagFilter], response: ref("Status")),
                "/api/v1/targets/{name}": get("target", "One target for its page: its addresses (as `status`), each address's latest scan in full (as an address of `tlsaudit scan --format json`: handshake, chain as sent and as built, findings, pins, hygiene checks), its history (as `history NAME --format json --limit \(TargetDocument.historyLimit)`), its newest \(TargetDocument.alertsRead) alerts (as `alerts --format json`) and every finding of the latest scans in words.",
                                              parameters: [targetName], response: ref("Target"), notFound: true),
                "/api/v1/targets/{name}/history": get("history", "The stored scans of a target, newest first, a run of unchanged scans as one entry with `run` (as `tlsaudit history NAME --format json`).",
                                                      parameters: [targetName, limit(20)],
                                                      response: ["type": "array", "items": ref("HistoryEntry")], notFound: true),
                "/api/v1/summary": get("summary", "The fleet at a glance: counts by verdict, the compliance trend over the period and the certificates expiring within \(APIRoutes.summaryExpiringWithinDays) days (the `summary`, `trend` and `expiring` sections of `tlsaudit report --since SINCE --at AT --expiring-within \(APIRoutes.summaryExpiringWithinDays)d --format json`, for the running configuration's targets). Without `at`, an answer made less than \(Int(APIRoutes.summaryReuseSeconds)) s before for the same `since` and tags is given again (its `generated_at` tells when).",
                                       parameters: [since, at, tagFilter], response: ref("Summary"), badRequest: true),
                "/api/v1/alerts": get("alerts", "The newest alerts and their delivery state per sink (as `tlsaudit alerts --format json`).",
                                      parameters: [limit(50)], response: ["type": "array", "items": ref("StoredAlert")]),
                "/api/v1/trust-inputs": get("trustInputs", "The service's trust inputs (CT log list, distrust table, Apple's roots): each one's source, version, publication, age, condition (`current`, `stale` past its `max_age`, `refresh-failing` after 3 failed refreshes in a row) and last refresh (as `tlsaudit trust status --format json`, plus the refresh outcome).",
                                            response: ["type": "object", "required": ["inputs"], "properties": ["inputs": ["type": "array", "items": [
                                                "type": "object", "required": ["input", "source", "max_age_days", "entries", "condition", "consecutive_failures"],
                                                "properties": [
                                                    "input": enumeration(TrustInputKind.allCases.map(\.rawValue)), "source": ["type": "string"],
                                                    "configured_source": ["type": "string"], "version": ["type": "string"],
                                                    "published_at": ["type": "string", "format": "date-time"], "age_days": ["type": "integer"],
                                                    "max_age_days": ["type": "integer"], "entries": ["type": "integer"],
                                                    "condition": enumeration(["current", "stale", "refresh-failing"]),
                                                    "last_refresh_at": ["type": "string", "format": "date-time"], "last_error": ["type": "string"],
                                                    "consecutive_failures": ["type": "integer"],
                                                ]]]]]),
                "/api/v1/ct/sightings": get("ctSightings", "The certificates the CT follower saw logged for pinned or watched names and what it made of each (`break`: the name's pins refuse it, `covered`, `unexpected-issuer`, `seen`), valid from `days` ago on, newest first (as the sightings of `tlsaudit ct status --format json`).",
                                            parameters: [["name": "days", "in": "query", "required": false,
                                                          "description": "Certificates valid from this many days ago on (0 to 3650).",
                                                          "schema": ["type": "integer", "default": 30, "minimum": 0, "maximum": 3_650]], limit(100)],
                                            response: ["type": "object", "required": ["sightings"], "properties": ["sightings": ["type": "array", "items": [
                                                "type": "object",
                                                "required": ["id", "seen_at", "log", "index", "precertificate", "host", "target", "judged_by", "verdict", "serial",
                                                             "issuer", "spki", "not_before", "not_after"],
                                                "properties": [
                                                    "id": ["type": "string"], "seen_at": ["type": "string", "format": "date-time"], "log": ["type": "string"],
                                                    "index": ["type": "integer"], "precertificate": ["type": "boolean"], "host": ["type": "string"],
                                                    "target": ["type": "string"], "judged_by": ["type": "string"],
                                                    "verdict": enumeration(CTSighting.Verdict.allCases.map(\.rawValue)),
                                                    "serial": ["type": "string"], "issuer": ["type": "string"], "spki": ["type": "string"],
                                                    "not_before": ["type": "string", "format": "date-time"], "not_after": ["type": "string", "format": "date-time"],
                                                ]]]]], badRequest: true),
                "/api/v1/openapi.json": get("openapi", "This document.", response: ["type": "object"]),
            ],
            "components": [
                "securitySchemes": ["bearer": ["type": "http", "scheme": "bearer"]],
                "schemas": schemas,
            ],
            "security": [["bearer": [String]()]],
        ]
    }

    private static func ref(_ name: String) -> [String: Any] { ["$ref": "#/components/schemas/\(name)"] }

    private static func get(_ id: String, _ summary: String, parameters: [[String: Any]] = [], response: [String: Any],
                            notFound: Bool = false, badRequest: Bool = false) -> [String: Any] {
        var responses: [String: Any] = [
            "200": ["description": "OK", "content": ["application/json": ["schema": response]]],
            "401": ["description": "The bearer token is missing or wrong (when one is configured)."],
            "421": ["description": "The request's Host is not a name of this listener (its address, localhost or http: allowed_hosts): checked when no token or user is configured, or allowed_hosts is set."],
            "429": ["description": "This client has spent its password checks for this second (basic auth); Retry-After: 1."],
            "503": ["description": "The store cannot be read.", "content": ["application/json": ["schema": ref("Error")]]],
        ]
        if notFound {
            responses["404"] = ["description": "No scans of this target.", "content": ["application/json": ["schema": ref("Error")]]]
        }
        if badRequest || parameters.contains(where: { $0["name"] as? String == "limit" }) {
            responses["400"] = ["description": "A parameter is out of range.", "content": ["application/json": ["schema": ref("Error")]]]
        }
        return ["get": ["operationId": id, "summary": summary, "parameters": parameters, "responses": responses]]
    }

    private static func pathParameter(_ name: String, _ description: String) -> [String: Any] {
        ["name": name, "in": "path", "required": true, "description": description, "schema": ["type": "string"]]
    }

    /// `?tag=A&tag=B`, as `status --tag A --tag B`.
    private static var tagFilter: [String: Any] {
        ["name": "tag", "in": "query", "required": false, "style": "form", "explode": true,
         "description": "Only the target addresses whose target carries this tag (repeat it: every tag given), e.g. `app:com.example.shop`.",
         "schema": ["type": "array", "items": ["type": "string"]]]
    }

    /// `{name}` in a target's paths.
    private static var targetName: [String: Any] { pathParameter("name", "Target name, host or host:port.") }

    /// `?since=30d`: the period the summary covers.
    private static var since: [String: Any] {
        ["name": "since", "in": "query", "required": false,
         "description": "The period: this long up to `at` (a duration like 24h, 7d, 30d; \(SettingBounds.reportPeriod.described)).",
         "schema": ["type": "string", "default": "30d"]]
    }

    /// `?at=2026-11-22T00:00:00Z`: the end of the period.
    private static var at: [String: Any] {
        ["name": "at", "in": "query", "required": false, "description": "The end of the period, ISO 8601 (default: now).",
         "schema": ["type": "string", "format": "date-time"]]
    }

    private static func limit(_ defaultValue: Int) -> [String: Any] {
        ["name": "limit", "in": "query", "required": false, "description": "How many (default \(defaultValue), at most \(APIRoutes.maximumLimit)).",
         "schema": ["type": "integer", "minimum": 1, "maximum": APIRoutes.maximumLimit, "default": defaultValue]]
    }

    private static var timestamp: [String: Any] { ["type": "string", "format": "date-time"] }
    private static var hex64: [String: Any] { ["type": "string", "pattern": "^[0-9a-f]{64}$"] }
    private static func enumeration(_ values: [String]) -> [String: Any] { ["type": "string", "enum": values] }
    private static var policy: [String: Any] { enumeration(CompliancePolicy.allCases.map(\.rawValue)) }
    private static var scanStatus: [String: Any] { enumeration(["completed", "failed"]) }
    private static var pinState: [String: Any] { enumeration(["match", "mismatch", "none"]) }
    private static var category: [String: Any] { enumeration(ProbeFailureCategory.allCases.map(\.rawValue)) }
    private static var ruleList: [String: Any] { ["type": "array", "items": ["type": "string"]] }
    private static var count: [String: Any] { ["type": "integer", "minimum": 0] }
    private static var percent: [String: Any] { ["type": "number", "minimum": 0, "maximum": 100] }

    private static func object(_ properties: [String: [String: Any]], required: [String]) -> [String: Any] {
        ["type": "object", "properties": properties, "required": required, "additionalProperties": false]
    }

    static var schemas: [String: Any] {
        [
            "Error": object(["error": ["type": "string"]], required: ["error"]),
            "Status": object([
                "schema": ["const": "tlsaudit.status/1"],
                "targets": ["type": "array", "items": ref("TargetStatus")],
            ], required: ["schema", "targets"]),
            "TargetStatus": object([
                "target": ["type": "string"], "address": ["type": "string"], "host": ["type": "string"],
                "port": ["type": "integer", "minimum": 0, "maximum": 65_535],
                "last_scan_at": timestamp, "last_observation_id": ["type": "integer"], "status": scanStatus, "policy": policy,
                "compliant": ["type": "boolean"], "failed_rules": ruleList, "earliest_expiry": timestamp,
                "leaf_fingerprint": hex64, "leaf_spki": ["type": "string"], "failure_category": category,
                "consecutive_failures": ["type": "integer", "minimum": 0], "last_success_at": timestamp, "pin_state": pinState,
                "trust_errors": ruleList,
                "tags": ["type": "array", "items": ["type": "string"], "description": "The target's configured tags as of its latest scan."],
                "app": ref("AppHostOutcome"),
                "group": ["type": "string", "description": "The configuration group the target is in (absent: none, or the configuration is not known)."],
            ], required: ["target", "address", "host", "port", "last_scan_at", "last_observation_id", "status", "policy", "compliant",
                          "failed_rules", "consecutive_failures", "pin_state", "trust_errors", "tags"]),
            // A target judged by an app's ATS rules (tlsaudit app import): whether that app's client connects, and on which exception.
            "AppHostOutcome": object([
                "bundle": ["type": "string"], "entry": ["type": "string", "description": "The NSExceptionDomains key that applied."],
                "relies_on": ["type": "array", "items": ["type": "string"], "description": "The exception keys a passing verdict relies on."],
                "configuration": ["type": "string"], "connects": ["type": "boolean"],
                "reasons": ["type": "array", "items": ["type": "string"], "description": "Why the app does not connect (finding ids)."],
                "detail": ["type": "string"],
                "error": object([
                    "code": ["type": "integer"], "name": ["type": "string"], "ssl_code": ["type": "integer"],
                    "ssl_name": ["type": "string"], "source": ["type": "string"],
                ], required: ["code", "name", "source"]).merging(["description": "What the app's load reports when it does not connect: the NSURLErrorDomain code and the kCFStreamErrorDomainSSL code Apple's logs show with it (docs/apple-rules.md section 7)."]) { $1 },
            ], required: ["bundle", "relies_on", "configuration", "connects", "reasons", "detail"]),
            "HistoryEntry": object([
                "observation_id": ["type": "integer"], "target": ["type": "string"], "address": ["type": "string"],
                "started_at": timestamp, "duration_ms": ["type": "integer", "minimum": 0], "status": scanStatus,
                "failure_category": category, "failure_message": ["type": "string"],
                "protocol_version": enumeration(TLSVersion.allCases.map(\.rawValue)), "cipher": ["type": "string"],
                "leaf_fingerprint": hex64, "leaf_spki": ["type": "string"], "policy": policy, "compliant": ["type": "boolean"],
                "failed_rules": ruleList,
                "findings": ["type": "array", "items": ["type": "object", "required": ["id", "severity"],
                                                        "properties": ["id": ["type": "string"], "severity": ["type": "string"]]]],
                // The configuration inventory (checks: [inventory]); its schema: docs/scan.schema.json, `inventory`.
                "inventory": ["type": "object"],
                "headers": ["type": "object"],
                // Heartbleed, CCS injection, ROBOT and the named verdicts (checks: [vulnerabilities]); schema: docs/scan.schema.json, `vulnerabilities`.
                "vulnerabilities": ["type": "object"],
                // Client simulation (checks: [clients]); schema: docs/scan.schema.json, `clients`.
                "clients": ["type": "object"],
                // The opt-in checks without a field of their own, by name; schema: docs/scan.schema.json, `check_reports`.
                "check_reports": ["type": "object"],
                // Later scans with the same content and verdict: the run they make with this one (its first scan).
                "run": object([
                    "scans": ["type": "integer", "minimum": 2], "last_seen_at": timestamp,
                    "duration_min_ms": ["type": "integer", "minimum": 0], "duration_max_ms": ["type": "integer", "minimum": 0],
                    "duration_mean_ms": ["type": "integer", "minimum": 0],
                ], required: ["scans", "last_seen_at", "duration_min_ms", "duration_max_ms", "duration_mean_ms"]),
                // The trust inputs serve judged the scan with; schema: docs/scan.schema.json, `judged_with`.
                "judged_with": object(["inputs": ["type": "array", "items": ["type": "string"]], "changed": ["type": "string"],
                                       "changed_at": timestamp], required: ["inputs"]),
                // The input a refresh put in force since the address's previous entry, when the verdict changed and the leaf did not.
                "judged_again_with": ["type": "string"],
            ], required: ["observation_id", "target", "address", "started_at", "duration_ms", "status", "policy", "compliant",
                          "failed_rules", "findings"]),
            "Target": object([
                "schema": ["const": "tlsaudit.target/1"], "target": ["type": "string"],
                "addresses": ["type": "array", "items": ref("TargetStatus")],
                // An address object of docs/scan.schema.json.
                "latest": ["type": "array", "items": ["type": "object"]],
                "history": ["type": "array", "items": ref("HistoryEntry")],
                "alerts": ["type": "array", "items": ref("StoredAlert")],
                "findings": ["type": "object", "additionalProperties": object([
                    "title": ["type": "string"], "severity": ["type": "string"], "why": ["type": "string"], "fix": ["type": "string"],
                    "section": ["type": "string"],
                ], required: ["title", "severity", "section"])],
            ], required: ["schema", "target", "addresses", "latest", "history", "alerts", "findings"]),
            "Summary": object([
                "schema": ["const": "tlsaudit.summary/1"], "generated_at": timestamp,
                "period": object(["start": timestamp, "end": timestamp, "step": ["type": "integer", "minimum": 1]], required: ["start", "end", "step"]),
                "policy": ["type": "string"],
                "summary": object([
                    "targets": count, "addresses": count, "compliant": count, "not_compliant": count, "unreachable": count,
                    "compliance": percent, "compliance_at_start": percent, "trend": enumeration(["up", "down", "flat", "unknown"]),
                    "scans": count, "failed_scans": count, "rejudged_observations": count,
                ], required: ["targets", "addresses", "compliant", "not_compliant", "unreachable", "trend", "scans", "failed_scans",
                              "rejudged_observations"]),
                "trend": ["type": "array", "items": object([
                    "at": timestamp, "compliant": count, "not_compliant": count, "unreachable": count, "compliance": percent,
                ], required: ["at", "compliant", "not_compliant", "unreachable"])],
                "expiring": ["type": "array", "items": object([
                    "fingerprint": hex64, "subject": ["type": "string"], "common_name": ["type": "string"], "issuer": ["type": "string"],
                    "not_after": timestamp, "days_left": ["type": "integer"], "depth": count,
                    "used_by": ["type": "array", "items": ["type": "string"], "description": "`target (address)` of every address serving it."],
                ], required: ["fingerprint", "subject", "issuer", "not_after", "days_left", "depth", "used_by"])],
                "expiring_within_days": count, "goal": percent,
            ], required: ["schema", "generated_at", "period", "policy", "summary", "trend", "expiring", "expiring_within_days", "goal"]),
            "StoredAlert": object([
                "alert": ref("Alert"),
                "deliveries": ["type": "array", "items": object([
                    "sink": ["type": "string"], "state": enumeration(["pending", "delivered"]),
                    "attempts": ["type": "integer", "minimum": 0], "last_error": ["type": "string"],
                ], required: ["sink", "state", "attempts"])],
            ], required: ["alert", "deliveries"]),
            "Alert": object([
                "schema": ["const": "tlsaudit.alert/1"], "id": ["type": "string"], "kind": enumeration(AlertKind.allCases.map(\.rawValue)),
                "severity": enumeration(AlertSeverity.allCases.map(\.rawValue)), "target": ["type": "string"], "host": ["type": "string"],
                "port": ["type": "integer"], "address": ["type": "string"], "created_at": timestamp, "summary": ["type": "string"],
                "text": ["type": "string"], "changes": ["type": "object"],
            ], required: ["schema", "id", "kind", "severity", "target", "host", "port", "address", "created_at", "summary", "text"]),
        ]
    }
}
