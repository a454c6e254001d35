"""families.py EXPECTED.tsv OUT_DIR PEER...: agreement with limbo per family (bettertls split into
its two suites), one column per peer, from OUT_DIR/<peer>.tsv."""
import sys
from collections import defaultdict


def read(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("\t")[:2] for line in f if "\t" in line)


def family(case):
    parts = case.split("::")
    return "::".join(parts[:2]) if parts[0] == "bettertls" else parts[0]


expected = read(sys.argv[1])
peers = sys.argv[3:]
verdicts = {p: read(f"{sys.argv[2]}/{p}.tsv") for p in peers}
cases = defaultdict(list)
for case in expected:
    cases[family(case)].append(case)
print("| family | cases | " + " | ".join(peers) + " |")
print("| --- | ---: | " + " | ".join("---:" for _ in peers) + " |")
for name in sorted(cases) + ["all"]:
    ids = list(expected) if name == "all" else cases[name]
    cells = []
    for p in peers:
        agree = sum(verdicts[p].get(i, "FAILURE") == expected[i] for i in ids)
        cells.append(f"{agree} ({100 * agree / len(ids):.2f}%)")
    label = "**all**" if name == "all" else f"`{name}`"
    print(f"| {label} | {len(ids)} | " + " | ".join(cells) + " |")
