"""NNGP kernel + response for P inputs: resprop.numeric.theories.fischer.field_theory.nngp vs a naive full-matrix NumPy loop.

Workload: P = 1000 inputs (random unit-norm rows in d_in = 100, scaled so that
K^(0)_aa = 0.05), depth L = 200, rho = 0.1, sigma_w2 = 1.25, sigma_b2 = 0.05,
activation erf.  nngp returns K^(L), the readout kernel K_out, and the
responses chi^(L), chi_out for all P x P elements; it iterates only the upper
triangle and threads the off-diagonal kernels over the available cores.

Peer ("naive"): the same recursion written directly on full P x P matrices,
no symmetry, no threads:

    C   = rho^2 (sw2 (2/pi) arcsin(2K / sqrt((1+2K_i)(1+2K_j))) + sb2),  K += C
    g   = 4 / (pi sqrt((1+2K_i)(1+2K_j) - 4K^2))   off the diagonal,
          4 / (pi (1+2K) sqrt(1+4K))               on the diagonal,
    eta = rho^2 sw2 g chi,  chi += eta   (g evaluated at the previous K)

and the readout K_out = sw2_out <phi phi>(K^(L)) + sb2_out, chi_out = sw2_out g(K^(L)) chi^(L).
The two must agree to 1e-12 relative on every element of all four outputs.
For orientation the input check nngp performs on K0
(resprop.numeric.engine.validation.kernel_matrix: symmetry + eigvalsh PSD test) is timed on its own.
"""
from __future__ import annotations

import math

import _common as C
import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.theories.fischer import field_theory as ft

P, D_IN, K_DIAG = 1000, 100, 0.05
DEPTH, RHO, SW2, SB2 = 200, 0.1, 1.25, 0.05
REPEATS = 3
RTOL = 1e-12


def make_k0(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Xn = rng.standard_normal((P, D_IN))
    Xn /= np.linalg.norm(Xn, axis=1, keepdims=True)
    # input_kernel(X, 1, 0) = X X^T / d_in, so X = sqrt(K_DIAG d_in) Xn gives K0 = K_DIAG Xn Xn^T
    K0 = ft.input_kernel(Xn * math.sqrt(K_DIAG * D_IN), 1.0, 0.0)
    assert np.allclose(K0, K_DIAG * Xn @ Xn.T, rtol=1e-14, atol=1e-16)
    return K0


def resprop(K0: np.ndarray) -> dict[str, np.ndarray]:
    return ft.nngp(K0, depth=DEPTH, rho=RHO, sigma_w2=SW2, sigma_b2=SB2, activation="erf")


def _g(K: np.ndarray, s: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """<phi' phi'> off the diagonal, <phi'^2 + phi phi''> on it (erf)."""
    g = 4.0 / (np.pi * np.sqrt(np.outer(s, s) - 4.0 * K * K))
    kd = K[idx, idx]
    g[idx, idx] = 4.0 / (np.pi * (1.0 + 2.0 * kd) * np.sqrt(1.0 + 4.0 * kd))
    return g


def _mean_phi_phi(K: np.ndarray, s: np.ndarray) -> np.ndarray:
    return (2.0 / np.pi) * np.arcsin(2.0 * K / np.sqrt(np.outer(s, s)))


def naive(K0: np.ndarray, depth: int = DEPTH, rho: float = RHO, sw2: float = SW2, sb2: float = SB2,
          sw2_out: float = SW2, sb2_out: float = SB2) -> dict[str, np.ndarray]:
    """Straightforward full-matrix recursion (no symmetry, no threads)."""
    K = np.array(K0, dtype=float)
    chi = np.ones_like(K)
    idx = np.arange(K.shape[0])
    r2 = rho * rho
    for _ in range(depth):
        s = 1.0 + 2.0 * np.diagonal(K)          # 1 + 2 K_ii
        g = _g(K, s, idx)
        Cl = r2 * (sw2 * _mean_phi_phi(K, s) + sb2)
        K = K + Cl
        chi = chi + r2 * sw2 * g * chi
    s = 1.0 + 2.0 * np.diagonal(K)
    return {"K": K, "K_out": sw2_out * _mean_phi_phi(K, s) + sb2_out,
            "chi": chi, "chi_out": sw2_out * _g(K, s, idx) * chi}


def run() -> dict:
    info = C.machine_info()
    C.print_machine(info)
    K0 = make_k0()
    print(f"\nnngp: P={P} (upper triangle {P * (P - 1) // 2} + {P} diagonal elements), depth={DEPTH}, "
          f"rho={RHO}, sigma_w2={SW2}, sigma_b2={SB2}, erf; warm-up 1, best of {REPEATS}\n")

    t_res = C.timeit(lambda: resprop(K0), repeats=REPEATS)
    t_nai = C.timeit(lambda: naive(K0), repeats=REPEATS)
    errs = {k: C.max_rel_err(t_res["value"][k], t_nai["value"][k]) for k in ("K", "K_out", "chi", "chi_out")}
    agree = all(e <= RTOL for e in errs.values())
    del t_res["value"], t_nai["value"]
    t_val = C.timeit(lambda: V.kernel_matrix("K0", K0), repeats=REPEATS)
    del t_val["value"]
    m_res = C.peak_memory(lambda: resprop(K0))
    m_nai = C.peak_memory(lambda: naive(K0))
    speedup = t_nai["best_s"] / t_res["best_s"]

    C.print_table(["implementation", "best s", "median s", "peak MiB (tracemalloc)"], [
        ["resprop nngp (triangle, threaded)", t_res["best_s"], t_res["median_s"], m_res["peak_MiB"]],
        ["  of which: K0 check (kernel_matrix)", t_val["best_s"], t_val["median_s"], ""],
        ["naive NumPy (full P x P)", t_nai["best_s"], t_nai["median_s"], m_nai["peak_MiB"]],
    ])
    C.warn_if_contended(t_res, t_nai)
    print(f"\nspeed ratio naive / resprop (best-of-{REPEATS}): {speedup:.2f}x")
    print("max elementwise relative difference resprop vs naive: "
          + ", ".join(f"{k} {v:.2e}" for k, v in errs.items())
          + f"  -> {'OK' if agree else 'FAIL'} (tolerance {RTOL:g})")
    if not agree:
        raise SystemExit("resprop and the naive recursion disagree beyond 1e-12 relative")
    return {
        "benchmark": "nngp_response", "machine": info,
        "params": {"P": P, "d_in": D_IN, "k0_diag": K_DIAG, "depth": DEPTH, "rho": RHO, "sigma_w2": SW2,
                   "sigma_b2": SB2, "activation": "erf", "workers": ft._workers()},
        "resprop": {**C.stats(t_res), **m_res},
        "naive": {**C.stats(t_nai), **m_nai},
        "resprop_input_validation": C.stats(t_val),
        "speed_ratio_naive_over_resprop": speedup,
        "max_rel_err": errs, "rtol": RTOL, "agree": agree,
    }


if __name__ == "__main__":
    C.main(run)
