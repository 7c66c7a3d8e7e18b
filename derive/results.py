"""Named results: the unit that flows derive -> templates -> generated -> numeric -> LaTeX.

A derivation produces :class:`Result` objects.  Each carries a SymPy expression
(a closed form, or the right-hand side of a one-step recursion update), its
inputs with their domains, and the paper and equation it reproduces.  Codegen
turns a result into a vectorised NumPy function, the LaTeX export into a
labelled equation, and tests check it against mpmath and simulation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import sympy as sp


@dataclass(frozen=True)
class Input:
    """An argument of a generated function, with the domain it must lie in."""

    symbol: sp.Symbol
    domain: str  # human-readable, e.g. "(0, inf)", "[0, inf)", "real", "[-1, 1]"
    description: str

    @property
    def name(self) -> str:
        return self.symbol.name


@dataclass(frozen=True)
class Source:
    """Where a result comes from: paper key and equation label(s)."""

    paper: str
    equation: str
    note: str = ""

    def cite(self) -> str:
        text = f"{self.paper}, eq. {self.equation}"
        return f"{text} ({self.note})" if self.note else text


@dataclass(frozen=True)
class Result:
    """A named symbolic result.

    ``kind`` is ``"expression"`` for a closed form ``name = expr(inputs)`` and
    ``"recursion"`` for a one-step update ``state_{l} = expr(state_{l-1}, ...)``.
    ``lhs`` is the symbol printed on the left of the LaTeX equation.
    """

    name: str
    expr: sp.Expr
    inputs: tuple[Input, ...]
    source: Source
    description: str
    lhs: sp.Expr
    kind: str = "expression"

    def __post_init__(self) -> None:
        if self.kind not in ("expression", "recursion"):
            raise ValueError(f"kind must be 'expression' or 'recursion', got {self.kind!r}")
        free = {s.name for s in self.expr.free_symbols}
        declared = {i.name for i in self.inputs}
        missing = free - declared
        if missing:
            raise ValueError(f"result {self.name!r}: undeclared free symbols {sorted(missing)}")

    @property
    def argnames(self) -> list[str]:
        return [i.name for i in self.inputs]


@dataclass
class Derivation:
    """All results of one theory, in the order they are derived."""

    theory: str
    title: str
    paper: str
    results: list[Result] = field(default_factory=list)

    def add(self, result: Result) -> Result:
        if any(r.name == result.name for r in self.results):
            raise ValueError(f"duplicate result name {result.name!r} in {self.theory}")
        self.results.append(result)
        return result

    def adder(self, domains: Mapping[sp.Symbol, Input]):
        """``add(name, expr, order, eq, desc, lhs, kind="expression", note="")``: add a Result of this theory's
        paper at equation ``eq``, whose inputs are the domains of the symbols of ``order`` that occur in ``expr``
        (in that order); ``lhs`` is a symbol or its name."""
        def add(name, expr, order, eq, desc, lhs, kind="expression", note=""):
            inputs = tuple(domains[s] for s in order if s in expr.free_symbols)
            lhs = sp.Symbol(lhs) if isinstance(lhs, str) else lhs
            return self.add(Result(name, expr, inputs, Source(self.paper, eq, note), desc, lhs, kind))
        return add

    def __getitem__(self, name: str) -> Result:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def names(self) -> Sequence[str]:
        return [r.name for r in self.results]
