"""resprop.kernel vs neural-tangents on inputs of UNEQUAL norm (tanh, no closed form), with equal-norm rows beside.

Network (both sides): read-in K^(0) = sigma_w2 X X^T / d_in + sigma_b2 (= Theta^(0)), then L = 50 residual blocks
z <- z + lambda (W tanh(z) + b), lambda = 0.2, sigma_b2 = 0.05 (the parameters of the issue-23 report).  NT:
benchmarks/peer_nt_worker.py --serve (read-in Dense, then stax.repeat of serial(FanOut(2),
parallel(serial(ElementwiseNumerical(tanh, deg), Dense(W_std = lambda sqrt(sigma_w2), b_std = lambda sqrt(sigma_b2))),
Identity()), FanInSum())), float32 (JAX's default), deg = 25 (its default; float64 at P = 1000 needs ~11 GB).

Inputs (every row states ``equal_norms``):
* ``digits``: raw (unnormalised) sklearn load_digits pixels, 1797 rows of dim 64, values 0..16.  P = 1000: the first
  1000 rows.  P = 4000: row i is digit i mod 1797 plus U(0, 1) dequantisation noise per pixel (seed 0), so that all
  rows differ.  sigma_w2 = 1 / mean_a(|x_a|^2 / 64), i.e. the raw pixels with the weight variance that makes the
  MEAN K^(0)_aa equal to 1 (the norms stay unequal: K^(0)_aa spans ~[0.4, 2]).
* ``gauss``: standard-normal X of dim 10 (seed 0), sigma_w2 = 1 (K^(0)_aa ~ chi^2_10 / 10 + 0.05, ~[0.1, 3]).
* equal-norm rows: the same X with every row rescaled to the root-mean-square norm (then resprop uses one rho table
  per layer instead of the general path).

Timing, interleaved: per configuration a fresh resprop worker process (this script with --worker) and, where NT runs,
a fresh NT worker; each side's first call (resprop: loading its compiled kernels; NT: trace + compile) is reported
apart; then REPEATS rounds of (one resprop call, one NT call), medians of wall and process CPU seconds.
Peak memory: resprop: per call, the RSS high-water mark (VmHWM, reset before the call through /proc/self/clear_refs)
minus the RSS before it, i.e. what the call added at its peak, result arrays included (output_MiB: P^2 x 8 bytes per
kernel); NT: its worker's ru_maxrss minus its RSS after the imports (JIT compile included; float32 outputs).
Accuracy: reference = resprop with the tabulated expectations at RTOL = 1e-12 (residual_kernel.RTOL; the default is
1e-10, tests/test_dual_tables.py checks the general path against mpmath to 1e-10) on REF_ROWS sampled rows (a
kernel entry depends only on its pair, so the sub-kernel of the sample is the sample of the kernel); error =
max |K - K_ref| / max |K_ref| over that sub-kernel, per kernel.

    python benchmarks/bench_kernel_unequal.py [--quick] [--no-nt] [--sizes 1000,4000] [--kinds digits,gauss]
                                              [--repeats N] [--nt-equal] [--json PATH]
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _common as C
import numpy as np

HERE = Path(__file__).resolve().parent
NT_WORKER = HERE / "peer_nt_worker.py"
L, LAM, SB2, DEG = 50, 0.2, 0.05, 25
REF_ROWS = 60
REPEATS = 2


# --------------------------------------------------------------------------- inputs
def make_inputs(kind: str, P: int, equal: bool) -> tuple[np.ndarray, float]:
    """(X, sigma_w2) as described in the module docstring."""
    if kind == "digits":
        from sklearn.datasets import load_digits

        D = load_digits().data.astype(float)
        if P <= D.shape[0]:
            X = D[:P].copy()
        else:
            rng = np.random.default_rng(0)
            X = D[np.arange(P) % D.shape[0]] + rng.uniform(0.0, 1.0, (P, D.shape[1]))
        sw2 = 1.0 / float(np.mean(np.sum(X * X, axis=1) / X.shape[1]))
    else:
        X = np.random.default_rng(0).standard_normal((P, 10))
        sw2 = 1.0
    if equal:
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        X = X / norms * math.sqrt(float(np.mean(norms**2)))
    return X, sw2


# --------------------------------------------------------------------------- resprop worker (separate process)
def worker() -> None:
    """Line protocol on stdin/stdout: {"X": path, "sw2": .., "ntk": bool, "op": "time" | "ref", "rows": [...]}."""
    import resprop
    from resprop.numeric.engine import residual_kernel as RK

    print(json.dumps({"baseline_MiB": _status("VmRSS")}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "quit":
            break
        X = np.load(req["X"])
        if req["op"] == "ref":
            RK.RTOL = 1e-12
            X = X[np.asarray(req["rows"])]
        before = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # resets the RSS high-water mark VmHWM (Linux >= 4.0)
        c0, t0 = os.times(), time.perf_counter()
        out = resprop.kernel(X, "tanh", L, req["sw2"], SB2, branch_scale=LAM, ntk=req["ntk"], progress=False)
        wall = time.perf_counter() - t0
        c1 = os.times()
        peak = _status("VmHWM") - before  # what the call added at its peak (the result arrays included)
        paths = {}
        if req.get("save"):
            for name, arr in zip(("nngp", "ntk"), out if req["ntk"] else (out,)):
                paths[name] = f"{req['save']}_{name}.npy"
                np.save(paths[name], arr)
        del out
        RK.RTOL = 1e-10
        print(json.dumps({"wall_s": wall, "cpu_s": c1.user + c1.system - c0.user - c0.system, "peak_MiB": peak,
                          "paths": paths}), flush=True)


def _status(field: str) -> float:
    """A /proc/self/status field in MiB (VmRSS: resident now; VmHWM: its high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise KeyError(field)


Proc = C.JsonLineWorker


def _err(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(a - ref)) / np.max(np.abs(ref)))


# --------------------------------------------------------------------------- one configuration
def run_config(kind: str, P: int, equal: bool, ntk: bool, with_nt: bool, tmp: Path, repeats: int) -> dict:
    X, sw2 = make_inputs(kind, P, equal)
    xpath = tmp / f"{kind}_{P}_{int(equal)}.npy"
    np.save(xpath, X)
    d0 = sw2 * np.sum(X * X, axis=1) / X.shape[1] + SB2
    row = {"inputs": kind, "P": P, "L": L, "mode": "nngp+ntk" if ntk else "nngp", "equal_norms": equal,
           "sigma_w2": sw2, "sigma_b2": SB2, "lambda": LAM, "K0_diag_range": [float(d0.min()), float(d0.max())]}
    rows = np.sort(np.random.default_rng(1).choice(P, size=min(REF_ROWS, P), replace=False))
    rp = Proc([sys.executable, str(Path(__file__).resolve()), "--worker"])
    nt = None
    try:
        res: list[dict] = []
        ntr: list[dict] = []
        first = rp.ask(op="time", X=str(xpath), sw2=sw2, ntk=ntk, save=str(tmp / "rp"))
        if with_nt:
            nt = Proc([str(C.PEERS_PYTHON), str(NT_WORKER), "--serve"])
            prep = nt.ask(op="prepare", key="k", X=str(xpath), activation="tanh", deg=DEG, depth=L, rho=LAM,
                          sigma_w2=sw2, sigma_b2=SB2, get=["nngp", "ntk"] if ntk else ["nngp"],
                          save=str(tmp / "nt"))
            row["nt_first_call_s"] = prep["first_call_s"]
            row["nt_versions"] = {k: nt.hello[k] for k in ("neural_tangents", "jax", "dtype")}
        # a fresh process: the first call also pays loading the compiled kernels and the activation's SymPy compile
        # (~0.2-0.5 s); it is reported apart, as NT's first call (trace + compile) is, and the timed calls follow
        for _ in range(repeats):
            res.append(rp.ask(op="time", X=str(xpath), sw2=sw2, ntk=ntk))
            if nt is not None:
                ntr.append(nt.ask(op="time", key="k"))
        row["resprop_first_call_s"] = first["wall_s"]
        row["resprop_first_call_peak_MiB"] = first["peak_MiB"]
        row["resprop_wall_s"] = statistics.median(r["wall_s"] for r in res)
        row["resprop_cpu_s"] = statistics.median(r["cpu_s"] for r in res)
        row["resprop_peak_MiB"] = max(r["peak_MiB"] for r in res)
        row["output_MiB"] = (2 if ntk else 1) * P * P * 8 / 2**20
        ref = rp.ask(op="ref", X=str(xpath), sw2=sw2, ntk=ntk, rows=rows.tolist(), save=str(tmp / "ref"))
        names = ("nngp", "ntk") if ntk else ("nngp",)
        sub = np.ix_(rows, rows)
        row["resprop_err"] = {n: _err(np.load(first["paths"][n])[sub], np.load(ref["paths"][n])) for n in names}
        if nt is not None:
            row["nt_wall_s"] = statistics.median(r["wall_s"] for r in ntr)
            row["nt_cpu_s"] = statistics.median(r["cpu_s"] for r in ntr)
            row["nt_peak_MiB"] = max(r["maxrss_MiB"] for r in ntr) - nt.hello["baseline_MiB"]
            row["nt_err"] = {n: _err(np.load(prep["paths"][n])[sub].astype(float), np.load(ref["paths"][n]))
                             for n in names}
            row["speedup_wall"] = row["nt_wall_s"] / row["resprop_wall_s"]
            row["speedup_cpu"] = row["nt_cpu_s"] / row["resprop_cpu_s"]
        row["resprop_calls"] = res
        row["nt_calls"] = ntr
    finally:
        rp.close()
        if nt is not None:
            nt.close()
    return row


def run(sizes=(1000, 4000), with_nt: bool = True, quick: bool = False, kinds=("digits", "gauss"),
        repeats: int = REPEATS, nt_equal: bool = False) -> dict:
    info = C.machine_info()
    have_nt = with_nt and C.PEERS_PYTHON.exists()
    rows = []
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        for P in sizes:
            for kind in kinds:
                for ntk in (False, True):
                    for equal in (False, True):
                        # NT's cost does not depend on the norms; at P = 4000 its float32 (P^2, deg^2) quadrature
                        # arrays need ~40 GB, beyond this machine: resprop only there
                        # and does not depend on the norms (the same quadrature): by default NT runs beside the
                        # unequal-norm rows only (--nt-equal: beside both)
                        nt_here = have_nt and P <= 1000 and (not equal or nt_equal)
                        if quick and (P > 1000 or kind == "gauss"):
                            nt_here = False
                        t = time.perf_counter()
                        row = run_config(kind, P, equal, ntk, nt_here, tmp, 1 if quick else repeats)
                        row["config_s"] = time.perf_counter() - t
                        rows.append(row)
                        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_calls")}), flush=True)
    # the general path against the equal-norm path at the same P, inputs and mode
    for r in rows:
        if not r["equal_norms"]:
            twin = next(q for q in rows if q["equal_norms"] and all(q[k] == r[k] for k in ("inputs", "P", "mode")))
            r["unequal_over_equal_cpu"] = r["resprop_cpu_s"] / twin["resprop_cpu_s"]
            r["unequal_over_equal_wall"] = r["resprop_wall_s"] / twin["resprop_wall_s"]
    return {"benchmark": "kernel_unequal", "date": dt.datetime.now().isoformat(timespec="seconds"), "machine": info,
            "activation": "tanh", "nt_deg": DEG, "rows": rows}


def main() -> None:
    if "--worker" in sys.argv:
        worker()
        return
    args = sys.argv[1:]
    sizes = (1000, 4000)
    if "--sizes" in args:
        sizes = tuple(int(v) for v in args[args.index("--sizes") + 1].split(","))
    kinds = tuple(args[args.index("--kinds") + 1].split(",")) if "--kinds" in args else ("digits", "gauss")
    repeats = int(args[args.index("--repeats") + 1]) if "--repeats" in args else REPEATS
    out = run(sizes, with_nt="--no-nt" not in args, quick="--quick" in args, kinds=kinds, repeats=repeats,
              nt_equal="--nt-equal" in args)
    path = Path(args[args.index("--json") + 1]) if "--json" in args else HERE / "results" / "kernel_unequal.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    hdr = ["inputs", "P", "mode", "equal norms", "resprop wall", "resprop CPU", "unequal/equal CPU", "NT wall",
           "NT CPU", "NT/resprop wall", "resprop peak MiB", "NT peak MiB", "output MiB", "resprop err", "NT err"]
    table = []
    for r in out["rows"]:
        table.append([r["inputs"], r["P"], r["mode"], r["equal_norms"], r["resprop_wall_s"], r["resprop_cpu_s"],
                      r.get("unequal_over_equal_cpu", ""), r.get("nt_wall_s", ""), r.get("nt_cpu_s", ""),
                      r.get("speedup_wall", ""), r["resprop_peak_MiB"], r.get("nt_peak_MiB", ""), r["output_MiB"],
                      max(r["resprop_err"].values()), max(r["nt_err"].values()) if "nt_err" in r else ""])
    C.print_table(hdr, table)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
