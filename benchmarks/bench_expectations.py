"""Generated 2-D Gaussian expectations through the theory drivers: before / now, side by side.

Times the three Fischer field-theory driver calls whose cost is dominated by the generated ``expect2``
(tanh; ``--activation gelu`` for GELU):

* ``response(0.05, 50, 0.3, 1.25, 0.05, input_kernel_offdiag=0.03)``
* ``nngp([[0.05, 0.03], [0.03, 0.05]], 100, 0.3, 1.25, 0.05)``
* ``rho_star([10, 50], 0.05, 1.25, 0.05, input_kernel_offdiag=0.03)``

The "now" column runs this working tree in a fresh subprocess.  The "before" column runs the same calls with the
interpreter of a pristine install of the code before the any-variance expectations (128^2 Gauss--Hermite
``expect2``), ``/tmp/venv-before/bin/python`` by default (``--before-python``), from a directory outside the
repository so that it imports its own copy.  That venv is optional: when it is absent, the "before" column is
skipped.  The two columns also print the largest relative difference of the results (the old rule is inaccurate
at large variances: that difference is the old error, not the new one).

Usage: ``python benchmarks/bench_expectations.py [--activation tanh|gelu] [--repeats N] [--rho-depths 10 50]
[--before-python PATH] [--json PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEFORE_PYTHON = "/tmp/venv-before/bin/python"

#: run in a subprocess by each interpreter: prints one JSON line {name: {"seconds": best, "value": [...]}}
WORKER = r"""
import json, sys, time
import numpy as np
from resprop.numeric.theories.fischer import field_theory as ft

act, repeats, depths = sys.argv[1], int(sys.argv[2]), [int(d) for d in sys.argv[3].split(",")]
calls = {
    "response": lambda: ft.response(0.05, 50, 0.3, 1.25, 0.05, input_kernel_offdiag=0.03, activation=act),
    "nngp": lambda: ft.nngp(np.array([[0.05, 0.03], [0.03, 0.05]]), 100, 0.3, 1.25, 0.05, activation=act),
    "rho_star": lambda: ft.rho_star(depths, 0.05, 1.25, 0.05, input_kernel_offdiag=0.03, activation=act),
}


def numbers(x):
    # every float of a result (dataclasses, dicts, arrays, tuples), flattened in a fixed order
    if hasattr(x, "__dataclass_fields__"):
        return [v for k in x.__dataclass_fields__ for v in numbers(getattr(x, k))]
    if isinstance(x, dict):
        return [v for k in sorted(x, key=str) for v in numbers(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in numbers(item)]
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        return []
    return [float(v) for v in a.ravel()]


out = {}
for name, fn in calls.items():
    best, value = float("inf"), None
    for _ in range(1 if name == "rho_star" else repeats):
        t = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t)
    out[name] = {"seconds": best, "value": numbers(value)}
print(json.dumps(out))
"""


def run_with(python: str, activation: str, repeats: int, depths: list[int], cwd: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, "-c", WORKER, activation, str(repeats), ",".join(map(str, depths))],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{python} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def difference(a: list[float], b: list[float]) -> float:
    if len(a) != len(b) or not a:
        return float("nan")
    import numpy as np

    x, y = np.asarray(a), np.asarray(b)
    finite = np.isfinite(x) & np.isfinite(y)
    if not finite.any():
        return float("nan")
    return float(np.max(np.abs(x[finite] - y[finite]) / np.maximum(np.abs(y[finite]), 1e-300)))


def run(activation: str = "tanh", repeats: int = 3, depths: list[int] | None = None,
        before_python: str = BEFORE_PYTHON) -> dict:
    depths = depths or [10, 50]
    with tempfile.TemporaryDirectory() as outside:   # neither interpreter picks up this tree from the cwd
        now = run_with(sys.executable, activation, repeats, depths, outside)
        before = None
        if Path(before_python).exists():
            before = run_with(before_python, activation, repeats, depths, outside)
    rows = {}
    for name, res in now.items():
        row = {"now_s": res["seconds"]}
        if before is not None:
            row["before_s"] = before[name]["seconds"]
            row["ratio"] = res["seconds"] / before[name]["seconds"]
            row["max_rel_diff"] = difference(res["value"], before[name]["value"])
        rows[name] = row
    return {"activation": activation, "depths": depths, "before_python": before_python if before else None,
            "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--activation", default="tanh")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rho-depths", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--before-python", default=BEFORE_PYTHON,
                    help="interpreter of the pre-change install (optional: skipped when absent)")
    ap.add_argument("--json")
    args = ap.parse_args()
    res = run(args.activation, args.repeats, args.rho_depths, args.before_python)
    if res["before_python"] is None:
        print(f"(before-venv {args.before_python} not found: 'before' column skipped)")
    print(f"activation {res['activation']}, rho_star depths {res['depths']}")
    print(f"{'call':10s} {'before [s]':>11s} {'now [s]':>9s} {'now/before':>11s} {'max rel diff':>13s}")
    for name, row in res["rows"].items():
        b = f"{row['before_s']:11.3f}" if "before_s" in row else f"{'-':>11s}"
        r = f"{row['ratio']:11.2f}" if "ratio" in row else f"{'-':>11s}"
        d = f"{row['max_rel_diff']:13.2e}" if "max_rel_diff" in row else f"{'-':>13s}"
        print(f"{name:10s} {b} {row['now_s']:9.3f} {r} {d}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
