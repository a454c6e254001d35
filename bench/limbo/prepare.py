"""Read limbo's JSON on stdin; keep the cases a TLS server verifier can be asked
(validation_kind SERVER, max_chain_depth null) and write, into directory argv[1],
server.json (same format, those cases only) and expected.tsv (<id>\t<expected>)."""
import json
import os
import sys

suite = json.load(sys.stdin)
cases = [t for t in suite["testcases"]
         if t["validation_kind"] == "SERVER" and t["max_chain_depth"] is None]
with open(os.path.join(sys.argv[1], "server.json"), "w") as f:
    json.dump({"version": suite["version"], "testcases": cases}, f)
with open(os.path.join(sys.argv[1], "expected.tsv"), "w") as f:
    f.writelines(f"{t['id']}\t{t['expected_result']}\n" for t in cases)
print(f"{len(cases)} of {len(suite['testcases'])} testcases are SERVER without max_chain_depth")
