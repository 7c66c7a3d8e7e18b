"""neural-tangents ``nt.batch`` worker for bench_kernel_scale.py.  Runs INSIDE benchmarks/.venv-peers (float32).

    benchmarks/.venv-peers/bin/python benchmarks/peer_nt_batch_worker.py     # JSON lines on stdin/stdout

First line out: versions and ``baseline_MiB`` (ru_maxrss after the imports).  Then one request per line:
{"op": "run", "X": path, "activation": "erf" | "tanh", "deg": 25, "depth": L, "rho": lambda, "sigma_w2": ..,
"sigma_b2": .., "batch_size": b, "rows": [...], "save": path prefix} builds the network of peer_nt_worker.py
(read-in Dense(sqrt(sigma_w2), sqrt(sigma_b2)), then stax.repeat of the residual block), wraps its kernel_fn in
``nt.batch(kernel_fn, batch_size=b, store_on_device=False)`` (b x b blocks, each one call of the internally jitted
kernel_fn, gathered into host memory), compiles it on X[:b] (one block: the same shapes), then times ONE call on the
whole X with get=("nngp", "ntk") (wall and process CPU seconds) and saves the sub-kernels on ``rows`` as
``{save}_{name}.npy``.  Answers {"compile_s", "wall_s", "cpu_s", "others_busy_cores", "maxrss_MiB", "paths"};
{"op": "quit"} ends.
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
    os.environ["JAX_ENABLE_X64"] = "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore")
    import _common as C
    import jax
    import jax.numpy as jnp
    import jaxlib
    import neural_tangents as nt
    import numpy as np
    from bench_kernel_scale import others
    from neural_tangents import stax
    from peer_nt_worker import _maxrss_mib

    def reply(obj: dict) -> None:
        obj["maxrss_MiB"] = _maxrss_mib()
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    reply({"neural_tangents": nt.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
           "dtype": "float32", "baseline_MiB": _maxrss_mib()})
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "quit":
            break
        X = jnp.asarray(np.load(req["X"]), dtype=jnp.float32)
        phi = {"erf": stax.Erf, "tanh": lambda: stax.ElementwiseNumerical(jnp.tanh, deg=int(req["deg"]))}
        sw, sb, lam = np.sqrt(float(req["sigma_w2"])), np.sqrt(float(req["sigma_b2"])), float(req["rho"])
        branch = stax.serial(phi[req["activation"]](), stax.Dense(1, W_std=sw * lam, b_std=sb * lam))
        block = stax.serial(stax.FanOut(2), stax.parallel(branch, stax.Identity()), stax.FanInSum())
        _, _, kernel_fn = stax.serial(stax.Dense(1, W_std=sw, b_std=sb), stax.repeat(block, int(req["depth"])))
        b = int(req["batch_size"])
        batched = nt.batch(kernel_fn, batch_size=b, store_on_device=False)
        get = ("nngp", "ntk")
        t0 = time.perf_counter()
        jax.block_until_ready(batched(X[:b], None, get=get))
        compile_s = time.perf_counter() - t0
        s0, c0, t0 = C._cpu_times(), os.times(), time.perf_counter()
        K = [np.asarray(jax.block_until_ready(k)) for k in batched(X, None, get=get)]
        wall = time.perf_counter() - t0
        c1, s1 = os.times(), C._cpu_times()
        cpu = c1.user + c1.system - c0.user - c0.system
        rows = np.asarray(req["rows"])
        paths = {}
        for name, k in zip(get, K):
            paths[name] = f"{req['save']}_{name}.npy"
            np.save(paths[name], k[np.ix_(rows, rows)])
        del K
        reply({"compile_s": compile_s, "wall_s": wall, "cpu_s": cpu, "others_busy_cores": others(s0, s1, cpu, wall),
               "paths": paths})


if __name__ == "__main__":
    main()
