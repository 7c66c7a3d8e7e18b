"""rho* at large depth: wall time of `resprop rho-star` (the Python call behind it) at depth 1e4, 1e5, 1e6.

    python benchmarks/bench_rho_star_depth.py [--depths 10000 100000 1000000] [--no-offdiag] [--json OUT]

Workload: k0 = 0.05, k0_offdiag = 0.03 (diagonal and off-diagonal element), sigma_w2 = 1.25,
sigma_b2 = 0.05, erf, the default search range rho in [0.001, 3] (241-point log grid).  Each depth is one
call of numeric.field_theory.rho_star (one run; at 1e6 a run takes minutes).  Printed per depth: the
seconds, the number of passes over the layers (each pass is one vectorised sweep over all rho values of
that stage), microseconds per layer and pass, and the result (rho* or the edge the supremum approaches:
at depth 1e6 rho* ~ 0.97/sqrt(L) ~ 0.00097 lies below the default lower edge 0.001, so the honest answer
is 'no interior maximum in [0.001, 3]'; pass --rho-min to `resprop rho-star` to search lower).

The response recursion alone (`field_theory.response`, one rho) is timed at the same depths for scale.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

from numeric import field_theory as ft

K0, K0_OFF, SW2, SB2 = 0.05, 0.03, 1.25, 0.05


def run(depth: int, offdiag: bool) -> dict:
    t = time.perf_counter()
    rs = ft.rho_star([depth], K0, SW2, SB2, k0_offdiag=K0_OFF if offdiag else None)
    sec = time.perf_counter() - t
    out = {"depth": depth, "seconds": sec, "passes": int(rs["passes"]),
           "us_per_layer_pass": 1e6 * sec / (depth * rs["passes"])}
    for key in ("rho_star",) + (("rho_star_offdiag",) if offdiag else ()):
        v = rs[key][0]
        out[key] = None if v is None else float(v)
        out[key + "_boundary"] = rs[key + "_boundary"][0]
    t = time.perf_counter()
    ft.response(K0, depth, 0.01, SW2, SB2, k0_offdiag=K0_OFF if offdiag else None)
    out["response_seconds"] = time.perf_counter() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--no-offdiag", action="store_true", help="diagonal element only (as rho-star without --k0-offdiag)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    info = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "load_avg": os.getloadavg()}
    print(f"machine: {info}")
    rows = []
    for depth in args.depths:
        r = run(depth, not args.no_offdiag)
        rows.append(r)
        res = ", ".join(f"{k}={r[k]:.6g}" if isinstance(r[k], float) else f"{k}={r[k]}"
                        for k in r if k.startswith("rho_star"))
        print(f"depth {depth:>8}: rho_star {r['seconds']:8.2f} s ({r['passes']} passes, "
              f"{r['us_per_layer_pass']:.1f} us/layer/pass); response {r['response_seconds']:7.2f} s; {res}",
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"benchmark": "rho_star_depth", "machine": info, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
