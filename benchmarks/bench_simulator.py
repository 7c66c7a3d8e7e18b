"""Throughput of the finite-width simulator resprop.numeric.engine.simulate.simulate_kernels: reduced vs dense sampling.

Workload: width N = 500, depth L = 20, rho = 0.1, sigma_w2 = 1.25, sigma_b2 = 0.05,
erf, read-in variances sigma_w2_in = 1, sigma_b2_in = 0 and inputs X (P x 100,
random unit-norm rows scaled so that C^(0)_aa = 0.05), for P = 1 and P = 2.

* method="reduced" (1000 samples): W phi + b drawn as G R from the conditional
  Gram matrix, no weight matrix formed.
* method="dense" (20 samples): every N x N weight matrix drawn explicitly.

Throughput = layers x width x samples / second (samples = independent network
initialisations).  The ratio is reduced / dense throughput.  As a sanity check
the sample means of K^(L)_aa of the two methods are compared (z-score with
the standard errors of both; informative only, not a pass/fail criterion).
"""
from __future__ import annotations

import math

import _common as C
import numpy as np

from resprop.numeric.engine.simulate import simulate_kernels

WIDTH, DEPTH, RHO, SW2, SB2 = 500, 20, 0.1, 1.25, 0.05
D_IN, K_DIAG = 100, 0.05
SAMPLES = {"reduced": 1000, "dense": 20}
REPEATS = 3


def make_x(P: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D_IN))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X * math.sqrt(K_DIAG * D_IN)  # C^(0) = X X^T / d_in has diagonal K_DIAG


def sim(X: np.ndarray, method: str) -> dict[str, np.ndarray]:
    return simulate_kernels(X, depth=DEPTH, width=WIDTH, rho=RHO, sigma_w2=SW2, sigma_b2=SB2,
                            sigma_w2_in=1.0, sigma_b2_in=0.0, samples=SAMPLES[method], seed=0, method=method)


def run() -> dict:
    info = C.machine_info()
    C.print_machine(info)
    print(f"\nsimulate_kernels: N={WIDTH}, depth={DEPTH}, rho={RHO}, sigma_w2={SW2}, sigma_b2={SB2}, erf; "
          f"samples reduced={SAMPLES['reduced']}, dense={SAMPLES['dense']}; warm-up 1, best of {REPEATS}\n")
    rows, out = [], {}
    for P in (1, 2):
        X = make_x(P)
        res = {}
        for method in ("reduced", "dense"):
            t = C.timeit(lambda: sim(X, method), repeats=REPEATS)
            K_L = np.diagonal(t.pop("value")["K_emp"][:, -1], axis1=-2, axis2=-1)  # (samples, P)
            thr = DEPTH * WIDTH * SAMPLES[method] / t["best_s"]
            res[method] = {**t, "samples": SAMPLES[method], "throughput_layer_neuron_samples_per_s": thr,
                           "per_sample_ms": 1e3 * t["best_s"] / SAMPLES[method],
                           "K_emp_L_diag_mean": K_L.mean(axis=0),
                           "K_emp_L_diag_se": K_L.std(axis=0, ddof=1) / math.sqrt(K_L.shape[0])}
            rows.append([f"P={P} {method}", SAMPLES[method], t["best_s"], t["median_s"],
                         1e3 * t["best_s"] / SAMPLES[method], thr])
        r, d = res["reduced"], res["dense"]
        ratio = r["throughput_layer_neuron_samples_per_s"] / d["throughput_layer_neuron_samples_per_s"]
        z = (r["K_emp_L_diag_mean"] - d["K_emp_L_diag_mean"]) / np.hypot(r["K_emp_L_diag_se"], d["K_emp_L_diag_se"])
        out[f"P={P}"] = {**res, "throughput_ratio_reduced_over_dense": ratio, "K_emp_L_diag_z": z}
    C.print_table(["config", "samples", "best s", "median s", "ms / sample", "layer*neuron*sample / s"], rows)
    C.warn_if_contended(*(out[f"P={P}"][m] for P in (1, 2) for m in ("reduced", "dense")))
    print()
    for P in (1, 2):
        o = out[f"P={P}"]
        print(f"P={P}: throughput ratio reduced / dense = {o['throughput_ratio_reduced_over_dense']:.1f}x; "
              f"K_emp^(L)_aa mean reduced {np.round(o['reduced']['K_emp_L_diag_mean'], 5)} vs dense "
              f"{np.round(o['dense']['K_emp_L_diag_mean'], 5)} (z = {np.round(o['K_emp_L_diag_z'], 2)})")
    return {"benchmark": "simulator", "machine": info,
            "params": {"width": WIDTH, "depth": DEPTH, "rho": RHO, "sigma_w2": SW2, "sigma_b2": SB2,
                       "sigma_w2_in": 1.0, "sigma_b2_in": 0.0, "d_in": D_IN, "k0_diag": K_DIAG,
                       "activation": "erf", "samples": SAMPLES},
            "results": out}


if __name__ == "__main__":
    C.main(run)
