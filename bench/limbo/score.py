"""score.py EXPECTED.tsv VERDICTS.tsv: print '<agree> <total> <percent> <missing>'.
A case missing from VERDICTS counts as FAILURE (and is reported as missing)."""
import sys


def read(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("\t")[:2] for line in f if "\t" in line)


expected, got = read(sys.argv[1]), read(sys.argv[2])
agree = sum(got.get(i, "FAILURE") == e for i, e in expected.items())
missing = sum(i not in got for i in expected)
print(agree, len(expected), f"{100 * agree / len(expected):.2f}", missing)
