"""Li-Nica-Roy vanilla ResNet, single-input statistics E[G], Var[G] at n = d = 100: resprop's reduced Monte Carlo
path (resprop.numeric.engine.monte_carlo.simulate_log_gaussian, NumPy float64) vs a dense PyTorch CPU implementation.

Network (alpha = lam = 1/sqrt(2), ReLU, eq. (1) of Li, Nica & Roy):
    z^0 ~ N(0, I_n),  z^l = alpha z^{l-1} + lam sqrt(2/n) W^l relu(z^{l-1}),  W^l_ij iid N(0, 1),
    G = ln(||z^d||^2 / n) - d ln(alpha^2 + lam^2).

Peer: PyTorch 2.13 (CPU build, float64, torch's default intra-op threads) in benchmarks/.venv-peers
(``bash benchmarks/setup_peers.sh``): samples batched in chunks of 200, every layer draws the chunk's
(200, n, n) weight stack with ``Tensor.normal_`` and applies it with one ``torch.bmm``.  This file is
its own worker: the venv's Python runs it with ``--worker`` (JSON job on stdin, JSON result on stdout).

resprop: ``simulate_log_gaussian(method="reduced")``, which never forms a weight matrix
(W phi =d ||phi|| g, O(n) per layer and sample).  Both are timed for the same number of samples
(400): torch with a 20-sample warm-up and best of 2, resprop with one warm-up call and best of 5.
Throughput = layers x width x samples / s.  The check: E[G] of the two agree within 4 standard errors
(both SEs combined); Var[G] (jackknife SE) is reported.  Target (issue 5): reduced >= 50x faster.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
N = D = 100
ALPHA = LAM = 1 / math.sqrt(2)
SAMPLES, CHUNK, SEED = 400, 200, 1
TORCH_REPEATS, REDUCED_REPEATS = 2, 5
Z_MAX, TARGET_RATIO = 4.0, 50.0


# --------------------------------------------------------------------------- worker (runs in the peers venv)
def torch_dense(n: int, d: int, samples: int, seed: int, chunk: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    c = LAM * math.sqrt(2.0 / n)
    log_growth = math.log(ALPHA**2 + LAM**2)
    G = torch.empty(samples, dtype=torch.float64)
    for start in range(0, samples, chunk):
        m = min(chunk, samples - start)
        z = torch.randn(m, n, generator=gen, dtype=torch.float64)
        W = torch.empty(m, n, n, dtype=torch.float64)
        for _ in range(d):
            W.normal_(generator=gen)
            z = ALPHA * z + c * torch.bmm(W, torch.relu(z).unsqueeze(2)).squeeze(2)
        G[start:start + m] = torch.log((z * z).sum(dim=1) / n) - d * log_growth
    return G.numpy()


def worker() -> None:
    import torch

    sys.path.insert(0, str(HERE))
    import _common as C

    job = json.loads(sys.stdin.read())
    torch_dense(job["n"], job["d"], 20, job["seed"] + 1000, job["chunk"])  # warm-up
    t = C.timeit(lambda: torch_dense(job["n"], job["d"], job["samples"], job["seed"], job["chunk"]),
                 repeats=job["repeats"], warmup=0, extra=1)
    G = t.pop("value")
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "timing": t,
                      "G": G.tolist()}))


# --------------------------------------------------------------------------- main (resprop's environment)
def run() -> dict:
    import _common as C
    import numpy as np

    from resprop.numeric.engine.mc_estimators import mean_se, variance_se
    from resprop.numeric.engine.monte_carlo import simulate_log_gaussian

    info, skipped = C.start_peer_benchmark("peers_torch")
    if skipped:
        return skipped
    print(f"\nLi-Nica-Roy vanilla ResNet, n = d = {N}, alpha = lam = 1/sqrt(2), {SAMPLES} samples each\n")
    job = {"n": N, "d": D, "samples": SAMPLES, "seed": SEED, "chunk": CHUNK, "repeats": TORCH_REPEATS}
    proc = subprocess.run([str(C.PEERS_PYTHON), str(Path(__file__).resolve()), "--worker"], input=json.dumps(job),
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"torch worker failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    G_t, t_t = np.array(out["G"]), out["timing"]

    t_r = C.timeit(lambda: simulate_log_gaussian(width=N, depth=D, alpha=ALPHA, lam=LAM, samples=SAMPLES, seed=SEED,
                                                 method="reduced").G, repeats=REDUCED_REPEATS)
    G_r = t_r.pop("value")
    stats = {}
    for name, G in (("torch_dense", G_t), ("resprop_reduced", G_r)):
        m, se = mean_se(G)
        v, vse = variance_se(G)
        stats[name] = {"mean_G": float(m), "mean_G_se": float(se), "var_G": float(v), "var_G_se": float(vse)}
    a, b = stats["torch_dense"], stats["resprop_reduced"]
    z = (a["mean_G"] - b["mean_G"]) / math.hypot(a["mean_G_se"], b["mean_G_se"])
    z_var = (a["var_G"] - b["var_G"]) / math.hypot(a["var_G_se"], b["var_G_se"])
    work = D * N * SAMPLES
    thr_t, thr_r = work / t_t["best_s"], work / t_r["best_s"]
    ratio = t_t["best_s"] / t_r["best_s"]
    C.print_table(["implementation", "best s", "median s", "ms / sample", "layer*neuron*sample / s", "E[G]",
                   "Var[G]"], [
        [f"PyTorch {out['torch']} dense bmm ({out['threads']} threads)", t_t["best_s"], t_t["median_s"],
         1e3 * t_t["best_s"] / SAMPLES, thr_t, f"{a['mean_G']:.3f} +- {a['mean_G_se']:.3f}",
         f"{a['var_G']:.2f} +- {a['var_G_se']:.2f}"],
        ["resprop reduced (NumPy)", t_r["best_s"], t_r["median_s"], 1e3 * t_r["best_s"] / SAMPLES, thr_r,
         f"{b['mean_G']:.3f} +- {b['mean_G_se']:.3f}", f"{b['var_G']:.2f} +- {b['var_G_se']:.2f}"],
    ])
    C.warn_if_contended(t_t, t_r)
    agree = abs(z) < Z_MAX
    print(f"\nreduced / torch dense: {ratio:.0f}x faster for the same {SAMPLES} samples "
          f"({'met' if ratio >= TARGET_RATIO else 'MISSED'}: target >= {TARGET_RATIO:g}x); "
          f"E[G] z = {z:+.2f} ({'OK' if agree else 'FAIL'}, |z| < {Z_MAX:g}); Var[G] z = {z_var:+.2f}")
    if not agree:
        raise SystemExit(f"E[G] of torch dense and resprop reduced differ by {z:.1f} standard errors")
    return {"benchmark": "peers_torch", "machine": info,
            "params": {"n": N, "d": D, "alpha": ALPHA, "lam": LAM, "samples": SAMPLES, "chunk": CHUNK, "seed": SEED},
            "torch": {"version": out["torch"], "threads": out["threads"], **t_t,
                      "throughput_layer_neuron_samples_per_s": thr_t, **a},
            "resprop_reduced": {**t_r, "throughput_layer_neuron_samples_per_s": thr_r, **b},
            "ratio_reduced_over_torch": ratio, "mean_G_z": z, "var_G_z": z_var, "agree": agree,
            "target_met": ratio >= TARGET_RATIO}


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        import _common as C

        C.main(run)
