"""Trained-network experiments: the :class:`Experiment` interface, discovery through the theory registry, and the
seed statistics every experiment's claim rows use.

Interface (what a theory provides)
----------------------------------
A theory declares ``experiments="resprop.numeric.theories.<slug>.training:EXPERIMENTS"`` in its
:class:`resprop.registry.Theory`; that module's ``EXPERIMENTS`` is a dict ``name -> Experiment`` and must import
without JAX (import ``jax``/``optax`` and :mod:`resprop.numeric.training.loop` inside ``run``).  ``run(quick, out,
seeds)`` trains (quick: a reduced size that takes about a minute on two cores), writes its PNG figures into the
directory ``out`` (names start with the experiment name) and returns an :class:`ExperimentResult`:
per-seed metrics (``{seed: {metric: value or list}}``), a ``summary`` of the numbers the claims compare, the
figure paths, and claim rows built with :func:`resprop.numeric.report.claims.row` (quantity, the paper's
statement, the measured numbers, the rule and its verdict).  :func:`run_experiment` times the run and writes
``out/<name>.json`` (:meth:`ExperimentResult.save`); :func:`load_result` reads it back, which is how the report
shows the rows without training again (see docs/training.md).

Verdicts over seeds
-------------------
A paper statement "A > B" (or "A grows") is tested on the paired per-seed differences ``D_s = A_s - B_s``: it
holds when ``mean(D) > k sd(D)`` with the seed-to-seed standard deviation ``sd`` (ddof 1) and ``k = 1`` -- the
effect lies beyond the seed-to-seed spread (:func:`beyond_spread`).  A statement "A changes little" is the
comparison "|change of A| < |change of B|" against the reference setting the paper contrasts it with.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from resprop.numeric.engine.validation import ParameterError

__all__ = ["Experiment", "ExperimentResult", "experiments", "experiment", "run_experiment", "load_result",
           "seed_stats", "beyond_spread", "RESULT_SUFFIX", "MAX_SEED", "check_seed", "check_seeds"]

RESULT_SUFFIX = ".json"

#: the largest seed: seeds are integers in [0, 2^63 - 1]; the JAX key of a seed is built from all 64 bits
#: (``resprop.numeric.training.loop.seed_key``: high and low 32-bit halves), so distinct seeds give distinct keys
MAX_SEED = 2**63 - 1


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as an int in [0, 2^63 - 1]; booleans, fractional values, non-numbers and numbers out of range are a
    :class:`ParameterError` naming ``name`` (an integral float such as 2.0 is the integer 2)."""
    bad = ParameterError(name, f"must be an integer in [0, 2^63 - 1], got {seed!r:.40}")
    if isinstance(seed, (bool, np.bool_)) or seed is None or isinstance(seed, (str, bytes)):
        raise bad
    if isinstance(seed, (int, np.integer)):
        value = int(seed)
    else:
        try:
            number = float(seed)
        except (TypeError, ValueError, OverflowError):
            raise bad from None
        if np.ndim(seed) != 0 or not number.is_integer() or abs(number) > 2.0**53:  # not exact beyond 2^53
            raise bad
        value = int(number)
    if not 0 <= value <= MAX_SEED:
        raise bad
    return value


def check_seeds(seeds, name: str = "seeds") -> tuple[int, ...]:
    """A non-empty sequence of distinct seeds, each checked by :func:`check_seed`."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, (Sequence, np.ndarray)):
        raise ParameterError(name, f"must be a non-empty sequence of distinct integers in [0, 2^63 - 1], "
                                   f"got {seeds!r:.40}")
    chosen = tuple(check_seed(s, name) for s in seeds)
    if not chosen or len(set(chosen)) != len(chosen):
        raise ParameterError(name, f"must be a non-empty sequence of distinct integers in [0, 2^63 - 1], "
                                   f"got {list(chosen)}")
    return chosen


@dataclass
class ExperimentResult:
    """What one run of an experiment measured (JSON-ready through :meth:`to_dict`)."""

    name: str
    theory: str
    quick: bool
    seeds: tuple[int, ...]
    per_seed: dict[int, dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    claims: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from resprop.numeric.report.claims import _num

        return {"name": self.name, "theory": self.theory, "quick": self.quick, "seeds": list(self.seeds),
                "seconds": round(self.seconds, 2), "settings": _num(self.settings),
                "summary": _num(self.summary), "claims": self.claims,
                "figures": [Path(p).name for p in self.figures],
                "per_seed": {str(s): _num(v) for s, v in self.per_seed.items()}}

    def save(self, out: Path) -> Path:
        path = Path(out) / f"{self.name}{RESULT_SUFFIX}"
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


@dataclass(frozen=True)
class Experiment:
    """One registered trained-network experiment of a theory: ``run(quick, out, seeds) -> ExperimentResult``."""

    name: str
    theory: str
    title: str
    run: Callable[[bool, Path, tuple[int, ...]], ExperimentResult]
    seeds: tuple[int, ...] = (0, 1, 2)
    description: str = ""


def experiments() -> dict[str, Experiment]:
    """Every registered experiment by name, in report order of the theories (names are unique)."""
    from resprop import registry

    out: dict[str, Experiment] = {}
    for th in registry.theories().values():
        ref = getattr(th, "experiments", None)
        if not ref:
            continue
        for name, exp in registry.resolve(ref).items():
            if name in out:
                raise ValueError(f"experiments: {name!r} is declared by {out[name].theory!r} and {th.slug!r}")
            if exp.name != name or exp.theory != th.slug:
                raise ValueError(f"experiments: {ref} entry {name!r} names {exp.name!r} of theory {exp.theory!r}")
            out[name] = exp
    return out


def experiment(name: str) -> Experiment:
    table = experiments()
    if name not in table:
        raise ParameterError("experiment", f"unknown experiment {name!r}; allowed: {', '.join(table) or 'none'}")
    return table[name]


def run_experiment(exp: Experiment, out: Path, *, quick: bool, seeds: Sequence[int] | None = None) -> ExperimentResult:
    """Run ``exp`` into the existing directory ``out`` and write ``out/<name>.json``; returns the result."""
    chosen = check_seeds(exp.seeds if seeds is None else seeds)
    start = time.perf_counter()
    result = exp.run(bool(quick), Path(out), chosen)
    result.seconds = time.perf_counter() - start
    result.save(Path(out))
    return result


def load_result(path: Path) -> dict[str, Any]:
    """A saved result (``<name>.json``) as a dict; its ``claims`` are report rows."""
    return json.loads(Path(path).read_text())


def seed_stats(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Mean and seed-to-seed standard deviation (ddof 1; 0 for one seed) of per-seed values."""
    v = np.asarray(values, dtype=float)
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return {"mean": float(v.mean()), "sd": sd, "n_seeds": int(v.size)}


def beyond_spread(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray | float = 0.0,
                  k: float = 1.0) -> tuple[bool, dict[str, float]]:
    """Does ``a > b`` hold beyond the seed-to-seed spread?  Paired differences ``D = a - b`` (``b`` may be a
    number): holds iff ``mean(D) > k sd(D)`` and, with a single seed, ``D > 0``.  Returns (holds, stats of D)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    st = seed_stats(d)
    return bool(st["mean"] > k * st["sd"] and st["mean"] > 0), st
