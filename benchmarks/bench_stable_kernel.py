"""Stable ResNet NNGP + NTK for P = 1000 points on the circle at depth L = 1000: resprop.numeric.theories.stable.stable_resnet.kernels
vs a naive full-matrix NumPy recursion.

Workload: P = 1000 uniform random points on the unit circle, sigma_w^2 = 2, sigma_b^2 = 0, uniform scaling
lambda^2 = 1/L, L = 1000 (eqs 5 and 9).  resprop runs the generated fused ReLU recursion
(generated/residual_recursions.py) through residual_kernel.propagate: the upper triangle only, in row strips
taken through blocks of layers on a thread pool, with a common log scale (so the unscaled network does not
overflow).  Target (issue): at least 5x the naive loop.

Peer ("naive"): eqs (5) and (9) written directly on full P x P matrices, as printed,
    C = Q / sqrt(diag diag^T);  Psi = sb + sw/2 (1 + f(C)/C) Q;  Psi' = sw (pi - arccos C)/(2 pi)
    Theta += lam^2 (Psi + Psi' Theta);  Q += lam^2 Psi
(f(C)/C evaluated as is; no symmetry, no threads, no rescaling).  Off the diagonal both must agree to 1e-8
relative to the largest entry (elementwise relative errors are meaningless where Q(x, x') crosses zero; the
residual difference comes from arccos(C) near C = 1, whose round-off both share).  On the diagonal the naive
recursion evaluates arccos at a computed C = 1 - O(1e-16), an error of O(1e-8) in Psi' that the NTK
accumulates; resprop uses C = 1 exactly there, so the diagonal difference is reported, not asserted.
A second, short check runs both on the *unscaled* network at L = 1100 where 2^L overflows float64: the naive
recursion returns inf, resprop a finite log-diagonal equal to L ln 2.
"""
from __future__ import annotations

import _common as C
import numpy as np

from resprop.numeric.theories.stable import stable_resnet as S

P, DEPTH, SW2, SB2 = 1000, 1000, 2.0, 0.0
RTOL = 1e-8


def points(seed: int = 0) -> np.ndarray:
    th = np.random.default_rng(seed).uniform(0, 2 * np.pi, P)
    return np.c_[np.cos(th), np.sin(th)]


def resprop(Q0: np.ndarray, depth: int = DEPTH, scaling: str = "uniform") -> dict:
    k = S.kernels(Q0, depth, scaling, SW2, SB2)
    scale = np.exp(k["log_scale"])
    return {"Q": scale * k["Q_normalised"], "Theta": scale * k["ntk_normalised"], "log_Q_diag": k["log_Q_diag"]}


def naive(Q0: np.ndarray, depth: int = DEPTH, lam2: float | None = None) -> dict:
    lam2 = 1.0 / depth if lam2 is None else lam2
    Q = np.array(Q0, float)
    T = Q.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(depth):
            d = np.sqrt(np.diagonal(Q))
            Cc = np.clip(Q / np.outer(d, d), -1, 1)
            f = (np.sqrt(1 - Cc**2) - Cc * np.arccos(Cc)) / np.pi
            psi = SB2 + SW2 / 2 * (1 + f / Cc) * Q
            psi_d = SW2 * (np.pi - np.arccos(Cc)) / (2 * np.pi)
            T = T + lam2 * (psi + psi_d * T)
            Q = Q + lam2 * psi
    return {"Q": Q, "Theta": T}


def run() -> dict:
    info = C.machine_info()
    C.print_machine(info)
    Q0 = S.input_kernel_matrix(points(), SW2, SB2)
    print(f"\nNNGP + NTK: P={P} points on the circle, depth={DEPTH}, uniform scaling, sigma_w2={SW2}, "
          f"sigma_b2={SB2}; one timed call each after a warm-up at depth 10\n")
    resprop(Q0, 10), naive(Q0, 10)
    t_res = C.timeit(lambda: resprop(Q0), repeats=1, warmup=0)
    t_nai = C.timeit(lambda: naive(Q0), repeats=1, warmup=0)
    off = ~np.eye(P, dtype=bool)
    errs, diag_errs = {}, {}
    for k in ("Q", "Theta"):
        a, b = t_res["value"][k], t_nai["value"][k]
        scale = np.max(np.abs(b))
        errs[k] = float(np.max(np.abs(a - b)[off]) / scale)
        diag_errs[k] = float(np.max(np.abs(np.diagonal(a) - np.diagonal(b))) / scale)
    agree = all(e <= RTOL for e in errs.values())
    del t_res["value"], t_nai["value"]
    C.print_table(["implementation", "best s", "per layer ms"], [
        ["resprop kernels (triangle, threaded, log scale)", t_res["best_s"], 1e3 * t_res["best_s"] / DEPTH],
        ["naive NumPy (full P x P)", t_nai["best_s"], 1e3 * t_nai["best_s"] / DEPTH],
    ])
    C.warn_if_contended(t_res, t_nai)
    speedup = t_nai["best_s"] / t_res["best_s"]
    print(f"\nspeed ratio naive / resprop: {speedup:.2f}x; max off-diagonal difference / max entry "
          + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()) + f" -> {'OK' if agree else 'FAIL'} (tol {RTOL:g});"
          + " diagonal " + ", ".join(f"{k} {v:.1e}" for k, v in diag_errs.items()))
    # overflow check on a small set of points
    Q0s = Q0[:20, :20]
    deep = 1100
    with np.errstate(over="ignore"):
        r_deep = resprop(Q0s, deep, "unscaled")
    n_deep = naive(Q0s, deep, lam2=1.0)
    finite_res = bool(np.all(np.isfinite(r_deep["log_Q_diag"])))
    finite_naive = bool(np.all(np.isfinite(n_deep["Q"])))
    print(f"unscaled, L={deep}: resprop log Q_diag = {r_deep['log_Q_diag'][0]:.4f} (L ln 2 = {deep * np.log(2):.4f}),"
          f" finite={finite_res}; naive finite={finite_naive}")
    if not agree:
        raise SystemExit("resprop and the naive recursion disagree beyond 1e-8 off the diagonal")
    return {"benchmark": "stable_kernel", "machine": info,
            "params": {"P": P, "depth": DEPTH, "sigma_w2": SW2, "sigma_b2": SB2, "scaling": "uniform"},
            "resprop": C.stats(t_res), "naive": C.stats(t_nai), "speed_ratio_naive_over_resprop": speedup,
            "max_offdiag_err": errs, "max_diag_err": diag_errs, "agree": agree,
            "unscaled_L1100": {"resprop_finite": finite_res, "naive_finite": finite_naive}}


if __name__ == "__main__":
    C.main(run)
