"""The finite-width kernel engine `resprop.fluctuations` (issue 27, item 2): time O(P^2 depth) with a measured
constant, memory O(P^2) independent of depth; and the Monte Carlo a user would otherwise run, in the same run.

    python benchmarks/bench_fluctuations.py            # full grid (cells estimated > 120 s skipped; an estimated hour)
    python benchmarks/bench_fluctuations.py --quick    # small grid, cells estimated > 12 s skipped (a few minutes)
    python benchmarks/bench_fluctuations.py --profile  # only cProfile of one call (P = 32, depth 16, tanh)
    python benchmarks/bench_fluctuations.py --large    # P = 1000, depth 10, all-different norms (~half an hour)
    ... [--json PATH] [--wait-idle SECONDS]
    # default JSON: benchmarks/results/fluctuations.json (fluctuations_quick.json, fluctuations_profile.json)

Workload.  ``resprop.fluctuations(X, act, depth, 256, 1.25, 0.05, gamma, branch_scale)`` (default rtol = 1e-6:
the engine raises the Hermite channels until its truncation estimate is below that) for the activations erf,
relu, tanh, gelu and the user expression ``sin(x) + x**2/10``, on two networks: "resnet" (gamma = 1,
branch_scale = 0.5) and "mlp" (gamma = 0, branch_scale = 1, the plain MLP h = W phi + b).  Inputs of UNEQUAL
norms: X = the rows of a standard normal (P, 10) matrix (numpy default_rng(0)) multiplied by
linspace(0.5, 2, P), so K^(0)_aa = 1.25 |x_a|^2 / 10 + 0.05 spreads over about [0.36, 5]; d_in = 10.  Grid:
P in (2, 8, 32, 64, 128) x depth in (1, 4, 16, 64) (--quick: P in (2, 8, 32), depth in (1, 4, 16)).  The width
enters only expected_kernel / standard_deviation, not the cost.

Timing.  For each (network, depth, P) the activations are called in interleaved rounds (one call of each in turn,
the order rotated each round), so the load hits all alike; one round, or three when the first round took less
than the round budget (20 s; --quick 3 s); the median is reported with the number of calls.  One untimed warm-up
call per activation first (P = 2, depth 2: imports, lambdify, basis and table caches).  A cell is skipped when
its estimated time exceeds the cell budget (120 s; --quick 12 s) and the row says so with the estimate: the
larger of (i) the same P at the deepest measured depth, scaled by depth, and (ii) the same depth at the largest
measured P >= 8, scaled by P(P+1)/2; the same depth at P = 2 scaled by P(P+1)/2 (an overestimate: the pair
recursion is batched 48 pairs at a time, and a lone pair with its two diagonals costs about 10x more per pair)
only if neither exists or the shallower same-P cell ran at fewer pair channels.  The constant depends on the
Hermite channels the engine chose (16 per pair when the truncation estimate converges at once, up to 64), so it
is reported per channel count.  An activation that fails (ParameterError, e.g. a variance leaving float64) at
some P is not run at larger P for that depth.

Reported per cell: seconds (median), the constant = seconds / (P(P-1)/2 pairs x depth) (diagonal work included
in the seconds; P = 2 has one pair), the channel counts used (``result.channels``: the largest on the diagonal
and off it), the peak memory: tracemalloc peak of a separate untimed call (bytes, and as a multiple of 8 P^2,
the size of one P x P float64 array; the result holds nine such arrays) where that call is estimated below the
memory budget (tracing slows this engine about TRACE_SLOWDOWN = 4x), and, for every timed call, the peak RSS
above the RSS before the call (VmHWM reset through /proc/self/clear_refs).  The memory check: at fixed P and
fixed channel counts, the ratio of the largest to the smallest traced peak across depths.

Peer.  No library computes the O(1/width) corrections, so the peer is the Monte Carlo a user would run:
``simulate_finite_width`` (numeric/engine/fluctuation_mc.py, the reduced sampler) of the same network at width
256, P = 8, depth 4 and 16, "resnet" network, interleaved with the engine call round by round.  Reaching the
engine's accuracy (rtol 1e-6) by sampling is out of reach, so the comparison is the time the MC needs for 1%
relative standard error on variance[0, 1] (and on mean_shift[0, 1]; and, for scale, to the engine's rtol = 1e-6 on
variance[0, 1]), EXTRAPOLATED from a measured short run of 4000 samples (--quick 2000) per round: SE from
width_statistics (40-block jackknife of n Cov; n std(K_law)/sqrt(S) for the mean shift) relative to the engine's
value, samples needed = S (SE / (0.01 |value|))^2, time = the measured time per sample x samples needed.  The SE
estimate itself is uncertain by ~1/sqrt(40) = 16% (so the extrapolated samples by ~30%), and the MC at one width
estimates n Var at n = 256, which differs from the engine's n -> infinity coefficient by O(depth / n) (a width
extrapolation would cost several such runs): both make the figure a lower bound on the MC's cost for the
engine's quantity.  The MC also returns every entry of the P x P variance from the same samples.

Large P (--large).  ``resprop.fluctuations(X, act, 10, 256, 1.0, 0.1, 1.0, 1.0)`` at P = 1000 (the default
collapse: certified interpolation in the two log-norms and the angle), erf, tanh and relu, on rows of a standard
normal (1000, 8) matrix (default_rng(0)) normalised and scaled by uniform(1, f) (default_rng(1)): all norms
different, over a factor f = 1.5 and f = 7 (K^(0)_aa over a factor ~2 and ~38).  Reported: seconds (one call), the
pair recursions the interpolation ran and how many pairs it left to the direct route, the peak RSS above the call's
start, and the direct route's time for all 499,500 pairs estimated from a batch of 48 of those pairs timed in the
same run (at the channel count the call used), and those 48 pairs' variance and mean shift against the call's,
as the largest difference in units of rtol x the field's scale (certified: 0.01).  The first configuration also runs with WORKERS = 1 (one thread)
for the thread scaling.

The machine load (other processes' busy cores before, during every timed call, and after) and the versions are
printed and stored.
"""
from __future__ import annotations

import cProfile
import datetime as dt
import io
import math
import os
import pstats
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import _common as C
import numpy as np

import resprop
from resprop.numeric.engine.fluctuation_mc import simulate_finite_width, width_statistics

HERE = Path(__file__).resolve().parent
D_IN, SW2, SB2, WIDTH = 10, 1.25, 0.05, 256
SCALES = (0.5, 2.0)
ACTIVATIONS = ("erf", "relu", "tanh", "gelu", "sin(x) + x**2/10")
NETWORKS = {"resnet": (1.0, 0.5), "mlp": (0.0, 1.0)}
MODES = {
    "full": {"Ps": (2, 8, 32, 64, 128), "depths": (1, 4, 16, 64), "cell_budget": 120.0, "mem_budget": 120.0,
             "round_budget": 20.0, "peer_acts": ACTIVATIONS, "peer_samples": 4000, "peer_rounds": 3},
    "quick": {"Ps": (2, 8, 32), "depths": (1, 4, 16), "cell_budget": 12.0, "mem_budget": 6.0,
              "round_budget": 3.0, "peer_acts": ("tanh",), "peer_samples": 2000, "peer_rounds": 2},
}
PEER_P, PEER_DEPTHS, PEER_NET, TARGET_RSE = 8, (4, 16), "resnet", 0.01
#: tracemalloc slows this engine about this much (measured: P = 2, depth 16, tanh, 3.8 s -> 15.4 s)
TRACE_SLOWDOWN = 4.0
PROFILE = {"P": 32, "depth": 16, "activation": "tanh", "network": "resnet"}


def make_x(P: int, seed: int = 0) -> np.ndarray:
    """Rows of a standard normal (P, D_IN) matrix scaled by linspace(0.5, 2, P): unequal norms."""
    X = np.random.default_rng(seed).standard_normal((P, D_IN))
    return X * np.linspace(*SCALES, P)[:, None]


def call(X: np.ndarray, act: str, depth: int, net: str):
    gamma, bs = NETWORKS[net]
    return resprop.fluctuations(X, act, depth, WIDTH, SW2, SB2, gamma, bs)


# ------------------------------------------------------------------------------------------ measurement helpers
def _status_kib(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def timed(fn):
    """One call: (wall s, other processes' busy cores during it or None, peak RSS above the RSS before it in bytes
    or None, value)."""
    hwm_ok = _reset_hwm()  # VmHWM := the current RSS, read just after
    rss0 = _status_kib("VmRSS")
    s0, c0 = C._cpu_times(), C._own_cpu()
    t0 = time.perf_counter()
    value = fn()
    wall = time.perf_counter() - t0
    s1, c1 = C._cpu_times(), C._own_cpu()
    hwm = _status_kib("VmHWM")
    others = None
    if s0 is not None and s1 is not None and wall >= 5.0 / C._HZ:
        others = max(0.0, ((s1[0] - s1[1]) - (s0[0] - s0[1])) / C._HZ - (c1 - c0)) / wall
    rss = 1024 * (hwm - rss0) if (hwm_ok and hwm is not None and rss0 is not None) else None
    return wall, others, rss, value


def traced_peak(fn) -> int:
    """tracemalloc peak (bytes above the traced baseline) of one call (`_common.peak_memory`)."""
    return int(round(C.peak_memory(fn)["peak_MiB"] * 2**20))


def _pairs(P: int) -> int:
    return max(1, P * (P - 1) // 2)


def _elements(P: int) -> int:
    return P * (P + 1) // 2


def estimate(done: dict, net: str, act: str, P: int, depth: int) -> tuple[float | None, str]:
    """Time estimate of a cell from the measured cells of the same network and activation: the larger of the same P
    at the deepest measured depth scaled by depth, and the same depth at the largest measured P >= 8 scaled by
    P(P+1)/2; the same depth at P = 2 scaled by P(P+1)/2 (an overestimate: one pair is an unbatched recursion,
    about 10x dearer per pair than a batch) only when neither exists, or when the shallower same-P cell ran at fewer
    pair channels (its depth scaling would then underestimate)."""
    mine = {(p, d): r for (n, a, p, d), r in done.items() if n == net and a == act and r.get("median_s")}
    cands, fallback = [], []
    same_p = [d for (p, d) in mine if p == P and d < depth]
    ch_p = None
    if same_p:
        d = max(same_p)
        ch_p = mine[P, d]["channels_pair_max"]
        cands.append((mine[P, d]["median_s"] * depth / d, f"P={P} depth {d} x {depth}/{d}"))
    same_d = [p for (p, d) in mine if d == depth and p < P]
    if same_d:
        p = max(same_d)
        r = _elements(P) / _elements(p)
        # a lone pair only counts when the shallower same-P cell ran at fewer channels (the engine raised them)
        use = p >= 8 or (ch_p is not None and ch_p < mine[p, depth]["channels_pair_max"])
        (cands if use else fallback).append((mine[p, depth]["median_s"] * r,
                                             f"depth {depth} P={p} x {r:.3g} (elements)"))
    if cands:
        return max(cands)
    if fallback:
        return fallback[0]
    return None, "no measured cell"


# ----------------------------------------------------------------------------------------------------- grid
def run_grid(mode: dict) -> tuple[dict, list]:
    done: dict = {}
    failed: dict = {}  # (net, act, depth) -> P at which it failed
    for net in NETWORKS:
        for depth in mode["depths"]:
            for P in mode["Ps"]:
                X = make_x(P)
                todo = []
                for act in ACTIVATIONS:
                    key = (net, act, P, depth)
                    rec = {"network": net, "gamma": NETWORKS[net][0], "branch_scale": NETWORKS[net][1],
                           "activation": act, "P": P, "depth": depth, "pairs": P * (P - 1) // 2}
                    est, basis = estimate(done, net, act, P, depth)
                    rec["estimate_s"], rec["estimate_basis"] = est, basis
                    if (net, act, depth) in failed:
                        rec["status"] = f"not run: failed at P={failed[net, act, depth]}"
                    elif est is not None and est > mode["cell_budget"]:
                        rec["status"] = f"skipped: estimated {est:.0f} s > {mode['cell_budget']:.0f} s ({basis})"
                    else:
                        rec["status"] = "run"
                        todo.append(act)
                    done[key] = rec
                times: dict[str, list] = {a: [] for a in todo}
                others: dict[str, list] = {a: [] for a in todo}
                rss: dict[str, list] = {a: [] for a in todo}
                results: dict = {}
                rounds, r = 1, 0
                while r < rounds:
                    order = todo[r % len(todo):] + todo[:r % len(todo)] if todo else []
                    for act in order:
                        if act not in times:
                            continue
                        try:
                            w, o, m, res = timed(partial(call, X, act, depth, net))
                        except ValueError as e:  # ParameterError
                            done[net, act, P, depth]["status"] = f"error: {str(e)[:160]}"
                            failed[net, act, depth] = P
                            del times[act]
                            continue
                        times[act].append(w)
                        others[act].append(o)
                        rss[act].append(m)
                        results[act] = res
                    if r == 0 and sum(v[0] for v in times.values() if v) < mode["round_budget"]:
                        rounds = 3
                    r += 1
                for act, ts in times.items():
                    rec = done[net, act, P, depth]
                    res = results[act]
                    ch = np.asarray(res.channels)
                    off = ~np.eye(P, dtype=bool)
                    med = statistics.median(ts)
                    rec.update({"median_s": med, "times_s": ts, "calls": len(ts), "others_busy_cores": others[act],
                                "s_per_pair_layer": med / (_pairs(P) * depth),
                                "channels_diag_max": int(np.diagonal(ch).max()),
                                "channels_pair_max": int(ch[off].max()) if P > 1 else None,
                                "channels_pair_mean": float(ch[off].mean()) if P > 1 else None,
                                "rss_peak_bytes": max((v for v in rss[act] if v is not None), default=None),
                                "variance_01": float(res.variance[0, 1]),
                                "max_variance_truncation_rel": float(np.max(res.variance_truncation
                                                                            / np.abs(res.variance)))})
                for act in list(times):
                    rec = done[net, act, P, depth]
                    if rec["median_s"] * TRACE_SLOWDOWN <= mode["mem_budget"]:
                        peak = traced_peak(partial(call, X, act, depth, net))
                        rec["traced_peak_bytes"] = peak
                        rec["traced_peak_over_8P2"] = peak / (8 * P * P)
                    else:
                        rec["traced_peak_bytes"] = None
                        rec["traced_note"] = (f"not traced: ~{rec['median_s'] * TRACE_SLOWDOWN:.0f} s traced > "
                                              f"{mode['mem_budget']:.0f} s")
                cell_t = sum(sum(v) for v in times.values())
                print(f"  {net} depth {depth} P={P}: {len(times)} activations run, {cell_t:.1f} s timed", flush=True)
    return done, _grid_rows(done)


def _grid_rows(done: dict) -> list:
    rows = []
    for (net, act, P, depth), r in done.items():
        if "median_s" not in r:
            rows.append([net, act, P, depth, "-", "-", "-", "-", "-", "-", r["status"]])
            continue
        load = max((o for o in r["others_busy_cores"] if o is not None), default=None)
        tp = r.get("traced_peak_bytes")
        rows.append([net, act, P, depth, f"{r['median_s']:.3g} ({r['calls']})", f"{r['s_per_pair_layer']:.3g}",
                     f"{r['channels_diag_max']}/{r['channels_pair_max']} ({r['channels_pair_mean']:.0f})",
                     "-" if tp is None else str(tp), "-" if tp is None else f"{r['traced_peak_over_8P2']:.3g}",
                     "-" if r["rss_peak_bytes"] is None else f"{r['rss_peak_bytes'] / 2**20:.1f}",
                     "" if load is None else f"load {load:.2f}"])
    return rows


def memory_check(done: dict) -> dict:
    """At fixed (network, activation, P) and fixed channel counts (diagonal, pair): largest / smallest traced peak
    across the traced depths (the channel counts set the work arrays, and the engine raises them with depth)."""
    out = {}
    groups: dict = {}
    for (net, act, P, depth), r in done.items():
        if r.get("traced_peak_bytes"):
            ch = (r["channels_diag_max"], r["channels_pair_max"])
            groups.setdefault((net, act, P, ch), {})[depth] = r["traced_peak_bytes"]
    for (net, act, P, ch), by_depth in groups.items():
        if len(by_depth) >= 2:
            peaks = [by_depth[d] for d in sorted(by_depth)]
            out[f"{net} {act} P={P} channels {ch[0]}/{ch[1]}"] = {
                "depths": sorted(by_depth), "peaks": peaks, "max_over_min": max(peaks) / min(peaks)}
    return out


def constants(done: dict) -> dict:
    """Per (network, activation, pair channels): the constant at the largest measured cell with P >= 8, and its
    range over those cells."""
    out = {}
    for net in NETWORKS:
        for act in ACTIVATIONS:
            cells = [r for (n, a, P, d), r in done.items() if n == net and a == act and P >= 8 and "median_s" in r]
            for ch in sorted({r["channels_pair_max"] for r in cells}):
                mine = [r for r in cells if r["channels_pair_max"] == ch]
                big = max(mine, key=lambda r: r["pairs"] * r["depth"])
                vals = [r["s_per_pair_layer"] for r in mine]
                out[f"{net} {act} pair channels {ch}"] = {
                    "largest_cell": f"P={big['P']} depth {big['depth']}", "s_per_pair_layer": big["s_per_pair_layer"],
                    "min": min(vals), "max": max(vals), "cells": len(mine)}
    return out


# ----------------------------------------------------------------------------------------------------- peer
def run_peer(mode: dict) -> tuple[dict, list]:
    out, rows = {}, []
    X = make_x(PEER_P)
    gamma, bs = NETWORKS[PEER_NET]
    S0 = mode["peer_samples"]
    for act in mode["peer_acts"]:
        for depth in PEER_DEPTHS:
            eng_t, eng_o, mc_t, mc_o, var_se, ms_se, var_mc, ms_mc = [], [], [], [], [], [], [], []
            res = None
            for r in range(mode["peer_rounds"]):
                steps = ("engine", "mc") if r % 2 == 0 else ("mc", "engine")
                sim = None
                for step in steps:
                    if step == "engine":
                        w, o, _, res = timed(partial(call, X, act, depth, PEER_NET))
                        eng_t.append(w)
                        eng_o.append(o)
                    else:
                        w, o, _, sim = timed(partial(simulate_finite_width, X, act, depth, WIDTH, SW2, SB2, gamma, bs,
                                                     samples=S0, seed=1000 + r))
                        mc_t.append(w)
                        mc_o.append(o)
                ws = width_statistics(sim, res.nngp, [(0, 1, 0, 1)])
                var_mc.append(float(ws.R[0]))
                var_se.append(float(ws.R_se[0]))
                ms_mc.append(float(ws.mean_shift[0, 1]))
                ms_se.append(float(ws.mean_shift_se[0, 1]))
            v, m = float(res.variance[0, 1]), float(res.mean_shift[0, 1])
            trunc = float(res.variance_truncation[0, 1]) / abs(v)
            per_sample = statistics.median(mc_t) / S0
            se_v, se_m = statistics.median(var_se), statistics.median(ms_se)
            need_v = S0 * (se_v / (TARGET_RSE * abs(v))) ** 2
            # depth 1: the mean shift vanishes (the first hidden layer is Gaussian given the input layer)
            need_m = S0 * (se_m / (TARGET_RSE * abs(m))) ** 2 if m != 0 else math.nan
            need_eng = S0 * (se_v / (res.rtol * abs(v))) ** 2  # the engine's promised accuracy (rtol)
            e_med = statistics.median(eng_t)
            rec = {"activation": act, "P": PEER_P, "depth": depth, "network": PEER_NET, "width": WIDTH,
                   "engine": {"median_s": e_med, "times_s": eng_t, "others_busy_cores": eng_o,
                              "variance_01": v, "mean_shift_01": m, "variance_01_truncation_rel": trunc},
                   "mc_measured": {"samples": S0, "median_s": statistics.median(mc_t), "times_s": mc_t,
                                   "others_busy_cores": mc_o, "s_per_sample": per_sample,
                                   "n_var_01": var_mc, "n_var_01_se": var_se, "mean_shift_01": ms_mc,
                                   "mean_shift_01_se": ms_se},
                   "mc_extrapolated": {"samples_1pct_variance": need_v, "s_1pct_variance": need_v * per_sample,
                                       "samples_1pct_mean_shift": need_m, "s_1pct_mean_shift": need_m * per_sample,
                                       "samples_engine_accuracy_variance": need_eng,
                                       "s_engine_accuracy_variance": need_eng * per_sample},
                   "ratio_mc_1pct_variance_over_engine": need_v * per_sample / e_med,
                   "ratio_mc_1pct_mean_shift_over_engine": need_m * per_sample / e_med}
            out[f"{act}_depth{depth}"] = rec
            z = (statistics.mean(var_mc) - v) / (statistics.median(var_se) / math.sqrt(len(var_mc)))
            rows.append([act, depth, f"{e_med:.3g} ({len(eng_t)})", f"{v:.4g}", f"{trunc:.1e}",
                         f"{statistics.median(mc_t):.3g} ({S0})", f"{statistics.mean(var_mc):.4g} (z {z:+.1f})",
                         f"{need_v:.3g}", f"{need_v * per_sample:.3g}",
                         f"{rec['ratio_mc_1pct_variance_over_engine']:.3g}x",
                         f"{need_m * per_sample:.3g}", f"{rec['ratio_mc_1pct_mean_shift_over_engine']:.3g}x",
                         f"{need_eng * per_sample:.2e}"])
            print(f"  peer {act} depth {depth} done", flush=True)
    return out, rows


# ----------------------------------------------------------------------------------------------------- profile
def run_profile(top: int = 10) -> dict:
    info = C.machine_info()
    C.print_machine(info)
    _versions()
    cfg = PROFILE
    X = make_x(cfg["P"])
    call(make_x(2), cfg["activation"], 2, cfg["network"])  # warm-up
    prof = cProfile.Profile()
    w, o, _, _ = timed(lambda: prof.runcall(call, X, cfg["activation"], cfg["depth"], cfg["network"]))
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime")
    stats.print_stats(top)
    print(f"\ncProfile of fluctuations(P={cfg['P']}, depth {cfg['depth']}, {cfg['activation']}, {cfg['network']}): "
          f"{w:.1f} s under the profiler, other processes {o if o is None else round(o, 2)} cores busy")
    print(buf.getvalue())
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        rows.append({"function": f"{Path(file).name}:{line}({fn})", "calls": nc, "tottime_s": tt, "cumtime_s": ct})
    return {"benchmark": "fluctuations_profile", "machine": info, "versions": _versions(quiet=True),
            "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"), "config": cfg, "wall_s": w,
            "others_busy_cores": o, "top_tottime": rows}


def _versions(quiet: bool = False) -> dict:
    import scipy
    import sympy

    v = {"resprop": resprop.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
         "sympy": sympy.__version__, "python": sys.version.split()[0]}
    if not quiet:
        print("versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    return v


# ------------------------------------------------------------------------------------------------ large P
LARGE = {"P": 1000, "depth": 10, "sigma_w2": 1.0, "sigma_b2": 0.1, "gamma": 1.0, "branch_scale": 1.0,
         "spreads": (1.5, 7.0), "activations": ("erf", "tanh", "relu"), "d_in": 8}


def make_large_x(P: int, spread: float) -> np.ndarray:
    """Rows of a standard normal (P, 8) matrix, normalised, times uniform(1, spread): all norms different."""
    X = np.random.default_rng(0).standard_normal((P, LARGE["d_in"]))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.random.default_rng(1).uniform(1.0, spread, P)[:, None]


def run_large() -> dict:
    from resprop.numeric.engine import fluctuations as EF

    info = C.machine_info()
    C.print_machine(info)
    versions = _versions()
    L = LARGE
    print(f"\nresprop.fluctuations at P = {L['P']}, depth {L['depth']}, sigma_w2 {L['sigma_w2']}, sigma_b2 "
          f"{L['sigma_b2']}, gamma {L['gamma']}, branch_scale {L['branch_scale']}, rtol 1e-6; X: normalised standard "
          f"normal rows x uniform(1, spread); {os.cpu_count()} cores\n")
    recursions = [0]
    real = EF._pair_values

    def counted(net, block, ladder, rtol):
        recursions[0] += block.shape[0]
        return real(net, block, ladder, rtol)

    EF._pair_values = counted
    call(make_x(2), "erf", 2, "resnet")  # imports and caches
    rows, out = [], []
    configs = [(act, spread, None, True) for spread in L["spreads"] for act in L["activations"]]
    configs.insert(1, (L["activations"][0], L["spreads"][0], 1, True))
    # side by side: the smooth activations' pair projections on the 2-D rule (PAIR_EXPANSION off), same run
    configs[2:2] = [(act, L["spreads"][0], None, False) for act in L["activations"] if act != "relu"]
    try:
        for act, spread, workers, expansion in configs:
            X = make_large_x(L["P"], spread)
            EF.WORKERS = workers
            EF.PAIR_EXPANSION = expansion
            recursions[0] = 0
            wall, others, rss, F = timed(lambda: resprop.fluctuations(
                X, act, L["depth"], WIDTH, L["sigma_w2"], L["sigma_b2"], L["gamma"], L["branch_scale"],
                progress=False))
            n_rec = recursions[0]
            ex = F._network.expansion
            route = "2-D rule" if ex is None else f"Mehler ({ex.used} / {ex.fallback} to the rule)"
            off = ~np.eye(L["P"], dtype=bool)
            channels = int(F.channels[off].max())
            # the direct route: 48 of the pairs at the call's channel count, timed, scaled to all pairs
            K0 = F._network.K0
            iu, ju = np.triu_indices(L["P"], 1)
            pick = np.random.default_rng(2).choice(iu.size, 48, replace=False)
            block = EF._pair_block(K0[iu[pick], iu[pick]], K0[ju[pick], ju[pick]], K0[iu[pick], ju[pick]])
            EF.WORKERS = 1
            # the network the direct route would use for all pairs (all norms different: the 2-D rule)
            direct_net = EF._direct_network(F._network, iu.size, np.arange(L["P"]))
            t48, _, _, (direct_values, _) = timed(lambda: real(direct_net, block, [channels], F.rtol))
            direct = t48 / 48 * iu.size
            # the same 48 pairs: the call's values against their direct recursion, in units of rtol x the scale
            scale_v = float(np.abs(F.variance).max())
            scale_m = float(np.abs(F.mean_shift).max()) + math.sqrt(scale_v)
            a_, b_ = iu[pick], ju[pick]
            err_v = float(np.abs(F.variance[a_, b_] - direct_values["variance"]).max()) / (F.rtol * scale_v)
            err_m = float(np.abs(F.mean_shift[a_, b_] - direct_values["mean_shift"]).max()) / (F.rtol * scale_m)
            row = {"activation": act, "spread": spread, "workers": workers or os.cpu_count(), "seconds": wall,
                   "pair_projections": "rule" if ex is None else "mehler",
                   "mehler_pair_layers": None if ex is None else ex.used,
                   "rule_pair_layers": None if ex is None else ex.fallback,
                   "pair_recursions": n_rec, "pair_channels": channels, "peak_rss_MiB": None if rss is None
                   else rss / 2**20, "others_busy_cores": others, "direct_estimate_s": direct,
                   "s_per_recursion_48_batch": t48 / 48, "sample_error_variance_rtol": err_v,
                   "sample_error_mean_shift_rtol": err_m}
            out.append(row)
            rows.append([act, spread, row["workers"], route, f"{wall:.1f}", n_rec, channels,
                         "-" if rss is None else f"{rss / 2**20:.0f}", f"{direct:.0f} ({direct / wall:.0f}x)",
                         f"{err_v:.2g} / {err_m:.2g}", "-" if others is None else f"{others:.2f}"])
            print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
    finally:
        EF._pair_values = real
        EF.WORKERS = None
        EF.PAIR_EXPANSION = True
    print()
    C.print_table(["activation", "norm spread", "threads", "pair projections (pair-layers)", "seconds", "pair recursions", "pair channels",
                   "RSS peak MiB", "direct route s (est., x)", "48 pairs vs direct (var / mean shift, x rtol)",
                   "other load"], rows)
    return {"benchmark": "fluctuations_large", "machine": info, "versions": versions,
            "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"),
            "params": {**L, "width": WIDTH, "inputs": "default_rng(0).standard_normal((P, 8)) normalised x "
                       "default_rng(1).uniform(1, spread, P)"}, "rows": out}


# ----------------------------------------------------------------------------------------------------- main
def run(quick: bool = False) -> dict:
    mode_name = "quick" if quick else "full"
    mode = MODES[mode_name]
    info = C.machine_info()
    C.print_machine(info)
    versions = _versions()
    print(f"load average (1, 5, 15 min): {info['loadavg_1_5_15']}")
    print(f"\nresprop.fluctuations, {mode_name} mode: sigma_w2={SW2}, sigma_b2={SB2}, width={WIDTH}, d_in={D_IN}; "
          f"X = standard normal rows x linspace{SCALES} (unequal norms); networks {NETWORKS} (gamma, branch_scale); "
          f"cells estimated > {mode['cell_budget']:.0f} s skipped\n")
    t0 = time.perf_counter()
    warm = {}
    for act in ACTIVATIONS:
        w, _, _, _ = timed(partial(call, make_x(2), act, 2, "resnet"))
        warm[act] = w
    print("warm-up (P=2, depth 2, untimed in the table): " + ", ".join(f"{a} {w:.2f} s" for a, w in warm.items()))
    done, rows = run_grid(mode)
    grid_s = time.perf_counter() - t0
    print()
    C.print_table(["network", "activation", "P", "depth", "median s (calls)", "s/pair/layer",
                   "channels diag/pair (pair mean)", "traced peak B", "peak / 8P^2", "RSS peak MiB", "note"], rows)
    print("(s/pair/layer = median / (P(P-1)/2 x depth), diagonal work included; traced peak: tracemalloc, separate "
          "untimed call; RSS peak: above the RSS before the call, max over the timed calls; load: other processes' "
          "busy cores, max over the timed calls)")
    consts = constants(done)
    print("\nconstant (s per pair per layer) at the largest measured cell with P >= 8, per pair channel count "
          "[range over those cells]:")
    for k, c in consts.items():
        print(f"  {k}: {c['s_per_pair_layer']:.3g} at {c['largest_cell']}  [{c['min']:.3g} .. {c['max']:.3g}, "
              f"{c['cells']} cells]")
    mem = memory_check(done)
    print("\ntraced peak memory vs depth at fixed P and channels (max / min over the traced depths):")
    for k, m in mem.items():
        print(f"  {k}: {m['max_over_min']:.3f}  (" + ", ".join(
            f"depth {d}: {b / 2**20:.2f} MiB" for d, b in zip(m["depths"], m["peaks"])) + ")")
    print(f"\npeer: simulate_finite_width (reduced) at width {WIDTH}, P={PEER_P}, {PEER_NET} network, "
          f"{mode['peer_samples']} samples measured per round, interleaved with the engine call "
          f"({mode['peer_rounds']} rounds); MC time to {TARGET_RSE:.0%} RSE EXTRAPOLATED (SE ~ 1/sqrt(samples))\n")
    peer, prow = run_peer(mode)
    C.print_table(["activation", "depth", "engine s (calls)", "engine var[0,1]", "engine trunc (rel)",
                   "MC s (samples)", "MC n var[0,1] (z)", "MC samples for 1% var", "MC s for 1% var (extrap.)",
                   "MC 1% var / engine", "MC s for 1% mean shift", "MC 1% mean shift / engine",
                   "MC s to engine rtol"], prow)
    print("(MC n var is n Var[K^_01] at n = 256, the engine's the n -> infinity coefficient: they differ by "
          "O(depth/n); z uses the median round SE / sqrt(rounds))")
    loads = [o for r in done.values() for o in r.get("others_busy_cores", []) if o is not None]
    loads += [o for r in peer.values() for part in ("engine", "mc_measured")
              for o in r[part]["others_busy_cores"] if o is not None]
    if loads:
        bad = sum(v > C.CONTENDED for v in loads)
        print(f"\nother processes during the timed calls: up to {max(loads):.2f} cores busy (median "
              f"{statistics.median(loads):.2f}); {bad} of {len(loads)} calls contended (> {C.CONTENDED} cores)")
    print(f"load average after: {list(os.getloadavg())}")
    return {"benchmark": "fluctuations", "machine": info, "versions": versions,
            "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"),
            "params": {"mode": mode_name, **mode, "sigma_w2": SW2, "sigma_b2": SB2, "width": WIDTH, "d_in": D_IN,
                       "inputs": f"default_rng(0).standard_normal((P, {D_IN})) * linspace{SCALES}[:, None]",
                       "networks": NETWORKS, "activations": ACTIVATIONS, "trace_slowdown": TRACE_SLOWDOWN,
                       "peer": {"P": PEER_P, "depths": PEER_DEPTHS, "network": PEER_NET, "target_rse": TARGET_RSE}},
            "warm_up_s": warm, "grid": [r for r in done.values()], "grid_wall_s": grid_s, "constants": consts,
            "memory_vs_depth": mem, "peer": peer, "loadavg_after": list(os.getloadavg())}


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    profile = "--profile" in sys.argv
    large = "--large" in sys.argv
    sys.argv = [a for a in sys.argv if a not in ("--quick", "--profile", "--large")]
    if "--json" not in sys.argv:
        suffix = "_profile" if profile else ("_large" if large else ("_quick" if quick else ""))
        sys.argv += ["--json", str(HERE / "results" / f"fluctuations{suffix}.json")]
    C.main(run_profile if profile else (run_large if large else (lambda: run(quick))))
