"""Shared loop of the Python peer harnesses.

Usage: <harness>.py SUITE.json > verdicts.tsv
Reads a limbo JSON suite, calls evaluate(testcase) -> bool on every testcase and
prints '<id>\t<SUCCESS|FAILURE>' per case. An exception escaping evaluate() is a
harness error: the case counts as FAILURE and is logged on stderr. As in limbo's
harnesses, "denial-of-service" cases run in a forked child that gets
TIMEOUT_SECONDS; a case still running then is a hang, counted, and a FAILURE.
"""
import json
import multiprocessing
import sys
from datetime import datetime

TIMEOUT_SECONDS = 5


def when(tc):
    """The testcase's validation time as an aware datetime, or None (= now)."""
    t = tc["validation_time"]
    return datetime.fromisoformat(t.replace("Z", "+00:00")) if t else None


def _guarded(evaluate, tc):
    """evaluate(tc) -> (ok, error message or None)."""
    try:
        return bool(evaluate(tc)), None
    except Exception as e:  # noqa: BLE001 - any escape is a harness error
        return False, f"{type(e).__name__}: {e}"


def _in_child(evaluate, tc):
    """_guarded in a forked child with a timeout -> (ok, error, hung)."""
    recv, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(
        target=lambda: send.send(_guarded(evaluate, tc)), daemon=True)
    child.start()
    send.close()
    try:
        if recv.poll(TIMEOUT_SECONDS):
            return (*recv.recv(), False)
        return False, None, True
    except EOFError:
        return False, f"child died (exit code {child.exitcode})", False
    finally:
        child.kill()
        child.join()


def run(version, evaluate):
    with open(sys.argv[1]) as f:
        cases = json.load(f)["testcases"]
    print(f"version: {version}", file=sys.stderr)
    errors = hangs = 0
    for tc in cases:
        if "denial-of-service" in tc["features"]:
            ok, error, hung = _in_child(evaluate, tc)
        else:
            (ok, error), hung = _guarded(evaluate, tc), False
        if error:
            errors += 1
            print(f"harness error: {tc['id']}: {error}", file=sys.stderr)
        if hung:
            hangs += 1
            print(f"hang (> {TIMEOUT_SECONDS} s): {tc['id']}", file=sys.stderr)
        sys.stdout.write(f"{tc['id']}\t{'SUCCESS' if ok else 'FAILURE'}\n")
    print(f"hangs (FAILURE): {hangs}\nharness errors: {errors}", file=sys.stderr)
