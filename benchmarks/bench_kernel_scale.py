"""Kernels at scale: resprop.kernel(out="K.zarr") (one process; and workers=2, a local Dask cluster) against
neural-tangents ``nt.batch(kernel_fn, batch_size, store_on_device=False)`` (issue 24).

Network (both sides): read-in K^(0) = sigma_w2 X X^T / d_in + sigma_b2 (= Theta^(0)), then DEPTH residual blocks
h <- h + lam (W phi(h) + b), lam = 0.5, sigma_w2 = 1, sigma_b2 = 0.05; NNGP and NTK.  X: standard normal, d_in = 64,
seed 0 (rows of UNEQUAL norm: K^(0)_aa = |x_a|^2 / 64 + 0.05 ~ chi^2_64 / 64 + 0.05).  NT: the network of
peer_nt_worker.py in benchmarks/peer_nt_batch_worker.py (float32, JAX's default; tanh as
stax.ElementwiseNumerical(jnp.tanh, deg=25)), compiled on one block first, then one timed call on all of X.
resprop: float64 Zarr stores in a temporary directory under /work/bench-big (deleted after every run), after a
warm-up call on 64 rows in memory (compiles the activation), one timed call.

Every measurement is a fresh process; per configuration REPEATS rounds of (resprop, resprop workers=2, NT) in turn
(tanh at P = 10000, resprop only, ~4 min per call: one round).
Reported: median wall s, median process CPU s (resprop workers=2: its own CPU plus that of the Dask processes),
peak RSS MiB: resprop: VmHWM (reset before the call through /proc/self/clear_refs) minus the RSS after the imports,
plus, with workers=2, the largest total RSS of its child processes (psutil, sampled every 0.1 s); NT: ru_maxrss minus
the RSS after the imports (its float32 P x P outputs, in host memory, included).  Agreement: on ROWS sampled rows,
max |K_resprop - K_NT| / max |K_resprop| per kernel (resprop's stores read back through zarr).  time/entry-layer:
wall s / (P (P + 1) / 2 x depth) (NT computes both triangles, so its per-entry figure counts each pair once too).
Then a model for CIFAR-10's 60000 inputs at depth 100 on k workers (see `model`).

    python benchmarks/bench_kernel_scale.py [--quick] [--repeats N] [--json PATH] [--md PATH] [--from JSON]

(``--from JSON``: no measurement; the tables, the model and the markdown again from a saved record.)
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _common as C
import numpy as np
from bench_kernel_unequal import _status

HERE = Path(__file__).resolve().parent
NT_WORKER = HERE / "peer_nt_batch_worker.py"
BIG = Path("/work/bench-big")
DEPTH, LAM, SW2, SB2, D_IN, DEG = 20, 0.5, 1.0, 0.05, 64, 25
ROWS = 200
NT_BATCH = {"erf": 2000, "tanh": 500}  # b x b blocks; P must be a multiple of b
NT_FAST_S = 240.0  # erf P = 20000 runs only if the NT erf P = 10000 call took less
REPEATS = 2
TARGET_P, TARGET_DEPTH, TARGET_K = 60000, 100, (1, 2, 8, 32)


def inputs(P: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((P, D_IN))


def sample_rows(P: int) -> np.ndarray:
    return np.sort(np.random.default_rng(1).choice(P, size=min(ROWS, P), replace=False))


def entry_layers(P: int, depth: int) -> float:
    return P * (P + 1) / 2 * depth


# --------------------------------------------------------------------------- resprop worker (fresh process)
class _Children(threading.Thread):
    """Samples the process's descendants (the Dask nannies and workers): largest total RSS, last CPU seen per pid."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        import psutil

        self.me, self.peak, self.cpu, self.halt = psutil.Process(), 0.0, {}, threading.Event()

    def run(self) -> None:
        import psutil

        while not self.halt.wait(0.1):
            rss = 0.0
            for p in self.me.children(recursive=True):
                try:
                    rss += p.memory_info().rss / 2**20
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                except psutil.Error:
                    pass
            self.peak = max(self.peak, rss)


def worker() -> None:
    """Line protocol: {"op": "run", "activation", "P", "workers", "dir", "rows", "save"} | {"op": "schedule", ...}."""
    import dask.distributed  # noqa: F401  (imported before the baseline: workers=2 needs it)
    import zarr

    import resprop

    base = _status("VmRSS")  # RSS after the imports
    print(json.dumps({"baseline_MiB": base, "resprop": resprop.__version__, "zarr": zarr.__version__,
                      "dask": dask.__version__}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "quit":
            break
        X, act = inputs(req["P"]), req["activation"]
        if req["op"] == "schedule":
            print(json.dumps(_schedule_cost(X, act, req["depth"])), flush=True)
            continue
        resprop.kernel(X[:64], act, DEPTH, SW2, SB2, branch_scale=LAM, ntk=True)  # warm-up (compiles)
        out = Path(req["dir"]) / "K.zarr"
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        kids = _Children()
        kids.start()
        s0, c0, t0 = C._cpu_times(), os.times(), time.perf_counter()
        resprop.kernel(X, act, DEPTH, SW2, SB2, branch_scale=LAM, ntk=True, out=str(out), dtype="float64",
                       workers=req["workers"], progress=False)
        wall = time.perf_counter() - t0
        c1, s1 = os.times(), C._cpu_times()
        kids.halt.set()
        kids.join()
        own = c1.user + c1.system - c0.user - c0.system
        reaped = c1.children_user + c1.children_system - c0.children_user - c0.children_system
        cpu = own + max(reaped, sum(kids.cpu.values()))
        rows = np.asarray(req["rows"])
        group = zarr.open_group(str(out), mode="r")
        paths = {}
        for name in ("nngp", "ntk"):
            paths[name] = f"{req['save']}_{name}.npy"
            np.save(paths[name], group[name].oindex[rows, rows])
        store_MiB = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
        shutil.rmtree(out)
        print(json.dumps({"wall_s": wall, "cpu_s": cpu, "own_cpu_s": own, "others_busy_cores": others(s0, s1, cpu, wall),
                          "peak_MiB": _status("VmHWM") - base, "children_peak_MiB": kids.peak,
                          "store_MiB": store_MiB, "paths": paths}), flush=True)


def _schedule_cost(X: np.ndarray, act: str, depth: int) -> dict:
    """What every Dask worker builds: kernel_store's schedule (diagonals and per-layer tables), block by block,
    holding one block at a time; its wall s, the memory it adds at its peak, and its number of blocks (passes
    over the tiles)."""
    from resprop.numeric.engine import kernel as KN
    from resprop.numeric.engine import kernel_store as KS
    from resprop.numeric.engine import residual_kernel as RK
    from resprop.numeric.engine.blas_threads import one_blas_thread

    lam = KN.branch_scales(LAM, depth)
    net = KS.Network(X, SW2, SB2, RK.recursions(act), KN._sequences(depth, 1.0, lam, SW2, SB2, False), "ntk")
    before = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    t0 = time.perf_counter()
    with one_blas_thread():
        lazy = KS._LazyBlocks(net, None)
        n = 0
        while lazy.get(n) is not None:
            n += 1
    return {"P": int(X.shape[0]), "depth": depth, "wall_s": time.perf_counter() - t0, "blocks": n,
            "peak_MiB": _status("VmHWM") - before}


def others(s0, s1, cpu: float, wall: float) -> float | None:
    """Cores other processes kept busy during a call (as in _common.timeit): /proc/stat busy time minus the call's
    own CPU, per wall second."""
    if s0 is None or s1 is None:
        return None
    return max(0.0, ((s1[0] - s1[1]) - (s0[0] - s0[1])) / C._HZ - cpu) / wall


# --------------------------------------------------------------------------- driver
def _wait_for_other_runs() -> None:
    """No timing while another `resprop kernel` run (the 60000-input store) is going on."""
    t0 = time.perf_counter()
    while subprocess.run(["pgrep", "-f", "resprop kernel"], capture_output=True).returncode == 0:
        time.sleep(10)
    if time.perf_counter() - t0 > 1:
        print(f"(waited {time.perf_counter() - t0:.0f} s for a running `resprop kernel` to finish)", flush=True)


def _one(side: str, act: str, P: int, xpath: Path, tmp: Path, rows: np.ndarray, tag: str) -> dict:
    """One fresh process, one measured call."""
    save = str(tmp / f"{tag}_{side}")
    if side == "nt":
        w = C.JsonLineWorker([str(C.PEERS_PYTHON), str(NT_WORKER)], "NT worker")
        try:
            r = w.ask(op="run", X=str(xpath), activation=act, deg=DEG, depth=DEPTH, rho=LAM, sigma_w2=SW2,
                      sigma_b2=SB2, batch_size=NT_BATCH[act], rows=rows.tolist(), save=save)
        finally:
            w.close()
        r["peak_MiB"] = r["maxrss_MiB"] - w.hello["baseline_MiB"]
        r["versions"] = {k: w.hello[k] for k in ("neural_tangents", "jax", "dtype")}
        return r
    w = C.JsonLineWorker([sys.executable, str(Path(__file__).resolve()), "--worker"], "resprop worker")
    store = Path(tempfile.mkdtemp(prefix="scale-", dir=BIG))
    try:
        r = w.ask(op="run", activation=act, P=P, workers=2 if side == "rp2" else None, dir=str(store),
                  rows=rows.tolist(), save=save)
    finally:
        w.close()
        shutil.rmtree(store, ignore_errors=True)
    r["peak_MiB"] += r["children_peak_MiB"]
    r["versions"] = w.hello
    return r


def run_config(act: str, P: int, sides: tuple[str, ...], tmp: Path, repeats: int) -> list[dict]:
    X = inputs(P)
    xpath = tmp / f"X{P}.npy"
    np.save(xpath, X)
    rows = sample_rows(P)
    calls: dict[str, list[dict]] = {s: [] for s in sides}
    for i in range(repeats):  # interleaved: (resprop, resprop workers=2, NT) per round
        for s in sides:
            _wait_for_other_runs()
            C.wait_idle(30, threshold=C.CONTENDED)  # a short wait for other processes to leave the CPU
            r = _one(s, act, P, xpath, tmp, rows, f"{act}{P}_{i}")
            calls[s].append(r)
            print(json.dumps({"activation": act, "P": P, "side": s, "round": i,
                              **{k: r[k] for k in ("wall_s", "cpu_s", "peak_MiB", "others_busy_cores")}}), flush=True)
    ref = {n: np.load(calls[sides[0]][0]["paths"][n]) for n in ("nngp", "ntk")}
    out = []
    for s in sides:
        rs = calls[s]
        wall = statistics.median(r["wall_s"] for r in rs)
        row = {"activation": act, "P": P, "depth": DEPTH, "side": s, "wall_s": wall,
               "cpu_s": statistics.median(r["cpu_s"] for r in rs), "peak_MiB": max(r["peak_MiB"] for r in rs),
               "s_per_entry_layer": wall / entry_layers(P, DEPTH), "calls": rs, "versions": rs[0]["versions"],
               "others_busy_cores_max": max((r["others_busy_cores"] or 0.0) for r in rs)}
        got = {n: np.load(rs[0]["paths"][n]).astype(float) for n in ("nngp", "ntk")}
        err = {n: float(np.max(np.abs(got[n] - ref[n])) / np.max(np.abs(ref[n]))) for n in ref}
        row["err_vs_resprop"] = None if s == sides[0] else err
        if s == "nt":
            row["output_MiB"] = 2 * P * P * 4 / 2**20
            row["compile_s"] = statistics.median(r["compile_s"] for r in rs)
            row["batch_size"] = NT_BATCH[act]
        else:
            row["store_MiB"] = rs[0]["store_MiB"]
        out.append(row)
    return out


def schedule_cost(act: str, P: int, depth: int) -> dict:
    w = C.JsonLineWorker([sys.executable, str(Path(__file__).resolve()), "--worker"], "resprop worker")
    try:
        return w.ask(op="schedule", activation=act, P=P, depth=depth)
    finally:
        w.close()


# --------------------------------------------------------------------------- model
def model(rows: list[dict], schedules: dict[str, dict]) -> dict:
    """CIFAR-10 (60000 inputs) at depth 100, NNGP + NTK, float64 tiles of 2048, on k single-threaded workers.

    t_w: seconds per entry-layer of ONE worker = 2 x wall / (P (P + 1) / 2 x depth) of the workers=2 run at the
    largest P measured (cluster start and schedules included, so slightly pessimistic).  S: the per-worker schedule
    (built once by every worker, in parallel), measured at (P, 20) and scaled by P x depth (it is O(P depth)).
    T(k) = S + t_w E / k x ceil(n / k) / (n / k): E entry-layers, n tiles per pass (a worker gets whole tiles).
    Assumes: tiles independent (they are), linear scaling in k (no shared memory bandwidth or scheduler limit),
    I/O not limiting (io_TB: what the passes read and write; between blocks of layers the state goes through
    float64 scratch arrays on disk, so io_MBps at k = 32 is what the shared file system must sustain).
    """
    from resprop.numeric.engine import kernel_store as KS
    from resprop.numeric.engine import residual_kernel as RK

    P, L = TARGET_P, TARGET_DEPTH
    n = len(RK.tile_grid(P, KS.TILE))
    d0 = SW2 * np.sum(inputs(P) ** 2, axis=1) / D_IN + SB2
    E = entry_layers(P, L)
    out = {"P": P, "depth": L, "tile": KS.TILE, "tiles": n, "entry_layers": E, "rows": []}
    for act in ("erf", "tanh"):
        ms = [r for r in rows if r["activation"] == act and r["side"] == "rp2"]
        if not ms:
            continue
        m = max(ms, key=lambda r: r["P"])
        t_w = 2 * m["wall_s"] / entry_layers(m["P"], m["depth"])
        sc = schedules[act]
        S = sc["wall_s"] * (P * L) / (sc["P"] * sc["depth"])
        block = RK.default_block(d0, L, "ntk", RK.recursions(act))
        passes = math.ceil(L / block)
        scratch = passes > 1
        disk = KS.required_bytes(P, True, "float64", scratch)
        # per pass both kernels' upper triangles (P^2 / 2 float64 each) are written and, after the first pass, read;
        # the output is mirrored: ~16 P^2 bytes per pass
        io = 16 * P * P * passes
        for k in TARGET_K:
            T = S + t_w * E / k * math.ceil(n / k) / (n / k)
            out["rows"].append({"activation": act, "k": k, "t_w_ns": t_w * 1e9, "schedule_s": S, "passes": passes,
                                "hours": T / 3600, "disk_GB": disk / 1e9, "io_TB": io / 1e12,
                                "io_MBps": io / T / 1e6, "measured_at_P": m["P"],
                                # one block at a time: the peak scales with P (a block of the general path is
                                # one layer at these P), not with the depth
                                "schedule_MiB_per_worker": sc["peak_MiB"] * P / sc["P"]})
    return out


# --------------------------------------------------------------------------- run, table, markdown
SIDE = {"rp": "resprop .zarr", "rp2": "resprop .zarr workers=2", "nt": "NT nt.batch f32"}


def run(quick: bool = False, repeats: int = REPEATS) -> dict:
    _wait_for_other_runs()
    C.wait_idle(300)  # e.g. the write-back of a finished large store
    info = C.machine_info()
    C.print_machine(info)
    big = 2000 if quick else 10000
    rows: list[dict] = []
    BIG.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BIG, prefix="scale-tmp-") as td:
        tmp = Path(td)
        rows += run_config("erf", big, ("rp", "rp2", "nt"), tmp, repeats)
        nt_s = next(r["wall_s"] for r in rows if r["side"] == "nt")
        if not quick and nt_s < NT_FAST_S:
            rows += run_config("erf", 2 * big, ("rp", "rp2", "nt"), tmp, repeats)
        rows += run_config("tanh", 2000 if not quick else 1000, ("rp", "rp2", "nt"), tmp, repeats)
        rows += run_config("tanh", big, ("rp", "rp2"), tmp, 1)  # ~4 min per call: one round
        schedules = {act: schedule_cost(act, big, DEPTH) for act in ("erf", "tanh")}
        degrees = degree_check(2000 if not quick else 1000, tmp)
    info["loadavg_after"] = list(os.getloadavg())
    info["mem_total_GiB"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"benchmark": "kernel_scale", "date": dt.datetime.now().isoformat(timespec="seconds"), "machine": info,
            "params": {"depth": DEPTH, "lambda": LAM, "sigma_w2": SW2, "sigma_b2": SB2, "d_in": D_IN, "nt_deg": DEG,
                       "rows": ROWS, "repeats": repeats, "nt_batch": NT_BATCH},
            "rows": rows, "schedules": schedules, "nt_tanh_degrees": degrees, "model": model(rows, schedules)}


def degree_check(P: int, tmp: Path, degs=(DEG, 60, 120)) -> dict:
    """Whose error is NT's tanh disagreement: NT's Gauss-Hermite degree against resprop on the tanh P-run's sampled
    rows (a kernel entry depends only on its pair: the sub-kernel of the sample is the sample of the kernel)."""
    import resprop

    X = inputs(P)[sample_rows(P)]
    xpath = tmp / "X_rows.npy"
    np.save(xpath, X)
    ref = dict(zip(("nngp", "ntk"), resprop.kernel(X, "tanh", DEPTH, SW2, SB2, branch_scale=LAM, ntk=True)))
    out = {}
    for deg in degs:
        w = C.JsonLineWorker([str(C.PEERS_PYTHON), str(NT_WORKER)], "NT worker")
        try:
            r = w.ask(op="run", X=str(xpath), activation="tanh", deg=deg, depth=DEPTH, rho=LAM, sigma_w2=SW2,
                      sigma_b2=SB2, batch_size=len(X), rows=list(range(len(X))), save=str(tmp / f"deg{deg}"))
        finally:
            w.close()
        out[str(deg)] = {n: float(np.max(np.abs(np.load(r["paths"][n]) - ref[n])) / np.max(np.abs(ref[n])))
                         for n in ref}
    print("NT tanh degree check:", json.dumps(out), flush=True)
    return out


def _err(r: dict) -> str:
    e = r.get("err_vs_resprop")
    return "reference" if e is None else f"{e['nngp']:.1e} / {e['ntk']:.1e}"


def tables(res: dict) -> tuple[list[str], list[list], list[str], list[list]]:
    hdr = ["activation", "P", "run", "wall s", "CPU s", "peak RSS MiB", "ns / entry-layer",
           "agreement NNGP / NTK", "others' cores"]
    body = [[r["activation"], r["P"], SIDE[r["side"]], r["wall_s"], r["cpu_s"], r["peak_MiB"],
             r["s_per_entry_layer"] * 1e9, _err(r), r["others_busy_cores_max"]] for r in res["rows"]]
    mh = ["activation", "workers k", "hours", "ns / entry-layer / worker", "schedule s / worker",
          "schedule GiB / worker", "passes", "disk GB", "I/O TB", "I/O MB/s"]
    mb = [[m["activation"], m["k"], m["hours"], m["t_w_ns"], m["schedule_s"], m["schedule_MiB_per_worker"] / 1024,
           m["passes"], m["disk_GB"], m["io_TB"], m["io_MBps"]] for m in res["model"]["rows"]]
    return hdr, body, mh, mb


def _reflow(text: str, width: int = 118) -> str:
    """The prose paragraphs of a markdown text wrapped again (headings and tables as they are)."""
    import textwrap

    out = []
    for para in text.strip().split("\n\n"):
        keep = para.startswith(("#", "|"))
        out.append(para if keep else textwrap.fill(" ".join(para.split()), width, break_on_hyphens=False))
    return "\n\n".join(out) + "\n"


def markdown(res: dict) -> str:
    mi, p = res["machine"], res["params"]
    v = {**next(r["versions"] for r in res["rows"] if r["side"] == "rp"),
         **next((r["versions"] for r in res["rows"] if r["side"] == "nt"), {})}
    hdr, body, mh, mb = tables(res)

    def md(h, b):
        return "\n".join(["| " + " | ".join(h) + " |", "|" + "---|" * len(h)] +
                         ["| " + " | ".join(C._fmt(c) for c in r) + " |" for r in b])

    m = res["model"]
    deg = res.get("nt_tanh_degrees")
    degrees = "" if not deg else (
        " NT's tanh error is its quadrature's: on the same sampled rows NT with Gauss-Hermite degree "
        + ", ".join(f"{d} is {e['nngp']:.1e} / {e['ntk']:.1e}" for d, e in deg.items())
        + " (NNGP / NTK) from resprop, converging to it as the degree grows.")
    k32 = {r["activation"]: r for r in m["rows"] if r["k"] == max(TARGET_K)}
    limits = ("At k = {k} the arithmetic would take {t}, but the run needs {disk:.0f} GB of disk (output plus scratch) "
              "and {io} of file-system bandwidth, and tanh's schedule holds {mem:.0f} GiB in every worker: at CIFAR-10 "
              "scale, depth 100, the file system and the general path's per-worker tables are the limits, not the "
              "arithmetic.").format(
        k=max(TARGET_K), t=", ".join(f"{r['hours'] * 60:.0f} min ({a})" for a, r in k32.items()),
        disk=max(r["disk_GB"] for r in k32.values()),
        io=", ".join(f"{r['io_MBps'] / 1e3:.1f} GB/s ({a})" for a, r in k32.items()),
        mem=k32["tanh"]["schedule_MiB_per_worker"] / 1024 if "tanh" in k32 else float("nan"))
    nt = [r for r in res["rows"] if r["side"] == "nt"]
    worst = max(max(r["err_vs_resprop"].values()) for r in nt) if nt else float("nan")
    dask = max(max(r["err_vs_resprop"].values()) for r in res["rows"] if r["side"] == "rp2")
    return _reflow(f"""## Kernels at scale against nt.batch, benchmarks/bench_kernel_scale.py (issue 24)

Machine: {mi['processor']}, {mi['cpu_count']} cores, {mi['mem_total_GiB']:.0f} GiB; load average before
{mi['loadavg_1_5_15'][0]:.2f}, after {mi['loadavg_after'][0]:.2f} (1 min); background before the run
{mi['background_busy_cores']:.2f} cores busy. Python {mi['python']}, NumPy {mi['numpy']}, BLAS {mi['blas']}; resprop
{v.get('resprop')} (commit {mi['resprop_commit']}{', uncommitted source changes' if mi['resprop_sources_dirty'] else ''}),
zarr {v.get('zarr')}, dask {v.get('dask')}; neural-tangents {v.get('neural_tangents')}, jax {v.get('jax')}
({v.get('dtype')}). Date {res['date']}.

Network: read-in K^(0) = sigma_w2 X X^T / d_in + sigma_b2 (= Theta^(0)), then {p['depth']} residual blocks
h <- h + lambda (W phi(h) + b), lambda = {p['lambda']}, sigma_w2 = {p['sigma_w2']}, sigma_b2 = {p['sigma_b2']};
NNGP and NTK. Inputs: X standard normal, d_in = {p['d_in']}, seed 0 -- **unequal norms** (K^(0)_aa ~ chi^2_64 / 64 +
0.05, so tanh takes resprop's general path). resprop: `resprop.kernel(..., out="K.zarr", dtype="float64")` (tiles
of 2048, two threads) and the same with `workers=2` (a local Dask cluster of two single-threaded processes, started
inside the call), into a temporary directory deleted after each run. NT: `nt.batch(kernel_fn, batch_size=b,
store_on_device=False)` in float32, b = {p['nt_batch']['erf']} (erf) and {p['nt_batch']['tanh']} (tanh,
`stax.ElementwiseNumerical(jnp.tanh, deg={p['nt_deg']})`), compiled on one block before the timed call (compile
not included; NT computes all P^2 entries, resprop the upper triangle). Every number is from a fresh process;
{p['repeats']} interleaved rounds (tanh P = 10000: one), medians of wall and CPU (CPU: all threads, and the Dask processes), the largest
peak. Peak RSS: resprop VmHWM minus the RSS after the imports (plus its Dask children's RSS); NT ru_maxrss minus the
RSS after the imports (its P x P float32 outputs are in memory). ns / entry-layer = wall / (P (P + 1) / 2 x depth).
At P = 2000 (below the tile side 2048) resprop has one tile: one thread, one busy Dask worker. "others' cores": the
most cores other processes kept busy during one of the row's calls (the machine was shared with other work; rounds
with less contention were faster, see `calls` in the JSON).
Agreement: max abs(K - K_resprop) / max abs(K_resprop) on the sub-kernel of {p['rows']} sampled rows.

{md(hdr, body)}

Model: CIFAR-10, P = {m['P']}, depth {m['depth']}, NNGP + NTK in float64, tiles of {m['tile']} ({m['tiles']} per
pass), on k single-threaded workers. Per-worker time per entry-layer = 2 x the measured workers=2 wall / entry-layers
at the largest P (cluster start-up and schedules included); T(k) = S + t_w P (P + 1) / 2 x depth / k, with whole
tiles per worker (ceil(tiles / k)). S is the per-worker schedule (diagonals and per-layer tables of all P inputs,
built by every worker, in parallel, one block at a time: its memory is per worker too), measured at
P = {res['schedules']['erf']['P']}, depth {DEPTH}; its time scaled by P x depth, its memory by P. Assumed: tiles independent (they are), linear scaling in k (no shared memory-bandwidth or scheduler
limit), I/O not limiting; "passes" > 1 means the layers do not fit one block, so the state goes through float64
scratch arrays on disk between passes (disk GB: output plus scratch, `kernel_store.required_bytes`; I/O: reads and
writes of the passes; I/O MB/s: the rate the shared file system must then sustain).

{md(mh, mb)}

{limits}

Agreement: NT (float32) matches resprop to {worst:.1e} of the largest entry at worst over these runs; the workers=2
stores differ from the one-process stores by {dask:.1e} (the engine promises bit-identical results).{degrees}
""")


def main() -> None:
    if "--worker" in sys.argv:
        worker()
        return
    args = sys.argv[1:]
    repeats = int(args[args.index("--repeats") + 1]) if "--repeats" in args else REPEATS
    t0 = time.perf_counter()
    if "--from" in args:  # tables, model and markdown again from a saved record (no measurement)
        res = json.loads(Path(args[args.index("--from") + 1]).read_text())
        res["model"] = model(res["rows"], res["schedules"])
        if "nt_tanh_degrees" not in res:
            with tempfile.TemporaryDirectory() as td:
                res["nt_tanh_degrees"] = degree_check(2000, Path(td))
    else:
        res = run(quick="--quick" in args, repeats=repeats)
        res["script_wall_s"] = time.perf_counter() - t0
    hdr, body, mh, mb = tables(res)
    C.print_table(hdr, body)
    print()
    C.print_table(mh, mb)
    path = Path(args[args.index("--json") + 1]) if "--json" in args else HERE / "results" / "kernel_scale.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(C._jsonable(res), indent=1) + "\n")
    if "--md" in args:
        Path(args[args.index("--md") + 1]).write_text(markdown(res))
    print(f"wrote {path} (script wall {res['script_wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
