#!/usr/bin/env python3
"""Case (f)'s tables, from the runs bench/run recorded: one line a run, `key=value` fields.

    fleet_table.py logs NODE_LOG...         a run's fields from its nodes' logs (bench/run adds them)
    fleet_table.py nodes RUNS_FILE          the 1, 2 and 3 node table (this build): statements per scan
                                            as PostgreSQL counted them in the window, bytes by the nodes' count
    fleet_table.py ab RUNS_FILE BASELINE    the baseline against this build: unchanged and changed
                                            scans, the one-host case

A run's fields (0 and 1: the start and end of the measured window; the node's own counters cover
its whole run, start-up included, and are divided by the scans its scheduler logged at the stop):
  label build kind store nodes seconds tck
  scans0 scans1       scans stored (tlsaudit_scans_total summed over the nodes' /metrics)
  pgcpu0 pgcpu1       CPU seconds of every PostgreSQL process of the cluster (/proc)
  ncpu0 ncpu1         CPU ticks of the nodes (/proc)
  size0 size1         pg_database_size (relation files: what the disk holds of the database)
  wal0 wal1           pg_current_wal_lsn
  calls0 calls1       statements PostgreSQL executed for the database (pg_stat_statements' calls)
  statements sent received p50 p99 node_scans   the nodes' `fleet statistics` and `scheduler stopping`
  node_calls          statements PostgreSQL ran for the database over the nodes' whole run
"""
import re
import sys


def load(path):
    runs = []
    for line in open(path):
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields:
            runs.append(fields)
    return runs


def number(run, key):
    try:
        return float(run.get(key, ""))
    except ValueError:
        return None


def lsn(text):
    try:
        high, low = text.split("/")
        return (int(high, 16) << 32) | int(low, 16)
    except (AttributeError, ValueError):
        return None


def figures(run):
    """The per-scan figures of one run (None where not measured)."""
    scans = (number(run, "scans1") or 0) - (number(run, "scans0") or 0)
    seconds = number(run, "seconds") or 1
    per = lambda delta, scale=1.0: None if delta is None or scans <= 0 else delta * scale / scans
    delta = lambda key: None if number(run, key + "1") is None or number(run, key + "0") is None \
        else number(run, key + "1") - number(run, key + "0")
    wal = None if lsn(run.get("wal1")) is None or lsn(run.get("wal0")) is None else lsn(run["wal1"]) - lsn(run["wal0"])
    node_scans = number(run, "node_scans") or 0
    whole = lambda key: None if number(run, key) is None or node_scans <= 0 else number(run, key) / node_scans
    sent, received = number(run, "sent"), number(run, "received")
    return {
        "scans": scans,
        "rate": scans / seconds,
        "pg_cpu": per(delta("pgcpu"), 1000),
        "node_cpu": per(delta("ncpu"), 1000 / (number(run, "tck") or 100)),
        "server_stmts": per(delta("calls")),
        "client_stmts": whole("statements"),
        "bytes": None if sent is None or received is None or node_scans <= 0 else (sent + received) / node_scans,
        "growth": per(delta("size")),
        "wal": per(wal),
        "p50": number(run, "p50"),
        "p99": number(run, "p99"),
    }


def counter_check(runs):
    """The nodes' own statement count (PostgresTraffic) against what PostgreSQL ran for them: a
    write path that goes around the counted call (prepared statements, COPY, a pipeline) shows here.
    The node logs its count when its fleet work stops, before the result writer's last batch and the
    last alert deliveries: PostgreSQL's count is the larger by those (changed scans raise alerts)."""
    pairs = [(run["label"], number(run, "statements"), number(run, "node_calls")) for run in runs
             if number(run, "statements") is not None and number(run, "node_calls")]
    if not pairs:
        return
    off = [(label, node, server) for label, node, server in pairs if abs(node - server) > 0.02 * server]
    if off:
        print("the nodes' own statement count differs from PostgreSQL's (pg_stat_statements, the whole run) by more than 2%: "
              + ", ".join(f"{label} {node:.0f} against {server:.0f}" for label, node, server in off)
              + " (the node logs its count before its last writes and alert deliveries at the stop)")
    else:
        worst = max(abs(node - server) / server for _, node, server in pairs)
        print(f"the nodes' own statement count agrees with PostgreSQL's (pg_stat_statements) within {worst * 100:.1f}% in every run")


def scans_check(runs):
    """The scans the window counted (tlsaudit_scans_total) against those the nodes' schedulers
    completed: the metric counts scans whose results were committed, so a write path that leaves an
    unchanged scan out of it would show here as a metric well below the scheduler's count."""
    short = [run["label"] for run in runs
             if number(run, "node_scans") and (number(run, "scans1") or 0) < 0.9 * number(run, "node_scans") - 100]
    if short:
        print("tlsaudit_scans_total counted well under the scans the scheduler completed in: " + ", ".join(short)
              + " (the per-scan figures of those runs are too high)")


def cell(value, digits, width):
    text = "-" if value is None else f"{value:,.{digits}f}"
    return f"{text:>{width}}"


def nodes_table(runs):
    print(f"{'nodes':<7} {'scans/s':>10} {'stmts/scan':>12} {'bytes/scan':>14} {'claim p50 ms':>14} {'claim p99':>12} "
          f"{'pg CPU ms/scan':>14} {'node CPU ms/scan':>16}")
    for run in runs:
        if run.get("kind") != "fleet":
            continue
        f = figures(run)
        stmts = f["server_stmts"] if f["server_stmts"] is not None else f["client_stmts"]
        print(f"{run['nodes']:<7} {cell(f['rate'], 1, 10)} {cell(stmts, 1, 12)} {cell(f['bytes'], 0, 14)} "
              f"{cell(f['p50'], 2, 14)} {cell(f['p99'], 2, 12)} {cell(f['pg_cpu'], 2, 14)} {cell(f['node_cpu'], 2, 16)}")
    counter_check([run for run in runs if run.get("kind") == "fleet"])
    scans_check([run for run in runs if run.get("kind") == "fleet"])


COLUMNS = [  # key, heading, digits, width
    ("rate", "scans/s", 1, 8),
    ("pg_cpu", "PG CPU ms/scan", 3, 15),
    ("server_stmts", "stmts/scan", 2, 11),
    ("client_stmts", "node's count", 2, 13),
    ("bytes", "bytes/scan", 0, 11),
    ("growth", "growth B/scan", 0, 14),
    ("wal", "WAL B/scan", 0, 11),
    ("node_cpu", "node CPU ms/scan", 3, 17),
]


def ab_table(runs, baseline):
    def pick(build, kind, store="postgres"):
        return next((run for run in runs if (run.get("build"), run.get("kind"), run.get("store")) == (build, kind, store)), None)

    builds = [(b, name) for b, name in (("baseline", baseline), ("this", "this build")) if any(r.get("build") == b for r in runs)]
    kinds = [("unchanged", "unchanged scans"), ("changed", "changed scans")]
    print(f"{'build':<22} {'scans':<16}" + "".join(f" {h:>{w}}" for _, h, _, w in COLUMNS))
    table = {}
    for kind, kind_name in kinds:
        for build, name in builds:
            run = pick(build, kind)
            if run is None:
                continue
            f = table[(build, kind)] = figures(run)
            print(f"{name:<22} {kind_name:<16}" + "".join(f" {cell(f[k], d, w)}" for k, _, d, w in COLUMNS))
        if len(builds) == 2 and ("baseline", kind) in table and ("this", kind) in table:
            before, after = table[("baseline", kind)], table[("this", kind)]
            ratio = lambda k: None if before[k] in (None, 0) or after[k] is None else after[k] / before[k]
            print(f"{'this / baseline':<22} {kind_name:<16}" + "".join(f" {cell(ratio(k), 2, w)}" for k, _, _, w in COLUMNS))
    print("(in the window: scans/s, CPU, statements PostgreSQL ran (pg_stat_statements), growth (pg_database_size), WAL;\n"
          " over the node's whole run: its own count of statements and of bytes sent and received, per scan it completed)")
    print()
    print(f"{'build':<22} {'one host: PostgreSQL node scans/s':>34} {'SQLite node scans/s':>20} {'PostgreSQL / SQLite':>20}")
    for build, name in builds:
        pg, lite = pick(build, "onehost"), pick(build, "onehost", "sqlite")
        if pg is None or lite is None:
            continue
        pg_rate, lite_rate = figures(pg)["rate"], figures(lite)["rate"]
        print(f"{name:<22} {cell(pg_rate, 1, 34)} {cell(lite_rate, 1, 20)} {cell(pg_rate / lite_rate if lite_rate else None, 2, 20)}")
    print()
    counter_check(runs)
    scans_check(runs)
    # The write path's targets, for this build: unchanged scans <= 0.5 ms PostgreSQL CPU and <= 300 bytes of
    # growth each; the one-host case >= 80% of the SQLite node's rate.
    for build, name in builds:
        unchanged, pg, lite = table.get((build, "unchanged")), pick(build, "onehost"), pick(build, "onehost", "sqlite")
        if unchanged is None:
            continue
        share = None
        if pg is not None and lite is not None and figures(lite)["rate"]:
            share = figures(pg)["rate"] / figures(lite)["rate"]
        verdict = lambda ok: "-" if ok is None else ("met" if ok else "not met")
        print(f"{name}: PostgreSQL CPU per unchanged scan {cell(unchanged['pg_cpu'], 3, 0)} ms (<= 0.5: "
              f"{verdict(None if unchanged['pg_cpu'] is None else unchanged['pg_cpu'] <= 0.5)}), growth "
              f"{cell(unchanged['growth'], 0, 0)} B (<= 300: {verdict(None if unchanged['growth'] is None else unchanged['growth'] <= 300)}), "
              f"one host {cell(None if share is None else share * 100, 0, 0)}% of SQLite (>= 80%: {verdict(None if share is None else share >= 0.8)})")


def log_fields(paths):
    """The nodes' own counts over their whole run, logged at their stop: the scans their schedulers
    completed, and (fleet nodes) the statements, bytes and claim latency of `fleet statistics`."""
    lines = [line for path in paths for line in open(path, errors="replace")]

    def values(marker, name):
        return [float(m.group(1)) for line in lines if marker in line for m in [re.search(r"\b" + name + r"=([0-9.]+)", line)] if m]

    out = {"node_scans": sum(values("scheduler stopping", "scans"))}
    if any("fleet statistics" in line for line in lines):
        out.update(statements=sum(values("fleet statistics", "statements")), sent=sum(values("fleet statistics", "bytes_sent")),
                   received=sum(values("fleet statistics", "bytes_received")),
                   p50=max(values("fleet statistics", "claim_ms_p50") or [0]), p99=max(values("fleet statistics", "claim_ms_p99") or [0]))
    return "".join(f" {key}={value:g}" for key, value in out.items())


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "logs":
        print(log_fields(sys.argv[2:]), end="")
    elif mode == "nodes":
        nodes_table(load(path))
    else:
        ab_table(load(path), sys.argv[3])
