"""The generated kernel engine (`resprop.kernel`) against neural-tangents, interleaved call by call.

Workload: residual network with a read-in layer, K^(0) = sigma_w2 X X^T / d_in + sigma_b2 (= Theta^(0)), then L
blocks z <- z + rho (W phi(z) + b) (gamma = 1, rho = 0.1, sigma_w2 = 1.25, sigma_b2 = 0.05); X has P rows of equal
norm (K^(0)_aa = 0.1) in d_in = 100.  Sizes (P, L) = (1000, 200), (200, 50) and (1000, 50); activations erf,
ReLU, GELU (closed-form duals on both sides: resprop's generated recursion, NT's `Erf`, `Relu`,
`Gelu(approximate=False)`) and tanh (no closed form: resprop's tabulated recursion, NT's
`ElementwiseNumerical(jnp.tanh, deg=25)`, Gauss-Hermite quadrature of degree 25 per dimension, its default);
NNGP alone and NNGP + NTK.

Interleaving: for each configuration a neural-tangents worker per precision (benchmarks/peer_nt_worker.py
--serve, in benchmarks/.venv-peers; float32 = JAX's default and float64 = JAX_ENABLE_X64) compiles the
network once (the first call, reported), then the script runs, REPEATS times, one resprop call, one NT float32
call and one NT float64 call in turn, so that the load of the machine hits all three alike; the medians are
reported (and the best).  A fresh worker per (activation, P, L) gives its peak memory: the process's peak RSS
minus its RSS after the imports (after NNGP alone, then after NNGP + NTK).  resprop's peak memory is the
tracemalloc peak of one call (NumPy buffers included), measured in a separate, untimed call.

Left out, and why: NT's tanh in float64 at P = 1000 (its (P^2, deg^2) quadrature arrays need ~11 GB).  NT's
tanh takes seconds to minutes per call, so it gets fewer timed calls: float32 3 at P = 1000, L = 50 and 1 at
P = 1000, L = 200 (~50 s and ~140 s per mode on an idle machine; skipped with --quick), float64 1.

Accuracy: max |resprop - NT| / max |NT| off and on the diagonal, against NT float64 and float32.  For tanh, NT
float64's own quadrature error dominates that difference; resprop's tanh is checked against mpmath in
tests/test_kernel_engine.py (-m slow).  The matched-accuracy comparison for tanh: at P = 200, L = 50 (NNGP,
float64) NT runs with deg = 10, 15 and 25, and each is compared with resprop and timed once, so the degree NT
needs for a given accuracy, and its time there, are on record.

Elementwise limit: the time of the bare elementwise maths of each layer, L x (one pass of each transcendental
NumPy ufunc in the activation's dual kernels, plus one multiply and one add per kernel updated) over the
P(P+1)/2 upper-triangle elements, in cache-sized strips on two threads (as the engine runs).  The ratio
engine / limit is the distance to it (tanh: none; its tabulated path evaluates an interpolant instead).

Targets (issue 13): NNGP >= 10x and NNGP + NTK >= 5x NT float32 for closed-form activations at P = 1000,
L = 200; GELU as fast as erf; tanh within 3x of erf at P = 1000, L = 50, under 1 GB peak, and >= 3x faster
than ElementwiseNumerical.  The script exits with an error when resprop and NT float64 differ by more than
1e-10 relative to the largest entry for a closed-form activation (ReLU NTK diagonal: 1e-7, NT's arccos at a
computed correlation 1 - eps), or by more than 1e-5 for tanh (NT's quadrature).
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _common as C
import numpy as np

import resprop

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peer_nt_worker.py"
SIZES = ((1000, 200), (200, 50), (1000, 50), (4000, 50))
#: the configurations also run on inputs of unequal norm (raw Gaussian rows: no depth collapse)
UNEQUAL = ((1000, 200), (4000, 50))
#: tanh on inputs of unequal norm (the general path: a certified Mehler series per element; NT's quadrature costs
#: the same whatever the norms)
UNEQUAL_TANH = ((1000, 50),)
#: resprop's routes, timed interleaved with NT: the default (compiled kernels, depth collapsed where the inputs
#: allow), the compiled kernels layer by layer, and the NumPy kernels (the reference)
ROUTES = {"resprop": {}, "layered": {"collapse": False}, "numpy": {"backend": "numpy", "collapse": False}}
ACTIVATIONS = ("erf", "relu", "gelu", "tanh")
MODES = {"nngp": ("nngp",), "nngp+ntk": ("nngp", "ntk")}
D_IN, K0_DIAG, RHO, SW2, SB2 = 100, 0.1, 0.1, 1.25, 0.05
REPEATS = 5
TANH_DEG = 25
TANH_DEGREES = (10, 15, 25)
FAIL_RTOL, TANH_FAIL_RTOL, RELU_NTK_DIAG_RTOL = 1e-10, 1e-5, 1e-7
STRIP = 65536
#: the transcendental ufuncs of each activation's dual kernels (derive/residual.py): NNGP, and added by the NTK
LIMIT_UFUNCS = {
    "erf": (("arcsin",), ("sqrt", "divide")),
    "relu": (("arccos", "sqrt"), ()),
    "gelu": (("arcsin", "sqrt", "divide"), ("divide",)),
}


def make_x(P: int, seed: int = 0) -> np.ndarray:
    """P random rows of equal norm with K^(0)_aa = sigma_w2 |x|^2 / d_in + sigma_b2 = K0_DIAG."""
    rng = np.random.default_rng(seed)
    Xn = rng.standard_normal((P, D_IN))
    Xn /= np.linalg.norm(Xn, axis=1, keepdims=True)
    return Xn * math.sqrt((K0_DIAG - SB2) * D_IN / SW2)


class Worker(C.JsonLineWorker):
    """One neural-tangents process (peer_nt_worker.py --serve) at one precision."""

    def __init__(self, x64: bool) -> None:
        super().__init__([str(C.PEERS_PYTHON), str(WORKER), "--serve"] + (["--x64"] if x64 else []),
                         name="neural-tangents worker", timeout=60)


def make_x_unequal(P: int, seed: int = 0) -> np.ndarray:
    """P standard Gaussian rows in d_in dimensions, scaled so that the mean K^(0)_aa is K0_DIAG (norms spread)."""
    X = np.random.default_rng(seed).standard_normal((P, D_IN))
    return X * math.sqrt((K0_DIAG - SB2) / SW2)


def call_resprop(X: np.ndarray, act: str, L: int, ntk: bool, route: str = "resprop") -> dict[str, np.ndarray]:
    out = resprop.kernel(X, act, L, SW2, SB2, gamma=1.0, branch_scale=RHO, ntk=ntk, **ROUTES[route])
    return {"nngp": out[0], "ntk": out[1]} if ntk else {"nngp": out}


def timed_resprop(X, act, L, ntk, route: str = "resprop") -> tuple[float, float]:
    c0 = os.times()
    t0 = time.perf_counter()
    call_resprop(X, act, L, ntk, route)
    wall = time.perf_counter() - t0
    c1 = os.times()
    return wall, c1.user + c1.system - c0.user - c0.system


def elementwise_limit(P: int, L: int, act: str, mode: str) -> float | None:
    """L x the time of the activation's bare elementwise maths on the P(P+1)/2 upper-triangle elements, in strips
    of STRIP elements on two threads (the fastest of 7 passes: a bound, so contention must not inflate it)."""
    if act not in LIMIT_UFUNCS:
        return None
    nngp, extra = LIMIT_UFUNCS[act]
    names = nngp + (extra if mode == "nngp+ntk" else ())
    kernels = 2 if mode == "nngp+ntk" else 1
    ops = [getattr(np, n) for n in names] + [np.multiply, np.add] * kernels
    n = P * (P + 1) // 2
    halves = (n // 2, n - n // 2)
    rng = np.random.default_rng(1)
    bufs = [(rng.uniform(0.05, 0.9, min(h, STRIP)), np.empty(min(h, STRIP))) for h in halves]

    def work(k: int) -> None:
        a, out = bufs[k]
        for s0 in range(0, halves[k], STRIP):
            m = min(STRIP, halves[k] - s0)
            for f in ops:
                if f.nin == 1:
                    f(a[:m], out=out[:m])
                else:
                    f(a[:m], out[:m], out=out[:m])

    times = []
    with ThreadPoolExecutor(2) as pool:
        for _ in range(8):
            t0 = time.perf_counter()
            list(pool.map(work, (0, 1)))
            times.append(time.perf_counter() - t0)
    return L * min(times[1:])


def tanh_matched_accuracy(tmp: Path) -> dict:
    """NT's ElementwiseNumerical tanh at several quadrature degrees (float64, P = 200, L = 50, NNGP): its
    difference from resprop and one warm call's time each, beside resprop's median time."""
    P, L = 200, 50
    X = make_x(P)
    np.save(tmp / "x_deg.npy", X)
    mine = call_resprop(X, "tanh", L, False)["nngp"]
    t_mine = statistics.median(timed_resprop(X, "tanh", L, False)[0] for _ in range(REPEATS))
    rows = {}
    w = Worker(x64=True)
    try:
        for deg in TANH_DEGREES:
            key = f"deg{deg}"
            prep = w.ask(op="prepare", key=key, X=str(tmp / "x_deg.npy"), activation="tanh", deg=deg, depth=L,
                         rho=RHO, sigma_w2=SW2, sigma_b2=SB2, get=["nngp"], save=str(tmp / key))
            ref = np.load(prep["paths"]["nngp"])
            t = w.ask(op="time", key=key)["wall_s"]
            w.ask(op="drop", key=key)
            dev = C.scaled_deviations({"nngp": mine}, {"nngp": ref})["nngp"]
            rows[deg] = {"nt_f64_s": t, "first_call_s": prep["first_call_s"], "max_dev_offdiag": dev["offdiag"],
                         "max_dev_diag": dev["diag"], "ratio_nt_over_resprop": t / t_mine}
    finally:
        w.close()
    return {"P": P, "depth": L, "resprop_median_s": t_mine, "degrees": rows}


def _empty_table_cache() -> None:
    """Forget the rho tables (`dual_tables`' byte-bounded cache): a tanh configuration's first call then pays for
    its own tables, as a user's first call at those parameters does."""
    from resprop.numeric.engine import dual_tables, residual_kernel

    dual_tables._table.cache_clear()
    residual_kernel._PACKED.clear()  # and their packed copies


def run_config(P: int, L: int, act: str, tmp: Path, quick: bool, unequal: bool = False) -> dict:
    X = make_x_unequal(P) if unequal else make_x(P)
    xpath = tmp / f"x{P}{'u' if unequal else ''}.npy"
    np.save(xpath, X)
    big_tanh = act == "tanh" and P >= 1000
    precisions = ("f32",) if big_tanh else ("f32", "f64")
    if P >= 4000:
        precisions = ("f32",)  # NT float64 at P = 4000: the same code at twice the memory; float32 is its default
    # NT's quadrature tanh costs seconds to minutes per call: fewer timed calls there (the medians say how many)
    nt_repeats = {p: REPEATS for p in precisions}
    if act == "tanh":
        nt_repeats = {"f32": 1 if L > 50 and big_tanh else (3 if big_tanh else REPEATS), "f64": 1}
    workers = {p: Worker(x64=(p == "f64")) for p in precisions}
    out: dict = {"nt_versions": {p: w.hello for p, w in workers.items()}, "modes": {}}
    try:
        for mode, get in MODES.items():
            ntk = mode == "nngp+ntk"
            key = f"{act}_P{P}_L{L}_{mode}"
            prep = {p: w.ask(op="prepare", key=key, X=str(xpath), activation=act, deg=TANH_DEG, depth=L, rho=RHO,
                             sigma_w2=SW2, sigma_b2=SB2, get=list(get), save=str(tmp / f"{key}_{p}"))
                    for p, w in workers.items()}
            routes = [r for r in ROUTES if act != "tanh" or r == "resprop"]  # tanh: one route (tabulated)
            _empty_table_cache()  # the first call builds this run's rho tables (another depth may have built them)
            t_first = time.perf_counter()
            mine = call_resprop(X, act, L, ntk)  # warm-up (compiles on a fresh machine), and the value compared
            first_s = time.perf_counter() - t_first
            for r in routes[1:]:
                call_resprop(X, act, L, ntk, r)
            others = {r: call_resprop(X, act, L, ntk, r) for r in routes[1:]}
            peak = C.peak_memory(lambda X=X, ntk=ntk: call_resprop(X, act, L, ntk))["peak_MiB"]
            times: dict[str, list] = {**{r: [] for r in routes}, **{p: [] for p in workers}}
            cpu: dict[str, list] = {k: [] for k in times}
            for r in range(REPEATS):
                # the routes take turns at going first: the first call after NT's pays for the memory NT's
                # process has just given back (measured: up to 2x at P = 4000), which the median then drops
                for route in routes[r % len(routes):] + routes[:r % len(routes)]:
                    w_s, c_s = timed_resprop(X, act, L, ntk, route)
                    times[route].append(w_s)
                    cpu[route].append(c_s)
                for p, w in workers.items():
                    if r < nt_repeats[p]:
                        a = w.ask(op="time", key=key)
                        times[p].append(a["wall_s"])
                        cpu[p].append(a["cpu_s"])
            rec: dict = {"resprop": {"median_s": statistics.median(times["resprop"]), "best_s": min(times["resprop"]),
                                     "times_s": times["resprop"], "cpu_s": cpu["resprop"], "peak_MiB": peak,
                                     "first_call_s": first_s,
                                     "output_MiB": P * P * 8 * (2 if ntk else 1) / 2**20}}
            for route in routes[1:]:
                rec[route] = {"median_s": statistics.median(times[route]), "best_s": min(times[route]),
                              "times_s": times[route], "cpu_s": cpu[route],
                              "deviation_from_resprop": C.scaled_deviations(others[route], mine)}
            for p, w in workers.items():
                a = w.ask(op="drop", key=key)
                ref = {k: np.load(v).astype(float) for k, v in prep[p]["paths"].items()}
                rec[f"nt_{p}"] = {"median_s": statistics.median(times[p]), "best_s": min(times[p]),
                                  "times_s": times[p], "cpu_s": cpu[p], "first_call_s": prep[p]["first_call_s"],
                                  "peak_MiB": a["maxrss_MiB"] - w.hello["baseline_MiB"],
                                  "deviation": C.scaled_deviations(mine, ref)}
                rec[f"ratio_nt_{p}_over_resprop"] = rec[f"nt_{p}"]["median_s"] / rec["resprop"]["median_s"]
            limit = elementwise_limit(P, L, act, mode)
            rec["elementwise_limit_s"] = limit
            rec["resprop_over_limit"] = None if limit is None else rec["resprop"]["median_s"] / limit
            out["modes"][mode] = rec
    finally:
        for w in workers.values():
            w.close()
    out["inputs"] = "unequal norms (Gaussian rows)" if unequal else "equal norms"
    return out


def check_agreement(results: dict) -> list[str]:
    bad = []
    for key, cfg in results.items():
        act = key.split("_")[0]
        for mode, rec in cfg["modes"].items():
            nt = rec.get("nt_f64") or rec["nt_f32"]
            tol = TANH_FAIL_RTOL if (act == "tanh" or "nt_f64" not in rec) else FAIL_RTOL
            if "nt_f64" not in rec:
                tol = 1e-3  # float32 only: its round-off
            for k, d in nt["deviation"].items():
                diag_tol = max(RELU_NTK_DIAG_RTOL, tol) if (act == "relu" and k == "ntk") else tol
                if d["offdiag"] > tol or d["diag"] > diag_tol:
                    bad.append(f"{key} {mode} {k}: off {d['offdiag']:.1e}, diag {d['diag']:.1e}")
    return bad


def fastest_route(P: int = 1000, L: int = 200, rows: int = 64) -> dict:
    """The compiled pair kernels of the generated module against the same source compiled with every fast-math
    flag (``fastmath=True``: reassociation, reciprocals, no NaN/inf: the fastest fused route this source gives on
    this CPU, not safe for resprop's inputs), one thread, one strip of ``rows`` x P elements through L layers; the
    best of 7 each.  Also the ulp-level difference between the two."""
    import importlib.util

    import resprop.generated.residual_compiled as safe

    src = Path(safe.__file__).read_text().replace('FASTMATH = {"contract"}', "FASTMATH = True")
    src = src.replace("cache=True", "cache=False")  # compiled here, from a string: nothing to cache
    spec = importlib.util.spec_from_loader("residual_compiled_fastmath", loader=None)
    fast = importlib.util.module_from_spec(spec)
    exec(compile(src, "<residual_compiled with fastmath=True>", "exec"), fast.__dict__)
    rng = np.random.default_rng(0)
    d = rng.uniform(0.5, 1.5, (L, P))
    g, w, sb = np.ones(L), np.full(L, RHO**2 * SW2), np.full(L, RHO**2 * SB2)
    out = {}
    for name in ("erf_nngp", "erf_nngp_ntk", "relu_nngp", "relu_nngp_ntk", "gelu_nngp", "gelu_nngp_ntk"):
        n_states = len(safe.RECURSIONS[name]["states"])
        base = [rng.uniform(-0.3, 0.3, (rows, P)) for _ in range(n_states)]
        res, best = {}, {}
        for label, mod in (("compiled", safe), ("fastmath", fast)):
            prep = getattr(mod, f"{name}_prepare")(d, g, w, sb)
            run = getattr(mod, f"{name}_run")
            times = []
            for _ in range(8):
                st = [b.copy() for b in base]
                t0 = time.perf_counter()
                run(*st, 0, 0, *prep)
                times.append(time.perf_counter() - t0)
            best[label] = min(times[1:])
            res[label] = st
        with np.errstate(all="ignore"):
            dev = max(float(np.nanmax(np.abs(a - b)) / np.nanmax(np.abs(b))) for a, b in zip(res["compiled"], res["fastmath"]))
        computed = rows * P - rows * (rows + 1) // 2  # the kernels start each row above the diagonal
        out[name] = {"compiled_ns_per_element_layer": best["compiled"] / (computed * L) * 1e9,
                     "fastmath_ns_per_element_layer": best["fastmath"] / (computed * L) * 1e9,
                     "compiled_over_fastmath": best["compiled"] / best["fastmath"], "max_rel_difference": dev}
    return out


def targets(results: dict, fastest: dict | None = None, paired: dict | None = None) -> dict:
    def med(key, mode):
        return results[key]["modes"][mode]

    t = {}

    def add(name, measured, goal, met):
        t[name] = {"measured": measured, "goal": goal, "met": bool(met)}

    for P, L in ((1000, 200), (4000, 50)):
        for act in ("erf", "relu", "gelu"):
            for mode, goal in (("nngp", 10.0), ("nngp+ntk", 5.0)):
                for suffix, what in (("", "equal norms, default route"), ("_unequal", "unequal norms")):
                    key = f"{act}_P{P}_L{L}{suffix}"
                    if key in results:
                        r = med(key, mode)["ratio_nt_f32_over_resprop"]
                        add(f"{act} {mode} P={P} L={L} ({what}) vs NT f32", r, f">= {goal:g}x", r >= goal)
                key = f"{act}_P{P}_L{L}"
                if key in results and "layered" in med(key, mode):
                    r = med(key, mode)["nt_f32"]["median_s"] / med(key, mode)["layered"]["median_s"]
                    add(f"{act} {mode} P={P} L={L} (equal norms, compiled layers) vs NT f32", r, f">= {goal:g}x",
                        r >= goal)
        for mode in MODES:
            for suffix in ("", "_unequal"):
                rec = (paired or {}).get(f"P{P}_L{L}{suffix} {mode}")
                if rec is not None:  # the paired measurement (`gelu_over_erf`): both calls of a round, one load
                    r = rec["ratio_median"]
                    add(f"gelu / erf time {mode} P={P} L={L}{' unequal norms' if suffix else ''} (paired)", r,
                        "<= 1.5", r <= 1.5)
            # ReLU's NNGP is collapsed in the angle; its NTK runs the layers (depth_collapse.build says why)
            for act in ("erf", "gelu") + (("relu",) if mode == "nngp" else ()):
                key = f"{act}_P{P}_L{L}"
                if key in results:
                    r = med(key, mode)["ratio_nt_f32_over_resprop"]
                    add(f"{act} {mode} P={P} L={L} depth collapsed (equal norms) vs NT f32", r, ">= 30x", r >= 30)
    for mode in MODES:
        if "erf_P200_L50" in results:
            for act in ("erf", "relu", "gelu"):
                if mode == "nngp+ntk":
                    r = med(f"{act}_P200_L50", mode)["ratio_nt_f32_over_resprop"]
                    add(f"{act} nngp+ntk P=200 L=50 vs NT f32", r, ">= 2x", r >= 2)
        for P, L, suffix in ((1000, 200, ""), (1000, 50, ""), (1000, 50, "_unequal")):
            key = f"tanh_P{P}_L{L}{suffix}"
            if key in results:
                what = "unequal norms" if suffix else "equal norms"
                r = med(key, mode)["ratio_nt_f32_over_resprop"]
                add(f"tanh {mode} P={P} L={L} ({what}) vs NT ElementwiseNumerical f32", r, ">= 10x", r >= 10)
                # the first call at these parameters builds the rho tables (later calls find them in the
                # table cache): NT's warm time against it, so the cache flatters nothing
                first = med(key, mode)["resprop"]["first_call_s"]
                r = med(key, mode)["nt_f32"]["median_s"] / first
                add(f"tanh {mode} P={P} L={L} ({what}) first call (tables built) vs NT ElementwiseNumerical f32", r,
                    ">= 10x", r >= 10)
    for key, cfg in results.items():
        for mode, rec in cfg["modes"].items():
            out_mib = rec["resprop"].get("output_MiB")
            if out_mib:
                extra = rec["resprop"]["peak_MiB"] / out_mib - 1
                add(f"peak memory above the output, {key} {mode}", extra, "<= 10%", extra <= 0.10)
    for name, r in (fastest or {}).items():
        add(f"{name} compiled / fastmath=True route (P=1000, L=200, one thread)", r["compiled_over_fastmath"],
            "<= 1.5", r["compiled_over_fastmath"] <= 1.5)
    return t


#: rounds of the paired GELU / erf timing (`gelu_over_erf`)
PAIRED_ROUNDS = 9


def gelu_over_erf(quick: bool = False) -> dict:
    """GELU's time over erf's for resprop alone, measured in pairs: each round calls erf and GELU back to back (the
    order alternating), and the ratio of each round's two calls is taken; the median of those ratios is the
    figure.  Both calls of a round see the same load, which the ratio of two configurations' medians, timed
    minutes apart, does not (it gave 1.30 and 1.67 for one case in two runs)."""
    out = {}
    for P, L in ((1000, 200), (4000, 50)):
        if quick and P > 1000:
            continue
        for unequal in (False, True):
            X = make_x_unequal(P) if unequal else make_x(P)
            for mode in MODES:
                ntk = mode == "nngp+ntk"
                for act in ("erf", "gelu"):
                    call_resprop(X, act, L, ntk)  # warm
                ratios, times = [], {"erf": [], "gelu": []}
                for r in range(PAIRED_ROUNDS):
                    pair = {}
                    for act in (("erf", "gelu") if r % 2 == 0 else ("gelu", "erf")):
                        pair[act] = timed_resprop(X, act, L, ntk)[0]
                        times[act].append(pair[act])
                    ratios.append(pair["gelu"] / pair["erf"])
                key = f"P{P}_L{L}{'_unequal' if unequal else ''} {mode}"
                out[key] = {"ratio_median": statistics.median(ratios), "ratios": ratios, "times_s": times}
                print(f"  gelu / erf, {key}: {out[key]['ratio_median']:.3f} (paired, {PAIRED_ROUNDS} rounds)",
                      flush=True)
    return out


def run(quick: bool = False, only: tuple[str, ...] = (), merge: Path | None = None) -> dict:
    """``only``: run just the configurations whose key (``act_P<P>_L<L>``) contains one of these words; ``merge``:
    an earlier JSON record of this script whose other configurations (and matched-accuracy runs) are kept, so a
    configuration measured under load can be re-measured alone.  The targets are evaluated on the union."""
    info, skipped = C.start_peer_benchmark("kernel_engine")
    if skipped:
        return skipped
    print(f"\nresprop.kernel vs neural-tangents, interleaved, median of {REPEATS}: rho={RHO}, sigma_w2={SW2}, "
          f"sigma_b2={SB2}, K0_aa={K0_DIAG}, d_in={D_IN}; tanh peer ElementwiseNumerical(deg={TANH_DEG})\n")
    earlier = json.loads(merge.read_text()) if merge else {}
    earlier = earlier.get("benchmarks", {}).get("kernel_engine", earlier)  # run_all's record holds this script's
    results: dict = {}
    rows = []
    # the process's one-time imports (SymPy, SciPy, Numba: ~3 s here) on a tiny erf call, so that a configuration's
    # first call measures its own tables and compiled kernels whichever configuration runs first (--only)
    call_resprop(make_x(4), "erf", 1, True)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        configs = [(P, L, act, False) for P, L in SIZES for act in ACTIVATIONS if not (act == "tanh" and P > 1000)]
        configs += [(P, L, act, True) for P, L in UNEQUAL for act in ("erf", "relu", "gelu")]
        configs += [(P, L, "tanh", True) for P, L in UNEQUAL_TANH]
        for P, L, act, unequal in configs:
            if quick and act == "tanh" and P >= 1000 and L > 50:
                continue
            key = f"{act}_P{P}_L{L}" + ("_unequal" if unequal else "")
            if only and not any(w in key for w in only):
                if key in earlier.get("results", {}):  # kept: when and on which commit it was measured go with it
                    kept = earlier["results"][key]
                    results[key] = kept | {
                        "measured_at": kept.get("measured_at") or earlier.get("timestamp", "earlier"),
                        "resprop_commit": kept.get("resprop_commit") or earlier.get("resprop_commit")}
                continue
            t0 = time.perf_counter()
            cfg = run_config(P, L, act, tmp, quick, unequal)
            results[key] = cfg
            for mode, rec in cfg["modes"].items():
                f64 = rec.get("nt_f64")
                dev = (f64 or rec["nt_f32"])["deviation"]
                rows.append([f"{act} P={P} L={L}{' unequal' if unequal else ''} {mode}",
                             rec["resprop"]["median_s"],
                             rec["layered"]["median_s"] if "layered" in rec else "-",
                             rec["numpy"]["median_s"] if "numpy" in rec else "-",
                             rec["nt_f32"]["median_s"], f64["median_s"] if f64 else "-",
                             f"{rec['ratio_nt_f32_over_resprop']:.1f}x",
                             f"{rec['ratio_nt_f64_over_resprop']:.1f}x" if f64 else "-",
                             f"{rec['resprop']['peak_MiB']:.0f}", f"{rec['nt_f32']['peak_MiB']:.0f}",
                             f"{max(d['offdiag'] for d in dev.values()):.1e}",
                             f"{max(d['diag'] for d in dev.values()):.1e}",
                             "-" if rec["resprop_over_limit"] is None else f"{rec['resprop_over_limit']:.1f}x"])
            print(f"  {key}: {time.perf_counter() - t0:.0f} s", flush=True)
        matched = earlier["tanh_matched_accuracy"] if (only and "tanh_matched_accuracy" in earlier) \
            else tanh_matched_accuracy(tmp)
    fastest = earlier.get("fastest_route") if (only and "fastest_route" in earlier) else fastest_route()
    paired = earlier["gelu_over_erf"] if (only and "gelu_over_erf" in earlier and not any(
        w in ("gelu", "erf") for w in only)) else gelu_over_erf(quick)
    C.print_table(["config", "resprop s", "layered s", "numpy s", "NT f32 s", "NT f64 s", "NT32/resprop", "NT64/resprop",
                   "resprop MiB", "NT32 MiB", "dev off", "dev diag", "resprop/limit"], rows)
    print("(medians of interleaved calls; dev: max |resprop - NT| / max |NT|, NT float64 where run, else float32;"
          " MiB: peak above baseline)")
    print("\ntanh matched accuracy (P=200, L=50, NNGP, NT float64): resprop "
          f"{matched['resprop_median_s']:.3g} s")
    for deg, r in matched["degrees"].items():
        print(f"  deg {deg}: NT {r['nt_f64_s']:.3g} s ({r['ratio_nt_over_resprop']:.1f}x resprop), "
              f"max dev off-diag {r['max_dev_offdiag']:.1e}, diag {r['max_dev_diag']:.1e}")
    try:
        tg = targets(results, fastest, paired)
    except KeyError:  # a configuration of the targets was not run (--quick or --only without --merge)
        tg = {}
    for name, v in tg.items():
        print(f"target {name}: {v['measured']:.3g} ({v['goal']}: {'met' if v['met'] else 'NOT met'})")
    bad = check_agreement(results)
    if bad:
        raise SystemExit("resprop and neural-tangents disagree: " + "; ".join(bad))
    return {"benchmark": "kernel_engine", "machine": info,
            "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"),
            "params": {"sizes": SIZES, "unequal": UNEQUAL, "unequal_tanh": UNEQUAL_TANH, "routes": ROUTES, "activations": ACTIVATIONS, "rho": RHO, "sigma_w2": SW2, "sigma_b2": SB2,
                       "k0_diag": K0_DIAG, "d_in": D_IN, "repeats": REPEATS, "tanh_deg": TANH_DEG, "quick": quick,
                       "limit_ufuncs": LIMIT_UFUNCS},
            "results": results, "tanh_matched_accuracy": matched, "fastest_route": fastest, "gelu_over_erf": paired,
            "targets": tg}


def _pop_option(name: str) -> str | None:
    if name not in sys.argv:
        return None
    i = sys.argv.index(name)
    value = sys.argv[i + 1]
    del sys.argv[i:i + 2]
    return value


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    sys.argv = [a for a in sys.argv if a != "--quick"]
    only = tuple((_pop_option("--only") or "").split(",")) if "--only" in sys.argv else ()
    merge_from = _pop_option("--merge")
    C.main(lambda: run(quick, tuple(w for w in only if w), Path(merge_from) if merge_from else None))
