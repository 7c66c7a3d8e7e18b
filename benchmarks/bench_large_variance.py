"""tanh against erf when the variance grows with depth (issue 23, item 3): `resprop.kernel(X, act, L, 1, 0.05,
branch_scale=b, ntk=True)`, X = 1000 unit-norm rows of dimension 10 (equal norms: one table per layer for tanh),
P = 1000.

Every call is a fresh process (``--worker``), so nothing is cached in memory. tanh runs twice per round: "cold", with
an empty per-machine table cache (`numeric/engine/disk_cache.py`, a new RESPROP_CACHE_DIR), i.e. the first run on
a machine; and "cached", with the cache that cold run filled, i.e. every later run. Rounds interleave erf,
tanh cold and tanh cached, and the medians of wall and process CPU time are reported.

    python benchmarks/bench_large_variance.py [--json PATH]
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import main, print_table  # noqa: E402

CONFIGS = [(200, 1.0), (50, 1.0), (200, 0.2)]


def _worker(act: str, L: int, bs: float) -> None:
    import time

    import numpy as np

    import resprop

    X = np.random.default_rng(0).standard_normal((1000, 10))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    resprop.kernel(X[:20], act, 2, 1.0, 0.05, ntk=True)  # imports and first-call set-up outside the timing
    t, w = time.process_time(), time.perf_counter()
    K, _ = resprop.kernel(X, act, L, 1.0, 0.05, branch_scale=bs, ntk=True)
    print(json.dumps({"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - t,
                      "max_variance": float(K[0, 0])}))


def _call(act: str, L: int, bs: float, cache: str) -> dict:
    env = {**os.environ, "RESPROP_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, __file__, "--worker", act, str(L), str(bs)], capture_output=True,
                         text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


ROUNDS = 3


def run(rounds: int = ROUNDS) -> dict:
    rows, results = [], []
    for L, bs in CONFIGS:
        got: dict[str, list[dict]] = {"erf": [], "tanh cold": [], "tanh cached": []}
        for _ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="resprop-bench-cache-") as cache:
                got["erf"].append(_call("erf", L, bs, cache))
                got["tanh cold"].append(_call("tanh", L, bs, cache))
                got["tanh cached"].append(_call("tanh", L, bs, cache))
        med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in got.items()}
        results.append({"L": L, "branch_scale": bs, "max_variance": got["erf"][0]["max_variance"], **med})
        rows.append([L, bs, f"{got['tanh cold'][0]['max_variance']:.3g}",
                     f"{med['erf']['wall_s']:.2f} / {med['erf']['cpu_s']:.2f}",
                     f"{med['tanh cold']['wall_s']:.2f} / {med['tanh cold']['cpu_s']:.2f}",
                     f"{med['tanh cached']['wall_s']:.2f} / {med['tanh cached']['cpu_s']:.2f}",
                     f"{med['tanh cold']['wall_s'] / med['erf']['wall_s']:.1f}",
                     f"{med['tanh cached']['wall_s'] / med['erf']['wall_s']:.1f}"])
    print_table(["L", "branch_scale", "K_aa at L (tanh)", "erf wall / CPU s", "tanh cold wall / CPU s",
                 "tanh cached wall / CPU s", "cold / erf", "cached / erf"], rows)
    return {"inputs": "1000 unit-norm rows of dim 10 (equal norms), NNGP + NTK", "rounds": rounds,
            "results": results}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _worker(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        main(run)
