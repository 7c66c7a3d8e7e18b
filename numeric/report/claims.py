"""Report claims: the shared pieces every theory's ``claims.py`` builds its rows from.

Every row is a plain dict (JSON-ready):

``quantity``    what is compared;
``paper``       the paper's value or claim (number or text);
``theory``      resprop's value (number, text, list or {label: value});
``simulation``  the independent check: Monte Carlo ``{"mean", "se", "method", ...}`` or a reference value
                ``{"value", "method"}`` (quadrature, mpmath, exact solver, linprog); None for pure derivations;
``check``       the pass criterion in words, with its tolerance (4 standard errors plus a stated systematic
                allowance where the theory is leading order);
``passed``      whether the criterion holds;
``verdict``     "agrees", "documented disagreement" (resprop and the paper differ as docs/disagreements.md
                documents, and the check confirms resprop's side) or "FAILS" (the check does not hold);
``details``     the arrays behind the row (per-layer values, fits, seeds).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["row", "mc", "ref", "within", "size", "A"]

#: Li-Nica-Roy's alpha = lam = 1/sqrt(2), used by several theories' checks
A = 2**-0.5


def size(table: dict[str, tuple[int, int]], name: str, quick: bool) -> int:
    """Monte Carlo size ``name`` from a theory's (quick, full) table."""
    return table[name][0 if quick else 1]


def _num(v):
    """JSON-ready scalar/array: numpy -> Python, Fraction -> str."""
    if isinstance(v, dict):
        return {str(k): _num(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_num(x) for x in v]
    if isinstance(v, np.ndarray):
        return _num(v.tolist())
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, Fraction):
        return str(v)
    return v


def row(quantity: str, paper, theory, simulation=None, *, passed: bool, documented: bool = False, check: str = "",
        note: str = "", details: dict | None = None) -> dict:
    passed = bool(passed)
    verdict = "FAILS" if not passed else ("documented disagreement" if documented else "agrees")
    return {"quantity": quantity, "paper": _num(paper), "theory": _num(theory),
            "simulation": _num(simulation), "check": check, "passed": passed, "documented": bool(documented),
            "verdict": verdict, "note": note, "details": _num(details or {})}


def mc(mean, se, method: str, **extra) -> dict:
    return {"mean": float(mean), "se": float(se), "method": method, **extra}


def ref(value, method: str) -> dict:
    return {"value": value, "method": method}


def within(sim: float, se: float, th: float, allowance: float = 0.0, k: float = 4.0) -> bool:
    return bool(abs(sim - th) <= k * se + allowance)


