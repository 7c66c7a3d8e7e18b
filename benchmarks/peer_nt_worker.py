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
"""
from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
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
