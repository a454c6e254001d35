#!/usr/bin/env python3
"""latency_summary.py REPORT BASE: one line on case (d)'s `scan --format json` document.

Targets tN are on port BASE+N. Those with N % 100 == 0 are tarpits, 25 reset the connection, 50 are
HTTP servers (bench/latency_proxy.py): each must be reported with its failure category; every other
target must have been scanned (a handshake observed).
"""
import json
import sys

EXPECTED = {0: ("tarpits", "handshake-timeout"), 25: ("resets", "closed-during-handshake"), 50: ("HTTP servers", "not-tls")}


def main() -> None:
    report = json.load(open(sys.argv[1]))
    base = int(sys.argv[2])
    hits = {slot: 0 for slot in EXPECTED}
    totals = {slot: 0 for slot in EXPECTED}
    others = scanned = 0
    for target in report["targets"]:
        slot = (target["port"] - base) % 100
        address = target["addresses"][0] if target["addresses"] else {}
        category = (address.get("error") or target.get("error") or {}).get("category")
        if slot in EXPECTED:
            totals[slot] += 1
            hits[slot] += category == EXPECTED[slot][1]
        else:
            others += 1
            scanned += address.get("status") == "completed"
    s = report["summary"]
    hostile = ", ".join(f"{hits[k]}/{totals[k]} {EXPECTED[k][0]} {EXPECTED[k][1]}" for k in EXPECTED)
    print(f"{s['addresses']} addresses: {s['compliant']} compliant, {s['not_compliant']} not compliant, "
          f"{s['failed']} could not be scanned; as expected: {hostile}; {scanned}/{others} others scanned")


main()
