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

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["row", "mc", "ref", "within", "size", "A", "Claim", "Evidence", "Context", "Tolerance", "Criterion",
           "AGREES", "DOCUMENTED", "FAILS", "evaluate_claims", "theory_claims", "registered_claims"]

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


# --------------------------------------------------------------------------- claims declared once
AGREES = "agrees"
DOCUMENTED = "documented disagreement"
FAILS = "FAILS"


@dataclass(frozen=True)
class Tolerance:
    """The Monte Carlo rule ``lhs <= k SE + allowance``, stated once: :meth:`holds` applies it and :meth:`text`
    writes it for the report.  The evidence supplies ``compare = (sim, se, theory, allowance)`` (scalars or arrays;
    with arrays the rule must hold elementwise, ``scope`` says where, e.g. "every layer"); ``allowance`` is the
    systematic allowance in words (e.g. "2d/n^2"), ``why`` its justification, ``also`` an extra condition in words
    whose truth the evidence gives as ``holds``."""

    k: float = 4.0
    allowance: str = ""
    why: str = ""
    scope: str = ""
    lhs: str = "|MC - theory|"
    se: str = "SE"
    also: str = ""

    def holds(self, ev: Evidence) -> bool:
        if ev.compare is None:
            raise TypeError("a Tolerance needs Evidence.compare = (sim, se, theory, allowance)")
        sim, se, th, allow = ev.compare
        ok = np.abs(np.asarray(sim, float) - np.asarray(th, float)) <= self.k * np.asarray(se, float) + np.asarray(
            allow, float)
        return bool(np.all(ok)) and bool(ev.holds)

    def text(self, ev: Evidence | None = None) -> str:
        s = f"{self.scope}: " if self.scope else ""
        s += f"{self.lhs} <= {self.k:g} {self.se}"
        if self.allowance:
            s += f" + {self.allowance}"
            allow = None if ev is None or ev.compare is None else np.asarray(ev.compare[3], float)
            if allow is not None and allow.ndim == 0 and not self.scope:
                s += f" (= {float(allow):.4g})"
        if self.why:
            s += f" ({self.why})"
        if self.also:
            s += f", and {self.also}"
        return s


@dataclass(frozen=True)
class Criterion:
    """An exact or structural rule (a SymPy identity, an mpmath/quadrature agreement, a fitted exponent's range),
    stated in words here and evaluated by the claim's computation (``Evidence.holds``)."""

    text_: str

    def holds(self, ev: Evidence) -> bool:
        return bool(ev.holds)

    def text(self, ev: Evidence | None = None) -> str:
        return self.text_


@dataclass
class Evidence:
    """What a claim's computation measured: resprop's ``theory`` value, the independent check ``simulation``
    (:func:`mc` / :func:`ref` / None), the numbers its rule compares (``compare`` for a :class:`Tolerance`,
    ``holds`` for a :class:`Criterion`), a ``note`` with measured numbers, the ``details`` arrays, and (when the
    quantity's text depends on the sizes) a ``quantity`` replacing the declared one."""

    theory: Any
    simulation: Any = None
    compare: tuple | None = None
    holds: bool = True
    note: str = ""
    details: dict | None = None
    quantity: str | None = None


@dataclass(frozen=True)
class Context:
    quick: bool = True
    figures_dir: Path | None = None


@dataclass(frozen=True)
class Claim:
    """One report row, declared once: the quantity, the paper's value or statement, the rule that decides it
    (:class:`Tolerance` or :class:`Criterion`), the computation ``compute(ctx) -> Evidence`` (resprop's theory
    value and the independent check) and the verdict expected of it.  A documented disagreement declares
    ``expected=DOCUMENTED``, its ``reason`` (the text docs/disagreements.md shows) and ``doc`` (the entry id
    there); its rule confirms resprop's side of the disagreement.  The report renders :meth:`evaluate`'s row and
    tests/test_claims.py asserts ``verdict == expected`` for the same objects."""

    theory: str
    id: str
    quantity: str
    paper: Any
    rule: Tolerance | Criterion
    compute: Callable[[Context], Evidence]
    expected: str = AGREES
    reason: str = ""
    doc: str = ""

    def __post_init__(self) -> None:
        if self.expected not in (AGREES, DOCUMENTED):
            raise ValueError(f"expected: {AGREES!r} or {DOCUMENTED!r}, got {self.expected!r}")
        if (self.expected == DOCUMENTED) != bool(self.reason):
            raise ValueError(f"reason: a documented disagreement (and only one) declares a reason ({self.key})")

    @property
    def key(self) -> str:
        return f"{self.theory}:{self.id}"

    @property
    def documented(self) -> bool:
        return self.expected == DOCUMENTED

    def evaluate(self, quick: bool = True, figures_dir: Path | None = None) -> dict:
        """The report row (the fields of this module's docstring plus ``claim``, the claim's key)."""
        ev = self.compute(Context(bool(quick), figures_dir))
        passed = self.rule.holds(ev)
        note = "; ".join(x for x in (self.reason, ev.note) if x)
        if not passed and self.documented:
            note = "expected documented disagreement no longer holds: " + note
        check = self.rule.text(ev)
        if self.documented:
            check = "documented: " + check
        r = row(ev.quantity or self.quantity, self.paper, ev.theory, ev.simulation, passed=passed,
                documented=self.documented, check=check, note=note, details=ev.details)
        return {"claim": self.key, **r}


def evaluate_claims(claims: list[Claim], quick: bool, step=lambda: None, figures_dir=None) -> list[dict]:
    """Rows of ``claims`` in order; an exception inside one claim is that claim's FAILS row."""
    import traceback

    rows = []
    for c in claims:
        try:
            rows.append(c.evaluate(quick, figures_dir))
        except Exception as exc:
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()[:300]
            rows.append({"claim": c.key, **row(c.quantity, c.paper, "exception", ref(tb, "traceback"), passed=False,
                                                check=c.rule.text(), note=tb)})
        step()
    return rows


def theory_claims(slug: str) -> list[Claim]:
    """The declared claims of a registered theory (its claims module's ``CLAIMS``), cross-theory ones last
    (``CROSS_CLAIMS`` of its ``cross_claims`` module); [] for a theory that returns rows without declaring claims."""
    from resprop import registry

    th = registry.theory(slug)
    out: list[Claim] = []
    for what, attr in (("claims", "CLAIMS"), ("cross_claims", "CROSS_CLAIMS")):
        ref_ = getattr(th, what)
        if ref_:
            out += list(getattr(registry.resolve(ref_.partition(":")[0]), attr, []))
    return out


def registered_claims() -> list[Claim]:
    """Every declared claim of every registered theory, in report order."""
    from resprop import registry

    return [c for slug in registry.slugs() for c in theory_claims(slug)]
