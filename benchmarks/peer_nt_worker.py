"""neural-tangents worker for bench_peers_nt.py.  Runs INSIDE benchmarks/.venv-peers (see setup_peers.sh).

    benchmarks/.venv-peers/bin/python benchmarks/peer_nt_worker.py JOB.json     # or the job on stdin

One process runs a list of networks at one precision (JAX_ENABLE_X64 is set from "x64" before jax is
imported, so float32 and float64 need a process each):

    {"x64": false, "out_dir": "dir", "repeats": 3, "extra": 3, "save": true,
     "runs": [{"X": "x.npy", "activation": "erf" | "relu", "depth": 200, "rho": 0.1, "sigma_w2": 1.25,
               "sigma_b2": 0.05, "sigma_w2_in": 1.0, "sigma_b2_in": 0.0,
               "gets": [["nngp"], ["nngp", "ntk"]], "compose": "repeat" | "serial"}, ...]}

Network (stax, NTK parameterisation, the default): a read-in Dense(W_std = sqrt(sigma_w2_in),
b_std = sqrt(sigma_b2_in)), so that K^(0) = sigma_w2_in X X^T / d_in + sigma_b2_in = Theta^(0), then
stax.repeat(block, depth) (one lax.scan; "compose": "serial" unrolls the blocks instead) with

    block = serial(FanOut(2), parallel(serial(phi, Dense(1, W_std = sqrt(sigma_w2) rho,
                                                         b_std = sqrt(sigma_b2) rho)), Identity()), FanInSum())

which gives K^(l) = K^(l-1) + rho^2 (sigma_w2 <phi phi> + sigma_b2) and
Theta^(l) = Theta^(l-1) + rho^2 (sigma_w2 <phi phi> + sigma_b2 + sigma_w2 <phi' phi'> Theta^(l-1)).
(FanInSum warns that it assumes independent branches; the residual branch W phi(h) is uncorrelated with h
because W is independent and centred, so the sum of the kernels is exact.)

kernel_fn is jitted (get static) and called with x2 = None.  For each get the worker times the first call
(trace + compile + run), then `repeats` warm calls (block_until_ready) with benchmarks/_common.timeit
(best, median, contention record; up to `extra` more calls replace contended ones) and the process
CPU time of each call (cpu_s, all threads), and saves the kernels as .npy files in out_dir.
Prints one JSON line: versions, dtype, and per run and get {first_call_s, best_s, ..., paths}.

``--serve`` (used by bench_kernel_engine.py, which interleaves resprop and neural-tangents calls): the worker
reads one JSON request per line on stdin and answers one JSON line each, so the caller decides when each call
runs.  Requests: {"op": "prepare", "key": K, "X": path, "activation": "erf" | "relu" | "gelu" | "tanh",
"deg": 25, "depth": L, "rho": lambda, "sigma_w2": .., "sigma_b2": .., "get": ["nngp", ...],
"save": path prefix or null} builds and jits the network (read-in Dense with W_std = sqrt(sigma_w2),
b_std = sqrt(sigma_b2), so K^(0) = sigma_w2 X X^T / d_in + sigma_b2, then the residual block as above, gamma = 1),
times the first call and saves the kernels; {"op": "time", "key": K}
times one warm call (wall and process CPU seconds); {"op": "drop", "key": K}; {"op": "quit"}.  Every
answer carries the process's peak RSS so far (``maxrss_MiB``) and, in the first line, the versions and the
RSS after the imports (``baseline_MiB``).  tanh is ``stax.ElementwiseNumerical(jnp.tanh, deg)`` (Gauss-Hermite
quadrature of degree ``deg`` per dimension), gelu ``stax.Gelu(approximate=False)`` (its closed-form dual).
"""
from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _maxrss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def serve() -> None:
    """The line protocol of ``--serve`` (see the module docstring)."""
    os.environ["JAX_ENABLE_X64"] = "1" if "--x64" in sys.argv else "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore")
    import jax
    import jax.numpy as jnp
    import jaxlib
    import neural_tangents as nt
    import numpy as np
    from neural_tangents import stax

    dtype = jnp.float64 if "--x64" in sys.argv else jnp.float32

    def reply(obj: dict) -> None:
        obj["maxrss_MiB"] = _maxrss_mib()
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    reply({"neural_tangents": nt.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
           "numpy": np.__version__, "dtype": str(jnp.zeros(1, dtype).dtype), "baseline_MiB": _maxrss_mib()})
    nets: dict = {}
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "quit":
            break
        if op == "drop":
            nets.pop(req["key"], None)
            reply({"ok": True})
            continue
        if op == "prepare":
            X = jnp.asarray(np.load(req["X"]), dtype=dtype)
            act = req["activation"]
            phi = {"erf": stax.Erf, "relu": stax.Relu, "gelu": lambda: stax.Gelu(approximate=False),
                   "tanh": lambda: stax.ElementwiseNumerical(jnp.tanh, deg=int(req.get("deg", 25)))}[act]
            sw, sb, lam = np.sqrt(float(req["sigma_w2"])), np.sqrt(float(req["sigma_b2"])), float(req["rho"])
            branch = stax.serial(phi(), stax.Dense(1, W_std=sw * lam, b_std=sb * lam))
            block = stax.serial(stax.FanOut(2), stax.parallel(branch, stax.Identity()), stax.FanInSum())
            _, _, kernel_fn = stax.serial(stax.Dense(1, W_std=sw, b_std=sb), stax.repeat(block, int(req["depth"])))
            kernel_fn = jax.jit(kernel_fn, static_argnames="get")
            get = tuple(req["get"])

            def call(kernel_fn=kernel_fn, X=X, get=get):
                out = kernel_fn(X, None, get=get)
                return jax.tree_util.tree_map(lambda a: a.block_until_ready(), out)

            t0 = time.perf_counter()
            value = call()
            first = time.perf_counter() - t0
            paths = {}
            if req.get("save"):
                for name, arr in zip(get, value):
                    paths[name] = f"{req['save']}_{name}.npy"
                    np.save(paths[name], np.asarray(arr))
            del value
            nets[req["key"]] = call
            reply({"first_call_s": first, "paths": paths})
            continue
        call = nets[req["key"]]
        c0 = os.times()
        t0 = time.perf_counter()
        call()
        wall = time.perf_counter() - t0
        c1 = os.times()
        reply({"wall_s": wall, "cpu_s": c1.user + c1.system - c0.user - c0.system})


def main() -> None:
    if "--serve" in sys.argv:
        serve()
        return
    job = json.loads(Path(sys.argv[1]).read_text() if len(sys.argv) > 1 else sys.stdin.read())
    os.environ["JAX_ENABLE_X64"] = "1" if job.get("x64") else "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore", message=".*FanIn.*")
    import _common as C
    import jax
    import jax.numpy as jnp
    import jaxlib
    import neural_tangents as nt
    import numpy as np
    from neural_tangents import stax

    dtype = jnp.float64 if job.get("x64") else jnp.float32
    prec = "f64" if job.get("x64") else "f32"
    out_dir = Path(job.get("out_dir", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    repeats = int(job.get("repeats", 3))
    extra = int(job.get("extra", repeats))
    records = []
    for run in job["runs"]:
        X = jnp.asarray(np.load(run["X"]), dtype=dtype)
        rho, sw2, sb2 = float(run["rho"]), float(run["sigma_w2"]), float(run["sigma_b2"])
        phi = {"erf": stax.Erf, "relu": stax.Relu}[run["activation"]]
        branch = stax.serial(phi(), stax.Dense(1, W_std=np.sqrt(sw2) * rho, b_std=np.sqrt(sb2) * rho))
        block = stax.serial(stax.FanOut(2), stax.parallel(branch, stax.Identity()), stax.FanInSum())
        readin = stax.Dense(1, W_std=np.sqrt(float(run.get("sigma_w2_in", 1.0))),
                            b_std=np.sqrt(float(run.get("sigma_b2_in", 0.0))))
        depth = int(run["depth"])
        body = stax.repeat(block, depth) if run.get("compose", "repeat") == "repeat" else stax.serial(*[block] * depth)
        _, _, kernel_fn = stax.serial(readin, body)
        kernel_fn = jax.jit(kernel_fn, static_argnames="get")
        tag = f"{run['activation']}_L{depth}_P{X.shape[0]}_{prec}"

        def call(get, kernel_fn=kernel_fn, X=X):
            return jax.tree_util.tree_map(lambda a: a.block_until_ready(), kernel_fn(X, None, get=get))

        rec = {"run": run, "gets": {}}
        for get in run.get("gets", [["nngp"], ["nngp", "ntk"]]):
            get = tuple(get)
            t0 = time.perf_counter()
            call(get)
            first = time.perf_counter() - t0
            cpu = []

            def timed(get=get, cpu=cpu):
                c0 = os.times()
                value = call(get)
                c1 = os.times()
                cpu.append(c1.user + c1.system - c0.user - c0.system)
                return value

            t = C.timeit(timed, repeats=repeats, warmup=0, extra=extra)
            res = t.pop("value")
            t["cpu_s"] = cpu  # process CPU seconds (all threads) of each timed call
            t["best_cpu_s"] = min(cpu)
            t["first_call_s"] = first
            t["paths"] = {}
            if job.get("save", True):
                for name, arr in zip(get, res):
                    path = out_dir / f"nt_{tag}_{'+'.join(get)}_{name}.npy"
                    np.save(path, np.asarray(arr))
                    t["paths"][name] = str(path)
            rec["gets"]["+".join(get)] = t
        records.append(rec)
    print(json.dumps({"neural_tangents": nt.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
                      "numpy": np.__version__, "dtype": str(jnp.zeros(1, dtype).dtype),
                      "devices": [str(d) for d in jax.devices()], "records": records}))


if __name__ == "__main__":
    main()
