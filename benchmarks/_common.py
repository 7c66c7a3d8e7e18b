"""Shared helpers for the resprop benchmarks: timing, peak memory, machine info, output.

Every benchmark script exposes ``run() -> dict`` and is runnable as
``python benchmarks/<name>.py [--json PATH]``; ``--json`` writes the result
dictionary so that ``run_all.py`` can collect it from a fresh subprocess.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent


CONTENDED = 0.25  # cores used by other processes above which a timed call counts as contended


def timeit(fn: Callable[[], Any], repeats: int = 3, warmup: int = 1, extra: int | None = None) -> dict[str, Any]:
    """Wall-clock timing with time.perf_counter: ``warmup`` discarded calls, then ``repeats`` timed calls.

    For each timed call the number of cores other processes kept busy meanwhile is recorded
    (``others_busy_cores``: /proc/stat busy time minus this process's own CPU time, per wall
    second; None where unavailable or the call is too short for the 1/CLK_TCK resolution).  A call during which that exceeds CONTENDED does not count
    towards ``repeats``; up to ``extra`` (default ``repeats``) additional calls are made instead.
    Returns best (the reported figure: minimum over all calls), median over the uncontended calls
    (all calls if none was uncontended), every time, and the value of the last call.
    """
    extra = repeats if extra is None else extra
    value = None
    for _ in range(warmup):
        value = fn()
    times, others = [], []
    while True:
        clean = [t for t, o in zip(times, others) if o is None or o <= CONTENDED]
        if len(clean) >= repeats or len(times) >= repeats + extra:
            break
        gc.collect()
        s0, c0 = _cpu_times(), _own_cpu()
        t0 = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - t0
        s1, c1 = _cpu_times(), _own_cpu()
        times.append(elapsed)
        others.append(None if s0 is None or s1 is None or elapsed < 5.0 / _HZ else  # below tick resolution
                      max(0.0, ((s1[0] - s1[1]) - (s0[0] - s0[1])) / _HZ - (c1 - c0)) / elapsed)
    return {"best_s": min(times), "median_s": statistics.median(clean or times), "times_s": times,
            "others_busy_cores": others, "uncontended_calls": len(clean), "repeats": repeats,
            "warmup": warmup, "value": value}


def max_others(*records: dict[str, Any]) -> float | None:
    vals = [v for r in records for v in r.get("others_busy_cores", []) if v is not None]
    return max(vals) if vals else None


def warn_if_contended(*records: dict[str, Any]) -> None:
    m = max_others(*records)
    if m is not None:
        n = sum(r.get("uncontended_calls", 0) for r in records)
        tot = sum(len(r.get("times_s", [])) for r in records)
        print(f"other processes during the timed calls: up to {m:.2f} cores busy; {n} of {tot} calls uncontended"
              + ("  -- WARNING: contended calls (repeated where possible; best/median use the clean ones)"
                 if m > CONTENDED else ""))


def peak_memory(fn: Callable[[], Any]) -> dict[str, float]:
    """Peak traced heap (tracemalloc, includes NumPy buffers) above the baseline during one call.

    Run separately from the timed calls because tracing slows allocation down.
    """
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    value = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del value
    gc.collect()
    return {"peak_MiB": (peak - base) / 2**20}


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def machine_info() -> dict[str, Any]:
    import scipy

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas_name = f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001  (older NumPy has no mode="dicts")
        blas_name = "unknown"
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    status = _git("status", "--porcelain", "--", "derive", "numeric", "generated")
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas": blas_name,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "machine": platform.machine(),
        "platform": platform.platform(),
        "processor": _cpu_model(),
        "thread_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
                       if k in os.environ},
        "loadavg_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "background_busy_cores": background_busy_cores(),
        "resprop_commit": _git("rev-parse", "--short", "HEAD"),
        "resprop_sources_dirty": None if status is None else bool(status),
    }


try:
    _HZ = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):
    _HZ = 100


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _cpu_times() -> tuple[int, int] | None:
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]), idle


def background_busy_cores(window: float = 1.0) -> float | None:
    """CPU cores kept busy by other processes, measured from /proc/stat while this process sleeps."""
    a = _cpu_times()
    time.sleep(window)
    b = _cpu_times()
    if a is None or b is None or b[0] == a[0]:
        return None
    busy = 1.0 - (b[1] - a[1]) / (b[0] - a[0])
    return busy * (os.cpu_count() or 1)


def wait_idle(timeout: float, threshold: float = 0.1) -> float:
    """Wait (up to timeout seconds) until other processes use fewer than ``threshold`` cores."""
    t0 = time.perf_counter()
    while True:
        bg = background_busy_cores(1.0)
        if bg is None or bg < threshold:
            break
        if time.perf_counter() - t0 > timeout:
            print(f"machine still busy ({bg:.2f} cores) after waiting {timeout:.0f} s; running anyway")
            break
    waited = time.perf_counter() - t0
    if waited > 1.5:
        print(f"(waited {waited:.0f} s for an idle CPU)")
    return waited


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def print_machine(info: dict[str, Any]) -> None:
    print(f"machine: {info['processor']} | cpu_count={info['cpu_count']} (affinity {info['cpu_affinity']}) | "
          f"python {info['python']} | numpy {info['numpy']} | scipy {info['scipy']} | BLAS {info['blas']}")
    print(f"resprop commit {info['resprop_commit']}" + (" (+ uncommitted source changes)"
                                                        if info['resprop_sources_dirty'] else ""))
    bg = info.get("background_busy_cores")
    if bg is not None:
        print(f"background CPU use before the run: {bg:.2f} cores busy (sampled over 1 s while idle)")
        if bg > CONTENDED:
            print("WARNING: other processes are using the CPU; timings (threaded ones especially) are inflated")


#: the Python of the peer benchmarks' own virtual environment (created by setup_peers.sh)
PEERS_PYTHON = Path(__file__).resolve().parent / ".venv-peers" / "bin" / "python"


def start_peer_benchmark(name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Print the machine record; return it and, when the peers venv is missing, the benchmark's "skipped"
    record (else None)."""
    info = machine_info()
    print_machine(info)
    if PEERS_PYTHON.exists():
        return info, None
    msg = f"peers venv {PEERS_PYTHON.parent.parent} missing: run `bash benchmarks/setup_peers.sh` first"
    print("SKIPPED: " + msg)
    return info, {"benchmark": name, "machine": info, "skipped": msg}


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[k]) for r in cells)) for k, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("-" * len(line))
    for r in cells:
        print("  ".join(c.rjust(w) if k else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths))))


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        if c == 0 or 1e-3 <= abs(c) < 1e5:
            return f"{c:.4g}"
        return f"{c:.3e}"
    return str(c)


def max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / |b| elementwise (b the reference; entries with b == 0 use the absolute error)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    den = np.where(b == 0, 1.0, np.abs(b))
    return float(np.max(np.abs(a - b) / den))


def scaled_deviations(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per P x P kernel: max |a - b| / max |b| off the diagonal and on it (b the reference)."""
    out = {}
    for k, ref in b.items():
        d = np.abs(np.asarray(a[k], float) - ref)
        top = float(np.max(np.abs(ref)))
        off = ~np.eye(ref.shape[0], dtype=bool)
        out[k] = {"offdiag": float(np.max(d[off]) / top) if off.any() else 0.0,
                  "diag": float(np.max(np.diagonal(d)) / top)}
    return out


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items() if k != "value"}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def main(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to this long for other processes to leave the CPU idle")
    args = parser.parse_args()
    if args.wait_idle > 0:
        wait_idle(args.wait_idle)
    t0 = time.perf_counter()
    res = run()
    res["script_wall_s"] = time.perf_counter() - t0
    res["background_busy_cores_after"] = background_busy_cores()
    print(f"(script wall time {res['script_wall_s']:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(_jsonable(res), indent=2) + "\n")
    return res


def stats(t: dict[str, Any]) -> dict[str, Any]:
    """The timing record without the returned value (for JSON)."""
    return {k: v for k, v in t.items() if k != "value"}


if __name__ == "__main__":  # pragma: no cover
    print_machine(machine_info())
    sys.exit(0)


class JsonLineWorker:
    """A worker process spoken to in JSON lines: ``ask(**request)`` writes one line and reads one answer; the first
    line it prints is ``hello``; ``close()`` sends ``{"op": "quit"}`` (used by the peer and resprop workers)."""

    def __init__(self, args: list[str], name: str = "worker", timeout: float = 120) -> None:
        self.name, self.timeout = name, timeout
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        self.hello = self._read()

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited (code {self.proc.poll()})")
        return json.loads(line)

    def ask(self, **req) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            self.ask(op="quit")
        except (RuntimeError, BrokenPipeError, ValueError):
            pass
        self.proc.wait(timeout=self.timeout)
