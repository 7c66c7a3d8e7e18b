"""rho* scan: vectorised chi_out_curves / rho_star vs a Python loop over field_theory.response.

Workload: 64 distinct depths (np.linspace(10, 640, 64).astype(int)) x 256 values
rho = np.geomspace(1e-3, 3, 256), k0 = 0.05, k0_offdiag = 0.03, sigma_w2 = 1.25,
sigma_b2 = 0.05, erf.

* chi_out_curves(rho, depths, ...): chi_out and chi_out_offdiag on the whole
  64 x 256 grid in one vectorised pass (all depths captured in one sweep).
* rho_star(depths, ...): argmax_rho chi_out per depth (grid bracket + golden
  section), for the diagonal and the off-diagonal element.

Peer ("loop"): one call of response(k0, depth, rho, ...)['chi_out'] per
(depth, rho) pair, timed on a subsample of 4 depths x 16 rhos.  The cost of
one call is fitted as a + b * depth (least squares over the 4 depths) and
summed over the 64 x 256 grid to extrapolate the full loop; the ratio is
extrapolated-loop / chi_out_curves.  The subsample values are checked against
the chi_out_curves grid (1e-12 relative).
"""
from __future__ import annotations

import _common as C
import numpy as np

from resprop.numeric.theories.fischer import field_theory as ft

DEPTHS = np.linspace(10, 640, 64).astype(int)
RHOS = np.geomspace(1e-3, 3, 256)
K0, K0_OFF, SW2, SB2 = 0.05, 0.03, 1.25, 0.05
SUB_DEPTH_IDX = np.array([0, 21, 42, 63])
SUB_RHO_IDX = np.linspace(0, RHOS.size - 1, 16).astype(int)
REPEATS_CURVES, REPEATS_STAR, REPEATS_LOOP = 5, 3, 3
RTOL = 1e-12


def curves() -> ft.ChiOutCurves:
    return ft.chi_out_curves(rho=RHOS, depths=DEPTHS, input_kernel=K0, sigma_w2=SW2, sigma_b2=SB2,
                             input_kernel_offdiag=K0_OFF)


def star() -> ft.RhoStarResult:
    return ft.rho_star(DEPTHS, K0, SW2, SB2, input_kernel_offdiag=K0_OFF)


def one(depth: int, rho: float) -> dict:
    return ft.response(K0, int(depth), float(rho), SW2, SB2, input_kernel_offdiag=K0_OFF)


def run() -> dict:
    info = C.machine_info()
    C.print_machine(info)
    assert np.unique(DEPTHS).size == 64
    print(f"\nrho* scan: {DEPTHS.size} depths ({DEPTHS[0]}..{DEPTHS[-1]}) x {RHOS.size} rho "
          f"({RHOS[0]:g}..{RHOS[-1]:g}), input_kernel={K0}, input_kernel_offdiag={K0_OFF}, sigma_w2={SW2}, sigma_b2={SB2}, erf\n")

    t_cur = C.timeit(curves, repeats=REPEATS_CURVES)
    t_star = C.timeit(star, repeats=REPEATS_STAR)
    grid = t_cur.pop("value")
    rs = t_star.pop("value")

    # peer: per-(depth, rho) loop on a subsample, best of REPEATS_LOOP per call
    sub_depths = DEPTHS[SUB_DEPTH_IDX]
    per_call = np.empty((SUB_DEPTH_IDX.size, SUB_RHO_IDX.size))
    errs = []
    for a, di in enumerate(SUB_DEPTH_IDX):
        for b, ri in enumerate(SUB_RHO_IDX):
            t = C.timeit(lambda: one(DEPTHS[di], RHOS[ri]), repeats=REPEATS_LOOP)
            per_call[a, b] = t["best_s"]
            r = t["value"]
            errs.append(C.max_rel_err(r["chi_out"], grid["chi_out"][di, ri]))
            errs.append(C.max_rel_err(r["chi_out_offdiag"], grid["chi_out_offdiag"][di, ri]))
    max_err = max(errs)
    agree = max_err <= RTOL
    mean_per_depth = per_call.mean(axis=1)
    b_slope, a_icpt = np.polyfit(sub_depths.astype(float), mean_per_depth, 1)
    loop_total = RHOS.size * float(np.sum(a_icpt + b_slope * DEPTHS))
    n_eval = DEPTHS.size * RHOS.size
    ratio = loop_total / t_cur["best_s"]

    C.print_table(["method", "best s", "median s", "per (depth,rho) us"], [
        ["chi_out_curves (64 x 256, vectorised)", t_cur["best_s"], t_cur["median_s"], 1e6 * t_cur["best_s"] / n_eval],
        ["rho_star (64 depths, diag + offdiag)", t_star["best_s"], t_star["median_s"], ""],
        ["loop over response(), extrapolated", loop_total, "", 1e6 * loop_total / n_eval],
    ])
    print(f"\nloop subsample (best-of-{REPEATS_LOOP} per call, ms):")
    C.print_table(["depth", "min ms", "mean ms", "max ms"],
                  [[int(L), 1e3 * row.min(), 1e3 * row.mean(), 1e3 * row.max()] for L, row in zip(sub_depths, per_call)])
    print(f"fit per call: {1e3 * a_icpt:.3f} ms + {1e6 * b_slope:.2f} us x depth")
    C.warn_if_contended(t_cur, t_star)
    print(f"\nspeed ratio loop (extrapolated) / chi_out_curves: {ratio:.0f}x")
    print(f"subsample chi_out / chi_out_offdiag vs grid: max relative difference {max_err:.2e} -> "
          f"{'OK' if agree else 'FAIL'} (tolerance {RTOL:g})")
    print(f"rho* at depth {DEPTHS[0]}: {rs['rho_star'][0]:.6g} (offdiag {rs['rho_star_offdiag'][0]:.6g}); "
          f"at depth {DEPTHS[-1]}: {rs['rho_star'][-1]:.6g} (offdiag {rs['rho_star_offdiag'][-1]:.6g})")
    if not agree:
        raise SystemExit("response() loop and chi_out_curves disagree beyond 1e-12 relative")
    return {
        "benchmark": "rho_star", "machine": info,
        "params": {"depths": DEPTHS.tolist(), "rho": {"geomspace": [1e-3, 3.0, RHOS.size]}, "input_kernel": K0,
                   "input_kernel_offdiag": K0_OFF, "sigma_w2": SW2, "sigma_b2": SB2, "activation": "erf"},
        "chi_out_curves": C.stats(t_cur),
        "rho_star": C.stats(t_star),
        "loop_subsample": {"depths": sub_depths.tolist(), "rho_index": SUB_RHO_IDX.tolist(),
                           "best_s_per_call": per_call.tolist(), "repeats": REPEATS_LOOP,
                           "fit_intercept_s": float(a_icpt), "fit_slope_s_per_layer": float(b_slope)},
        "loop_extrapolated_s": loop_total,
        "speed_ratio_loop_over_chi_out_curves": ratio,
        "max_rel_err_subsample": max_err, "rtol": RTOL, "agree": agree,
        "rho_star_values": {"rho_star": rs["rho_star"], "rho_star_offdiag": rs["rho_star_offdiag"]},
    }


if __name__ == "__main__":
    C.main(run)
