"""Signals and concurrency on every writer: adversarial cases that run ``resprop`` in subprocesses.

Every command that writes a user path (``reproduce``, ``latex``, ``figures``, ``sweep``, ``kernel``, ``fluctuations``,
``train``)
meets:

* ``SIGINT`` and ``SIGTERM`` as soon as the run holds its output lock (the earliest moment a user can interrupt
  a run that has started writing): the run pauses at its checkpoint ``locked`` (tests/interrupting.py), so the
  signal always lands there, and it must stop with exit 130 / 143 and one line, leaving no output, temporary, old
  copy or lock behind;
* two runs started together into one path: each exits 0 or 2 (a one-line error naming the lock or the other
  process); at the end the path holds one complete output whose manifest matches (never a mix, never a file
  with a bad checksum) and no temporaries.

Each case is a Python-API-style :class:`adversarial.Case` whose ``call`` runs the scenario and returns a dict that
``check`` verifies, so the census (tests/adversarial_census.py) counts them like every other case.  They take a few
seconds each (a fresh interpreter per run); tests/test_adversarial.py runs the quick writers by default and the
others under ``-m slow`` (tag ``slow``).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import adversarial

#: the adversarial table's tiny sweep with enough samples that a signal lands while it runs
TINY_SWEEP = adversarial.TINY_SWEEP.replace("samples = 64", "samples = 20000")


def _inputs(tmp: Path) -> str:
    import numpy as np

    path = tmp / "X.npy"
    rng = np.random.default_rng(0)
    np.save(path, rng.standard_normal((400, 10)) * np.linspace(0.5, 2.0, 400)[:, None])  # unequal norms
    return str(path)


def _few_inputs(tmp: Path) -> str:
    import numpy as np

    path = tmp / "X.npy"
    np.save(path, np.random.default_rng(0).standard_normal((6, 4)) * np.linspace(0.5, 2.0, 6)[:, None])
    return str(path)


#: writer -> (output name, argv builder(tmp, out), slow?)
WRITERS: dict[str, tuple[str, Callable[[Path, Path], list[str]], bool]] = {
    "latex": ("tex", lambda tmp, out: ["latex", "--out", str(out)], False),
    "kernel": ("K.npz", lambda tmp, out: ["kernel", "--inputs", _inputs(tmp), "--activation", "tanh", "--depth", "60",
                                          "--sigma-w2", "1", "--sigma-b2", "0.05", "--branch-scale", "0.3", "--ntk",
                                          "--out", str(out)], False),
    "fluctuations": ("F.npz", lambda tmp, out: ["fluctuations", "--inputs", _few_inputs(tmp), "--activation", "tanh",
                                                "--depth", "3", "--width", "64", "--sigma-w2", "1.5", "--sigma-b2",
                                                "0.1", "--branch-scale", "0.5", "--quiet", "--out", str(out)], False),
    "sweep": ("s.nc", lambda tmp, out: ["sweep", _spec(tmp), "--out", str(out), "--workers", "1", "--quiet"], False),
    "figures": ("figs", lambda tmp, out: ["figures", "--out", str(out), "--only", "pdlt", "--quick", "--quiet"], True),
    "reproduce": ("report", lambda tmp, out: ["reproduce", "abcd", "--out", str(out), "--quick", "--quiet"], True),
    "train": ("train", lambda tmp, out: ["train", "abcd-pc-bp", "--quick", "--out", str(out), "--seed", "1"], True),
}


def _spec(tmp: Path) -> str:
    path = tmp / "tiny.toml"
    path.write_text(TINY_SWEEP)
    return str(path)


def _popen(argv: list[str], cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "resprop.numeric.cli", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _lock(out: Path) -> Path:
    from resprop.numeric.engine.output import lock_path

    return lock_path(out)


def _kind(out: Path) -> str:
    return "file" if out.suffix in (".npz", ".nc", ".npy") else "dir"


def _tree_digest(path: Path) -> dict[str, str]:
    if not os.path.lexists(path):
        return {}
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def _strays(out: Path) -> list[str]:
    """Hidden siblings of ``out`` other than a file output's manifest (temporaries, old copies, locks) and, for
    sweep, its parts directory's temporaries."""
    from resprop.numeric.engine.output import manifest_path

    side = manifest_path(out, "file").name
    return sorted(p.name for p in out.parent.iterdir()
                  if p.name.startswith(f".{out.name}.") and p.name != side)


def _own_output(out: Path) -> bool:
    """``out`` is absent or a complete resprop output whose manifest matches every file."""
    from resprop.numeric.engine.output import OutputPathError, check_replaceable

    if not os.path.lexists(out):
        return True
    try:
        check_replaceable(out, _kind(out))
    except OutputPathError:
        return False
    return True


def signal_scenario(writer: str, sig: int) -> dict:
    """Run ``writer`` into a fresh path, send ``sig`` where it pauses holding its lock, report what it left."""
    from interrupting import interrupt_at

    name, argv, _ = WRITERS[writer]
    tmp = Path(tempfile.mkdtemp(prefix="resprop-sig-"))
    try:
        out = tmp / name
        locked = []
        done = interrupt_at(argv(tmp, out), "locked", sig=sig, what=writer, cwd=tmp,
                            while_paused=lambda: locked.append(os.path.lexists(_lock(out))))
        lines = [ln for ln in done.stderr.strip().splitlines() if ln]
        return {"writer": writer, "signal": int(sig), "locked": locked == [True], "code": done.returncode,
                "stderr_lines": lines, "traceback": "Traceback" in done.stderr, "exists": os.path.lexists(out),
                "own_output": _own_output(out), "strays": _strays(out)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_signal(res: dict) -> bool:
    """The signal landed while the run held its lock, before anything was committed: it must have stopped (never
    finished: exit 0 would mean the signal was ignored) with one line saying so, leaving nothing behind."""
    if not res["locked"] or res["traceback"] or res["strays"] or res["exists"]:
        return False
    # 128 + signal, or killed by the signal itself after the one-line message (Python re-raises an interrupt that
    # lands during interpreter exit that way; a shell shows both as $? = 128 + signal)
    if res["code"] not in (128 + res["signal"], -res["signal"]) or len(res["stderr_lines"]) > 2:
        return False
    said = [ln for ln in res["stderr_lines"] if ln.startswith("resprop: interrupted")]
    return bool(said) and not any("was written" in ln for ln in said)


def concurrency_scenario(writer: str, runs: int = 3, timeout: float = 600.0) -> dict:
    """Start ``runs`` copies of ``writer`` into one path at once; report exit codes, messages and what is left."""
    name, argv, _ = WRITERS[writer]
    tmp = Path(tempfile.mkdtemp(prefix="resprop-conc-"))
    try:
        out = tmp / name
        args = argv(tmp, out)
        procs = [_popen(args, tmp) for _ in range(runs)]
        results = []
        for p in procs:
            try:
                o, e = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                o, e = p.communicate()
            results.append((p.returncode, e))
        return {"writer": writer, "codes": [c for c, _ in results],
                "refusals": [e.strip().splitlines()[-1] if e.strip() else "" for c, e in results if c != 0],
                "traceback": any("Traceback" in e for _, e in results), "exists": os.path.lexists(out),
                "own_output": _own_output(out), "strays": _strays(out)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_concurrency(res: dict) -> bool:
    if res["traceback"] or res["strays"] or not res["own_output"] or not res["exists"]:
        return False
    if 0 not in res["codes"] or any(c not in (0, 2) for c in res["codes"]):
        return False
    return all(r.startswith("resprop: error:") and ("lock" in r or "process" in r or "running" in r)
               for r in res["refusals"])


def writer_cases():
    """The Case list (imported by tests/adversarial.py's all_cases)."""
    import adversarial

    cases = []
    for writer, (_, _, slow) in WRITERS.items():
        tags = ("process", "slow") if slow else ("process",)
        for sig in (signal.SIGINT, signal.SIGTERM):
            cases.append(adversarial.Case(
                f"writer:{writer}:{signal.Signals(sig).name}", "ok", (),
                call=lambda w=writer, s=sig: signal_scenario(w, s), check=check_signal, timeout=600.0, tags=tags))
        cases.append(adversarial.Case(
            f"writer:{writer}:concurrent", "ok", (), call=lambda w=writer: concurrency_scenario(w),
            check=check_concurrency, timeout=900.0, tags=tags))
    return cases
