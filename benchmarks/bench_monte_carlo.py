"""Throughput of the Li-Nica-Roy ResNet Monte Carlo engine (resprop.numeric.engine.monte_carlo) and the cost of Var[G] to 1%.

Vanilla ResNet, alpha = lam = 1/sqrt(2), at n = d = 50 and n = d = 100:

* ``simulate_log_gaussian(method="reduced")``: the exact reduction W phi =d ||phi|| g,
  O(n) per layer and sample, batched over samples;
* ``simulate_log_gaussian(method="dense")``: every n x n weight matrix drawn, batched matmul;
* peer: the per-sample Python loop with dense weights a researcher would write
  (``z = alpha z + lam sqrt(2/n) W @ relu(z)`` with a fresh ``W`` per layer).

Throughput = layers x width x samples / second; ratios are taken within this run.
As a check the mean of G of dense and peer is compared with the reduced path
(z-score with both standard errors); the script exits with an error if |z| > 5.

Then the wall time to estimate Var[G] at n = d = 100 to 1% relative standard
error (vanilla and balanced, reduced path): batches of samples with fresh seeds
are drawn until ``var_G_se / var_G < 0.01`` (jackknife SE, resprop.numeric.engine.mc_estimators).
"""
from __future__ import annotations

import math

import _common as C
import numpy as np

from resprop.numeric.engine.mc_estimators import mean_se, variance_se
from resprop.numeric.engine.monte_carlo import simulate_log_gaussian

ALPHA = LAM = 1 / math.sqrt(2)
SIZES = (50, 100)
SAMPLES = {50: {"reduced": 20000, "dense": 200, "peer": 60},
           100: {"reduced": 5000, "dense": 40, "peer": 15}}
REPEATS = 3
TARGET_RSE, BATCH, MAX_SAMPLES = 0.01, 4000, 400_000


def peer(n: int, d: int, samples: int, seed: int) -> np.ndarray:
    """Naive per-sample loop with explicit dense weights; returns G per sample (eq. (1), section 5)."""
    rng = np.random.default_rng(seed)
    c = LAM * math.sqrt(2.0 / n)
    G = np.empty(samples)
    for s in range(samples):
        z = rng.standard_normal(n)
        for _ in range(d):
            W = rng.standard_normal((n, n))
            z = ALPHA * z + c * (W @ np.maximum(z, 0.0))
        G[s] = math.log(z @ z / n) - d * math.log(ALPHA**2 + LAM**2)
    return G


def engine(n: int, method: str, samples: int, seed: int = 0) -> np.ndarray:
    return simulate_log_gaussian(width=n, depth=n, alpha=ALPHA, lam=LAM, samples=samples, seed=seed, method=method).G


def var_g_to_target(n: int, balanced: bool) -> dict:
    """Draw batches (seeds 1000, 1001, ...) until the jackknife RSE of Var[G] is below TARGET_RSE."""
    parts, k = [], 0
    while True:
        s = simulate_log_gaussian(width=n, depth=n, alpha=ALPHA, lam=LAM, balanced=balanced, samples=BATCH,
                                  seed=1000 + k)
        parts.append(s)
        k += 1
        G = np.concatenate([p.G for p in parts])
        var, se = variance_se(G)
        if se / var < TARGET_RSE or G.size >= MAX_SAMPLES:
            break
    mean, mean_se_ = mean_se(G)
    act = np.concatenate([p.act_sq for p in parts])
    h_total, h_se = mean_se(act.sum(axis=1) - 0.5 * n)
    return {"samples": int(G.size), "batches": k, "var_G": float(var), "var_G_se": float(se),
            "rse": float(se / var), "mean_G": float(mean), "mean_G_se": float(mean_se_),
            "C_hat": float(h_total), "C_hat_se": float(h_se)}  # C_hat = h_total n/d with n = d


def run() -> dict:
    info = C.machine_info()
    C.print_machine(info)
    print(f"\nsimulate_log_gaussian, vanilla, alpha = lam = 1/sqrt(2), n = d; warm-up 1, best of {REPEATS}\n")
    rows, out, bad = [], {}, []
    for n in SIZES:
        res = {}
        for method in ("reduced", "dense", "peer"):
            S = SAMPLES[n][method]
            fn = (lambda: peer(n, n, S, seed=1)) if method == "peer" else (lambda: engine(n, method, S))
            t = C.timeit(fn, repeats=REPEATS)
            G = t.pop("value")
            m, se = mean_se(G)
            thr = n * n * S / t["best_s"]
            res[method] = {**t, "samples": S, "throughput_layer_neuron_samples_per_s": thr,
                           "per_sample_ms": 1e3 * t["best_s"] / S, "mean_G": float(m), "mean_G_se": float(se)}
            rows.append([f"n=d={n} {method}", S, t["best_s"], t["median_s"], 1e3 * t["best_s"] / S, thr])
        r = res["reduced"]
        for other in ("dense", "peer"):
            o = res[other]
            o["ratio_reduced_over_this"] = (r["throughput_layer_neuron_samples_per_s"]
                                            / o["throughput_layer_neuron_samples_per_s"])
            o["mean_G_z_vs_reduced"] = (o["mean_G"] - r["mean_G"]) / math.hypot(o["mean_G_se"], r["mean_G_se"])
            if abs(o["mean_G_z_vs_reduced"]) > 5:
                bad.append(f"n={n} {other}: mean G z = {o['mean_G_z_vs_reduced']:.1f}")
        res["ratio_dense_over_peer"] = (res["dense"]["throughput_layer_neuron_samples_per_s"]
                                        / res["peer"]["throughput_layer_neuron_samples_per_s"])
        out[f"n=d={n}"] = res
    C.print_table(["config", "samples", "best s", "median s", "ms / sample", "layer*neuron*sample / s"], rows)
    C.warn_if_contended(*(out[f"n=d={n}"][m] for n in SIZES for m in ("reduced", "dense", "peer")))
    print()
    for n in SIZES:
        o = out[f"n=d={n}"]
        print(f"n=d={n}: reduced / dense = {o['dense']['ratio_reduced_over_this']:.0f}x, "
              f"reduced / peer = {o['peer']['ratio_reduced_over_this']:.0f}x, dense / peer = "
              f"{o['ratio_dense_over_peer']:.1f}x; mean G z vs reduced: dense {o['dense']['mean_G_z_vs_reduced']:+.2f}, "
              f"peer {o['peer']['mean_G_z_vs_reduced']:+.2f}")

    n = 100
    print(f"\nVar[G] to {TARGET_RSE:.0%} relative SE at n=d={n} (reduced path, batches of {BATCH}):\n")
    var_rows, var_out = [], {}
    for balanced in (False, True):
        name = "balanced" if balanced else "vanilla"
        t = C.timeit(lambda: var_g_to_target(n, balanced), repeats=1, warmup=0)
        v = {k: val for k, val in t.items() if k != "value"}
        v.update(t["value"])
        var_out[name] = v
        var_rows.append([name, v["samples"], v["best_s"], v["var_G"], v["var_G_se"], v["mean_G"], v["C_hat"]])
    C.print_table(["network", "samples", "wall s", "Var[G]", "SE", "E[G]", "C_hat (h_total n/d)"], var_rows)
    C.warn_if_contended(*var_out.values())
    if bad:
        raise SystemExit("engine and peers disagree: " + "; ".join(bad))
    return {"benchmark": "monte_carlo", "machine": info,
            "params": {"alpha": ALPHA, "lam": LAM, "sizes": SIZES, "samples": {str(k): v for k, v in SAMPLES.items()},
                       "repeats": REPEATS, "var_target_rse": TARGET_RSE, "var_batch": BATCH},
            "results": out, "var_G_to_1pct": var_out}


if __name__ == "__main__":
    C.main(run)
