"""Count the outcomes of the adversarial case table (tests/adversarial.py) against a checkout of resprop.

    python tests/adversarial_census.py [--source DIR] [--jobs 2] [--only PREFIX] [--json OUT.json]

Every case runs in its own forked process with the case's time limit, so a hang is counted as a hang (the
child is killed) and a memory blow-up as the exception it raises.  ``--source DIR`` puts DIR (another checkout,
for example a worktree of an older commit) first on ``sys.path`` so that its ``numeric``, ``derive`` and
``generated`` packages are the ones tested: that is how the before/after table of issue 11 was made.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path


def _child(source: str | None, index: int, conn) -> None:
    if source:
        sys.path.insert(0, source)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import adversarial

    case = adversarial.all_cases()[index]
    try:
        outcome = adversarial.classify(case)
    except BaseException as exc:  # noqa: BLE001
        outcome = ("traceback", f"{type(exc).__name__}: {exc}")
    conn.send(outcome)
    conn.close()


def run_case(source: str | None, index: int, timeout: float) -> tuple[str, str]:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(source, index, child))
    proc.start()
    child.close()
    if parent.poll(timeout):
        try:
            outcome = parent.recv()
        except EOFError:
            outcome = ("traceback", f"process died (exit {proc.exitcode})")
    else:
        outcome = ("hang", f"no answer in {timeout:g} s")
    proc.kill()
    proc.join()
    if outcome is None:
        outcome = ("traceback", f"process died (exit {proc.exitcode})")
    return outcome


def _preload(cases) -> None:
    """Import what the cases use once, in the parent, so that each forked child starts warm."""
    import importlib

    for name in ("resprop.numeric.cli", "resprop.numeric.theories.fischer.field_theory", "resprop.numeric.theories.fischer.fluctuations", "resprop.numeric.theories.stable.stable_resnet",
                 "resprop.numeric.theories.lognormal.log_gaussian", "resprop.numeric.theories.pdlt.residual_mlp", "resprop.numeric.theories.stable.residual_ntk", "resprop.numeric.engine.monte_carlo",
                 "resprop.numeric.sweep.runner", "resprop.numeric.report.reproduce", "resprop.registry", "resprop.generated.gaussian", "resprop.numeric.theories.fischer.generated.fischer",
                 "resprop.numeric.theories.lognormal.generated.lognormal", "resprop.numeric.theories.pdlt.generated.pdlt", "resprop.numeric.theories.stable.generated.stable"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module the checkout lacks: the case will say so
            pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=None, help="checkout whose packages to test (default: the installed ones)")
    ap.add_argument("--only", default="", help="run only cases whose id starts with this")
    ap.add_argument("--timeout-scale", type=float, default=1.0)
    ap.add_argument("--json", default=None, help="write every case's outcome to this file")
    args = ap.parse_args(argv)
    if args.source:
        sys.path.insert(0, args.source)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import adversarial

    cases = adversarial.all_cases()
    _preload(cases)
    counts: collections.Counter = collections.Counter()
    by_group: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    records = []
    t0 = time.time()
    for index, case in enumerate(cases):
        if not case.id.startswith(args.only):
            continue
        outcome, detail = run_case(args.source, index, case.timeout * args.timeout_scale)
        counts[outcome] += 1
        by_group[case.id.split(":")[0]][outcome] += 1
        records.append({"id": case.id, "expect": case.expect, "outcome": outcome, "detail": detail})
        if outcome not in ("clean error", "correct"):
            print(f"{outcome:13s} {case.id}: {detail[:160]}", file=sys.stderr)
    total = sum(counts.values())
    print(f"{total} cases in {time.time() - t0:.0f} s")
    print("| group | " + " | ".join(adversarial.OUTCOMES) + " |")
    print("|---" * (len(adversarial.OUTCOMES) + 1) + "|")
    for group, c in sorted(by_group.items()) + [("all", counts)]:
        print(f"| {group} | " + " | ".join(str(c.get(o, 0)) for o in adversarial.OUTCOMES) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"counts": counts, "cases": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
