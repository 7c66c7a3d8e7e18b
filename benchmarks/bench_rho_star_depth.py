"""rho* at large depth: wall time of `resprop rho-star` (the Python call behind it) at depth 1e4, 1e5, 1e6.

    python benchmarks/bench_rho_star_depth.py [--depths 10000 100000 1000000] [--no-offdiag] [--json OUT]

Workload: k0 = 0.05, k0_offdiag = 0.03 (diagonal and off-diagonal element), sigma_w2 = 1.25,
sigma_b2 = 0.05, erf, the default search range rho in [0.001, 3] (241-point log grid).  Each depth is one
call of resprop.numeric.theories.fischer.field_theory.rho_star (one run; at 1e6 a run takes minutes).  Printed per depth: the
seconds, the number of passes over the layers (each pass is one vectorised sweep over all rho values of
that stage), microseconds per layer and pass, and the result (rho* or the edge the supremum approaches:
at depth 1e6 rho* ~ 0.97/sqrt(L) ~ 0.00097 lies below the default lower edge 0.001, so the honest answer
is 'no interior maximum in [0.001, 3]'; pass --rho-min to `resprop rho-star` to search lower).

The response recursion alone (`field_theory.response`, one rho) is timed at the same depths for scale.

Peer, measured side by side at the depths in --peer-depths (default 1e4): the textbook route, scipy's bounded
Brent (`minimize_scalar`, xatol 1e-9) on log rho in the same range, one `field_theory.response` call per
evaluation (diagonal element).  Printed: its time, the ratio peer / rho_star and |rho*_peer - rho*|.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

from resprop.numeric.theories.fischer import field_theory as ft

K0, K0_OFF, SW2, SB2 = 0.05, 0.03, 1.25, 0.05


def run(depth: int, offdiag: bool) -> dict:
    t = time.perf_counter()
    rs = ft.rho_star([depth], K0, SW2, SB2, input_kernel_offdiag=K0_OFF if offdiag else None)
    sec = time.perf_counter() - t
    out = {"depth": depth, "seconds": sec, "passes": int(rs["passes"]),
           "us_per_layer_pass": 1e6 * sec / (depth * rs["passes"])}
    for key in ("rho_star",) + (("rho_star_offdiag",) if offdiag else ()):
        v = rs[key][0]
        out[key] = None if v is None else float(v)
        out[key + "_boundary"] = rs[key + "_boundary"][0]
    t = time.perf_counter()
    ft.response(K0, depth, 0.01, SW2, SB2, input_kernel_offdiag=K0_OFF if offdiag else None)
    out["response_seconds"] = time.perf_counter() - t
    return out


def peer_brent(depth: int) -> dict:
    """scipy bounded Brent on log rho, one response() recursion per evaluation (diagonal element)."""
    import numpy as np
    from scipy.optimize import minimize_scalar

    calls = 0

    def neg_chi(log_rho: float) -> float:
        nonlocal calls
        calls += 1
        return -float(ft.response(K0, depth, float(np.exp(log_rho)), SW2, SB2)["chi_out"])

    t = time.perf_counter()
    res = minimize_scalar(neg_chi, bounds=(np.log(1e-3), np.log(3.0)), method="bounded",
                          options={"xatol": 1e-9})
    return {"seconds": time.perf_counter() - t, "rho_star": float(np.exp(res.x)), "evaluations": calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--no-offdiag", action="store_true", help="diagonal element only (as rho-star without --input-kernel-offdiag)")
    ap.add_argument("--peer-depths", type=int, nargs="*", default=[10_000],
                    help="depths at which the Brent-over-response peer runs too (slow: ~30 recursions each)")
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
        if depth in args.peer_depths:
            diag = ft.rho_star([depth], K0, SW2, SB2)  # the diagonal element alone, as the peer
            t = time.perf_counter()
            diag = ft.rho_star([depth], K0, SW2, SB2)
            ours = time.perf_counter() - t
            peer = peer_brent(depth)
            mine = diag["rho_star"][0]
            r["peer"] = dict(peer, ours_seconds=ours, ratio=peer["seconds"] / ours,
                             abs_diff=None if mine is None else abs(peer["rho_star"] - float(mine)))
            print(f"   peer (Brent over response, {peer['evaluations']} recursions): {peer['seconds']:.2f} s "
                  f"vs rho_star {ours:.2f} s: {peer['seconds'] / ours:.1f}x; rho* {peer['rho_star']:.10g} vs "
                  f"{mine if mine is None else float(mine):.10g}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"benchmark": "rho_star_depth", "machine": info, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
