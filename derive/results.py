"""Named results: the unit that flows derive -> templates -> generated -> numeric -> LaTeX.

A derivation produces :class:`Result` objects.  Each carries a SymPy expression
(a closed form, or the right-hand side of a one-step recursion update), its
inputs with their domains, and the paper and equation it reproduces.  Codegen
turns a result into a vectorised NumPy function, the LaTeX export into a
labelled equation, and tests check it against mpmath and simulation.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy as sp

# The domain strings, their parser and the covariance round-off belong to the one validation layer
# (resprop.numeric.engine.validation, numpy only), which the generated kernels call at run time.
from resprop.domains import COVARIANCE_RTOL, Domain, parse_domain  # noqa: F401


@dataclass(frozen=True)
class Input:
    """An argument of a generated function, with the domain it must lie in (parsed at derive time)."""

    symbol: sp.Symbol
    domain: str  # human-readable, e.g. "(0, inf)", "[0, inf)", "real", "[-1, 1]"
    description: str
    parsed: Domain = field(init=False, repr=False, compare=False)  # set by __post_init__

    def __post_init__(self) -> None:
        parsed = parse_domain(self.domain)
        if parsed.kind == "covariance" and not self.domain.startswith(f"|{self.name}|"):
            raise ValueError(f"input {self.name!r}: covariance domain {self.domain!r} constrains another symbol")
        object.__setattr__(self, "parsed", parsed)

    @property
    def name(self) -> str:
        return self.symbol.name


@dataclass(frozen=True)
class Constraint:
    """A compound condition on several inputs that their intervals do not express (e.g. alpha^2 + lam^2 > 0);
    ``condition`` is a SymPy relational (or And/Or of them), ``text`` the message shown when it fails."""

    condition: sp.Basic
    text: str


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
    constraints: tuple[Constraint, ...] = ()
    #: one English sentence stating the result for a paper (LaTeX text, inline math in $...$)
    statement: str = ""
    #: per-result LaTeX of inputs read at another layer than declared, e.g. <phi phi> at K^(L) in the readout
    tex: tuple[tuple[sp.Symbol, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("expression", "recursion"):
            raise ValueError(f"kind must be 'expression' or 'recursion', got {self.kind!r}")
        free = {s.name for s in self.expr.free_symbols}
        declared = {i.name for i in self.inputs}
        missing = free - declared
        if missing:
            raise ValueError(f"result {self.name!r}: undeclared free symbols {sorted(missing)}")
        for i in self.inputs:
            if i.parsed.kind == "covariance" and not {i.parsed.var_a, i.parsed.var_b} <= declared:
                raise ValueError(f"result {self.name!r}: {i.name} is constrained by undeclared variances "
                                 f"{i.parsed.var_a}, {i.parsed.var_b}")
        for c in self.constraints:
            extra = {s.name for s in c.condition.free_symbols} - declared
            if extra:
                raise ValueError(f"result {self.name!r}: constraint {c.text!r} uses undeclared {sorted(extra)}")

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
    #: symbol -> its declaration (a :class:`derive.symbols.Parameter`): domain, LaTeX, meaning
    symbols: dict = field(default_factory=dict)
    #: fused depth recursions (:class:`derive.recursion.Recursion`), generated into ``<theory>_recursions.py``
    recursions: list = field(default_factory=list)

    def declare(self, params) -> dict[sp.Symbol, Input]:
        """Register parameter declarations; returns symbol -> Input (the ``domains`` of :meth:`adder`)."""
        from .symbols import by_symbol
        self.symbols = by_symbol([*self.symbols.values(), *params])
        return {p.symbol: p.input() for p in params}

    @property
    def parameters(self) -> tuple:
        """The declarations of this theory's inputs, in declaration order."""
        return tuple(self.symbols.values())

    def add(self, result: Result) -> Result:
        if any(r.name == result.name for r in self.results):
            raise ValueError(f"duplicate result name {result.name!r} in {self.theory}")
        self.results.append(result)
        return result

    def adder(self, domains: Mapping[sp.Symbol, Input] | None = None):
        """``add(name, expr, order, eq, desc, lhs, kind="expression", note="", constraints=(), statement="",
        tex={})``: add a Result of this theory's paper at equation ``eq``, whose inputs are the domains of the
        symbols of ``order`` that occur in ``expr`` (in that order; by default the declared :attr:`symbols`);
        ``lhs`` is a symbol or its LaTeX; ``constraints`` are compound :class:`Constraint`s; ``statement`` the
        one-sentence prose of the LaTeX export; ``tex`` LaTeX overrides of inputs for this result only."""
        if domains is None:
            domains = {s: p.input() for s, p in self.symbols.items()}

        def add(name, expr, order, eq, desc, lhs, kind="expression", note="", constraints=(), statement="",
                tex=None):
            inputs = tuple(domains[s] for s in order if s in expr.free_symbols)
            lhs = sp.Symbol(lhs) if isinstance(lhs, str) else lhs
            return self.add(Result(name, expr, inputs, Source(self.paper, eq, note), desc, lhs, kind,
                                   tuple(constraints), statement, tuple((tex or {}).items())))
        return add

    def state(self, statements: Mapping[str, str]) -> None:
        """Set the one-sentence prose statement of each named result (every result must get one)."""
        from dataclasses import replace
        unknown = set(statements) - set(self.names())
        missing = set(self.names()) - set(statements) - {r.name for r in self.results if r.statement}
        if unknown or missing:
            raise ValueError(f"{self.theory}: statements for unknown results {sorted(unknown)}, "
                             f"none for {sorted(missing)}")
        self.results = [replace(r, statement=statements[r.name]) if r.name in statements else r
                        for r in self.results]

    def __getitem__(self, name: str) -> Result:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def names(self) -> Sequence[str]:
        return [r.name for r in self.results]
